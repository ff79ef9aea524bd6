//! Speed of the sketch index: one `observe` = insert + candidate lookup + verification (+ the
//! removal of the URL's previous content), in a steady-state window of 100,000 URLs, on the
//! synthetic stream of `common/stream.rs`, each URL's content drawn for the URL's own site.
//! Reports pages per second (criterion's `elem/s`).
//!
//! ```text
//! cargo bench -p neardup-topology --bench index
//! NEARDUP_BENCH_EVENTS=M/events.jsonl cargo bench -p neardup-topology --bench index -- crawl
//! ```
//! With `NEARDUP_BENCH_EVENTS` (a `make_crawl.py` events file), the group `index_crawl` also
//! feeds the index a real crawl's signatures, every record in order (decoded and signed first,
//! untimed; the window moving with the records' event time), into a new index each iteration:
//! records per second, `observe` and `advance` included. `NEARDUP_BENCH_COPIES=K` feeds it the
//! crawl K times over in one window (`common::crawl::copies`: each copy on hosts of its own,
//! agreeing with the others only by chance), K times as many windowed pages: K = 47 makes the
//! medium crawl's 21,000 about a million.
//! `examples/index_bench.rs` prints the memory per windowed page and the fill rate.

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

mod common {
    pub mod crawl;
    pub mod events;
    pub mod stream;
}

use common::stream::{Stream, SITES};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use neardup_topology::near::{Fetch, NearConfig, NearIndex, Policy, Sketch};
use neardup_topology::{Config, Emitter};

const WINDOW: u64 = 100_000;
const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("index");
    group.throughput(Throughput::Elements(BATCH));
    for policy in [Policy::Neardup, Policy::AlgB, Policy::AlgC] {
        let mut stream = Stream::new(3);
        let urls: Vec<String> = (0..WINDOW)
            .map(|p| {
                format!(
                    "http://www.site{}.example/docs/page{p}.html",
                    p as usize % SITES
                )
            })
            .collect();
        let mut index = NearIndex::new(NearConfig {
            policy,
            ..NearConfig::default()
        });
        let mut out = Emitter::new();
        let mut n: u64 = 0;
        let feed = |index: &mut NearIndex, out: &mut Emitter, sketch: &Sketch, n: u64| {
            index.observe(
                &Fetch {
                    url: &urls[(n % WINDOW) as usize],
                    sketch: Some(sketch),
                    fetched_at_ms: n as i64,
                    crawl_id: None,
                },
                out,
            );
            out.drain().for_each(drop);
        };
        let site = |n: u64| (n % WINDOW) as usize % SITES;
        // Warm up to a full window.
        for _ in 0..WINDOW {
            let s = stream.next_on(site(n));
            feed(&mut index, &mut out, &s, n);
            n += 1;
        }
        // The fetch number the next batch starts at, as the batch set-up sees it.
        let mut next = n;
        // Fresh content for every batch, so each observe replaces a URL's content (a repeated
        // sketch would take the cheap unchanged-refetch path).
        group.bench_function(format!("observe_{}", policy.name()), |b| {
            b.iter_batched(
                || {
                    let batch = (next..next + BATCH)
                        .map(|m| stream.next_on(site(m)))
                        .collect::<Vec<Sketch>>();
                    next += BATCH;
                    batch
                },
                |batch| {
                    for s in &batch {
                        feed(&mut index, &mut out, s, n);
                        n += 1;
                    }
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// The index on a real crawl's signatures (`NEARDUP_BENCH_EVENTS`); nothing when it is unset.
fn crawl(c: &mut Criterion) {
    let Ok(file) = std::env::var("NEARDUP_BENCH_EVENTS") else {
        return;
    };
    let cfg = Config::default();
    let inputs = common::crawl::inputs(&cfg, &file)
        .unwrap_or_else(|e| panic!("NEARDUP_BENCH_EVENTS {file}: {e}"));
    let copies =
        match std::env::var("NEARDUP_BENCH_COPIES") {
            Ok(k) => k.parse().ok().filter(|&k: &u32| k > 0).unwrap_or_else(|| {
                panic!("NEARDUP_BENCH_COPIES={k}: give a whole number, 1 or more")
            }),
            Err(_) => 1,
        };
    let inputs = common::crawl::copies(&inputs, copies);
    let mut group = c.benchmark_group("index_crawl");
    group.throughput(Throughput::Elements(inputs.len() as u64));
    group.sample_size(10);
    group.bench_function("observe_neardup", |b| {
        b.iter_batched(
            || NearIndex::new(cfg.near.clone()),
            |mut index| {
                common::crawl::feed(&mut index, &inputs, &mut |_, _| {});
                // Dropped after the timing.
                index
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench, crawl);
criterion_main!(benches);
