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
//! kept, for the payload.
//!
//! Damage is bad input too: each damaged stretch of a file is a `damaged_input` dead letter
//! holding its first 64 KiB, with the byte offset (of the uncompressed stream) and what is
//! wrong in its detail, and the replay goes on:
//! - bytes where a record should start (no `WARC/1.x` line): skipped to the next line that
//!   starts a record;
//! - a record without a valid `Content-Length`, or whose block is not followed by its blank
//!   lines where its `Content-Length` ends: the record is damage, and reading goes on at a
//!   record that starts inside what would be its block (the length too large), else at the
//!   next record after it (too small);
//! - a record cut off by the end of the file (a download cut short): the record, unless a
//!   record starts inside it, which is then read;
//! - a gzip member that does not decompress, in a file of many (one per record): what it
//!   gave before is the damage, and reading goes on at the next member
//!   ([`crate::replay::unreadable`]);
//! - a compressed file that stops decompressing (cut off, or one stream damaged): the file
//!   ends there.
//!
//! A record larger than any page (over `--max-body-bytes`) is not held, so a record starting
//! past the first 64 KiB of its block is not found: a wrong `Content-Length` that large
//! reads past it. Only an error of the file system itself (a failing disk) stops the replay,
//! naming the file and the byte offset. A file that is not WARC is read as JSON lines, each a
//! dead letter.
//!
//! Files may be gzip-compressed per record (`.warc.gz`, the usual form) or as a whole, or
//! zstd-compressed (`.warc.zst`: per record, after a frame holding the dictionary the records
//! were compressed with, as the IIPC's WARC-zstd specification has it; or as a whole).

use crate::replay::unreadable;
use anyhow::{Context as _, Result};
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
    /// Damaged stretches of the file (a record cut off or without its framing, a compressed
    /// stream that stops decompressing), passed on as dead letters (`damaged_input`).
    pub damaged: u64,
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
    /// A damaged stretch of the file where a record should be (see [`for_each_page_counted`]),
    /// for the dead letter (`damaged_input`) it makes.
    Damaged {
        /// Its first bytes (at most 64 KiB).
        bytes: Vec<u8>,
        /// Where it is and what is wrong.
        detail: String,
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
/// from `r`, as [`crate::replay::open_counted`] opens it), every `revisit` passed on and every
/// damaged stretch of the file (numbers count every record of the file and every damaged
/// stretch, from 1), adding what the file holds to `counts`; finds the captures
/// that revisits refer to in `captures`, and keeps this file's there. A record whose block is
/// over `max_block` bytes is not held in memory: a page record of that size is passed on as
/// [`WarcPage::TooLarge`].
///
/// Damage is bad input, not a reason to stop: where a record should start and none does, or a
/// record has no valid `Content-Length`, the bytes up to the next line that starts a record
/// (`WARC/1.`) are passed on as one [`WarcPage::Damaged`], and reading goes on from there; a
/// record cut off by the end of the file, or a compressed file that stops decompressing, is
/// passed on the same way and ends the file. Only an error of the file system itself is an
/// error (naming the file and the byte offset, of the uncompressed stream).
pub fn for_each_page_counted(
    path: &Path,
    r: impl BufRead,
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
    let mut r = Unread::new(r);
    // Whether `line` holds the next line that is not blank, read before its turn.
    let mut found = false;
    // Damage met after a record that is passed on first.
    let mut last_damage: Option<(Vec<u8>, crate::replay::Unreadable)> = None;
    // Damage to skip past to the next record: what is kept of it, what is wrong, where it
    // begins.
    let mut resync: Option<(Vec<u8>, String, u64)> = None;
    let at = |offset: u64| format!("{} at byte {offset}", path.display());
    loop {
        if let Some((bytes, why)) = last_damage.take() {
            damaged(&mut f, counts, &mut number, bytes, why.detail);
            if !why.goes_on {
                return Ok(());
            }
        }
        if let Some((mut kept, what, from)) = resync.take() {
            let (detail, more) = skip_to_record(&mut r, &mut offset, &mut line, &mut kept, from)
                .with_context(|| at(offset))?;
            damaged(
                &mut f,
                counts,
                &mut number,
                kept,
                format!("{what}: {detail}"),
            );
            if !more {
                return Ok(());
            }
            found = true;
        }
        if !found {
            // Records are separated by blank lines.
            line.clear();
            let n = match r.read_until(b'\n', &mut line) {
                Ok(n) => n,
                Err(e) => {
                    let why = unreadable(e, offset).with_context(|| at(offset))?;
                    offset += line.len() as u64;
                    let bytes = std::mem::take(&mut line);
                    damaged(&mut f, counts, &mut number, bytes, why.detail);
                    if why.goes_on {
                        continue;
                    }
                    return Ok(());
                }
            };
            if n == 0 {
                return Ok(());
            }
            offset += n as u64;
            if trim_eol(&line).is_empty() {
                continue;
            }
        }
        found = false;
        if !line.starts_with(b"WARC/") {
            // Framing lost (bytes damaged, or inserted): skip to the next record.
            let from = offset - line.len() as u64;
            let what = format!(
                "expected a WARC record (\"WARC/1.x\") at byte {from}, found {:?}",
                String::from_utf8_lossy(&line[..line.len().min(40)])
            );
            resync = Some((std::mem::take(&mut line), what, from));
            continue;
        }
        let start = offset - line.len() as u64;
        // The record as read so far, for a dead letter if it turns out damaged.
        let mut raw = line.clone();
        let mut headers: Vec<(String, String)> = Vec::new();
        // A gzip member that does not decompress, in the header: reading goes on after it.
        let mut header_damaged = false;
        loop {
            line.clear();
            let read = r.read_until(b'\n', &mut line);
            raw.extend_from_slice(&line);
            let n = match read {
                Ok(0) => {
                    let detail = format!(
                        "the WARC record starting at byte {start} is cut off in its header: the file ends inside it"
                    );
                    damaged(&mut f, counts, &mut number, raw, detail);
                    return Ok(());
                }
                Ok(n) => n,
                Err(e) => {
                    let why = unreadable(e, offset).with_context(|| at(offset))?;
                    offset += line.len() as u64;
                    let bytes = std::mem::take(&mut raw);
                    damaged(&mut f, counts, &mut number, bytes, why.detail);
                    if why.goes_on {
                        header_damaged = true;
                        break;
                    }
                    return Ok(());
                }
            };
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
        if header_damaged {
            continue;
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let Some(len) = get("content-length").and_then(|v| v.parse::<u64>().ok()) else {
            // Where the block ends is unknown: skip to the next record.
            let what =
                format!("the WARC record starting at byte {start} has no valid Content-Length");
            resync = Some((raw, what, start));
            continue;
        };
        // A block larger than any page neardup accepts (a video, an ISO image) is not held:
        // its start is kept for the dead letter, the rest read past.
        let keep = if len > max_block { TOO_LARGE_KEPT } else { len };
        let mut block = Vec::with_capacity(keep.min(1 << 26) as usize);
        let mut read = r
            .by_ref()
            .take(keep)
            .read_to_end(&mut block)
            .map(|n| n as u64);
        if keep < len {
            if let Ok(got) = read {
                read = std::io::copy(&mut r.by_ref().take(len - keep), &mut std::io::sink())
                    .map(|more| got + more);
            }
        }
        let got = match read {
            Ok(got) => got,
            Err(e) => {
                offset += block.len() as u64;
                let why = unreadable(e, offset).with_context(|| at(offset))?;
                raw.extend_from_slice(&block[..block.len().min(TOO_LARGE_KEPT as usize)]);
                damaged(&mut f, counts, &mut number, raw, why.detail);
                if why.goes_on {
                    continue;
                }
                return Ok(());
            }
        };
        offset += got;
        let block_at = offset - got;
        // A block cut off by the end of the file, or not followed by blank lines then the
        // next record (or the end of the file) where its Content-Length ends: the record is
        // damage, with what was read after the block (`tail`).
        let broken = if got < len {
            let what = format!(
                "the WARC record starting at byte {start} is cut off ({got} of {len} bytes)"
            );
            Some((what, Vec::new()))
        } else {
            let mut after = Vec::new();
            let framed = loop {
                line.clear();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) => break true,
                    Ok(n) => {
                        offset += n as u64;
                        if trim_eol(&line).is_empty() {
                            after.extend_from_slice(&line);
                            continue;
                        }
                        // Whatever follows a separator is the next record's business: damage
                        // of its own if it is not one.
                        found = true;
                        break line.starts_with(b"WARC/") || !after.is_empty();
                    }
                    Err(e) => {
                        // The record is whole: passed on, then the damage.
                        let why = unreadable(e, offset).with_context(|| at(offset))?;
                        offset += line.len() as u64;
                        last_damage = Some((std::mem::take(&mut line), why));
                        break true;
                    }
                }
            };
            (!framed).then(|| {
                after.extend_from_slice(&line);
                let what = format!(
                    "the WARC record starting at byte {start} is not followed by a record where its Content-Length ({len} bytes) ends"
                );
                (what, after)
            })
        };
        if let Some((what, tail)) = broken {
            found = false;
            // A record starting inside what was read as the block (its Content-Length too
            // large): reading goes on there. A block not held whole is searched only when the
            // file ends inside it, as nothing was read past its start then.
            let inner = find(&block, b"\nWARC/1.").map(|i| i + 1);
            if let Some(p) = inner.filter(|_| keep == len || got < len) {
                let next = block_at + p as u64;
                raw.extend_from_slice(&block[..p.min(TOO_LARGE_KEPT as usize)]);
                let detail = format!(
                    "{what}, and a record starts inside it, at byte {next}, where reading goes on"
                );
                damaged(&mut f, counts, &mut number, raw, detail);
                let mut back = block[p..].to_vec();
                back.extend_from_slice(&tail);
                r.unread(&back);
                offset = next;
                continue;
            }
            raw.extend_from_slice(&block[..block.len().min(TOO_LARGE_KEPT as usize)]);
            if got < len {
                let detail = format!("{what}: the file ends inside it");
                damaged(&mut f, counts, &mut number, raw, detail);
                return Ok(());
            }
            // Its Content-Length too small: the rest of its block is skipped with it.
            raw.extend_from_slice(&tail);
            raw.truncate(TOO_LARGE_KEPT as usize);
            resync = Some((raw, what, start));
            continue;
        }
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

/// A reader that can be given back bytes it read ([`Unread::unread`]), which it reads again
/// before the rest: where a WARC record turns out to start inside what was read as the block
/// of the record before.
struct Unread<R> {
    back: Vec<u8>,
    pos: usize,
    inner: R,
}

impl<R> Unread<R> {
    fn new(inner: R) -> Self {
        Unread {
            back: Vec::new(),
            pos: 0,
            inner,
        }
    }

    /// Gives back `bytes`, the last read: they are read next.
    fn unread(&mut self, bytes: &[u8]) {
        let mut back = bytes.to_vec();
        back.extend_from_slice(&self.back[self.pos..]);
        self.back = back;
        self.pos = 0;
    }
}

impl<R: BufRead> Read for Unread<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Unread<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos < self.back.len() {
            Ok(&self.back[self.pos..])
        } else {
            self.inner.fill_buf()
        }
    }

    fn consume(&mut self, amount: usize) {
        if self.pos < self.back.len() {
            self.pos += amount;
        } else {
            self.inner.consume(amount);
        }
    }
}

/// Passes on a damaged stretch of the file as record `number + 1`.
fn damaged(
    f: &mut impl FnMut(u64, WarcPage),
    counts: &mut WarcCounts,
    number: &mut u64,
    bytes: Vec<u8>,
    detail: String,
) {
    counts.damaged += 1;
    *number += 1;
    f(*number, WarcPage::Damaged { bytes, detail });
}

/// Skips the lines of `r` up to the next that starts a WARC record (`WARC/1.`), left in
/// `line`, keeping the first [`TOO_LARGE_KEPT`] bytes skipped in `kept` (which holds the first
/// of those skipped before, from byte `from`); says how far it skipped, and whether a record
/// follows (else the file ended, or stopped decompressing).
fn skip_to_record(
    r: &mut impl BufRead,
    offset: &mut u64,
    line: &mut Vec<u8>,
    kept: &mut Vec<u8>,
    from: u64,
) -> Result<(String, bool)> {
    let keep = |kept: &mut Vec<u8>, bytes: &[u8]| {
        let room = (TOO_LARGE_KEPT as usize).saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    };
    let mut damage_within: Option<String> = None;
    let within = |d: &Option<String>| {
        d.as_ref()
            .map_or(String::new(), |d| format!(" (among them: {d})"))
    };
    loop {
        line.clear();
        let n = match r.read_until(b'\n', line) {
            Ok(n) => n,
            Err(e) => {
                keep(kept, line);
                let why = unreadable(e, *offset)?;
                *offset += line.len() as u64;
                if why.goes_on {
                    // A gzip member that does not decompress among the bytes skipped.
                    damage_within.get_or_insert(why.detail);
                    continue;
                }
                let within = within(&damage_within);
                let detail = format!("skipped from byte {from}{within}, then {}", why.detail);
                return Ok((detail, false));
            }
        };
        if n == 0 {
            let skipped = *offset - from;
            let within = within(&damage_within);
            return Ok((
                format!("{skipped} bytes skipped to the end of the file{within}"),
                false,
            ));
        }
        if line.starts_with(b"WARC/1.") {
            let skipped = *offset - from;
            *offset += n as u64;
            let next = *offset - n as u64;
            let within = within(&damage_within);
            return Ok((
                format!("{skipped} bytes skipped to the next record, at byte {next}{within}"),
                true,
            ));
        }
        *offset += n as u64;
        keep(kept, line);
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

    /// What reading `bytes` as a WARC file passes on: per record number, the page event or
    /// what a dead letter would hold (`D` and the detail, or `T` for a block too large), and
    /// the counts.
    fn read_all(bytes: &[u8]) -> (Vec<(u64, String)>, WarcCounts) {
        let mut counts = WarcCounts::default();
        let mut captures = Captures::new(1 << 20);
        let mut got = Vec::new();
        let path = Path::new("damaged.warc");
        for_each_page_counted(
            path,
            bytes,
            &mut captures,
            1 << 16,
            &mut counts,
            |n, page| {
                let what = match page {
                    WarcPage::Event(e) => String::from_utf8(e).unwrap(),
                    WarcPage::Response(r) => String::from_utf8(r.into_event()).unwrap(),
                    WarcPage::TooLarge { .. } => "T".into(),
                    WarcPage::Damaged { bytes, detail } => {
                        format!("D {detail} | {}", String::from_utf8_lossy(&bytes))
                    }
                };
                got.push((n, what));
            },
        )
        .unwrap();
        (got, counts)
    }

    /// A response record of `uri` whose body is `body`, with `length` as its Content-Length
    /// (`None`: the block's own).
    fn response_record(uri: &str, body: &str, length: Option<&str>) -> Vec<u8> {
        let block = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n{body}");
        let length = length.map_or(block.len().to_string(), str::to_owned);
        format!(
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: {uri}\r\n\
             WARC-Date: 2026-11-02T00:00:00Z\r\nContent-Length: {length}\r\n\r\n{block}\r\n\r\n"
        )
        .into_bytes()
    }

    /// Three records, the middle one as `middle` makes it of its own bytes.
    fn three(middle: impl Fn(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
        let mut b = response_record("http://a.example/1", "<p>one</p>", None);
        b.extend(middle(response_record(
            "http://a.example/2",
            "<p>two</p>",
            None,
        )));
        b.extend(response_record("http://a.example/3", "<p>three</p>", None));
        b
    }

    /// The URLs of the page events passed on, and the details of the damaged stretches.
    fn pages_and_damage(got: &[(u64, String)]) -> (Vec<String>, Vec<String>) {
        let mut pages = Vec::new();
        let mut damage = Vec::new();
        for (_, what) in got {
            match what.strip_prefix("D ") {
                Some(d) => damage.push(d.to_owned()),
                None => {
                    let v: serde_json::Value = serde_json::from_str(what).unwrap();
                    pages.push(v["url"].as_str().unwrap().to_owned());
                }
            }
        }
        (pages, damage)
    }

    #[test]
    fn a_file_cut_off_inside_a_record_passes_on_the_records_before_and_the_rest_as_damage() {
        let whole = three(|r| r);
        let cut = &whole[..whole.len() - 20];
        let (got, counts) = read_all(cut);
        let (pages, damage) = pages_and_damage(&got);
        assert_eq!(pages, ["http://a.example/1", "http://a.example/2"]);
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(damage[0].contains("is cut off"), "{}", damage[0]);
        assert!(
            damage[0].contains("the file ends inside it"),
            "{}",
            damage[0]
        );
        // The dead letter holds the cut record's bytes.
        assert!(
            damage[0].contains("WARC-Target-URI: http://a.example/3"),
            "{}",
            damage[0]
        );
        assert_eq!((counts.records, counts.damaged), (2, 1));
        // Record numbers go on counting: the damage is the third.
        assert_eq!(got.last().unwrap().0, 3);
        // Cut in the header of the third: the same.
        let third = find(&whole, b"http://a.example/3").unwrap();
        let cut = third + find(&whole[third..], b"Content-Length").unwrap();
        let (got, counts) = read_all(&whole[..cut]);
        assert_eq!(pages_and_damage(&got).0.len(), 2);
        assert_eq!(counts.damaged, 1);
        assert!(pages_and_damage(&got).1[0].contains("cut off in its header"));
    }

    #[test]
    fn bytes_where_a_record_should_start_are_skipped_to_the_next_record() {
        let (got, counts) = read_all(&three(|mut r| {
            let mut b = b"garbage line\r\nmore garbage\r\n".to_vec();
            b.append(&mut r);
            b
        }));
        let (pages, damage) = pages_and_damage(&got);
        assert_eq!(
            pages,
            [
                "http://a.example/1",
                "http://a.example/2",
                "http://a.example/3"
            ]
        );
        assert_eq!(damage.len(), 1);
        assert!(
            damage[0].contains("expected a WARC record"),
            "{}",
            damage[0]
        );
        assert!(
            damage[0].ends_with("| garbage line\r\nmore garbage\r\n"),
            "{}",
            damage[0]
        );
        assert_eq!((counts.records, counts.damaged), (3, 1));
    }

    #[test]
    fn a_record_whose_content_length_is_wrong_is_damage_and_the_next_is_read() {
        for (length, says) in [
            // Too large: the next record starts inside what would be its block.
            ("150", "a record starts inside it"),
            // Too small: its block does not end where it says.
            ("20", "bytes skipped to the next record"),
            // Not a number.
            ("twelve", "has no valid Content-Length"),
        ] {
            let bad = |_| response_record("http://a.example/2", "<p>two</p>", Some(length));
            let (got, counts) = read_all(&three(bad));
            let (pages, damage) = pages_and_damage(&got);
            assert_eq!(
                pages,
                ["http://a.example/1", "http://a.example/3"],
                "{length}"
            );
            assert_eq!(damage.len(), 1, "{length}: {damage:?}");
            assert!(damage[0].contains(says), "{length}: {}", damage[0]);
            assert!(
                damage[0].contains("WARC-Target-URI: http://a.example/2"),
                "{}",
                damage[0]
            );
            assert_eq!((counts.records, counts.damaged), (2, 1), "{length}");
        }
        // Too large and past the end of the file: the record after it is read all the same.
        let bad = |_| response_record("http://a.example/2", "<p>two</p>", Some("1000"));
        let (got, _) = read_all(&three(bad));
        let (pages, damage) = pages_and_damage(&got);
        assert_eq!(pages, ["http://a.example/1", "http://a.example/3"]);
        assert!(
            damage[0].contains("is cut off") && damage[0].contains("a record starts inside it")
        );
    }

    #[test]
    fn a_compressed_file_that_stops_decompressing_passes_on_what_came_before() {
        use std::io::Write as _;
        // Each record compressed on its own (the `.warc.gz` convention), the third cut off.
        let mut gz = Vec::new();
        for (i, body) in ["<p>one</p>", "<p>two</p>", "<p>three</p>"]
            .iter()
            .enumerate()
        {
            let record = response_record(&format!("http://a.example/{i}"), body, None);
            let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            member.write_all(&record).unwrap();
            let member = member.finish().unwrap();
            let keep = if i == 2 {
                member.len() / 2
            } else {
                member.len()
            };
            gz.extend_from_slice(&member[..keep]);
        }
        let cut = &gz[..];
        let file =
            TempFile(std::env::temp_dir().join(format!("warc-cut-{}.warc.gz", std::process::id())));
        std::fs::write(&file.0, cut).unwrap();
        let r = crate::replay::open_counted(&file.0, Arc::default()).unwrap();
        let mut counts = WarcCounts::default();
        let mut damage = Vec::new();
        let mut pages = 0;
        for_each_page_counted(
            &file.0,
            r,
            &mut Captures::new(1 << 20),
            1 << 16,
            &mut counts,
            |_, p| match p {
                WarcPage::Damaged { detail, .. } => damage.push(detail),
                _ => pages += 1,
            },
        )
        .unwrap();
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(
            damage[0].contains("cannot be read past byte"),
            "{}",
            damage[0]
        );
        assert_eq!(
            (pages, counts.records),
            (2, 2),
            "the records before the cut are passed on"
        );
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
        /// one never panics and is never an error (damage is passed on, as dead letters are
        /// made of), every record read is counted once, in exactly one kind, and every damaged
        /// stretch is passed on once; an undamaged archive has none.
        #[test]
        fn a_damaged_archive_is_read_never_an_error_or_a_panic(
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
            let mut stretches = 0;
            let read = crate::replay::open_counted(&file.0, Arc::default()).and_then(|r| {
                for_each_page_counted(&file.0, r, &mut captures, 2048, &mut counts, |_, page| {
                    match page {
                        WarcPage::Response(r) => {
                            r.into_event();
                        }
                        WarcPage::Damaged { detail, .. } => {
                            assert!(detail.contains(" byte"), "{detail}");
                            stretches += 1;
                        }
                        _ => {}
                    }
                })
            });
            proptest::prop_assert_eq!(stretches, counts.damaged);
            let c = &counts;
            let kinds = c.responses + c.resources + c.conversions + c.conversions_of_pages
                + c.revisits + c.revisits_of_others + c.revisits_elsewhere + c.too_large
                + c.not_http + c.other;
            proptest::prop_assert_eq!(kinds, c.records);
            proptest::prop_assert!(read.is_ok(), "{:#}", read.unwrap_err());
            if flips.is_empty() && cut.is_none() {
                proptest::prop_assert_eq!(c.records, n, "{:?}", c);
                proptest::prop_assert_eq!(c.damaged, 0);
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
        }
    }
}
