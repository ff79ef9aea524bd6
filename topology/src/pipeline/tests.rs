use super::*;
use crate::checkpoint;
use base64::Engine as _;
use neardup_schemas::Body;
use proptest::prelude::*;

fn envelope(url: &str, t: i64, status: u16, ct: Option<&str>, body: Option<Body>) -> Vec<u8> {
    let mut v = serde_json::json!({"url": url, "fetched_at": format_time(t), "status": status});
    if let Some(ct) = ct {
        v["content_type"] = ct.into();
    }
    match body {
        Some(Body::Text(s)) => v["body"] = s.into(),
        Some(Body::Bytes(b)) => {
            v["body_base64"] = base64::engine::general_purpose::STANDARD.encode(b).into()
        }
        None => {}
    }
    serde_json::to_vec(&v).unwrap()
}

fn arb_body() -> impl Strategy<Value = Option<Body>> {
    prop_oneof![
        Just(None),
        "(<[a-zA-Z!/?]{0,8}|[ -~]{0,12}|&[a-z#0-9]{0,6};?|<script>|</script>|<!--|-->|\u{e9}\u{4e2d})*"
            .prop_map(|s| Some(Body::Text(s))),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Some(Body::Bytes(b))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Whatever the body, charset, status and order of events, processing never panics and
    /// every input yields at least one output (a signature or a dead letter).
    #[test]
    fn process_never_panics(events in proptest::collection::vec((0usize..4, 0i64..2_000_000_000, prop_oneof![Just(200u16), Just(404), Just(0), Just(503)],
            proptest::option::of(prop_oneof![Just("text/html; charset=utf-8"), Just("text/html; charset=iso-8859-1"), Just("text/html; charset=shift_jis"), Just("text/html; charset=nonsense"), Just("text/html")]),
            arb_body()), 1..20)) {
        let mut topo = Topology::new(Config { window_ms: 600_000_000, ..Config::default() });
        let urls = ["http://a.example/x", "http://b.example/x", "https://www.a.example/y", "http://c.example/"];
        let src = Source::File { file: "p".into(), line: 1 };
        for (u, t, status, ct, body) in events {
            let mut out = Vec::new();
            topo.process(&envelope(urls[u], t, status, ct, body), &src, &mut out);
            prop_assert!(out.iter().any(|e| matches!(e.kind, OutputKind::Signatures | OutputKind::DeadLetter)));
        }
    }
}

/// Under `--canonical inlinks,shorter`, a copy that another page starts linking to becomes
/// its cluster's canonical: `canonical_changed` is emitted and the hints follow.
#[test]
fn the_copy_with_more_in_links_becomes_canonical() {
    use neardup_schemas::{ClusterEvent, RecrawlEvent, RecrawlHint};
    let cfg = Config {
        canonical: "inlinks,shorter".parse().unwrap(),
        ..Config::default()
    };
    let mut topo = Topology::new(cfg);
    let src = Source::File {
        file: "t".into(),
        line: 1,
    };
    let doc: String = (0..200).map(|i| format!("word{i} ")).collect();
    let page =
        |url: &str, t: i64, body: String| envelope(url, t, 200, None, Some(Body::Text(body)));
    let (a, b) = (
        "http://a.example/doc.html",
        "http://b.example/docs/doc.html",
    );
    let t0 = 1_793_577_600_000;
    let mut out = Vec::new();
    topo.process(&page(a, t0, format!("<p>{doc}</p>")), &src, &mut out);
    topo.process(&page(b, t0 + 1000, format!("<p>{doc}</p>")), &src, &mut out);
    assert_eq!(
        canonical_of(&topo, b),
        a,
        "no in-links yet: the shorter URL"
    );
    out.clear();
    let linker = format!(r#"<p>another page entirely</p><a href="{b}">the doc</a>"#);
    topo.process(
        &page("http://c.example/links.html", t0 + 2000, linker),
        &src,
        &mut out,
    );
    assert_eq!(canonical_of(&topo, a), b, "b has an in-link now");
    let changed: Vec<ClusterEvent> = decoded(&out);
    assert!(
        changed.iter().any(
            |c| c.change == neardup_schemas::ClusterChangeKind::CanonicalChanged
                && c.canonical.as_deref() == Some(b)
        ),
        "{changed:?}"
    );
    let hints: Vec<RecrawlEvent> = decoded(&out);
    assert!(
        hints.iter().any(|h| h.url == a
            && h.hint == RecrawlHint::Deprioritize
            && h.canonical.as_deref() == Some(b)),
        "{hints:?}"
    );
    assert!(
        hints
            .iter()
            .any(|h| h.url == b && h.hint == RecrawlHint::Keep),
        "{hints:?}"
    );
    // The linking page disappears: b loses its in-link, a (shorter) is canonical again.
    out.clear();
    topo.process(
        &envelope("http://c.example/links.html", t0 + 3000, 404, None, None),
        &src,
        &mut out,
    );
    assert_eq!(canonical_of(&topo, a), a);
}

/// Each URL's copies in the sketch index, the exact groups, the change history and the
/// clusters: their allocations by string.
fn url_copies(topo: &Topology) -> BTreeMap<String, BTreeSet<usize>> {
    let s = &topo.state;
    let mut copies: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let all = (s.near.url_copies())
        .chain(s.exact.url_copies())
        .chain(s.history.url_copies())
        .chain(s.similar.url_copies())
        .chain(s.identical.url_copies());
    for url in all {
        let at = Arc::as_ptr(url) as *const u8 as usize;
        copies.entry(url.to_string()).or_default().insert(at);
    }
    copies
}

/// The running state's parts share one copy of each URL, and so do they after a restore,
/// where reading the checkpoint made one for every place that held it (`tests/checkpoint.rs`
/// shows that the restored state goes on as the one written).
/// Four copies of a page on four hosts and one other page, processed.
fn four_copies_and_another() -> Topology {
    let t0 = 1_793_577_600_000;
    let doc: String = (0..200).map(|i| format!("word{i} ")).collect();
    let other: String = (0..200).map(|i| format!("other{i} ")).collect();
    let src = Source::File {
        file: "t".into(),
        line: 1,
    };
    let mut lines = Vec::new();
    for (n, host) in ["a", "b", "c", "d"].iter().enumerate() {
        let body = format!("<p>{doc}</p>");
        lines.push(envelope(
            &format!("http://{host}.example/doc.html"),
            t0 + n as i64 * 1000,
            200,
            None,
            Some(Body::Text(body)),
        ));
    }
    lines.push(envelope(
        "http://e.example/other.html",
        t0 + 9000,
        200,
        None,
        Some(Body::Text(format!("<p>{other}</p>"))),
    ));
    let mut topo = Topology::new(Config::default());
    let mut out = Vec::new();
    for line in &lines {
        topo.process(line, &src, &mut out);
    }
    topo
}

#[test]
fn the_state_holds_one_copy_of_each_url_running_and_restored() {
    let topo = four_copies_and_another();
    let offsets = BTreeMap::from([(0, 5)]);
    let bytes = checkpoint::write(&topo, "t", &offsets);
    let (restored, _) = checkpoint::restore(Config::default(), "t", &bytes).expect("restores");
    // The running state shares them too: the parts take a new URL from one pool.
    let running = url_copies(&topo);
    assert!(running.values().all(|at| at.len() == 1), "{running:?}");
    let copies = url_copies(&restored);
    assert_eq!(copies.len(), 5, "{copies:?}");
    // The four copies of the page are in the exact groups and both cluster levels too.
    assert!(copies.values().all(|at| at.len() == 1), "{copies:?}");
    assert_eq!(
        url_copies(&topo).keys().collect::<Vec<_>>(),
        copies.keys().collect::<Vec<_>>()
    );
    // The same state: a checkpoint of the same size (maps with per-process hash seeds list
    // their entries in another order).
    assert_eq!(
        checkpoint::write(&restored, "t", &offsets).len(),
        bytes.len()
    );
}

/// A checkpoint's snapshot shares the state's URLs instead of copying them, and holds no
/// URL pool; its body written in chunks of a few bytes is the body written whole (the
/// length and hash counted across chunks).
#[test]
fn a_snapshot_shares_the_urls_and_its_body_is_the_same_in_any_chunks() {
    let topo = four_copies_and_another();
    let snap = topo.state.snapshot();
    let urls = |s: &State| {
        let mut at: Vec<_> = (s.near.url_copies())
            .chain(s.exact.url_copies())
            .chain(s.similar.url_copies())
            .map(|u| Arc::as_ptr(u) as *const u8 as usize)
            .collect();
        at.sort_unstable();
        at
    };
    assert!(!urls(&snap).is_empty());
    assert_eq!(urls(&snap), urls(&topo.state));
    assert_eq!(snap.urls.len(), 0);
    let offsets = BTreeMap::from([(0, 5)]);
    let whole = checkpoint::write(&topo, "t", &offsets);
    for chunk in [1, 7, 4096] {
        let mut out = std::io::Cursor::new(Vec::new());
        let header = checkpoint::header(&topo, "t", &offsets);
        let n = checkpoint::write_state(&snap, header, &mut out, chunk).expect("written");
        assert_eq!(n as usize, whole.len());
        assert!(out.into_inner() == whole, "chunks of {chunk}");
    }
}

/// The windows move with the slowest input partition: a copy that a lagging partition
/// delivers late still pairs with its original, which the newest event time alone would
/// have evicted; and an idle partition holds the windows back by at most the skew.
#[test]
fn a_lagging_partition_is_waited_for_within_the_skew() {
    use neardup_schemas::PairEvent;
    const DAY: i64 = 24 * 3600 * 1000;
    let t0 = 1_793_577_600_000;
    let doc =
        |seed: &str| -> String { (0..200).map(|i| format!("{seed}{i} ")).collect::<String>() };
    let page = |url: &str, t: i64, body: String| {
        envelope(
            url,
            t,
            200,
            None,
            Some(Body::Text(format!("<p>{body}</p>"))),
        )
    };
    let from = |partition: i32| Source::Kafka {
        topic: "pages".into(),
        partition,
        offset: 0,
    };
    let run = |skew_ms: i64| {
        let mut topo = Topology::new(Config {
            window_ms: 2 * DAY,
            max_partition_skew_ms: skew_ms,
            // Days between records on a two-day window: not leaps here.
            max_event_time_lead_ms: Some(i64::MAX),
            ..Config::default()
        });
        let mut out = Vec::new();
        let mut feed = |url: &str, t: i64, body: String, p: i32| {
            topo.process(&page(url, t, body), &from(p), &mut out)
        };
        feed("http://a.example/x.html", t0, doc("original"), 0);
        feed("http://c.example/1.html", t0 + DAY / 10, doc("one"), 1);
        for d in 1..=3 {
            let url = format!("http://d.example/{d}.html");
            feed(&url, t0 + d * DAY, doc(&format!("filler{d}x")), 0);
        }
        // Partition 1 catches up: the copy was fetched half a day after the original.
        feed("http://b.example/x.html", t0 + DAY / 2, doc("original"), 1);
        let detected = decoded::<PairEvent>(&out)
            .iter()
            .any(|p| p.a.ends_with("x.html") && p.b.ends_with("x.html"));
        (topo, detected)
    };
    let (waited, found) = run(7 * DAY);
    assert!(found, "the late copy pairs with its original");
    assert_eq!(waited.near_stats().stale, 0);
    assert_eq!(waited.watermark_ms(), Some(t0 + DAY / 2));
    let (unaligned, found) = run(0);
    assert!(!found, "with no skew allowed, the original left the window");
    assert_eq!(
        unaligned.near_stats().stale,
        1,
        "and the copy came too late"
    );

    // Partition 1 goes idle: partition 0 moves the windows once it is a skew ahead.
    let (mut topo, _) = run(7 * DAY);
    let mut out = Vec::new();
    topo.process(
        &page("http://d.example/9.html", t0 + 9 * DAY, doc("nine")),
        &from(0),
        &mut out,
    );
    assert_eq!(topo.watermark_ms(), Some(t0 + 2 * DAY));
    assert_eq!(topo.near_index().window().count(), 7, "nothing expired yet");
    topo.process(
        &page("http://d.example/12.html", t0 + 12 * DAY, doc("twelve")),
        &from(0),
        &mut out,
    );
    assert_eq!(topo.watermark_ms(), Some(t0 + 5 * DAY));
    let left: Vec<&str> = topo.near_index().window().map(|(u, _)| u).collect();
    assert_eq!(
        left.len(),
        3,
        "only the fetches of days 3, 9 and 12 remain: {left:?}"
    );
}

/// The outputs of the event type `E`'s topic, decoded.
fn decoded<E: neardup_schemas::OutputEvent + serde::de::DeserializeOwned>(out: &[Emit]) -> Vec<E> {
    out.iter()
        .filter(|e| e.kind == E::KIND)
        .map(|e| serde_json::from_slice(&e.value).unwrap())
        .collect()
}

fn canonical_of(topo: &Topology, url: &str) -> String {
    let clusters = topo.clusters(PairLevel::VerySimilar).expect("level");
    clusters.cluster_of(url).expect("clustered").canonical
}
