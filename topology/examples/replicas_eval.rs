//! Di Iorio's near-replica detection (seed 002: RP and Hyperlink Map signatures, collisions with
//! (C, D) tolerance) on a crawl stream, one snapshot per crawl round, written as
//! `neardup.pairs/v1` events so that `neardup eval` scores it exactly as it scores Alg. B and C:
//!
//! ```sh
//! cargo run --release -p neardup-topology --example replicas_eval -- EVENTS OUT_DIR \
//!     [--gamma 0.1] [--iterations 4] [--setting C,D]...
//! neardup eval --truth truth.json --pairs OUT_DIR/pairs-c0.05-d0.05.jsonl
//! ```
//!
//! Every page with content is signed as `neardup replay` signs it (RP signature, out-links);
//! when the stream's `crawl_id` moves on, the round's pages (the latest fetch of each URL) form
//! one snapshot ([`neardup_topology::replicas::Snapshot`]), its Hyperlink Map is computed once,
//! and for every `--setting C,D` (default `0.05,0.05` and `1,0.05`, the paper's "RP alone") the
//! colliding pairs become the round's live pair set: `detected` for pairs new in the round,
//! `retracted` for pairs of the previous round that no longer collide.

#[path = "../benches/common/events.rs"]
mod events;

use neardup_topology::charset::decode_body;
use neardup_topology::replicas::{ReplicaParams, Snapshot};
use neardup_topology::signer::{Signer, SignerConfig};
use neardup_topology::{decode, format_time, DecodeLimits};
use std::collections::BTreeSet;
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

struct Setting {
    c: f32,
    d: f32,
    live: BTreeSet<(String, String)>,
    out: BufWriter<std::fs::File>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!(
            "usage: replicas_eval EVENTS OUT_DIR [--gamma G] [--iterations N] [--setting C,D]..."
        );
        std::process::exit(2);
    }
    let (events, out_dir) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let defaults = ReplicaParams::default();
    let gamma: f32 = value("--gamma").map_or(defaults.gamma, |v| v.parse().expect("--gamma"));
    let iterations: usize =
        value("--iterations").map_or(defaults.iterations, |v| v.parse().expect("--iterations"));
    let mut specs: Vec<(f32, f32)> = args
        .windows(2)
        .filter(|w| w[0] == "--setting")
        .map(|w| {
            let (c, d) = w[1].split_once(',').expect("--setting C,D");
            (c.parse().expect("C"), d.parse().expect("D"))
        })
        .collect();
    if specs.is_empty() {
        specs = vec![(defaults.c, defaults.d), (1.0, defaults.d)];
    }
    std::fs::create_dir_all(&out_dir).expect("create OUT_DIR");
    let mut settings: Vec<Setting> = specs
        .into_iter()
        .map(|(c, d)| Setting {
            c,
            d,
            live: BTreeSet::new(),
            out: BufWriter::new(
                std::fs::File::create(out_dir.join(format!("pairs-c{c}-d{d}.jsonl")))
                    .expect("create a pairs file"),
            ),
        })
        .collect();

    let cfg = SignerConfig::default();
    let k = cfg.rp.k;
    let mut signer = Signer::new(cfg);
    let mut round: Option<(String, Snapshot, i64)> = None;
    let reader = events::open(&events).unwrap_or_else(|e| panic!("open EVENTS: {e}"));
    for line in reader.split(b'\n') {
        let line = line.expect("read EVENTS");
        let Ok(page) = decode(&line, &DecodeLimits::default()) else {
            continue; // bad records are the dead-letter path's business, not this evaluation's
        };
        let crawl_id = page.crawl_id.clone().unwrap_or_default();
        if round.as_ref().is_some_and(|(id, _, _)| *id != crawl_id) {
            let (id, snapshot, at) = round.take().expect("a round");
            close_round(&id, &snapshot, at, gamma, iterations, &mut settings);
        }
        let (_, snapshot, at) =
            round.get_or_insert_with(|| (crawl_id.clone(), Snapshot::new(k), i64::MIN));
        *at = (*at).max(page.fetched_at_ms);
        let Some(body) = page.body.as_ref().filter(|_| page.has_content()) else {
            continue;
        };
        let Ok((html, _)) = decode_body(body.raw(), page.content_type.as_deref()) else {
            continue;
        };
        let url = url::Url::parse(&page.url).ok();
        let sig = signer.sign(&html, url.as_ref());
        snapshot.add(&page.url, &sig.rp, sig.extraction.links());
    }
    if let Some((id, snapshot, at)) = round.take() {
        close_round(&id, &snapshot, at, gamma, iterations, &mut settings);
    }
    for s in &mut settings {
        s.out.flush().expect("write a pairs file");
    }
}

fn close_round(
    crawl_id: &str,
    snapshot: &Snapshot,
    at_ms: i64,
    gamma: f32,
    iterations: usize,
    settings: &mut [Setting],
) {
    let hm = snapshot.hyperlink_map(gamma, iterations);
    let at = format_time(at_ms);
    for s in settings {
        let now: BTreeSet<(String, String)> = snapshot
            .collisions_with(&hm, s.c, s.d)
            .into_iter()
            .map(|(i, j)| {
                let (a, b) = (snapshot.url(i), snapshot.url(j));
                if a < b {
                    (a.to_owned(), b.to_owned())
                } else {
                    (b.to_owned(), a.to_owned())
                }
            })
            .collect();
        let mut write = |state: &str, (a, b): &(String, String)| {
            let event = serde_json::json!({
                "schema": "neardup.pairs/v1", "state": state, "a": a, "b": b,
                "level": "very_similar", "at": at, "crawl_id": crawl_id,
            });
            writeln!(s.out, "{event}").expect("write a pairs file");
        };
        for p in s.live.difference(&now) {
            write("retracted", p);
        }
        for p in now.difference(&s.live) {
            write("detected", p);
        }
        eprintln!(
            "{crawl_id}: {} pages, C={} D={}: {} colliding pairs",
            snapshot.len(),
            s.c,
            s.d,
            now.len()
        );
        s.live = now;
    }
}
