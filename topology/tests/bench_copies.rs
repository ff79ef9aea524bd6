//! The benchmarks' larger windows (`benches/common/crawl.rs`, `copies`: a crawl K times over in
//! one window, for the index's speed and memory at a million pages on a real crawl's
//! signatures) keep each copy's structure and join nothing across copies: on the small
//! benchmark crawl, each of three copies, its URLs named back, has exactly the original's pair
//! events in the original's order, and no pair joins two copies.
//!
//! Needs the small benchmark crawl (`NEARDUP_BENCH_SMALL=DIR`, as `key_shards.rs`;
//! `tests/run-all.sh` sets it).

mod common;
#[path = "../benches/common/crawl.rs"]
mod crawl;
#[path = "../benches/common/events.rs"]
mod events;

use neardup_schemas::{OutputKind, PairEvent};
use neardup_topology::near::NearIndex;
use neardup_topology::Config;

/// The pair events of the inputs fed in order, without their event ids (which hash the URLs).
fn pairs(inputs: &[crawl::Input]) -> Vec<PairEvent> {
    let mut pairs = Vec::new();
    let mut index = NearIndex::new(Config::default().near);
    crawl::feed(&mut index, inputs, &mut |_, out| {
        for emit in out.drain().filter(|e| e.kind == OutputKind::Pairs) {
            let mut pair: PairEvent = serde_json::from_slice(&emit.value).unwrap();
            pair.event_id.clear();
            pairs.push(pair);
        }
    });
    pairs
}

/// The copy a URL belongs to (0: the original) and its original URL.
fn copy_of(url: &str) -> (u32, String) {
    for c in 1..10 {
        let tag = format!("-c{c}.");
        if url.contains(&tag) {
            return (c, url.replacen(&tag, ".", 1));
        }
    }
    (0, url.to_owned())
}

#[test]
fn each_copy_of_the_bench_crawl_pairs_as_the_crawl_does_and_no_pair_joins_two_copies() {
    let Some(dir) = common::small_crawl() else {
        return;
    };
    let events = dir.join("events.jsonl");
    let inputs = crawl::inputs(&Config::default(), events.to_str().unwrap()).unwrap();
    let original = pairs(&inputs);
    assert!(original.len() > 500, "{} pair events", original.len());

    let copied = crawl::copies(&inputs, 3);
    assert_eq!(copied.len(), 3 * inputs.len());
    let mut by_copy = vec![Vec::new(); 3];
    for mut pair in pairs(&copied) {
        let ((ca, a), (cb, b)) = (copy_of(&pair.a), copy_of(&pair.b));
        assert_eq!(ca, cb, "a pair across copies: {} and {}", pair.a, pair.b);
        (pair.a, pair.b) = (a, b);
        by_copy[ca as usize].push(pair);
    }
    for (c, pairs) in by_copy.iter().enumerate() {
        assert_eq!(
            pairs.len(),
            original.len(),
            "copy {c}: pair event counts differ"
        );
        if let Some(i) = (0..pairs.len()).find(|&i| pairs[i] != original[i]) {
            panic!(
                "copy {c}: pair event {i} differs:\n{:?}\n{:?}",
                pairs[i], original[i]
            );
        }
    }
}
