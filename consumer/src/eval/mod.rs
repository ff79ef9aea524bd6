//! `neardup eval`: scores a stream of `neardup.pairs/v1` events (and, beside it, the run's
//! `neardup.clusters/v1` and `neardup.recrawl/v1` events) against the benchmark's ground
//! truth (`truth.json`, format `neardup-bench.truth/v1`, see `shared/bench/README.md`) or against
//! a file of labelled pairs.
//!
//! # How the stream is read
//!
//! The pair events are replayed in file order into the *live pair set*: `detected` adds a pair (or
//! updates the level and Jaccard of a live one), `retracted` removes it. A pair event belongs to
//! the crawl round of the page event that caused it (`crawl_id`); an event without a `crawl_id`
//! is given the last truth round whose `start` is not after the event's `at`. Whenever the round
//! of the stream changes, the live set is the previous round's result (its *snapshot*); the last
//! round's snapshot is taken at the end of the file. A truth round without any pair event gets the
//! live set as it stood when the stream moved past it (the set carries over; `carried_over` is
//! true). If a round appears in several separate runs of the stream, its last run counts.
//!
//! # What is scored, per round
//!
//! * Truth pairs `T`: every unordered pair inside each `near_duplicate_groups` entry; predicted
//!   pairs `P`: the snapshot. precision = |P∩T| / |P| (1.0 when P is empty), recall = |P∩T| / |T|
//!   (1.0 when T is empty), F1 their harmonic mean (0 when both are 0).
//! * The same split by site (seed 001: a URL's site is its lower-cased host without port or user
//!   info when that has at most one dot, else the host minus its first label).
//! * Recall by similarity: a truth pair's similarity is the smaller `jaccard_to_ref` of its two
//!   URLs (the group's ref, and any URL without a value, count 1.0).
//! * Exact duplicates: pairs inside one `exact_duplicate_groups` list found in P (any level), and
//!   how many of those carry level `exact`.
//! * Hard negatives: listed `hard_negative_pairs` found in P; and pairs of P whose URLs are both in
//!   one `hard_negative_groups` entry but not in one near-duplicate group.
//! * False positives that are in no truth list at all (not in T, not a listed hard-negative pair,
//!   not a hard-negative-group pair): `unlabelled_false_positives`.
//!
//! # JSON output (`--json`), with a truth
//!
//! ```text
//! {
//!   "label": string,                 // --label, default the --pairs path
//!   "mode": "truth",
//!   "pair_events": {"lines", "detected", "retracted", "level_updates", "retracted_not_live"},
//!   "rounds": [{
//!     "crawl_id": string, "carried_over": bool,
//!     "predicted", "truth", "true_positives": int, "precision", "recall", "f1": float,
//!     "same_site":      {"predicted", "truth", "true_positives", "precision", "recall", "f1"},
//!     "different_site": {same fields},
//!     "recall_by_similarity": [{"bucket": "<0.7"|"0.7-0.8"|"0.8-0.9"|"0.9-0.95"|">=0.95",
//!                               "truth", "found": int, "recall": float}],
//!     "exact": {"truth", "found", "found_as_exact"},
//!     "hard_negative_pairs": {"listed", "reported": int, "fraction": float,
//!                             "by_reason": {REASON: {"listed", "reported"}}},
//!     "hard_negative_group_pairs": {"reported": int, "by_reason": {REASON: int}},
//!     "by_level": {"exact" | "virtually_identical" | "very_similar":
//!                  {"predicted", "true_positives": int, "precision": float}},
//!     "unlabelled_false_positives": int,
//!     "examples": [{"a", "b", "level", "jaccard": float|null,
//!                   "kind": "unlabelled"|"hard_negative_group"|"hard_negative_pair",
//!                   "reason": string (absent for unlabelled)}]      // at most 5
//!   }],
//!   "overall": {every field of a round except crawl_id, carried_over and examples, with the
//!               counts of all rounds added up (micro-averaged ratios)},
//!   "min_precision", "min_recall": float,   // over the rounds
//!   "unmatched_crawl_ids": [string],        // rounds of the stream that the truth lacks
//!   "clusters": {                           // when clusters.jsonl lies beside the pairs file
//!     "level": string, "events": int,
//!     "rounds": [{"crawl_id", "carried_over", "clusters", "clustered_pages", "truth_groups",
//!                 "truth_pages", "predicted_pairs", "truth_pairs", "true_positive_pairs",
//!                 "pair_precision", "pair_recall", "pair_f1", "adjusted_rand_index"}],
//!     "min_pair_f1", "min_adjusted_rand_index": float},
//!   "hints": {                              // when recrawl.jsonl lies beside the pairs file
//!     "events": int,
//!     "rounds": [{"crawl_id", "carried_over", "deprioritized", "correct", "precision",
//!                 "avoidable", "coverage"}]}
//! }
//! ```
//!
//! How clusters and hints are scored: see `clusters.rs`.
//!
//! # JSON output with `--labels`
//!
//! The labels file has lines `{"a": URL, "b": URL, "near_duplicate": bool}`; it is scored against
//! the live set at the end of the stream:
//!
//! ```text
//! {"label", "mode": "labels", "pair_events": {..},
//!  "labels": {"labelled", "positives", "predicted", "predicted_labelled", "predicted_true": int,
//!             "precision" (predicted_true / predicted_labelled), "recall" (predicted_true /
//!             positives), "f1": float, "unlabelled_predicted": int,
//!             "by_level": {LEVEL: {"predicted", "true_positives", "precision"}},
//!             "examples": [{"a", "b", "level", "jaccard", "kind": "labelled_negative"}]}}
//! ```

mod clusters;
mod count;
mod hosts;
mod report;
mod stream;
mod text;
mod truth;
mod urls;

pub use clusters::{ClusterRound, ClustersReport, HintRound, HintsReport};
use count::*;
pub use report::*;
pub use stream::*;
use truth::*;
use urls::*;

use crate::cli::EvalArgs;
use crate::replay::open_lines;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// The truth format this evaluation understands.
pub const TRUTH_FORMAT: &str = "neardup-bench.truth/v1";

/// The similarity strata of recall: upper bounds (exclusive) and names.
const BUCKETS: [(f64, &str); 5] = [
    (0.7, "<0.7"),
    (0.8, "0.7-0.8"),
    (0.9, "0.8-0.9"),
    (0.95, "0.9-0.95"),
    (f64::INFINITY, ">=0.95"),
];

/// FMN's threshold: host pairs with this many shared pages are the mirrors to find.
const MIN_SHARED: u64 = 10;

/// Examples of false positives kept per round.
const EXAMPLES: usize = 5;

/// What the pairs are scored against.
#[derive(Debug, Clone)]
pub enum Reference {
    /// The benchmark's `truth.json`.
    Truth(PathBuf),
    /// A JSONL file of `{"a", "b", "near_duplicate"}` lines.
    Labels(PathBuf),
}

/// `neardup eval`: reads the files the arguments name and renders the report (text or JSON).
pub fn run(args: &EvalArgs) -> Result<String> {
    let reference = match (&args.truth, &args.labels) {
        (Some(t), None) => Reference::Truth(t.clone()),
        (None, Some(l)) => Reference::Labels(l.clone()),
        (Some(_), Some(_)) => bail!("give either --truth or --labels, not both"),
        (None, None) => bail!("give --truth FILE (the benchmark's truth.json) or --labels FILE"),
    };
    if !args.label.is_empty() && args.label.len() != args.pairs.len() {
        bail!(
            "{} --label for {} --pairs: give one label per run, or none",
            args.label.len(),
            args.pairs.len()
        );
    }
    let mut reports = vec![];
    for (i, pairs) in args.pairs.iter().enumerate() {
        let label = args
            .label
            .get(i)
            .cloned()
            .unwrap_or_else(|| pairs.display().to_string());
        reports.push(evaluate_files(
            &reference,
            pairs,
            label,
            &args.cluster_level,
        )?);
    }
    if let [report] = reports.as_slice() {
        return Ok(if args.json {
            serde_json::to_string_pretty(report)? + "\n"
        } else {
            report.render()
        });
    }
    let rows: Vec<ComparisonRow> = reports.iter().map(ComparisonRow::of).collect();
    Ok(if args.json {
        // A struct, not json!: the latter would widen f32 fields to f64 digits.
        #[derive(Serialize)]
        struct Runs<'a> {
            runs: &'a [Report],
            comparison: &'a [ComparisonRow],
        }
        serde_json::to_string_pretty(&Runs {
            runs: &reports,
            comparison: &rows,
        })? + "\n"
    } else {
        let mut s = String::new();
        for r in &reports {
            s.push_str(&r.render());
            s.push('\n');
        }
        s.push_str(&render_comparison(&rows));
        s
    })
}

/// One run in the side-by-side comparison of several pair streams.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonRow {
    /// The run's name.
    pub label: String,
    /// Pair precision (all rounds pooled; labels: at the end).
    pub precision: f64,
    /// Pair recall.
    pub recall: f64,
    /// Pair F1.
    pub f1: f64,
    /// Same-site precision (truth only).
    pub same_site_precision: Option<f64>,
    /// Different-site precision (truth only).
    pub different_site_precision: Option<f64>,
    /// The smallest precision of a round (truth only).
    pub min_precision: Option<f64>,
    /// The smallest recall of a round (truth only).
    pub min_recall: Option<f64>,
    /// Share of the listed hard-negative pairs reported (truth only).
    pub hard_negatives_reported: Option<f64>,
}

impl ComparisonRow {
    fn of(r: &Report) -> Self {
        match r {
            Report::Truth(t) => ComparisonRow {
                label: t.label.clone(),
                precision: t.overall.precision,
                recall: t.overall.recall,
                f1: t.overall.f1,
                same_site_precision: Some(t.overall.same_site.precision),
                different_site_precision: Some(t.overall.different_site.precision),
                min_precision: Some(t.min_precision),
                min_recall: Some(t.min_recall),
                hard_negatives_reported: Some(t.overall.hard_negative_pairs.fraction),
            },
            Report::Labels(l) => ComparisonRow {
                label: l.label.clone(),
                precision: l.labels.precision,
                recall: l.labels.recall,
                f1: l.labels.f1,
                same_site_precision: None,
                different_site_precision: None,
                min_precision: None,
                min_recall: None,
                hard_negatives_reported: None,
            },
        }
    }
}

fn render_comparison(rows: &[ComparisonRow]) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.4}"));
    let mut s = String::from("side by side (all rounds pooled):\n");
    let _ = writeln!(
        s,
        "{:<28}{:>10}{:>10}{:>8}{:>11}{:>11}{:>10}{:>10}{:>10}",
        "run", "precision", "recall", "f1", "same-site", "diff-site", "min P", "min R", "hard neg"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<28}{:>10.4}{:>10.4}{:>8.4}{:>11}{:>11}{:>10}{:>10}{:>10}",
            r.label,
            r.precision,
            r.recall,
            r.f1,
            opt(r.same_site_precision),
            opt(r.different_site_precision),
            opt(r.min_precision),
            opt(r.min_recall),
            opt(r.hard_negatives_reported)
        );
    }
    s
}

/// `name` in the directory of the pairs file, if it exists (`.gz` too).
fn beside(pairs: &Path, name: &str) -> Option<PathBuf> {
    let dir = pairs.parent()?;
    [name.to_owned(), format!("{name}.gz")]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The pairs file `path` names: the file itself, or `path/pairs.jsonl` for a directory.
pub fn pairs_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("pairs.jsonl")
    } else {
        path.to_owned()
    }
}

/// Scores the pair events in `pairs` (a file or a replay output directory) against `reference`.
///
/// With a truth, the `clusters.jsonl` and `recrawl.jsonl` beside the pairs file (a replay's
/// output directory holds all three) are scored too; `cluster_level` is the cluster level scored.
pub fn evaluate_files(
    reference: &Reference,
    pairs: &Path,
    label: String,
    cluster_level: &str,
) -> Result<Report> {
    let pairs = pairs_file(pairs);
    let mut interner = Interner::default();
    match reference {
        Reference::Truth(path) => {
            let file = File::open(path)
                .with_context(|| format!("cannot open truth file {}", path.display()))?;
            let truth = Truth::read(BufReader::with_capacity(1 << 20, file), &mut interner)
                .with_context(|| format!("reading truth file {}", path.display()))?;
            let reader = open_lines(&pairs)?;
            let mut report = evaluate_truth(&truth, &mut interner, reader)
                .with_context(|| format!("reading pairs file {}", pairs.display()))?;
            report.label = label;
            if let Some(path) = beside(&pairs, "clusters.jsonl") {
                let reader = open_lines(&path)?;
                report.clusters = Some(
                    clusters::evaluate_clusters(&truth, &mut interner, reader, cluster_level)
                        .with_context(|| format!("reading clusters file {}", path.display()))?,
                );
            }
            if let Some(path) = beside(&pairs, "recrawl.jsonl") {
                let reader = open_lines(&path)?;
                report.hints = Some(
                    clusters::evaluate_hints(&truth, &mut interner, reader)
                        .with_context(|| format!("reading recrawl file {}", path.display()))?,
                );
            }
            let mirrors = beside(&pairs, "mirrors.jsonl");
            let collections = beside(&pairs, "collections.jsonl")
                .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0));
            if mirrors.is_some() || collections.is_some() {
                let file = File::open(path)
                    .with_context(|| format!("cannot open truth file {}", path.display()))?;
                let host_truth = hosts::HostTruth::read(BufReader::with_capacity(1 << 20, file))
                    .with_context(|| format!("reading the host parts of {}", path.display()))?;
                if let Some(path) = mirrors {
                    report.mirrors = Some(
                        hosts::evaluate_mirrors(
                            &truth,
                            &host_truth,
                            open_lines(&path)?,
                            MIN_SHARED,
                        )
                        .with_context(|| format!("reading mirrors file {}", path.display()))?,
                    );
                }
                if let Some(path) = collections {
                    report.collections = Some(
                        hosts::evaluate_collections(&truth, &host_truth, open_lines(&path)?)
                            .with_context(|| {
                                format!("reading collections file {}", path.display())
                            })?,
                    );
                }
            }
            Ok(Report::Truth(Box::new(report)))
        }
        Reference::Labels(path) => {
            let file = File::open(path)
                .with_context(|| format!("cannot open labels file {}", path.display()))?;
            let labels = read_labels(BufReader::with_capacity(1 << 20, file), &mut interner)
                .with_context(|| format!("reading labels file {}", path.display()))?;
            let reader = open_lines(&pairs)?;
            let mut report = evaluate_labels(&labels, &mut interner, reader)
                .with_context(|| format!("reading pairs file {}", pairs.display()))?;
            report.label = label;
            Ok(Report::Labels(Box::new(report)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUTH: &str = r#"{
      "format": "neardup-bench.truth/v1",
      "generator": {"scale": "tiny"},
      "rounds": [
        {"crawl_id": "week-01", "start": "2026-11-02T00:00:00Z", "pages": 9,
         "near_duplicate_groups": [
           {"id": "nd:g1", "kind": "mirror", "size": 3, "ref": "http://www.a.example/p",
            "urls": ["http://www.a.example/p", "http://b.example/p", "http://c.example/p"],
            "diffs": {}, "jaccard_to_ref": {"http://b.example/p": 0.85, "http://c.example/p": 0.97}}
         ],
         "exact_duplicate_groups": [["http://www.a.example/p", "http://c.example/p"]],
         "hard_negative_pairs": [
           {"urls": ["http://shop.example/1", "http://shop.example/2"],
            "reason": "same_template_different_main_item", "jaccard": 0.8}
         ],
         "hard_negative_groups": [
           {"reason": "same_template_different_main_item", "site": "shop",
            "urls": ["http://shop.example/1", "http://shop.example/2", "http://shop.example/3"]}
         ],
         "jaccard_sample": [{"a": "x", "b": "y", "shingles": [1, 2]}]},
        {"crawl_id": "week-02", "start": "2026-11-09T00:00:00Z",
         "near_duplicate_groups": [
           {"id": "nd:g1", "kind": "mirror", "size": 2, "ref": "http://www.a.example/p",
            "urls": ["http://www.a.example/p", "http://c.example/p"], "jaccard_to_ref": {}},
           {"id": "nd:g2", "kind": "session_id", "size": 2, "ref": "http://w.example/x?sid=1",
            "urls": ["http://w.example/x?sid=1", "http://w.example/x?sid=2"],
            "jaccard_to_ref": {"http://w.example/x?sid=2": 0.65}}
         ],
         "exact_duplicate_groups": [],
         "hard_negative_pairs": [],
         "hard_negative_groups": []},
        {"crawl_id": "week-03", "start": "2026-11-16T00:00:00Z",
         "near_duplicate_groups": [], "exact_duplicate_groups": [],
         "hard_negative_pairs": [], "hard_negative_groups": []}
      ]
    }"#;

    fn ev(state: &str, a: &str, b: &str, level: &str, crawl: &str) -> String {
        format!(
            r#"{{"schema":"neardup.pairs/v1","event_id":"e","state":"{state}","a":"{a}","b":"{b}","level":"{level}","b_similarity":6,"c_similarity":384,"jaccard":0.9,"same_site":false,"at":"2026-11-02T10:15:00Z","crawl_id":"{crawl}"}}"#
        )
    }

    const A: &str = "http://www.a.example/p";
    const B: &str = "http://b.example/p";
    const C: &str = "http://c.example/p";
    const S1: &str = "http://shop.example/1";
    const S2: &str = "http://shop.example/2";
    const S3: &str = "http://shop.example/3";
    const W1: &str = "http://w.example/x?sid=1";
    const W2: &str = "http://w.example/x?sid=2";

    fn stream() -> String {
        [
            // week-01: a~c exact, a~b, b~c detected then retracted, s1~s2 (a listed hard
            // negative), s1~s3 retracted again, c~s3 (unlabelled), level update of a~b.
            ev("detected", C, A, "exact", "week-01"),
            ev("detected", A, B, "very_similar", "week-01"),
            ev("detected", B, C, "very_similar", "week-01"),
            ev("detected", S1, S2, "very_similar", "week-01"),
            ev("retracted", B, C, "very_similar", "week-01"),
            ev("detected", S1, S3, "very_similar", "week-01"),
            ev("detected", A, B, "virtually_identical", "week-01"),
            ev("retracted", S1, S3, "very_similar", "week-01"),
            ev(
                "retracted",
                A,
                "http://nowhere.example/",
                "very_similar",
                "week-01",
            ),
            // week-02: b leaves the group; the session-id pair is found.
            ev("retracted", A, B, "virtually_identical", "week-02"),
            ev("detected", W1, W2, "very_similar", "week-02"),
        ]
        .join("\n")
    }

    fn run_truth(stream: &str) -> TruthReport {
        let mut interner = Interner::default();
        let truth = Truth::read(TRUTH.as_bytes(), &mut interner).unwrap();
        evaluate_truth(&truth, &mut interner, stream.as_bytes()).unwrap()
    }

    #[test]
    fn site_rule_of_seed_001() {
        assert_eq!(site("http://www.cs.Berkeley.EDU:8080/x"), "cs.berkeley.edu");
        assert_eq!(site("https://user:pw@berkeley.edu/"), "berkeley.edu");
        assert_eq!(site("http://localhost/"), "localhost");
        assert_eq!(site("http://[::1]:80/"), "::1");
        assert_eq!(site("http://www1.portal.example/a"), "portal.example");
    }

    #[test]
    fn scores_each_round_from_its_snapshot() {
        let r = run_truth(&stream());
        assert_eq!(r.pair_events.lines, 11);
        assert_eq!(r.pair_events.detected, 7);
        assert_eq!(r.pair_events.retracted, 4);
        assert_eq!(r.pair_events.level_updates, 1);
        assert_eq!(r.pair_events.retracted_not_live, 1);
        assert!(r.unmatched_crawl_ids.is_empty());

        // week-01: live {a~c exact, a~b virtually_identical, s1~s2}; b~c and s1~s3 retracted.
        let w1 = &r.rounds[0];
        assert_eq!(w1.crawl_id, "week-01");
        assert!(!w1.carried_over);
        let m = &w1.metrics;
        assert_eq!((m.predicted, m.truth, m.true_positives), (3, 3, 2));
        assert!((m.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.recall - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.f1 - 2.0 / 3.0).abs() < 1e-12);
        // Sites: every group pair spans two sites; s1~s2 is same-site.
        assert_eq!(
            (
                m.same_site.predicted,
                m.same_site.truth,
                m.same_site.true_positives
            ),
            (1, 0, 0)
        );
        assert_eq!(m.same_site.precision, 0.0);
        assert_eq!(m.same_site.recall, 1.0);
        assert_eq!((m.different_site.predicted, m.different_site.truth), (2, 3));
        assert_eq!(m.different_site.precision, 1.0);
        // Similarities: a~b 0.85, a~c 0.97, b~c min(0.85, 0.97) = 0.85 (the retracted one).
        let b: Vec<(u64, u64)> = m
            .recall_by_similarity
            .iter()
            .map(|b| (b.truth, b.found))
            .collect();
        assert_eq!(b, vec![(0, 0), (0, 0), (2, 1), (0, 0), (1, 1)]);
        assert_eq!(m.recall_by_similarity[2].recall, 0.5);
        assert_eq!(m.recall_by_similarity[0].recall, 1.0);
        assert_eq!(
            (m.exact.truth, m.exact.found, m.exact.found_as_exact),
            (1, 1, 1)
        );
        let h = &m.hard_negative_pairs;
        assert_eq!((h.listed, h.reported, h.fraction), (1, 1, 1.0));
        assert_eq!(h.by_reason["same_template_different_main_item"].reported, 1);
        // s1~s2 is a listed pair, not counted again as a group pair; s1~s3 was retracted.
        assert_eq!(m.hard_negative_group_pairs.reported, 0);
        assert_eq!(m.unlabelled_false_positives, 0);
        assert_eq!(m.by_level.exact.predicted, 1);
        assert_eq!(m.by_level.virtually_identical.predicted, 1);
        assert_eq!(m.by_level.virtually_identical.true_positives, 1);
        assert_eq!(m.by_level.very_similar.predicted, 1);
        assert_eq!(m.by_level.very_similar.precision, 0.0);
        assert_eq!(w1.examples.len(), 1);
        assert_eq!(
            (
                w1.examples[0].a.as_str(),
                w1.examples[0].kind,
                w1.examples[0].reason.as_deref()
            ),
            (
                S1,
                "hard_negative_pair",
                Some("same_template_different_main_item")
            )
        );

        // week-02: live {a~c, s1~s2, w1~w2}; truth {a~c, w1~w2}. The session-id pair was not
        // in the round-1 snapshot.
        let m = &r.rounds[1].metrics;
        assert_eq!((m.predicted, m.truth, m.true_positives), (3, 2, 2));
        assert_eq!(m.recall, 1.0);
        assert!((m.precision - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.recall_by_similarity[0].truth, 1); // 0.65
        assert_eq!(m.recall_by_similarity[0].found, 1);
        // s1~s2 is no longer a listed hard negative and no group holds it: unlabelled.
        assert_eq!(m.unlabelled_false_positives, 1);
        assert_eq!(m.hard_negative_pairs.listed, 0);
        assert_eq!(m.hard_negative_pairs.fraction, 0.0);
        // a~c is not an exact group in week-02.
        assert_eq!(m.exact.truth, 0);
        assert_eq!(m.exact.found, 0);

        // week-03 has no events: the live set carries over; the empty truth makes all 3 false.
        let w3 = &r.rounds[2];
        assert!(w3.carried_over);
        assert_eq!((w3.metrics.predicted, w3.metrics.truth), (3, 0));
        assert_eq!(w3.metrics.precision, 0.0);
        assert_eq!(w3.metrics.recall, 1.0);
        assert_eq!(w3.metrics.unlabelled_false_positives, 3);

        // Pooled: predicted 9, truth 5, tp 4.
        let o = &r.overall;
        assert_eq!((o.predicted, o.truth, o.true_positives), (9, 5, 4));
        assert!((o.precision - 4.0 / 9.0).abs() < 1e-12);
        assert!((o.recall - 4.0 / 5.0).abs() < 1e-12);
        assert_eq!(r.min_precision, 0.0);
        assert!((r.min_recall - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn hard_negative_group_pairs_and_unknown_rounds() {
        let s = [
            ev("detected", S2, S3, "very_similar", "week-01"),
            ev("detected", A, S3, "very_similar", "week-00"),
        ]
        .join("\n");
        let r = run_truth(&s);
        let m = &r.rounds[0].metrics;
        assert_eq!(m.predicted, 1);
        assert_eq!(m.hard_negative_group_pairs.reported, 1);
        assert_eq!(
            m.hard_negative_group_pairs.by_reason["same_template_different_main_item"],
            1
        );
        assert_eq!(m.hard_negative_pairs.reported, 0);
        assert_eq!(m.unlabelled_false_positives, 0);
        assert_eq!(r.unmatched_crawl_ids, vec!["week-00".to_owned()]);
        // The later rounds carry the final set (both pairs) over.
        assert!(r.rounds[1].carried_over);
        assert_eq!(r.rounds[1].metrics.predicted, 2);
    }

    #[test]
    fn rounds_before_the_first_event_are_empty_and_events_without_crawl_id_go_by_time() {
        let s = [
            r#"{"state":"detected","a":"http://www.a.example/p","b":"http://c.example/p","level":"exact","at":"2026-11-09T05:00:00Z"}"#,
        ]
        .join("\n");
        let r = run_truth(&s);
        assert!(r.rounds[0].carried_over);
        assert_eq!(r.rounds[0].metrics.predicted, 0);
        assert_eq!(r.rounds[0].metrics.precision, 1.0);
        assert_eq!(r.rounds[0].metrics.recall, 0.0);
        assert!(!r.rounds[1].carried_over);
        assert_eq!(r.rounds[1].metrics.true_positives, 1);
        assert_eq!(r.rounds[1].metrics.recall, 0.5);
    }

    #[test]
    fn rejects_other_formats_and_events() {
        let mut interner = Interner::default();
        let bad = TRUTH.replace("neardup-bench.truth/v1", "neardup-bench.truth/v2");
        let err = Truth::read(bad.as_bytes(), &mut interner).err().unwrap();
        assert!(err.to_string().contains("truth/v2"), "{err}");
        let truth = Truth::read(TRUTH.as_bytes(), &mut interner).unwrap();
        let sig = r#"{"schema":"neardup.signatures/v1","url":"x"}"#;
        let err = evaluate_truth(&truth, &mut interner, format!("\n{sig}\n").as_bytes())
            .err()
            .unwrap();
        assert!(format!("{err:#}").starts_with("line 2:"), "{err:#}");
    }

    #[test]
    fn labels_score_the_final_live_set() {
        let labels = [
            format!(r#"{{"a":"{A}","b":"{C}","near_duplicate":true}}"#),
            format!(r#"{{"a":"{B}","b":"{A}","near_duplicate":true}}"#),
            format!(r#"{{"a":"{W1}","b":"{W2}","near_duplicate":true}}"#),
            format!(r#"{{"a":"{S1}","b":"{S2}","near_duplicate":false}}"#),
        ]
        .join("\n");
        let mut interner = Interner::default();
        let labels = read_labels(labels.as_bytes(), &mut interner).unwrap();
        let r = evaluate_labels(&labels, &mut interner, stream().as_bytes()).unwrap();
        let l = &r.labels;
        // Final live set: a~c, s1~s2, w1~w2 (a~b was retracted in week-02).
        assert_eq!((l.labelled, l.positives, l.predicted), (4, 3, 3));
        assert_eq!((l.predicted_labelled, l.predicted_true), (3, 2));
        assert!((l.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((l.recall - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(l.unlabelled_predicted, 0);
        assert_eq!(l.examples.len(), 1);
        assert_eq!(l.examples[0].kind, "labelled_negative");
        assert_eq!(l.by_level.exact.true_positives, 1);
    }

    fn cluster_ev(id: &str, change: &str, added: &[&str], removed: &[&str], at: &str) -> String {
        serde_json::json!({"schema": "neardup.clusters/v1", "event_id": "e", "cluster_id": id,
            "level": "very_similar", "change": change, "size": 0, "added": added,
            "removed": removed, "related": [], "at": at})
        .to_string()
    }

    fn hint_ev(url: &str, hint: &str, canonical: Option<&str>, at: &str) -> String {
        let mut v = serde_json::json!({"schema": "neardup.recrawl/v1", "event_id": "e",
            "url": url, "hint": hint, "cluster_id": "x", "at": at});
        if let Some(c) = canonical {
            v["canonical"] = c.into();
        }
        v.to_string()
    }

    /// Pair F1 and the adjusted Rand index worked out by hand for a three-round stream: a
    /// perfect cluster plus a false one, then the truth's two groups exactly, then a round with
    /// no truth groups and no events (carried over).
    #[test]
    fn clusters_are_scored_by_pair_f1_and_adjusted_rand_index() {
        let mut interner = Interner::default();
        let truth = Truth::read(TRUTH.as_bytes(), &mut interner).unwrap();
        let (t1, t2) = ("2026-11-02T10:00:00Z", "2026-11-09T10:00:00Z");
        let lines = [
            cluster_ev("vs-x", "created", &[A, B], &[], t1),
            cluster_ev("vs-x", "joined", &[C], &[], t1),
            cluster_ev("vs-x", "canonical_changed", &[], &[], t1),
            cluster_ev("vs-y", "created", &[S1, S2], &[], t1),
            // A level this evaluation does not score.
            cluster_ev("vi-q", "created", &[S1, S3], &[], t1)
                .replace("very_similar", "virtually_identical"),
            cluster_ev("vs-x", "left", &[], &[B], t2),
            cluster_ev("vs-y", "dissolved", &[], &[S1, S2], t2),
            cluster_ev("vs-z", "created", &[W1, W2], &[], t2),
        ]
        .join("\n");
        let r =
            clusters::evaluate_clusters(&truth, &mut interner, lines.as_bytes(), "very_similar")
                .unwrap();
        assert_eq!(r.events, 8);
        let w1 = &r.rounds[0];
        assert_eq!(
            (w1.clusters, w1.clustered_pages, w1.truth_groups),
            (2, 5, 1)
        );
        assert_eq!(
            (w1.predicted_pairs, w1.truth_pairs, w1.true_positive_pairs),
            (4, 3, 3)
        );
        assert!((w1.pair_f1 - 2.0 * 0.75 / 1.75).abs() < 1e-9, "{w1:?}");
        // N = 9 pages: E = 4 * 3 / 36, ARI = (3 - E) / (3.5 - E).
        let e = 4.0 * 3.0 / 36.0;
        assert!(
            (w1.adjusted_rand_index - (3.0 - e) / (3.5 - e)).abs() < 1e-9,
            "{w1:?}"
        );
        let w2 = &r.rounds[1];
        assert!(!w2.carried_over);
        assert_eq!(
            (w2.predicted_pairs, w2.truth_pairs, w2.true_positive_pairs),
            (2, 2, 2)
        );
        assert_eq!((w2.pair_f1, w2.adjusted_rand_index), (1.0, 1.0));
        let w3 = &r.rounds[2];
        assert!(w3.carried_over);
        assert_eq!(
            (w3.predicted_pairs, w3.truth_pairs, w3.pair_f1),
            (2, 0, 0.0)
        );
        assert_eq!(r.min_pair_f1, 0.0);
    }

    /// Hints: deprioritised URLs are correct when their canonical is in their truth group;
    /// coverage is against every group member but one.
    #[test]
    fn crawl_hints_are_scored_against_the_groups() {
        let mut interner = Interner::default();
        let truth = Truth::read(TRUTH.as_bytes(), &mut interner).unwrap();
        let (t1, t2) = ("2026-11-02T10:00:00Z", "2026-11-09T10:00:00Z");
        let lines = [
            hint_ev(A, "keep", Some(A), t1),
            hint_ev(B, "deprioritize", Some(A), t1),
            hint_ev(C, "deprioritize", Some(A), t1),
            hint_ev(S1, "keep", Some(S1), t1),
            hint_ev(S2, "deprioritize", Some(S1), t1),
            hint_ev(B, "restore", None, t2),
            hint_ev(S1, "restore", None, t2),
            hint_ev(S2, "restore", None, t2),
            hint_ev(W1, "keep", Some(W1), t2),
            hint_ev(W2, "deprioritize", Some(W1), t2),
        ]
        .join("\n");
        let h = clusters::evaluate_hints(&truth, &mut interner, lines.as_bytes()).unwrap();
        let w1 = &h.rounds[0];
        assert_eq!((w1.deprioritized, w1.correct, w1.avoidable), (3, 2, 2));
        assert_eq!(w1.coverage, 1.0);
        let w2 = &h.rounds[1];
        assert_eq!((w2.deprioritized, w2.correct, w2.avoidable), (2, 2, 2));
        assert_eq!((w2.precision, w2.coverage), (1.0, 1.0));
        // A hint without a canonical is an error that names its line.
        let bad = hint_ev(A, "keep", None, t1);
        let err = clusters::evaluate_hints(&truth, &mut interner, bad.as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }
}
