//! Scoring mirrored hosts (`neardup.mirrors`) and replicated collections
//! (`neardup.collections`) against the truth, round by round (events are cut into rounds as
//! for clusters: an event belongs to the last round whose `start` is not after its `at`).
//!
//! # Mirrors
//! The state at a round's end is the latest event per host pair. Truth mirrors are the round's
//! `mirror_host_pairs` with at least `min_shared` (FMN: 10) shared pages. Per round:
//! * **found**: truth mirrors reported as `candidate` or `confirmed` (recall = found / truth);
//! * **confirmed**, and of them **prefixes right**: every reported prefix pair (pa, pb)
//!   corresponds to truth prefixes ta, tb of the two hosts with one suffix below both
//!   (ta = pa + s, tb = pb + s), so `/` ↔ `/apache/` is right for `/docs/2.4/` ↔
//!   `/apache/docs/2.4/`;
//! * **precision**: reported mirrors (candidate or confirmed) that are truth mirror pairs of any
//!   size;
//! * **aliases / auto-mirrors as mirrors**: truth alias pairs, or pairs of an auto-mirror host
//!   with itself, reported as mirrors (must be 0); and how many truth aliases and auto-mirror
//!   hosts were reported as such.
//!
//! # Collections
//! The state at a round's end is every collection whose latest event is not `dissolved`. A
//! reported collection *covers* a truth collection when most of its hosts are the truth
//! collection's hosts. Per truth collection: how many reported collections cover it (1 is
//! "found once"), and for the one sharing most hosts whether its host count and, host by host,
//! its page counts are within 10 % of the truth's.

use super::clusters::Rounds;
use super::{each_line, ratio, Truth};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;

/// The parts of `truth.json` about hosts.
#[derive(Debug, Default, Deserialize)]
pub(super) struct HostTruth {
    #[serde(default)]
    rounds: Vec<HostRound>,
}

#[derive(Debug, Default, Deserialize)]
struct HostRound {
    #[serde(default)]
    mirror_host_pairs: Vec<TruthPair>,
    #[serde(default)]
    alias_host_pairs: Vec<TruthPair>,
    #[serde(default)]
    auto_mirror_hosts: Vec<AutoHost>,
    #[serde(default)]
    collections: Vec<TruthCollection>,
}

#[derive(Debug, Deserialize)]
struct TruthPair {
    hosts: [String; 2],
    #[serde(default)]
    prefixes: Vec<Vec<String>>,
    #[serde(default)]
    shared_pages: u64,
}

#[derive(Debug, Deserialize)]
struct AutoHost {
    host: String,
}

#[derive(Debug, Deserialize)]
struct TruthCollection {
    name: String,
    hosts: Vec<TruthCollectionHost>,
}

#[derive(Debug, Deserialize)]
struct TruthCollectionHost {
    host: String,
    pages: u64,
}

impl HostTruth {
    /// Reads the host parts of a truth file.
    pub(super) fn read(reader: impl std::io::Read) -> Result<Self> {
        Ok(serde_json::from_reader(reader)?)
    }
}

/// The latest state and prefixes per sorted host pair.
type MirrorState = HashMap<(String, String), (String, Vec<[String; 2]>)>;

/// Mirror scores of one round.
#[derive(Debug, Clone, Serialize)]
pub struct MirrorRound {
    /// The round.
    pub crawl_id: String,
    /// True when no mirror event fell in this round (the state carried over).
    pub carried_over: bool,
    /// Truth mirror pairs with at least `min_shared` shared pages.
    pub truth_mirrors: u64,
    /// Of them, reported as candidate or confirmed.
    pub found: u64,
    /// found / truth_mirrors.
    pub recall: f64,
    /// Of them, confirmed.
    pub confirmed: u64,
    /// Of the confirmed, with prefixes that correspond as in the truth.
    pub prefixes_right: u64,
    /// Pairs reported as candidate or confirmed.
    pub reported: u64,
    /// Of them, truth mirror pairs (any number of shared pages).
    pub reported_true: u64,
    /// reported_true / reported.
    pub precision: f64,
    /// Truth alias pairs reported as mirrors (must be 0).
    pub aliases_as_mirrors: u64,
    /// Auto-mirror hosts reported as mirrors of themselves (must be 0).
    pub auto_mirrors_as_mirrors: u64,
    /// Truth alias pairs.
    pub truth_aliases: u64,
    /// Of them, reported as aliases.
    pub aliases_reported: u64,
    /// Truth auto-mirror hosts.
    pub truth_auto_mirrors: u64,
    /// Of them, reported as auto-mirrors.
    pub auto_mirrors_reported: u64,
    /// Truth mirrors not found (at most 10), for debugging.
    pub missed: Vec<[String; 2]>,
    /// Reported mirrors that are no truth pair (at most 10).
    pub false_mirrors: Vec<[String; 2]>,
}

/// The mirror evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct MirrorsReport {
    /// Mirror events read.
    pub events: u64,
    /// The truth threshold on shared pages.
    pub min_shared: u64,
    /// One entry per truth round.
    pub rounds: Vec<MirrorRound>,
}

/// One truth collection, as found.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionMatch {
    /// The truth collection's name.
    pub name: String,
    /// Its hosts.
    pub truth_hosts: u64,
    /// Reported collections covering it (1 = found once).
    pub covering: u64,
    /// Hosts of the best-matching reported collection (0 when none).
    pub hosts: u64,
    /// Its host count is within 10 % of the truth's.
    pub hosts_within_10pct: bool,
    /// Hosts in both whose page counts are within 10 % of the truth's, of the hosts in both.
    pub pages_within_10pct: u64,
    /// Hosts in both.
    pub common_hosts: u64,
}

/// Collection scores of one round.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionRound {
    /// The round.
    pub crawl_id: String,
    /// True when no collection event fell in this round.
    pub carried_over: bool,
    /// Collections reported at the round's end.
    pub reported: u64,
    /// Truth collections.
    pub truth: u64,
    /// Truth collections found by exactly one reported collection.
    pub found_once: u64,
    /// Truth collections whose best match has a host count within 10 %.
    pub hosts_within_10pct: u64,
    /// Truth collections whose best match has every common host's page count within 10 %.
    pub pages_within_10pct: u64,
    /// Per truth collection.
    pub collections: Vec<CollectionMatch>,
}

/// The collection evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionsReport {
    /// Collection events read.
    pub events: u64,
    /// One entry per truth round.
    pub rounds: Vec<CollectionRound>,
}

#[derive(Deserialize)]
struct MirrorLine {
    #[serde(default)]
    schema: Option<String>,
    hosts: [String; 2],
    state: String,
    #[serde(default)]
    prefixes: Vec<[String; 2]>,
    at: String,
}

#[derive(Deserialize)]
struct CollectionLine {
    #[serde(default)]
    schema: Option<String>,
    collection_id: String,
    state: String,
    hosts: Vec<CollectionHostLine>,
    at: String,
}

#[derive(Deserialize, Clone)]
struct CollectionHostLine {
    host: String,
    pages: u64,
}

fn check(schema: &Option<String>, want: &str) -> Result<()> {
    match schema {
        Some(s) if s != want => bail!("schema is {s:?}, not {want:?}: is this the right file?"),
        _ => Ok(()),
    }
}

fn sorted(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}

/// Whether the reported prefix pairs correspond as the truth prefixes do.
fn prefixes_right(reported: &[[String; 2]], truth: &TruthPair, flipped: bool) -> bool {
    if reported.is_empty() || truth.prefixes.len() != 2 {
        return false;
    }
    let (ta, tb) = if flipped {
        (&truth.prefixes[1], &truth.prefixes[0])
    } else {
        (&truth.prefixes[0], &truth.prefixes[1])
    };
    reported.iter().all(|[pa, pb]| {
        ta.iter().any(|a| {
            tb.iter().any(|b| {
                matches!((a.strip_prefix(pa.as_str()), b.strip_prefix(pb.as_str())), (Some(x), Some(y)) if x == y)
            })
        })
    })
}

/// Scores the mirror events in `reader` against every round.
pub(super) fn evaluate_mirrors(
    truth: &Truth,
    hosts: &HostTruth,
    reader: impl BufRead,
    min_shared: u64,
) -> Result<MirrorsReport> {
    let mut state: MirrorState = HashMap::new();
    let mut events = 0u64;
    let mut rounds = Rounds::new(truth);
    let score = |state: &MirrorState, i: usize, carried: bool| {
        score_mirrors(truth, hosts, state, i, carried, min_shared)
    };
    each_line(reader, |line| {
        let ev: MirrorLine = serde_json::from_slice(line)?;
        check(&ev.schema, "neardup.mirrors/v1")?;
        events += 1;
        rounds.before(&ev.at, |i, c| score(&state, i, c));
        state.insert(sorted(&ev.hosts[0], &ev.hosts[1]), (ev.state, ev.prefixes));
        Ok(())
    })?;
    let rounds = rounds.finish(|i, c| score(&state, i, c));
    Ok(MirrorsReport {
        events,
        min_shared,
        rounds,
    })
}

fn score_mirrors(
    truth: &Truth,
    hosts: &HostTruth,
    state: &MirrorState,
    i: usize,
    carried_over: bool,
    min_shared: u64,
) -> MirrorRound {
    let empty = HostRound::default();
    let t = hosts.rounds.get(i).unwrap_or(&empty);
    let is_mirror = |s: &str| s == "candidate" || s == "confirmed";
    let truth_pairs: HashMap<(String, String), &TruthPair> = t
        .mirror_host_pairs
        .iter()
        .map(|p| (sorted(&p.hosts[0], &p.hosts[1]), p))
        .collect();
    let aliases: HashSet<(String, String)> = t
        .alias_host_pairs
        .iter()
        .map(|p| sorted(&p.hosts[0], &p.hosts[1]))
        .collect();
    let autos: BTreeSet<&str> = t
        .auto_mirror_hosts
        .iter()
        .map(|a| a.host.as_str())
        .collect();
    let mut r = MirrorRound {
        crawl_id: truth.rounds[i].crawl_id.clone(),
        carried_over,
        truth_mirrors: 0,
        found: 0,
        recall: 0.0,
        confirmed: 0,
        prefixes_right: 0,
        reported: 0,
        reported_true: 0,
        precision: 0.0,
        aliases_as_mirrors: 0,
        auto_mirrors_as_mirrors: 0,
        truth_aliases: aliases.len() as u64,
        aliases_reported: 0,
        truth_auto_mirrors: autos.len() as u64,
        auto_mirrors_reported: 0,
        missed: vec![],
        false_mirrors: vec![],
    };
    let mut keys: Vec<&(String, String)> = truth_pairs.keys().collect();
    keys.sort();
    for key in keys {
        let p = truth_pairs[key];
        if p.shared_pages < min_shared {
            continue;
        }
        r.truth_mirrors += 1;
        match state.get(key) {
            Some((s, prefixes)) if is_mirror(s) => {
                r.found += 1;
                if s == "confirmed" {
                    r.confirmed += 1;
                    let flipped = p.hosts[0] != key.0;
                    r.prefixes_right += u64::from(prefixes_right(prefixes, p, flipped));
                }
            }
            _ => {
                if r.missed.len() < 10 {
                    r.missed.push([key.0.clone(), key.1.clone()]);
                }
            }
        }
    }
    let mut reported: Vec<(&(String, String), &String)> =
        state.iter().map(|(k, (s, _))| (k, s)).collect();
    reported.sort();
    for (key, s) in reported {
        if key.0 == key.1 {
            if s == "auto_mirror" && autos.contains(key.0.as_str()) {
                r.auto_mirrors_reported += 1;
            }
            if is_mirror(s) {
                r.auto_mirrors_as_mirrors += 1;
            }
            continue;
        }
        if s == "alias" && aliases.contains(key) {
            r.aliases_reported += 1;
        }
        if !is_mirror(s) {
            continue;
        }
        r.reported += 1;
        if aliases.contains(key) {
            r.aliases_as_mirrors += 1;
        }
        if truth_pairs.contains_key(key) {
            r.reported_true += 1;
        } else if r.false_mirrors.len() < 10 {
            r.false_mirrors.push([key.0.clone(), key.1.clone()]);
        }
    }
    r.recall = ratio(r.found, r.truth_mirrors);
    r.precision = ratio(r.reported_true, r.reported);
    r
}

/// Scores the collection events in `reader` against every round.
pub(super) fn evaluate_collections(
    truth: &Truth,
    hosts: &HostTruth,
    reader: impl BufRead,
) -> Result<CollectionsReport> {
    let mut state: BTreeMap<String, Vec<CollectionHostLine>> = BTreeMap::new();
    let mut events = 0u64;
    let mut rounds = Rounds::new(truth);
    let score = |state: &BTreeMap<String, Vec<CollectionHostLine>>, i: usize, c: bool| {
        score_collections(truth, hosts, state, i, c)
    };
    each_line(reader, |line| {
        let ev: CollectionLine = serde_json::from_slice(line)?;
        check(&ev.schema, "neardup.collections/v1")?;
        events += 1;
        rounds.before(&ev.at, |i, c| score(&state, i, c));
        if ev.state == "dissolved" {
            state.remove(&ev.collection_id);
        } else {
            state.insert(ev.collection_id, ev.hosts);
        }
        Ok(())
    })?;
    let rounds = rounds.finish(|i, c| score(&state, i, c));
    Ok(CollectionsReport { events, rounds })
}

fn within_10pct(got: u64, want: u64) -> bool {
    (got as f64 - want as f64).abs() <= 0.1 * want as f64
}

fn score_collections(
    truth: &Truth,
    hosts: &HostTruth,
    state: &BTreeMap<String, Vec<CollectionHostLine>>,
    i: usize,
    carried_over: bool,
) -> CollectionRound {
    let empty = HostRound::default();
    let t = hosts.rounds.get(i).unwrap_or(&empty);
    let mut r = CollectionRound {
        crawl_id: truth.rounds[i].crawl_id.clone(),
        carried_over,
        reported: state.len() as u64,
        truth: t.collections.len() as u64,
        found_once: 0,
        hosts_within_10pct: 0,
        pages_within_10pct: 0,
        collections: vec![],
    };
    for tc in &t.collections {
        let truth_hosts: HashMap<&str, u64> = tc
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.pages))
            .collect();
        let mut covering = 0u64;
        let mut best: Option<(usize, &Vec<CollectionHostLine>)> = None;
        for hs in state.values() {
            let common = hs
                .iter()
                .filter(|h| truth_hosts.contains_key(h.host.as_str()))
                .count();
            if 2 * common > hs.len() {
                covering += 1;
            }
            if common > 0 && best.is_none_or(|(c, _)| common > c) {
                best = Some((common, hs));
            }
        }
        let (hosts_n, common, pages_ok) = match best {
            Some((common, hs)) => {
                let ok = hs
                    .iter()
                    .filter(|h| {
                        truth_hosts
                            .get(h.host.as_str())
                            .is_some_and(|&want| within_10pct(h.pages, want))
                    })
                    .count();
                (hs.len() as u64, common as u64, ok as u64)
            }
            None => (0, 0, 0),
        };
        let m = CollectionMatch {
            name: tc.name.clone(),
            truth_hosts: truth_hosts.len() as u64,
            covering,
            hosts: hosts_n,
            hosts_within_10pct: within_10pct(hosts_n, truth_hosts.len() as u64),
            pages_within_10pct: pages_ok,
            common_hosts: common,
        };
        r.found_once += u64::from(m.covering == 1);
        r.hosts_within_10pct += u64::from(m.hosts_within_10pct);
        r.pages_within_10pct +=
            u64::from(m.common_hosts > 0 && m.pages_within_10pct == m.common_hosts);
        r.collections.push(m);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_correspond_through_a_common_suffix() {
        let truth = TruthPair {
            hosts: ["a".into(), "b".into()],
            prefixes: vec![
                vec!["/docs/2.4/".into(), "/docs/current/".into()],
                vec!["/apache/docs/2.4/".into()],
            ],
            shared_pages: 20,
        };
        let p = |a: &str, b: &str| [a.to_owned(), b.to_owned()];
        assert!(prefixes_right(&[p("/", "/apache/")], &truth, false));
        assert!(prefixes_right(
            &[p("/docs/2.4/", "/apache/docs/2.4/")],
            &truth,
            false
        ));
        assert!(prefixes_right(&[p("/apache/", "/")], &truth, true));
        assert!(!prefixes_right(&[p("/", "/manual/")], &truth, false));
        assert!(!prefixes_right(
            &[p("/", "/apache/"), p("/x/", "/y/")],
            &truth,
            false
        ));
        assert!(!prefixes_right(&[], &truth, false));
    }

    const TRUTH: &str = r#"{"format": "neardup-bench.truth/v1", "rounds": [
      {"crawl_id": "week-01", "start": "2026-11-02T00:00:00Z", "near_duplicate_groups": [],
       "mirror_host_pairs": [
         {"hosts": ["p.example", "m1.example"], "prefixes": [["/docs/"], ["/mirror/docs/"]], "shared_pages": 12},
         {"hosts": ["m2.example", "p.example"], "prefixes": [["/"], ["/"]], "shared_pages": 15},
         {"hosts": ["m3.example", "p.example"], "prefixes": [["/"], ["/"]], "shared_pages": 3}],
       "alias_host_pairs": [{"hosts": ["p.example", "www.p.example"]}],
       "auto_mirror_hosts": [{"host": "a.example", "kind": "path_alias"}],
       "collections": [{"name": "c1", "hosts": [{"host": "p.example", "pages": 100},
         {"host": "m1.example", "pages": 100}, {"host": "m2.example", "pages": 50}]}]},
      {"crawl_id": "week-02", "start": "2026-11-09T00:00:00Z", "near_duplicate_groups": [],
       "mirror_host_pairs": [
         {"hosts": ["p.example", "m1.example"], "prefixes": [["/docs/"], ["/mirror/docs/"]], "shared_pages": 12},
         {"hosts": ["m2.example", "p.example"], "prefixes": [["/"], ["/"]], "shared_pages": 15}],
       "alias_host_pairs": [{"hosts": ["p.example", "www.p.example"]}],
       "collections": [{"name": "c1", "hosts": [{"host": "p.example", "pages": 100},
         {"host": "m1.example", "pages": 100}, {"host": "m2.example", "pages": 50}]}]}]}"#;

    fn mirror(a: &str, b: &str, state: &str, prefixes: &str, at: &str) -> String {
        format!(
            r#"{{"hosts": ["{a}", "{b}"], "state": "{state}", "prefixes": {prefixes}, "at": "{at}"}}"#
        )
    }

    #[test]
    fn mirrors_and_collections_are_scored_per_round() {
        let mut interner = super::super::Interner::default();
        let truth = Truth::read(TRUTH.as_bytes(), &mut interner).unwrap();
        let hosts = HostTruth::read(TRUTH.as_bytes()).unwrap();
        let (w1, w2) = ("2026-11-02T01:00:00Z", "2026-11-09T01:00:00Z");
        let events = [
            mirror(
                "m1.example",
                "p.example",
                "confirmed",
                r#"[["/mirror/", "/"]]"#,
                w1,
            ),
            mirror("m2.example", "p.example", "candidate", "[]", w1),
            mirror(
                "m3.example",
                "p.example",
                "confirmed",
                r#"[["/", "/"]]"#,
                w1,
            ),
            mirror("p.example", "www.p.example", "alias", "[]", w1),
            mirror("a.example", "a.example", "auto_mirror", "[]", w1),
            mirror("x.example", "y.example", "candidate", "[]", w1),
            mirror("m2.example", "p.example", "retracted", "[]", w2),
            mirror("p.example", "www.p.example", "candidate", "[]", w2),
        ]
        .join("\n");
        let m = evaluate_mirrors(&truth, &hosts, events.as_bytes(), 10).unwrap();
        let r1 = &m.rounds[0];
        assert_eq!(
            (r1.truth_mirrors, r1.found, r1.confirmed, r1.prefixes_right),
            (2, 2, 1, 1)
        );
        assert_eq!((r1.reported, r1.reported_true, r1.precision), (4, 3, 0.75));
        assert_eq!((r1.aliases_reported, r1.auto_mirrors_reported), (1, 1));
        assert_eq!((r1.aliases_as_mirrors, r1.auto_mirrors_as_mirrors), (0, 0));
        assert_eq!(
            r1.false_mirrors,
            vec![["x.example".to_owned(), "y.example".to_owned()]]
        );
        let r2 = &m.rounds[1];
        assert_eq!((r2.truth_mirrors, r2.found, r2.recall), (2, 1, 0.5));
        assert_eq!(
            r2.missed,
            vec![["m2.example".to_owned(), "p.example".to_owned()]]
        );
        assert_eq!((r2.aliases_as_mirrors, r2.aliases_reported), (1, 0));

        let coll = |id: &str, state: &str, hosts: &str, at: &str| {
            format!(
                r#"{{"collection_id": "{id}", "state": "{state}", "hosts": {hosts}, "at": "{at}"}}"#
            )
        };
        let events = [
            coll("k1", "created", r#"[{"host": "p.example", "pages": 100}, {"host": "m1.example", "pages": 95}]"#, w1),
            coll("k2", "created", r#"[{"host": "m2.example", "pages": 30}]"#, w1),
            coll("k2", "dissolved", "[]", w2),
            coll("k1", "changed", r#"[{"host": "p.example", "pages": 100}, {"host": "m1.example", "pages": 95}, {"host": "m2.example", "pages": 48}]"#, w2),
        ]
        .join("\n");
        let c = evaluate_collections(&truth, &hosts, events.as_bytes()).unwrap();
        let (c1, c2) = (&c.rounds[0], &c.rounds[1]);
        assert_eq!(
            (
                c1.reported,
                c1.found_once,
                c1.hosts_within_10pct,
                c1.pages_within_10pct
            ),
            (2, 0, 0, 1)
        );
        assert_eq!(c1.collections[0].covering, 2);
        assert_eq!(
            (
                c2.reported,
                c2.found_once,
                c2.hosts_within_10pct,
                c2.pages_within_10pct
            ),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn tolerance_is_ten_percent_either_way() {
        assert!(within_10pct(110, 100) && within_10pct(90, 100));
        assert!(!within_10pct(111, 100) && !within_10pct(89, 100));
    }
}
