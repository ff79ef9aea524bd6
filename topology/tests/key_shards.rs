//! The index partitioned by sketch key (issue 4 item 4): with its key tables split over N
//! shards, which it asks by request and answer, `near::NearIndex` emits exactly the pair events
//! of one shard, event for event and in order, and ends with the same counters and live pairs.
//! Both also equal an index whose shards answer with whole buckets, not only the newest pages
//! the lookup needs.
//!
//! The split as N instances would run it, too: a `Sequencer` turns every fetch into steps
//! first, each `KeyShardStage` then takes every step on its own (through JSON, as over a
//! topic), and only then does a follower index verify the steps with the shards' answers. Its
//! events, input by input, are those of the index fed the fetches directly.
//!
//! - A property test over random fetch sequences of pages on three sites that share templates
//!   and copy each other's documents, with small limits so that hot buckets are cut, boilerplate
//!   samples mature and the page budget evicts, under every policy.
//! - The small benchmark crawl's real signatures with the default configuration (needs
//!   `NEARDUP_BENCH_SMALL=DIR`, as `bench_jaccard.rs`; `tests/run-all.sh` sets it).

mod common;
#[path = "../benches/common/crawl.rs"]
mod crawl;
#[path = "../benches/common/events.rs"]
mod events;

use neardup_topology::near::{
    Fetch, KeyShardStage, NearConfig, NearIndex, NearStats, Policy, Sequencer, ShardAnswer, Sketch,
    Step,
};
use neardup_topology::{Config, Emit, Emitter};
use proptest::prelude::*;

const SITES: usize = 3;
const PATHS: usize = 12;
const DAY_MS: i64 = 86_400_000;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn url(u: usize) -> String {
    format!("http://site{}.example/doc/{}.html", u / PATHS, u % PATHS)
}

/// A page of site `site` showing document `doc` in variant `v`: the site's template holds the
/// first 24 min-values (6 bands), the document the rest, and variant `v` changes about `v` in
/// 10 of the document's positions (variant 0 of one document is an exact copy across sites, but
/// for the template).
fn sketch(site: usize, doc: u64, v: u64) -> Sketch {
    let mut mins = [0u8; 84];
    for (p, m) in mins.iter_mut().enumerate() {
        let p = p as u64;
        *m = if p < 24 {
            mix(1000 + site as u64 * 100 + p) as u8
        } else if mix(doc * 1_000 + v * 100 + p) % 10 < v {
            mix(7_000_000 + doc * 1_000 + v * 100 + p) as u8
        } else {
            mix(5_000_000 + doc * 100 + p) as u8
        };
    }
    let mut ss = [0u16; 6];
    for (s, tag) in ss.iter_mut().enumerate() {
        let h = mins[s * 14..s * 14 + 14]
            .iter()
            .fold(7u64, |h, &m| h.wrapping_mul(31).wrapping_add(u64::from(m)));
        *tag = mix(h) as u16;
    }
    let mut simhash = [0u64; 6];
    for (i, w) in simhash.iter_mut().enumerate() {
        *w = mix(9_000 + doc * 10 + i as u64);
    }
    simhash[0] ^= (1u64 << (4 * v)) - 1;
    simhash[5] ^= mix(site as u64) & 0xff;
    Sketch {
        mins,
        ss,
        simhash,
        checksum: mix(site as u64 * 1_000_000 + doc * 10 + v),
        text: mix(doc * 10 + v),
        title: 0,
        has_terms: true,
    }
}

/// Fetch URL `u` with document and variant (`None`: no content) `dt` after the previous one.
type Op = (usize, Option<(u64, u64)>, i64);

fn arb_op() -> impl Strategy<Value = Op> {
    (
        0..SITES * PATHS,
        prop_oneof![8 => (0..6u64, 0..4u64).prop_map(Some), 1 => Just(None)],
        prop_oneof![8 => 0..DAY_MS / 4, 1 => DAY_MS..4 * DAY_MS, 1 => -DAY_MS..0i64],
    )
}

/// One fetch: URL, signatures (`None`: no content), event time.
type Input = (String, Option<Sketch>, i64);

fn inputs(ops: &[Op]) -> Vec<Input> {
    let mut t = 100 * DAY_MS;
    ops.iter()
        .map(|&(u, content, dt)| {
            t += dt;
            (url(u), content.map(|(doc, v)| sketch(u / PATHS, doc, v)), t)
        })
        .collect()
}

fn fetch(input: &Input) -> Fetch<'_> {
    Fetch {
        url: &input.0,
        sketch: input.1.as_ref(),
        fetched_at_ms: input.2,
        crawl_id: Some("round-1"),
    }
}

/// Feeds `inputs` to `index` (the watermark the newest event time), returning the pair events
/// of each input.
fn feed_inputs(index: &mut NearIndex, inputs: &[Input]) -> Vec<Vec<Emit>> {
    let mut out = Emitter::new();
    let mut watermark = i64::MIN;
    inputs
        .iter()
        .map(|input| {
            watermark = watermark.max(input.2);
            out.set_at("2026-11-24T00:00:00Z");
            index.advance(watermark, Some("round-1"), &mut out);
            index.observe(&fetch(input), &mut out);
            out.drain().collect()
        })
        .collect()
}

fn feed(index: &mut NearIndex, ops: &[Op]) -> Vec<Vec<Emit>> {
    feed_inputs(index, &inputs(ops))
}

/// The same inputs through the split index: sequencer, then `shards` key shards each on its
/// own, then the follower; the pair events of each input and the follower's live pairs.
fn split_run(cfg: &NearConfig, shards: usize, inputs: &[Input]) -> (Vec<Vec<Emit>>, LivePairs) {
    let mut sequencer = Sequencer::new(cfg.clone());
    let mut watermark = i64::MIN;
    let steps: Vec<Vec<Step>> = inputs
        .iter()
        .map(|input| {
            watermark = watermark.max(input.2);
            let mut steps = sequencer.advance(watermark, Some("round-1"));
            steps.extend(sequencer.observe(&fetch(input)));
            steps
        })
        .collect();
    let answers: Vec<Vec<Option<ShardAnswer>>> = (0..shards)
        .map(|i| {
            let mut stage = KeyShardStage::new(cfg, i, shards);
            steps
                .iter()
                .flatten()
                .map(|step| {
                    let json = serde_json::to_string(step).unwrap();
                    let answer = stage.apply(&serde_json::from_str(&json).unwrap());
                    answer.map(|a| serde_json::from_value(serde_json::to_value(a).unwrap()))
                })
                .map(|a| a.map(Result::unwrap))
                .collect()
        })
        .collect();
    let mut follower = NearIndex::follower(cfg.clone());
    let (mut out, mut k) = (Emitter::new(), 0);
    let events = steps
        .iter()
        .map(|steps| {
            out.set_at("2026-11-24T00:00:00Z");
            for step in steps {
                let given: Vec<ShardAnswer> = answers.iter().filter_map(|a| a[k].clone()).collect();
                follower.follow(step, &given, &mut out);
                k += 1;
            }
            out.drain().collect()
        })
        .collect();
    let mut live = follower.live_pairs();
    live.sort();
    (events, live)
}

type LivePairs = Vec<(String, String, neardup_schemas::PairLevel)>;

fn outcome(index: &NearIndex) -> (NearStats, LivePairs) {
    let mut live = index.live_pairs();
    live.sort();
    (index.stats(), live)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn n_key_shards_emit_exactly_what_one_emits(
        ops in prop::collection::vec(arb_op(), 1..160),
        shards in 2..7usize,
        policy in prop_oneof![
            4 => Just(Policy::Neardup),
            1 => Just(Policy::AlgB),
            1 => Just(Policy::AlgC),
            1 => Just(Policy::Combined),
        ],
        max_pages in prop_oneof![3 => Just(1000usize), 1 => 4..20usize],
    ) {
        let cfg = NearConfig {
            policy,
            window_ms: 3 * DAY_MS,
            max_pages,
            max_bucket: 3,
            max_pairs_per_join: 3,
            boilerplate_sample: 4,
            boilerplate_min: 2,
            ..NearConfig::default()
        };
        let mut one = NearIndex::new(cfg.clone());
        let mut many = NearIndex::with_key_shards(cfg.clone(), shards);
        let cfg2 = cfg.clone();
        let mut whole = NearIndex::new(cfg).with_whole_buckets();
        let (a, b, w) = (feed(&mut one, &ops), feed(&mut many, &ops), feed(&mut whole, &ops));
        prop_assert_eq!((a.len(), b.len(), w.len()), (ops.len(), ops.len(), ops.len()));
        for (step, ((x, y), z)) in a.iter().zip(&b).zip(&w).enumerate() {
            prop_assert_eq!(x, y, "{} shards: events differ at step {}", shards, step);
            prop_assert_eq!(x, z, "whole buckets: events differ at step {}", step);
        }
        prop_assert_eq!(outcome(&one), outcome(&many));
        prop_assert_eq!(outcome(&one), outcome(&whole));
        let (split, live) = split_run(&cfg2, shards, &inputs(&ops));
        prop_assert_eq!(split.len(), ops.len());
        for (step, (x, y)) in a.iter().zip(&split).enumerate() {
            prop_assert_eq!(x, y, "split over {} shards: events differ at input {}", shards, step);
        }
        prop_assert_eq!(outcome(&one).1, live);
    }
}

/// The small benchmark crawl's index inputs, in stream order.
fn bench_inputs() -> Option<Vec<Input>> {
    let events = common::small_crawl()?.join("events.jsonl");
    Some(crawl::inputs(&Config::default(), events.to_str().unwrap()).unwrap())
}

#[test]
fn the_bench_crawl_gives_the_same_pairs_over_key_shards_with_whole_buckets_and_split() {
    let Some(inputs) = bench_inputs() else {
        return;
    };
    let run = |shards: usize, whole: bool| {
        let mut index = NearIndex::with_key_shards(Config::default().near, shards);
        if whole {
            index = index.with_whole_buckets();
        }
        let events = feed_inputs(&mut index, &inputs).concat();
        (events, outcome(&index))
    };
    let one = run(1, false);
    let stats = &one.1 .0;
    assert!(
        one.0.len() > 1000 && stats.template_bands_skipped > 0,
        "the crawl should exercise pairs and boilerplate: {} events, {stats:?}",
        one.0.len()
    );
    for (label, other) in [("5 shards", run(5, false)), ("whole buckets", run(1, true))] {
        assert_eq!(one.0.len(), other.0.len(), "{label}: event counts differ");
        if let Some(i) = (0..one.0.len()).find(|&i| one.0[i] != other.0[i]) {
            panic!(
                "{label}: event {i} differs:\n{}\n{}",
                String::from_utf8_lossy(&one.0[i].value),
                String::from_utf8_lossy(&other.0[i].value)
            );
        }
        assert_eq!(one.1, other.1, "{label}: counters or live pairs differ");
    }
    let (split, live) = split_run(&Config::default().near, 3, &inputs);
    let split = split.concat();
    assert_eq!(one.0.len(), split.len(), "split: event counts differ");
    assert!(one.0 == split, "split: events differ");
    assert_eq!(one.1 .1, live, "split: live pairs differ");
}
