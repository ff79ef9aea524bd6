//! The JSON Schema files in `schemas/json/` against the Rust event types.
//!
//! Every output kind gets several real events, built with the Rust types, sealed and serialized
//! exactly as neardup publishes them; each must validate against its schema file. The files are
//! closed (`additionalProperties: false` at every object level), so a field added to a type but
//! not to its schema fails here, and the coverage test fails the other way round: a schema
//! property no event carries, or a `required` list that disagrees with what is always serialized.
//! Negative checks prove the schemas reject what the contract forbids.

use jsonschema::Validator;
use neardup_schemas::{
    ChangeBucket, ChangeSinceLast, ClusterChangeKind, ClusterEvent, CollectionEvent,
    CollectionHost, ContentSignatures, DeadLetterEvent, DeadLetterReason, MirrorEvent, MirrorState,
    OutputEvent, OutputKind, PairEvent, PairLevel, PairState, RecrawlEvent, RecrawlHint,
    SignatureEvent, Source,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::PathBuf;

/// The input contract's schema file (not an output kind).
const INPUT_SCHEMA: &str = "crawl.pages.v1.schema.json";
/// Files in `schemas/json/` that are not schemas.
const OTHER_FILES: [&str; 1] = ["README.md"];
const ID_BASE: &str = "https://neardup.invalid/schemas/";
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

// ------------------------------------------------------------------------------------------
// Loading and validating
// ------------------------------------------------------------------------------------------

fn json_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("json")
}

fn load(file: &str) -> Value {
    let path = json_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A validator that also asserts `format` (`date-time`), as a careful consumer would.
fn validator(file: &str) -> Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&load(file))
        .unwrap_or_else(|e| panic!("{file} does not compile as a JSON Schema: {e}"))
}

fn errors(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("at '{}': {e}", e.instance_path))
        .collect()
}

fn assert_valid(validator: &Validator, instance: &Value, what: &str) {
    let errors = errors(validator, instance);
    assert!(
        errors.is_empty(),
        "{what} should validate but does not:\n  {}\ninstance: {instance}",
        errors.join("\n  ")
    );
}

fn assert_invalid(validator: &Validator, instance: &Value, what: &str) {
    assert!(
        !validator.is_valid(instance),
        "{what} should be rejected by the schema but validates: {instance}"
    );
}

// ------------------------------------------------------------------------------------------
// Real events
// ------------------------------------------------------------------------------------------

/// One sealed event as published: its JSON value and its record key.
struct Case {
    name: &'static str,
    json: Value,
    key: String,
}

/// Seals `event`, serializes it to the record bytes and checks that the bytes read back into
/// the same event (the types are `deny_unknown_fields`) and that sealing again changes nothing.
fn case<T>(name: &'static str, mut event: T) -> Case
where
    T: OutputEvent + DeserializeOwned + PartialEq + Clone + Debug,
{
    event.seal();
    let bytes = serde_json::to_vec(&event).expect("event serializes");
    let back: T = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{name}: the serialized event does not read back: {e}"));
    assert_eq!(back, event, "{name}: the event does not round-trip");
    let mut resealed = back;
    resealed.seal();
    assert_eq!(
        resealed, event,
        "{name}: sealing twice changes the event_id"
    );
    Case {
        name,
        json: serde_json::from_slice(&bytes).expect("record is JSON"),
        key: event.key(),
    }
}

fn hex(n: u128) -> String {
    format!("{n:032x}")
}

const AT: &str = "2026-11-02T10:15:00Z";
const AT2: &str = "2026-11-09T08:01:37Z";

fn signature_cases() -> Vec<Case> {
    let event = |url: &str, status, crawl_id: Option<&str>, content: Option<ContentSignatures>| {
        SignatureEvent {
            schema: OutputKind::Signatures.schema().into(),
            event_id: String::new(),
            url: url.into(),
            fetched_at: AT.into(),
            crawl_id: crawl_id.map(Into::into),
            status,
            params: "3f9c0a7b5e2d4c11".into(),
            content,
            change: None,
        }
    };
    let content = |charset: &str| ContentSignatures {
        checksum: hex(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
        text_hash: hex(0xfedc_ba98_7654_3210_8899_aabb_ccdd_eeff),
        body_bytes: 5120,
        text_bytes: 2048,
        tokens: 350,
        charset: charset.into(),
        tokens_truncated: false,
        shingles: 343,
        supershingles: (0..6u64)
            .map(|i| format!("{:016x}", i * 0x1111_2222_3333))
            .collect(),
        minvalues: None,
        simhash: "0f".repeat(48),
        chunks: vec!["0000abcd".into(), "7fff0001".into()],
        chunks_omitted: 0,
        paragraphs: vec!["00000000000000ff".into()],
        paragraphs_omitted: 0,
        short_page: false,
        rp: vec![0.5, 0.25, 1.0, 0.0, 0.75],
        out_links: vec!["http://www.debian.example/docs/15/next.html".into()],
        out_links_omitted: 0,
    };
    vec![
        case(
            "signatures: 200 with content and crawl_id",
            event(
                "http://www.debian.example/docs/15/index.html",
                200,
                Some("week-01"),
                Some(content("utf-8")),
            ),
        ),
        case(
            "signatures: 404, no optional field",
            event(
                "http://www.debian.example/docs/15/gone.html",
                404,
                None,
                None,
            ),
        ),
        case(
            "signatures: changed since the last fetch, every optional field",
            SignatureEvent {
                change: Some(ChangeSinceLast {
                    previous_fetched_at: AT2.into(),
                    agreeing_minvalues: 61,
                    same_checksum: false,
                    same_text: false,
                    bucket: ChangeBucket::Small,
                }),
                ..event(
                    "http://www.debian.example/docs/15/index.html",
                    200,
                    Some("week-02"),
                    Some(ContentSignatures {
                        tokens_truncated: true,
                        minvalues: Some((0..84u64).map(|i| format!("{i:016x}")).collect()),
                        chunks_omitted: 40_000,
                        paragraphs_omitted: 9,
                        out_links_omitted: 17_000,
                        ..content("utf-8")
                    }),
                )
            },
        ),
        case(
            "signatures: status 0 (host down)",
            event("https://mirror3.example/manual/", 0, Some("week-02"), None),
        ),
        case(
            "signatures: Latin-1 page without crawl_id",
            event(
                "https://latin.example/doc/x.html",
                200,
                None,
                Some(ContentSignatures {
                    body_bytes: 0,
                    text_bytes: 0,
                    tokens: 0,
                    ..content("iso-8859-1")
                }),
            ),
        ),
    ]
}

fn pair_states() -> Vec<PairState> {
    // A new variant makes this match non-exhaustive: add it to the list (and to the schema).
    let _exhaustive = |s: PairState| match s {
        PairState::Detected | PairState::Retracted => (),
    };
    vec![PairState::Detected, PairState::Retracted]
}

fn pair_levels() -> Vec<PairLevel> {
    let _exhaustive = |l: PairLevel| match l {
        PairLevel::VerySimilar | PairLevel::VirtuallyIdentical | PairLevel::Exact => (),
    };
    vec![
        PairLevel::VerySimilar,
        PairLevel::VirtuallyIdentical,
        PairLevel::Exact,
    ]
}

fn pair_cases() -> Vec<Case> {
    let a = "http://www.debian.example/docs/15/index.html";
    let b = "http://mirror1.example/manual/index.html";
    vec![
        case(
            "pairs: exact, every optional field",
            PairEvent::new(
                a.into(),
                b.into(),
                PairState::Detected,
                PairLevel::Exact,
                6,
                384,
                Some(1.0),
                false,
                AT.into(),
                Some("week-01".into()),
            ),
        ),
        case(
            "pairs: retracted, no optional field",
            PairEvent::new(
                b.into(),
                a.into(),
                PairState::Retracted,
                PairLevel::VerySimilar,
                4,
                341,
                None,
                true,
                AT2.into(),
                None,
            ),
        ),
        case(
            "pairs: virtually identical",
            PairEvent::new(
                "http://wiki.example/page?sid=17".into(),
                "http://wiki.example/page?sid=42".into(),
                PairState::Detected,
                PairLevel::VirtuallyIdentical,
                6,
                371,
                Some(0.93),
                true,
                AT2.into(),
                Some("week-02".into()),
            ),
        ),
        case(
            "pairs: range bounds",
            PairEvent::new(
                "https://p1.example/".into(),
                "https://p2.example/".into(),
                PairState::Detected,
                PairLevel::VerySimilar,
                0,
                0,
                Some(0.0),
                false,
                AT.into(),
                None,
            ),
        ),
    ]
}

fn cluster_changes() -> Vec<ClusterChangeKind> {
    use ClusterChangeKind::*;
    let _exhaustive = |c: ClusterChangeKind| match c {
        Created | Joined | Left | Merged | Split | Dissolved | CanonicalChanged => (),
    };
    vec![
        Created,
        Joined,
        Left,
        Merged,
        Split,
        Dissolved,
        CanonicalChanged,
    ]
}

fn cluster_cases() -> Vec<Case> {
    let urls = |paths: &[&str]| -> Vec<String> {
        paths
            .iter()
            .map(|p| format!("http://www.debian.example/docs/15/{p}"))
            .collect()
    };
    let event =
        |change, level, size, canonical: Option<&str>, added, removed, related| ClusterEvent {
            schema: OutputKind::Clusters.schema().into(),
            event_id: String::new(),
            cluster_id: "c-7f3a9e01".into(),
            level,
            change,
            size,
            canonical: canonical.map(|p| format!("http://www.debian.example/docs/15/{p}")),
            added,
            removed,
            related,
            at: AT.into(),
        };
    use ClusterChangeKind::*;
    use PairLevel::*;
    let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        case(
            "clusters: merged, every optional field",
            event(
                Merged,
                VerySimilar,
                5,
                Some("a.html"),
                urls(&["d.html", "e.html"]),
                urls(&["f.html"]),
                ids(&["c-11111111", "c-22222222"]),
            ),
        ),
        case(
            "clusters: dissolved, no optional field",
            event(Dissolved, Exact, 0, None, vec![], vec![], vec![]),
        ),
        case(
            "clusters: created",
            event(
                Created,
                Exact,
                2,
                Some("a.html"),
                urls(&["a.html", "b.html"]),
                vec![],
                vec![],
            ),
        ),
        case(
            "clusters: joined",
            event(
                Joined,
                VirtuallyIdentical,
                3,
                Some("a.html"),
                urls(&["c.html"]),
                vec![],
                vec![],
            ),
        ),
        case(
            "clusters: left",
            event(
                Left,
                Exact,
                2,
                Some("a.html"),
                vec![],
                urls(&["c.html"]),
                vec![],
            ),
        ),
        case(
            "clusters: split",
            event(
                Split,
                VerySimilar,
                2,
                Some("a.html"),
                vec![],
                urls(&["x.html", "y.html"]),
                ids(&["c-33333333"]),
            ),
        ),
        case(
            "clusters: canonical changed",
            event(
                CanonicalChanged,
                VirtuallyIdentical,
                3,
                Some("b.html"),
                vec![],
                vec![],
                vec![],
            ),
        ),
    ]
}

fn mirror_states() -> Vec<MirrorState> {
    use MirrorState::*;
    let _exhaustive = |s: MirrorState| match s {
        Candidate | Confirmed | Retracted | Alias | AutoMirror => (),
    };
    vec![Candidate, Confirmed, Retracted, Alias, AutoMirror]
}

fn mirror_cases() -> Vec<Case> {
    let event = |h0: &str, h1: &str, state, shared_pages, prefixes: &[(&str, &str)]| MirrorEvent {
        schema: OutputKind::Mirrors.schema().into(),
        event_id: String::new(),
        hosts: [h0.into(), h1.into()],
        state,
        shared_pages,
        prefixes: prefixes
            .iter()
            .map(|(p0, p1)| [p0.to_string(), p1.to_string()])
            .collect(),
        at: AT.into(),
    };
    use MirrorState::*;
    vec![
        case(
            "mirrors: confirmed with prefixes",
            event(
                "mirror1.example",
                "www.apache.example",
                Confirmed,
                412,
                &[("/manual/", "/docs/2.4/"), ("/", "/")],
            ),
        ),
        case(
            "mirrors: candidate, no optional field",
            event("mirror2.example", "www.apache.example", Candidate, 57, &[]),
        ),
        case(
            "mirrors: retracted",
            event("mirror2.example", "www.apache.example", Retracted, 3, &[]),
        ),
        case(
            "mirrors: alias",
            event("python.example", "www.python.example", Alias, 120, &[]),
        ),
        case(
            "mirrors: auto mirror",
            event(
                "www.python.example",
                "www.python.example",
                AutoMirror,
                80,
                &[("/3/", "/docs/current/")],
            ),
        ),
    ]
}

fn collection_cases() -> Vec<Case> {
    let event = |state: &str, cardinality, size, hosts| CollectionEvent {
        schema: OutputKind::Collections.schema().into(),
        event_id: String::new(),
        collection_id: "k-0b5e2c77".into(),
        state: serde_json::from_value(serde_json::Value::String(state.into())).unwrap(),
        cardinality,
        size,
        hosts,
        at: AT.into(),
    };
    let host = |host: &str, root_paths: &[&str], pages| CollectionHost {
        host: host.into(),
        root_paths: root_paths.iter().map(|p| p.to_string()).collect(),
        pages,
    };
    vec![
        case(
            "collections: updated",
            event(
                "updated",
                3,
                120,
                vec![
                    host("www.apache.example", &["/docs/2.4/"], 120),
                    host("mirror1.example", &["/manual/"], 120),
                    host("www.python.example", &["/3/", "/docs/current/"], 240),
                ],
            ),
        ),
        case("collections: dissolved", event("dissolved", 0, 0, vec![])),
        case(
            "collections: host with no root path",
            event("updated", 2, 10, vec![host("a.example", &[], 10)]),
        ),
    ]
}

fn recrawl_hints() -> Vec<RecrawlHint> {
    use RecrawlHint::*;
    let _exhaustive = |h: RecrawlHint| match h {
        Keep | Deprioritize | Restore => (),
    };
    vec![Keep, Deprioritize, Restore]
}

fn recrawl_cases() -> Vec<Case> {
    let event = |url: &str, hint, canonical: Option<&str>| RecrawlEvent {
        schema: OutputKind::Recrawl.schema().into(),
        event_id: String::new(),
        url: url.into(),
        hint,
        canonical: canonical.map(Into::into),
        cluster_id: "c-7f3a9e01".into(),
        at: AT.into(),
    };
    let canonical = "http://www.debian.example/docs/15/index.html";
    vec![
        case(
            "recrawl: deprioritize",
            event(
                "http://mirror1.example/debian/index.html",
                RecrawlHint::Deprioritize,
                Some(canonical),
            ),
        ),
        case(
            "recrawl: restore, no optional field",
            event(
                "http://mirror1.example/debian/index.html",
                RecrawlHint::Restore,
                None,
            ),
        ),
        case(
            "recrawl: keep",
            event(canonical, RecrawlHint::Keep, Some(canonical)),
        ),
    ]
}

/// A plausible rejected record and detail for `reason`.
fn dead_letter_payload(reason: DeadLetterReason) -> (&'static str, &'static str) {
    use DeadLetterReason::*;
    match reason {
        InvalidUtf8 => (
            "{\"url\":\"http://latin.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"body\":\"Caf\u{FFFD}\"}",
            "byte 91 is not valid UTF-8; send non-UTF-8 bodies as body_base64",
        ),
        NotJson => (
            "{\"url\":\"http://www.host.example/a.html\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"sta",
            "not JSON: EOF while parsing an object at line 1 column 80",
        ),
        NotAnObject => (
            "[\"http://www.host.example/a.html\"]",
            "the record is a JSON array; a page event is a JSON object",
        ),
        MissingField => (
            "{\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200}",
            "required field `url` is missing",
        ),
        WrongType => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":\"200\"}",
            "`status` must be an integer, got a string",
        ),
        InvalidUrl => (
            "{\"url\":\"ftp://files.example/a.txt\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200}",
            "`url` must be an absolute http or https URL with a host",
        ),
        InvalidTimestamp => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-13-45T10:15:00Z\",\"status\":200}",
            "`fetched_at` is not an RFC 3339 timestamp",
        ),
        StatusOutOfRange => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":700}",
            "`status` must be 0 or 100-599",
        ),
        InvalidBase64 => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"body_base64\":\"not base64!\"}",
            "`body_base64` is not standard base64",
        ),
        UndecodableBody => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"content_type\":\"text/html; charset=utf-8\",\"body_base64\":\"Q2Fm6Q==\"}",
            "the body is not valid utf-8 (charset from content_type)",
        ),
        ConflictingBody => (
            "{\"url\":\"http://www.host.example/\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"body\":\"<p>\",\"body_base64\":\"PHA+\"}",
            "send either `body` or `body_base64`, not both",
        ),
        BodyTooLarge => (
            "{\"url\":\"http://www.host.example/huge.html\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"body\":\"<!doctype html><html><body><p>",
            "the record is 5300000 bytes, over the 4194304-byte limit",
        ),
        OutputTooLarge => (
            "{\"schema\":\"neardup.signatures/v1\",\"event_id\":\"ca479d9f2ba09648bb755ee81b50a7b6\",\"url\":\"http://www.host.example/sitemap.html\",\"fetched_at\":\"2026-11-02T10:15:00Z\",\"status\":200,\"params\":\"p2-a8308d3624dbb8d1\",\"content\":{\"out_links\":[\"http://www.host.example/p/1.html\",",
            "its signatures event (key \"http://www.host.example/sitemap.html\") is 1380111 bytes, over the 1000000-byte output limit (max_output_bytes): it was not published",
        ),        DamagedInput => (
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: http://www.host.example/a.html\r\nContent-Length: 7379\r\n\r\nHTTP/1.1 200 OK\r\n",
            "the WARC record starting at byte 9748785 is cut off (2383 of 7379 bytes): the file ends inside it",
        ),
    }
}

fn dead_letter_cases() -> Vec<Case> {
    DeadLetterReason::ALL
        .iter()
        .enumerate()
        .map(|(i, &reason)| {
            let source = if i % 2 == 0 {
                Source::Kafka {
                    topic: "crawl.pages".into(),
                    partition: i as i32,
                    offset: 1_000_000 + i as i64,
                }
            } else {
                Source::File {
                    file: "data/round-01.jsonl".into(),
                    line: 1 + i as u64,
                }
            };
            let (payload, detail) = dead_letter_payload(reason);
            let truncated = matches!(
                reason,
                DeadLetterReason::BodyTooLarge | DeadLetterReason::OutputTooLarge
            );
            let payload_bytes = match reason {
                DeadLetterReason::OutputTooLarge => 1_380_111,
                _ if truncated => 5_300_000,
                // The one invalid byte became U+FFFD (three bytes) in the lossy payload.
                DeadLetterReason::InvalidUtf8 => payload.len() as u64 - 2,
                _ => payload.len() as u64,
            };
            case(
                "dead-letter: one per reason",
                DeadLetterEvent {
                    schema: OutputKind::DeadLetter.schema().into(),
                    event_id: String::new(),
                    reason,
                    detail: detail.into(),
                    source,
                    payload_bytes,
                    payload: payload.into(),
                    payload_truncated: truncated,
                },
            )
        })
        .collect()
}

fn cases(kind: OutputKind) -> Vec<Case> {
    match kind {
        OutputKind::Signatures => signature_cases(),
        OutputKind::Pairs => pair_cases(),
        OutputKind::Clusters => cluster_cases(),
        OutputKind::Mirrors => mirror_cases(),
        OutputKind::Collections => collection_cases(),
        OutputKind::Recrawl => recrawl_cases(),
        OutputKind::DeadLetter => dead_letter_cases(),
    }
}

/// The snake_case names serde gives `values`.
fn names<T: Serialize>(values: &[T]) -> BTreeSet<String> {
    values
        .iter()
        .map(
            |v| match serde_json::to_value(v).expect("enum serializes") {
                Value::String(s) => s,
                other => panic!("enum serialized as {other}"),
            },
        )
        .collect()
}

fn schema_enum(schema: &Value, pointer: &str) -> BTreeSet<String> {
    schema
        .pointer(pointer)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no enum at {pointer}"))
        .iter()
        .map(|v| v.as_str().expect("enum values are strings").to_string())
        .collect()
}

// ------------------------------------------------------------------------------------------
// The files
// ------------------------------------------------------------------------------------------

#[test]
fn every_kind_has_its_file_and_every_file_a_kind() {
    let expected: BTreeSet<String> = OutputKind::ALL
        .iter()
        .map(|k| k.schema_file())
        .chain([INPUT_SCHEMA.to_string()])
        .collect();
    let mut present = BTreeSet::new();
    for entry in std::fs::read_dir(json_dir()).expect("schemas/json/ exists") {
        let name = entry.expect("readable entry").file_name();
        let name = name.to_str().expect("UTF-8 file name").to_string();
        if OTHER_FILES.contains(&name.as_str()) {
            continue;
        }
        assert!(
            expected.contains(&name),
            "schemas/json/{name} belongs to no OutputKind and is not the input schema"
        );
        present.insert(name);
    }
    let missing: Vec<_> = expected.difference(&present).collect();
    assert!(missing.is_empty(), "schema files missing: {missing:?}");

    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let schema = load(&file);
        assert_eq!(
            schema.pointer("/properties/schema/const"),
            Some(&json!(kind.schema())),
            "{file}: the `schema` property must be const {:?}",
            kind.schema()
        );
    }
}

#[test]
fn files_are_documented_draft_2020_12_schemas() {
    let files = OutputKind::ALL
        .iter()
        .map(|k| k.schema_file())
        .chain([INPUT_SCHEMA.to_string()]);
    for file in files {
        let schema = load(&file);
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!("{file} is not a valid JSON Schema: {e}");
        }
        assert_eq!(schema["$schema"], DRAFT_2020_12, "{file}: $schema");
        assert_eq!(schema["$id"], format!("{ID_BASE}{file}"), "{file}: $id");
        for field in ["title", "description"] {
            let text = schema[field].as_str().unwrap_or_default();
            assert!(
                text.len() > 20,
                "{file}: `{field}` must say what the event is"
            );
        }
        assert_eq!(schema["type"], "object", "{file}: an event is an object");
        let open = file == INPUT_SCHEMA;
        check_documented_and_closed(&file, "", &schema, open);
    }
}

/// Every property has a description; every object schema other than the input's top level is
/// closed (`additionalProperties: false`), with `required` naming only its own properties.
fn check_documented_and_closed(file: &str, pointer: &str, schema: &Value, open_top: bool) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let expected = if open_top && pointer.is_empty() {
            json!(true)
        } else {
            json!(false)
        };
        assert_eq!(
            obj.get("additionalProperties"),
            Some(&expected),
            "{file}{pointer}: additionalProperties must be {expected}"
        );
        for (name, sub) in props {
            assert!(
                sub.get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.is_empty()),
                "{file}{pointer}/properties/{name} has no description"
            );
        }
        for name in obj
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = name.as_str().expect("required names are strings");
            assert!(
                props.contains_key(name),
                "{file}{pointer}: required `{name}` is not a property"
            );
        }
    }
    for (key, sub) in obj {
        match sub {
            Value::Object(_) => {
                check_documented_and_closed(file, &format!("{pointer}/{key}"), sub, open_top)
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    check_documented_and_closed(
                        file,
                        &format!("{pointer}/{key}/{i}"),
                        item,
                        open_top,
                    )
                }
            }
            _ => {}
        }
    }
}

// ------------------------------------------------------------------------------------------
// Output events against their files
// ------------------------------------------------------------------------------------------

#[test]
fn real_events_validate() {
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let validator = validator(&file);
        for case in cases(kind) {
            assert_valid(&validator, &case.json, &format!("{file}: {}", case.name));
        }
    }
}

#[test]
fn cases_cover_every_enum_variant_and_both_sources() {
    let kinds_of = |kind: OutputKind, pointer: &str| -> BTreeSet<String> {
        cases(kind)
            .iter()
            .filter_map(|c| {
                c.json
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .collect()
    };
    assert_eq!(kinds_of(OutputKind::Pairs, "/state"), names(&pair_states()));
    assert_eq!(kinds_of(OutputKind::Pairs, "/level"), names(&pair_levels()));
    assert_eq!(
        kinds_of(OutputKind::Clusters, "/level"),
        names(&pair_levels())
    );
    assert_eq!(
        kinds_of(OutputKind::Clusters, "/change"),
        names(&cluster_changes())
    );
    assert_eq!(
        kinds_of(OutputKind::Mirrors, "/state"),
        names(&mirror_states())
    );
    assert_eq!(
        kinds_of(OutputKind::Recrawl, "/hint"),
        names(&recrawl_hints())
    );
    assert_eq!(
        kinds_of(OutputKind::DeadLetter, "/reason"),
        names(&DeadLetterReason::ALL)
    );
    let dead_letters = cases(OutputKind::DeadLetter);
    assert!(dead_letters
        .iter()
        .any(|c| c.json.pointer("/source/topic").is_some()));
    assert!(dead_letters
        .iter()
        .any(|c| c.json.pointer("/source/file").is_some()));
}

#[test]
fn schema_enums_list_exactly_the_rust_variants() {
    let pairs = load(&OutputKind::Pairs.schema_file());
    assert_eq!(
        schema_enum(&pairs, "/properties/state/enum"),
        names(&pair_states())
    );
    assert_eq!(
        schema_enum(&pairs, "/properties/level/enum"),
        names(&pair_levels())
    );
    let clusters = load(&OutputKind::Clusters.schema_file());
    assert_eq!(
        schema_enum(&clusters, "/properties/level/enum"),
        names(&pair_levels())
    );
    assert_eq!(
        schema_enum(&clusters, "/properties/change/enum"),
        names(&cluster_changes())
    );
    let mirrors = load(&OutputKind::Mirrors.schema_file());
    assert_eq!(
        schema_enum(&mirrors, "/properties/state/enum"),
        names(&mirror_states())
    );
    let recrawl = load(&OutputKind::Recrawl.schema_file());
    assert_eq!(
        schema_enum(&recrawl, "/properties/hint/enum"),
        names(&recrawl_hints())
    );
    let dead_letter = load(&OutputKind::DeadLetter.schema_file());
    assert_eq!(
        schema_enum(&dead_letter, "/properties/reason/enum"),
        names(&DeadLetterReason::ALL)
    );
    for reason in DeadLetterReason::ALL {
        assert_eq!(
            names(&[reason]),
            BTreeSet::from([reason.as_str().to_string()])
        );
    }
    // `CollectionEvent::state` is a String in Rust; the schema pins the two documented values.
    let collections = load(&OutputKind::Collections.schema_file());
    assert_eq!(
        schema_enum(&collections, "/properties/state/enum"),
        BTreeSet::from(["updated".to_string(), "dissolved".to_string()])
    );
}

/// Per object shape of a schema (by JSON pointer): the keys seen in any event, and in every event.
type Shapes<'s> = BTreeMap<String, (&'s Value, BTreeSet<String>, Option<BTreeSet<String>>)>;

fn record_shapes<'s>(
    schema: &'s Value,
    pointer: String,
    instance: &Value,
    shapes: &mut Shapes<'s>,
) {
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        let matching: Vec<usize> = (0..branches.len())
            .filter(|&i| {
                branches[i]["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|k| instance.get(k.as_str().unwrap_or_default()).is_some())
            })
            .collect();
        assert_eq!(
            matching.len(),
            1,
            "{pointer}: {instance} matches {matching:?} of oneOf"
        );
        let i = matching[0];
        record_shapes(
            &branches[i],
            format!("{pointer}/oneOf/{i}"),
            instance,
            shapes,
        );
        return;
    }
    if let (Some(props), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        instance.as_object(),
    ) {
        let keys: BTreeSet<String> = object.keys().cloned().collect();
        let entry = shapes
            .entry(pointer.clone())
            .or_insert((schema, BTreeSet::new(), None));
        entry.1.extend(keys.iter().cloned());
        entry.2 = Some(match entry.2.take() {
            None => keys,
            Some(always) => always.intersection(&keys).cloned().collect(),
        });
        for (key, value) in object {
            if let Some(sub) = props.get(key) {
                record_shapes(sub, format!("{pointer}/properties/{key}"), value, shapes);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), instance.as_array()) {
        for value in array {
            record_shapes(items, format!("{pointer}/items"), value, shapes);
        }
    }
}

fn object_shapes(schema: &Value, pointer: String, out: &mut BTreeSet<String>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if obj.contains_key("properties") {
        out.insert(pointer.clone());
    }
    for (key, sub) in obj {
        match sub {
            Value::Object(_) if key != "examples" => {
                object_shapes(sub, format!("{pointer}/{key}"), out)
            }
            Value::Array(items) if key != "examples" => {
                for (i, item) in items.iter().enumerate() {
                    object_shapes(item, format!("{pointer}/{key}/{i}"), out)
                }
            }
            _ => {}
        }
    }
}

/// The schema states what the types emit, no more: every property is emitted by some event,
/// `required` lists exactly the fields every event carries, and every object shape is exercised.
#[test]
fn schemas_describe_exactly_what_the_types_serialize() {
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let schema = load(&file);
        let mut shapes = Shapes::new();
        for case in cases(kind) {
            record_shapes(&schema, String::new(), &case.json, &mut shapes);
        }
        let mut all = BTreeSet::new();
        object_shapes(&schema, String::new(), &mut all);
        let seen: BTreeSet<String> = shapes.keys().cloned().collect();
        assert_eq!(seen, all, "{file}: object shapes no test event exercises");
        for (pointer, (sub, any, every)) in &shapes {
            let properties: BTreeSet<String> = sub["properties"]
                .as_object()
                .expect("properties")
                .keys()
                .cloned()
                .collect();
            assert_eq!(
                any, &properties,
                "{file}{pointer}: the properties must be the fields the Rust type serializes"
            );
            let required: BTreeSet<String> = sub["required"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().expect("string").to_string())
                .collect();
            assert_eq!(
                every.as_ref().expect("seen at least once"),
                &required,
                "{file}{pointer}: `required` must be the fields always serialized"
            );
        }
    }
}

#[test]
fn record_keys_are_as_documented() {
    let text = |v: &Value| v.as_str().expect("string").to_string();
    for kind in OutputKind::ALL {
        for case in cases(kind) {
            let j = &case.json;
            let expected = match kind {
                OutputKind::Signatures | OutputKind::Recrawl => text(&j["url"]),
                OutputKind::Pairs => {
                    assert!(text(&j["a"]) <= text(&j["b"]), "{}: a <= b", case.name);
                    format!("{} {}", text(&j["a"]), text(&j["b"]))
                }
                OutputKind::Clusters => text(&j["cluster_id"]),
                OutputKind::Mirrors => format!("{} {}", text(&j["hosts"][0]), text(&j["hosts"][1])),
                OutputKind::Collections => text(&j["collection_id"]),
                OutputKind::DeadLetter => match j["source"].get("topic") {
                    Some(topic) => format!(
                        "{}/{}/{}",
                        text(topic),
                        j["source"]["partition"],
                        j["source"]["offset"]
                    ),
                    None => format!("{}:{}", text(&j["source"]["file"]), j["source"]["line"]),
                },
            };
            assert_eq!(case.key, expected, "{}: record key", case.name);
        }
    }
}

/// JSON pointers of every object in `value`, the top level included.
fn object_pointers(value: &Value, pointer: String, out: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, sub) in object {
                object_pointers(sub, format!("{pointer}/{key}"), out);
            }
            out.push(pointer);
        }
        Value::Array(items) => {
            for (i, sub) in items.iter().enumerate() {
                object_pointers(sub, format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn with(instance: &Value, pointer: &str, value: Value) -> Value {
    let mut out = instance.clone();
    *out.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer} not in {instance}")) = value;
    out
}

#[test]
fn schemas_reject_extra_and_missing_fields() {
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let validator = validator(&file);
        let cases = cases(kind);
        let always: BTreeSet<String> = cases
            .iter()
            .map(|c| {
                c.json
                    .as_object()
                    .expect("object")
                    .keys()
                    .cloned()
                    .collect::<BTreeSet<_>>()
            })
            .reduce(|a, b| a.intersection(&b).cloned().collect())
            .expect("cases");
        for case in &cases {
            let mut objects = Vec::new();
            object_pointers(&case.json, String::new(), &mut objects);
            for pointer in objects {
                let mut bad = case.json.clone();
                bad.pointer_mut(&pointer)
                    .and_then(Value::as_object_mut)
                    .expect("object")
                    .insert("unexpected_field".into(), json!("x"));
                assert_invalid(
                    &validator,
                    &bad,
                    &format!(
                        "{file}: {} with an extra property at '{pointer}'",
                        case.name
                    ),
                );
            }
            for key in case.json.as_object().expect("object").keys() {
                let mut without = case.json.clone();
                without.as_object_mut().expect("object").remove(key);
                let what = format!("{file}: {} without `{key}`", case.name);
                if always.contains(key) {
                    assert_invalid(&validator, &without, &what);
                } else {
                    assert_valid(&validator, &without, &what);
                }
            }
        }
    }
}

#[test]
fn schemas_reject_wrong_enum_values_and_consts() {
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let schema = load(&file);
        let validator = validator(&file);
        let first = &cases(kind)[0].json;
        for other in OutputKind::ALL.iter().filter(|&&k| k != kind) {
            let bad = with(first, "/schema", json!(other.schema()));
            assert_invalid(
                &validator,
                &bad,
                &format!("{file} with schema {}", other.schema()),
            );
        }
        let v2 = kind.schema().replace("/v1", "/v2");
        assert_invalid(
            &validator,
            &with(first, "/schema", json!(v2)),
            &format!("{file}: v2"),
        );
        for (name, property) in schema["properties"].as_object().expect("properties") {
            let Some(values) = property.get("enum").and_then(Value::as_array) else {
                continue;
            };
            let pointer = format!("/{name}");
            for bad_value in [json!("bogus"), json!(""), json!(null), json!(1)] {
                let bad = with(first, &pointer, bad_value.clone());
                assert_invalid(&validator, &bad, &format!("{file}: {name} = {bad_value}"));
            }
            // The Rust variant name (PascalCase) is not the wire name.
            for value in values {
                let pascal: String = value
                    .as_str()
                    .expect("string")
                    .split('_')
                    .map(|w| w[..1].to_uppercase() + &w[1..])
                    .collect();
                let bad = with(first, &pointer, json!(pascal));
                assert_invalid(&validator, &bad, &format!("{file}: {name} = {pascal}"));
            }
        }
    }
}

#[test]
fn schemas_reject_bad_ids_ranges_and_shapes() {
    let id = hex(0xabc);
    let checks: Vec<(OutputKind, &str, Value)> = vec![
        (OutputKind::Signatures, "/status", json!(600)),
        (OutputKind::Signatures, "/status", json!(50)),
        (OutputKind::Signatures, "/status", json!(-1)),
        (OutputKind::Signatures, "/status", json!("200")),
        (OutputKind::Signatures, "/fetched_at", json!("yesterday")),
        (OutputKind::Signatures, "/fetched_at", json!(1_793_441_700)),
        (OutputKind::Signatures, "/url", json!("ftp://x.example/")),
        (OutputKind::Signatures, "/url", json!("http:///x")),
        (OutputKind::Signatures, "/content/checksum", json!(&id[1..])),
        (
            OutputKind::Signatures,
            "/content/checksum",
            json!(id.to_uppercase()),
        ),
        (
            OutputKind::Signatures,
            "/content/text_hash",
            json!(format!("{id}0")),
        ),
        (OutputKind::Signatures, "/content/tokens", json!(-1)),
        (OutputKind::Signatures, "/content/tokens", json!(1.5)),
        (OutputKind::Signatures, "/content", json!(null)),
        (OutputKind::Pairs, "/b_similarity", json!(7)),
        (OutputKind::Pairs, "/c_similarity", json!(385)),
        (OutputKind::Pairs, "/jaccard", json!(1.01)),
        (OutputKind::Pairs, "/jaccard", json!(-0.01)),
        (OutputKind::Pairs, "/jaccard", json!(null)),
        (OutputKind::Pairs, "/same_site", json!("yes")),
        (OutputKind::Pairs, "/at", json!("2026-11-02")),
        (OutputKind::Pairs, "/crawl_id", json!(1)),
        (OutputKind::Clusters, "/size", json!(-1)),
        (OutputKind::Clusters, "/added", json!([])),
        (
            OutputKind::Clusters,
            "/removed",
            json!(["relative/path.html"]),
        ),
        (OutputKind::Clusters, "/related", json!([""])),
        (OutputKind::Mirrors, "/hosts", json!(["only.example"])),
        (
            OutputKind::Mirrors,
            "/hosts",
            json!(["a.example", "b.example", "c.example"]),
        ),
        (OutputKind::Mirrors, "/hosts", json!("a.example b.example")),
        (OutputKind::Mirrors, "/prefixes", json!([["/only/"]])),
        (OutputKind::Mirrors, "/prefixes", json!([])),
        (OutputKind::Collections, "/state", json!("created")),
        (OutputKind::Collections, "/hosts/0/pages", json!(-1)),
        (
            OutputKind::Collections,
            "/hosts/0/root_paths",
            json!("/docs/"),
        ),
        (OutputKind::Recrawl, "/canonical", json!("www.x.example/")),
        (OutputKind::Recrawl, "/cluster_id", json!("")),
        (OutputKind::DeadLetter, "/source", json!({})),
        (OutputKind::DeadLetter, "/source", json!("crawl.pages/0/12")),
        (
            OutputKind::DeadLetter,
            "/source",
            json!({"topic": "crawl.pages", "partition": 0, "offset": 1, "file": "f", "line": 1}),
        ),
        (
            OutputKind::DeadLetter,
            "/source",
            json!({"topic": "crawl.pages", "partition": 0}),
        ),
        (
            OutputKind::DeadLetter,
            "/source",
            json!({"file": "f", "line": 0}),
        ),
        (OutputKind::DeadLetter, "/payload_truncated", json!("no")),
        (OutputKind::DeadLetter, "/payload_bytes", json!(-5)),
    ];
    for (kind, pointer, value) in checks {
        let file = kind.schema_file();
        let validator = validator(&file);
        let first = &cases(kind)[0].json;
        let bad = with(first, pointer, value.clone());
        assert_invalid(&validator, &bad, &format!("{file}: {pointer} = {value}"));
    }
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let validator = validator(&file);
        let first = &cases(kind)[0].json;
        let good = first["event_id"].as_str().expect("event_id").to_string();
        for bad_id in [
            String::new(),
            good[1..].to_string(),
            format!("{good}0"),
            good.to_uppercase(),
            format!("{}g", &good[1..]),
        ] {
            let bad = with(first, "/event_id", json!(bad_id));
            assert_invalid(&validator, &bad, &format!("{file}: event_id {bad_id:?}"));
        }
    }
}

/// serde_json writes a non-finite f64 as `null`, which breaks the contract: the schema rejects
/// it, and `PairEvent::new` leaves a non-finite estimate out instead.
#[test]
fn a_nan_jaccard_is_left_out_and_would_be_rejected() {
    let new = |j| {
        let mut pair = PairEvent::new(
            "http://a.example/".into(),
            "http://b.example/".into(),
            PairState::Detected,
            PairLevel::VerySimilar,
            5,
            350,
            Some(j),
            false,
            AT.into(),
            None,
        );
        pair.seal();
        pair
    };
    let v = validator(&OutputKind::Pairs.schema_file());
    let pair = new(f64::NAN);
    assert_eq!(pair.jaccard, None);
    assert_valid(&v, &serde_json::to_value(&pair).unwrap(), "NaN left out");
    let mut forced = new(0.5);
    forced.jaccard = Some(f64::INFINITY);
    let json = serde_json::to_value(&forced).expect("serializes");
    assert_eq!(json["jaccard"], Value::Null);
    assert_invalid(&v, &json, "a pair with a non-finite jaccard");
}

/// The `examples` in each file are real events: they read into the Rust type and seal to the
/// `event_id` they show.
#[test]
fn examples_in_the_files_are_real_events() {
    fn check<T>(file: &str, example: &Value)
    where
        T: OutputEvent + DeserializeOwned + PartialEq + Debug,
    {
        let mut event: T = serde_json::from_value(example.clone())
            .unwrap_or_else(|e| panic!("{file}: example does not read into the type: {e}"));
        event.seal();
        assert_eq!(
            &serde_json::to_value(&event).expect("serializes"),
            example,
            "{file}: the example's event_id is not what sealing gives"
        );
    }
    for kind in OutputKind::ALL {
        let file = kind.schema_file();
        let schema = load(&file);
        let validator = validator(&file);
        let examples = schema["examples"].as_array().cloned().unwrap_or_default();
        assert!(!examples.is_empty(), "{file}: no examples");
        for example in &examples {
            assert_valid(&validator, example, &format!("{file}: example"));
            match kind {
                OutputKind::Signatures => check::<SignatureEvent>(&file, example),
                OutputKind::Pairs => check::<PairEvent>(&file, example),
                OutputKind::Clusters => check::<ClusterEvent>(&file, example),
                OutputKind::Mirrors => check::<MirrorEvent>(&file, example),
                OutputKind::Collections => check::<CollectionEvent>(&file, example),
                OutputKind::Recrawl => check::<RecrawlEvent>(&file, example),
                OutputKind::DeadLetter => check::<DeadLetterEvent>(&file, example),
            }
        }
    }
    let input = load(INPUT_SCHEMA);
    let validator = validator(INPUT_SCHEMA);
    let examples = input["examples"].as_array().cloned().unwrap_or_default();
    assert!(!examples.is_empty(), "{INPUT_SCHEMA}: no examples");
    for example in &examples {
        assert_valid(&validator, example, &format!("{INPUT_SCHEMA}: example"));
    }
}

// ------------------------------------------------------------------------------------------
// The input contract
// ------------------------------------------------------------------------------------------

#[test]
fn input_schema_accepts_good_page_events() {
    let validator = validator(INPUT_SCHEMA);
    let good = [
        // The example of the bench README, verbatim.
        r#"{"url":"http://www.host.example/path/page.html","fetched_at":"2026-11-02T10:15:00Z","status":200,
           "content_type":"text/html; charset=utf-8","ip":"192.0.2.10","crawl_id":"week-01","body":"<!doctype html>..."}"#,
        r#"{"url":"https://latin.example/doc/","fetched_at":"2026-11-02T10:15:02Z","status":200,
           "content_type":"text/html; charset=ISO-8859-1","ip":"198.51.100.7","crawl_id":"week-01",
           "body_base64":"PGh0bWw+PHA+Q2Fm6TwvcD48L2h0bWw+"}"#,
        r#"{"url":"http://www.host.example/gone.html","fetched_at":"2026-11-09T08:00:01Z","status":404,"ip":"192.0.2.10","crawl_id":"week-02"}"#,
        r#"{"url":"http://down.example/","fetched_at":"2026-11-09T08:00:03Z","status":0,"crawl_id":"week-02"}"#,
        r#"{"url":"http://www.host.example/","fetched_at":"2026-11-02T10:15:00+01:00","status":200}"#,
        // Unknown fields are ignored.
        r#"{"url":"http://www.host.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":"","extra":{"any":"thing"},"n":1}"#,
        r#"{"url":"http://www.host.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body_base64":""}"#,
    ];
    for line in good {
        let value: Value = serde_json::from_str(line).expect("test line is JSON");
        assert_valid(&validator, &value, line);
    }
}

#[test]
fn input_schema_rejects_malformed_page_events() {
    let validator = validator(INPUT_SCHEMA);
    let good = json!({
        "url": "http://www.host.example/path/page.html",
        "fetched_at": "2026-11-02T10:15:00Z",
        "status": 200,
        "content_type": "text/html; charset=utf-8",
        "ip": "192.0.2.10",
        "crawl_id": "week-01",
        "body": "<!doctype html>...",
    });
    assert_valid(&validator, &good, "the base line");
    let mut bad: Vec<(String, Value)> = Vec::new();
    for field in ["url", "fetched_at", "status"] {
        let mut v = good.clone();
        v.as_object_mut().expect("object").remove(field);
        bad.push((format!("missing {field}"), v));
    }
    let mut both = good.clone();
    both["body_base64"] = json!("PGh0bWw+");
    bad.push(("body and body_base64".into(), both));
    let replacements: Vec<(&str, Value)> = vec![
        ("url", json!("ftp://www.host.example/a.html")),
        ("url", json!("mailto:someone@host.example")),
        ("url", json!("javascript:void(0)")),
        ("url", json!("/path/page.html")),
        ("url", json!("www.host.example/path/page.html")),
        ("url", json!("http:///path/page.html")),
        ("url", json!("file:///etc/passwd")),
        ("url", json!(["http://www.host.example/"])),
        ("status", json!("200")),
        ("status", json!(null)),
        ("status", json!(600)),
        ("status", json!(42)),
        ("status", json!(-1)),
        ("status", json!(200.5)),
        ("fetched_at", json!(1_793_441_700)),
        ("fetched_at", json!("2026-13-45T10:15:00Z")),
        ("fetched_at", json!("last tuesday")),
        ("fetched_at", json!("2026-11-02T10:15:00")),
        ("body", json!({"html": "<p>"})),
        ("crawl_id", json!(1)),
        ("ip", json!(192_000_002_010_u64)),
        ("content_type", json!(["text/html"])),
    ];
    for (field, value) in replacements {
        bad.push((
            format!("{field} = {value}"),
            with(&good, &format!("/{field}"), value),
        ));
    }
    for body in ["not base64!", "PGh0bWw", "PGh0bWw+\n"] {
        let mut v = good.clone();
        v.as_object_mut().expect("object").remove("body");
        v["body_base64"] = json!(body);
        bad.push((format!("body_base64 = {body:?}"), v));
    }
    bad.push(("an array".into(), json!([good.clone()])));
    bad.push(("a string".into(), json!("http://www.host.example/")));
    for (what, value) in bad {
        assert_invalid(&validator, &value, &what);
    }
}
