//! The benchmark's malformed input: every bad line becomes exactly one dead letter (and nothing
//! else) with the reason its kind calls for, and the dead letter points back at the line.
//!
//! Needs the small benchmark crawl: set `NEARDUP_BENCH_SMALL` to a directory made by
//!     python3 ../shared/bench/make_crawl.py --scale small --rounds 1 --out DIR
//! (`tests/run-all.sh` makes one under target/bench/). Without it the test fails, unless
//! `NEARDUP_SKIP_BENCH=1` says to skip it.

use neardup_schemas::{DeadLetterEvent, DeadLetterReason, OutputKind, Source};
use neardup_topology::{Config, Topology};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn bench_dir() -> Option<PathBuf> {
    match std::env::var_os("NEARDUP_BENCH_SMALL") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ if std::env::var("NEARDUP_SKIP_BENCH").as_deref() == Ok("1") => {
            eprintln!(
                "bench_bad_input: SKIPPED (NEARDUP_SKIP_BENCH=1 and NEARDUP_BENCH_SMALL is unset)"
            );
            None
        }
        _ => panic!(
            "NEARDUP_BENCH_SMALL is not set. Generate the small benchmark crawl with\n    \
             python3 /work/shared/bench/make_crawl.py --scale small --rounds 1 --out DIR\n\
             (or ../shared/bench/make_crawl.py from the repository root) and run with \
             NEARDUP_BENCH_SMALL=DIR; tests/run-all.sh does both. \
             Set NEARDUP_SKIP_BENCH=1 to skip this test."
        ),
    }
}

/// The reason a bad line of `kind` must give. `line` decides between the shapes the
/// generator's `not_an_object` kind produces (`{}`, invalid JSON such as `{"url": }`, or JSON
/// that is not an object).
fn expected_reason(kind: &str, line: &[u8]) -> DeadLetterReason {
    use DeadLetterReason::*;
    match kind {
        "truncated_json" => NotJson,
        "missing_url" => MissingField,
        "non_http_url" => InvalidUrl,
        "wrong_types" => WrongType,
        "invalid_utf8_base64" => UndecodableBody,
        "invalid_base64" => InvalidBase64,
        "bad_timestamp" => InvalidTimestamp,
        "status_out_of_range" => StatusOutOfRange,
        "invalid_utf8_line" => InvalidUtf8,
        "oversized_body" => BodyTooLarge,
        "not_an_object" => match serde_json::from_slice::<Value>(line) {
            Err(_) => NotJson,
            Ok(Value::Object(o)) if o.is_empty() => MissingField,
            Ok(Value::Object(o)) => panic!("not_an_object line is a non-empty object: {o:?}"),
            Ok(_) => NotAnObject,
        },
        other => panic!("unknown bad-input kind {other:?}: update this test's mapping"),
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn every_bad_line_of_the_bench_is_one_dead_letter_with_its_reason() {
    let Some(dir) = bench_dir() else {
        return;
    };
    let truth: Value = serde_json::from_slice(&read(&dir.join("truth.json")))
        .unwrap_or_else(|e| panic!("{}/truth.json is not JSON: {e}", dir.display()));
    let bad = &truth["bad_input"];
    let mixed = bad["mixed_into_events"].as_bool().unwrap_or(false);
    let file_name = bad["file"].as_str().expect("bad_input.file");
    assert!(
        !file_name.ends_with(".gz"),
        "gzipped input ({file_name}) is not supported here: make the crawl without --gzip"
    );
    let listed = bad["lines"].as_array().expect("bad_input.lines");
    assert_eq!(
        bad["count"].as_u64(),
        Some(listed.len() as u64),
        "bad_input.count"
    );
    assert!(
        !listed.is_empty(),
        "the crawl has no bad input to test (bad_rate 0?)"
    );
    let path = dir.join(file_name);
    let data = read(&path);
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    if !mixed {
        // The separate file holds bad lines only, each listed once, in order.
        assert_eq!(
            lines.len(),
            listed.len(),
            "{} has {} lines but truth lists {}",
            path.display(),
            lines.len(),
            listed.len()
        );
    }
    let file = path.display().to_string();
    let mut topo = Topology::new(Config::default());
    let mut previous = 0u64;
    for entry in listed {
        let n = entry["line"].as_u64().expect("line number");
        let kind = entry["kind"].as_str().expect("kind");
        assert!(n > previous, "lines listed out of order at {n}");
        previous = n;
        let raw = *lines
            .get(n as usize - 1)
            .unwrap_or_else(|| panic!("line {n} is past the end of {file}"));
        let src = Source::File {
            file: file.clone(),
            line: n,
        };
        let mut out = Vec::new();
        topo.process(raw, &src, &mut out);
        let shown = String::from_utf8_lossy(&raw[..raw.len().min(300)]).into_owned();
        assert_eq!(
            out.len(),
            1,
            "line {n} ({kind}) gave {} outputs, want one dead letter: {:?}\nline: {shown}",
            out.len(),
            out.iter().map(|e| e.kind).collect::<Vec<_>>()
        );
        let e = &out[0];
        assert_eq!(
            e.kind,
            OutputKind::DeadLetter,
            "line {n} ({kind}) was not dead-lettered: {shown}"
        );
        let dl: DeadLetterEvent = serde_json::from_slice(&e.value).expect("dead letter");
        let want = expected_reason(kind, raw);
        assert_eq!(
            dl.reason, want,
            "line {n} ({kind}): reason {:?} ({}), want {want:?}\nline: {shown}",
            dl.reason, dl.detail
        );
        assert_eq!(
            dl.source,
            Source::File {
                file: file.clone(),
                line: n
            },
            "line {n}: dead letter source"
        );
        assert_eq!(e.key, format!("{file}:{n}"), "line {n}: record key");
        assert_eq!(
            dl.payload_bytes,
            raw.len() as u64,
            "line {n}: payload_bytes"
        );
    }
    eprintln!(
        "bench_bad_input: {} bad lines of {file} checked",
        listed.len()
    );
}
