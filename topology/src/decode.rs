//! Input decoding that never panics: raw record bytes to a validated [`PageEvent`], or a
//! [`DeadLetterEvent`] that says why not and where the record came from.
//!
//! The contract is DESIGN.md §2 and `../shared/bench/README.md` ("Event format"): `url`,
//! `fetched_at` (RFC 3339) and `status` are required; `content_type`, `ip`, `crawl_id` are
//! optional strings; the body comes as `body` (text) or `body_base64` (bytes); unknown fields are
//! ignored. Charset checks of `body_base64` happen here too, so that a body neardup cannot read
//! goes to the dead letters instead of being indexed as garbage.

use crate::charset;
use base64::Engine as _;
use neardup_schemas::{
    Body, DeadLetterEvent, DeadLetterReason, OutputEvent, OutputKind, PageEvent, Source,
};
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Limits applied while decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted body, in raw bytes (default 5 MiB: the input contract allows 5 MB).
    pub max_body_bytes: usize,
    /// How much of a bad record a dead-letter event carries (default 64 KiB).
    pub max_dead_letter_payload: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_body_bytes: 5 * 1024 * 1024,
            max_dead_letter_payload: 64 * 1024,
        }
    }
}

/// A record that could not be decoded: the reason and a detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Machine-readable reason.
    pub reason: DeadLetterReason,
    /// What was wrong, naming the field.
    pub detail: String,
}

impl DecodeError {
    fn new(reason: DeadLetterReason, detail: impl Into<String>) -> Self {
        DecodeError {
            reason,
            detail: detail.into(),
        }
    }

    /// Turns the error into the dead-letter event for `raw` from `source`.
    pub fn into_dead_letter(
        self,
        raw: &[u8],
        source: &Source,
        limits: &DecodeLimits,
    ) -> DeadLetterEvent {
        let cut = floor_char_boundary_lossy(raw, limits.max_dead_letter_payload);
        DeadLetterEvent {
            schema: OutputKind::DeadLetter.schema().into(),
            event_id: String::new(),
            reason: self.reason,
            detail: self.detail,
            source: source.clone(),
            payload_bytes: raw.len() as u64,
            payload: String::from_utf8_lossy(&raw[..cut]).into_owned(),
            payload_truncated: cut < raw.len(),
        }
        .sealed()
    }
}

trait Sealed: OutputEvent + Sized {
    fn sealed(mut self) -> Self {
        self.seal();
        self
    }
}
impl<T: OutputEvent> Sealed for T {}

/// Largest cut `<= max` that does not split a UTF-8 sequence (for valid UTF-8 input).
fn floor_char_boundary_lossy(raw: &[u8], max: usize) -> usize {
    if raw.len() <= max {
        return raw.len();
    }
    let mut cut = max;
    // Step back over continuation bytes (at most 3) so valid text is not cut mid-character.
    while cut > 0 && cut + 4 > max && (raw[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    cut
}

/// Decodes one input record. Never panics, whatever the bytes.
pub fn decode(raw: &[u8], limits: &DecodeLimits) -> Result<PageEvent, DecodeError> {
    use DeadLetterReason::*;
    // A body over the limit makes the record over the limit plus the JSON around it; reject such
    // records before parsing megabytes. Base64 inflates by 4/3, so allow for that.
    let record_limit = limits.max_body_bytes.saturating_mul(4) / 3 + 64 * 1024;
    if raw.len() > record_limit {
        return Err(DecodeError::new(
            BodyTooLarge,
            format!(
                "record is {} bytes, over the limit for a {}-byte body; raise limits.max_body_bytes to accept it",
                raw.len(),
                limits.max_body_bytes
            ),
        ));
    }
    let text = std::str::from_utf8(raw).map_err(|e| {
        DecodeError::new(
            InvalidUtf8,
            format!(
                "record is not UTF-8 (invalid byte at {}); JSON records must be UTF-8, send binary bodies as body_base64",
                e.valid_up_to()
            ),
        )
    })?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| DecodeError::new(NotJson, format!("record is not JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::new(
            NotAnObject,
            format!("record is JSON {} but must be an object", json_type(&value)),
        ));
    };

    let url = required_str(&obj, "url")?;
    check_url(url)?;
    // Schemes are case-insensitive (RFC 3986 §3.1); publish the canonical lower-case form so
    // that `HTTP://x` and `http://x` are one URL downstream.
    let url = match url.find("://") {
        Some(i) if url[..i].bytes().any(|c| c.is_ascii_uppercase()) => {
            format!("{}{}", url[..i].to_ascii_lowercase(), &url[i..])
        }
        _ => url.to_owned(),
    };
    let fetched_at = required_str(&obj, "fetched_at")?;
    let when = OffsetDateTime::parse(fetched_at, &Rfc3339).map_err(|e| {
        DecodeError::new(
            InvalidTimestamp,
            format!(
                "fetched_at {fetched_at:?} is not RFC 3339 ({e}); write e.g. 2026-11-02T10:15:00Z"
            ),
        )
    })?;
    let utc_year = when
        .checked_to_offset(time::UtcOffset::UTC)
        .map(|t| t.year());
    if !utc_year.is_some_and(|y| (0..=9999).contains(&y)) {
        return Err(DecodeError::new(
            InvalidTimestamp,
            format!("fetched_at {fetched_at:?} is outside the years 0000-9999 in UTC"),
        ));
    }
    let fetched_at_ms = (when.unix_timestamp_nanos() / 1_000_000) as i64;
    let status = match obj.get("status") {
        None => {
            return Err(DecodeError::new(
                MissingField,
                "required field status is missing",
            ))
        }
        Some(Value::Number(n)) => match n.as_i64() {
            Some(s) if s == 0 || (100..=599).contains(&s) => s as u16,
            _ => {
                return Err(DecodeError::new(
                    StatusOutOfRange,
                    format!("status {n} is not 0 (no connection) or an HTTP status 100-599"),
                ))
            }
        },
        Some(other) => {
            return Err(DecodeError::new(
                WrongType,
                format!("status must be an integer, got {}", json_type(other)),
            ))
        }
    };
    let fetched_at = fetched_at.to_owned();
    let content_type = optional_str(&obj, "content_type")?.map(str::to_owned);
    let ip = optional_str(&obj, "ip")?.map(str::to_owned);
    let crawl_id = optional_str(&obj, "crawl_id")?.map(str::to_owned);
    let body = match (
        optional_str(&obj, "body")?.map(str::len),
        optional_str(&obj, "body_base64")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(DecodeError::new(
                ConflictingBody,
                "both body and body_base64 are present; send exactly one",
            ))
        }
        (Some(len), None) => {
            check_size(len, limits)?;
            // Moved out of the parsed record, not copied: bodies are most of its bytes.
            match obj.remove("body") {
                Some(Value::String(text)) => Some(Body::Text(text)),
                _ => None,
            }
        }
        (None, Some(b64)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| {
                    DecodeError::new(
                        InvalidBase64,
                        format!("body_base64 is not standard base64: {e}"),
                    )
                })?;
            check_size(bytes.len(), limits)?;
            // Refuse bytes that do not decode in the declared or sniffed charset now, so the
            // record lands in the dead letters rather than being indexed as mojibake.
            charset::decode_body(&bytes, content_type.as_deref())
                .map_err(|e| DecodeError::new(UndecodableBody, e.to_string()))?;
            Some(Body::Bytes(bytes))
        }
        (None, None) => None,
    };
    Ok(PageEvent {
        url,
        fetched_at,
        fetched_at_ms,
        status,
        content_type,
        ip,
        crawl_id,
        body,
    })
}

fn check_size(len: usize, limits: &DecodeLimits) -> Result<(), DecodeError> {
    if len > limits.max_body_bytes {
        return Err(DecodeError::new(
            DeadLetterReason::BodyTooLarge,
            format!(
                "body is {len} bytes, over limits.max_body_bytes = {}",
                limits.max_body_bytes
            ),
        ));
    }
    Ok(())
}

fn required_str<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str, DecodeError> {
    match obj.get(field) {
        None => Err(DecodeError::new(
            DeadLetterReason::MissingField,
            format!("required field {field} is missing"),
        )),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(DecodeError::new(
            DeadLetterReason::WrongType,
            format!("{field} must be a string, got {}", json_type(other)),
        )),
    }
}

fn optional_str<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, DecodeError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(DecodeError::new(
            DeadLetterReason::WrongType,
            format!("{field} must be a string, got {}", json_type(other)),
        )),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An absolute http(s) URL with a host. `http:///x` is refused although WHATWG parsing would
/// quietly turn it into `http://x/`: the record is wrong and the crawler should hear about it.
fn check_url(url: &str) -> Result<(), DecodeError> {
    let bad = |why: &str| {
        Err(DecodeError::new(
            DeadLetterReason::InvalidUrl,
            format!("url {url:?} {why}; neardup takes absolute http:// or https:// URLs"),
        ))
    };
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &url[7..]
    } else if lower.starts_with("https://") {
        &url[8..]
    } else {
        return bad("is not http(s)");
    };
    if rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\') {
        return bad("has no host");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("contains white space or control characters");
    }
    match url::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        Ok(_) => bad("has no host"),
        Err(e) => bad(&format!("does not parse ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeadLetterReason::*;

    fn reason(line: &str) -> Option<DeadLetterReason> {
        decode(line.as_bytes(), &DecodeLimits::default())
            .err()
            .map(|e| e.reason)
    }

    const GOOD: &str = r#"{"url":"http://www.a.example/x.html","fetched_at":"2026-11-02T10:15:00Z","status":200,"content_type":"text/html; charset=utf-8","ip":"192.0.2.10","crawl_id":"week-01","body":"<p>hi</p>"}"#;

    #[test]
    fn good_record_decodes() {
        let p = decode(GOOD.as_bytes(), &DecodeLimits::default()).unwrap();
        assert_eq!(p.url, "http://www.a.example/x.html");
        assert_eq!(p.status, 200);
        assert_eq!(p.fetched_at_ms, 1_793_614_500_000);
        assert_eq!(p.body, Some(Body::Text("<p>hi</p>".into())));
    }

    #[test]
    fn each_malformation_has_its_reason() {
        let cases: &[(&str, DeadLetterReason)] = &[
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11"#,
                NotJson,
            ),
            ("[]", NotAnObject),
            ("null", NotAnObject),
            ("42", NotAnObject),
            ("{}", MissingField),
            (
                r#"{"fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                MissingField,
            ),
            (
                r#"{"url":"ftp://a.example/x","fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                InvalidUrl,
            ),
            (
                r#"{"url":"http:///x/y.html","fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                InvalidUrl,
            ),
            (
                r#"{"url":"/x/y.html","fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                InvalidUrl,
            ),
            (
                r#"{"url":"www.a.example/y.html","fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                InvalidUrl,
            ),
            (
                r#"{"url":"mailto:x@a.example","fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                InvalidUrl,
            ),
            (
                r#"{"url":["http://a.example/"],"fetched_at":"2026-11-02T10:15:00Z","status":200}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":1793600000,"status":200}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":"200"}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":null}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"crawl_id":7}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"ip":3221225994}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":{"html":"x"}}"#,
                WrongType,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"yesterday","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-13-45T99:00:00Z","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02 10:15:00","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00+25:00","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"02/11/2026 10:15","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"","status":200}"#,
                InvalidTimestamp,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":999}"#,
                StatusOutOfRange,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":-1}"#,
                StatusOutOfRange,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200.5}"#,
                StatusOutOfRange,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body_base64":"PGh0bWw+!!not*base64%%A"}"#,
                InvalidBase64,
            ),
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":"x","body_base64":"eA=="}"#,
                ConflictingBody,
            ),
            // "Caf\xe9 \xff" declared UTF-8
            (
                r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"content_type":"text/html; charset=utf-8","body_base64":"Q2Fm6SD/"}"#,
                UndecodableBody,
            ),
        ];
        for (line, want) in cases {
            assert_eq!(reason(line), Some(*want), "{line}");
        }
        assert_eq!(
            decode(
                b"{\"url\":\"http://bad.example/\xff\xfe\"}",
                &DecodeLimits::default()
            )
            .unwrap_err()
            .reason,
            InvalidUtf8
        );
    }

    #[test]
    fn latin1_base64_decodes_and_undeclared_bytes_are_sniffed() {
        // "Caf\xe9" declared ISO-8859-1, and the same bytes with no content type (sniffed as windows-1252).
        for ct in [r#","content_type":"text/html; charset=ISO-8859-1""#, ""] {
            let line = format!(
                r#"{{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200{ct},"body_base64":"Q2Fm6Q=="}}"#
            );
            let p = decode(line.as_bytes(), &DecodeLimits::default()).unwrap();
            assert_eq!(p.body.unwrap().raw(), b"Caf\xe9");
        }
    }

    #[test]
    fn body_over_the_limit_is_refused() {
        let limits = DecodeLimits {
            max_body_bytes: 10,
            ..DecodeLimits::default()
        };
        let line = r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":"0123456789A"}"#;
        assert_eq!(
            decode(line.as_bytes(), &limits).unwrap_err().reason,
            BodyTooLarge
        );
        let ok = r#"{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":"0123456789"}"#;
        assert!(decode(ok.as_bytes(), &limits).is_ok());
        let huge = format!(
            r#"{{"url":"http://a.example/","fetched_at":"2026-11-02T10:15:00Z","status":200,"body":"{}"}}"#,
            "x".repeat(200_000)
        );
        assert_eq!(
            decode(huge.as_bytes(), &limits).unwrap_err().reason,
            BodyTooLarge
        );
    }

    #[test]
    fn dead_letter_keeps_source_and_cuts_payload() {
        let limits = DecodeLimits {
            max_dead_letter_payload: 5,
            ..DecodeLimits::default()
        };
        let src = Source::File {
            file: "x.jsonl".into(),
            line: 3,
        };
        let dl = decode(b"[1,2,3,4]", &limits).unwrap_err().into_dead_letter(
            b"[1,2,3,4]",
            &src,
            &limits,
        );
        assert_eq!(dl.reason, NotAnObject);
        assert_eq!(dl.payload, "[1,2,");
        assert!(dl.payload_truncated);
        assert_eq!(dl.payload_bytes, 9);
        assert_eq!(dl.source, src);
        assert_eq!(dl.event_id.len(), 32);
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = decode(&bytes, &DecodeLimits::default());
        }

        #[test]
        fn random_json_never_panics(v in crate::testutil::arb_json()) {
            let s = serde_json::to_vec(&v).unwrap();
            let _ = decode(&s, &DecodeLimits::default());
        }

        #[test]
        fn mutated_good_records_never_panic(cut in 0usize..400, byte in proptest::num::u8::ANY, at in 0usize..400) {
            let mut b = GOOD.as_bytes().to_vec();
            let at = at % b.len();
            b[at] = byte;
            b.truncate(cut.max(1));
            let _ = decode(&b, &DecodeLimits::default());
        }
    }
}
