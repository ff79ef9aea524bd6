//! Chinese and Japanese are written without spaces between words, so every character is a
//! term (the tokenizer's `is_unspaced`): a page and its copy with one character in 80 changed
//! pair as near duplicates, as an English page with one word in 80 changed does. As runs of
//! letters, each clause would be one term, one changed character would change it, and such a
//! copy would share almost no shingle with its original.

use neardup_schemas::{OutputKind, Source};
use neardup_topology::{Config, Topology};
use serde_json::{json, Value};

/// A deterministic "Chinese" text of `n` characters from the first 3,000 unified ideographs,
/// a comma or full stop every 9-20 characters; the characters at positions `changed` are
/// replaced by others.
fn han(seed: u64, n: usize, changed: impl Fn(usize) -> bool) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    let mut clause = 0;
    for i in 0..n {
        let r = next();
        let mut c = 0x4e00 + (r % 3000) as u32;
        if changed(i) {
            c = 0x4e00 + ((r / 3000 + 1) % 3000) as u32;
        }
        out.push(char::from_u32(c).expect("an ideograph"));
        clause += 1;
        if clause >= 9 + (r >> 40) as usize % 12 {
            out.push(if r >> 60 == 0 { '。' } else { '，' });
            clause = 0;
        }
    }
    out
}

fn pairs(pages: &[(&str, String)]) -> Vec<Value> {
    let mut topo = Topology::new(Config::default());
    let mut out = Vec::new();
    for (i, (url, text)) in pages.iter().enumerate() {
        let record = json!({"url": url, "fetched_at": format!("2026-11-02T10:15:{i:02}Z"),
                            "status": 200, "content_type": "text/html; charset=utf-8",
                            "body": format!("<html><body><p>{text}</p></body></html>")});
        let source = Source::File {
            file: "han.jsonl".into(),
            line: i as u64 + 1,
        };
        topo.process(record.to_string().as_bytes(), &source, &mut out);
    }
    out.iter()
        .filter(|e| e.kind == OutputKind::Pairs)
        .map(|e| serde_json::from_slice(&e.value).expect("a pair event"))
        .collect()
}

#[test]
fn a_chinese_page_and_its_lightly_edited_copy_pair() {
    let original = han(7, 2400, |_| false);
    let edited = han(7, 2400, |i| i % 80 == 40);
    let other = han(8, 2400, |_| false);
    assert_ne!(original, edited);
    let found = pairs(&[
        ("http://a.example/zh/page.html", original),
        ("http://b.example/zh/page.html", edited),
        ("http://c.example/zh/other.html", other),
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
    let p = &found[0];
    assert_eq!(p["state"], "detected");
    assert_eq!(p["a"], "http://a.example/zh/page.html");
    assert_eq!(p["b"], "http://b.example/zh/page.html");
    assert_eq!(p["level"], "very_similar");
    let j = p["jaccard"].as_f64().expect("an estimate");
    assert!(j > 0.7, "estimated Jaccard {j}");
}
