//! WARC files (ISO 28500, versions 1.0 and 1.1) as a replay source: every `response` record
//! becomes one page event (`neardup.page/v1`), so an archive replays like the crawl topic it
//! came from.
//!
//! A record's page event: `url` from `WARC-Target-URI`, `fetched_at` from `WARC-Date`, `ip` from
//! `WARC-IP-Address`, and from the archived HTTP response its status, `Content-Type` and body
//! (as `body_base64`: the topology detects the charset as for any byte body). A chunked
//! transfer encoding is undone, and a `gzip`, `deflate`, `br` or `zstd` content encoding
//! decompressed (a body in `compress`, or one that does not decompress, makes the record a
//! dead letter as an unparseable message is). Bodies
//! of non-2xx responses are left out (neardup reads none: such a fetch is "no content", or
//! inconclusive for 304, 429 and 5xx). WARC has no crawl round: the events carry no
//! `crawl_id`.
//!
//! A `revisit` record stands for a fetch whose content the archive holds elsewhere:
//! - of another URL's capture (a crawler deduplicating by payload digest across URLs, which
//!   is how an exact copy at a second URL, a mirror's page above all, is archived): the
//!   page event of a fetch of that URL's body at this URL (status 200, or the revisit's own
//!   2xx status; its `Content-Type`, else the capture's). The capture is found by the
//!   revisit's `WARC-Payload-Digest`, else by its `WARC-Refers-To` record ID, among the
//!   bodies of the `response` records read before it in this replay ([`Captures`], bounded
//!   in bytes, least recently used dropped first). A revisit whose capture is not among
//!   them (in a file not given, or dropped) is skipped, and counted;
//! - of the same URL (no `WARC-Refers-To-Target-URI`, or that URL again: a crawler
//!   deduplicating against its own earlier capture, or a server answering 304): a page event
//!   with status 304, which renews the URL's earlier content as a fetch of the same content
//!   would.
//!
//! A `resource` record of an http(s) URL (a page archived without its HTTP exchange) becomes
//! a 200 fetch of its block, typed by the record's `Content-Type`. So does a `conversion`
//! record (the text a tool extracted from a page: Common Crawl's WET files hold only these,
//! `text/plain`), unless its `WARC-Refers-To` names a `response` or `resource` read before it
//! in the same file, which is then the page (a second fetch of its URL, with other content,
//! would only churn its pairs).
//!
//! Other record types (`warcinfo`, `request`, `metadata`) are skipped, as are responses,
//! resources, conversions and revisits of other schemes than http(s) (a crawler archives
//! its DNS lookups as `dns:` responses); every kind is counted. A `response` record
//! whose HTTP message cannot be parsed is passed on as its raw block, so it reaches the
//! dead-letter topic (reason `not_json`) with the file and record number as its source,
//! never silently dropped. So is a page record larger than any page neardup accepts (a
//! video), as a `body_too_large` dead letter, without being held in memory: only its start is
//! kept, for the payload. A file that is not WARC, or is cut off inside a record, is an error
//! naming the file and the byte offset (of the uncompressed stream).
//!
//! Files may be gzip-compressed per record (`.warc.gz`, the usual form) or as a whole, or
//! zstd-compressed (`.warc.zst`: per record, after a frame holding the dictionary the records
//! were compressed with, as the IIPC's WARC-zstd specification has it; or as a whole).

use anyhow::{bail, Context as _, Result};
use base64::Engine as _;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::Arc;

/// What a WARC file held.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WarcCounts {
    /// Records of every type.
    pub records: u64,
    /// `response` records passed on.
    pub responses: u64,
    /// `resource` records of http(s) URLs, passed on as 200 fetches of their block.
    pub resources: u64,
    /// `conversion` records of http(s) URLs (a WET file's extracted text) whose original is
    /// not in the same file, passed on as 200 fetches of their block.
    pub conversions: u64,
    /// `conversion` records of a `response` or `resource` read before them in the same file,
    /// skipped: that record is the page.
    pub conversions_of_pages: u64,
    /// `revisit` records of the same URL, passed on as 304s.
    pub revisits: u64,
    /// `revisit` records of another URL's capture, passed on with that capture's body.
    pub revisits_of_others: u64,
    /// `revisit` records of another URL's capture that was not found, skipped.
    pub revisits_elsewhere: u64,
    /// `response`, `resource` and `revisit` records of http(s) URLs too large to hold, passed
    /// on as dead letters (`body_too_large`).
    pub too_large: u64,
    /// `response`, `resource` and `revisit` records of other schemes than http(s), skipped:
    /// the DNS lookups a crawler archives (`dns:`), FTP, `whois:`, a crawler's own log
    /// (`metadata:`), a tool's `urn:` records.
    pub not_http: u64,
    /// Other records skipped.
    pub other: u64,
}

/// The `response` records read so far, for the `revisit` records that refer to them from
/// another URL: by payload digest and by record ID (one record for both), within a budget of
/// bytes, the least recently used dropped first. One for a whole replay, so a revisit finds its
/// capture in an earlier file. A record is kept as read (its HTTP message is parsed only if a
/// revisit refers to it), sharing its bytes with the page event being made of it.
pub struct Captures {
    entries: lru::LruCache<Box<str>, Arc<Capture>>,
    bytes: usize,
    budget: usize,
}

/// A `response` record's URL and HTTP message.
struct Capture {
    url: Box<str>,
    block: Arc<Vec<u8>>,
}

/// What a [`Captures`] entry costs beside its key's text: the key's pointer, the list links, the
/// map's slot and the `Arc`.
const ENTRY_BYTES: usize = 64;

fn entry_bytes(key: &str) -> usize {
    key.len() + ENTRY_BYTES
}

impl Capture {
    /// Its bytes: itself in its `Arc` (16 bytes of counts), its URL, and its record in the
    /// record's own `Arc` and `Vec` (16 + 24 bytes).
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + 16 + self.url.len() + 40 + self.block.len()
    }
}

impl Captures {
    /// Keeps at most `budget` bytes of records and keys; 0 keeps none (a revisit of another
    /// URL is then always skipped).
    pub fn new(budget: usize) -> Self {
        Captures {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
            budget,
        }
    }

    /// Keeps the `response` record of `url`, `block`, under its payload digest and record ID
    /// (when it has neither, or it is larger than the whole budget, it is not kept).
    fn keep(&mut self, digest: Option<&str>, id: Option<&str>, url: &str, block: &Arc<Vec<u8>>) {
        let keys: Vec<Box<str>> = [
            digest.map(|d| format!("d {d}")),
            id.map(|i| format!("i {i}")),
        ]
        .into_iter()
        .flatten()
        .map(String::into_boxed_str)
        .collect();
        let capture = Capture {
            url: url.into(),
            block: Arc::clone(block),
        };
        let cost = capture.bytes() + keys.iter().map(|k| entry_bytes(k)).sum::<usize>();
        if keys.is_empty() || cost > self.budget {
            return;
        }
        let capture = Arc::new(capture);
        self.bytes += capture.bytes();
        for key in keys {
            self.bytes += entry_bytes(&key);
            let len = key.len();
            if let Some(old) = self.entries.put(key, capture.clone()) {
                self.release(len, old);
            }
        }
        while self.bytes > self.budget {
            let Some((key, old)) = self.entries.pop_lru() else {
                break;
            };
            self.release(key.len(), old);
        }
    }

    /// Accounts for an entry gone: its key, and its capture if no other key holds it.
    fn release(&mut self, key_len: usize, capture: Arc<Capture>) {
        self.bytes -= key_len + ENTRY_BYTES;
        if Arc::strong_count(&capture) == 1 {
            self.bytes -= capture.bytes();
        }
    }

    /// The capture a revisit refers to, by payload digest, else by record ID.
    fn find(&mut self, digest: Option<&str>, id: Option<&str>) -> Option<Arc<Capture>> {
        let by_digest = digest.and_then(|d| self.entries.get(&*format!("d {d}")).cloned());
        by_digest.or_else(|| id.and_then(|i| self.entries.get(&*format!("i {i}")).cloned()))
    }
}

/// What [`for_each_page_counted`] passes on for a record.
pub enum WarcPage {
    /// A page event (of a `revisit` record).
    Event(Vec<u8>),
    /// A `response` or `resource` record, whose page event [`ResponseRecord::into_event`]
    /// makes: its HTTP message is parsed and its body decoded there, on whichever thread calls
    /// it.
    Response(ResponseRecord),
    /// A page record whose block is `len` bytes, larger than any page neardup accepts: `start`
    /// holds its first bytes, for the dead letter (`body_too_large`) it makes.
    TooLarge {
        /// The block's first bytes.
        start: Vec<u8>,
        /// The block's length.
        len: u64,
    },
}

/// How much of a block too large to hold is kept for its dead letter (whose payload is cut
/// to 64 KiB anyway).
const TOO_LARGE_KEPT: u64 = 64 << 10;

/// A `response` record as read: its URL, date, IP address and HTTP message; or a `resource`
/// record, whose block is the page itself, with the record's content type.
pub struct ResponseRecord {
    url: String,
    date: Option<String>,
    ip: Option<String>,
    block: Arc<Vec<u8>>,
    /// `Some(content type)` for a `resource` record (the type may be unknown).
    resource: Option<Option<String>>,
}

impl ResponseRecord {
    /// Its page event, or its HTTP message as it is when that does not parse, which makes it a
    /// dead letter (`not_json`) with the record's source.
    pub fn into_event(self) -> Vec<u8> {
        let (date, ip) = (self.date.as_deref(), self.ip.as_deref());
        if let Some(ct) = &self.resource {
            return page_event(&self.url, date, ip, 200, ct.as_deref(), Some(&self.block));
        }
        match response(&self.block, true) {
            Some(r) => {
                let (ct, body) = (r.content_type.as_deref(), r.body.as_deref());
                page_event(&self.url, date, ip, r.status, ct, body)
            }
            None => Arc::unwrap_or_clone(self.block),
        }
    }
}

/// Calls `f(record_number, page)` for every `response` and `resource` record of `path` (read
/// from `r`, as [`crate::replay::open_counted`] opens it) and every `revisit` passed on (record
/// numbers count every record of the file, from 1), adding what the file holds to `counts`;
/// finds the captures
/// that revisits refer to in `captures`, and keeps this file's there. A record whose block is
/// over `max_block` bytes is not held in memory: a page record of that size is passed on as
/// [`WarcPage::TooLarge`].
pub fn for_each_page_counted(
    path: &Path,
    mut r: impl BufRead,
    captures: &mut Captures,
    max_block: u64,
    counts: &mut WarcCounts,
    mut f: impl FnMut(u64, WarcPage),
) -> Result<()> {
    // The record IDs of this file's pages (hashed), which its `conversion` records may name.
    let mut page_ids = std::collections::HashSet::new();
    let mut number = 0u64;
    let mut offset = 0u64;
    let mut line = Vec::new();
    let at = |offset: u64| format!("{} at byte {offset}", path.display());
    loop {
        // Records are separated by blank lines.
        line.clear();
        let n = r.read_until(b'\n', &mut line).with_context(|| at(offset))?;
        if n == 0 {
            return Ok(());
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
        // A block larger than any page neardup accepts (a video, an ISO image) is not held:
        // its start is kept for the dead letter, the rest read past.
        let keep = if len > max_block { TOO_LARGE_KEPT } else { len };
        let mut block = Vec::with_capacity(keep.min(1 << 26) as usize);
        let mut got = r
            .by_ref()
            .take(keep)
            .read_to_end(&mut block)
            .with_context(|| at(offset))? as u64;
        if keep < len {
            got += std::io::copy(&mut r.by_ref().take(len - keep), &mut std::io::sink())
                .with_context(|| at(offset))?;
        }
        if got < len {
            bail!(
                "{}: the WARC record starting at byte {start} is cut off ({got} of {len} bytes)",
                at(offset)
            );
        }
        offset += len;
        counts.records += 1;
        number += 1;
        let kind = get("warc-type").unwrap_or("");
        let uri = target(get("warc-target-uri"));
        let (date, ip) = (get("warc-date"), get("warc-ip-address"));
        let page_kind = matches!(kind, "response" | "resource" | "revisit" | "conversion");
        if page_kind && !is_http(uri) {
            counts.not_http += 1;
            continue;
        }
        if keep < len {
            if page_kind {
                counts.too_large += 1;
                f(number, WarcPage::TooLarge { start: block, len });
            } else {
                counts.other += 1;
            }
            continue;
        }
        match kind {
            "conversion"
                if get("warc-refers-to").is_some_and(|id| page_ids.contains(&id_hash(id))) =>
            {
                counts.conversions_of_pages += 1
            }
            "response" | "resource" | "conversion" => {
                let block = Arc::new(block);
                match kind {
                    "conversion" => counts.conversions += 1,
                    "resource" => counts.resources += 1,
                    _ => {
                        counts.responses += 1;
                        let (digest, id) = (get("warc-payload-digest"), get("warc-record-id"));
                        captures.keep(digest, id, uri, &block);
                    }
                }
                if kind != "conversion" {
                    if let Some(id) = get("warc-record-id") {
                        page_ids.insert(id_hash(id));
                    }
                }
                // A resource is a page archived without its HTTP exchange (a file, a tool's
                // own capture), a conversion the text extracted from one (a WET file): a 200
                // fetch of the block, typed by the record.
                let resource = (kind != "response").then(|| get("content-type").map(str::to_owned));
                let record = ResponseRecord {
                    url: uri.to_owned(),
                    date: date.map(str::to_owned),
                    ip: ip.map(str::to_owned),
                    block,
                    resource,
                };
                f(number, WarcPage::Response(record));
            }
            "revisit" => {
                let found = captures.find(get("warc-payload-digest"), get("warc-refers-to"));
                let refers_to = get("warc-refers-to-target-uri").map(|u| target(Some(u)));
                // Another URL's capture, with a body to fetch.
                let original = found
                    .filter(|c| *c.url != *uri)
                    .and_then(|c| response(&c.block, true))
                    .filter(|r| r.body.is_some());
                match original {
                    Some(original) => {
                        // A fetch of that capture's content at this URL.
                        counts.revisits_of_others += 1;
                        let own =
                            response(&block, false).filter(|r| (200..300).contains(&r.status));
                        let status = own.as_ref().map_or(200, |r| r.status);
                        let ct = own.as_ref().and_then(|r| r.content_type.as_deref());
                        let ct = ct.or(original.content_type.as_deref());
                        let event = page_event(uri, date, ip, status, ct, original.body.as_deref());
                        f(number, WarcPage::Event(event));
                    }
                    None if refers_to.is_some_and(|other| other != uri) => {
                        counts.revisits_elsewhere += 1
                    }
                    None => {
                        counts.revisits += 1;
                        let event = page_event(uri, date, ip, 304, None, None);
                        f(number, WarcPage::Event(event));
                    }
                }
            }
            _ => counts.other += 1,
        }
    }
}

/// A record ID's hash, as a file's page IDs are kept for its `conversion` records (a fixed
/// hasher: the same for every run).
fn id_hash(id: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(id)
}

/// Whether a URI is http:// or https:// (the only pages neardup takes).
fn is_http(uri: &str) -> bool {
    let scheme = uri.split_once(':').map_or("", |(s, _)| s);
    scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
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

/// What an archived HTTP response says.
struct Response {
    status: u16,
    content_type: Option<String>,
    /// The body of a 2xx response, its transfer and content encodings undone (neardup reads no
    /// other status's body).
    body: Option<Vec<u8>>,
}

/// The archived HTTP response of a record's block, or `None` when the message does not parse;
/// without its body unless `with_body` (a revisit's block has the headers only).
fn response(block: &[u8], with_body: bool) -> Option<Response> {
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
    let mut body = None;
    if with_body && (200..300).contains(&status) {
        let mut b = block[split.1..].to_vec();
        if chunked {
            b = dechunk(&b)?;
        }
        body = Some(decode_content(b, &encoding)?);
    }
    Some(Response {
        status,
        content_type,
        body,
    })
}

/// A page event (`body` as `body_base64`).
fn page_event(
    url: &str,
    date: Option<&str>,
    ip: Option<&str>,
    status: u16,
    content_type: Option<&str>,
    body: Option<&[u8]>,
) -> Vec<u8> {
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
    if let Some(body) = body {
        event["body_base64"] = base64::engine::general_purpose::STANDARD
            .encode(body)
            .into();
    }
    serde_json::to_vec(&event).expect("strings and numbers serialize")
}

/// Undoes a `Content-Encoding` (a list, applied in order, so undone from the last): `gzip`,
/// `deflate` (zlib, or the raw deflate some servers send under that name), `br` and `zstd`;
/// `identity` and names no client knows leave the body as it is, as browsers do. `None` when a
/// body does not decode, or for `compress` (LZW, which no browser reads any more): the record
/// is then a dead letter, not a page read as binary.
fn decode_content(mut body: Vec<u8>, encoding: &str) -> Option<Vec<u8>> {
    for coding in encoding.rsplit(',').map(str::trim) {
        body = match coding {
            "gzip" | "x-gzip" => inflate(flate2::read::MultiGzDecoder::new(&body[..]))?,
            "deflate" => inflate(flate2::read::ZlibDecoder::new(&body[..]))
                .or_else(|| inflate(flate2::read::DeflateDecoder::new(&body[..])))?,
            "br" => inflate(brotli_decompressor::Decompressor::new(&body[..], 4096))?,
            // The decoder's window limit (128 MiB) bounds its memory.
            "zstd" => inflate(zstd::stream::read::Decoder::new(&body[..]).ok()?)?,
            "compress" | "x-compress" => return None,
            _ => body,
        };
    }
    Some(body)
}

/// The most a body may decompress to (a few kilobytes of gzip can expand to gigabytes): far
/// above any page (`--max-body-bytes` refuses much less), so only a decompression bomb is cut
/// off, as a body that does not decode.
const MAX_DECODED: u64 = 256 << 20;

fn inflate(r: impl Read) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    r.take(MAX_DECODED + 1).read_to_end(&mut out).ok()?;
    (out.len() as u64 <= MAX_DECODED).then_some(out)
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

    /// The bytes `captures` counts, recounted from its entries (each capture once).
    fn recount(captures: &Captures) -> usize {
        let mut bodies: Vec<*const Capture> = Vec::new();
        let mut n = 0;
        for (k, c) in captures.entries.iter() {
            n += entry_bytes(k);
            if !bodies.contains(&Arc::as_ptr(c)) {
                bodies.push(Arc::as_ptr(c));
                n += c.bytes();
            }
        }
        n
    }

    /// [`Captures::keep`] of a `(url, block)`.
    fn put(c: &mut Captures, d: Option<&str>, id: Option<&str>, (url, b): (&str, Arc<Vec<u8>>)) {
        c.keep(d, id, url, &b);
    }

    #[test]
    fn captures_are_found_by_digest_or_record_id_within_their_budget() {
        let capture = |url: &'static str, len: usize| (url, Arc::new(vec![b'x'; len]));
        let mut c = Captures::new(1100);
        put(
            &mut c,
            Some("sha1:A"),
            Some("<urn:uuid:1>"),
            capture("http://a/", 300),
        );
        put(
            &mut c,
            None,
            Some("<urn:uuid:2>"),
            capture("http://b/", 300),
        );
        put(&mut c, None, None, capture("http://c/", 10)); // nothing to find it by
        assert_eq!(c.bytes, recount(&c));
        assert_eq!(c.entries.len(), 3);
        let url = |f: Option<Arc<Capture>>| f.map(|c| c.url.to_string());
        assert_eq!(
            url(c.find(Some("sha1:A"), None)).as_deref(),
            Some("http://a/")
        );
        assert_eq!(
            url(c.find(Some("sha1:?"), Some("<urn:uuid:1>"))).as_deref(),
            Some("http://a/")
        );
        assert_eq!(
            url(c.find(None, Some("<urn:uuid:2>"))).as_deref(),
            Some("http://b/")
        );
        assert!(c.find(Some("sha1:B"), Some("<urn:uuid:3>")).is_none());
        // A third body overflows the budget: the least recently used entries go (both of the
        // first body's, the second found last), until the rest fits.
        put(&mut c, Some("sha1:C"), None, capture("http://c/", 300));
        assert!(c.bytes <= 1100, "{}", c.bytes);
        assert_eq!(c.bytes, recount(&c));
        assert!(c.find(Some("sha1:A"), Some("<urn:uuid:1>")).is_none());
        assert_eq!(
            url(c.find(None, Some("<urn:uuid:2>"))).as_deref(),
            Some("http://b/")
        );
        assert_eq!(
            url(c.find(Some("sha1:C"), None)).as_deref(),
            Some("http://c/")
        );
        // Too large for the budget, or no budget at all: not kept.
        put(&mut c, Some("sha1:D"), None, capture("http://d/", 2000));
        assert!(c.find(Some("sha1:D"), None).is_none());
        let mut none = Captures::new(0);
        put(&mut none, Some("sha1:A"), None, capture("http://a/", 1));
        assert!(none.find(Some("sha1:A"), None).is_none());
        // Many captures, one body under two keys, and the same keys again: the accounting
        // stays exact and within the budget.
        let mut c = Captures::new(5000);
        for i in 0..200usize {
            let (d, id) = (format!("sha1:{}", i % 37), format!("<urn:uuid:{}>", i % 53));
            put(
                &mut c,
                Some(&d),
                Some(&id),
                capture("http://e/", (i * 7919) % 900),
            );
            assert!(c.bytes <= 5000);
            assert_eq!(c.bytes, recount(&c), "after {i}");
        }
    }

    #[test]
    fn content_encodings_are_undone() {
        use std::io::Write as _;
        let page = b"<p>hello brotli</p>".repeat(20);
        let gzip = |b: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(b).unwrap();
            gz.finish().unwrap()
        };
        let zlib = {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&page).unwrap();
            z.finish().unwrap()
        };
        let raw_deflate = {
            let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&page).unwrap();
            z.finish().unwrap()
        };
        // `page` compressed by Google's brotli (Python `brotli.compress`, quality 11).
        let br: &[u8] = &[
            0x1b, 0x7b, 0x01, 0xf8, 0x1d, 0x87, 0xe9, 0x36, 0x78, 0xb6, 0xc9, 0xea, 0x5e, 0xfa,
            0x9a, 0x07, 0x4e, 0x8e, 0x4e, 0xfa, 0xbc, 0x88, 0x65, 0x1a, 0xdb, 0x5b, 0x6d, 0x42,
            0x60, 0x89, 0x20, 0x0e, 0xf4, 0xc9, 0xc8, 0x7d, 0x48, 0x00,
        ];
        // `page` compressed by the reference zstd (`zstd -19`, v1.5.4, with its checksum).
        let zst: &[u8] = &[
            0x28, 0xb5, 0x2f, 0xfd, 0x64, 0x7c, 0x00, 0xd5, 0x00, 0x00, 0x98, 0x3c, 0x70, 0x3e,
            0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x62, 0x72, 0x6f, 0x74, 0x6c, 0x69, 0x3c, 0x2f,
            0x70, 0x3e, 0x01, 0x00, 0xcd, 0x4c, 0x9d, 0x61, 0xcb, 0x21, 0xb0, 0x06,
        ];
        let decoded = |b: &[u8], encoding: &str| decode_content(b.to_vec(), encoding);
        assert_eq!(decoded(&gzip(&page), "gzip").unwrap(), page);
        assert_eq!(decoded(&gzip(&page), "x-gzip").unwrap(), page);
        assert_eq!(decoded(&zlib, "deflate").unwrap(), page);
        assert_eq!(decoded(&raw_deflate, "deflate").unwrap(), page);
        assert_eq!(decoded(br, "br").unwrap(), page);
        assert_eq!(decoded(zst, "zstd").unwrap(), page);
        // Applied in order, undone from the last.
        assert_eq!(decoded(&gzip(br), "br, gzip").unwrap(), page);
        assert_eq!(decoded(&gzip(&gzip(&page)), "gzip,gzip").unwrap(), page);
        assert_eq!(decoded(&gzip(zst), "zstd, gzip").unwrap(), page);
        // Identity, and names that are no encoding (a server's mistake): the body as sent.
        for e in ["", "identity", "utf-8"] {
            assert_eq!(decoded(&page, e).unwrap(), page, "{e:?}");
        }
        // What does not decode, and what neardup does not decode, is no body.
        assert!(decoded(&page, "gzip").is_none());
        assert!(decoded(&page, "br").is_none());
        assert!(decoded(&page, "zstd").is_none());
        assert!(decoded(&zst[..zst.len() - 4], "zstd").is_none(), "cut off");
        assert!(decoded(&page, "compress").is_none());
        // A decompression bomb is cut off.
        let zeros = std::io::repeat(0).take(MAX_DECODED + 1);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::copy(&mut { zeros }, &mut gz).unwrap();
        assert!(decoded(&gz.finish().unwrap(), "gzip").is_none());
        let bomb = zstd::stream::encode_all(std::io::repeat(0).take(MAX_DECODED + 1), 1).unwrap();
        assert!(decoded(&bomb, "zstd").is_none());
        // Through a whole response.
        let mut block = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n".to_vec();
        block.extend_from_slice(br);
        assert_eq!(response(&block, true).unwrap().body.unwrap(), page);
    }

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
        let event = |url, date, ip, block| {
            let r = response(block, true)?;
            let (ct, body) = (r.content_type.as_deref(), r.body.as_deref());
            Some(page_event(url, date, ip, r.status, ct, body))
        };
        let e = event(
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
        let e = event(
            "http://a.example/x",
            None,
            None,
            b"HTTP/1.1 404 Not Found\r\n\r\ngone",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(v["status"], 404);
        assert!(v.get("body_base64").is_none());
        assert!(event("u", None, None, b"garbage without a header end").is_none());
        // A revisit's block: the headers alone, whatever they say of a body.
        let r = response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!((r.status, r.body), (200, None));
    }

    /// An archive of every kind of record the reader tells apart: responses chunked, gzip- and
    /// zstd-encoded, a resource, a conversion of a page in another file and one of a response
    /// in this file, revisits (of the same URL and of another's capture), a DNS lookup, a
    /// warcinfo record and, last, one too large to hold. Also the number of records, and
    /// where the last begins.
    fn every_kind_of_record() -> (Vec<u8>, u64, usize) {
        use std::io::Write as _;
        let mut out = Vec::new();
        let mut n = 0u64;
        // Appends a record; where it starts.
        let mut rec = |kind: &str, uri: &str, extra: &str, block: &[u8]| {
            let start = out.len();
            n += 1;
            let head = format!(
                "WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Target-URI: {uri}\r\n\
                 WARC-Record-ID: <urn:r{n}>\r\nWARC-Date: 2026-11-0{}T00:00:00Z\r\n{extra}\
                 Content-Length: {}\r\n\r\n",
                n % 9 + 1,
                block.len()
            );
            out.extend(head.bytes());
            out.extend(block);
            out.extend(b"\r\n\r\n");
            start
        };
        let page = b"<html><title>T</title><p>one two three four five six</p></html>";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(page).unwrap();
        let encoded = [
            ("Transfer-Encoding: chunked", {
                let mut b = format!("{:x}\r\n", page.len()).into_bytes();
                b.extend(page);
                b.extend(b"\r\n0\r\n\r\n");
                b
            }),
            ("Content-Encoding: gzip", gz.finish().unwrap()),
            (
                "Content-Encoding: zstd",
                zstd::encode_all(&page[..], 3).unwrap(),
            ),
        ];
        rec("warcinfo", "", "", b"software: test\r\n");
        for (i, (header, body)) in encoded.iter().enumerate() {
            let mut block =
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n{header}\r\n\r\n")
                    .into_bytes();
            block.extend(body);
            let extra = format!("WARC-Payload-Digest: sha1:D{i}\r\n");
            rec("response", &format!("http://a.example/{i}"), &extra, &block);
        }
        rec(
            "resource",
            "http://a.example/r.txt",
            "Content-Type: text/plain\r\n",
            b"a < b",
        );
        rec(
            "conversion",
            "http://b.example/",
            "WARC-Refers-To: <urn:elsewhere>\r\n",
            b"text",
        );
        rec(
            "conversion",
            "http://a.example/0",
            "WARC-Refers-To: <urn:r2>\r\n",
            b"text",
        );
        rec(
            "revisit",
            "http://a.example/0",
            "",
            b"HTTP/1.1 304 Not Modified\r\n\r\n",
        );
        rec(
            "revisit",
            "http://c.example/copy",
            "WARC-Payload-Digest: sha1:D1\r\n",
            b"HTTP/1.1 200 OK\r\n\r\n",
        );
        rec(
            "response",
            "dns:a.example",
            "",
            b"a.example. 300 IN A 192.0.2.1\n",
        );
        let last = rec("response", "http://a.example/big", "", &[b'x'; 70_000]);
        (out, n, last)
    }

    /// Removes the file when dropped, however the test ends.
    struct TempFile(std::path::PathBuf);

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// Damaged archives, plain or compressed, damaged before or after compressing: reading
        /// one never panics (it is an error naming the file, or it is read), and every record
        /// read is counted once, in exactly one kind.
        #[test]
        fn a_damaged_archive_is_an_error_or_read_never_a_panic(
            form in 0..3usize,
            after_compressing in proptest::prelude::any::<bool>(),
            flips in proptest::collection::vec((0..1usize << 16, 1..=255u8), 0..6),
            cut in proptest::option::of(0..1usize << 16),
        ) {
            use std::io::Write as _;
            let (plain, n, last) = every_kind_of_record();
            // Damage within the records before the large one (a run of one byte, which would
            // take most of it), or anywhere in a compressed file.
            let damage = |mut b: Vec<u8>, span: usize| {
                for &(at, x) in &flips {
                    b[at % span] ^= x;
                }
                if let Some(at) = cut {
                    b.truncate(at % (b.len() + 1));
                }
                b
            };
            let plain = if after_compressing { plain } else { damage(plain, last) };
            let compressed = match form {
                0 => plain,
                1 => {
                    let mut gz =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    gz.write_all(&plain).unwrap();
                    gz.finish().unwrap()
                }
                _ => zstd::encode_all(&plain[..], 3).unwrap(),
            };
            let span = if form == 0 { last } else { compressed.len() };
            let bytes = if after_compressing { damage(compressed, span) } else { compressed };
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let file = TempFile(std::env::temp_dir().join(format!(
                "warc-property-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )));
            std::fs::write(&file.0, &bytes).unwrap();
            let mut counts = WarcCounts::default();
            let mut captures = Captures::new(1 << 20);
            let read = crate::replay::open_counted(&file.0, Arc::default()).and_then(|r| {
                for_each_page_counted(&file.0, r, &mut captures, 2048, &mut counts, |_, page| {
                    if let WarcPage::Response(r) = page {
                        r.into_event();
                    }
                })
            });
            let c = &counts;
            let kinds = c.responses + c.resources + c.conversions + c.conversions_of_pages
                + c.revisits + c.revisits_of_others + c.revisits_elsewhere + c.too_large
                + c.not_http + c.other;
            proptest::prop_assert_eq!(kinds, c.records);
            match read {
                Ok(()) if flips.is_empty() && cut.is_none() => {
                    proptest::prop_assert_eq!(c.records, n, "{:?}", c);
                    proptest::prop_assert_eq!(
                        (c.responses, c.resources, c.conversions, c.conversions_of_pages),
                        (3, 1, 1, 1),
                        "{:?}",
                        c
                    );
                    proptest::prop_assert_eq!(
                        (c.revisits, c.revisits_of_others, c.too_large, c.not_http, c.other),
                        (1, 1, 1, 1, 1)
                    );
                }
                Ok(()) => {}
                Err(e) => {
                    let name = file.0.display().to_string();
                    proptest::prop_assert!(format!("{e:#}").contains(&name), "{:#}", e);
                }
            }
        }
    }
}
