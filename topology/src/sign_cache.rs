//! The signatures of recently signed pages, by URL, so that a page fetched again with the same
//! body is not signed again.
//!
//! Most refetches find a page unchanged: Fetterly et al. (2003) saw about two thirds of pages
//! unchanged from one weekly crawl to the next, and 63.6 % of the pages with content in the
//! bench's medium stream repeat their URL's previous body byte for byte. Signing costs most of a
//! record's CPU time, and decoding the body (unescaping its JSON string, or its base64) most of
//! the rest, while this lookup costs a hash of the body's JSON text and a map probe.
//!
//! A page's signatures depend on its body, on how the body was sent (text, or bytes in the
//! charset its `Content-Type` names), on whether that type is `text/plain` (read as text, not
//! HTML), on its URL (links and `<img>` terms are resolved against it) and on the signer's
//! parameters, which are fixed for a cache. The cache is keyed by the
//! URL and checks the other inputs on every hit, the body by the XXH3-128 of its JSON string in
//! the record (the same text is the same body; the same body written with other escapes is a
//! miss, and is signed). So a hit gives exactly what decoding and signing would: a replay's
//! outputs do not depend on the cache, its size or which thread filled it.
//!
//! Entries keep the signatures as numbers (their hex is written again on a hit) and the
//! out-links front-coded (each link as the length of the prefix it shares with the one before
//! and the rest), rebuilt on a hit. The cache is bounded by an approximate byte budget: about
//! 3.2 KB per page of the bench's medium crawl (6.8 KB with the links written out whole).
//!
//! A crawl refetches its URLs in cycles, and evicting the least recently used entry to admit a
//! new one would, with a cycle of more URLs than the cache holds, evict every entry just before
//! its URL comes again: no hit at all. So a full cache admits a page only in place of entries
//! whose last fetch is more than one window older (in event time) than this one, oldest first;
//! otherwise the page is signed and not cached. With a cycle longer than the cache, the URLs
//! cached first keep their entries and hit every cycle (the best any cache of that size can do
//! on a cycle), and URLs no longer fetched leave once their window has passed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::decode::BodyForm;
use crate::signed::SignedParts;
use neardup_schemas::PageEvent;

/// Per-entry bookkeeping beyond the signatures and the URL: the map slot, the list links, the
/// entry's fields (an estimate, used only against the budget: the entry is 112 bytes, the list
/// node adds its key's `String` and two links, the map a pointer and a control byte).
const ENTRY_OVERHEAD: usize = 176;

/// A shared cache of signatures; one per configuration, used by every preparing thread.
pub struct SignCache {
    budget: usize,
    /// An entry whose last fetch is this much older than a new page may give way to it.
    max_age_ms: i64,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    refused: AtomicU64,
}

struct Inner {
    lru: lru::LruCache<String, Entry>,
    bytes: usize,
}

struct Entry {
    /// XXH3-128 of the body's JSON text.
    body: u128,
    /// How the body was sent: `None` for text, the `Content-Type` for bytes (its charset
    /// decodes them).
    form: Option<Option<String>>,
    /// Whether the body was served as `text/plain` (for a body sent as text, `form` does not
    /// say).
    plain: bool,
    /// Event time of the URL's latest fetch with this body.
    at_ms: i64,
    /// The signatures; without their out-links when `links` holds them.
    parts: Arc<SignedParts>,
    /// The out-links, front-coded (`None`: a page without links, whose `parts` are whole);
    /// shared, so that a hit decodes them outside the lock.
    links: Option<Arc<FrontCoded>>,
    bytes: usize,
}

/// A list of strings, each stored as the length of the prefix it shares with the one before it
/// and the rest. A page's out-links mostly share their scheme, host and directories.
#[derive(Debug, Default, PartialEq)]
struct FrontCoded {
    /// Per string, LEB128: the shared prefix's length, then the rest's.
    lengths: Vec<u8>,
    /// The rests, concatenated (each starts on a character boundary).
    rests: String,
}

impl FrontCoded {
    fn encode<'a>(strings: impl Iterator<Item = &'a str>) -> Self {
        let mut out = FrontCoded::default();
        let mut previous = "";
        for s in strings {
            let mut shared = s
                .bytes()
                .zip(previous.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            while !s.is_char_boundary(shared) {
                shared -= 1;
            }
            push_leb128(&mut out.lengths, shared);
            push_leb128(&mut out.lengths, s.len() - shared);
            out.rests.push_str(&s[shared..]);
            previous = s;
        }
        out.lengths.shrink_to_fit();
        out.rests.shrink_to_fit();
        out
    }

    /// The strings concatenated, and where each ends; `None` if the coding is damaged (it
    /// cannot be, but a miss is the safe answer).
    fn decode(&self) -> Option<(String, Vec<usize>)> {
        // Checked and sized first (the pages that get them keep them): each string shares at
        // most the one before it, and the rests add up to what is stored.
        let (mut at, mut total, mut count, mut rests, mut previous) = (0, 0usize, 0, 0usize, 0);
        while at < self.lengths.len() {
            let shared = read_leb128(&self.lengths, &mut at)?;
            let rest = read_leb128(&self.lengths, &mut at)?;
            if shared > previous {
                return None;
            }
            previous = shared.checked_add(rest)?;
            total = total.checked_add(previous)?;
            rests = rests.checked_add(rest)?;
            count += 1;
        }
        if rests != self.rests.len() {
            return None;
        }
        let mut all: Vec<u8> = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(count);
        let (mut at, mut rest_at, mut previous_start) = (0, 0, 0);
        while at < self.lengths.len() {
            let shared = read_leb128(&self.lengths, &mut at)?;
            let rest = read_leb128(&self.lengths, &mut at)?;
            let start = all.len();
            all.extend_from_within(previous_start..previous_start + shared);
            all.extend_from_slice(self.rests.as_bytes().get(rest_at..rest_at + rest)?);
            rest_at += rest;
            ends.push(all.len());
            previous_start = start;
        }
        Some((String::from_utf8(all).ok()?, ends))
    }

    fn heap_bytes(&self) -> usize {
        self.lengths.capacity() + self.rests.capacity()
    }
}

fn push_leb128(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_leb128(b: &[u8], at: &mut usize) -> Option<usize> {
    let mut v = 0usize;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// What a cache holds and did, for metrics and summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignCacheStats {
    /// Pages whose signatures came from the cache.
    pub hits: u64,
    /// Pages signed (and then cached, when they fit).
    pub misses: u64,
    /// Pages signed and not cached: the cache was full of entries fetched within a window.
    pub refused: u64,
    /// Entries held.
    pub entries: u64,
    /// Approximate bytes held.
    pub bytes: u64,
}

/// A body as the cache knows it: by its JSON text in the record (equal texts sent the same way
/// are equal bodies, so a hit needs no decoding of the body) and how it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyKey {
    /// XXH3-128 of the JSON string, quotes and escapes included.
    hash: u128,
    form: BodyForm,
}

impl BodyKey {
    /// The key of a body sent as the JSON string `literal`, as `form`.
    pub(crate) fn new(literal: &str, form: BodyForm) -> Self {
        BodyKey {
            hash: xxhash_rust::xxh3::xxh3_128(literal.as_bytes()),
            form,
        }
    }
}

/// One fetch, as the cache looks it up.
pub(crate) struct Fetch<'a> {
    url: &'a str,
    body: u128,
    /// How the body was sent, as far as signing depends on it (see [`Entry::form`]).
    form: Option<Option<&'a str>>,
    /// Served as `text/plain` (see [`Entry::plain`]).
    plain: bool,
    /// Event time.
    at_ms: i64,
}

impl<'a> Fetch<'a> {
    /// The fetch of `page`, whose body has the key `body`.
    pub(crate) fn new(page: &'a PageEvent, body: BodyKey) -> Self {
        Fetch {
            url: &page.url,
            body: body.hash,
            form: match body.form {
                BodyForm::Text => None,
                BodyForm::Base64 => Some(page.content_type.as_deref()),
            },
            plain: crate::charset::is_plain_text(page.content_type.as_deref()),
            at_ms: page.fetched_at_ms,
        }
    }
}

impl SignCache {
    /// A cache holding about `budget` bytes (0: it holds nothing), whose entries give way to
    /// new pages once they are `max_age_ms` of event time older (the window's length).
    pub fn new(budget: usize, max_age_ms: i64) -> Self {
        SignCache {
            budget,
            max_age_ms,
            inner: Mutex::new(Inner {
                lru: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The signatures cached for the fetch's URL if its last cached fetch had this body, sent
    /// the same way (the entry then dates from this fetch). A hit is counted here; a miss when
    /// the page, signed, is [`put`](Self::put), since a body that does not decode makes no page
    /// (it goes to the dead letters, and is neither).
    pub(crate) fn get(&self, f: &Fetch<'_>) -> Option<Arc<SignedParts>> {
        let hit = {
            let mut inner = self.lock();
            inner
                .lru
                .get_mut(f.url)
                .filter(|e| {
                    e.body == f.body
                        && e.form.as_ref().map(|c| c.as_deref()) == f.form
                        && e.plain == f.plain
                })
                .map(|e| {
                    e.at_ms = e.at_ms.max(f.at_ms);
                    (Arc::clone(&e.parts), e.links.clone())
                })
        };
        // The links are decoded and put back outside the lock.
        let hit = match hit {
            None => None,
            Some((parts, None)) => Some(parts),
            Some((parts, Some(links))) => links.decode().map(|(links, link_ends)| {
                Arc::new(SignedParts {
                    links,
                    link_ends,
                    ..SignedParts::clone(&parts)
                })
            }),
        };
        if hit.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// Remembers the signatures of a fetch that [`get`](Self::get) missed (replacing any
    /// earlier fetch's of its URL), if they fit: in free room, or in place of entries more than
    /// a window older.
    pub(crate) fn put(&self, f: &Fetch<'_>, parts: Arc<SignedParts>) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        if self.budget == 0 {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let (url, at_ms) = (f.url, f.at_ms);
        // The links are kept front-coded beside the parts, which then hold none.
        let (parts, links) = if parts.link_ends.is_empty() {
            (parts, None)
        } else {
            let links = Arc::new(FrontCoded::encode(parts.links()));
            let without = SignedParts {
                links: String::new(),
                link_ends: Vec::new(),
                ..SignedParts::clone(&parts)
            };
            (Arc::new(without), Some(links))
        };
        let bytes = parts.heap_bytes()
            + links.as_deref().map_or(0, FrontCoded::heap_bytes)
            + url.len()
            + ENTRY_OVERHEAD;
        let mut inner = self.lock();
        // The URL's earlier entry makes room in any case: it is out of date.
        if let Some(old) = inner.lru.pop(url) {
            inner.bytes -= old.bytes;
        }
        // Entries are in the order of their last fetch (near enough event time): the oldest
        // give way while they are a window older than this page.
        while inner.bytes + bytes > self.budget {
            match inner.lru.peek_lru() {
                Some((_, e)) if e.at_ms < at_ms.saturating_sub(self.max_age_ms) => {
                    let (_, old) = inner.lru.pop_lru().expect("peeked");
                    inner.bytes -= old.bytes;
                }
                _ => break,
            }
        }
        if inner.bytes + bytes > self.budget {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let entry = Entry {
            body: f.body,
            form: f.form.map(|c| c.map(str::to_owned)),
            plain: f.plain,
            at_ms,
            parts,
            links,
            bytes,
        };
        inner.lru.put(url.to_owned(), entry);
        inner.bytes += bytes;
    }

    /// Hits, misses and what the cache holds now.
    pub fn stats(&self) -> SignCacheStats {
        let inner = self.lock();
        SignCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            entries: inner.lru.len() as u64,
            bytes: inner.bytes as u64,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A thread that panicked while holding the lock left the map consistent (each update
        // is a single call), so the cache stays usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for SignCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignCache")
            .field("budget", &self.budget)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Preparer};
    use base64::Engine as _;
    use proptest::prelude::*;

    const URLS: [&str; 3] = [
        "http://a.example/doc/x.html",
        "http://b.example/doc/x.html",
        "http://a.example/other/",
    ];
    const HTML: [&str; 3] = [
        "<p>Caf\u{e9} one two three four five six seven eight nine ten</p><a href=\"y.html\">y</a><img src=\"p.png\">",
        "<p>Caf\u{e9} one two three four five six seven eight nine eleven</p><a href=\"/z\">z</a>",
        "<html><body><h1>T</h1><pre>a b\nc d</pre></body></html>",
    ];
    const TYPES: [Option<&str>; 4] = [
        None,
        Some("text/html; charset=utf-8"),
        Some("text/html; charset=iso-8859-1"),
        Some("Text/Plain; charset=utf-8"),
    ];
    const DAY: i64 = 24 * 3600 * 1000;

    /// A record: URL, body (sent as text or as bytes; body 3 is body 0 with its `é` written
    /// as an escape), content type, fetch time (days).
    fn record(url: usize, html: usize, as_bytes: bool, ct: usize, day: i64) -> Vec<u8> {
        let escaped = html == 3;
        let html = html % 3;
        let mut v = serde_json::json!({
            "url": URLS[url], "fetched_at": crate::format_time(day * DAY), "status": 200
        });
        if let Some(ct) = TYPES[ct] {
            v["content_type"] = ct.into();
        }
        if as_bytes {
            v["body_base64"] = base64::engine::general_purpose::STANDARD
                .encode(HTML[html].as_bytes())
                .into();
        } else {
            v["body"] = HTML[html].into();
        }
        let json = serde_json::to_string(&v).unwrap();
        match escaped {
            true => json.replace('\u{e9}', "\\u00e9").into_bytes(),
            false => json.into_bytes(),
        }
    }

    /// The signatures a prepared record carries, encoded (`Signed` has no equality of its own).
    fn signatures(p: &crate::Prepared) -> Vec<u8> {
        let page = p.0.as_ref().expect("the record decodes");
        postcard::to_stdvec(page.signed.as_ref().expect("a page with content")).unwrap()
    }

    /// Bytes one cached page of URL 0 with body 0 takes.
    fn entry_bytes() -> usize {
        let c = Arc::new(SignCache::new(1 << 20, DAY));
        Preparer::with_cache(&Config::default(), Arc::clone(&c))
            .prepare(&record(0, 0, false, 0, 0));
        c.stats().bytes as usize
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the sequence of fetches, the budget and the window, two preparers sharing a
        /// cache give exactly the signatures of a preparer without one, within the budget.
        #[test]
        fn a_cached_page_has_the_signatures_signing_gives(
            records in proptest::collection::vec((0..3usize, 0..4usize, any::<bool>(), 0..4usize, 0..3i64), 1..40),
            budget in prop_oneof![Just(0usize), Just(3_000usize), Just(1 << 20)],
            window_days in 1..4i64,
        ) {
            let cfg = Config::default();
            let cache = Arc::new(SignCache::new(budget, window_days * DAY));
            let mut cached = [
                Preparer::with_cache(&cfg, Arc::clone(&cache)),
                Preparer::with_cache(&cfg, Arc::clone(&cache)),
            ];
            let mut plain = Preparer::new(&cfg);
            let mut day = 0;
            for (i, &(u, h, b, ct, step)) in records.iter().enumerate() {
                day += step;
                let raw = record(u, h, b, ct, day);
                let want = signatures(&plain.prepare(&raw));
                prop_assert_eq!(signatures(&cached[i % 2].prepare(&raw)), want, "record {}", i);
                let s = cache.stats();
                prop_assert!(s.bytes <= budget as u64);
                prop_assert_eq!(s.hits + s.misses, i as u64 + 1);
                prop_assert!(s.refused <= s.misses);
            }
        }
    }

    proptest! {
        /// Front coding gives back every list of strings, multi-byte characters and empty
        /// strings included.
        #[test]
        fn front_coding_gives_back_the_strings(
            strings in proptest::collection::vec("(http://a\\.example/|é|ü/|x|/|€){0,12}", 0..20),
        ) {
            let coded = FrontCoded::encode(strings.iter().map(String::as_str));
            let (all, ends) = coded.decode().expect("decodes");
            let starts = std::iter::once(0).chain(ends.iter().copied());
            let back: Vec<&str> = starts.zip(&ends).map(|(a, &b)| &all[a..b]).collect();
            prop_assert_eq!(back, strings.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert_eq!(all.len(), all.capacity());
        }
    }

    /// Links that share a long prefix take little room, and a damaged coding is refused, not
    /// read past its end.
    #[test]
    fn front_coding_stores_shared_prefixes_once() {
        let links: Vec<String> = (0..100)
            .map(|i| {
                format!(
                    "https://docs.example.org/manual/chapter-{}/section-{i}.html",
                    i / 10
                )
            })
            .collect();
        let plain: usize = links.iter().map(String::len).sum();
        let coded = FrontCoded::encode(links.iter().map(String::as_str));
        assert!(
            coded.heap_bytes() * 4 < plain,
            "{} of {plain}",
            coded.heap_bytes()
        );
        for cut in [1, 2, coded.lengths.len() / 2] {
            let damaged = FrontCoded {
                lengths: coded.lengths[..coded.lengths.len() - cut].to_vec(),
                rests: coded.rests.clone(),
            };
            let _ = damaged.decode();
        }
        let decode = |lengths: &[u8], rests: &str| {
            FrontCoded {
                lengths: lengths.to_vec(),
                rests: rests.into(),
            }
            .decode()
        };
        assert_eq!(decode(&[0, 1, 1, 0], "x"), Some(("xx".into(), vec![1, 2])));
        assert_eq!(
            decode(&[5, 1], "x"),
            None,
            "a first string sharing a prefix"
        );
        assert_eq!(
            decode(&[0, 1, 2, 0], "x"),
            None,
            "sharing more than the string before"
        );
        assert_eq!(decode(&[0, 9], "x"), None, "a rest past the end");
        assert_eq!(decode(&[0, 1], "xy"), None, "rests left over");
        assert_eq!(
            decode(
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0],
                "x"
            ),
            None,
            "a length no string has"
        );
    }

    /// A hit needs the same URL, the same body written the same way, and the same way of
    /// sending it.
    #[test]
    fn hits_need_the_same_url_body_and_form() {
        let cfg = Config::default();
        let cache = Arc::new(SignCache::new(1 << 20, 14 * DAY));
        let mut p = Preparer::with_cache(&cfg, Arc::clone(&cache));
        let mut hits = |raw: Vec<u8>| {
            let before = cache.stats().hits;
            p.prepare(&raw);
            cache.stats().hits - before
        };
        // (URL, body, sent as bytes, content type, day), hits, why
        let cases = [
            ((0, 0, false, 0, 0), 0, "first fetch"),
            ((0, 0, false, 0, 7), 1, "unchanged refetch"),
            (
                (0, 0, false, 1, 7),
                1,
                "a text body ignores the content type",
            ),
            ((0, 0, false, 3, 7), 0, "but for text/plain, read as text"),
            ((0, 0, false, 3, 7), 1, "and again"),
            ((0, 0, false, 0, 7), 0, "and back to HTML"),
            ((1, 0, false, 0, 7), 0, "same body, another URL"),
            (
                (0, 3, false, 0, 7),
                0,
                "same body, written with another escape",
            ),
            ((0, 3, false, 0, 7), 1, "and again"),
            ((0, 0, true, 1, 7), 0, "the same bytes sent as bytes"),
            ((0, 0, true, 1, 7), 1, "and again"),
            ((0, 0, true, 2, 7), 0, "bytes in another charset"),
            ((0, 1, true, 2, 7), 0, "changed body"),
            ((0, 0, true, 2, 7), 0, "the URL's entry is its latest fetch"),
        ];
        for ((u, h, b, ct, day), want, why) in cases {
            assert_eq!(hits(record(u, h, b, ct, day)), want, "{why}");
        }
        let s = cache.stats();
        assert_eq!((s.entries, s.hits, s.misses, s.refused), (2, 5, 9, 0));
    }

    /// A page with content is one hit or one miss; a record whose body does not decode is no
    /// page (a dead letter), and neither.
    #[test]
    fn a_body_that_does_not_decode_is_no_lookup() {
        let cache = Arc::new(SignCache::new(1 << 20, 14 * DAY));
        let mut p = Preparer::with_cache(&Config::default(), Arc::clone(&cache));
        let stats = |c: &SignCache| {
            let s = c.stats();
            (s.hits, s.misses)
        };
        let good = String::from_utf8(record(0, 0, true, 1, 0)).unwrap();
        let bad = [
            good.replace("body_base64\":\"", "body_base64\":\"!"),
            {
                // Bytes that are not the UTF-8 their Content-Type says.
                let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
                v["body_base64"] = base64::engine::general_purpose::STANDARD
                    .encode(b"<p>\xff</p>")
                    .into();
                v.to_string()
            },
            String::from_utf8(record(0, 0, false, 0, 0))
                .unwrap()
                .replace("Caf", "Caf\\x"),
        ];
        for (i, raw) in bad.iter().enumerate() {
            assert!(
                p.prepare(raw.as_bytes()).0.is_err(),
                "record {i} is a dead letter"
            );
            assert_eq!(stats(&cache), (0, 0), "record {i}");
        }
        p.prepare(good.as_bytes());
        assert_eq!(stats(&cache), (0, 1));
        p.prepare(good.as_bytes());
        assert_eq!(stats(&cache), (1, 1));
    }

    /// A full cache keeps the URLs it holds while they are fetched within a window (a crawl
    /// cycle longer than the cache still hits on them), and lets entries a window old give way.
    #[test]
    fn a_full_cache_keeps_its_entries_for_a_window() {
        let cfg = Config::default();
        let one = entry_bytes();
        let cache = Arc::new(SignCache::new(2 * one + one / 2, 3 * DAY));
        let mut p = Preparer::with_cache(&cfg, Arc::clone(&cache));
        let stats = |c: &SignCache| {
            let s = c.stats();
            (s.hits, s.misses, s.refused)
        };
        // A cycle of three URLs through a cache of two, twice: URLs 0 and 1 hit the second
        // time (an LRU cache would have evicted each just before it came again).
        for day in [0, 1] {
            for u in 0..3 {
                p.prepare(&record(u, 0, false, 0, day));
            }
        }
        assert_eq!(stats(&cache), (2, 4, 2), "URL 2 refused twice");
        // Day 5: URL 2 comes more than a window (3 days) after the last fetch of URLs 0 and 1.
        p.prepare(&record(2, 0, false, 0, 5));
        assert_eq!(stats(&cache), (2, 5, 2), "URL 0's entry gave way to URL 2");
        p.prepare(&record(1, 0, false, 0, 5));
        p.prepare(&record(2, 0, false, 0, 5));
        assert_eq!(stats(&cache), (4, 5, 2));
        p.prepare(&record(0, 0, false, 0, 5));
        assert_eq!(
            stats(&cache),
            (4, 6, 3),
            "URL 0 refused: the others are recent"
        );
        // A URL's own changed body replaces its entry even when the cache is full.
        p.prepare(&record(1, 1, false, 0, 6));
        p.prepare(&record(1, 1, false, 0, 6));
        assert_eq!(stats(&cache), (5, 7, 3));
        assert!(cache.stats().bytes as usize <= 2 * one + one / 2);
    }
}
