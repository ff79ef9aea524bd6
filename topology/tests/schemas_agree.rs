//! Every record the topology really emits validates against the JSON Schema file of its kind
//! (`schemas/json/<topic>.v1.schema.json`), and its record key is what the event implies.
//!
//! `schemas/tests/schema_files.rs` checks the files against events built by hand; this test
//! checks them against what `Topology::process` produces from a realistic input: exact clusters
//! that are created, joined, left, dissolved (by change, by 404 and by window eviction), canonical
//! changes both ways, Latin-1 bodies, and one input line for every dead-letter reason.

use base64::Engine as _;
use jsonschema::Validator;
use neardup_schemas::{DeadLetterReason, OutputKind, Source};
use neardup_topology::signer::{ListCaps, SignerConfig};
use neardup_topology::{Config, DecodeLimits, Emit, Prepared, Topology};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const FILE: &str = "realistic.jsonl";
const MAX_BODY: usize = 4096;

fn validator(kind: OutputKind) -> Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/json")
        .join(kind.schema_file());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    // Formats (date-time) asserted too, as a careful consumer would.
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", path.display()))
}

fn validators() -> BTreeMap<OutputKind, Validator> {
    OutputKind::ALL
        .into_iter()
        .map(|k| (k, validator(k)))
        .collect()
}

/// 2026-11-02T10:00:00Z plus `secs`, as RFC 3339.
fn ts(secs: i64) -> String {
    const T0: i64 = 1_793_613_600;
    let t = T0 + secs;
    let (days, rem) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Only November and December 2026 are used: day 20_758 is 2026-11-01.
    let day_of = days - 20_758;
    let (m, d) = if day_of < 30 {
        (11, day_of + 1)
    } else {
        (12, day_of - 29)
    };
    assert!(day_of < 61, "ts() covers Nov-Dec 2026 only");
    format!(
        "2026-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[test]
fn ts_helper_is_right() {
    assert_eq!(ts(0), "2026-11-02T10:00:00Z");
    assert_eq!(ts(4 * 86_400 + 61), "2026-11-06T10:01:01Z");
    assert_eq!(ts(30 * 86_400), "2026-12-02T10:00:00Z");
}

fn page(url: &str, secs: i64, status: u16, body: Option<&str>) -> Vec<u8> {
    let mut v = json!({"url": url, "fetched_at": ts(secs), "status": status, "crawl_id": "week-01",
                       "content_type": "text/html; charset=utf-8", "ip": "192.0.2.10"});
    if let Some(b) = body {
        v["body"] = b.into();
    }
    serde_json::to_vec(&v).unwrap()
}

fn latin1_page(url: &str, secs: i64, bytes: &[u8]) -> Vec<u8> {
    let v = json!({"url": url, "fetched_at": ts(secs), "status": 200,
                   "content_type": "text/html; charset=ISO-8859-1",
                   "body_base64": base64::engine::general_purpose::STANDARD.encode(bytes)});
    serde_json::to_vec(&v).unwrap()
}

/// The input: (line, the dead-letter reason it must give, if it is bad).
fn realistic_input() -> Vec<(Vec<u8>, Option<DeadLetterReason>)> {
    use DeadLetterReason::*;
    let b1 = "<html><head><title>Debian manual</title></head><body><h1>Manual</h1><p>Chapter 1.</p></body></html>";
    let b2 = "<html><body><p>Release notes &amp; errata</p><a href=\"/next.html\">next</a></body></html>";
    let b3 = "<html><body><p>Release notes, revised.</p></body></html>";
    let b4 = "<html><body><p>A page fetched four days later.</p></body></html>";
    let latin: &[u8] = b"<html><body><p>Caf\xe9 cr\xe8me, Stra\xdfe</p></body></html>";
    let (u1, u2, u3) = (
        "http://www.alpha.example/docs/index.html",
        "http://mirror.beta.example/docs/index.html",
        "https://alpha.example/docs/index.html",
    );
    let (v1, v2, v3) = (
        "http://www.gamma.example/page",
        "http://www.delta.example/page",
        "https://gamma.example/page",
    );
    let ok = |l: Vec<u8>| (l, None);
    let bad = |l: &[u8], r| (l.to_vec(), Some(r));
    let fields = |extra: Value| {
        let mut v = json!({"url": "http://bad.example/x", "fetched_at": ts(100), "status": 200});
        for (k, x) in extra.as_object().unwrap() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        serde_json::to_vec(&v).unwrap()
    };
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let many_items: String = (0..100)
        .map(|i| format!("<a href={i}>Item {i}. Of {i}.</a><br>"))
        .collect();
    vec![
        // cluster of b1: created (u1 canonical: seen first), joined, left (not canonical: restore)
        ok(page(u1, 0, 200, Some(b1))),
        ok(page(u2, 1, 200, Some(b1))),
        ok(page(u3, 2, 200, Some(b1))),
        ok(page(u3, 3, 404, None)),
        // cluster of b2: three members seen at the same time; https wins the tie, so the join
        // changes the canonical, and its status 0 changes it back
        ok(page(v1, 10, 200, Some(b2))),
        ok(page(v2, 10, 200, Some(b2))),
        ok(page(v3, 10, 200, Some(b2))),
        ok(page(v3, 20, 0, None)),
        // v1 changes content: the cluster falls to one member and dissolves
        ok(page(v1, 30, 200, Some(b3))),
        // Latin-1 copies
        ok(latin1_page("http://latin.example/a.html", 40, latin)),
        ok(latin1_page("http://latin-mirror.example/a.html", 41, latin)),
        // a refresh, a 410 of an unknown URL, a page without optional fields
        ok(page(u1, 50, 200, Some(b1))),
        ok(page("http://unknown.example/gone", 51, 410, None)),
        ok(serde_json::to_vec(
            &json!({"url": "https://plain.example/", "fetched_at": ts(52), "status": 200, "body": ""}),
        )
        .unwrap()),
        // every dead-letter reason
        bad(br#"{"url": "http://x.example/", "fetched_at": "#, NotJson),
        bad(b"[\"http://x.example/\", 200]", NotAnObject),
        bad(&fields(json!({"fetched_at": null})), MissingField),
        bad(&fields(json!({"status": "200"})), WrongType),
        bad(&fields(json!({"url": "ftp://x.example/file"})), InvalidUrl),
        bad(&fields(json!({"fetched_at": "2026-11-02 10:15:00"})), InvalidTimestamp),
        bad(&fields(json!({"status": 999})), StatusOutOfRange),
        bad(&fields(json!({"body_base64": "PGh0bWw+!!not*base64%%A"})), InvalidBase64),
        bad(
            &fields(json!({"content_type": "text/html; charset=utf-8",
                           "body_base64": b64(b"<p>Caf\xe9 \xff\xfe\xc3\x28</p>")})),
            UndecodableBody,
        ),
        bad(&fields(json!({"body": "<p>x</p>", "body_base64": b64(b"<p>x</p>")})), ConflictingBody),
        // over max_body_bytes, and (second) a record so large it is refused before parsing and
        // its dead-letter payload is cut
        bad(&fields(json!({"body": "x".repeat(MAX_BODY + 1)})), BodyTooLarge),
        bad(&fields(json!({"body": "<p>big</p>".repeat(8000)})), BodyTooLarge),
        bad(
            b"{\"url\":\"http://bad.example/\xff\xfe\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200}",
            InvalidUtf8,
        ),
        // a page over every cap on its lists (see `config`): its signature event says what
        // they left out
        ok(page(
            "http://links.example/a/long/directory/path/of/links/",
            60,
            200,
            Some(&many_items),
        )),
        // a URL so long that the signature event is over max_output_bytes (8 KiB here, which
        // neardup run does not accept), and one over the longest URL accepted (8 KiB)
        bad(
            &fields(json!({"url": format!("http://long.example/{}", "a/".repeat(3500))})),
            OutputTooLarge,
        ),
        bad(
            &fields(json!({"url": format!("http://long.example/{}", "a/".repeat(4200))})),
            InvalidUrl,
        ),
        // four days later: every entry above leaves the window (pairs retracted, clusters dissolved)
        ok(page("http://epsilon.example/", 4 * 86_400, 200, Some(b4))),
        ok(page("http://zeta.example/", 4 * 86_400 + 1, 200, Some(b4))),
    ]
}

fn config() -> Config {
    Config {
        decode: DecodeLimits {
            max_body_bytes: MAX_BODY,
            ..DecodeLimits::default()
        },
        window_ms: 3 * 86_400 * 1000,
        // The last pages come four days after the others: a jump, not a leap, here.
        max_event_time_lead_ms: Some(7 * 86_400 * 1000),
        max_output_bytes: 8 * 1024,
        signer: SignerConfig {
            caps: ListCaps {
                link_bytes: 1024,
                chunks: 20,
                paragraphs: 10,
            },
            ..SignerConfig::default()
        },
        ..Config::default()
    }
}

/// Validates one record against its schema and checks its `schema` field and record key.
fn check_record(validators: &BTreeMap<OutputKind, Validator>, e: &Emit) -> Value {
    let text = String::from_utf8_lossy(&e.value);
    let v: Value = serde_json::from_slice(&e.value)
        .unwrap_or_else(|err| panic!("{:?} record is not JSON ({err}): {text}", e.kind));
    let errors: Vec<String> = validators[&e.kind]
        .iter_errors(&v)
        .map(|err| format!("at '{}': {err}", err.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{:?} record does not validate against {}:\n  {}\nrecord: {text}",
        e.kind,
        e.kind.schema_file(),
        errors.join("\n  ")
    );
    assert_eq!(v["schema"], e.kind.schema(), "schema field of {text}");
    let s = |f: &str| v[f].as_str().unwrap_or_else(|| panic!("no {f} in {text}"));
    let want_key = match e.kind {
        OutputKind::Pairs => format!("{} {}", s("a"), s("b")),
        OutputKind::Clusters => s("cluster_id").to_owned(),
        OutputKind::Signatures | OutputKind::Recrawl => s("url").to_owned(),
        OutputKind::DeadLetter => {
            let src: Source = serde_json::from_value(v["source"].clone()).expect("source");
            src.to_string()
        }
        other => panic!("the topology emitted an unexpected kind {other:?}: {text}"),
    };
    assert_eq!(e.key, want_key, "record key of {text}");
    v
}

#[test]
fn every_emitted_record_validates_against_its_schema() {
    let validators = validators();
    let mut topo = Topology::new(config());
    let mut seen: BTreeMap<OutputKind, Vec<Value>> = BTreeMap::new();
    let mut reasons: BTreeSet<String> = BTreeSet::new();
    for (i, (line, want)) in realistic_input().into_iter().enumerate() {
        let src = Source::File {
            file: FILE.into(),
            line: i as u64 + 1,
        };
        let mut out = Vec::new();
        topo.process(&line, &src, &mut out);
        for e in &out {
            let v = check_record(&validators, e);
            seen.entry(e.kind).or_default().push(v);
        }
        match want {
            Some(reason) => {
                assert_eq!(
                    out.len(),
                    1,
                    "line {} should give one dead letter: {out:?}",
                    i + 1
                );
                let dl = &seen[&OutputKind::DeadLetter].last().unwrap().clone();
                assert_eq!(out[0].kind, OutputKind::DeadLetter);
                assert_eq!(dl["reason"], reason.as_str(), "line {}", i + 1);
                assert_eq!(dl["source"], json!({"file": FILE, "line": i + 1}));
                assert_eq!(out[0].key, format!("{FILE}:{}", i + 1));
                reasons.insert(reason.as_str().to_owned());
            }
            None => assert!(
                out.iter().any(|e| e.kind == OutputKind::Signatures)
                    && out.iter().all(|e| e.kind != OutputKind::DeadLetter),
                "line {} is good and should give a signature: {out:?}",
                i + 1
            ),
        }
    }
    for kind in [
        OutputKind::Signatures,
        OutputKind::Pairs,
        OutputKind::Clusters,
        OutputKind::Recrawl,
        OutputKind::DeadLetter,
    ] {
        assert!(seen.contains_key(&kind), "no {kind:?} record was emitted");
    }
    // A damaged stretch of a replayed file: the replay's reader finds it, not the topology,
    // which makes it a dead letter as it does every record refused before decoding.
    let damaged = b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 7379\r\n\r\nHTTP/1.1 2";
    let src = Source::File {
        file: "cut.warc".into(),
        line: 3,
    };
    let rejected = Prepared::rejected(
        DeadLetterReason::DamagedInput,
        "the WARC record starting at byte 1024 is cut off (12 of 7379 bytes): the file ends inside it",
    );
    let mut out = Vec::new();
    topo.apply(rejected, damaged, &src, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    let dl = check_record(&validators, &out[0]);
    assert_eq!(dl["payload_bytes"], damaged.len());
    reasons.insert(dl["reason"].as_str().unwrap().to_owned());
    let all_reasons: BTreeSet<String> = DeadLetterReason::ALL
        .iter()
        .map(|r| r.as_str().to_owned())
        .collect();
    assert_eq!(
        reasons, all_reasons,
        "not every dead-letter reason provoked"
    );
    let values = |kind: OutputKind, field: &str| -> BTreeSet<String> {
        seen[&kind]
            .iter()
            .filter_map(|v| v[field].as_str().map(str::to_owned))
            .collect()
    };
    let set = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        values(OutputKind::Clusters, "change"),
        set(&[
            "created",
            "joined",
            "left",
            "dissolved",
            "canonical_changed"
        ])
    );
    assert_eq!(
        values(OutputKind::Pairs, "state"),
        set(&["detected", "retracted"])
    );
    assert_eq!(
        values(OutputKind::Recrawl, "hint"),
        set(&["keep", "deprioritize", "restore"])
    );
    assert!(
        seen[&OutputKind::Signatures]
            .iter()
            .any(|v| v["content"]["charset"] == "windows-1252"),
        "the Latin-1 pages were not decoded as windows-1252"
    );
    for field in ["chunks_omitted", "paragraphs_omitted", "out_links_omitted"] {
        assert!(
            seen[&OutputKind::Signatures]
                .iter()
                .any(|v| v["content"][field].is_u64()),
            "no signature event with {field}"
        );
    }
    assert!(
        seen[&OutputKind::DeadLetter]
            .iter()
            .any(|v| v["payload_truncated"] == true),
        "no dead letter with a cut payload"
    );
    // Window eviction: both live clusters (b1 and the Latin-1 one) dissolved on the late page.
    // The same three groups are clusters at every level (their pairs are exact).
    for level in ["exact", "virtually_identical", "very_similar"] {
        let dissolved = seen[&OutputKind::Clusters]
            .iter()
            .filter(|v| v["change"] == "dissolved" && v["level"] == level)
            .count();
        assert_eq!(
            dissolved, 3,
            "{level}: b2 by change, b1 and Latin-1 by eviction"
        );
    }
}

/// Runs `lines` (all valid input per the decoder) and returns the schema violations found.
fn violations(lines: &[Vec<u8>]) -> Vec<String> {
    let validators = validators();
    let mut topo = Topology::new(config());
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let src = Source::File {
            file: FILE.into(),
            line: i as u64 + 1,
        };
        let mut out = Vec::new();
        topo.process(line, &src, &mut out);
        for e in &out {
            let v: Value = serde_json::from_slice(&e.value).expect("JSON");
            for err in validators[&e.kind].iter_errors(&v) {
                found.push(format!(
                    "line {}: {:?} at '{}': {err}",
                    i + 1,
                    e.kind,
                    err.instance_path
                ));
            }
        }
    }
    found
}

/// SRC BUG (decode.rs `check_url` versus the schemas): the decoder accepts an upper-case scheme
/// (`HTTP://`, `Https://`; the check is case-insensitive) and the URL is then published verbatim,
/// but every schema, input and output alike, requires `^https?://[^/]`. Either the decoder
/// should refuse such a URL (invalid_url) or normalise the scheme before it is published.
#[test]
fn regression_upper_case_scheme_url_violated_the_output_schemas() {
    let body = "<p>the same page</p>";
    let lines = vec![
        page("HTTP://www.upper.example/a.html", 0, 200, Some(body)),
        page("Https://upper-mirror.example/a.html", 1, 200, Some(body)),
    ];
    let found = violations(&lines);
    assert!(
        found.is_empty(),
        "accepted input produced schema-invalid output:\n  {}",
        found.join("\n  ")
    );
}

/// SRC BUG (lib.rs `format_time` versus the schemas): a `fetched_at` that is valid RFC 3339
/// but whose UTC instant is outside years 0000-9999 (`0000-01-01T00:30:00+01:00` is in year -1
/// in UTC; `9999-12-31T23:30:00-01:00` in year 10000) is accepted by the decoder, and
/// `format_time` then falls back to the millisecond count, so `fetched_at`/`at` are not
/// `date-time` strings. The decoder should refuse such a timestamp (invalid_timestamp).
#[test]
fn regression_timestamp_outside_rfc3339_years_in_utc_violated_the_schemas() {
    let line = |t: &str| {
        serde_json::to_vec(
            &json!({"url": "http://edge.example/", "fetched_at": t, "status": 200, "body": "<p>x</p>"}),
        )
        .unwrap()
    };
    let found = violations(&[
        line("0000-01-01T00:30:00+01:00"),
        line("9999-12-31T23:30:00-01:00"),
    ]);
    assert!(
        found.is_empty(),
        "accepted input produced schema-invalid output:\n  {}",
        found.join("\n  ")
    );
}
