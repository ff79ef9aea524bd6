//! The signature event of a page of any size fits under the smallest output limit accepted:
//! its lists that grow with the page are capped, and say how much they left out.
//!
//! An output over `max_output_bytes` all the same (a Kafka producer and topic refuse records
//! over their limit, and a run that stopped on one would stop on it again after every restart)
//! becomes an `output_too_large` dead letter that names it and carries its beginning, and
//! nothing else changes: the page is still indexed, paired and clustered. With the caps, and
//! URLs no longer than `MAX_URL_BYTES`, no page can make one, so these tests lift the cap on
//! out-links instead.

use neardup_schemas::{OutputKind, Source};
use neardup_topology::signer::{ListCaps, SignerConfig};
use neardup_topology::{Config, Emit, Preparer, SignOutput, SignStage, Topology, MAX_URL_BYTES};
use serde_json::{json, Value};

/// The smallest `max_output_bytes` that `neardup run` accepts.
const SMALLEST_LIMIT: usize = 512 * 1024;

/// A page as large as the input contract allows (5 MiB less a little), the worst case for
/// every capped list at once: a link, a line and a sentence every few bytes.
fn huge_page(url: &str, second: u32) -> (Vec<u8>, usize) {
    let mut body = String::new();
    let mut links = 0;
    while body.len() < 5 * 1024 * 1024 - 100 {
        body.push_str(&format!(
            "<a href=/d/{links}.html>{links}. x{links}.</a><br>\n"
        ));
        links += 1;
    }
    let line = json!({"url": url, "fetched_at": format!("2026-11-02T10:15:{second:02}Z"),
                      "status": 200, "body": body});
    (line.to_string().into_bytes(), links)
}

/// A URL as long as neardup accepts, of a character JSON escapes (each `"` takes two bytes in
/// every output that names the URL): the worst case for the outputs' sizes.
fn longest_url(host: &str) -> String {
    let base = format!("http://{host}/");
    format!("{base}{}", "\"".repeat(MAX_URL_BYTES - base.len()))
}

#[test]
fn the_signature_event_of_a_page_of_any_size_fits_the_smallest_limit() {
    // Collections on: the sign stage's record then carries the out-links twice.
    let cfg = Config {
        max_output_bytes: SMALLEST_LIMIT,
        collections: true,
        ..Config::default()
    };
    let mut topo = Topology::new(cfg.clone());
    let mut out = Vec::new();
    // Each with the longest URL accepted.
    let (a, links) = huge_page(&longest_url("a.example"), 1);
    topo.process(&a, &source(1), &mut out);
    let (b, _) = huge_page(&longest_url("b.example"), 2);
    topo.process(&b, &source(2), &mut out);
    assert!(of_kind(&out, OutputKind::DeadLetter).is_empty());
    assert_eq!(
        topo.stats().lists_capped,
        2,
        "counted for the summary and metrics"
    );
    let sizes: Vec<usize> = out.iter().map(|e| e.key.len() + e.value.len()).collect();
    assert!(sizes.iter().all(|&n| n <= SMALLEST_LIMIT), "{sizes:?}");

    let signatures = of_kind(&out, OutputKind::Signatures);
    assert_eq!(signatures.len(), 2);
    let c = &signatures[0]["content"];
    let caps = ListCaps::default();
    // The links are distinct: the first in document order, as many as the budget holds, and a
    // count of the rest.
    let kept = c["out_links"].as_array().unwrap();
    let want: Vec<String> = (0..kept.len())
        .map(|i| format!("http://a.example/d/{i}.html"))
        .collect();
    assert_eq!(kept, &want);
    let cost: usize = want.iter().map(|l| ListCaps::link_cost(l)).sum();
    let next = ListCaps::link_cost(&format!("http://a.example/d/{}.html", kept.len()));
    assert!(cost <= caps.link_bytes && cost + next > caps.link_bytes);
    assert_eq!(c["out_links_omitted"], links - kept.len());
    // Bottom-k samples of the chunks and paragraphs: the smallest, sorted.
    for (list, cap) in [("chunks", caps.chunks), ("paragraphs", caps.paragraphs)] {
        let v: Vec<&str> = c[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(v.len(), cap, "{list}");
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{list} sorted");
        assert!(c[format!("{list}_omitted")].as_u64().unwrap() > 0, "{list}");
    }
    // The copies are still an exact pair.
    let pairs = of_kind(&out, OutputKind::Pairs);
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0]["level"], "exact");

    // The split topology's sign stage sends the index stage the page, under the same limit.
    let prepared = Preparer::new(&cfg).prepare(&a);
    let mut topo = Topology::new(cfg.clone());
    match SignStage::new(&cfg).output(prepared, &a, &source(1), &mut topo) {
        SignOutput::Internal { key, value } => {
            let size = key.len() + value.len();
            assert!(size <= SMALLEST_LIMIT && size > 400_000, "{size}");
        }
        SignOutput::DeadLetter(e) => panic!(
            "the sign stage dead-lettered the page: {:.400}",
            String::from_utf8_lossy(&e.value)
        ),
    }
}

/// The default configuration with no cap on out-links.
fn uncapped(max_output_bytes: usize) -> Config {
    Config {
        max_output_bytes,
        signer: SignerConfig {
            caps: ListCaps {
                link_bytes: usize::MAX,
                ..ListCaps::default()
            },
            ..SignerConfig::default()
        },
        ..Config::default()
    }
}

/// A page of 20,000 out-links (a sitemap-like index): about 0.9 MB of signature event.
fn links_page(url: &str, second: u32) -> Vec<u8> {
    let body: String = (0..20_000)
        .map(|i| format!("<a href=/docs/section/page-{i}.html>p</a>\n"))
        .collect();
    json!({"url": url, "fetched_at": format!("2026-11-02T10:15:{second:02}Z"), "status": 200,
           "body": body})
    .to_string()
    .into_bytes()
}

fn source(line: u64) -> Source {
    Source::File {
        file: "links.jsonl".into(),
        line,
    }
}

/// The outputs of the two copies of the links page, one topology.
fn run(cfg: &Config) -> Vec<Emit> {
    let mut topo = Topology::new(cfg.clone());
    let mut out = Vec::new();
    topo.process(
        &links_page("http://a.example/index.html", 1),
        &source(1),
        &mut out,
    );
    topo.process(
        &links_page("http://b.example/index.html", 2),
        &source(2),
        &mut out,
    );
    out
}

fn of_kind(out: &[Emit], kind: OutputKind) -> Vec<Value> {
    out.iter()
        .filter(|e| e.kind == kind)
        .map(|e| serde_json::from_slice(&e.value).unwrap())
        .collect()
}

#[test]
fn an_oversized_signature_event_becomes_a_dead_letter_and_the_page_is_still_indexed() {
    let (small, large) = (uncapped(600_000), uncapped(2_000_000));
    let (limited, whole) = (run(&small), run(&large));

    // Under the large limit every signature event is published: they are over the small one.
    let signatures = of_kind(&whole, OutputKind::Signatures);
    assert_eq!(signatures.len(), 2);
    let sizes: Vec<usize> = whole
        .iter()
        .filter(|e| e.kind == OutputKind::Signatures)
        .map(|e| e.key.len() + e.value.len())
        .collect();
    assert!(
        sizes.iter().all(|&n| n > 600_000 && n < 2_000_000),
        "{sizes:?}"
    );
    assert!(of_kind(&whole, OutputKind::DeadLetter).is_empty());

    // Under the small one, each becomes a dead letter naming it, at its input's coordinates.
    assert!(of_kind(&limited, OutputKind::Signatures).is_empty());
    let dead = of_kind(&limited, OutputKind::DeadLetter);
    assert_eq!(dead.len(), 2);
    for (i, (d, size)) in dead.iter().zip(&sizes).enumerate() {
        assert_eq!(d["reason"], "output_too_large");
        assert_eq!(d["source"], json!({"file": "links.jsonl", "line": i + 1}));
        assert_eq!(
            d["payload_bytes"],
            *size as u64 - "http://a.example/index.html".len() as u64
        );
        assert_eq!(d["payload_truncated"], true);
        let payload = d["payload"].as_str().unwrap();
        assert!(
            payload.starts_with("{\"schema\":\"neardup.signatures/v1\""),
            "{payload:.80}"
        );
        let detail = d["detail"].as_str().unwrap();
        assert!(
            detail.contains("signatures event") && detail.contains("600000-byte"),
            "{detail}"
        );
    }
    // Everything else is the same: the copies are an exact pair and a cluster either way.
    for kind in [OutputKind::Pairs, OutputKind::Clusters, OutputKind::Recrawl] {
        let (a, b) = (of_kind(&limited, kind), of_kind(&whole, kind));
        assert!(!a.is_empty(), "{kind:?}");
        assert_eq!(a, b, "{kind:?}");
    }
}

/// The split topology's sign stage cannot send the index stage a record over the limit: the
/// input record becomes the dead letter, and records under it pass.
#[test]
fn the_sign_stage_dead_letters_a_page_whose_record_is_over_the_limit() {
    let check = |limit: usize| {
        let cfg = uncapped(limit);
        let mut topo = Topology::new(cfg.clone());
        let line = links_page("http://a.example/index.html", 1);
        SignStage::new(&cfg).output(
            Preparer::new(&cfg).prepare(&line),
            &line,
            &source(1),
            &mut topo,
        )
    };
    match check(600_000) {
        SignOutput::DeadLetter(e) => {
            let d: Value = serde_json::from_slice(&e.value).unwrap();
            assert_eq!(d["reason"], "output_too_large");
            // The input record, cut.
            let line = links_page("http://a.example/index.html", 1);
            assert_eq!(d["payload_bytes"], line.len() as u64);
            let payload = d["payload"].as_str().unwrap();
            assert!(line.starts_with(payload.as_bytes()), "{payload:.80}");
            assert!(d["detail"].as_str().unwrap().contains("index stage"));
        }
        other => panic!("a record for the index stage: {other:?}"),
    }
    assert!(matches!(check(2_000_000), SignOutput::Internal { .. }));
}
