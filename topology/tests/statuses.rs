//! What a fetch's status says of its URL's content. A 2xx brings content; 404/410, 0 and
//! redirects mean the URL has none now, so it leaves its pairs and clusters; 304 Not Modified,
//! 429 and 5xx tell nothing new of the content, so the URL keeps what it had: a crawler that
//! revalidates its pages, or a server down for a minute, must not retract every pair and
//! cluster of the pages concerned. A 304 also renews the page, as a fetch of the same content
//! would, so a page that is only ever revalidated stays in the window.

mod common;

use common::{everything_on, prose, record, revalidated_stream, REVALIDATED};
use neardup_schemas::{ChangeBucket, OutputKind, Source};
use neardup_topology::Topology;
use serde_json::Value;

/// The outputs of each record, as (kind, value) in order.
fn run(records: &[Vec<u8>]) -> (Topology, Vec<Vec<(OutputKind, Value)>>) {
    let mut topo = Topology::new(everything_on());
    let mut per_record = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let source = Source::File {
            file: "statuses.jsonl".into(),
            line: i as u64 + 1,
        };
        let mut out = Vec::new();
        topo.process(r, &source, &mut out);
        per_record.push(
            out.iter()
                .map(|e| (e.kind, serde_json::from_slice(&e.value).expect("JSON")))
                .collect(),
        );
    }
    (topo, per_record)
}

/// `state level a b` of the pair events among `out`.
fn pairs(out: &[(OutputKind, Value)]) -> Vec<String> {
    out.iter()
        .filter(|(k, _)| *k == OutputKind::Pairs)
        .map(|(_, v)| {
            format!("{} {} {} {}", v["state"], v["level"], v["a"], v["b"]).replace('"', "")
        })
        .collect()
}

#[test]
fn inconclusive_fetches_keep_the_content_and_the_others_remove_it() {
    let text = prose(41, 400);
    let page = |t: &str| format!("<html><body><p>{t}</p></body></html>");
    let edited = page(&format!("{text} and one more sentence at the end"));
    let (a, b, c) = (
        "http://a.example/doc.html",
        "http://b.example/doc.html",
        "http://c.example/copy.html",
    );
    let ip = "192.0.2.1";
    let records = [
        record(a, 0, 10, 200, ip, &page(&text)),
        record(b, 0, 20, 200, ip, &edited),
        record(c, 0, 30, 200, ip, &page(&text)),
        // Revalidated, down for a moment, throttled: nothing changes.
        record(b, 1, 40, 304, ip, ""),
        record(a, 1, 50, 503, ip, "<p>Service unavailable</p>"),
        record(c, 1, 60, 429, ip, "<p>Slow down</p>"),
        record(a, 1, 70, 500, ip, ""),
        // Redirected elsewhere and gone: the pairs go.
        record(b, 2, 80, 301, ip, ""),
        record(c, 2, 90, 404, ip, ""),
    ];
    let (topo, out) = run(&records);
    assert_eq!(
        pairs(&out[1]),
        vec![format!("detected very_similar {a} {b}")]
    );
    assert_eq!(
        pairs(&out[2]),
        vec![
            format!("detected exact {a} {c}"),
            format!("detected very_similar {b} {c}")
        ]
    );
    for (i, status) in [(3, 304), (4, 503), (5, 429), (6, 500)] {
        let kinds: Vec<OutputKind> = out[i].iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            vec![OutputKind::Signatures],
            "a {status} changes nothing: {:?}",
            out[i]
        );
        let sig = &out[i][0].1;
        assert_eq!(sig["status"], status);
        assert!(sig.get("content").is_none(), "no content stated: {sig}");
    }
    assert_eq!(
        pairs(&out[7]),
        vec![
            format!("retracted very_similar {a} {b}"),
            format!("retracted very_similar {b} {c}")
        ]
    );
    assert_eq!(pairs(&out[8]), vec![format!("retracted exact {a} {c}")]);
    let stats = topo.stats();
    assert_eq!(
        (stats.pages, stats.inconclusive, stats.no_content),
        (3, 4, 2)
    );
}

#[test]
fn a_304_renews_the_page_and_the_others_only_move_the_clock() {
    // b the same page as a and c (the exact index's pairs), then an edition of it (the sketch
    // window's).
    renewal(false, "exact");
    renewal(true, "virtually_identical");
}

/// [`revalidated_stream`]'s outputs: b stays, renewed by its 304s, so a's fetch on day 15
/// pairs with it again (at `b_level`), while a's and c's pairs left on day 14.
fn renewal(edited: bool, b_level: &str) {
    let records = revalidated_stream(edited);
    let (a, b, c) = REVALIDATED;
    let (_, out) = run(&records);
    let sorted = |i: usize| {
        let mut p = pairs(&out[i]);
        p.sort();
        p
    };
    let with_pairs: Vec<usize> = (0..out.len()).filter(|&i| !sorted(i).is_empty()).collect();
    // Day 14 at 00:00:30 (record 29, b's 304) is more than 14 days after a's and c's fetches.
    assert_eq!(with_pairs, vec![1, 2, 29, 31], "{b_level}");
    let mut left = vec![
        format!("retracted {b_level} {a} {b}"),
        format!("retracted exact {a} {c}"),
        format!("retracted {b_level} {b} {c}"),
    ];
    left.sort();
    assert_eq!(sorted(29), left);
    assert_eq!(sorted(31), vec![format!("detected {b_level} {a} {b}")]);
}

#[test]
fn a_304_counts_as_an_unchanged_page_of_its_round() {
    // The revalidation stream's rounds (crawl ids by week): week 1 has a, b and c fetched on
    // day 0 and b's 304s on days 1-6; week 2 only b's 304s (c's 503s are no page); week 3 b's
    // 304 on day 14 and a fetched again on day 15.
    let (mut topo, _) = run(&revalidated_stream(false));
    let rounds = topo.finish_evolution().to_vec();
    let pages: Vec<u64> = rounds.iter().map(|r| r.pages).collect();
    assert_eq!(pages, vec![3, 1, 2]);
    // Each of b's 304s is an unchanged fetch (its previous fetch is known); a's fetch on day 15
    // has no previous one in the window.
    let unchanged: Vec<u64> = rounds
        .iter()
        .map(|r| {
            r.change_buckets
                .get(&ChangeBucket::NoChange)
                .copied()
                .unwrap_or(0)
        })
        .collect();
    assert_eq!(unchanged, vec![6, 7, 1]);
}
