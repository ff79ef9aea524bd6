//! The split topology's sign and index stages, joined by their internal record, give exactly the
//! outputs of the all-in-one topology: every input record is prepared and turned into the sign
//! stage's output (an internal record, or the dead letter of a record that cannot be decoded),
//! the internal records are read back and applied by a second topology, and the dead letters
//! and that topology's outputs are compared, per output kind and in order, with one topology
//! processing the input directly. Every stateful part is on.

use neardup_schemas::{OutputKind, Source};
use neardup_topology::{
    Config, Emit, InternalReader, InternalRecordError, Preparer, Role, SignOutput, SignStage,
    Topology,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

mod common;
use common::{everything_on, exact_copies_stream, mixed_stream, revalidated_stream};

fn by_kind(out: &[Emit]) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
    let mut m: BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for e in out {
        m.entry(e.kind)
            .or_default()
            .push((e.key.clone(), e.value.clone()));
    }
    m
}

/// The same outputs per kind, in the same order.
fn assert_same_outputs(expected: &[Emit], got: &[Emit]) {
    let (want, got) = (by_kind(expected), by_kind(got));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    for (kind, w) in &want {
        assert!(
            got[kind] == *w,
            "{kind:?} outputs differ between split and all-in-one ({} vs {})",
            got[kind].len(),
            w.len()
        );
    }
}

/// With every part on, the sign stage's record carries every signature a part reads; with the
/// defaults, it leaves out those no part reads (out-links, paragraphs, the random projection,
/// chunks: they are in the signature event's content already).
#[test]
fn sign_then_index_gives_the_all_in_one_outputs() {
    sign_then_index(everything_on());
    sign_then_index(Config::default());
}

fn sign_then_index(cfg: Config) {
    let lines = mixed_stream();
    let src = |i: usize| Source::Kafka {
        topic: "crawl.pages".into(),
        partition: 0,
        offset: i as i64,
    };

    let mut whole = Topology::new(cfg.clone());
    let mut expected = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        whole.process(line, &src(i), &mut expected);
    }

    let mut preparer = Preparer::new(&cfg);
    let sign = SignStage::new(&cfg);
    // The sign stage's own topology only counts what it signs.
    let mut signer = Topology::new(cfg.clone());
    let mut index = Topology::new(cfg.clone());
    let reader = InternalReader::new(&cfg);
    let mut got = Vec::new();
    let (mut internal, mut dead) = (0, 0);
    for (i, line) in lines.iter().enumerate() {
        match sign.output(preparer.prepare(line), line, &src(i), &mut signer) {
            SignOutput::DeadLetter(e) => {
                assert_eq!(e.kind, OutputKind::DeadLetter);
                dead += 1;
                got.push(e);
            }
            SignOutput::Internal { key, value } => {
                internal += 1;
                assert!(line.windows(key.len()).any(|w| w == key.as_bytes()));
                let prepared = reader.signed(&value).expect("reads back");
                index.apply(prepared, &[], &src(usize::MAX), &mut got);
            }
        }
    }
    assert!(
        dead >= 2 && internal > 100,
        "{dead} dead letters, {internal} pages"
    );
    let counted = signer.stats();
    assert_eq!(counted.records, lines.len() as u64);
    assert_eq!(counted.dead_letter_total(), dead);
    assert_eq!(
        counted.pages + counted.no_content + counted.inconclusive,
        internal
    );
    assert_eq!(counted.records, whole.stats().records);
    assert_eq!(counted.pages, whole.stats().pages);
    assert_eq!(counted.inconclusive, 4, "the stream's 304s and 503");
    assert_eq!(counted.inconclusive, whole.stats().inconclusive);
    assert_same_outputs(&expected, &got);
}

/// Everything that can run split on, with a page budget small enough that pages are evicted,
/// and a cap on out-links that keeps two of a page's three: every stage reads the kept ones.
fn evicting_split_config() -> Config {
    let mut cfg = everything_on();
    cfg.hm_veto = None;
    cfg.track_evolution = false;
    cfg.near.max_pages = 40;
    cfg.signer.caps.link_bytes = 100;
    cfg
}

/// Record `i` of a stream read from two input partitions.
fn two_partitions(i: usize) -> Source {
    Source::Kafka {
        topic: "crawl.pages".into(),
        partition: (i % 2) as i32,
        offset: i as i64,
    }
}

/// `t` restarted from a checkpoint of its state now.
fn restored(cfg: &Config, t: &Topology) -> Topology {
    let ck = neardup_topology::checkpoint::write(t, "t", &BTreeMap::new());
    neardup_topology::checkpoint::restore(cfg.clone(), "t", &ck)
        .expect("restores")
        .0
}

/// The sign stage and then the index stage on one input line: the index stage's record for the
/// stage after it, or `None` for a line the sign stage turned into a dead letter (in `out`).
fn sign_and_index(
    (preparer, sign, signer): (&mut Preparer, &SignStage, &mut Topology),
    index: &mut Topology,
    reader: &InternalReader,
    (line, src): (&[u8], &Source),
    out: &mut Vec<Emit>,
) -> Option<Vec<u8>> {
    let value = match sign.output(preparer.prepare(line), line, src, signer) {
        SignOutput::DeadLetter(e) => {
            out.push(e);
            return None;
        }
        SignOutput::Internal { value, .. } => value,
    };
    index.apply(reader.signed(&value).expect("reads back"), &[], src, out);
    Some(index.take_indexed().expect("a record for the next stage").1)
}

/// The sign, index and cluster stages of one configuration, and the reader of their internal
/// records.
struct ThreeStages {
    preparer: Preparer,
    sign: SignStage,
    signer: Topology,
    index: Topology,
    cluster: Topology,
    reader: InternalReader,
}

impl ThreeStages {
    fn new(cfg: &Config) -> Self {
        ThreeStages {
            preparer: Preparer::new(cfg),
            sign: SignStage::new(cfg),
            signer: Topology::new(cfg.clone()),
            index: Topology::with_role(cfg.clone(), Role::Index).expect("index"),
            cluster: Topology::with_role(cfg.clone(), Role::Cluster).expect("cluster"),
            reader: InternalReader::new(cfg),
        }
    }
}

/// One topology processing `lines` from [`two_partitions`], and its outputs.
fn all_in_one(cfg: &Config, lines: &[Vec<u8>]) -> (Topology, Vec<Emit>) {
    let mut whole = Topology::new(cfg.clone());
    let mut expected = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        whole.process(line, &two_partitions(i), &mut expected);
    }
    assert!(whole.near_stats().evicted_by_budget > 0);
    (whole, expected)
}

/// Ends the all-in-one run and the split one's cluster stage (the last collections epoch) and
/// checks that their outputs are the same; returns the all-in-one outputs by kind.
fn finish_and_compare(
    whole: &mut Topology,
    mut expected: Vec<Emit>,
    cluster: &mut Topology,
    mut got: Vec<Emit>,
) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
    whole.finish(&mut expected);
    cluster.finish(&mut got);
    assert_same_outputs(&expected, &got);
    by_kind(&expected)
}

/// sign -> index -> cluster: the index stage forwards each page's record to the cluster stage,
/// and the three give the all-in-one outputs, kind by kind and in order, with every part that
/// can run split on (collections, in-link ranking, mirrors) and a page budget small enough that
/// pages are evicted (so the cluster stage follows the index's window). Records come from two
/// input partitions, so the watermark waits for the slower one in both runs. Both the sign and
/// the index stage send some records again (at least once), and the next stage applies each
/// once.
#[test]
fn sign_index_and_cluster_give_the_all_in_one_outputs() {
    let cfg = evicting_split_config();
    let (lines, src) = (mixed_stream(), two_partitions);
    let (mut whole, expected) = all_in_one(&cfg, &lines);

    let ThreeStages {
        mut preparer,
        sign,
        mut signer,
        mut index,
        mut cluster,
        reader,
    } = ThreeStages::new(&cfg);
    let mut got = Vec::new();
    let mut forwarded = 0;
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut signed: Vec<Vec<u8>> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match sign.output(preparer.prepare(line), line, &src(i), &mut signer) {
            SignOutput::DeadLetter(e) => got.push(e),
            SignOutput::Internal { value, .. } => {
                let prepared = reader.signed(&value).expect("reads back");
                index.apply(prepared, &[], &src(i), &mut got);
                let (key, record) = index
                    .take_indexed()
                    .expect("a record for the cluster stage");
                assert!(line.windows(key.len()).any(|w| w == key.as_bytes()));
                forwarded += 1;
                sent.push(record.clone());
                let record = reader.indexed(&record).expect("reads back");
                cluster.apply_indexed(record, &mut got);
                assert!(
                    cluster.take_indexed().is_none(),
                    "without a mirror stage, nothing to forward"
                );
                if forwarded % 40 == 0 {
                    // The index stage restarted and sends its last records again (at least
                    // once): the cluster stage recognises and skips them.
                    for again in &sent[sent.len() - 7..] {
                        let before = got.len();
                        cluster.apply_indexed(reader.indexed(again).unwrap(), &mut got);
                        assert_eq!(got.len(), before, "a repeat has no outputs");
                    }
                }
                signed.push(value);
                if signed.len() % 50 == 0 {
                    // A sign stage instance restarted, or its partition moved to another one,
                    // and the last records are sent again: the index stage applies each once.
                    for again in &signed[signed.len() - 5..] {
                        let before = got.len();
                        index.apply(reader.signed(again).unwrap(), &[], &src(i), &mut got);
                        assert_eq!(got.len(), before, "a repeat has no outputs");
                        assert!(index.take_indexed().is_none(), "nor a record to forward");
                    }
                }
            }
        }
    }
    assert!(forwarded > 100);
    assert_eq!(cluster.stats().repeats_skipped, 7 * (forwarded / 40) as u64);
    assert_eq!(
        index.stats().repeats_skipped,
        5 * (signed.len() / 50) as u64
    );
    let want = finish_and_compare(&mut whole, expected, &mut cluster, got);
    for kind in [
        OutputKind::Clusters,
        OutputKind::Mirrors,
        OutputKind::Collections,
        OutputKind::Recrawl,
    ] {
        assert!(
            want.get(&kind).is_some_and(|w| !w.is_empty()),
            "{kind:?}: the stream exercises it"
        );
    }
    let capped = want[&OutputKind::Signatures]
        .iter()
        .filter(|(_, v)| v.windows(17).any(|w| w == b"out_links_omitted"))
        .count();
    assert!(capped > 100, "the cap on out-links bites: {capped}");
}

/// Pages the index stage's page budget evicts leave the cluster stage's exact groups and in-link
/// counts as they leave the all-in-one's: the index stage's record names them, and the outputs
/// (exact pairs retracted, clusters dissolved) are the all-in-one's, in order.
#[test]
fn budget_evictions_reach_the_cluster_stage() {
    let mut cfg = evicting_split_config();
    cfg.near.max_pages = 8;
    let lines = exact_copies_stream(30);
    let (mut whole, expected) = all_in_one(&cfg, &lines);
    let mut s = ThreeStages::new(&cfg);
    let mut got = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let stages = (&mut s.preparer, &s.sign, &mut s.signer);
        let src = two_partitions(i);
        let record = sign_and_index(stages, &mut s.index, &s.reader, (line, &src), &mut got)
            .expect("no dead letters");
        s.cluster
            .apply_indexed(s.reader.indexed(&record).expect("reads back"), &mut got);
        let kept = (s.index.kept_urls(), s.cluster.kept_urls());
        assert!(kept.0.window <= 8 && kept.0.history <= 8, "{kept:?}");
        assert!(kept.1.exact <= 8 && kept.1.inlinks <= 8, "{kept:?}");
    }
    assert_eq!(s.cluster.exact_stats().evicted, whole.exact_stats().evicted);
    assert_eq!(whole.exact_stats().evicted, 60 - 8);
    let want = finish_and_compare(&mut whole, expected, &mut s.cluster, got);
    let retracted = want[&OutputKind::Pairs]
        .iter()
        .filter(|(_, v)| String::from_utf8_lossy(v).contains("\"retracted\""))
        .count();
    assert_eq!(
        retracted,
        30 - 4,
        "every exact pair but the 4 newest is retracted"
    );
}

/// sign -> index -> cluster -> mirror (`mirror_stage`): the cluster stage leaves mirrors and
/// collections to the mirror stage and forwards each page's record with the moves it caused
/// among the clusters; the four give the all-in-one outputs, kind by kind and in order, with
/// collections, in-link ranking and evictions on, while the cluster stage publishes no mirrors
/// or collections and the mirror stage nothing else. The cluster stage sends records again
/// (the mirror stage skips them), and both stages restart from checkpoints mid-stream.
#[test]
fn a_mirror_stage_after_the_cluster_stage_gives_the_all_in_one_outputs() {
    let cfg = Config {
        mirror_stage: true,
        ..evicting_split_config()
    };
    let (lines, src) = (mixed_stream(), two_partitions);
    let (mut whole, mut expected) = all_in_one(&cfg, &lines);

    let mut preparer = Preparer::new(&cfg);
    let sign = SignStage::new(&cfg);
    let mut signer = Topology::new(cfg.clone());
    let role = |r| Topology::with_role(cfg.clone(), r).expect("a stage");
    let (mut index, mut cluster, mut mirror) =
        (role(Role::Index), role(Role::Cluster), role(Role::Mirror));
    let reader = InternalReader::new(&cfg);
    // Each kind comes from one stage, so concatenating their outputs keeps each kind's order.
    let (mut before_mirror, mut from_mirror) = (Vec::new(), Vec::new());
    let mut clustered: Vec<Vec<u8>> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(record) = sign_and_index(
            (&mut preparer, &sign, &mut signer),
            &mut index,
            &reader,
            (line, &src(i)),
            &mut before_mirror,
        ) else {
            continue;
        };
        cluster.apply_indexed(
            reader.indexed(&record).expect("reads back"),
            &mut before_mirror,
        );
        let (key, record) = cluster
            .take_indexed()
            .expect("a record for the mirror stage");
        assert!(line.windows(key.len()).any(|w| w == key.as_bytes()));
        clustered.push(record.clone());
        mirror.apply_clustered(
            reader.clustered(&record).expect("reads back"),
            &mut from_mirror,
        );
        if clustered.len() % 40 == 0 {
            // The cluster stage restarted and sends its last records again.
            for again in &clustered[clustered.len() - 6..] {
                let before = from_mirror.len();
                mirror.apply_clustered(reader.clustered(again).unwrap(), &mut from_mirror);
                assert_eq!(from_mirror.len(), before, "a repeat has no outputs");
            }
        }
        if clustered.len() == 90 {
            cluster = restored(&cfg, &cluster);
            mirror = restored(&cfg, &mirror);
        }
    }
    assert!(clustered.len() > 100);
    assert_eq!(
        mirror.stats().repeats_skipped,
        6 * (clustered.len() / 40) as u64
    );
    // A record of the index stage is not one of the cluster stage, and the reverse.
    assert!(reader.clustered(&index_record(&cfg, &lines)).is_err());
    assert!(reader.indexed(&clustered[0]).is_err());
    let (mut cluster_end, mut mirror_end) = (Vec::new(), Vec::new());
    cluster.finish(&mut cluster_end);
    mirror.finish(&mut mirror_end);
    assert!(cluster_end.is_empty(), "the cluster stage closes no epoch");
    from_mirror.extend(mirror_end);
    let mirror_kinds = [OutputKind::Mirrors, OutputKind::Collections];
    for e in &before_mirror {
        assert!(
            !mirror_kinds.contains(&e.kind),
            "{:?} before the mirror stage",
            e.kind
        );
    }
    for e in &from_mirror {
        assert!(
            mirror_kinds.contains(&e.kind),
            "{:?} from the mirror stage",
            e.kind
        );
    }
    whole.finish(&mut expected);
    before_mirror.extend(from_mirror);
    assert_same_outputs(&expected, &before_mirror);
    let want = by_kind(&expected);
    for kind in mirror_kinds {
        assert!(
            want.get(&kind).is_some_and(|w| !w.is_empty()),
            "{kind:?}: the stream exercises it"
        );
    }
}

/// The index stage's record of the first page of `lines`.
fn index_record(cfg: &Config, lines: &[Vec<u8>]) -> Vec<u8> {
    let mut index = Topology::with_role(cfg.clone(), Role::Index).expect("index");
    let reader = InternalReader::new(cfg);
    let SignOutput::Internal { value, .. } = SignStage::new(cfg).output(
        Preparer::new(cfg).prepare(&lines[0]),
        &lines[0],
        &two_partitions(0),
        &mut Topology::new(cfg.clone()),
    ) else {
        panic!("the first line is a page");
    };
    index.apply(
        reader.signed(&value).unwrap(),
        &[],
        &two_partitions(0),
        &mut Vec::new(),
    );
    index.take_indexed().expect("a record").1
}

/// The index stage split by key: the index stage keeps the window and sends each page's steps
/// to key shard 0, each shard adds its answers and passes the record to the next, and the
/// verify stage verifies them and feeds the cluster stage. With three shards over two instances
/// (one holding shards 0 and 2, as an instance owning two partitions of the steps topic does),
/// the outputs are the all-in-one outputs, kind by kind and in order, with pages evicted by the
/// budget, records sent again (skipped by the shards and the verify stage) and every part
/// restored from a checkpoint mid-stream.
#[test]
fn an_index_split_over_key_shards_gives_the_all_in_one_outputs() {
    let cfg = Config {
        key_shards: 3,
        ..evicting_split_config()
    };
    let (lines, src) = (mixed_stream(), two_partitions);
    let (mut whole, expected) = all_in_one(&cfg, &lines);

    let mut preparer = Preparer::new(&cfg);
    let sign = SignStage::new(&cfg);
    let mut signer = Topology::new(cfg.clone());
    let role = |r| Topology::with_role(cfg.clone(), r).expect("a stage");
    let mut index = role(Role::Index);
    // Shards 0 and 2 in one instance, shard 1 in another.
    let mut shards = [role(Role::Shard), role(Role::Shard)];
    let instance = |p: i32| usize::from(p == 1);
    let mut verify = role(Role::Verify);
    let mut cluster = role(Role::Cluster);
    let reader = InternalReader::new(&cfg);
    let mut got = Vec::new();
    let (mut sequenced, mut verified): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    for (i, line) in lines.iter().enumerate() {
        let Some(mut record) = sign_and_index(
            (&mut preparer, &sign, &mut signer),
            &mut index,
            &reader,
            (line, &src(i)),
            &mut got,
        ) else {
            continue;
        };
        sequenced.push(record.clone());
        for p in 0..3 {
            let before = got.len();
            let shard = &mut shards[instance(p)];
            let read = reader.sharded(&record).expect("reads back");
            shard.apply_sharded(read, p, &mut got).expect("applies");
            assert_eq!(got.len(), before, "a key shard publishes nothing");
            record = shard.take_indexed().expect("a record for the next stage").1;
        }
        verified.push(record.clone());
        let read = reader.sharded(&record).expect("reads back");
        verify.apply_sharded(read, 0, &mut got).expect("verifies");
        let (_, record) = verify
            .take_indexed()
            .expect("a record for the cluster stage");
        cluster.apply_indexed(reader.indexed(&record).expect("reads back"), &mut got);
        if sequenced.len() % 30 == 0 {
            // The index stage, then the last shard, restarted and send their last records again:
            // the next stage applies each once.
            for again in &sequenced[sequenced.len() - 4..] {
                let read = reader.sharded(again).unwrap();
                shards[0].apply_sharded(read, 0, &mut got).unwrap();
                assert!(
                    shards[0].take_indexed().is_none(),
                    "a repeat is not passed on"
                );
            }
            for again in &verified[verified.len() - 3..] {
                let before = got.len();
                verify
                    .apply_sharded(reader.sharded(again).unwrap(), 0, &mut got)
                    .unwrap();
                assert_eq!(got.len(), before, "a repeat has no outputs");
                assert!(verify.take_indexed().is_none(), "nor a record to forward");
            }
        }
        if sequenced.len() == 70 {
            // Every part restarts from a checkpoint.
            let restore = |t: &Topology| restored(&cfg, t);
            index = restore(&index);
            shards = [restore(&shards[0]), restore(&shards[1])];
            verify = restore(&verify);
        }
    }
    assert!(sequenced.len() > 100);
    assert_eq!(
        shards[0].stats().repeats_skipped,
        4 * (sequenced.len() / 30) as u64
    );
    assert_eq!(
        verify.stats().repeats_skipped,
        3 * (sequenced.len() / 30) as u64
    );
    assert_eq!(index.near_stats().pages, whole.near_stats().pages);
    assert_eq!(verify.near_stats().pages, whole.near_stats().pages);
    assert_eq!(
        index.near_stats().evicted_by_budget,
        whole.near_stats().evicted_by_budget
    );
    assert_eq!(
        verify.near_index().live_pairs(),
        whole.near_index().live_pairs()
    );
    let want = finish_and_compare(&mut whole, expected, &mut cluster, got);
    assert!(want[&OutputKind::Pairs].len() > 50, "the stream has pairs");
}

/// Every record of `lines` (from [`two_partitions`]) through sign -> index -> cluster, with
/// key shards and the verify stage between index and cluster when `cfg.key_shards` is set (all
/// shards in one instance); the cluster stage and the outputs.
fn split_run(cfg: &Config, lines: &[Vec<u8>]) -> (Topology, Vec<Emit>) {
    let mut preparer = Preparer::new(cfg);
    let sign = SignStage::new(cfg);
    let mut signer = Topology::new(cfg.clone());
    let role = |r| Topology::with_role(cfg.clone(), r).expect("a stage");
    let (mut index, mut cluster) = (role(Role::Index), role(Role::Cluster));
    let mut by_key = (cfg.key_shards > 0).then(|| (role(Role::Shard), role(Role::Verify)));
    let reader = InternalReader::new(cfg);
    let mut got = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(mut record) = sign_and_index(
            (&mut preparer, &sign, &mut signer),
            &mut index,
            &reader,
            (line, &two_partitions(i)),
            &mut got,
        ) else {
            continue;
        };
        if let Some((shards, verify)) = &mut by_key {
            for p in 0..cfg.key_shards as i32 {
                let read = reader.sharded(&record).expect("reads back");
                shards.apply_sharded(read, p, &mut got).expect("applies");
                record = shards.take_indexed().expect("passed on").1;
            }
            let read = reader.sharded(&record).expect("reads back");
            verify.apply_sharded(read, 0, &mut got).expect("verifies");
            record = verify.take_indexed().expect("for the cluster stage").1;
        }
        cluster.apply_indexed(reader.indexed(&record).expect("reads back"), &mut got);
    }
    (cluster, got)
}

/// A 304 renews its page in every stage as in one topology: in the index stage's window (or
/// its sequencer's, split by key) and in the cluster stage's exact groups. The stream's pages
/// leave the window by time only, so a stage that forgot to renew would drop the revalidated
/// page and its pairs.
#[test]
fn revalidated_pages_stay_in_every_stage() {
    for edited in [false, true] {
        let lines = revalidated_stream(edited);
        for key_shards in [0, 2] {
            let mut cfg = evicting_split_config();
            cfg.near.max_pages = Config::default().near.max_pages;
            cfg.key_shards = key_shards;
            let mut whole = Topology::new(cfg.clone());
            let mut expected = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                whole.process(line, &two_partitions(i), &mut expected);
            }
            let (mut cluster, got) = split_run(&cfg, &lines);
            let want = finish_and_compare(&mut whole, expected, &mut cluster, got);
            assert!(want[&OutputKind::Pairs].len() >= 6, "the stream has pairs");
        }
    }
}

/// What happens to a part of an index split by key before page `at` (parts 0-2: the key shards,
/// each its own instance; 3: the verify stage; 4: the index stage).
#[derive(Debug, Clone)]
enum Disturbance {
    /// The part's partition moved to a fresh instance, which rebuilt it by re-reading the
    /// partition's records so far (outputs discarded), as `neardup run` does.
    Rebuilt { at: usize, part: usize },
    /// The part restarted from a checkpoint taken just now.
    Restored { at: usize, part: usize },
    /// The stage before the part sent its last `n` records again (at least once).
    Repeated { at: usize, part: usize, n: usize },
}

fn disturbance() -> impl Strategy<Value = Disturbance> {
    prop_oneof![
        (0usize..200, 0usize..5).prop_map(|(at, part)| Disturbance::Rebuilt { at, part }),
        (0usize..200, 0usize..5).prop_map(|(at, part)| Disturbance::Restored { at, part }),
        (0usize..200, 0usize..5, 1usize..6).prop_map(|(at, part, n)| Disturbance::Repeated {
            at,
            part,
            n
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Against a model of the topics (every record each part received, in order): whatever
    /// rebuilds, checkpoint restores and repeats hit the index, the three key shards and the
    /// verify stage, the split run publishes the all-in-one outputs, kind by kind and in order.
    #[test]
    fn key_shard_stages_survive_rebuilds_restores_and_repeats(
        disturbances in prop::collection::vec(disturbance(), 0..6)
    ) {
        let cfg = Config { key_shards: 3, ..evicting_split_config() };
        let lines = mixed_stream();
        let (mut whole, expected) = all_in_one(&cfg, &lines);
        let (mut preparer, sign) = (Preparer::new(&cfg), SignStage::new(&cfg));
        let mut signer = Topology::new(cfg.clone());
        let reader = InternalReader::new(&cfg);
        let role = |r| Topology::with_role(cfg.clone(), r).expect("a stage");
        // parts[0..3]: the shards, parts[3]: verify, parts[4]: index.
        let mut parts: Vec<Topology> = (0..3).map(|_| role(Role::Shard)).collect();
        parts.push(role(Role::Verify));
        parts.push(role(Role::Index));
        let mut cluster = role(Role::Cluster);
        // What each part has received: for the index, the signed record and its input's place.
        let mut received: Vec<Vec<(Vec<u8>, usize)>> = vec![Vec::new(); 5];
        // Hands `value` to part `k`; its record for the next stage, if any.
        let deliver = |parts: &mut Vec<Topology>, k: usize, value: &[u8], i: usize, out: &mut Vec<Emit>| {
            let t = &mut parts[k];
            match k {
                4 => t.apply(reader.signed(value).expect("reads back"), &[], &two_partitions(i), out),
                3 => t.apply_sharded(reader.sharded(value).expect("reads back"), 0, out).expect("verifies"),
                p => t.apply_sharded(reader.sharded(value).expect("reads back"), p as i32, out).expect("applies"),
            }
            t.take_indexed().map(|r| r.1)
        };
        let mut got = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            for d in &disturbances {
                match *d {
                    Disturbance::Rebuilt { at, part } if at == i => {
                        parts[part] = role(if part == 4 { Role::Index } else if part == 3 { Role::Verify } else { Role::Shard });
                        for (value, j) in &received[part] {
                            deliver(&mut parts, part, value, *j, &mut Vec::new());
                        }
                    }
                    Disturbance::Restored { at, part } if at == i => {
                        parts[part] = restored(&cfg, &parts[part]);
                    }
                    Disturbance::Repeated { at, part, n } if at == i => {
                        let from = received[part].len().saturating_sub(n);
                        for (value, j) in &received[part][from..] {
                            let before = got.len();
                            prop_assert!(deliver(&mut parts, part, value, *j, &mut got).is_none(), "a repeat is not passed on");
                            prop_assert_eq!(got.len(), before, "a repeat has no outputs");
                        }
                    }
                    _ => {}
                }
            }
            let mut value = match sign.output(preparer.prepare(line), line, &two_partitions(i), &mut signer) {
                SignOutput::DeadLetter(e) => {
                    got.push(e);
                    continue;
                }
                SignOutput::Internal { value, .. } => value,
            };
            for k in [4, 0, 1, 2, 3] {
                received[k].push((value.clone(), i));
                value = deliver(&mut parts, k, &value, i, &mut got).expect("a record for the next stage");
            }
            cluster.apply_indexed(reader.indexed(&value).expect("reads back"), &mut got);
        }
        finish_and_compare(&mut whole, expected, &mut cluster, got);
    }
}

/// Stages that disagree about the key shards stop rather than verify with missing answers.
#[test]
fn a_record_that_missed_a_key_shard_or_of_another_split_is_refused() {
    let mut cfg = everything_on();
    cfg.hm_veto = None;
    cfg.track_evolution = false;
    cfg.key_shards = 2;
    let reader = InternalReader::new(&cfg);
    let mut index = Topology::with_role(cfg.clone(), Role::Index).expect("index");
    let mut shard = Topology::with_role(cfg.clone(), Role::Shard).expect("shard");
    let mut verify = Topology::with_role(cfg.clone(), Role::Verify).expect("verify");
    let line = &mixed_stream()[0];
    let src = Source::File {
        file: "x".into(),
        line: 1,
    };
    index.process(line, &src, &mut Vec::new());
    let (_, value) = index.take_indexed().expect("a record");
    let mut out = Vec::new();
    // Past shard 0 only: shard 1's answers are missing.
    shard
        .apply_sharded(reader.sharded(&value).unwrap(), 0, &mut out)
        .unwrap();
    let (_, once) = shard.take_indexed().expect("passed on");
    refused(
        verify.apply_sharded(reader.sharded(&once).unwrap(), 0, &mut out),
        "answered by 1 of 2",
    );
    // A partition beyond the shards.
    refused(
        shard.apply_sharded(reader.sharded(&value).unwrap(), 2, &mut out),
        "exactly key_shards = 2 partitions",
    );
    // Stages of another number of shards.
    let mut three = cfg.clone();
    three.key_shards = 3;
    refused(InternalReader::new(&three).sharded(&value), "parameters");
    assert!(out.is_empty());
    let mut none = cfg.clone();
    none.key_shards = 0;
    let err = Topology::with_role(none, Role::Shard)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--key-shards"), "{err}");
}

/// Reading an internal record back failed, with an error that says `why`.
fn refused<T>(read: Result<T, InternalRecordError>, why: &str) {
    let err = read.err().expect("refused");
    assert!(err.to_string().contains(why), "{err}");
}

#[test]
fn a_mirror_stage_without_mirror_stage_in_its_config_is_refused() {
    let err = Topology::with_role(evicting_split_config(), Role::Mirror)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--mirror-stage"), "{err}");
}

#[test]
fn parts_that_feed_back_into_the_index_refuse_to_run_split() {
    let err = Topology::with_role(everything_on(), Role::Cluster)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--stage all"), "{err}");
}

#[test]
fn an_internal_record_of_other_parameters_or_damaged_is_refused() {
    let cfg = everything_on();
    let line = &mixed_stream()[0];
    let src = Source::File {
        file: "x".into(),
        line: 1,
    };
    let mut signer = Topology::new(cfg.clone());
    let SignOutput::Internal { value, .. } =
        SignStage::new(&cfg).output(Preparer::new(&cfg).prepare(line), line, &src, &mut signer)
    else {
        panic!("the first record is a page");
    };
    let mut other = cfg.clone();
    other.signer.max_terms = 10;
    refused(InternalReader::new(&other).signed(&value), "parameters");
    refused(
        InternalReader::new(&cfg).signed(&value[..value.len() / 2]),
        "same neardup version",
    );
}

#[test]
fn an_indexed_record_of_other_parameters_or_damaged_is_refused() {
    let mut cfg = everything_on();
    cfg.hm_veto = None;
    cfg.track_evolution = false;
    let line = &mixed_stream()[0];
    let mut index = Topology::with_role(cfg.clone(), Role::Index).expect("index");
    index.process(
        line,
        &Source::File {
            file: "x".into(),
            line: 1,
        },
        &mut Vec::new(),
    );
    let (_, value) = index.take_indexed().expect("a record");
    assert!(InternalReader::new(&cfg).indexed(&value).is_ok());
    let mut other = cfg.clone();
    other.window_ms /= 2;
    refused(InternalReader::new(&other).indexed(&value), "parameters");
    refused(
        InternalReader::new(&cfg).indexed(&value[..value.len() - 3]),
        "same neardup version",
    );
}
