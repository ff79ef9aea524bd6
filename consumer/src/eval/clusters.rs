//! Scoring the clusters (`neardup.clusters`) and crawl hints (`neardup.recrawl`) of a run
//! against the truth's near-duplicate groups, round by round.
//!
//! # Clusters
//!
//! The cluster events of one level (`very_similar` by default) are replayed in file order into a
//! URL -> cluster map (`created`/`joined`/`merged` put the `added` URLs in the event's cluster,
//! `left`/`split` take the `removed` ones out, `dissolved` empties the cluster). An event belongs
//! to the last truth round whose `start` is not after its `at`; when the round moves on, the map
//! is that round's result (rounds without events carry the map over, as for pairs).
//!
//! Per round, with n_ij the URLs of predicted cluster i in truth group j:
//! * **pair precision / recall / F1**: predicted pairs Σ_i C(|i|, 2), truth pairs Σ_j C(|j|, 2),
//!   true positives Σ_ij C(n_ij, 2) (pairs put together by both);
//! * **adjusted Rand index** over the round's pages (truth `pages`; every URL outside a cluster or
//!   group is a singleton): (TP − E) / (½(P + T) − E) with E = P·T / C(N, 2); 1.0 when both
//!   partitions are all singletons.
//!
//! # Crawl hints
//!
//! Hint events are replayed the same way into URL -> canonical (`keep`, `deprioritize`;
//! `restore` removes). Per round: URLs deprioritised, how many of them are in one truth group
//! with the canonical they name (correct), precision, and coverage = correct / the recrawls the
//! truth says could be saved (Σ_j (|j| − 1): every member of a group but one).

use super::{each_line, f1, ratio, Interner, Truth};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::BufRead;

/// Cluster scores of one round.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRound {
    /// The round.
    pub crawl_id: String,
    /// True when no cluster event fell in this round (the map carried over).
    pub carried_over: bool,
    /// Predicted clusters (two or more pages).
    pub clusters: u64,
    /// Pages in them.
    pub clustered_pages: u64,
    /// Truth near-duplicate groups.
    pub truth_groups: u64,
    /// Pages in them.
    pub truth_pages: u64,
    /// Pairs inside predicted clusters.
    pub predicted_pairs: u64,
    /// Pairs inside truth groups.
    pub truth_pairs: u64,
    /// Pairs inside both.
    pub true_positive_pairs: u64,
    /// Pair precision.
    pub pair_precision: f64,
    /// Pair recall.
    pub pair_recall: f64,
    /// Pair F1.
    pub pair_f1: f64,
    /// Adjusted Rand index over the round's pages.
    pub adjusted_rand_index: f64,
}

/// The cluster evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct ClustersReport {
    /// The level scored.
    pub level: String,
    /// Cluster events read (of every level).
    pub events: u64,
    /// One entry per truth round.
    pub rounds: Vec<ClusterRound>,
    /// The smallest pair F1 of a round.
    pub min_pair_f1: f64,
    /// The smallest adjusted Rand index of a round.
    pub min_adjusted_rand_index: f64,
}

/// Hint scores of one round.
#[derive(Debug, Clone, Serialize)]
pub struct HintRound {
    /// The round.
    pub crawl_id: String,
    /// True when no hint event fell in this round.
    pub carried_over: bool,
    /// URLs whose current hint is `deprioritize`.
    pub deprioritized: u64,
    /// Of them, URLs in one truth group with the canonical they name.
    pub correct: u64,
    /// correct / deprioritized.
    pub precision: f64,
    /// Σ (group size − 1) over the truth groups: the recrawls that could be saved.
    pub avoidable: u64,
    /// correct / avoidable.
    pub coverage: f64,
}

/// The crawl-hint evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct HintsReport {
    /// Hint events read.
    pub events: u64,
    /// One entry per truth round.
    pub rounds: Vec<HintRound>,
}

#[derive(Deserialize)]
struct ClusterLine<'a> {
    #[serde(default, borrow)]
    schema: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cluster_id: Cow<'a, str>,
    #[serde(borrow)]
    level: Cow<'a, str>,
    #[serde(borrow)]
    change: Cow<'a, str>,
    #[serde(default, borrow)]
    added: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    removed: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    at: Cow<'a, str>,
}

#[derive(Deserialize)]
struct HintLine<'a> {
    #[serde(default, borrow)]
    schema: Option<Cow<'a, str>>,
    #[serde(borrow)]
    url: Cow<'a, str>,
    #[serde(borrow)]
    hint: Cow<'a, str>,
    #[serde(default, borrow)]
    canonical: Option<Cow<'a, str>>,
    #[serde(borrow)]
    at: Cow<'a, str>,
}

fn check_schema(schema: &Option<Cow<'_, str>>, want: &str) -> Result<()> {
    match schema {
        Some(s) if s != want => bail!("schema is {s:?}, not {want:?}: is this the right file?"),
        _ => Ok(()),
    }
}

/// Cuts a time-ordered event stream into the truth's rounds: before each event, [`Rounds::before`]
/// scores the state as the previous round's result when the event starts another round.
pub(super) struct Rounds<'t, R> {
    truth: &'t Truth,
    results: Vec<Option<R>>,
    current: Option<usize>,
}

impl<'t, R> Rounds<'t, R> {
    pub(super) fn new(truth: &'t Truth) -> Self {
        Rounds {
            truth,
            results: (0..truth.rounds.len()).map(|_| None).collect(),
            current: None,
        }
    }

    /// Call before applying an event at `at`; `score(i, carried_over)` scores the state now.
    pub(super) fn before(&mut self, at: &str, mut score: impl FnMut(usize, bool) -> R) {
        let round = self.truth.round_at(at);
        if self.current == Some(round) {
            return;
        }
        if let Some(prev) = self.current {
            self.results[prev] = Some(score(prev, false));
        }
        for i in 0..round {
            if self.results[i].is_none() {
                self.results[i] = Some(score(i, true));
            }
        }
        self.current = Some(round);
    }

    /// Scores the last round, and every round still without a result as carried over.
    pub(super) fn finish(mut self, mut score: impl FnMut(usize, bool) -> R) -> Vec<R> {
        if let Some(prev) = self.current {
            self.results[prev] = Some(score(prev, false));
        }
        self.results
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.unwrap_or_else(|| score(i, true)))
            .collect()
    }
}

fn pairs_in(n: u64) -> u64 {
    n * n.saturating_sub(1) / 2
}

/// The truth's group sizes in round `i`.
fn group_sizes(truth: &Truth, i: usize) -> HashMap<u32, u64> {
    let mut sizes: HashMap<u32, u64> = HashMap::new();
    for &(g, _) in truth.rounds[i].member.values() {
        *sizes.entry(g).or_default() += 1;
    }
    sizes
}

/// Scores the cluster events in `reader` (level `level`) against every round of `truth`.
pub(super) fn evaluate_clusters(
    truth: &Truth,
    interner: &mut Interner,
    reader: impl BufRead,
    level: &str,
) -> Result<ClustersReport> {
    // URL -> cluster (interned cluster id).
    let mut member: HashMap<u32, u32> = HashMap::new();
    let mut cluster_ids: HashMap<String, u32> = HashMap::new();
    let mut events = 0u64;
    let mut rounds = Rounds::new(truth);
    let score = |member: &HashMap<u32, u32>, i: usize, carried_over: bool| {
        score_clusters(truth, member, i, carried_over)
    };
    each_line(reader, |line| {
        let ev: ClusterLine = serde_json::from_slice(line)?;
        check_schema(&ev.schema, "neardup.clusters/v1")?;
        events += 1;
        if ev.level != level {
            return Ok(());
        }
        rounds.before(&ev.at, |i, c| score(&member, i, c));
        let n = cluster_ids.len() as u32;
        let id = *cluster_ids.entry(ev.cluster_id.to_string()).or_insert(n);
        for u in &ev.removed {
            let u = interner.id(u);
            if member.get(&u) == Some(&id) {
                member.remove(&u);
            }
        }
        if ev.change == "dissolved" {
            member.retain(|_, c| *c != id);
        }
        for u in &ev.added {
            member.insert(interner.id(u), id);
        }
        Ok(())
    })?;
    let rounds = rounds.finish(|i, c| score(&member, i, c));
    let min = |f: fn(&ClusterRound) -> f64| rounds.iter().map(f).fold(1.0, f64::min);
    Ok(ClustersReport {
        level: level.to_owned(),
        events,
        min_pair_f1: min(|r| r.pair_f1),
        min_adjusted_rand_index: min(|r| r.adjusted_rand_index),
        rounds,
    })
}

fn score_clusters(
    truth: &Truth,
    member: &HashMap<u32, u32>,
    i: usize,
    carried_over: bool,
) -> ClusterRound {
    let t = &truth.rounds[i];
    let mut sizes: HashMap<u32, u64> = HashMap::new();
    let mut both: HashMap<(u32, u32), u64> = HashMap::new();
    for (u, &c) in member {
        *sizes.entry(c).or_default() += 1;
        if let Some(&(g, _)) = t.member.get(u) {
            *both.entry((c, g)).or_default() += 1;
        }
    }
    let truth_sizes = group_sizes(truth, i);
    let predicted: u64 = sizes.values().map(|&n| pairs_in(n)).sum();
    let truth_pairs: u64 = truth_sizes.values().map(|&n| pairs_in(n)).sum();
    let tp: u64 = both.values().map(|&n| pairs_in(n)).sum();
    let (p, r) = (ratio(tp, predicted), ratio(tp, truth_pairs));
    let truth_pages: u64 = truth_sizes.values().sum();
    let pages = t
        .pages
        .unwrap_or(0)
        .max(truth_pages)
        .max(member.len() as u64);
    let all = pairs_in(pages) as f64;
    let expected = if all == 0.0 {
        0.0
    } else {
        predicted as f64 * truth_pairs as f64 / all
    };
    let best = (predicted + truth_pairs) as f64 / 2.0;
    let ari = if best == expected {
        1.0
    } else {
        (tp as f64 - expected) / (best - expected)
    };
    ClusterRound {
        crawl_id: t.crawl_id.clone(),
        carried_over,
        clusters: sizes.len() as u64,
        clustered_pages: member.len() as u64,
        truth_groups: truth_sizes.len() as u64,
        truth_pages,
        predicted_pairs: predicted,
        truth_pairs,
        true_positive_pairs: tp,
        pair_precision: p,
        pair_recall: r,
        pair_f1: f1(p, r),
        adjusted_rand_index: ari,
    }
}

/// Scores the crawl-hint events in `reader` against every round of `truth`.
pub(super) fn evaluate_hints(
    truth: &Truth,
    interner: &mut Interner,
    reader: impl BufRead,
) -> Result<HintsReport> {
    // URL -> the canonical of its current keep/deprioritize hint.
    let mut hinted: HashMap<u32, u32> = HashMap::new();
    let mut events = 0u64;
    let mut rounds = Rounds::new(truth);
    let score = |hinted: &HashMap<u32, u32>, i: usize, carried_over: bool| {
        let t = &truth.rounds[i];
        let (mut deprioritized, mut correct) = (0u64, 0u64);
        for (u, c) in hinted {
            if u == c {
                continue;
            }
            deprioritized += 1;
            if let (Some((gu, _)), Some((gc, _))) = (t.member.get(u), t.member.get(c)) {
                correct += u64::from(gu == gc);
            }
        }
        let avoidable: u64 = group_sizes(truth, i).values().map(|n| n - 1).sum();
        HintRound {
            crawl_id: t.crawl_id.clone(),
            carried_over,
            deprioritized,
            correct,
            precision: ratio(correct, deprioritized),
            avoidable,
            coverage: ratio(correct, avoidable),
        }
    };
    each_line(reader, |line| {
        let ev: HintLine = serde_json::from_slice(line)?;
        check_schema(&ev.schema, "neardup.recrawl/v1")?;
        events += 1;
        rounds.before(&ev.at, |i, c| score(&hinted, i, c));
        let u = interner.id(&ev.url);
        match (&*ev.hint, &ev.canonical) {
            ("keep" | "deprioritize", Some(c)) => {
                hinted.insert(u, interner.id(c));
            }
            ("restore", _) => {
                hinted.remove(&u);
            }
            (other, _) => bail!("hint {other:?} without a canonical, or unknown"),
        }
        Ok(())
    })?;
    let rounds = rounds.finish(|i, c| score(&hinted, i, c));
    Ok(HintsReport { events, rounds })
}
