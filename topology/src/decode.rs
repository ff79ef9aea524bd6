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
    pub(crate) fn new(reason: DeadLetterReason, detail: impl Into<String>) -> Self {
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
    envelope(raw, limits)?.into_page(limits)
}

/// A record decoded but for its body, which is still the JSON text of the record.
///
/// Reading a body (unescaping its JSON string, and for `body_base64` decoding it and checking
/// its charset) is most of decoding's work, and a page whose body the sign cache knows by its
/// JSON text does not need it. Every check but the body's is done; [`Envelope::into_page`]
/// does the body's, so `decode` is `envelope` then `into_page`, with exactly the results of the
/// generic decoder ([`decode_generic`]) that parses the whole record into a JSON value.
pub(crate) struct Envelope<'a> {
    /// The page, without its body.
    pub page: PageEvent,
    body: PendingBody<'a>,
    raw: &'a [u8],
}

enum PendingBody<'a> {
    /// The body, already decoded (or there was none).
    Decoded(Option<Body>),
    /// `body`, as its JSON string (quotes included).
    Text(&'a str),
    /// `body_base64`, as its JSON string (quotes included).
    Base64(&'a str),
}

/// How a record sent its body, for [`Envelope::body_literal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyForm {
    /// As `body` (text).
    Text,
    /// As `body_base64` (bytes).
    Base64,
}

impl<'a> Envelope<'a> {
    /// The body's JSON string as the record sent it, quotes and escapes included, and how it
    /// was sent; `None` when there is no body or it was decoded already. Equal strings sent the
    /// same way give equal bodies (or, both, no page at all).
    pub(crate) fn body_literal(&self) -> Option<(&'a str, BodyForm)> {
        match self.body {
            PendingBody::Decoded(_) => None,
            PendingBody::Text(l) => Some((l, BodyForm::Text)),
            PendingBody::Base64(l) => Some((l, BodyForm::Base64)),
        }
    }

    /// True when the record has a body that is not empty. An empty body is no content, as
    /// an absent one is: otherwise every empty page would be an exact duplicate of every other
    /// (a crawl has many, from servers that answer 200 with nothing).
    pub(crate) fn has_body(&self) -> bool {
        match &self.body {
            PendingBody::Decoded(body) => body.as_ref().is_some_and(|b| !b.raw().is_empty()),
            // The literals keep their quotes: `""` is the empty string.
            PendingBody::Text(l) | PendingBody::Base64(l) => l.len() > 2,
        }
    }

    /// The page with its body decoded and checked.
    pub(crate) fn into_page(self, limits: &DecodeLimits) -> Result<PageEvent, DecodeError> {
        let body = match self.body {
            PendingBody::Decoded(body) => return Ok(PageEvent { body, ..self.page }),
            PendingBody::Text(lit) => unescape(lit)
                .filter(|text| text.len() <= limits.max_body_bytes)
                .map(Body::Text),
            PendingBody::Base64(lit) => unescape(lit).and_then(|b64| {
                let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
                let fits = bytes.len() <= limits.max_body_bytes;
                let readable =
                    charset::read_body(&bytes, self.page.content_type.as_deref()).is_ok();
                (fits && readable).then_some(Body::Bytes(bytes))
            }),
        };
        match body {
            Some(b) => Ok(PageEvent {
                body: Some(b),
                ..self.page
            }),
            // The body does not decode: the generic decoder says why, as it always has.
            None => decode_generic(self.raw, limits),
        }
    }
}

/// Decodes a record but for its body. Never panics, whatever the bytes.
pub(crate) fn envelope<'a>(
    raw: &'a [u8],
    limits: &DecodeLimits,
) -> Result<Envelope<'a>, DecodeError> {
    let text = check_record(raw, limits)?;
    // The quick way: the fields the contract names, with the body left as JSON text. Anything
    // it does not take (a record with an error, a body over the limit) goes the generic way,
    // which gives every error its reason and message.
    if let Some(e) = quick_envelope(text, raw, limits) {
        return Ok(e);
    }
    let mut page = decode_generic(raw, limits)?;
    let body = page.body.take();
    Ok(Envelope {
        page,
        body: PendingBody::Decoded(body),
        raw,
    })
}

fn quick_envelope<'a>(text: &'a str, raw: &'a [u8], limits: &DecodeLimits) -> Option<Envelope<'a>> {
    let f = fields(text)?;
    let page = header(&f.small).ok()?;
    let literal = |v: Option<&'a str>| match v {
        None | Some("null") => None,
        Some(l) => Some(l),
    };
    let body = match (literal(f.body), literal(f.body_base64)) {
        (Some(_), Some(_)) => return None,
        // A text body's JSON is at least as long as the body (quotes included).
        (Some(l), None) if l.len() <= limits.max_body_bytes.saturating_add(2) => {
            PendingBody::Text(l)
        }
        (Some(_), None) => return None,
        (None, Some(l)) => PendingBody::Base64(l),
        (None, None) => PendingBody::Decoded(None),
    };
    Some(Envelope { page, body, raw })
}

/// The fields of a record the contract names (a later copy of a field replaces an earlier one,
/// as in a JSON value), each body as its JSON string (or `null`) in the record.
#[derive(Default)]
struct Fields<'a> {
    small: Map<String, Value>,
    body: Option<&'a str>,
    body_base64: Option<&'a str>,
}

const SMALL_FIELDS: [&str; 6] = [
    "url",
    "fetched_at",
    "status",
    "content_type",
    "ip",
    "crawl_id",
];

/// The quick way's walk over a record's top-level object; `None` for anything it does not take
/// (then the generic decoder reads the record).
///
/// Every value but a body's string is parsed by serde_json, as strictly as the generic decoder
/// parses it. A body's string (most of the record, an escape every 20 bytes or so in HTML) is
/// only searched for its end, the first `"` after an even run of backslashes, not checked: the
/// sign cache finds a body only by the same text as one that was decoded, and any other body is
/// checked as it is unescaped ([`unescape`]), where a wrong escape or a control character sends
/// the record the generic way.
fn fields(text: &str) -> Option<Fields<'_>> {
    let b = text.as_bytes();
    let ws = |mut i: usize| {
        while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        i
    };
    let mut f = Fields::default();
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(i + 1);
    if b.get(i) == Some(&b'}') {
        return (ws(i + 1) == b.len()).then_some(f);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = string_end(b, i)?;
        let key = unescape(&text[i..end])?;
        i = ws(end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        let body = match key.as_str() {
            "body" => Some(&mut f.body),
            "body_base64" => Some(&mut f.body_base64),
            _ => None,
        };
        match body {
            Some(slot) => {
                let end = match b.get(i) {
                    Some(b'"') => string_end(b, i)?,
                    _ if text[i..].starts_with("null") => i + 4,
                    _ => return None,
                };
                // A repeated body goes the generic way, which also checks the copy that the
                // later one replaces.
                if slot.replace(&text[i..end]).is_some() {
                    return None;
                }
                i = end;
            }
            None => {
                let mut values =
                    serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
                let v = values.next()?.ok()?;
                // Inside the record a value has one level of nesting less to use.
                if depth(&v) >= 127 {
                    return None;
                }
                i += values.byte_offset();
                if let Some(&name) = SMALL_FIELDS.iter().find(|&&n| n == key) {
                    f.small.insert(name.to_owned(), v);
                }
            }
        }
        i = ws(i);
        match b.get(i) {
            Some(b',') => i = ws(i + 1),
            Some(b'}') => return (ws(i + 1) == b.len()).then_some(f),
            _ => return None,
        }
    }
}

/// Levels of arrays and objects in `v`.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The end (one past the closing quote) of the JSON string that starts at `b[start]`, a `"`.
///
/// Sixty-four bytes at a time, as simdjson finds string ends: a bit per byte for the quotes and
/// one for the backslashes (SSE2 compares, through `wide`), then the escaped bytes by carrying
/// odd runs of backslashes with an add. HTML as JSON has an escaped quote every few dozen
/// bytes; a search for the next quote stopped at each, and this does not stop at all.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    let mut carry = 0u64;
    while let Some(block) = b.get(i..i + 64) {
        if let Some(k) = closing_quote(block.try_into().expect("64 bytes"), &mut carry) {
            return Some(i + k + 1);
        }
        i += 64;
    }
    // The last bytes, padded with zeros (neither a quote nor a backslash).
    let mut last = [0u8; 64];
    last[..b.len() - i].copy_from_slice(&b[i..]);
    closing_quote(&last, &mut carry).map(|k| i + k + 1)
}

/// The index of the first unescaped quote in `block`, if any; `carry` is 1 when the block's
/// first byte is escaped (by an odd run of backslashes ending the block before), and is set for
/// the next block.
fn closing_quote(block: &[u8; 64], carry: &mut u64) -> Option<usize> {
    let (quote, backslash) = byte_masks(block);
    let quote = quote & !escaped(backslash, carry);
    (quote != 0).then(|| quote.trailing_zeros() as usize)
}

/// A bit per byte of `block` (bit i for byte i): the quotes, and the backslashes.
fn byte_masks(block: &[u8; 64]) -> (u64, u64) {
    let (q, s) = (wide::u8x16::splat(b'"'), wide::u8x16::splat(b'\\'));
    let (mut quote, mut backslash) = (0u64, 0u64);
    for (j, bytes) in block.chunks_exact(16).enumerate() {
        let v = wide::u8x16::new(bytes.try_into().expect("16 bytes"));
        quote |= u64::from(v.simd_eq(q).to_bitmask()) << (16 * j);
        backslash |= u64::from(v.simd_eq(s).to_bitmask()) << (16 * j);
    }
    (quote, backslash)
}

/// The bytes escaped by a backslash, given the backslashes of a block and whether its first
/// byte is escaped (`carry`, updated for the next block). In a run of backslashes every second
/// one escapes the byte after it, counting from the run's start; a run that starts on an odd
/// bit is told from one that starts on an even bit by adding its start to the run, whose carry
/// then flips the pattern (simdjson's `find_escaped`).
fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let backslash = backslash & !*carry;
    let follows = (backslash << 1) | *carry;
    let odd_starts = backslash & !EVEN & !follows;
    let (even_runs, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    (EVEN ^ (even_runs << 1)) & follows
}

/// The string a JSON string literal (quotes included; no unescaped quote inside) stands for;
/// `None` where serde_json would refuse it (a control character, a wrong escape, a lone
/// surrogate).
fn unescape(lit: &str) -> Option<String> {
    let s = lit.as_bytes().get(1..lit.len().checked_sub(1)?)?;
    // Eight bytes at a time: each word is copied whole, and the output moves on to the first
    // backslash or control character in it, if any (the rest is written over).
    let mut out = vec![0u8; s.len() + 8];
    let (mut i, mut o) = (0, 0);
    loop {
        let Some(w) = s.get(i..i + 8) else {
            // The last few bytes, one at a time.
            match s.get(i) {
                None => break,
                Some(&c) if c != b'\\' => {
                    if c < 0x20 {
                        return None;
                    }
                    out[o] = c;
                    (i, o) = (i + 1, o + 1);
                    continue;
                }
                Some(_) => {}
            }
            i = unescape_one(s, i, &mut out, &mut o)?;
            continue;
        };
        out[o..o + 8].copy_from_slice(w);
        let x = u64::from_le_bytes(w.try_into().expect("eight bytes"));
        let stop = has_byte(x, b'\\') | has_less(x, 0x20);
        if stop == 0 {
            (i, o) = (i + 8, o + 8);
            continue;
        }
        let k = stop.trailing_zeros() as usize / 8;
        (i, o) = (i + k, o + k);
        if s[i] < 0x20 {
            return None;
        }
        i = unescape_one(s, i, &mut out, &mut o)?;
    }
    out.truncate(o);
    String::from_utf8(out).ok()
}

const ONES: u64 = u64::MAX / 255;

/// The high bit of each byte of `x` that is `byte`, or above such a byte (only the lowest set
/// bit is exact).
fn has_byte(x: u64, byte: u8) -> u64 {
    let y = x ^ (ONES * u64::from(byte));
    y.wrapping_sub(ONES) & !y & (ONES << 7)
}

/// The high bit of each byte of `x` below `n` (at most 128), or above such a byte (only the
/// lowest set bit is exact).
fn has_less(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * u64::from(n)) & !x & (ONES << 7)
}

/// Writes the character of the escape at `s[i]` (a backslash) to `out[*o..]`; the index after
/// the escape, or `None` for an escape serde_json refuses.
fn unescape_one(s: &[u8], mut i: usize, out: &mut [u8], o: &mut usize) -> Option<usize> {
    let c = *s.get(i + 1)?;
    i += 2;
    let byte = match c {
        b'"' | b'\\' | b'/' => c,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let hi = hex4(s.get(i..i + 4)?)?;
            i += 4;
            let code = if (0xD800..0xDC00).contains(&hi) {
                if s.get(i..i + 2)? != b"\\u" {
                    return None;
                }
                let lo = hex4(s.get(i + 2..i + 6)?)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                i += 6;
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            } else {
                hi
            };
            // An escape is 6 or 12 bytes and its character 1 to 4: it fits.
            let n = char::from_u32(code)?.encode_utf8(&mut out[*o..]).len();
            *o += n;
            return Some(i);
        }
        _ => return None,
    };
    out[*o] = byte;
    *o += 1;
    Some(i)
}

fn hex4(h: &[u8]) -> Option<u32> {
    h.iter()
        .try_fold(0u32, |v, &d| Some(v << 4 | (d as char).to_digit(16)?))
}

/// The checks on the record's bytes before any parsing: its size and UTF-8.
fn check_record<'a>(raw: &'a [u8], limits: &DecodeLimits) -> Result<&'a str, DecodeError> {
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
    // simdutf8: the same check as std's, 32 or 64 bytes at a time.
    simdutf8::compat::from_utf8(raw).map_err(|e| {
        DecodeError::new(
            InvalidUtf8,
            format!(
                "record is not UTF-8 (invalid byte at {}); JSON records must be UTF-8, send binary bodies as body_base64",
                e.valid_up_to()
            ),
        )
    })
}

/// The ways of decoding, each on its own, for `examples/decode_bench.rs`; not an API.
#[doc(hidden)]
pub mod bench {
    use super::*;

    /// Decoding as a page the sign cache knows needs it: every field but the body.
    pub fn envelope_only(raw: &[u8], limits: &DecodeLimits) -> bool {
        super::envelope(raw, limits).is_ok()
    }

    /// The generic decoder alone (the whole record parsed into a JSON value).
    pub fn generic(raw: &[u8], limits: &DecodeLimits) -> Result<PageEvent, DecodeError> {
        decode_generic(raw, limits)
    }
}

/// Decodes one record by parsing it whole into a JSON value: the reference for every result
/// of [`decode`], and the way of records the quick way does not take.
fn decode_generic(raw: &[u8], limits: &DecodeLimits) -> Result<PageEvent, DecodeError> {
    use DeadLetterReason::*;
    let text = check_record(raw, limits)?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| DecodeError::new(NotJson, format!("record is not JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::new(
            NotAnObject,
            format!("record is JSON {} but must be an object", json_type(&value)),
        ));
    };
    let page = header(&obj)?;
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
            // record lands in the dead letters rather than being indexed as mojibake. A body
            // that is not text is not read as text, so it has no charset to break.
            charset::read_body(&bytes, page.content_type.as_deref())
                .map_err(|e| DecodeError::new(UndecodableBody, e.to_string()))?;
            Some(Body::Bytes(bytes))
        }
        (None, None) => None,
    };
    Ok(PageEvent { body, ..page })
}

/// Every field but the body, checked, from the record's fields (the body is `None`).
fn header(obj: &Map<String, Value>) -> Result<PageEvent, DecodeError> {
    use DeadLetterReason::*;
    let url = required_str(obj, "url")?;
    check_url(url)?;
    // Schemes are case-insensitive (RFC 3986 §3.1); publish the canonical lower-case form so
    // that `HTTP://x` and `http://x` are one URL downstream.
    let url = match url.find("://") {
        Some(i) if url[..i].bytes().any(|c| c.is_ascii_uppercase()) => {
            format!("{}{}", url[..i].to_ascii_lowercase(), &url[i..])
        }
        _ => url.to_owned(),
    };
    let fetched_at = required_str(obj, "fetched_at")?;
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
    let content_type = optional_str(obj, "content_type")?.map(str::to_owned);
    let ip = optional_str(obj, "ip")?.map(str::to_owned);
    let crawl_id = optional_str(obj, "crawl_id")?.map(str::to_owned);
    Ok(PageEvent {
        url,
        fetched_at,
        fetched_at_ms,
        status,
        content_type,
        ip,
        crawl_id,
        body: None,
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

/// The longest URL accepted, in bytes. Crawlers and servers refuse longer ones well before it
/// (the sitemaps protocol allows 2,048 characters, Heritrix 2,083; Apache's request line is
/// limited to 8,190 bytes and nginx's to 8 KiB by default), and it keeps every output a page
/// makes under the smallest `max_output_bytes` accepted (512 KiB), the largest signature
/// record with its URL included: a URL of hundreds of kilobytes made an `output_too_large`
/// dead letter of every event that named it, after the page had entered the window.
pub const MAX_URL_BYTES: usize = 8 * 1024;

/// An absolute http(s) URL with a host, at most [`MAX_URL_BYTES`] long. `http:///x` is refused
/// although WHATWG parsing would quietly turn it into `http://x/`: the record is wrong and the
/// crawler should hear about it.
fn check_url(url: &str) -> Result<(), DecodeError> {
    if url.len() > MAX_URL_BYTES {
        let start = floor_char_boundary_lossy(url.as_bytes(), 200);
        return Err(DecodeError::new(
            DeadLetterReason::InvalidUrl,
            format!(
                "url is {} bytes long, over neardup's limit of {MAX_URL_BYTES} (it starts {:?}); crawlers and servers refuse URLs this long: check how the crawler builds them",
                url.len(),
                &url[..start]
            ),
        ));
    }
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
    fn a_url_over_the_limit_is_refused_quoting_only_its_start() {
        let record = |url: &str| {
            format!(r#"{{"url":"{url}","fetched_at":"2026-11-02T10:15:00Z","status":200}}"#)
        };
        let base = "http://a.example/";
        let at_limit = format!("{base}{}", "p".repeat(MAX_URL_BYTES - base.len()));
        assert_eq!(
            decode_checked(record(&at_limit).as_bytes()).unwrap().url,
            at_limit
        );
        let over = format!("{at_limit}q");
        let e = decode_checked(record(&over).as_bytes()).unwrap_err();
        assert_eq!(e.reason, InvalidUrl);
        assert!(
            e.detail
                .contains(&format!("{} bytes long", MAX_URL_BYTES + 1)),
            "{}",
            e.detail
        );
        assert!(e.detail.len() < 600, "{}", e.detail);
        // Cut between characters, not inside one.
        let wide = format!("{base}{}", "é".repeat(MAX_URL_BYTES / 2));
        let e = decode_checked(record(&wide).as_bytes()).unwrap_err();
        assert_eq!(e.reason, InvalidUrl);
        assert!(e.detail.contains("http://a.example/éé"), "{}", e.detail);
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

    /// `decode` (the quick way when it can) against the generic decoder: equal results, errors
    /// included. Returns the result.
    fn decode_checked(raw: &[u8]) -> Result<PageEvent, DecodeError> {
        let limits = DecodeLimits {
            max_body_bytes: 64,
            ..DecodeLimits::default()
        };
        for limits in [DecodeLimits::default(), limits] {
            assert_eq!(
                decode(raw, &limits),
                decode_generic(raw, &limits),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        decode(raw, &DecodeLimits::default())
    }

    /// Pieces of JSON string literals: plain text, every escape, surrogate pairs and lone
    /// surrogates, a raw control character.
    fn arb_literal() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-zA-Z0-9 <>=/]{0,12}",
            Just("é€😀".to_owned()),
            proptest::sample::select(vec![
                r#"\""#,
                r"\\",
                r"\/",
                r"\b",
                r"\f",
                r"\n",
                r"\r",
                r"\t",
                r"\u0000",
                r"\u00e9",
                r"\u20AC",
                r"\ud83d\ude00",
                r"\uD83D\uDE00",
                r"\ud83d",
                r"\ude00",
                r"\ud83d\u0041",
                r"\ud83d\ud83d",
                r"\u12",
                r"\x",
                "\u{1}",
            ])
            .prop_map(str::to_owned),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|p| format!("\"{}\"", p.concat()))
    }

    /// The end of a JSON string, byte by byte: what [`string_end`] must find.
    fn string_end_byte_by_byte(b: &[u8], start: usize) -> Option<usize> {
        let mut i = start + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    }

    #[test]
    fn string_end_carries_backslash_runs_across_blocks() {
        // A run of backslashes ending at every position around the 64-byte boundary, odd and
        // even, before a quote.
        for run in 1..8 {
            for at in 55..70 {
                let mut b = vec![b'a'; 140];
                b[0] = b'"';
                b[at - run + 1..=at].fill(b'\\');
                b[at + 1] = b'"';
                b[130] = b'"';
                let want = if run % 2 == 1 { 131 } else { at + 2 };
                assert_eq!(string_end(&b, 0), Some(want), "run {run} ending at {at}");
                assert_eq!(string_end_byte_by_byte(&b, 0), Some(want));
            }
        }
    }

    use proptest::prelude::*;

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
        #[test]
        fn string_end_agrees_with_a_byte_loop(
            // Quotes rare enough that strings often run past a 64-byte block.
            body in proptest::collection::vec(prop_oneof![1 => Just(b'"'), 12 => Just(b'\\'), 12 => proptest::sample::select(vec![b'a', b'n', 0u8, 0xff])], 0..300),
            start in 0usize..70,
        ) {
            let mut b = vec![b'x'; start];
            b.push(b'"');
            b.extend(&body);
            prop_assert_eq!(string_end(&b, start), string_end_byte_by_byte(&b, start));
        }

        #[test]
        fn random_bytes_decode_as_the_generic_decoder_does(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = decode_checked(&bytes);
        }

        #[test]
        fn random_json_decodes_as_the_generic_decoder_does(v in crate::testutil::arb_json()) {
            let s = serde_json::to_vec(&v).unwrap();
            let _ = decode_checked(&s);
        }

        #[test]
        fn mutated_good_records_decode_as_the_generic_decoder_does(cut in 0usize..400, byte in proptest::num::u8::ANY, at in 0usize..400) {
            let mut b = GOOD.as_bytes().to_vec();
            let at = at % b.len();
            b[at] = byte;
            b.truncate(cut.max(1));
            let _ = decode_checked(&b);
        }

        /// Records with bodies of every escape, sent as text, base64 or null, repeated fields,
        /// escaped field names, unknown fields of every kind (nested to the parser's limit),
        /// white space (and what is not JSON white space) between the tokens.
        #[test]
        fn bodies_decode_as_the_generic_decoder_does(
            body in prop_oneof![4 => arb_literal(), 1 => Just("null".to_owned()), 1 => Just("nul".to_owned()), 1 => Just("7".to_owned())],
            b64 in proptest::option::of(prop_oneof![Just("\"PGI+eDwvYj4=\"".to_owned()), Just(r#""PGI+eDwvYj4\u003d""#.to_owned()), Just("\"Q2Fm6SD/\"".to_owned()), arb_literal()]),
            key in proptest::sample::select(vec!["body", "b\\u006fdy", "body_base64", "other", "bo\u{1}dy"]),
            again in proptest::option::of(arb_literal()),
            extra in proptest::sample::select(vec![
                String::new(), r#","x":[1e400]"#.into(), r#","x":"\ud800""#.into(),
                r#","x":{"y":[true,null]}"#.into(), r#","status":404"#.into(), r#","x":12x"#.into(),
                r#","content_type":"text/html; charset=utf-8""#.into(), r#","x":"a"  ,"y":-0.5e3"#.into(),
                format!(r#","x":{}{}"#, "[".repeat(126), "]".repeat(126)),
                format!(r#","x":{}{}"#, "[".repeat(127), "]".repeat(127)),
                format!(r#","x":{}{}"#, "[".repeat(128), "]".repeat(128)),
            ]),
            w in proptest::sample::select(vec!["", " ", "\n\t", "\r ", "\u{b}", "\u{a0}"]),
            tail in proptest::sample::select(vec!["", " ", "\n", "x", "}", ",", "{}"]),
        ) {
            let mut line = format!(r#"{w}{{{w}"url"{w}:{w}"http://a.example/"{w},"fetched_at":"2026-11-02T10:15:00Z","status"{w}:{w}200,{w}"{key}"{w}:{w}{body}{extra}"#);
            if let Some(b) = b64 {
                line += &format!(r#"{w},{w}"body_base64"{w}:{b}"#);
            }
            if let Some(a) = again {
                line += &format!(r#","{key}":{a}"#);
            }
            line += &format!("{w}}}{tail}");
            let _ = decode_checked(line.as_bytes());
        }

        /// An object without the fields, or empty.
        #[test]
        fn other_objects_decode_as_the_generic_decoder_does(w in proptest::sample::select(vec!["", " ", "\u{b}"]), inner in proptest::sample::select(vec!["", r#""a":1"#, r#""a":1,"#, r#","a":1"#, r#""a" 1"#, r#""a":"#])) {
            let _ = decode_checked(format!("{w}{{{w}{inner}{w}}}{w}").as_bytes());
        }

        /// A literal unescapes to what serde_json reads in it, or is left to serde_json.
        #[test]
        fn literals_unescape_as_serde_json_reads_them(lit in arb_literal(), s in "\\PC{0,40}") {
            if let Some(u) = unescape(&lit) {
                prop_assert_eq!(Some(u), serde_json::from_str::<String>(&lit).ok());
            }
            let quoted = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(unescape(&quoted), Some(s));
        }
    }

    #[test]
    fn the_quick_way_takes_good_records() {
        // Not only the generic way: the records a crawler sends go the quick way.
        let limits = DecodeLimits::default();
        let spaced = " {\"url\" : \"http://a.example/\",\n\t\"fetched_at\":\"2026-11-02T10:15:00Z\", \"status\":200, \"x\": [[1]], \"body\": \"a\\\\\\\"b\\\\\" } ";
        let e = envelope(spaced.as_bytes(), &limits).unwrap();
        assert_eq!(e.body_literal(), Some((r#""a\\\"b\\""#, BodyForm::Text)));
        assert_eq!(
            e.into_page(&limits).unwrap().body,
            Some(Body::Text(r#"a\"b\"#.into()))
        );
        let e = envelope(GOOD.as_bytes(), &limits).unwrap();
        assert_eq!(e.body_literal(), Some(("\"<p>hi</p>\"", BodyForm::Text)));
        let line = GOOD.replace(r#""body":"<p>hi</p>""#, r#""body_base64":"PGI+eDwvYj4=""#);
        let e = envelope(line.as_bytes(), &limits).unwrap();
        assert_eq!(
            e.body_literal(),
            Some(("\"PGI+eDwvYj4=\"", BodyForm::Base64))
        );
        assert_eq!(
            e.into_page(&limits).unwrap().body,
            Some(Body::Bytes(b"<b>x</b>".to_vec()))
        );
    }
}
