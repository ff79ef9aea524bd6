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
mod hosts;

pub use clusters::{ClusterRound, ClustersReport, HintRound, HintsReport};

use crate::cli::EvalArgs;
use crate::replay::open_lines;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
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

// ------------------------------------------------------------------------------------------
// URLs and sites
// ------------------------------------------------------------------------------------------

/// An unordered pair of interned URLs, smaller id first.
type Pair = (u32, u32);

fn pair(x: u32, y: u32) -> Pair {
    (x.min(y), x.max(y))
}

/// The host of an absolute URL, without scheme, user info and port (not yet lower-cased).
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split_once(']').map_or(v6, |(h, _)| h);
    }
    host_port.split(':').next().unwrap_or("")
}

/// The site of a URL (seed 001): its lower-cased host if that has at most one dot, else the
/// host minus its first label.
fn site(url: &str) -> String {
    let host = host(url).to_ascii_lowercase();
    if host.bytes().filter(|&b| b == b'.').count() <= 1 {
        host
    } else {
        host.split_once('.')
            .map_or(host.clone(), |(_, s)| s.to_owned())
    }
}

/// URLs and their sites as dense ids.
#[derive(Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    urls: Vec<Box<str>>,
    site_of: Vec<u32>,
    sites: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, url: &str) -> u32 {
        if let Some(&id) = self.ids.get(url) {
            return id;
        }
        let id = u32::try_from(self.urls.len()).expect("fewer than 2^32 URLs");
        let n = self.sites.len() as u32;
        let site = *self.sites.entry(site(url)).or_insert(n);
        self.ids.insert(url.into(), id);
        self.urls.push(url.into());
        self.site_of.push(site);
        id
    }

    fn url(&self, id: u32) -> &str {
        &self.urls[id as usize]
    }

    fn same_site(&self, (x, y): Pair) -> bool {
        self.site_of[x as usize] == self.site_of[y as usize]
    }

    /// The pair as (smaller URL, larger URL) strings.
    fn ordered(&self, (x, y): Pair) -> (String, String) {
        let (a, b) = (self.url(x), self.url(y));
        if a <= b {
            (a.to_owned(), b.to_owned())
        } else {
            (b.to_owned(), a.to_owned())
        }
    }
}

// ------------------------------------------------------------------------------------------
// The truth
// ------------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct TruthDoc {
    format: String,
    rounds: Vec<RoundDoc>,
}

#[derive(Deserialize)]
struct RoundDoc {
    crawl_id: String,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    pages: Option<u64>,
    #[serde(default)]
    near_duplicate_groups: Vec<GroupDoc>,
    #[serde(default)]
    exact_duplicate_groups: Vec<Vec<String>>,
    #[serde(default)]
    hard_negative_pairs: Vec<HardPairDoc>,
    #[serde(default)]
    hard_negative_groups: Vec<HardGroupDoc>,
}

#[derive(Deserialize)]
struct GroupDoc {
    urls: Vec<String>,
    #[serde(default)]
    jaccard_to_ref: HashMap<String, f64>,
}

#[derive(Deserialize)]
struct HardPairDoc {
    urls: Vec<String>,
    reason: String,
}

#[derive(Deserialize)]
struct HardGroupDoc {
    reason: String,
    urls: Vec<String>,
}

/// The parsed truth: one [`RoundTruth`] per round, reasons as ids.
struct Truth {
    rounds: Vec<RoundTruth>,
    reasons: Vec<String>,
}

/// What one round of the truth says, over interned URLs.
struct RoundTruth {
    crawl_id: String,
    /// The first 19 characters of `start` (`YYYY-MM-DDTHH:MM:SS`), for events without a crawl id.
    start: Option<String>,
    /// Pages fetched with content in the round, if the truth says.
    pages: Option<u64>,
    /// URL -> (near-duplicate group, similarity to the group's ref).
    member: HashMap<u32, (u32, f64)>,
    /// URL -> exact-duplicate group.
    exact: HashMap<u32, u32>,
    /// Listed hard-negative pairs -> reason.
    hard_pairs: HashMap<Pair, u16>,
    /// URL -> the hard-negative groups it is in.
    hard_groups_of: HashMap<u32, Vec<u32>>,
    /// Reason of each hard-negative group.
    hard_group_reason: Vec<u16>,
    /// The counts that do not depend on the prediction (truth sizes, listed hard negatives).
    base: Counts,
}

impl Truth {
    fn read(reader: impl Read, interner: &mut Interner) -> Result<Truth> {
        let doc: TruthDoc = serde_json::from_reader(reader)?;
        if doc.format != TRUTH_FORMAT {
            bail!(
                "format is {:?}; this neardup reads {TRUTH_FORMAT:?}",
                doc.format
            );
        }
        if doc.rounds.is_empty() {
            bail!("the truth has no rounds");
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut reason_id = |r: &str| -> u16 {
            match reasons.iter().position(|x| x == r) {
                Some(i) => i as u16,
                None => {
                    reasons.push(r.to_owned());
                    (reasons.len() - 1) as u16
                }
            }
        };
        let mut rounds = Vec::with_capacity(doc.rounds.len());
        for r in doc.rounds {
            let mut t = RoundTruth {
                crawl_id: r.crawl_id,
                start: r.start.map(|s| s.chars().take(19).collect()),
                pages: r.pages,
                member: HashMap::new(),
                exact: HashMap::new(),
                hard_pairs: HashMap::new(),
                hard_groups_of: HashMap::new(),
                hard_group_reason: Vec::new(),
                base: Counts::default(),
            };
            for (g, group) in r.near_duplicate_groups.iter().enumerate() {
                let members: Vec<(u32, f64)> = group
                    .urls
                    .iter()
                    .map(|u| {
                        let sim = group.jaccard_to_ref.get(u).copied().unwrap_or(1.0);
                        (interner.id(u), sim)
                    })
                    .collect();
                for (i, &(x, sx)) in members.iter().enumerate() {
                    t.member.insert(x, (g as u32, sx));
                    for &(y, sy) in &members[i + 1..] {
                        t.base.truth += 1;
                        t.base.site[site_index(interner.same_site((x, y)))].truth += 1;
                        t.base.buckets[bucket(sx.min(sy))].truth += 1;
                    }
                }
            }
            for (g, urls) in r.exact_duplicate_groups.iter().enumerate() {
                for u in urls {
                    t.exact.insert(interner.id(u), g as u32);
                }
                let n = urls.len() as u64;
                t.base.exact.truth += n * n.saturating_sub(1) / 2;
            }
            for hp in &r.hard_negative_pairs {
                let [x, y] = hp.urls.as_slice() else {
                    bail!(
                        "round {}: a hard-negative pair has {} URLs",
                        t.crawl_id,
                        hp.urls.len()
                    );
                };
                let reason = reason_id(&hp.reason);
                if t.hard_pairs
                    .insert(pair(interner.id(x), interner.id(y)), reason)
                    .is_none()
                {
                    t.base.hard_pair(reason).listed += 1;
                }
            }
            for (g, hg) in r.hard_negative_groups.iter().enumerate() {
                t.hard_group_reason.push(reason_id(&hg.reason));
                for u in &hg.urls {
                    let groups = t.hard_groups_of.entry(interner.id(u)).or_default();
                    if groups.last() != Some(&(g as u32)) {
                        groups.push(g as u32);
                    }
                }
            }
            rounds.push(t);
        }
        Ok(Truth { rounds, reasons })
    }

    fn index(&self, crawl_id: &str) -> Option<usize> {
        self.rounds.iter().position(|r| r.crawl_id == crawl_id)
    }

    /// The round of an event without a crawl id: the last round that started at or before `at`.
    fn round_at(&self, at: &str) -> usize {
        let at: String = at.chars().take(19).collect();
        self.rounds
            .iter()
            .rposition(|r| r.start.as_deref().is_some_and(|s| s <= at.as_str()))
            .unwrap_or(0)
    }
}

fn site_index(same_site: bool) -> usize {
    if same_site {
        0
    } else {
        1
    }
}

fn bucket(similarity: f64) -> usize {
    BUCKETS
        .iter()
        .position(|&(upper, _)| similarity < upper)
        .unwrap_or(BUCKETS.len() - 1)
}

// ------------------------------------------------------------------------------------------
// The pair stream
// ------------------------------------------------------------------------------------------

/// A pair's clustering level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Byte-identical bodies.
    Exact,
    /// 6 of 6 supershingles agree.
    VirtuallyIdentical,
    /// At least the policy's threshold.
    VerySimilar,
}

impl Level {
    const ALL: [Level; 3] = [Level::Exact, Level::VirtuallyIdentical, Level::VerySimilar];

    fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::VirtuallyIdentical => "virtually_identical",
            Level::VerySimilar => "very_similar",
        }
    }
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum State {
    Detected,
    Retracted,
}

/// The fields of a pair event this evaluation reads; others are ignored.
#[derive(Deserialize)]
struct PairLine<'a> {
    #[serde(default, borrow)]
    schema: Option<Cow<'a, str>>,
    state: State,
    #[serde(borrow)]
    a: Cow<'a, str>,
    #[serde(borrow)]
    b: Cow<'a, str>,
    level: Level,
    #[serde(default)]
    jaccard: Option<f64>,
    #[serde(default, borrow)]
    at: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    crawl_id: Option<Cow<'a, str>>,
}

/// A live pair.
#[derive(Debug, Clone, Copy)]
struct Live {
    level: Level,
    jaccard: Option<f32>,
}

/// Counts of the events read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PairEvents {
    /// Non-blank lines.
    pub lines: u64,
    /// `detected` events.
    pub detected: u64,
    /// `retracted` events.
    pub retracted: u64,
    /// `detected` events for a pair already live.
    pub level_updates: u64,
    /// `retracted` events for a pair that was not live.
    pub retracted_not_live: u64,
}

/// The live pair set, fed one line at a time.
#[derive(Default)]
struct LiveSet {
    live: HashMap<Pair, Live>,
    events: PairEvents,
}

impl LiveSet {
    /// Applies one parsed event.
    fn apply(&mut self, ev: &PairLine<'_>, interner: &mut Interner) {
        let key = pair(interner.id(&ev.a), interner.id(&ev.b));
        self.events.lines += 1;
        match ev.state {
            State::Detected => {
                self.events.detected += 1;
                let value = Live {
                    level: ev.level,
                    jaccard: ev.jaccard.map(|j| j as f32),
                };
                if self.live.insert(key, value).is_some() {
                    self.events.level_updates += 1;
                }
            }
            State::Retracted => {
                self.events.retracted += 1;
                if self.live.remove(&key).is_none() {
                    self.events.retracted_not_live += 1;
                }
            }
        }
    }
}

/// Only the schema of an event, to say clearly that a line is not a pair event.
#[derive(Deserialize)]
struct SchemaPeek<'a> {
    #[serde(default, borrow)]
    schema: Option<Cow<'a, str>>,
}

const PAIRS_SCHEMA: &str = "neardup.pairs/v1";

/// Parses one line of a pairs file.
fn parse_pair(line: &[u8]) -> Result<PairLine<'_>> {
    let schema = |s: &str| format!("schema is {s:?}, not {PAIRS_SCHEMA:?}: is this a pairs file?");
    match serde_json::from_slice::<PairLine>(line) {
        Ok(ev) => match &ev.schema {
            Some(s) if s != PAIRS_SCHEMA => bail!(schema(s)),
            _ => Ok(ev),
        },
        Err(e) => match serde_json::from_slice::<SchemaPeek>(line) {
            Ok(SchemaPeek { schema: Some(s) }) if s != PAIRS_SCHEMA => bail!(schema(&s)),
            _ => Err(e.into()),
        },
    }
}

/// Calls `f` on every non-blank line of `reader`; stops at the first error, naming its line.
fn each_line(mut reader: impl BufRead, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading after line {line_no}"))?
            == 0
        {
            return Ok(());
        }
        line_no += 1;
        let line = buf.trim_ascii();
        if !line.is_empty() {
            f(line).with_context(|| format!("line {line_no}"))?;
        }
    }
}

// ------------------------------------------------------------------------------------------
// Counting
// ------------------------------------------------------------------------------------------

/// Predicted, truth and true-positive counts.
#[derive(Debug, Clone, Copy, Default)]
struct Prc {
    predicted: u64,
    truth: u64,
    tp: u64,
}

/// Truth pairs and found ones in one similarity stratum.
#[derive(Debug, Clone, Copy, Default)]
struct Found {
    truth: u64,
    found: u64,
}

/// Listed and reported hard-negative pairs of one reason.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Listed {
    /// Pairs the truth lists.
    pub listed: u64,
    /// Of them, pairs in the prediction.
    pub reported: u64,
}

/// Raw counts of one round (or of several, added up).
#[derive(Debug, Clone, Default)]
struct Counts {
    predicted: u64,
    truth: u64,
    tp: u64,
    /// Same site, different site.
    site: [Prc; 2],
    buckets: [Found; BUCKETS.len()],
    exact: ExactCounts,
    /// By reason id.
    hard_pairs: Vec<Listed>,
    /// By reason id.
    hard_group_pairs: Vec<u64>,
    /// Predicted and true positives by [`Level`].
    levels: [(u64, u64); 3],
    unlabelled: u64,
}

/// Exact-duplicate pairs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ExactCounts {
    /// Pairs inside the truth's exact-duplicate groups.
    pub truth: u64,
    /// Of them, pairs in the prediction (any level).
    pub found: u64,
    /// Of those, pairs predicted with level `exact`.
    pub found_as_exact: u64,
}

impl Counts {
    fn hard_pair(&mut self, reason: u16) -> &mut Listed {
        let r = reason as usize;
        if self.hard_pairs.len() <= r {
            self.hard_pairs.resize(r + 1, Listed::default());
        }
        &mut self.hard_pairs[r]
    }

    fn hard_group_pair(&mut self, reason: u16) -> &mut u64 {
        let r = reason as usize;
        if self.hard_group_pairs.len() <= r {
            self.hard_group_pairs.resize(r + 1, 0);
        }
        &mut self.hard_group_pairs[r]
    }

    fn add(&mut self, o: &Counts) {
        self.predicted += o.predicted;
        self.truth += o.truth;
        self.tp += o.tp;
        for (s, t) in self.site.iter_mut().zip(&o.site) {
            s.predicted += t.predicted;
            s.truth += t.truth;
            s.tp += t.tp;
        }
        for (s, t) in self.buckets.iter_mut().zip(&o.buckets) {
            s.truth += t.truth;
            s.found += t.found;
        }
        self.exact.truth += o.exact.truth;
        self.exact.found += o.exact.found;
        self.exact.found_as_exact += o.exact.found_as_exact;
        for (r, l) in o.hard_pairs.iter().enumerate() {
            let s = self.hard_pair(r as u16);
            s.listed += l.listed;
            s.reported += l.reported;
        }
        for (r, n) in o.hard_group_pairs.iter().enumerate() {
            *self.hard_group_pair(r as u16) += n;
        }
        for (s, t) in self.levels.iter_mut().zip(&o.levels) {
            s.0 += t.0;
            s.1 += t.1;
        }
        self.unlabelled += o.unlabelled;
    }
}

/// What a false positive is, as far as the truth says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FpKind {
    Unlabelled,
    HardNegativeGroup(u16),
    HardNegativePair(u16),
}

/// Scores one snapshot against one round of the truth.
fn score_round(
    live: &HashMap<Pair, Live>,
    t: &RoundTruth,
    interner: &Interner,
    reasons: &[String],
) -> (Counts, Vec<Example>) {
    let mut c = t.base.clone();
    let mut fps: Vec<(FpKind, Pair, Live)> = Vec::new();
    for (&p, &l) in live {
        let same = interner.same_site(p);
        c.predicted += 1;
        c.site[site_index(same)].predicted += 1;
        c.levels[l.level as usize].0 += 1;
        if let Some(&reason) = t.hard_pairs.get(&p) {
            c.hard_pair(reason).reported += 1;
        }
        let (mx, my) = (t.member.get(&p.0), t.member.get(&p.1));
        if let (Some(&(gx, sx)), Some(&(gy, sy))) = (mx, my) {
            if gx == gy {
                c.tp += 1;
                c.site[site_index(same)].tp += 1;
                c.buckets[bucket(sx.min(sy))].found += 1;
                c.levels[l.level as usize].1 += 1;
                if let (Some(ex), Some(ey)) = (t.exact.get(&p.0), t.exact.get(&p.1)) {
                    if ex == ey {
                        c.exact.found += 1;
                        if l.level == Level::Exact {
                            c.exact.found_as_exact += 1;
                        }
                    }
                }
                continue;
            }
        }
        // A false positive: which truth list, if any, names it?
        let kind = if let Some(&reason) = t.hard_pairs.get(&p) {
            FpKind::HardNegativePair(reason)
        } else if let Some(g) = common_group(t, p) {
            let reason = t.hard_group_reason[g as usize];
            *c.hard_group_pair(reason) += 1;
            FpKind::HardNegativeGroup(reason)
        } else {
            c.unlabelled += 1;
            FpKind::Unlabelled
        };
        fps.push((kind, p, l));
    }
    // Examples: unlabelled first (the ones the truth cannot explain), then the most similar.
    let examples = pick_examples(fps, interner, |k| match k {
        FpKind::Unlabelled => ("unlabelled", None),
        FpKind::HardNegativeGroup(r) => ("hard_negative_group", Some(reasons[r as usize].clone())),
        FpKind::HardNegativePair(r) => ("hard_negative_pair", Some(reasons[r as usize].clone())),
    });
    (c, examples)
}

/// The first hard-negative group holding both URLs of `p` (also counted when one is in a group
/// of a pair listed among `hard_negative_pairs`).
fn common_group(t: &RoundTruth, (x, y): Pair) -> Option<u32> {
    let gx = t.hard_groups_of.get(&x)?;
    let gy = t.hard_groups_of.get(&y)?;
    gx.iter().copied().find(|g| gy.contains(g))
}

/// Up to [`EXAMPLES`] false positives, ordered by kind, then by decreasing Jaccard, then by URL.
fn pick_examples<K: Ord + Copy>(
    mut fps: Vec<(K, Pair, Live)>,
    interner: &Interner,
    describe: impl Fn(K) -> (&'static str, Option<String>),
) -> Vec<Example> {
    let jac = |l: &Live| l.jaccard.map_or(f32::NEG_INFINITY, |j| j);
    let key = |(k, p, l): &(K, Pair, Live)| (*k, -jac(l), interner.ordered(*p));
    let by = |x: &(K, Pair, Live), y: &(K, Pair, Live)| {
        let (kx, jx, ux) = key(x);
        let (ky, jy, uy) = key(y);
        kx.cmp(&ky).then(jx.total_cmp(&jy)).then(ux.cmp(&uy))
    };
    if fps.len() > EXAMPLES {
        fps.select_nth_unstable_by(EXAMPLES - 1, by);
        fps.truncate(EXAMPLES);
    }
    fps.sort_by(by);
    fps.into_iter()
        .map(|(k, p, l)| {
            let (a, b) = interner.ordered(p);
            let (kind, reason) = describe(k);
            Example {
                a,
                b,
                level: l.level,
                jaccard: l.jaccard,
                kind,
                reason,
            }
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// The report
// ------------------------------------------------------------------------------------------

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
    fn new(predicted: u64, truth: u64, tp: u64) -> Prf {
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

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        1.0
    } else {
        n as f64 / d as f64
    }
}

fn f1(p: f64, r: f64) -> f64 {
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
    fn new(levels: &[(u64, u64); 3]) -> ByLevel {
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

    fn get(&self, l: Level) -> &LevelScore {
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
    fn new(c: &Counts, reasons: &[String]) -> Metrics {
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
fn evaluate_truth(
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
struct LabelLine<'a> {
    #[serde(borrow)]
    a: Cow<'a, str>,
    #[serde(borrow)]
    b: Cow<'a, str>,
    near_duplicate: bool,
}

/// Labelled pairs (the last label of a pair wins).
fn read_labels(reader: impl BufRead, interner: &mut Interner) -> Result<HashMap<Pair, bool>> {
    let mut labels = HashMap::new();
    each_line(reader, |line| {
        let l: LabelLine = serde_json::from_slice(line)?;
        labels.insert(pair(interner.id(&l.a), interner.id(&l.b)), l.near_duplicate);
        Ok(())
    })?;
    Ok(labels)
}

/// Reads the pair stream and scores its final live set against `labels`.
fn evaluate_labels(
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

// ------------------------------------------------------------------------------------------
// Text output
// ------------------------------------------------------------------------------------------

impl Report {
    /// Fixed-width tables for a terminal.
    pub fn render(&self) -> String {
        match self {
            Report::Truth(r) => render_truth(r),
            Report::Labels(r) => render_labels(r),
        }
    }
}

fn render_events(s: &mut String, e: &PairEvents) {
    let _ = writeln!(
        s,
        "pair events: {} ({} detected, of them {} updates of live pairs; {} retracted, {} of pairs not live)",
        e.lines, e.detected, e.level_updates, e.retracted, e.retracted_not_live
    );
}

fn render_truth(r: &TruthReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "neardup eval: {}", r.label);
    render_events(&mut s, &r.pair_events);
    if !r.unmatched_crawl_ids.is_empty() {
        let _ = writeln!(
            s,
            "crawl ids not in the truth (not scored): {}",
            r.unmatched_crawl_ids.join(", ")
        );
    }
    let named = r
        .rounds
        .iter()
        .map(|x| (round_name(x), &x.metrics))
        .chain([("overall".to_owned(), &r.overall)])
        .collect::<Vec<_>>();

    let _ = writeln!(
        s,
        "\n{:<16}{:>10}{:>10}{:>10}{:>10}{:>8}{:>8}  {:>17}  {:>17}",
        "round",
        "predicted",
        "truth",
        "tp",
        "precision",
        "recall",
        "f1",
        "same-site P/R",
        "diff-site P/R"
    );
    for (name, m) in &named {
        let _ = writeln!(
            s,
            "{:<16}{:>10}{:>10}{:>10}{:>10.4}{:>8.4}{:>8.4}  {:>8.4}/{:<8.4}  {:>8.4}/{:<8.4}",
            name,
            m.predicted,
            m.truth,
            m.true_positives,
            m.precision,
            m.recall,
            m.f1,
            m.same_site.precision,
            m.same_site.recall,
            m.different_site.precision,
            m.different_site.recall
        );
    }
    let _ = writeln!(
        s,
        "min precision {:.4}, min recall {:.4} (over rounds)",
        r.min_precision, r.min_recall
    );

    let _ = writeln!(
        s,
        "\nrecall by similarity (the lower Jaccard to the group's ref): found/truth recall"
    );
    let _ = write!(s, "{:<16}", "round");
    for (_, b) in BUCKETS {
        let _ = write!(s, "{b:>22}");
    }
    s.push('\n');
    for (name, m) in &named {
        let _ = write!(s, "{name:<16}");
        for b in &m.recall_by_similarity {
            let _ = write!(
                s,
                "{:>22}",
                format!("{}/{} {:.4}", b.found, b.truth, b.recall)
            );
        }
        s.push('\n');
    }

    let _ = writeln!(
        s,
        "\nexact duplicates and levels (level: predicted, precision)"
    );
    let _ = write!(
        s,
        "{:<16}{:>12}{:>10}{:>10}",
        "round", "exact truth", "found", "as exact"
    );
    for l in Level::ALL {
        let _ = write!(s, "{:>26}", l.name());
    }
    s.push('\n');
    for (name, m) in &named {
        let _ = write!(
            s,
            "{:<16}{:>12}{:>10}{:>10}",
            name, m.exact.truth, m.exact.found, m.exact.found_as_exact
        );
        for l in Level::ALL {
            let x = m.by_level.get(l);
            let _ = write!(s, "{:>26}", format!("{} {:.4}", x.predicted, x.precision));
        }
        s.push('\n');
    }

    let _ = writeln!(s, "\nhard negatives and unlabelled false positives");
    let _ = writeln!(
        s,
        "{:<16}{:>10}{:>10}{:>10}{:>14}{:>16}",
        "round", "listed", "reported", "fraction", "group pairs", "unlabelled FP"
    );
    for (name, m) in &named {
        let h = &m.hard_negative_pairs;
        let _ = writeln!(
            s,
            "{:<16}{:>10}{:>10}{:>10.4}{:>14}{:>16}",
            name,
            h.listed,
            h.reported,
            h.fraction,
            m.hard_negative_group_pairs.reported,
            m.unlabelled_false_positives
        );
    }
    let reasons: BTreeSet<&String> = r
        .overall
        .hard_negative_pairs
        .by_reason
        .keys()
        .chain(r.overall.hard_negative_group_pairs.by_reason.keys())
        .collect();
    if !reasons.is_empty() {
        let _ = writeln!(
            s,
            "all rounds, by reason: listed pairs reported/listed, group pairs reported"
        );
        for reason in reasons {
            let l = r.overall.hard_negative_pairs.by_reason.get(reason);
            let g = r.overall.hard_negative_group_pairs.by_reason.get(reason);
            let _ = writeln!(
                s,
                "  {:<38}{:>16}{:>10}",
                reason,
                l.map_or("-".to_owned(), |l| format!("{}/{}", l.reported, l.listed)),
                g.map_or("-".to_owned(), u64::to_string)
            );
        }
    }
    if let Some(c) = &r.clusters {
        render_clusters(&mut s, c);
    }
    if let Some(h) = &r.hints {
        render_hints(&mut s, h);
    }
    if let Some(m) = &r.mirrors {
        render_mirrors(&mut s, m);
    }
    if let Some(c) = &r.collections {
        render_collections(&mut s, c);
    }
    s
}

fn render_mirrors(s: &mut String, m: &hosts::MirrorsReport) {
    let _ = writeln!(
        s,
        "\nmirrored hosts ({} events): truth pairs with >= {} shared pages; aliases and auto-mirrors must not be mirrors",
        m.events, m.min_shared
    );
    let _ = writeln!(
        s,
        "{:<16}{:>7}{:>7}{:>8}{:>10}{:>10}{:>10}{:>10}{:>9}{:>12}{:>12}",
        "round",
        "truth",
        "found",
        "recall",
        "confirmed",
        "prefixes",
        "reported",
        "precision",
        "aliases",
        "alias/auto",
        "as mirrors"
    );
    for r in &m.rounds {
        let _ = writeln!(
            s,
            "{:<16}{:>7}{:>7}{:>8.4}{:>10}{:>10}{:>10}{:>10.4}{:>9}{:>12}{:>12}",
            round_label(&r.crawl_id, r.carried_over),
            r.truth_mirrors,
            r.found,
            r.recall,
            r.confirmed,
            r.prefixes_right,
            r.reported,
            r.precision,
            format!("{}/{}", r.aliases_reported, r.truth_aliases),
            format!("{}/{}", r.auto_mirrors_reported, r.truth_auto_mirrors),
            r.aliases_as_mirrors + r.auto_mirrors_as_mirrors
        );
    }
}

fn render_collections(s: &mut String, c: &hosts::CollectionsReport) {
    let _ = writeln!(
        s,
        "\nreplicated collections ({} events): each truth collection found once, hosts and pages per host within 10 %",
        c.events
    );
    let _ = writeln!(
        s,
        "{:<16}{:>10}{:>8}{:>12}{:>14}{:>14}",
        "round", "reported", "truth", "found once", "hosts ±10%", "pages ±10%"
    );
    for r in &c.rounds {
        let _ = writeln!(
            s,
            "{:<16}{:>10}{:>8}{:>12}{:>14}{:>14}",
            round_label(&r.crawl_id, r.carried_over),
            r.reported,
            r.truth,
            r.found_once,
            r.hosts_within_10pct,
            r.pages_within_10pct
        );
    }
}

fn render_clusters(s: &mut String, c: &ClustersReport) {
    let _ = writeln!(
        s,
        "\nclusters ({} level; {} cluster events): pairs inside clusters vs inside truth groups",
        c.level, c.events
    );
    let _ = writeln!(
        s,
        "{:<16}{:>10}{:>10}{:>10}{:>10}{:>12}{:>12}{:>10}{:>10}{:>8}{:>8}",
        "round",
        "clusters",
        "pages",
        "groups",
        "pages",
        "pairs",
        "truth",
        "precision",
        "recall",
        "f1",
        "ARI"
    );
    for r in &c.rounds {
        let name = round_label(&r.crawl_id, r.carried_over);
        let _ = writeln!(
            s,
            "{:<16}{:>10}{:>10}{:>10}{:>10}{:>12}{:>12}{:>10.4}{:>10.4}{:>8.4}{:>8.4}",
            name,
            r.clusters,
            r.clustered_pages,
            r.truth_groups,
            r.truth_pages,
            r.predicted_pairs,
            r.truth_pairs,
            r.pair_precision,
            r.pair_recall,
            r.pair_f1,
            r.adjusted_rand_index
        );
    }
    let _ = writeln!(
        s,
        "min pair F1 {:.4}, min adjusted Rand index {:.4} (over rounds)",
        c.min_pair_f1, c.min_adjusted_rand_index
    );
}

fn render_hints(s: &mut String, h: &HintsReport) {
    let _ = writeln!(
        s,
        "\ncrawl hints ({} events): deprioritised URLs in one truth group with their canonical",
        h.events
    );
    let _ = writeln!(
        s,
        "{:<16}{:>14}{:>10}{:>10}{:>12}{:>10}",
        "round", "deprioritised", "correct", "precision", "avoidable", "coverage"
    );
    for r in &h.rounds {
        let name = round_label(&r.crawl_id, r.carried_over);
        let _ = writeln!(
            s,
            "{:<16}{:>14}{:>10}{:>10.4}{:>12}{:>10.4}",
            name, r.deprioritized, r.correct, r.precision, r.avoidable, r.coverage
        );
    }
}

fn round_name(r: &RoundReport) -> String {
    round_label(&r.crawl_id, r.carried_over)
}

/// A round's name in the tables: starred when its result carried over.
fn round_label(crawl_id: &str, carried_over: bool) -> String {
    if carried_over {
        format!("{crawl_id}*")
    } else {
        crawl_id.to_owned()
    }
}

fn render_labels(r: &LabelsReport) -> String {
    let mut s = String::new();
    let l = &r.labels;
    let _ = writeln!(s, "neardup eval: {} (against labelled pairs)", r.label);
    render_events(&mut s, &r.pair_events);
    let _ = writeln!(
        s,
        "labelled pairs {} ({} near-duplicates); live pairs at the end {}, {} of them labelled, {} labelled near-duplicates, {} unlabelled",
        l.labelled, l.positives, l.predicted, l.predicted_labelled, l.predicted_true, l.unlabelled_predicted
    );
    let _ = writeln!(
        s,
        "precision {:.4}  recall {:.4}  f1 {:.4}",
        l.precision, l.recall, l.f1
    );
    for lv in Level::ALL {
        let x = l.by_level.get(lv);
        let _ = writeln!(
            s,
            "  {:<22}{:>10} labelled, precision {:.4}",
            lv.name(),
            x.predicted,
            x.precision
        );
    }
    s
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
