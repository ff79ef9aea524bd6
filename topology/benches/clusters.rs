//! Speed of the incremental clusters: pair insertions per second, and the cost of a retraction
//! that splits a cluster of 10, 1,000 and 100,000 members in two halves (a chain cut in the
//! middle: the search explores the smaller half, so the cost grows with the affected cluster),
//! next to a retraction that detaches one page from a 100,000-member cluster (cost independent
//! of the cluster's size).
//!
//! ```text
//! cargo bench -p neardup-topology --bench clusters
//! ```

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use neardup_schemas::PairLevel;
use neardup_topology::clusters::Clusters;
use neardup_topology::Emitter;

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("http://host{}.example/docs/page{i}.html", i % 997))
        .collect()
}

fn chain(urls: &[String]) -> (Clusters, Emitter) {
    let mut c = Clusters::new(PairLevel::VerySimilar);
    let mut out = Emitter::new();
    for w in urls.windows(2) {
        c.add_pair(&w[0], &w[1], 0, &mut out);
    }
    out.drain().for_each(drop);
    // Freeing the setup's events leaves the allocator to consolidate its free lists on the next
    // allocations (milliseconds with glibc); pay that here, outside the measurement.
    let warm: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 64 + i % 512]).collect();
    drop(warm);
    (c, out)
}

fn bench(c: &mut Criterion) {
    // Insertions: 100,000 pairs forming groups of 2..=10 pages (chains inside each group, plus
    // one repeat of an existing pair per group), as the pair stage delivers them.
    let pages = urls(400_000);
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let (mut i, mut size) = (0usize, 2usize);
    while pairs.len() < 100_000 {
        for k in 1..size {
            pairs.push((i + k - 1, i + k));
        }
        pairs.push((i, i + 1));
        i += size;
        size = if size == 10 { 2 } else { size + 1 };
    }
    let mut group = c.benchmark_group("clusters");
    group.throughput(Throughput::Elements(pairs.len() as u64));
    group.bench_function("insert_pairs", |b| {
        b.iter_batched(
            || (Clusters::new(PairLevel::VerySimilar), Emitter::new()),
            |(mut cl, mut out)| {
                // The topology hands each input's events on and empties its emitter.
                for &(x, y) in &pairs {
                    cl.add_pair(&pages[x], &pages[y], 0, &mut out);
                    out.drain().for_each(drop);
                }
                (cl, out)
            },
            BatchSize::PerIteration,
        )
    });
    group.throughput(Throughput::Elements(1));
    for n in [10usize, 1_000, 100_000] {
        let members = urls(n);
        let mid = n / 2;
        group.bench_function(format!("split_in_half_{n}"), |b| {
            b.iter_batched(
                || chain(&members),
                |(mut cl, mut out)| {
                    cl.remove_pair(&members[mid - 1], &members[mid], &mut out);
                    (cl, out)
                },
                BatchSize::PerIteration,
            )
        });
    }
    let members = urls(100_000);
    group.bench_function("detach_end_of_100000", |b| {
        b.iter_batched(
            || chain(&members),
            |(mut cl, mut out)| {
                cl.remove_pair(&members[0], &members[1], &mut out);
                (cl, out)
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
