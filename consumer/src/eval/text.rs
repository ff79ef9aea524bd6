//! The report as text: the tables `neardup eval` prints.

use super::{
    hosts, ClustersReport, HintsReport, LabelsReport, Level, PairEvents, Report, RoundReport,
    TruthReport, BUCKETS,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;

impl Report {
    /// Fixed-width tables for a terminal.
    pub fn render(&self) -> String {
        match self {
            Report::Truth(r) => render_truth(r),
            Report::Labels(r) => render_labels(r),
        }
    }
}

pub(super) fn render_events(s: &mut String, e: &PairEvents) {
    let _ = writeln!(
        s,
        "pair events: {} ({} detected, of them {} updates of live pairs; {} retracted, {} of pairs not live)",
        e.lines, e.detected, e.level_updates, e.retracted, e.retracted_not_live
    );
}

pub(super) fn render_truth(r: &TruthReport) -> String {
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

pub(super) fn render_mirrors(s: &mut String, m: &hosts::MirrorsReport) {
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

pub(super) fn render_collections(s: &mut String, c: &hosts::CollectionsReport) {
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

pub(super) fn render_clusters(s: &mut String, c: &ClustersReport) {
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

pub(super) fn render_hints(s: &mut String, h: &HintsReport) {
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

pub(super) fn round_name(r: &RoundReport) -> String {
    round_label(&r.crawl_id, r.carried_over)
}

/// A round's name in the tables: starred when its result carried over.
pub(super) fn round_label(crawl_id: &str, carried_over: bool) -> String {
    if carried_over {
        format!("{crawl_id}*")
    } else {
        crawl_id.to_owned()
    }
}

pub(super) fn render_labels(r: &LabelsReport) -> String {
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
