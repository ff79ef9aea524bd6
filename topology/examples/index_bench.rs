//! Figures users care about for the sketch index: pages/s for insert + candidate lookup +
//! verification, and bytes per windowed page, on a synthetic stream with realistic structure.
//!
//! ```text
//! cargo run --release -p neardup-topology --example index_bench -- [--pages N] [--reps R]
//! cargo run --release -p neardup-topology --example index_bench -- --events EVENTS.jsonl [--reps R] [--copies K]
//! cargo run --release -p neardup-topology --example index_bench -- --split N [--pages N] [--reps R]
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
//! records, tables, expiry heap, pairs; then part by part, `NearIndex::memory_parts`), and the
//! live heap bytes measured by a counting global allocator (`stats_alloc`), which also includes
//! the URL strings and map.
//! Throughput is the median of R runs, in pages per second of this thread's CPU time (which
//! leaves out the time spent waiting for a core on a shared machine); compare ratios within a
//! run.
//!
//! With `--events`, the input is a crawl-event stream instead (`make_crawl.py`'s
//! `events.jsonl`): every record is decoded and signed first, untimed, as `neardup` does; then
//! the records' URLs, sketches and fetch times are fed to the index in order, with the window
//! advanced to each new fetch time, and that is timed. The memory figures are those of the
//! window at the end of the stream.
//!
//! `--copies K` makes that window K times as large with the same structure (`crawl::copies`:
//! each record fed K times in a row, each copy on hosts of its own and with its sketch XORed
//! with masks of its own, so copies agree only by chance): the medium crawl's 21,000 windowed
//! pages become about a million with K = 47.
//!
//! With `--split N`, the steady-state stream goes through the index split as N instances would
//! run it (`near::Sequencer`, N `near::KeyShardStage`s, a `NearIndex::follower`), and each
//! part's CPU time is measured on its own over the refetches, beside the one-piece index in the
//! same run: how fast each part would go as its own instance (steps and answers are handed over
//! in memory; their encoded size per refetch, as the stages send them, is printed too).

use cpu_time::ThreadTime;
use neardup_topology::near::{
    Fetch, KeyShardStage, NearConfig, NearIndex, Sequencer, ShardAnswer, Sketch, Step,
};
use neardup_topology::Config;
use neardup_topology::Emitter;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[path = "../benches/common/crawl.rs"]
mod crawl;
#[path = "../benches/common/events.rs"]
mod events;
#[path = "../benches/common/stream.rs"]
mod stream;
use stream::{Stream, SITES};

fn url(site: usize, page: u64) -> String {
    format!("http://www.site{site}.example/docs/section/page{page}.html")
}

/// Observes every input in order (fetch time = `start` + position); returns the pair events
/// emitted.
fn feed(
    index: &mut NearIndex,
    inputs: &[(String, Sketch)],
    start: i64,
    out: &mut Emitter,
) -> usize {
    let mut events = 0;
    for (n, (u, s)) in inputs.iter().enumerate() {
        index.observe(
            &Fetch {
                url: u,
                sketch: Some(s),
                fetched_at_ms: start + n as i64,
                crawl_id: None,
            },
            out,
        );
        events += out.drain().count();
    }
    events
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const USAGE: &str =
    "usage: index_bench [--pages N] [--reps R] [--split N] [--events EVENTS.jsonl [--copies K]]";

/// Says what is wrong with the command line, and how to use it, and exits 2.
fn usage_error(what: &str) -> ! {
    eprintln!("index_bench: {what}\n{USAGE}");
    std::process::exit(2)
}

/// The number after flag `name`, or a usage error.
fn number<T: std::str::FromStr>(name: &str, value: Option<&String>) -> T {
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| usage_error(&format!("{name} takes a number")))
}

fn main() {
    let mut pages: u64 = 1_000_000;
    let mut reps = 3;
    let mut events = None;
    let mut split = None;
    let mut copies = 1;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--pages" => pages = number("--pages", args.get(i + 1)),
            "--reps" => reps = number("--reps", args.get(i + 1)),
            "--events" => {
                events = Some(
                    args.get(i + 1)
                        .cloned()
                        .unwrap_or_else(|| usage_error("--events takes a file")),
                )
            }
            "--split" => split = Some(number("--split", args.get(i + 1))),
            "--copies" => copies = number("--copies", args.get(i + 1)),
            "--help" | "-h" => {
                println!("{USAGE}");
                return;
            }
            other => usage_error(&format!("unknown argument {other}")),
        }
        i += 2;
    }
    if let Some(file) = events {
        return crawl(&file, reps, copies);
    }
    if copies != 1 {
        usage_error("--copies goes with --events");
    }
    if let Some(n) = split {
        return split_parts(pages, n, reps);
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
        let t0 = ThreadTime::now();
        let pair_events = feed(&mut index, &inputs, 0, &mut Emitter::new());
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
            report += &parts(&index);
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

    // 2. Steady state: a window of 200,000 URLs (at most N) is filled, untimed; then N fetches
    //    are timed, each a refetch of one of those URLs (in turn) with new content of its site.
    let window = 200_000u64.min(pages);
    let mut rates = Vec::new();
    let mut steady = String::new();
    for _ in 0..reps {
        let inputs = steady_inputs(window, pages);
        let (fill, refetches) = inputs.split_at(window as usize);
        let mut index = NearIndex::new(NearConfig::default());
        let mut out = Emitter::new();
        feed(&mut index, fill, 0, &mut out);
        let t0 = ThreadTime::now();
        let before = index.stats();
        feed(&mut index, refetches, window as i64, &mut out);
        rates.push(pages as f64 / t0.elapsed().as_secs_f64());
        let after = index.stats();
        steady = format!(
            "steady state: {:.1} candidates verified per fetch, {:.2} pairs detected per fetch, \
             {:.1} hot buckets cut and {:.1} template bands skipped per fetch\n",
            (after.verified - before.verified) as f64 / pages as f64,
            (after.detected - before.detected) as f64 / pages as f64,
            (after.hot_buckets_cut - before.hot_buckets_cut) as f64 / pages as f64,
            (after.template_bands_skipped - before.template_bands_skipped) as f64 / pages as f64,
        );
    }
    print!("{steady}");
    println!(
        "steady state, {window}-URL window, every fetch a refetch with new content: \
         median {:.0} pages/s ({:?})",
        median(rates.clone()),
        rates.iter().map(|r| r.round()).collect::<Vec<_>>()
    );
}

/// [`NearIndex::memory_parts`] per windowed page, a line each.
fn parts(index: &NearIndex) -> String {
    let pages = index.stats().pages.max(1) as f64;
    let mut lines = String::new();
    for (part, bytes) in index.memory_parts() {
        lines += &format!("  {part:<20} {:>6.1} B per page\n", bytes as f64 / pages);
    }
    lines
}

/// The index fed with a crawl's real signatures (`--events`), `copies` times over.
fn crawl(file: &str, reps: usize, copies: u32) {
    let cfg = Config::default();
    let inputs = crawl::inputs(&cfg, file)
        .unwrap_or_else(|e| usage_error(&format!("cannot read --events {file}: {e}")));
    if copies == 0 {
        usage_error("--copies must be at least 1");
    }
    let inputs = crawl::copies(&inputs, copies);
    // Feeds every input to a new index; `after` sees the index after each input.
    let run = |after: &mut dyn FnMut(&NearIndex, &mut Emitter)| {
        let mut index = NearIndex::new(cfg.near.clone());
        crawl::feed(&mut index, &inputs, after);
        index
    };
    // One untimed run for the figures, so that the timed runs only feed the index.
    let (mut most, mut events) = (0, 0);
    let index = run(&mut |index, out| {
        most = most.max(index.stats().pages);
        events += out.drain().count();
    });
    let (idx, urls) = index.memory_bytes();
    let st = index.stats();
    let report = format!(
        "{} records ({} with content), window up to {} pages, {:.1} candidates verified per \
         record, {} pair events\n\
         at the end: window {} pages, {} live pairs; memory per page: index + signatures {:.0} B \
         (accounted), URLs {:.0} B\n{}",
        inputs.len(),
        inputs.iter().filter(|i| i.1.is_some()).count(),
        most,
        st.verified as f64 / inputs.len() as f64,
        events,
        st.pages,
        st.live_pairs,
        idx as f64 / st.pages.max(1) as f64,
        urls as f64 / st.pages.max(1) as f64,
        parts(&index),
    );
    let rates: Vec<f64> = (0..reps)
        .map(|_| {
            let t0 = ThreadTime::now();
            let index = run(&mut |_, _| {});
            let rate = inputs.len() as f64 / t0.elapsed().as_secs_f64();
            drop(index); // not timed
            rate
        })
        .collect();
    print!("{report}");
    println!(
        "index on the crawl's signatures: median {:.0} records/s over {} runs ({:?})",
        median(rates.clone()),
        reps,
        rates.iter().map(|r| r.round()).collect::<Vec<_>>()
    );
}

/// The steady-state stream: `window` URLs filled, then `pages` refetches of them in turn, each
/// with new content of the URL's site.
fn steady_inputs(window: u64, pages: u64) -> Vec<(String, Sketch)> {
    let mut stream = Stream::new(11);
    (0..window + pages)
        .map(|p| {
            let u = p % window;
            let site = u as usize % SITES;
            (url(site, u), stream.next_on(site))
        })
        .collect()
}

/// The steady state through the split index, each part timed on its own.
fn split_parts(pages: u64, shards: usize, reps: usize) {
    let window = 200_000u64.min(pages);
    let (mut one, mut seq, mut shard, mut follow) = (vec![], vec![], vec![], vec![]);
    // Bytes per refetch of the steps and of the shards' answers, postcard-encoded as the shard
    // and verify stages send them (each shard stage forwards the steps with the answers so far).
    let (mut step_bytes, mut answer_bytes) = (0.0, 0.0);
    for _ in 0..reps {
        let inputs = steady_inputs(window, pages);
        let (fill, refetches) = inputs.split_at(window as usize);
        let cfg = NearConfig::default();
        let mut index = NearIndex::new(cfg.clone());
        let mut out = Emitter::new();
        feed(&mut index, fill, 0, &mut out);
        let t0 = ThreadTime::now();
        feed(&mut index, refetches, window as i64, &mut out);
        one.push(pages as f64 / t0.elapsed().as_secs_f64());
        drop(index);

        let mut sequencer = Sequencer::new(cfg.clone());
        let mut stages: Vec<KeyShardStage> = (0..shards)
            .map(|i| KeyShardStage::new(&cfg, i, shards))
            .collect();
        let mut follower = NearIndex::follower(cfg.clone());
        // Returns the CPU seconds of the sequencer, of each shard and of the follower.
        let mut run = |inputs: &[(String, Sketch)], start: i64| {
            let t0 = ThreadTime::now();
            let steps: Vec<Step> = inputs
                .iter()
                .enumerate()
                .flat_map(|(n, (u, s))| {
                    sequencer.observe(&Fetch {
                        url: u,
                        sketch: Some(s),
                        fetched_at_ms: start + n as i64,
                        crawl_id: None,
                    })
                })
                .collect();
            let t_seq = t0.elapsed().as_secs_f64();
            let mut given: Vec<Vec<ShardAnswer>> = steps.iter().map(|_| Vec::new()).collect();
            let mut t_shards = Vec::new();
            for stage in &mut stages {
                let t0 = ThreadTime::now();
                let answers: Vec<Option<ShardAnswer>> =
                    steps.iter().map(|step| stage.apply(step)).collect();
                t_shards.push(t0.elapsed().as_secs_f64());
                for (g, a) in given.iter_mut().zip(answers) {
                    g.extend(a);
                }
            }
            let t0 = ThreadTime::now();
            for (step, answers) in steps.iter().zip(&given) {
                follower.follow(step, answers, &mut out);
                out.drain().for_each(drop);
            }
            let t_follow = t0.elapsed().as_secs_f64();
            let steps_size: f64 = steps
                .iter()
                .map(|st| postcard::to_stdvec(st).expect("a step serializes").len() as f64)
                .sum();
            let answers_size: f64 = given
                .iter()
                .map(|a| postcard::to_stdvec(a).expect("answers serialize").len() as f64)
                .sum();
            (
                t_seq,
                t_shards,
                t_follow,
                steps_size / inputs.len() as f64,
                answers_size / inputs.len() as f64,
            )
        };
        run(fill, 0);
        let (t_seq, t_shards, t_follow, sb, ab) = run(refetches, window as i64);
        (step_bytes, answer_bytes) = (sb, ab);
        let rate = |secs: f64| pages as f64 / secs;
        seq.push(rate(t_seq));
        shard.push(rate(t_shards.iter().copied().fold(0.0, f64::max)));
        follow.push(rate(t_follow));
    }
    let show = |v: &Vec<f64>| v.iter().map(|r| r.round()).collect::<Vec<_>>();
    println!(
        "steady state, {window}-URL window, {pages} refetches, pages/s of each part's CPU time \
         (medians of {reps}):"
    );
    let parts = [
        ("one-piece index".to_owned(), &one),
        ("sequencer".to_owned(), &seq),
        (format!("slowest of {shards} key shards"), &shard),
        ("follower (verification)".to_owned(), &follow),
    ];
    for (name, rates) in parts {
        println!(
            "  {name:<26} {:>9.0} {:?}",
            median(rates.clone()),
            show(rates)
        );
    }
    println!(
        "  per refetch, postcard-encoded: steps {step_bytes:.0} B, all shards' answers {answer_bytes:.0} B"
    );
}
