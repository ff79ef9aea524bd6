//! Figures users care about for the sketch index: pages/s for insert + candidate lookup +
//! verification, and bytes per windowed page, on a synthetic stream with realistic structure.
//!
//! ```text
//! cargo run --release -p neardup-topology --example index_bench -- [--pages N] [--reps R]
//! ```
//!
//! The stream: 2,000 sites; a third have no template, a third a light one (30 % of min-values
//! come from the site's template), a third a heavy one (90 %, like record databases); 25 % of
//! pages are copies of one of the last 10,000 pages on another site with 5 % of min-values and
//! a few simhash bits changed. Every page has its own URL, so the window grows to N pages (no
//! eviction) for the memory figure; the steady-state run then refetches URLs of a 200,000-page
//! window with new content, so every observe also removes a page.
//!
//! Memory is reported two ways: the index's own accounting (`NearIndex::memory_bytes`: page
//! records, tables, expiry heap, pairs), and the live heap bytes measured by a counting global
//! allocator (`stats_alloc`), which also includes the URL strings and map.
//! Throughput is the median of R runs; the machine is shared, so compare ratios within a run.

use neardup_topology::near::{Fetch, NearConfig, NearIndex, Sketch};
use neardup_topology::Emitter;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::Instant;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[path = "../benches/common/stream.rs"]
mod stream;
use stream::{Stream, SITES};

fn url(site: usize, page: u64) -> String {
    format!("http://www.site{site}.example/docs/section/page{page}.html")
}

/// Observes every input in order (fetch time = position); returns the pair events emitted.
fn feed(index: &mut NearIndex, inputs: &[(String, Sketch)]) -> usize {
    let mut out = Emitter::new();
    let mut events = 0;
    for (n, (u, s)) in inputs.iter().enumerate() {
        index.observe(
            &Fetch {
                url: u,
                sketch: Some(s),
                fetched_at_ms: n as i64,
                crawl_id: None,
            },
            &mut out,
        );
        events += out.drain().count();
    }
    events
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut pages: u64 = 1_000_000;
    let mut reps = 3;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--pages" => pages = args[i + 1].parse().expect("--pages N"),
            "--reps" => reps = args[i + 1].parse().expect("--reps R"),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }

    // 1. Fill: N distinct URLs, no eviction; memory per windowed page.
    let mut fill_rates = Vec::new();
    let mut report = String::new();
    for rep in 0..reps {
        let mut stream = Stream::new(7);
        let inputs: Vec<(String, Sketch)> = (0..pages)
            .map(|p| {
                let (site, s) = stream.next();
                (url(site, p), s)
            })
            .collect();
        let region = Region::new(GLOBAL);
        let mut index = NearIndex::new(NearConfig::default());
        let t0 = Instant::now();
        let pair_events = feed(&mut index, &inputs);
        let secs = t0.elapsed().as_secs_f64();
        fill_rates.push(pages as f64 / secs);
        if rep == 0 {
            let stats = region.change();
            // realloc growth and shrinkage are already in bytes_(de)allocated.
            let live = stats.bytes_allocated as i64 - stats.bytes_deallocated as i64;
            let (idx, urls) = index.memory_bytes();
            let st = index.stats();
            report = format!(
                "window {} pages, {} live pairs ({} pair events), {} candidates verified\n\
                 memory per page: index + signatures {:.0} B (accounted), URLs {:.0} B, \
                 live heap incl. URLs {:.0} B (counting allocator)\n",
                st.pages,
                st.live_pairs,
                pair_events,
                st.verified,
                idx as f64 / st.pages as f64,
                urls as f64 / st.pages as f64,
                live as f64 / st.pages as f64,
            );
        }
    }
    print!("{report}");
    println!(
        "fill {} pages: median {:.0} pages/s over {} runs ({:?})",
        pages,
        median(fill_rates.clone()),
        reps,
        fill_rates.iter().map(|r| r.round()).collect::<Vec<_>>()
    );

    // 2. Steady state: a 200,000-URL window, every fetch replaces a URL's content.
    let window = 200_000u64.min(pages);
    let mut rates = Vec::new();
    for _ in 0..reps {
        let mut stream = Stream::new(11);
        let inputs: Vec<(String, Sketch)> = (0..pages)
            .map(|p| {
                let (site, s) = stream.next();
                let _ = site;
                (url((p % window) as usize % SITES, p % window), s)
            })
            .collect();
        let mut index = NearIndex::new(NearConfig::default());
        let t0 = Instant::now();
        feed(&mut index, &inputs);
        rates.push(pages as f64 / t0.elapsed().as_secs_f64());
    }
    println!(
        "steady state, {window}-URL window, every fetch a refetch with new content: \
         median {:.0} pages/s ({:?})",
        median(rates.clone()),
        rates.iter().map(|r| r.round()).collect::<Vec<_>>()
    );
}
