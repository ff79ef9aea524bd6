//! Seed 002's Hyperlink Map as a veto in the pair policy, through the whole topology: when the
//! epoch closes, a `very_similar` pair whose pages link to unrelated pages is retracted, one
//! whose pages link to copies of each other stays, and pairs of identical text are never
//! vetoed however different their links.

use neardup_schemas::{OutputKind, PairEvent, PairLevel, PairState, Source};
use neardup_topology::replicas::HmVeto;
use neardup_topology::{Config, Topology};
use std::collections::BTreeMap;

mod common;
use common::{prose, record};

const CHILDREN: usize = 10;

fn body(text: &str, links: &[String]) -> String {
    let anchors: String = links
        .iter()
        .map(|l| format!("<a href=\"{l}\">next</a> "))
        .collect();
    format!("<html><body><p>{text}</p><p>{anchors}</p></body></html>")
}

/// The crawl: for each of three pages `x`, `w`, `v`, a copy on p.example and one on
/// m.example. `x`'s copies differ in the order of their last 30 words and link to unrelated
/// pages; `w`'s
/// differ the same way and link to copies of the same pages; `v`'s have the same text and
/// link to unrelated pages.
fn crawl() -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    let mut push = |url: String, body: String| {
        let second = lines.len();
        lines.push(record(&url, 0, second, 200, "192.0.2.1", &body));
    };
    let children = |prefix: &str| -> Vec<String> {
        (0..CHILDREN).map(|j| format!("{prefix}{j}.html")).collect()
    };
    // The edit reverses the order of the last 30 words: shingles change, the bag of words and
    // so the RP signature do not.
    let text = |seed: u64, edited: bool| {
        let text = prose(seed, 400);
        let mut words: Vec<&str> = text.split(' ').collect();
        if edited {
            words[370..].reverse();
        }
        words.join(" ")
    };
    for host in ["p", "m"] {
        let m = host == "m";
        let base = format!("http://{host}.example/d/");
        // x: edited on m, children unrelated (c on p, e on m).
        let x_children = children(if m { "e" } else { "c" });
        push(format!("{base}x.html"), body(&text(1, m), &x_children));
        // w: edited on m, children the same pages on both hosts.
        push(format!("{base}w.html"), body(&text(3, m), &children("k")));
        // v: the same text on both, children unrelated.
        push(format!("{base}v.html"), body(&text(4, false), &x_children));
        for (j, child) in x_children.iter().enumerate() {
            let unrelated = if m { 200 } else { 100 } + j as u64;
            push(format!("{base}{child}"), body(&prose(unrelated, 200), &[]));
            push(
                format!("{base}k{j}.html"),
                body(&prose(300 + j as u64, 200), &[]),
            );
        }
    }
    lines
}

/// The live pairs between the two hosts' `x`, `w` and `v` after the crawl and the end of the
/// epoch, with their levels, and the pairs retracted.
fn run(cfg: Config) -> (BTreeMap<String, PairLevel>, Vec<String>) {
    let mut topo = Topology::new(cfg);
    let mut out = Vec::new();
    for (n, line) in crawl().iter().enumerate() {
        let src = Source::File {
            file: "hm_veto.jsonl".into(),
            line: n as u64 + 1,
        };
        topo.process(line, &src, &mut out);
    }
    topo.finish(&mut out);
    let mut live = BTreeMap::new();
    let mut retracted = Vec::new();
    for e in out.iter().filter(|e| e.kind == OutputKind::Pairs) {
        let p: PairEvent = serde_json::from_slice(&e.value).unwrap();
        let name = |u: &str| u.rsplit('/').next().unwrap().to_owned();
        if name(&p.a) != name(&p.b) || !["x.html", "w.html", "v.html"].contains(&&*name(&p.a)) {
            continue;
        }
        match p.state {
            PairState::Retracted => {
                live.remove(&name(&p.a));
                retracted.push(name(&p.a));
            }
            _ => {
                live.insert(name(&p.a), p.level);
            }
        }
    }
    (live, retracted)
}

#[test]
fn pairs_whose_link_contexts_disagree_are_vetoed_at_the_epoch() {
    let (live, retracted) = run(Config::default());
    assert_eq!(
        live.get("x.html"),
        Some(&PairLevel::VerySimilar),
        "{live:?}"
    );
    assert_eq!(
        live.get("w.html"),
        Some(&PairLevel::VerySimilar),
        "{live:?}"
    );
    assert!(
        matches!(
            live.get("v.html"),
            Some(PairLevel::Exact | PairLevel::VirtuallyIdentical)
        ),
        "{live:?}"
    );
    assert!(retracted.is_empty(), "{retracted:?}");

    let cfg = Config {
        hm_veto: Some(HmVeto::new(0.05)),
        ..Config::default()
    };
    let (live_vetoed, retracted) = run(cfg);
    assert_eq!(retracted, ["x.html"], "{live_vetoed:?}");
    assert_eq!(live_vetoed.get("x.html"), None);
    assert_eq!(live_vetoed.get("w.html"), live.get("w.html"));
    assert_eq!(live_vetoed.get("v.html"), live.get("v.html"));
}
