//! The one-screen summary printed at the end of a replay, a demo or a batch run.

use neardup_schemas::OutputKind;
use neardup_topology::sign_cache::SignCacheStats;
use neardup_topology::Topology;
use std::fmt::Write as _;
use std::time::Duration;

/// Renders the summary of a run.
pub fn render(topo: &Topology, elapsed: Duration) -> String {
    let (stats, exact, near) = (topo.stats(), topo.exact_stats(), topo.near_stats());
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mut s = String::new();
    let _ = writeln!(s, "neardup summary");
    let _ = writeln!(
        s,
        "  input records   {:>10}   ({:.0} records/s, {:.1} s)",
        stats.records,
        stats.records as f64 / secs,
        secs
    );
    let _ = writeln!(s, "  pages           {:>10}   (with content)", stats.pages);
    let _ = writeln!(
        s,
        "  no content      {:>10}   (404/410/0, redirects and other 4xx, an instant meta refresh, or an empty body)",
        stats.no_content
    );
    if stats.inconclusive > 0 {
        let _ = writeln!(
            s,
            "  inconclusive    {:>10}   (304/429/5xx: the URL kept the content it had)",
            stats.inconclusive
        );
    }
    if stats.lists_capped > 0 {
        let _ = writeln!(
            s,
            "  lists capped    {:>10}   (signature events of pages with more out-links, chunks or paragraphs than an event carries; each says how many it left out)",
            stats.lists_capped
        );
    }
    let _ = writeln!(
        s,
        "  pages/s         {:>10.0}",
        (stats.pages + stats.no_content + stats.inconclusive) as f64 / secs
    );
    if stats.late_records > 0 {
        let _ = writeln!(
            s,
            "  late records    {:>10}   (of a crawl round that had ended when they came: processed, but they end no round)",
            stats.late_records
        );
    }
    if stats.repeats_skipped > 0 {
        let _ = writeln!(
            s,
            "  repeats skipped {:>10}   (records the previous stage sent again)",
            stats.repeats_skipped
        );
    }
    if topo.event_time_leaps() > 0 {
        let _ = writeln!(
            s,
            "  event-time leaps{:>10}   records dated too far ahead of the others to move the windows (--max-event-time-lead): check the crawler's clocks",
            topo.event_time_leaps()
        );
    }
    let _ = writeln!(s, "  dead letters    {:>10}", stats.dead_letter_total());
    for (reason, n) in &stats.dead_letters {
        let _ = writeln!(s, "    {:<22}{:>8}", reason.as_str(), n);
    }
    let _ = writeln!(
        s,
        "  pairs           {:>10}   detected, {} retracted, {} live at the end",
        near.detected, near.retracted, near.live_pairs
    );
    let _ = writeln!(
        s,
        "  sketch window   {:>10}   pages (evicted by time {}, by budget {}; {} candidates verified)",
        near.pages, near.evicted_by_time, near.evicted_by_budget, near.verified
    );
    let _ = writeln!(
        s,
        "  exact clusters  {:>10}   (alive at the end)",
        exact.clusters
    );
    let hints = topo.hint_stats();
    let _ = writeln!(
        s,
        "  crawl hints     {:>10}   URLs deprioritised now ({:.1} % of the window's {} URLs), {} canonical kept, {} restored",
        hints.deprioritized,
        100.0 * hints.deprioritized as f64 / exact.urls.max(1) as f64,
        exact.urls,
        hints.kept,
        hints.restored
    );
    let _ = writeln!(
        s,
        "  window          {:>10}   URLs (evicted {}, stale fetches ignored {})",
        exact.urls, exact.evicted, exact.stale
    );
    let _ = writeln!(s, "  outputs by topic");
    for kind in OutputKind::ALL {
        let n = stats.outputs.get(&kind).copied().unwrap_or(0);
        let _ = writeln!(s, "    {:<22}{:>8}", kind.short_name(), n);
    }
    s
}

/// The sign cache's line of a summary (empty when nothing was signed).
pub fn sign_cache(s: &SignCacheStats) -> String {
    let looked_up = s.hits + s.misses;
    if looked_up == 0 {
        return String::new();
    }
    let mut line = format!(
        "  signed          {:>10}   ({} more, {:.1} %, were fetched again unchanged and took their signatures from the sign cache; it holds {} URLs in {:.1} MiB",
        s.misses,
        s.hits,
        100.0 * s.hits as f64 / looked_up as f64,
        s.entries,
        s.bytes as f64 / (1 << 20) as f64
    );
    if s.refused > 0 {
        let _ = write!(
            line,
            "; {} pages found it full of recent ones: raise --sign-cache to hold a crawl cycle",
            s.refused
        );
    }
    line + ")\n"
}
