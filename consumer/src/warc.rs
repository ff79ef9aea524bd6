//! WARC files (ISO 28500, versions 1.0 and 1.1) as a replay source: every `response` record
//! becomes one page event (`neardup.page/v1`), so an archive replays like the crawl topic it
//! came from.
//!
//! A record's page event: `url` from `WARC-Target-URI`, `fetched_at` from `WARC-Date`, `ip` from
//! `WARC-IP-Address`, and from the archived HTTP response its status, `Content-Type` and body
//! (as `body_base64`: the topology detects the charset as for any byte body). A chunked
//! transfer encoding is undone, and a `gzip` or `deflate` content encoding decompressed. Bodies
//! of non-2xx responses are left out (neardup reads none: such a fetch is "no content", or
//! inconclusive for 304, 429 and 5xx). WARC has no crawl round: the events carry no
//! `crawl_id`.
//!
//! A `revisit` record of the same URL (no `WARC-Refers-To-Target-URI`, or that URL again: a
//! crawler deduplicating against its own earlier capture, or a server answering 304) becomes a
//! page event with status 304, which renews the URL's earlier content as a fetch of the same
//! content would. A revisit of another URL's capture is skipped: neardup cannot know that
//! URL's content at that date. Other record types (`warcinfo`, `request`, `metadata`,
//! `resource`, `conversion`) are skipped too; every kind is counted. A `response` record
//! whose HTTP message cannot be parsed is passed on as its raw block, so it reaches the
//! dead-letter topic (reason `not_json`) with the file and record number as its source,
//! never silently dropped. A file that is not WARC, or is cut off inside a record, is an error
//! naming the file and the byte offset (of the uncompressed stream).
//!
//! Files may be gzip-compressed per record (`.warc.gz`, the usual form) or as a whole.

use anyhow::{bail, Context as _, Result};
use base64::Engine as _;
use std::io::{BufRead, Read};
use std::path::Path;

/// What a WARC file held.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WarcCounts {
    /// Records of every type.
    pub records: u64,
    /// `response` records passed on.
    pub responses: u64,
    /// `revisit` records of the same URL, passed on as 304s.
    pub revisits: u64,
    /// `revisit` records of another URL's capture, skipped.
    pub revisits_elsewhere: u64,
    /// Other records skipped.
    pub other: u64,
}

/// True when the (possibly gzipped) file starts like a WARC file.
pub fn is_warc(path: &Path) -> Result<bool> {
    let mut r = crate::replay::open_lines(path)?;
    let mut head = [0u8; 5];
    let mut n = 0;
    while n < head.len() {
        match r.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(&head[..n] == b"WARC/")
}

/// Calls `f(record_number, page_event_or_raw_block)` for every `response` record of `path` and
/// every `revisit` of the same URL (record numbers count every record, from 1).
pub fn for_each_page(path: &Path, f: impl FnMut(u64, &[u8])) -> Result<WarcCounts> {
    for_each_page_counted(path, Default::default(), f)
}

/// [`for_each_page`], counting the bytes read from the file in `read`.
pub fn for_each_page_counted(
    path: &Path,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<WarcCounts> {
    let mut r = crate::replay::open_counted(path, read)?;
    let mut counts = WarcCounts::default();
    let mut offset = 0u64;
    let mut line = Vec::new();
    let at = |offset: u64| format!("{} at byte {offset}", path.display());
    loop {
        // Records are separated by blank lines.
        line.clear();
        let n = r.read_until(b'\n', &mut line).with_context(|| at(offset))?;
        if n == 0 {
            return Ok(counts);
        }
        offset += n as u64;
        if trim_eol(&line).is_empty() {
            continue;
        }
        if !line.starts_with(b"WARC/") {
            bail!(
                "{}: expected a WARC record (\"WARC/1.x\"), found {:?}",
                at(offset - n as u64),
                String::from_utf8_lossy(&line[..line.len().min(40)])
            );
        }
        let start = offset - n as u64;
        let mut headers: Vec<(String, String)> = Vec::new();
        loop {
            line.clear();
            let n = r.read_until(b'\n', &mut line).with_context(|| at(offset))?;
            if n == 0 {
                bail!(
                    "{}: the WARC record starting at byte {start} is cut off in its header",
                    at(offset)
                );
            }
            offset += n as u64;
            let l = trim_eol(&line);
            if l.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(l);
            if l[0] == b' ' || l[0] == b'\t' {
                if let Some(last) = headers.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(text.trim());
                }
                continue;
            }
            if let Some((k, v)) = text.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let len: u64 = get("content-length")
            .and_then(|v| v.parse().ok())
            .with_context(|| {
                format!(
                    "{}: the WARC record starting at byte {start} has no valid Content-Length",
                    at(offset)
                )
            })?;
        let mut block = Vec::with_capacity(len.min(1 << 26) as usize);
        let got = r
            .by_ref()
            .take(len)
            .read_to_end(&mut block)
            .with_context(|| at(offset))?;
        if (got as u64) < len {
            bail!(
                "{}: the WARC record starting at byte {start} is cut off ({got} of {len} bytes)",
                at(offset)
            );
        }
        offset += len;
        counts.records += 1;
        match get("warc-type").unwrap_or("") {
            "response" => {
                counts.responses += 1;
                let uri = target(get("warc-target-uri"));
                match page_event(uri, get("warc-date"), get("warc-ip-address"), &block) {
                    Some(event) => f(counts.records, &event),
                    None => f(counts.records, &block),
                }
            }
            "revisit" => {
                let uri = target(get("warc-target-uri"));
                match get("warc-refers-to-target-uri").map(|u| target(Some(u))) {
                    Some(other) if other != uri => counts.revisits_elsewhere += 1,
                    _ => {
                        counts.revisits += 1;
                        let mut event = serde_json::json!({
                            "url": uri,
                            "fetched_at": get("warc-date").unwrap_or(""),
                            "status": 304,
                        });
                        if let Some(ip) = get("warc-ip-address") {
                            event["ip"] = ip.into();
                        }
                        f(counts.records, event.to_string().as_bytes());
                    }
                }
            }
            _ => counts.other += 1,
        }
    }
}

/// A URI header's value, without the angle brackets WARC 1.0 put around it.
fn target(v: Option<&str>) -> &str {
    v.unwrap_or("").trim_matches(|c| c == '<' || c == '>')
}

fn trim_eol(l: &[u8]) -> &[u8] {
    let mut l = l;
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    l
}

/// The page event of an archived HTTP response, or `None` when the message does not parse.
fn page_event(url: &str, date: Option<&str>, ip: Option<&str>, block: &[u8]) -> Option<Vec<u8>> {
    let split = find(block, b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| find(block, b"\n\n").map(|i| (i, i + 2)))?;
    let head = std::str::from_utf8(&block[..split.0]).ok()?;
    let mut lines = head.lines();
    let status_line = lines.next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let mut content_type = None;
    let (mut chunked, mut encoding) = (false, String::new());
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(v.to_owned()),
            "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
            "content-encoding" => encoding = v.to_ascii_lowercase(),
            _ => {}
        }
    }
    let mut event = serde_json::json!({
        "url": url,
        "fetched_at": date.unwrap_or(""),
        "status": status,
    });
    if let Some(ct) = content_type {
        event["content_type"] = ct.into();
    }
    if let Some(ip) = ip {
        event["ip"] = ip.into();
    }
    if (200..300).contains(&status) {
        let mut body = block[split.1..].to_vec();
        if chunked {
            body = dechunk(&body)?;
        }
        body = match encoding.as_str() {
            "gzip" | "x-gzip" => inflate(flate2::read::MultiGzDecoder::new(&body[..]))?,
            "deflate" => inflate(flate2::read::ZlibDecoder::new(&body[..]))?,
            _ => body,
        };
        event["body_base64"] = base64::engine::general_purpose::STANDARD
            .encode(&body)
            .into();
    }
    serde_json::to_vec(&event).ok()
}

fn inflate(mut r: impl Read) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    r.read_to_end(&mut out).ok()?;
    Some(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Undoes `Transfer-Encoding: chunked`.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let eol = find(b, b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size..)?.strip_prefix(b"\r\n").unwrap_or(&b[size..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n").unwrap(),
            b"hello, world"
        );
        assert!(dechunk(b"ff\r\nshort").is_none());
    }

    #[test]
    fn an_http_response_becomes_a_page_event() {
        let block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                      Transfer-Encoding: chunked\r\n\r\n3\r\n<p>\r\n2\r\nhi\r\n0\r\n\r\n";
        let e = page_event(
            "http://a.example/",
            Some("2026-01-02T03:04:05Z"),
            Some("192.0.2.1"),
            block,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(v["url"], "http://a.example/");
        assert_eq!(v["status"], 200);
        assert_eq!(v["ip"], "192.0.2.1");
        assert_eq!(v["content_type"], "text/html; charset=utf-8");
        let body = base64::engine::general_purpose::STANDARD
            .decode(v["body_base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(body, b"<p>hi");
        let e = page_event(
            "http://a.example/x",
            None,
            None,
            b"HTTP/1.1 404 Not Found\r\n\r\ngone",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(v["status"], 404);
        assert!(v.get("body_base64").is_none());
        assert!(page_event("u", None, None, b"garbage without a header end").is_none());
    }
}
