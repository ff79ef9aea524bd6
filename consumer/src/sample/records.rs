//! The records as `crawl.pages` carries them, and the exact-duplicate groups computed from their
//! bytes.

use super::{Payload, Timed};
use std::collections::BTreeMap;

pub(super) fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// `{"k":v,...}` with the fields in the order given (values already JSON).
pub(super) fn object(fields: &[(&str, String)]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", json_str(k)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

pub(super) fn good_line(t: &Timed) -> Vec<u8> {
    let f = &t.fetch;
    let mut fields = vec![
        ("url", json_str(&f.url)),
        ("fetched_at", json_str(&t.fetched_at)),
        ("status", f.status.to_string()),
    ];
    if let Some(ct) = f.content_type {
        fields.push(("content_type", json_str(ct)));
    }
    if let Some(ip) = f.ip {
        fields.push(("ip", json_str(ip)));
    }
    fields.push(("crawl_id", json_str(&t.crawl_id)));
    match &f.body {
        Some(Payload::Text(s)) => fields.push(("body", json_str(s))),
        Some(Payload::Bytes(b)) => fields.push(("body_base64", json_str(&base64(b)))),
        None => {}
    }
    object(&fields).into_bytes()
}

/// Every set of ≥ 2 status-200 URLs of one round with byte-identical bodies.
pub(super) fn exact_groups_of(good: &[Timed]) -> Vec<(String, Vec<String>)> {
    let mut by_body: BTreeMap<(&str, &[u8]), Vec<String>> = BTreeMap::new();
    for t in good {
        if let (200, Some(body)) = (t.fetch.status, &t.fetch.body) {
            by_body
                .entry((&t.crawl_id, body.raw()))
                .or_default()
                .push(t.fetch.url.clone());
        }
    }
    let mut groups: Vec<(String, Vec<String>)> = by_body
        .into_iter()
        .filter(|(_, urls)| urls.len() >= 2)
        .map(|((crawl_id, _), mut urls)| {
            urls.sort();
            (crawl_id.to_string(), urls)
        })
        .collect();
    groups.sort();
    groups
}

/// Standard base64 (RFC 4648 alphabet, with padding).
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The Kafka key of a record: its `url` when it has a string one, else empty (DESIGN.md §2:
/// input key = URL).
pub fn record_key(record: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(record)
        .ok()
        .and_then(|v| v.get("url").and_then(|u| u.as_str()).map(str::to_owned))
        .unwrap_or_default()
}
