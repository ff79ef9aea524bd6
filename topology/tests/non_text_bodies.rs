//! Bodies without text. Those that are not text (images, PDFs, archives: a crawl fetches them
//! beside its pages) are not read as text: their signature events say `charset: binary` with no
//! terms, identical copies still pair as `exact`, and two binaries that differ a little never
//! pair as near duplicates of text they do not have. Text in the same stream is unaffected. An
//! empty body is no content, as an absent one is: empty pages are not each other's duplicates.
//! Nor is an instant `<meta http-equiv="refresh">` redirect: it is a redirect, as a 3xx is.

mod common;

use base64::Engine;
use common::{feed, prose};
use neardup_schemas::OutputKind;
use neardup_topology::{Config, Topology};
use serde_json::{json, Value};

/// `n` bytes of a fixed pseudo-random sequence, with a PNG's signature in front.
fn png(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push((x >> 24) as u8);
    }
    out
}

fn text_record(url: &str, second: u32, body: &str) -> Vec<u8> {
    json!({"url": url, "fetched_at": format!("2026-11-02T10:15:{second:02}Z"), "status": 200,
           "body": body})
    .to_string()
    .into_bytes()
}

fn record(url: &str, second: u32, content_type: Option<&str>, bytes: &[u8]) -> Vec<u8> {
    let mut e = json!({"url": url, "fetched_at": format!("2026-11-02T10:15:{second:02}Z"),
                       "status": 200,
                       "body_base64": base64::engine::general_purpose::STANDARD.encode(bytes)});
    if let Some(ct) = content_type {
        e["content_type"] = ct.into();
    }
    e.to_string().into_bytes()
}

struct Run {
    /// `state a b` of each pair event, in order.
    pair_states: Vec<String>,
    signatures: Vec<Value>,
    pairs: Vec<Value>,
    dead_letters: usize,
}

fn run(records: &[Vec<u8>]) -> Run {
    let mut topo = Topology::new(Config::default());
    let mut out = Vec::new();
    feed(&mut topo, records, "binary.jsonl", &mut out);
    let of = |kind| {
        out.iter()
            .filter(|e| e.kind == kind)
            .map(|e| serde_json::from_slice::<Value>(&e.value).unwrap())
            .collect::<Vec<_>>()
    };
    Run {
        pair_states: of(OutputKind::Pairs)
            .iter()
            .map(|p| {
                let (a, b) = (p["a"].as_str().unwrap(), p["b"].as_str().unwrap());
                format!("{} {a} {b}", p["state"].as_str().unwrap())
            })
            .collect(),
        signatures: of(OutputKind::Signatures),
        pairs: of(OutputKind::Pairs),
        dead_letters: of(OutputKind::DeadLetter).len(),
    }
}

fn content<'a>(run: &'a Run, url: &str) -> &'a Value {
    &run.signatures
        .iter()
        .find(|s| s["url"] == url)
        .unwrap_or_else(|| panic!("no signature event for {url}"))["content"]
}

#[test]
fn binaries_are_not_read_as_text_and_pair_only_when_identical() {
    let logo = png(1, 40_000);
    // A second version of it: the same bytes but for a few in the middle.
    let mut logo2 = logo.clone();
    for b in &mut logo2[20_000..20_010] {
        *b ^= 0x55;
    }
    let text = prose(7, 600);
    let records = vec![
        record("http://a.example/logo.png", 1, Some("image/png"), &logo),
        record("http://b.example/logo.png", 2, Some("image/png"), &logo),
        // Undeclared: sniffed as binary by its control bytes.
        record("http://c.example/logo-v2", 3, None, &logo2),
        record(
            "http://d.example/logo-v2.bin",
            4,
            Some("application/octet-stream; charset=utf-8"),
            &logo2[..39_000],
        ),
        record(
            "http://a.example/doc.html",
            5,
            Some("text/html; charset=utf-8"),
            format!("<p>{text}</p>").as_bytes(),
        ),
        record(
            "http://b.example/doc.html",
            6,
            Some("text/html; charset=utf-8"),
            format!("<p>{text} and one more</p>").as_bytes(),
        ),
    ];
    let run = run(&records);
    assert_eq!(run.dead_letters, 0, "a binary body is not a bad record");
    assert_eq!(run.signatures.len(), 6);

    for url in [
        "http://a.example/logo.png",
        "http://b.example/logo.png",
        "http://c.example/logo-v2",
        "http://d.example/logo-v2.bin",
    ] {
        let c = content(&run, url);
        assert_eq!(c["charset"], "binary", "{url}");
        assert_eq!(c["tokens"], 0, "{url}");
        assert_eq!(c["text_bytes"], 0, "{url}");
        assert_eq!(c["chunks"], json!([]), "{url}");
        assert!(c["body_bytes"].as_u64().unwrap() >= 39_000, "{url}");
    }
    assert_eq!(
        content(&run, "http://a.example/logo.png")["checksum"],
        content(&run, "http://b.example/logo.png")["checksum"]
    );
    for url in ["http://a.example/doc.html", "http://b.example/doc.html"] {
        let c = content(&run, url);
        assert_eq!(c["charset"], "UTF-8", "{url}");
        assert!(c["tokens"].as_u64().unwrap() >= 600, "{url}");
    }

    let mut detected: Vec<(&str, &str, bool)> = run
        .pairs
        .iter()
        .filter(|p| p["state"] == "detected")
        .map(|p| {
            let (a, b) = (p["a"].as_str().unwrap(), p["b"].as_str().unwrap());
            (a, b, p["level"] == "exact")
        })
        .collect();
    detected.sort();
    assert_eq!(
        detected,
        vec![
            (
                "http://a.example/doc.html",
                "http://b.example/doc.html",
                false
            ),
            (
                "http://a.example/logo.png",
                "http://b.example/logo.png",
                true
            ),
        ],
        "identical binaries pair as exact, the two versions of the logo not at all"
    );
}

#[test]
fn utf16_text_is_text() {
    let text = prose(7, 300);
    let wide: Vec<u8> = [0xFFu8, 0xFE]
        .into_iter()
        .chain(
            format!("<p>{text}</p>")
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        )
        .collect();
    let run = run(&[record("http://a.example/wide.html", 1, None, &wide)]);
    let c = content(&run, "http://a.example/wide.html");
    assert_eq!(c["charset"], "UTF-16LE");
    assert_eq!(c["tokens"], 300);
}

#[test]
fn an_empty_body_is_no_content() {
    let text = format!("<p>{}</p>", prose(7, 300));
    let run = run(&[
        text_record("http://a.example/page", 1, &text),
        text_record("http://b.example/page", 2, &text),
        // b's page is now empty: it leaves, and its pair with a's is retracted.
        text_record("http://b.example/page", 3, ""),
        text_record("http://c.example/empty", 4, ""),
        record("http://d.example/empty", 5, Some("text/html"), b""),
        text_record("http://e.example/empty", 6, ""),
    ]);
    assert_eq!(run.dead_letters, 0);
    assert_eq!(
        run.pair_states,
        vec![
            "detected http://a.example/page http://b.example/page",
            "retracted http://a.example/page http://b.example/page",
        ],
        "empty pages pair with nothing"
    );
    let with_content: Vec<(&str, bool)> = run
        .signatures
        .iter()
        .map(|s| (s["url"].as_str().unwrap(), s.get("content").is_some()))
        .collect();
    assert_eq!(
        with_content,
        vec![
            ("http://a.example/page", true),
            ("http://b.example/page", true),
            ("http://b.example/page", false),
            ("http://c.example/empty", false),
            ("http://d.example/empty", false),
            ("http://e.example/empty", false),
        ]
    );
}

#[test]
fn an_instant_meta_refresh_is_a_redirect_not_content() {
    // A documentation generator's stubs at an item's old paths: a few words and the target.
    let stub = |target: &str| {
        format!(
            r#"<!DOCTYPE html><html><head><meta http-equiv="refresh" content="0;URL=../{target}">
               <title>Redirection</title></head><body><p>Redirecting to <a href="../{target}">../{target}</a>...</p>
               <script>location.replace("../{target}" + location.search);</script></body></html>"#
        )
    };
    let text = format!("<p>{}</p>", prose(11, 300));
    // The same page with a notice and a refresh after 5 s is still content.
    let delayed = format!(
        r#"<head><meta http-equiv="refresh" content="5; url=http://c.example/new"></head>{text}"#
    );
    let run = run(&[
        text_record("http://a.example/doc/page.html", 1, &text),
        text_record("http://b.example/doc/page.html", 2, &delayed),
        // b's page moved: the stub leaves no content, and the pair is retracted.
        text_record("http://b.example/doc/page.html", 3, &stub("new/page.html")),
        text_record(
            "http://s.example/old/one.html",
            4,
            &stub("sync/struct.Barrier.html"),
        ),
        text_record(
            "http://s.example/old/two.html",
            5,
            &stub("sync/struct.Mutex.html"),
        ),
        text_record(
            "http://t.example/old/one.html",
            6,
            &stub("sync/struct.Barrier.html"),
        ),
    ]);
    assert_eq!(run.dead_letters, 0);
    assert_eq!(
        run.pair_states,
        vec![
            "detected http://a.example/doc/page.html http://b.example/doc/page.html",
            "retracted http://a.example/doc/page.html http://b.example/doc/page.html",
        ],
        "stubs pair with nothing, not even an identical one: they are redirects"
    );
    let with_content: Vec<bool> = run
        .signatures
        .iter()
        .map(|s| s.get("content").is_some())
        .collect();
    assert_eq!(with_content, [true, true, false, false, false, false]);
}

/// A body served as `text/plain` (a text file, a WET file's extracted text) is text: its `<`
/// and `&` are characters, not markup, so every word of it is a term; the same bytes served
/// as HTML lose what looks like tags and entities.
#[test]
fn plain_text_bodies_are_read_as_text() {
    let body = b"Compare a <b>c</b> &amp; d\nthen a second line";
    let records = vec![
        record(
            "http://a.example/notes.txt",
            1,
            Some("Text/Plain; charset=utf-8"),
            body,
        ),
        record("http://b.example/notes.html", 2, Some("text/html"), body),
    ];
    let run = run(&records);
    let terms = |url| content(&run, url)["tokens"].as_u64().unwrap();
    // compare a b c b amp d then a second line: 11; as HTML, "b", "/b" and "amp" are markup.
    assert_eq!(terms("http://a.example/notes.txt"), 11);
    assert_eq!(terms("http://b.example/notes.html"), 8);
}
