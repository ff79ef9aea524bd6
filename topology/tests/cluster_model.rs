//! Model-based property test of the incremental clusters (`clusters::Clusters`).
//!
//! After any random sequence of pair insertions and retractions:
//! - the incremental clusters equal the connected components (of two or more pages) that a
//!   from-scratch union-find computes over the live pairs;
//! - the emitted cluster events, replayed on an empty map, give the same clusters, with sizes
//!   and canonical members that agree with the events;
//! - every canonical member is the one the documented survivor policy picks, also when in-link
//!   counts change under the `inlinks` criterion;
//! - the crawl hints, replayed, say `keep` for every canonical member, `deprioritize` naming
//!   the canonical for every other member, and `restore` as the last word for everyone else.

use neardup_schemas::{
    ClusterChangeKind, ClusterEvent, OutputKind, PairLevel, RecrawlEvent, RecrawlHint,
};
use neardup_topology::clusters::{CanonicalCriterion, CanonicalPolicy, Clusters, Move};
use neardup_topology::hints::Hints;
use neardup_topology::Emitter;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Distinct lengths, so the canonical rule never falls through to arrival order.
const URLS: [&str; 8] = [
    "http://a.example/1",
    "https://b.example/22",
    "http://c.example/333",
    "https://d.example/4444",
    "http://e.example/55555",
    "https://f.example/666666",
    "http://g.example/7777777",
    "https://h.example/88888888",
];

#[derive(Debug, Clone)]
enum Op {
    Add(usize, usize),
    Remove(usize, usize),
    /// The URL now has this many in-links.
    Inlinks(usize, u32),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..URLS.len(), 0..URLS.len()).prop_map(|(a, b)| Op::Add(a, b)),
        2 => (0..URLS.len(), 0..URLS.len()).prop_map(|(a, b)| Op::Remove(a, b)),
        1 => (0..URLS.len(), 0u32..4).prop_map(|(a, n)| Op::Inlinks(a, n)),
    ]
}

fn find(parent: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while parent[r] != r {
        r = parent[r];
    }
    parent[x] = r;
    r
}

/// Components of two or more pages over `edges`, from scratch.
fn scratch_components(edges: &BTreeSet<(usize, usize)>) -> Vec<Vec<String>> {
    let mut parent: Vec<usize> = (0..URLS.len()).collect();
    for &(a, b) in edges {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        parent[ra] = rb;
    }
    let mut groups: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for &(a, b) in edges {
        for x in [a, b] {
            let r = find(&mut parent, x);
            let g = groups.entry(r).or_default();
            if !g.contains(&URLS[x].to_owned()) {
                g.push(URLS[x].to_owned());
            }
        }
    }
    let mut out: Vec<Vec<String>> = groups
        .into_values()
        .map(|mut g| {
            g.sort();
            g
        })
        .collect();
    out.sort();
    out
}

#[derive(Default)]
struct Replay {
    clusters: BTreeMap<String, (BTreeSet<String>, String)>,
    retired: BTreeSet<String>,
}

impl Replay {
    fn apply(&mut self, e: &ClusterEvent) -> Result<(), TestCaseError> {
        prop_assert_eq!(e.level, PairLevel::VerySimilar);
        prop_assert!(
            !self.retired.contains(&e.cluster_id),
            "retired id reused: {:?}",
            e
        );
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
        match e.change {
            ClusterChangeKind::Created => {
                prop_assert!(!self.clusters.contains_key(&e.cluster_id), "created twice");
                self.clusters
                    .insert(e.cluster_id.clone(), (set(&e.added), String::new()));
            }
            ClusterChangeKind::Dissolved => {
                let (m, _) = self
                    .clusters
                    .remove(&e.cluster_id)
                    .expect("dissolved unknown");
                prop_assert_eq!(m, set(&e.removed));
                self.retired.insert(e.cluster_id.clone());
                return Ok(());
            }
            _ => {
                let c = self.clusters.get_mut(&e.cluster_id);
                prop_assert!(c.is_some(), "change to an unknown cluster: {:?}", e);
                let (members, _) = c.expect("known");
                for u in &e.added {
                    prop_assert!(members.insert(u.clone()), "added a member twice: {:?}", e);
                }
                for u in &e.removed {
                    prop_assert!(members.remove(u), "removed a non-member: {:?}", e);
                }
                if e.change == ClusterChangeKind::Merged {
                    for r in &e.related {
                        let (gone, _) = self.clusters.remove(r).expect("merged unknown");
                        prop_assert!(gone.is_subset(&set(&e.added)), "merge lost members");
                        self.retired.insert(r.clone());
                    }
                }
            }
        }
        let (members, canonical) = self.clusters.get_mut(&e.cluster_id).expect("live");
        prop_assert_eq!(members.len() as u64, e.size, "size disagrees: {:?}", e);
        let c = e.canonical.clone().expect("canonical of a live cluster");
        prop_assert!(members.contains(&c), "canonical is no member: {:?}", e);
        *canonical = c;
        Ok(())
    }

    fn components(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = self
            .clusters
            .values()
            .map(|(m, _)| m.iter().cloned().collect())
            .collect();
        out.sort();
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn incremental_clusters_equal_scratch_components(ops in prop::collection::vec(arb_op(), 1..80),
            order in Just(vec![CanonicalCriterion::Earliest, CanonicalCriterion::Https, CanonicalCriterion::Shorter, CanonicalCriterion::Inlinks]).prop_shuffle(),
            used in 0usize..=4) {
        // Any order of any subset of the criteria; the default is the first case checked below.
        let policy = CanonicalPolicy::new(order[..used].iter().copied());
        let mut clusters = Clusters::with_policy(PairLevel::VerySimilar, policy.clone());
        let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
        // When each URL got its first live pair (reset when it has none): the canonical rule.
        let mut entered: BTreeMap<usize, usize> = BTreeMap::new();
        // The order in which URLs entered (the tie-break after the policy's criteria).
        let mut arrival: BTreeMap<usize, u64> = BTreeMap::new();
        let mut arrivals = 0u64;
        let mut replay = Replay::default();
        // Where the membership moves say each page is.
        let mut placed: BTreeMap<String, u32> = BTreeMap::new();
        let mut out = Emitter::new();
        let mut hints = Hints::new();
        // Each URL's in-link count now (the `inlinks` criterion ranks by it).
        let mut inlinks = [0u32; URLS.len()];
        // URL -> its latest (hint, canonical).
        let mut hinted: BTreeMap<String, (RecrawlHint, Option<String>)> = BTreeMap::new();
        for (step, op) in ops.iter().enumerate() {
            out.set_at("2026-11-02T00:00:00Z");
            match *op {
                Op::Add(a, b) if a != b => {
                    let e = (a.min(b), a.max(b));
                    if edges.insert(e) {
                        entered.entry(a).or_insert(step);
                        entered.entry(b).or_insert(step);
                        for x in [a, b] {
                            arrival.entry(x).or_insert_with(|| {
                                arrivals += 1;
                                arrivals
                            });
                        }
                    }
                    let counts = |u: &str| {
                        inlinks[URLS.iter().position(|x| *x == u).expect("known URL")]
                    };
                    clusters.add_pair_ranked(URLS[a], URLS[b], step as i64, &counts, &mut out);
                }
                Op::Remove(a, b) if a != b => {
                    edges.remove(&(a.min(b), a.max(b)));
                    clusters.remove_pair(URLS[a], URLS[b], &mut out);
                    for x in [a, b] {
                        if !edges.iter().any(|&(p, q)| p == x || q == x) {
                            entered.remove(&x);
                            arrival.remove(&x);
                        }
                    }
                }
                Op::Inlinks(a, n) => {
                    inlinks[a] = n;
                    clusters.set_inlinks(URLS[a], n, &mut out);
                }
                _ => {}
            }
            let moves: Vec<Move> = clusters.take_moves().collect();
            hints.apply(&clusters, &moves, &mut out);
            for e in out.drain() {
                if e.kind == OutputKind::Recrawl {
                    let h: RecrawlEvent = serde_json::from_slice(&e.value).expect("recrawl event");
                    prop_assert_eq!(&e.key, &h.url);
                    let previous = hinted.insert(h.url.clone(), (h.hint, h.canonical.clone()));
                    prop_assert_ne!(previous, Some((h.hint, h.canonical.clone())), "a hint repeated: {:?}", h);
                    continue;
                }
                prop_assert_eq!(e.kind, OutputKind::Clusters);
                let ev: ClusterEvent = serde_json::from_slice(&e.value).expect("cluster event");
                prop_assert_eq!(&e.key, &ev.cluster_id);
                replay.apply(&ev)?;
            }
            for m in moves {
                let url = m.url.to_string();
                prop_assert_eq!(placed.get(&url).copied(), m.from, "move from the wrong cluster");
                match m.to {
                    Some(c) => placed.insert(url, c),
                    None => placed.remove(&url),
                };
            }
            let expect = scratch_components(&edges);
            let mut by_cluster: BTreeMap<u32, Vec<String>> = BTreeMap::new();
            for (u, c) in &placed {
                by_cluster.entry(*c).or_default().push(u.clone());
            }
            let mut moved: Vec<Vec<String>> = by_cluster.into_values().collect();
            moved.sort();
            prop_assert_eq!(&moved, &expect, "replayed moves != scratch");
            prop_assert_eq!(&clusters.components(), &expect, "incremental != scratch");
            prop_assert_eq!(&replay.components(), &expect, "replayed events != scratch");
            let mut want_hints: BTreeMap<String, (RecrawlHint, Option<String>)> = BTreeMap::new();
            for (members, canonical) in replay.clusters.values() {
                for u in members {
                    let hint = if u == canonical { RecrawlHint::Keep } else { RecrawlHint::Deprioritize };
                    want_hints.insert(u.clone(), (hint, Some(canonical.clone())));
                }
            }
            let current: BTreeMap<String, (RecrawlHint, Option<String>)> = hinted
                .iter()
                .filter(|(_, (h, _))| *h != RecrawlHint::Restore)
                .map(|(u, v)| (u.clone(), v.clone()))
                .collect();
            prop_assert_eq!(&current, &want_hints, "replayed hints != the clusters' canonicals");
            // Canonical: the policy's criteria in order (default: first entered, then https,
            // then shorter URL); with criteria left out, the earliest arrival of the URL (its
            // first pair ever: a node is created then and keeps its place while clustered).
            for (members, canonical) in replay.clusters.values() {
                let key = |i: usize| -> Vec<i64> {
                    let mut k: Vec<i64> = policy
                        .criteria()
                        .iter()
                        .map(|c| match c {
                            CanonicalCriterion::Earliest => entered[&i] as i64,
                            CanonicalCriterion::Https => i64::from(!URLS[i].starts_with("https:")),
                            CanonicalCriterion::Shorter => URLS[i].len() as i64,
                            CanonicalCriterion::Inlinks => -i64::from(inlinks[i]),
                        })
                        .collect();
                    k.push(arrival[&i] as i64);
                    k
                };
                let best = members
                    .iter()
                    .map(|u| URLS.iter().position(|x| x == u).expect("known"))
                    .min_by_key(|&i| key(i))
                    .expect("non-empty");
                prop_assert_eq!(canonical, URLS[best], "canonical is not the survivor policy's");
                let info = clusters.cluster_of(URLS[best]).expect("clustered");
                prop_assert_eq!(&info.canonical, URLS[best]);
                prop_assert_eq!(info.size, members.len() as u64);
            }
        }
    }
}

/// A bridge retraction splits a cluster; the larger part keeps the id.
#[test]
fn bridge_retraction_splits_and_the_larger_part_keeps_the_id() {
    let mut c = Clusters::new(PairLevel::VerySimilar);
    let mut out = Emitter::new();
    out.set_at("2026-11-02T00:00:00Z");
    // 0-1-2 and 3-4, bridged by 2-3.
    for (a, b) in [(0, 1), (1, 2), (3, 4), (2, 3)] {
        c.add_pair(URLS[a], URLS[b], 0, &mut out);
    }
    let id = c.cluster_of(URLS[0]).expect("clustered").id;
    assert_eq!(c.cluster_of(URLS[4]).expect("clustered").id, id);
    out.drain().for_each(drop);
    c.remove_pair(URLS[2], URLS[3], &mut out);
    assert_eq!(
        c.cluster_of(URLS[0]).expect("clustered").id,
        id,
        "larger part keeps the id"
    );
    let other = c.cluster_of(URLS[3]).expect("clustered");
    assert_ne!(other.id, id);
    assert_eq!(other.size, 2);
    let kinds: Vec<ClusterChangeKind> = out
        .drain()
        .map(|e| {
            serde_json::from_slice::<ClusterEvent>(&e.value)
                .expect("event")
                .change
        })
        .collect();
    assert_eq!(
        kinds[..2],
        [ClusterChangeKind::Split, ClusterChangeKind::Created]
    );
}
