//! The replay report: `OUT/report.json` (stable field names, schema `neardup.report/v1`) and
//! `OUT/report.html`, one self-contained page (inline SVG charts and CSS, no network, no
//! script needed to read it) with the seeds' views of a crawl:
//!
//! - the share of near-duplicate pages per round (seed 000 §3);
//! - the cluster-size distribution on log-log axes (seed 000 fig. 1);
//! - the 20 largest clusters with their hosts and a representative URL (seed 000 tables 1–2);
//! - containment Φ and similarity Ψ against round 1, by round-1 cluster size (figs. 4–5);
//! - how pages changed since their previous fetch, per round (fig. 10);
//! - mirrored hosts and replicated collections (seed 000 §4, seed 003 table 2);
//! - duplicates in the connected and disconnected parts of the link graph (seed 004 table 4),
//!   and duplicates and near-duplicates by shingle paragraphs (seed 004 tables 2–3).
//!
//! Like every replay output it depends only on the input: no wall-clock time is written, so
//! the same input gives byte-identical reports. A small inline script only marks, for the
//! tests, how many charts the browser laid out (`<body data-drawn="k/n">`).

use neardup_schemas::{ChangeBucket, MirrorState};
use neardup_topology::evolution::{RoundFigures, BUCKETS};
use neardup_topology::Topology;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// `report.json`'s document.
pub fn json(topo: &Topology, rounds: &[RoundFigures], inputs: &[String]) -> Value {
    let s = topo.stats();
    let near = topo.near_stats();
    let dead: serde_json::Map<String, Value> = s
        .dead_letters
        .iter()
        .map(|(r, n)| (r.as_str().to_owned(), json!(n)))
        .collect();
    let outputs: serde_json::Map<String, Value> = s
        .outputs
        .iter()
        .map(|(k, n)| (k.short_name().to_owned(), json!(n)))
        .collect();
    let mirrors: Vec<Value> = topo
        .mirrors()
        .reported()
        .into_iter()
        .map(|(a, b, state, shared)| json!({"hosts": [a, b], "state": state, "shared": shared}))
        .collect();
    let collections: Vec<Value> = topo
        .collections()
        .current()
        .into_iter()
        .map(|(id, cardinality, size, hosts)| {
            let hosts: Vec<Value> = hosts
                .into_iter()
                .map(|(host, roots, pages)| json!({"host": host, "root_paths": roots, "pages": pages}))
                .collect();
            json!({"id": id, "cardinality": cardinality, "size": size, "hosts": hosts})
        })
        .collect();
    json!({
        "schema": "neardup.report/v1",
        "generated_by": format!("neardup {}", env!("CARGO_PKG_VERSION")),
        "inputs": inputs,
        "parameters": topo.config().params_fingerprint(),
        "totals": {
            "records": s.records,
            "pages": s.pages,
            "no_content": s.no_content,
            "inconclusive": s.inconclusive,
            "lists_capped": s.lists_capped,
            "late_records": s.late_records,
            "dead_letters": dead,
            "outputs": outputs,
            "pairs_detected": s.pairs_detected,
            "window_pages": near.pages,
            "live_pairs": near.live_pairs,
        },
        "round_figures": topo.config().track_evolution,
        "rounds": rounds,
        "mirrors": mirrors,
        "collections": collections,
    })
}

/// `report.html` for the document [`json()`] made.
pub fn html(doc: &Value, rounds: &[RoundFigures]) -> String {
    let mut h = String::new();
    let title = "neardup replay report";
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{CSS}</style></head><body>\n<h1>{title}</h1>\n"
    );
    let inputs: Vec<String> = doc["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(esc))
        .collect();
    let _ = writeln!(
        h,
        "<p class=\"meta\">{} · input: {} · parameters <code>{}</code></p>",
        esc(doc["generated_by"].as_str().unwrap_or("")),
        inputs.join(", "),
        esc(doc["parameters"].as_str().unwrap_or(""))
    );
    totals(&mut h, &doc["totals"]);
    if doc["round_figures"] == false {
        h.push_str("<p>Figures by crawl round skipped (<code>--no-round-figures</code>): the per-round views are empty.</p>\n");
    } else if rounds.is_empty() {
        h.push_str("<p>No crawl rounds: the input's page events carry no <code>crawl_id</code>, so the per-round views are empty.</p>\n");
    }
    let names: Vec<String> = rounds.iter().map(|r| r.crawl_id.clone()).collect();

    section(&mut h, "Near-duplicate pages per round", "Share of the round's pages (fetched with content) that are in a <code>very_similar</code> cluster at the round's end (seed 000 §3).");
    let shares: Vec<f64> = rounds.iter().map(|r| r.near_duplicate_share).collect();
    h.push_str(&bar_chart(&names, &shares, "share of pages", true));
    let late: Vec<String> = (rounds.iter().filter(|r| r.late_events > 0))
        .map(|r| format!("{} {}", esc(&r.crawl_id), r.late_events))
        .collect();
    if !late.is_empty() {
        let _ = writeln!(
            h,
            "<p>Late events, of a round that had ended when they came (a later round had begun), left out of the figures by round: {}.</p>",
            late.join(", ")
        );
    }

    section(&mut h, "Cluster sizes", "Number of clusters of each size, log-log (seed 000 fig. 1); singletons count as clusters of size 1.");
    let series: Vec<(String, Vec<(f64, f64)>)> = rounds
        .iter()
        .map(|r| {
            let pts = r
                .size_distribution
                .iter()
                .map(|(s, n)| (*s as f64, *n as f64))
                .collect();
            (r.crawl_id.clone(), pts)
        })
        .collect();
    h.push_str(&loglog_chart(&series, "cluster size", "clusters"));

    if let Some(last) = rounds.last() {
        section(
            &mut h,
            &format!("The {} largest clusters of {}", last.largest_clusters.len(), esc(&last.crawl_id)),
            "Pages of the round in the cluster, the hosts they are on, and the cluster's canonical URL (seed 000 tables 1–2).",
        );
        h.push_str(
            "<table><tr><th>#</th><th>pages</th><th>hosts</th><th>representative URL</th></tr>\n",
        );
        for (i, c) in last.largest_clusters.iter().enumerate() {
            let more = if c.host_count as usize > c.hosts.len() {
                format!(" and {} more", c.host_count as usize - c.hosts.len())
            } else {
                String::new()
            };
            let hosts: Vec<String> = c.hosts.iter().map(|x| esc(x)).collect();
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td>{} ({}{more})</td><td><code>{}</code></td></tr>",
                i + 1,
                c.size,
                c.host_count,
                hosts.join(", "),
                esc(&c.representative)
            );
        }
        h.push_str("</table>\n");
    }

    if rounds.len() > 1 {
        section(&mut h, "Cluster evolution against round 1", "Mean containment Φ (the share of a URL's round-1 cluster still with it) and similarity Ψ (Jaccard of its round-1 and round-n clusters), by the size of the round-1 cluster (seed 000 figs. 4–5).");
        let later: Vec<String> = names[1..].to_vec();
        for (label, pick) in [("containment Φ", 0usize), ("similarity Ψ", 1usize)] {
            let series: Vec<(String, Vec<Option<f64>>)> = BUCKETS
                .iter()
                .map(|&(lo, hi)| {
                    let name = match (lo, hi) {
                        (a, b) if a == b => format!("size {a}"),
                        (a, u64::MAX) => format!("size {a}+"),
                        (a, b) => format!("size {a}–{b}"),
                    };
                    let vals = rounds[1..]
                        .iter()
                        .map(|r| {
                            r.versus_first.iter().find(|b| b.min_size == lo).map(|b| {
                                if pick == 0 {
                                    b.containment
                                } else {
                                    b.similarity
                                }
                            })
                        })
                        .collect();
                    (name, vals)
                })
                .filter(|(_, v): &(String, Vec<Option<f64>>)| v.iter().any(Option::is_some))
                .collect();
            h.push_str(&line_chart(&later, &series, label));
        }
    }

    section(&mut h, "How pages changed since their previous fetch", "Per round, the share of re-fetched pages in each change bucket of seed 000 fig. 10 (min-values of 84 that agree).");
    let series: Vec<(String, Vec<f64>)> = ChangeBucket::ALL
        .iter()
        .map(|b| {
            let vals = rounds
                .iter()
                .map(|r| *r.change_buckets.get(b).unwrap_or(&0) as f64)
                .collect();
            (b.as_str().replace('_', " "), vals)
        })
        .collect();
    h.push_str(&stacked_chart(&names, &series));

    section(&mut h, "Mirrored hosts", "Host pairs that share near-duplicate clusters (seed 000 §4): candidates, pairs confirmed by URL-suffix evidence, aliases and auto-mirrors (never counted as mirrors).");
    let mirrors = doc["mirrors"].as_array().cloned().unwrap_or_default();
    if mirrors.is_empty() {
        h.push_str("<p>None reported.</p>\n");
    } else {
        h.push_str("<table><tr><th>host</th><th>host</th><th>state</th><th>shared</th></tr>\n");
        for m in &mirrors {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
                esc(m["hosts"][0].as_str().unwrap_or("")),
                esc(m["hosts"][1].as_str().unwrap_or("")),
                esc(m["state"].as_str().unwrap_or("")),
                m["shared"]
            );
        }
        h.push_str("</table>\n");
    }
    let confirmed = mirrors
        .iter()
        .filter(|m| m["state"] == json!(MirrorState::Confirmed))
        .count();
    let _ = writeln!(h, "<p>{confirmed} confirmed mirror pairs.</p>");

    section(&mut h, "Replicated collections", "Collections found at the last epoch (seed 003 table 2): pages per copy (cardinality), copies (size), and each host's root paths. Empty unless the replay ran with <code>--collections</code>.");
    let collections = doc["collections"].as_array().cloned().unwrap_or_default();
    if collections.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str("<table><tr><th>collection</th><th>cardinality</th><th>copies</th><th>hosts (root paths, pages)</th></tr>\n");
        for c in &collections {
            let hosts: Vec<String> = c["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| {
                    let roots: Vec<String> = x["root_paths"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.as_str().map(esc))
                        .collect();
                    format!(
                        "{} ({}, {})",
                        esc(x["host"].as_str().unwrap_or("")),
                        roots.join(" "),
                        x["pages"]
                    )
                })
                .collect();
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(c["id"].as_str().unwrap_or("")),
                c["cardinality"],
                c["size"],
                hosts.join("<br>")
            );
        }
        h.push_str("</table>\n");
    }

    section(&mut h, "Duplicates and the link graph", "Seed 004 table 4: pages reachable by out-links from each host's home page (connected) and the rest (disconnected); duplicates are the pages of a cluster beyond one, with clusters cut to each part.");
    h.push_str("<table><tr><th>round</th><th>pages</th><th>connected</th><th>disconnected</th><th>duplicates</th><th>in connected</th><th>in disconnected</th></tr>\n");
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let mut dup_series = vec![
        ("all pages".to_owned(), vec![]),
        ("connected".to_owned(), vec![]),
        ("disconnected".to_owned(), vec![]),
    ];
    for r in rounds {
        let g = &r.link_graph;
        let all = g.connected_pages + g.disconnected_pages;
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{all}</td><td class=\"n\">{} ({:.1} %)</td><td class=\"n\">{} ({:.1} %)</td>\
             <td class=\"n\">{} ({:.1} %)</td><td class=\"n\">{} ({:.1} %)</td><td class=\"n\">{} ({:.1} %)</td></tr>",
            esc(&r.crawl_id),
            g.connected_pages,
            pct(g.connected_pages, all),
            g.disconnected_pages,
            pct(g.disconnected_pages, all),
            g.duplicates,
            pct(g.duplicates, all),
            g.connected_duplicates,
            pct(g.connected_duplicates, g.connected_pages),
            g.disconnected_duplicates,
            pct(g.disconnected_duplicates, g.disconnected_pages),
        );
        dup_series[0].1.push(pct(g.duplicates, all) / 100.0);
        dup_series[1]
            .1
            .push(pct(g.connected_duplicates, g.connected_pages) / 100.0);
        dup_series[2]
            .1
            .push(pct(g.disconnected_duplicates, g.disconnected_pages) / 100.0);
    }
    h.push_str("</table>\n");
    h.push_str(&grouped_chart(&names, &dup_series, "duplicate share"));

    section(&mut h, "Duplicates by shingle paragraphs", "Seed 004 tables 2–3 over the pages of at least 450 characters: clusters of pages with exactly the same shingle paragraphs (three sentences, no overlap), the copies beyond one per cluster, and the pages that are no duplicates but share at least 90, 70 or 50 % of their paragraphs with another page.");
    h.push_str("<table><tr><th>round</th><th>pages</th><th>clusters</th><th>duplicates</th><th>near 90 %</th><th>near 70 %</th><th>near 50 %</th></tr>\n");
    for r in rounds {
        let p = &r.paragraph_duplicates;
        let share = |n: u64| format!("{n} ({:.1} %)", pct(n, p.documents));
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&r.crawl_id),
            p.documents,
            p.clusters,
            share(p.duplicates),
            share(p.near_90),
            share(p.near_70),
            share(p.near_50)
        );
    }
    h.push_str("</table>\n");

    h.push_str(DRAWN_SCRIPT);
    h.push_str("</body></html>\n");
    h
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.meta{color:#666}code{font-size:.9em;word-break:break-all}\
svg.chart{display:block;margin:.5em 0}svg text{font:11px system-ui,sans-serif;fill:#333}.legend span{margin-right:1em}";

/// Marks how many charts the browser laid out with marks of non-zero size (for the tests).
const DRAWN_SCRIPT: &str = "<script>(function(){var c=document.querySelectorAll('svg.chart'),n=0;\
for(var i=0;i<c.length;i++){var m=c[i].querySelectorAll('.mark'),ok=false;\
for(var j=0;j<m.length;j++){var b=m[j].getBBox();if(b.width>0||b.height>0){ok=true;break;}}if(ok)n++;}\
document.body.setAttribute('data-drawn',n+'/'+c.length);})();</script>\n";

const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

const W: f64 = 720.0;
const H: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 15.0;
const BOTTOM: f64 = 40.0;

fn section(h: &mut String, title: &str, text: &str) {
    let _ = writeln!(h, "<h2>{title}</h2>\n<p>{text}</p>");
}

fn totals(h: &mut String, t: &Value) {
    h.push_str("<h2>Totals</h2>\n<table>\n");
    for (k, label) in [
        ("records", "input records"),
        ("pages", "pages fetched with content"),
        ("no_content", "fetches without content"),
        (
            "inconclusive",
            "fetches that kept the content (304, 429, 5xx)",
        ),
        (
            "lists_capped",
            "signature events with capped lists (out-links, chunks, paragraphs)",
        ),
        (
            "late_records",
            "records of a crawl round that had ended when they came",
        ),
        ("pairs_detected", "pair detections"),
        ("window_pages", "pages in the window at the end"),
        ("live_pairs", "live pairs at the end"),
    ] {
        let _ = writeln!(h, "<tr><th>{label}</th><td class=\"n\">{}</td></tr>", t[k]);
    }
    let dead: Vec<String> = t["dead_letters"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(r, n)| format!("{} {n}", esc(r)))
        .collect();
    let _ = writeln!(
        h,
        "<tr><th>dead letters</th><td>{}</td></tr>\n</table>",
        if dead.is_empty() {
            "none".to_owned()
        } else {
            dead.join(", ")
        }
    );
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn svg_open(label: &str) -> String {
    format!(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">\n",
        esc(label)
    )
}

fn legend(names: &[String]) -> String {
    let items: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "<span><svg width=\"10\" height=\"10\"><rect width=\"10\" height=\"10\" fill=\"{}\"/></svg> {}</span>",
                COLORS[i % COLORS.len()],
                esc(n)
            )
        })
        .collect();
    format!("<p class=\"legend\">{}</p>\n", items.join(""))
}

/// The y axis from 0 to `max` with 5 ticks, and the y label.
fn y_axis(s: &mut String, max: f64, label: &str, percent: bool) {
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = TOP + plot_h - plot_h * f64::from(i) / 4.0;
        let text = if percent {
            format!("{:.0} %", 100.0 * v)
        } else {
            format!("{v:.2}")
        };
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{text}</text>",
            W - RIGHT,
            LEFT - 5.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text transform=\"translate(12,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        TOP + plot_h / 2.0,
        esc(label)
    );
}

fn x_labels(s: &mut String, names: &[String], center: impl Fn(usize) -> f64) {
    for (i, n) in names.iter().enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            center(i),
            H - BOTTOM + 16.0,
            esc(n)
        );
    }
}

/// The top of a share axis: the largest value rounded up to a multiple of 10 % (5 % below 10 %).
fn share_max(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0, f64::max);
    let step = if m <= 0.1 { 0.05 } else { 0.1 };
    ((m / step).ceil() * step).clamp(step, 1.0)
}

fn bar_chart(names: &[String], values: &[f64], label: &str, percent: bool) -> String {
    let max = if percent {
        share_max(values.iter().copied())
    } else {
        values.iter().copied().fold(0.0, f64::max).max(1e-9)
    };
    let mut s = svg_open(label);
    y_axis(&mut s, max, label, percent);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / names.len().max(1) as f64;
    for (i, v) in values.iter().enumerate() {
        let bh = plot_h * (v / max).min(1.0);
        let _ = writeln!(
            s,
            "<rect class=\"mark\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{}: {:.1} %</title></rect>",
            LEFT + slot * i as f64 + slot * 0.2,
            TOP + plot_h - bh,
            slot * 0.6,
            COLORS[0],
            esc(&names[i]),
            100.0 * v
        );
    }
    x_labels(&mut s, names, |i| LEFT + slot * (i as f64 + 0.5));
    s.push_str("</svg>\n");
    s
}

fn grouped_chart(names: &[String], series: &[(String, Vec<f64>)], label: &str) -> String {
    let max = share_max(series.iter().flat_map(|(_, v)| v.iter().copied()));
    let mut s = svg_open(label);
    y_axis(&mut s, max, label, true);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / names.len().max(1) as f64;
    let bw = slot * 0.8 / series.len().max(1) as f64;
    for (k, (name, vals)) in series.iter().enumerate() {
        for (i, v) in vals.iter().enumerate() {
            let bh = plot_h * (v / max).min(1.0);
            let _ = writeln!(
                s,
                "<rect class=\"mark\" x=\"{:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {:.1} %</title></rect>",
                LEFT + slot * i as f64 + slot * 0.1 + bw * k as f64,
                TOP + plot_h - bh,
                COLORS[k % COLORS.len()],
                esc(&names[i]),
                esc(name),
                100.0 * v
            );
        }
    }
    x_labels(&mut s, names, |i| LEFT + slot * (i as f64 + 0.5));
    s.push_str("</svg>\n");
    let labels: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s + &legend(&labels)
}

fn stacked_chart(names: &[String], series: &[(String, Vec<f64>)]) -> String {
    let mut s = svg_open("share of re-fetched pages");
    y_axis(&mut s, 1.0, "share of re-fetched pages", true);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / names.len().max(1) as f64;
    for i in 0..names.len() {
        let total: f64 = series.iter().map(|(_, v)| v[i]).sum();
        if total == 0.0 {
            continue;
        }
        let mut y = TOP + plot_h;
        for (k, (name, vals)) in series.iter().enumerate() {
            let bh = plot_h * vals[i] / total;
            y -= bh;
            let _ = writeln!(
                s,
                "<rect class=\"mark\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {} pages ({:.1} %)</title></rect>",
                LEFT + slot * i as f64 + slot * 0.2,
                slot * 0.6,
                COLORS[k % COLORS.len()],
                esc(&names[i]),
                esc(name),
                vals[i],
                100.0 * vals[i] / total
            );
        }
    }
    x_labels(&mut s, names, |i| LEFT + slot * (i as f64 + 0.5));
    s.push_str("</svg>\n");
    let labels: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s + &legend(&labels)
}

fn line_chart(names: &[String], series: &[(String, Vec<Option<f64>>)], label: &str) -> String {
    let mut s = svg_open(label);
    y_axis(&mut s, 1.0, label, false);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let n = names.len().max(1);
    let x = |i: usize| {
        if n == 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + 10.0 + (plot_w - 20.0) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: f64| TOP + plot_h - plot_h * v.clamp(0.0, 1.0);
    for (k, (name, vals)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let pts: Vec<String> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        if pts.len() > 1 {
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
                pts.join(" ")
            );
        }
        for (i, v) in vals.iter().enumerate() {
            if let Some(v) = v {
                let _ = writeln!(
                    s,
                    "<circle class=\"mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\"><title>{} {}: {v:.3}</title></circle>",
                    x(i),
                    y(*v),
                    esc(name),
                    esc(&names[i])
                );
            }
        }
    }
    x_labels(&mut s, names, x);
    s.push_str("</svg>\n");
    let labels: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s + &legend(&labels)
}

fn loglog_chart(series: &[(String, Vec<(f64, f64)>)], xlabel: &str, ylabel: &str) -> String {
    let max_x = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(10.0, f64::max);
    let max_y = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(10.0, f64::max);
    let (dx, dy) = (max_x.log10().ceil().max(1.0), max_y.log10().ceil().max(1.0));
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let x = |v: f64| LEFT + plot_w * v.max(1.0).log10() / dx;
    let y = |v: f64| TOP + plot_h - plot_h * v.max(1.0).log10() / dy;
    let mut s = svg_open(&format!("{ylabel} by {xlabel}, log-log"));
    for e in 0..=dy as i32 {
        let v = 10f64.powi(e);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v}</text>",
            W - RIGHT,
            y(v),
            y(v),
            LEFT - 5.0,
            y(v) + 4.0
        );
    }
    for e in 0..=dx as i32 {
        let v = 10f64.powi(e);
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v}</text>",
            x(v),
            x(v),
            H - BOTTOM,
            x(v),
            H - BOTTOM + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text transform=\"translate(12,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        H - 6.0,
        esc(xlabel),
        TOP + plot_h / 2.0,
        esc(ylabel)
    );
    for (k, (name, pts)) in series.iter().enumerate() {
        for (px, py) in pts {
            let _ = writeln!(
                s,
                "<circle class=\"mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.75\"><title>{}: {py} clusters of size {px}</title></circle>",
                x(*px),
                y(*py),
                COLORS[k % COLORS.len()],
                esc(name)
            );
        }
    }
    s.push_str("</svg>\n");
    let labels: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    s + &legend(&labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round with late events says so under its figures; rounds without any say nothing.
    #[test]
    fn late_events_are_listed_under_the_rounds_that_had_them() {
        use neardup_schemas::PairLevel;
        use neardup_topology::clusters::Clusters;
        use neardup_topology::evolution::Evolution;
        let cl = Clusters::new(PairLevel::VerySimilar);
        let mut ev = Evolution::new();
        for (round, url) in [
            ("w1", "a"),
            ("w2", "b"),
            ("w1", "c"),
            ("w1", "d"),
            ("w2", "e"),
        ] {
            ev.begin(Some(round), &cl);
            ev.fetched(&format!("http://{url}.example/"), true);
        }
        ev.close(&cl);
        let pages: Vec<(u64, u64)> = ev
            .figures()
            .iter()
            .map(|r| (r.pages, r.late_events))
            .collect();
        assert_eq!(pages, [(1, 2), (2, 0)]);
        let doc = json!({"round_figures": true, "totals": {}});
        let h = html(&doc, ev.figures());
        assert!(
            h.contains("left out of the figures by round: w1 2.</p>"),
            "{h}"
        );
        let mut on_time = Evolution::new();
        on_time.begin(Some("w1"), &cl);
        on_time.fetched("http://a.example/", true);
        on_time.close(&cl);
        assert!(!html(&doc, on_time.figures()).contains("Late events"));
    }

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x?a=1&b='2'\">"),
            "&lt;a href=&quot;x?a=1&amp;b=&#39;2&#39;&quot;&gt;"
        );
    }

    #[test]
    fn share_axes_end_on_round_figures() {
        assert!((share_max([0.33, 0.2].into_iter()) - 0.4).abs() < 1e-9);
        assert!((share_max([0.07].into_iter()) - 0.1).abs() < 1e-9);
        assert!((share_max([0.02].into_iter()) - 0.05).abs() < 1e-9);
        assert!((share_max([0.0].into_iter()) - 0.05).abs() < 1e-9);
        assert!((share_max([1.0].into_iter()) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn log_log_points_land_on_their_decades() {
        let svg = loglog_chart(
            &[("w1".into(), vec![(1.0, 1000.0), (10.0, 10.0), (100.0, 1.0)])],
            "size",
            "clusters",
        );
        // Three points, x at 0, 1/2 and 1 of the plot width (two decades), y likewise.
        let plot_w = W - LEFT - RIGHT;
        for (cx, _) in [(LEFT, 0), (LEFT + plot_w / 2.0, 1), (LEFT + plot_w, 2)] {
            assert!(
                svg.contains(&format!("cx=\"{cx:.1}\"")),
                "{cx} missing in {svg}"
            );
        }
        assert_eq!(svg.matches("class=\"mark\"").count(), 3);
    }
}
