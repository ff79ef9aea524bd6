//! The evaluation's report: its figures per round and over the rounds, and how they are
//! computed from the counts (against a truth file or against labels).

use super::{
    each_line, hosts, pair, parse_pair, pick_examples, score_round, Counts, ExactCounts, Interner,
    Level, Listed, LiveSet, Pair, PairEvents, Truth, BUCKETS,
};
use super::{ClustersReport, HintsReport};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;

/// Precision, recall and F1 of one slice.
#[derive(Debug, Clone, Serialize)]
pub struct Prf {
    /// Predicted pairs.
    pub predicted: u64,
    /// Truth pairs.
    pub truth: u64,
    /// Predicted pairs that are truth pairs.
    pub true_positives: u64,
    /// true_positives / predicted (1.0 when nothing is predicted).
    pub precision: f64,
    /// true_positives / truth (1.0 when the truth is empty).
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

impl Prf {
    pub(super) fn new(predicted: u64, truth: u64, tp: u64) -> Prf {
        let precision = ratio(tp, predicted);
        let recall = ratio(tp, truth);
        Prf {
            predicted,
            truth,
            true_positives: tp,
            precision,
            recall,
            f1: f1(precision, recall),
        }
    }
}

pub(super) fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        1.0
    } else {
        n as f64 / d as f64
    }
}

pub(super) fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Recall in one similarity stratum.
#[derive(Debug, Clone, Serialize)]
pub struct BucketRecall {
    /// `<0.7`, `0.7-0.8`, `0.8-0.9`, `0.9-0.95` or `>=0.95`.
    pub bucket: &'static str,
    /// Truth pairs in the stratum.
    pub truth: u64,
    /// Of them, pairs in the prediction.
    pub found: u64,
    /// found / truth (1.0 when empty).
    pub recall: f64,
}

/// Listed hard-negative pairs in the prediction.
#[derive(Debug, Clone, Serialize)]
pub struct HardPairs {
    /// Pairs the truth lists.
    pub listed: u64,
    /// Of them, pairs in the prediction.
    pub reported: u64,
    /// reported / listed (0.0 when none is listed).
    pub fraction: f64,
    /// The same per reason.
    pub by_reason: BTreeMap<String, Listed>,
}

/// Predicted pairs inside one hard-negative group (and not in one near-duplicate group).
#[derive(Debug, Clone, Serialize)]
pub struct HardGroupPairs {
    /// Such pairs.
    pub reported: u64,
    /// The same per reason of the group.
    pub by_reason: BTreeMap<String, u64>,
}

/// Predicted pairs of one level.
#[derive(Debug, Clone, Serialize)]
pub struct LevelScore {
    /// Pairs predicted with this level.
    pub predicted: u64,
    /// Of them, truth pairs.
    pub true_positives: u64,
    /// true_positives / predicted (1.0 when none).
    pub precision: f64,
}

/// The prediction by level.
#[derive(Debug, Clone, Serialize)]
pub struct ByLevel {
    /// Level `exact`.
    pub exact: LevelScore,
    /// Level `virtually_identical`.
    pub virtually_identical: LevelScore,
    /// Level `very_similar`.
    pub very_similar: LevelScore,
}

impl ByLevel {
    pub(super) fn new(levels: &[(u64, u64); 3]) -> ByLevel {
        let score = |l: Level| {
            let (predicted, tp) = levels[l as usize];
            LevelScore {
                predicted,
                true_positives: tp,
                precision: ratio(tp, predicted),
            }
        };
        ByLevel {
            exact: score(Level::Exact),
            virtually_identical: score(Level::VirtuallyIdentical),
            very_similar: score(Level::VerySimilar),
        }
    }

    pub(super) fn get(&self, l: Level) -> &LevelScore {
        match l {
            Level::Exact => &self.exact,
            Level::VirtuallyIdentical => &self.virtually_identical,
            Level::VerySimilar => &self.very_similar,
        }
    }
}

/// Every score of a round, or of all rounds pooled.
#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    /// Predicted pairs.
    pub predicted: u64,
    /// Truth pairs.
    pub truth: u64,
    /// Predicted pairs that are truth pairs.
    pub true_positives: u64,
    /// true_positives / predicted.
    pub precision: f64,
    /// true_positives / truth.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
    /// Pairs whose URLs are on one site.
    pub same_site: Prf,
    /// Pairs whose URLs are on different sites.
    pub different_site: Prf,
    /// Recall by the truth pair's similarity.
    pub recall_by_similarity: Vec<BucketRecall>,
    /// Exact-duplicate pairs.
    pub exact: ExactCounts,
    /// Listed hard-negative pairs reported.
    pub hard_negative_pairs: HardPairs,
    /// Predicted pairs inside hard-negative groups.
    pub hard_negative_group_pairs: HardGroupPairs,
    /// The prediction by level.
    pub by_level: ByLevel,
    /// False positives that no truth list names.
    pub unlabelled_false_positives: u64,
}

impl Metrics {
    pub(super) fn new(c: &Counts, reasons: &[String]) -> Metrics {
        let listed: u64 = c.hard_pairs.iter().map(|l| l.listed).sum();
        let reported: u64 = c.hard_pairs.iter().map(|l| l.reported).sum();
        let total = Prf::new(c.predicted, c.truth, c.tp);
        Metrics {
            predicted: c.predicted,
            truth: c.truth,
            true_positives: c.tp,
            precision: total.precision,
            recall: total.recall,
            f1: total.f1,
            same_site: Prf::new(c.site[0].predicted, c.site[0].truth, c.site[0].tp),
            different_site: Prf::new(c.site[1].predicted, c.site[1].truth, c.site[1].tp),
            recall_by_similarity: BUCKETS
                .iter()
                .zip(&c.buckets)
                .map(|(&(_, name), f)| BucketRecall {
                    bucket: name,
                    truth: f.truth,
                    found: f.found,
                    recall: ratio(f.found, f.truth),
                })
                .collect(),
            exact: c.exact,
            hard_negative_pairs: HardPairs {
                listed,
                reported,
                fraction: if listed == 0 {
                    0.0
                } else {
                    reported as f64 / listed as f64
                },
                by_reason: c
                    .hard_pairs
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.listed > 0 || l.reported > 0)
                    .map(|(r, l)| (reasons[r].clone(), *l))
                    .collect(),
            },
            hard_negative_group_pairs: HardGroupPairs {
                reported: c.hard_group_pairs.iter().sum(),
                by_reason: c
                    .hard_group_pairs
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(r, &n)| (reasons[r].clone(), n))
                    .collect(),
            },
            by_level: ByLevel::new(&c.levels),
            unlabelled_false_positives: c.unlabelled,
        }
    }
}

/// A false positive shown to help debugging.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// The smaller URL.
    pub a: String,
    /// The larger URL.
    pub b: String,
    /// Its predicted level.
    pub level: Level,
    /// Its estimated Jaccard, if the event had one.
    pub jaccard: Option<f32>,
    /// `unlabelled`, `hard_negative_group`, `hard_negative_pair` or `labelled_negative`.
    pub kind: &'static str,
    /// The hard-negative reason, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The scores of one round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundReport {
    /// The round (`rounds[i].crawl_id` of the truth).
    pub crawl_id: String,
    /// True when the stream has no event of this round: the live set carried over.
    pub carried_over: bool,
    /// The scores.
    #[serde(flatten)]
    pub metrics: Metrics,
    /// Up to five false positives.
    pub examples: Vec<Example>,
}

/// The evaluation against a truth.
#[derive(Debug, Clone, Serialize)]
pub struct TruthReport {
    /// The run's name.
    pub label: String,
    /// Always `truth`.
    pub mode: &'static str,
    /// What the stream held.
    pub pair_events: PairEvents,
    /// One entry per truth round, in the truth's order.
    pub rounds: Vec<RoundReport>,
    /// All rounds pooled (counts added up).
    pub overall: Metrics,
    /// The smallest precision of a round.
    pub min_precision: f64,
    /// The smallest recall of a round.
    pub min_recall: f64,
    /// Crawl ids of the stream that the truth does not know (their events still count).
    pub unmatched_crawl_ids: Vec<String>,
    /// The clusters' scores, when the run's `clusters.jsonl` was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClustersReport>,
    /// The crawl hints' scores, when the run's `recrawl.jsonl` was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<HintsReport>,
    /// The mirrored hosts' scores, when the run's `mirrors.jsonl` was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<hosts::MirrorsReport>,
    /// The replicated collections' scores, when the run's `collections.jsonl` has events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collections: Option<hosts::CollectionsReport>,
}

/// The evaluation against labelled pairs.
#[derive(Debug, Clone, Serialize)]
pub struct LabelsScore {
    /// Labelled pairs.
    pub labelled: u64,
    /// Labelled near-duplicates.
    pub positives: u64,
    /// Live pairs at the end of the stream.
    pub predicted: u64,
    /// Of them, labelled ones.
    pub predicted_labelled: u64,
    /// Of those, labelled near-duplicates.
    pub predicted_true: u64,
    /// predicted_true / predicted_labelled.
    pub precision: f64,
    /// predicted_true / positives.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
    /// Predicted pairs without a label.
    pub unlabelled_predicted: u64,
    /// Labelled predicted pairs by level (`predicted` counts labelled ones only).
    pub by_level: ByLevel,
    /// Up to five predicted pairs labelled as not near-duplicates.
    pub examples: Vec<Example>,
}

/// The evaluation against labelled pairs, with its context.
#[derive(Debug, Clone, Serialize)]
pub struct LabelsReport {
    /// The run's name.
    pub label: String,
    /// Always `labels`.
    pub mode: &'static str,
    /// What the stream held.
    pub pair_events: PairEvents,
    /// The scores.
    pub labels: LabelsScore,
}

/// The result of `neardup eval`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Report {
    /// Against `truth.json`.
    Truth(Box<TruthReport>),
    /// Against labelled pairs.
    Labels(Box<LabelsReport>),
}

/// Reads the pair stream and scores every round of `truth`.
pub(super) fn evaluate_truth(
    truth: &Truth,
    interner: &mut Interner,
    reader: impl BufRead,
) -> Result<TruthReport> {
    let n = truth.rounds.len();
    let mut results: Vec<Option<(Counts, Vec<Example>, bool)>> = vec![None; n];
    let mut set = LiveSet::default();
    let mut current: Option<String> = None;
    let mut unmatched = BTreeSet::new();

    // Scores the live set as `round`'s result; fills earlier rounds that have none yet.
    let snapshot = |round: &str,
                    set: &LiveSet,
                    interner: &Interner,
                    results: &mut Vec<Option<(Counts, Vec<Example>, bool)>>,
                    unmatched: &mut BTreeSet<String>| {
        match truth.index(round) {
            Some(i) => {
                let (c, ex) = score_round(&set.live, &truth.rounds[i], interner, &truth.reasons);
                results[i] = Some((c, ex, false));
            }
            None => {
                unmatched.insert(round.to_owned());
            }
        }
    };
    let carry_over =
        |upto: usize,
         set: &LiveSet,
         interner: &Interner,
         results: &mut Vec<Option<(Counts, Vec<Example>, bool)>>| {
            for (i, slot) in results.iter_mut().enumerate().take(upto) {
                if slot.is_none() {
                    let (c, ex) =
                        score_round(&set.live, &truth.rounds[i], interner, &truth.reasons);
                    *slot = Some((c, ex, true));
                }
            }
        };

    each_line(reader, |line| {
        let ev = parse_pair(line)?;
        // A change of round closes the previous one before this event is applied.
        let round: &str = match &ev.crawl_id {
            Some(c) => c,
            None => {
                let i = truth.round_at(ev.at.as_deref().unwrap_or(""));
                &truth.rounds[i].crawl_id
            }
        };
        if current.as_deref() != Some(round) {
            if let Some(prev) = &current {
                snapshot(prev, &set, interner, &mut results, &mut unmatched);
            }
            if let Some(j) = truth.index(round) {
                carry_over(j, &set, interner, &mut results);
            }
            current = Some(round.to_owned());
        }
        set.apply(&ev, interner);
        Ok(())
    })?;
    if let Some(prev) = &current {
        snapshot(prev, &set, interner, &mut results, &mut unmatched);
    }
    carry_over(n, &set, interner, &mut results);

    let mut pooled = Counts::default();
    let mut rounds = Vec::with_capacity(n);
    for (t, r) in truth.rounds.iter().zip(results) {
        let (c, examples, carried_over) = r.expect("every round is scored");
        pooled.add(&c);
        rounds.push(RoundReport {
            crawl_id: t.crawl_id.clone(),
            carried_over,
            metrics: Metrics::new(&c, &truth.reasons),
            examples,
        });
    }
    let min = |f: fn(&RoundReport) -> f64| rounds.iter().map(f).fold(1.0, f64::min);
    Ok(TruthReport {
        label: String::new(),
        mode: "truth",
        pair_events: set.events.clone(),
        min_precision: min(|r| r.metrics.precision),
        min_recall: min(|r| r.metrics.recall),
        overall: Metrics::new(&pooled, &truth.reasons),
        rounds,
        unmatched_crawl_ids: unmatched.into_iter().collect(),
        clusters: None,
        hints: None,
        mirrors: None,
        collections: None,
    })
}

/// A line of a labels file.
#[derive(Deserialize)]
pub(super) struct LabelLine<'a> {
    #[serde(borrow)]
    pub(super) a: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) b: Cow<'a, str>,
    pub(super) near_duplicate: bool,
}

/// Labelled pairs (the last label of a pair wins).
pub(super) fn read_labels(
    reader: impl BufRead,
    interner: &mut Interner,
) -> Result<HashMap<Pair, bool>> {
    let mut labels = HashMap::new();
    each_line(reader, |line| {
        let l: LabelLine = serde_json::from_slice(line)?;
        labels.insert(pair(interner.id(&l.a), interner.id(&l.b)), l.near_duplicate);
        Ok(())
    })?;
    Ok(labels)
}

/// Reads the pair stream and scores its final live set against `labels`.
pub(super) fn evaluate_labels(
    labels: &HashMap<Pair, bool>,
    interner: &mut Interner,
    reader: impl BufRead,
) -> Result<LabelsReport> {
    let mut set = LiveSet::default();
    each_line(reader, |line| {
        set.apply(&parse_pair(line)?, interner);
        Ok(())
    })?;
    let positives = labels.values().filter(|&&v| v).count() as u64;
    let (mut labelled, mut truly, mut levels) = (0u64, 0u64, [(0u64, 0u64); 3]);
    let mut negatives = Vec::new();
    for (p, l) in &set.live {
        let Some(&near) = labels.get(p) else { continue };
        labelled += 1;
        levels[l.level as usize].0 += 1;
        if near {
            truly += 1;
            levels[l.level as usize].1 += 1;
        } else {
            negatives.push(((), *p, *l));
        }
    }
    let precision = ratio(truly, labelled);
    let recall = ratio(truly, positives);
    Ok(LabelsReport {
        label: String::new(),
        mode: "labels",
        labels: LabelsScore {
            labelled: labels.len() as u64,
            positives,
            predicted: set.live.len() as u64,
            predicted_labelled: labelled,
            predicted_true: truly,
            precision,
            recall,
            f1: f1(precision, recall),
            unlabelled_predicted: set.live.len() as u64 - labelled,
            by_level: ByLevel::new(&levels),
            examples: pick_examples(negatives, interner, |()| ("labelled_negative", None)),
        },
        pair_events: set.events,
    })
}
