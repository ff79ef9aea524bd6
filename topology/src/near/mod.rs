//! The sliding-window sketch index: candidate pairs from sketch tables, verification with the
//! full signatures under a selectable policy, and `neardup.pairs` events that are detected once
//! and retracted when they stop holding (DESIGN.md §3–4, seed 001 §3).
//!
//! # What a windowed page keeps
//! A compact record ([`Sketch`]): 84 one-byte min-values (b-bit min-hash, b = 8, after Li and
//! König: the low byte of a mixed min-value; an agreement estimate is corrected for the 1/256
//! chance of a random byte match), the top 16 bits of each of the 6 supershingles (a
//! supershingle agrees when its 16-bit tag and its 14 min-value bytes all agree), the 384-bit
//! simhash, 64-bit cuts of the content checksum and of the normalised-text hash, the site, a
//! boilerplate mask (below) and the fetch time. The full 64-bit min-values are not kept.
//!
//! # Tables
//! One multimap from a 32-bit key to the pages holding it, over the tables a policy needs:
//! - **bands**: 14 bands of 3 consecutive min-value bytes (the band key is the 3 bytes, mixed
//!   with the band number), each inside one supershingle, two or three to a supershingle
//!   ([`BAND_STARTS`]). Any B-similar pair (>= 2 agreeing supershingles of 14 min-values)
//!   agrees on every band inside each agreeing supershingle, so the band tables find every pair
//!   FMN's 15 megashingle tables find, and also pairs down to Jaccard ~0.6 (a pair of Jaccard J
//!   shares a band with probability 1 − (1 − J³)¹⁴: 0.97 at J = 0.6, 0.997 at 0.7). Until the
//!   forty-eighth session there were 21 bands of 4 bytes, with the same probability at 0.7 and
//!   a lower one below it; 7 keys fewer took the index from 421 to 371 bytes per windowed page
//!   at a million pages, for about 0.6 more candidates verified per page there (two unrelated
//!   pages share one of the bands once in 1.2 million pairs, against once in 200 million).
//! - **pieces**: Henzinger's 12 simhash pieces of 32 bits (Alg. C and the combined policy).
//! - **checksum**: the content checksum, so exact duplicates are always candidates.
//!
//! 32-bit keys may collide; a collision only adds a candidate, which verification rejects. A
//! band bucket with more than `max_bucket` pages gives only its newest `max_bucket − 1` as
//! candidates: such a key is shared by a template or by a large group of copies (190 parked
//! domains serving one page), so the work per page stays bounded and each page still pairs with
//! the copies filed just before it. A checksum bucket of `max_pairs_per_join` pages or more gives
//! none (the exact index reports such groups). The default policy also skips the buckets of bands
//! that lie wholly on the page's site boilerplate (below). The multimap (`crate::multimap`)
//! keeps a key's page in an 8-byte entry of a flat table, its two or three pages in a block of
//! that size, or more in a list.
//!
//! The multimap can be split by key into shards ([`NearIndex::with_key_shards`]), which the
//! index asks by request and answer only: a filing's answer gives each of the page's buckets
//! as it was (its length, and its newest pages as far as the hot-bucket cut and the site sample
//! need them), a drop removes the page. Answers merged by key position do not depend on the
//! number of shards, so N shards give exactly the pairs of one (`tests/key_shards.rs`).
//!
//! The window's bookkeeping (`Window`: URL -> slot, fetch times, expiry, the page budget)
//! decides without looking at verification, so the index also splits the way N instances
//! would run it: a [`Sequencer`] turns fetches into [`Step`]s ahead of verification, each
//! [`KeyShardStage`] takes the steps on its own and answers the filings, and a
//! [`NearIndex::follower`] verifies the steps with the answers, giving exactly the pairs of one
//! index. `neardup run --key-shards N` runs them as the index, shard and verify stages,
//! connected by `neardup.internal.steps` (README, "Split stages").
//!
//! # Modules
//! - `sketch`: the compact record of a page's signatures, how two records compare, table keys;
//! - `naming`: how the URLs of a compared pair relate;
//! - `policy`: the four pair policies, their parameters and verdicts;
//! - `window`: which URL is in which slot, fetch times, expiry, the page budget;
//! - `page`, `pairs`: what the index keeps per windowed page and per live pair;
//! - `sites`: site numbers, and the counts the boilerplate sample adds up;
//! - `shards`: the key tables split by key;
//! - `split`: the index as sequencer, key shards and verifier;
//! - this module: the index itself (filing, lookup, verification, the pair lifecycle).
//!
//! The `lru` crate is not used: eviction here is by event time (a min-heap of fetch times with
//! lazy deletion), and a page budget evicts the oldest fetch first, which an access-ordered LRU
//! would get wrong for pages that are looked up often.
//!
//! # Per-site boilerplate discounting (the default policy)
//! Seed 001 concludes that both algorithms fail on same-site pairs because of shared templates
//! and proposes discounting shingles that recur on many pages of a site. Here, when a page
//! arrives, the pages of its own site that share a band with it (at most `boilerplate_sample`,
//! newest first) are a sample of the site; a min-value position whose value recurs in at least
//! `boilerplate_min` of them is the site's boilerplate (a template shingle won that position),
//! and is marked in the page's mask. Sampled pages that agree with the page nearly everywhere
//! are its copies on the site (versions, variants), not evidence of the template, and are left
//! out of the counts (`copy_cut`). The default policy estimates Jaccard on the positions
//! neither page marks: copies of one document still agree there, while template pages that
//! differ in their main item now disagree almost everywhere. A band whose positions are all
//! marked is shared with the template, not with a copy, so its bucket is not enumerated for
//! candidates (unless every band is marked). A page that is mostly template may keep fewer than
//! `min_support` positions; down to half of that, its pairs hold only if every kept position
//! agrees.
//!
//! # Policies
//! - `b` (Alg. B, FMN/Henzinger): B-similarity >= 2 of 6.
//! - `c` (Alg. C, Charikar/Henzinger): C-similarity >= 372 of 384.
//! - `combined` (Henzinger): B-similarity >= 2 and C-similarity >= 355.
//! - `neardup` (default): equal normalised text, or discounted Jaccard >= `min_jaccard` on at
//!   least `min_support` undiscounted positions (or on half as many, all agreeing) and
//!   C-similarity >= `min_c_similarity`; the thresholds depend on the URLs' names ([`url_name`]).
//!
//! Every policy reports equal content checksums as `exact`. Levels: `exact` (equal checksum),
//! `virtually_identical` (6 of 6 supershingles), `very_similar` (otherwise).
//!
//! # Pair lifecycle
//! A pair is `detected` when a fetch makes it hold, again `detected` when its level changes, and
//! `retracted` when it stops holding: one of the pages changed and no longer verifies, returned
//! no content (404, 410, 0), left the window by event time, or was evicted by the page budget.
//! A refetch with an unchanged checksum only moves the page in the window. The previous partners
//! of a changed page are verified again whether or not they are still candidates, so a pair that
//! still holds is never retracted and re-detected.

use crate::chunked::Chunked;
use crate::emit::Emitter;
use crate::site;
use crate::sketch::minhash::{MINVALUES, PER_SUPERSHINGLE, SUPERSHINGLES};
use crate::sketch::simhash;
use neardup_schemas::{PairEvent, PairLevel, PairState};
use std::collections::HashMap;
use std::sync::Arc;

mod naming;
mod page;
mod pairs;
mod policy;
mod shards;
mod sites;
mod sketch;
mod split;
#[cfg(test)]
mod tests;
mod window;

pub use naming::*;
use page::*;
use pairs::*;
pub use policy::*;
use shards::*;
use sites::*;
pub use sketch::*;
pub use split::*;
use window::*;

/// Min-value bytes per band.
pub const BAND_ROWS: usize = 3;
/// Bands over the 84 min-values.
pub const BANDS: usize = 14;
/// The first min-value of each band: band `j` lies in supershingle `j % 6`, as its
/// `j / 6`-th run of [`BAND_ROWS`] min-values, so that every supershingle holds at least two
/// whole bands.
pub const BAND_STARTS: [usize; BANDS] = band_starts();

const fn band_starts() -> [usize; BANDS] {
    let mut starts = [0; BANDS];
    let mut j = 0;
    while j < BANDS {
        starts[j] = (j % SUPERSHINGLES) * PER_SUPERSHINGLE + (j / SUPERSHINGLES) * BAND_ROWS;
        j += 1;
    }
    starts
}

const _: () = assert!(BANDS <= SUPERSHINGLES * (PER_SUPERSHINGLE / BAND_ROWS));
const PIECES: usize = simhash::PIECES;
const CHECKSUM_TABLE: u32 = 255;
const PIECE_TABLE_BASE: u32 = 64;
const MAX_KEYS: usize = 1 + BANDS + PIECES;

// Keys that are already well mixed (table keys, slot numbers) are hashed by one multiply
// (`hash.rs`) instead of SipHash, which is built to resist collision attacks on keys an attacker
// chooses. Table keys come from a keyed mix of sketch values, so an attacker would need the mix
// to aim collisions at one bucket, and a bucket's size is capped for candidates anyway.

/// Counters of the index (metrics and summaries).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NearStats {
    /// Pages in the window now.
    pub pages: u64,
    /// Live pairs now.
    pub live_pairs: u64,
    /// Candidates verified.
    pub verified: u64,
    /// Pair detections (including level changes).
    pub detected: u64,
    /// Pair retractions.
    pub retracted: u64,
    /// Pages that left the window by event time.
    pub evicted_by_time: u64,
    /// Pages evicted by the page budget.
    pub evicted_by_budget: u64,
    /// Fetches older than the URL's entry, ignored.
    pub stale: u64,
    /// Hot buckets: band buckets cut to their newest `max_bucket` pages, checksum buckets of
    /// `max_pairs_per_join` pages or more skipped.
    pub hot_buckets_cut: u64,
    /// Band buckets not enumerated because the band is all site boilerplate.
    pub template_bands_skipped: u64,
    /// Pairs retracted by the Hyperlink Map veto (also counted in `retracted`).
    pub vetoed: u64,
}

/// A pair's change of state, for the stages downstream (clusters).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PairChange {
    /// One URL.
    pub a: Arc<str>,
    /// The other URL.
    pub b: Arc<str>,
    /// The pair's level before (`None`: not live).
    pub before: Option<PairLevel>,
    /// The pair's level after (`None`: retracted).
    pub after: Option<PairLevel>,
}

/// One fetch, as the index sees it.
#[derive(Debug, Clone, Copy)]
pub struct Fetch<'a> {
    /// The URL.
    pub url: &'a str,
    /// Its signatures, or `None` when the fetch has no content (404, 410, 0, ...).
    pub sketch: Option<&'a Sketch>,
    /// Event time.
    pub fetched_at_ms: i64,
    /// The crawl round, copied into the pair events this fetch causes.
    pub crawl_id: Option<&'a str>,
}

/// The part of [`NearIndex::memory_parts`] that is not the index proper.
const URL_PART: &str = "URLs";

/// The sliding-window sketch index with its live pairs.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NearIndex {
    cfg: NearConfig,
    /// In chunks: at most half a chunk to spare, and a growth moves one chunk at most.
    pages: Chunked<Option<Page>>,
    /// Which URL is in which slot, fetch times, expiry (empty in a [`Self::follower`]).
    window: Window,
    sites: Sites,
    /// The key tables, split by key ([`KeyShard`]; one unless [`Self::with_key_shards`]).
    shards: Vec<KeyShard>,
    /// Per shard, the keys of the page being filed or dropped.
    #[serde(skip)]
    routed: Vec<ShardKeys>,
    /// Shards answer with whole buckets ([`Self::with_whole_buckets`]).
    #[serde(skip)]
    whole_buckets: bool,
    /// A [`Self::follower`]: steps and answers come from outside.
    following: bool,
    /// Page records held (the window's pages; a follower has no window of its own to count).
    live: u64,
    pairs: HashMap<(u32, u32), PairInfo, crate::hash::StrBuild>,
    partners: Partners,
    stats: NearStats,
    #[serde(skip)]
    scratch: Vec<u32>,
    /// The agreements of a page with its site sample, and their counts.
    #[serde(skip)]
    agreements: Vec<u128>,
    #[serde(skip)]
    scratch_counts: Vec<u32>,
    /// Per slot, its site, dense: sampling a bucket reads the sites without touching page
    /// records.
    slot_sites: Vec<u32>,
    /// The slots seen in the filing under way (cleared at each lookup, so that a filing lists
    /// each candidate once): a bit per slot, and the slots whose bit is set, to clear them. (A
    /// 4-byte sighting number beside each slot's site did the same for 4 bytes per windowed
    /// page instead of one bit.)
    #[serde(skip)]
    seen: Seen,
    #[serde(skip)]
    changes: Vec<PairChange>,
    /// The URLs that left the window since the last [`Self::take_removed`], kept only when
    /// [`Self::track_removed`] asked (a split index stage tells its cluster stage).
    #[serde(skip)]
    removed: Option<Vec<Arc<str>>>,
}

impl NearIndex {
    /// An empty index.
    pub fn new(cfg: NearConfig) -> Self {
        Self::with_key_shards(cfg, 1)
    }

    /// An empty index whose key tables are split over `shards` key shards (at least one),
    /// which it asks by request and answer as a stage partitioned by key would: the pairs are
    /// the same for any number.
    pub fn with_key_shards(cfg: NearConfig, shards: usize) -> Self {
        NearIndex {
            cfg,
            pages: Chunked::default(),
            window: Window::default(),
            sites: Sites::default(),
            shards: (0..shards.max(1)).map(|_| KeyShard::default()).collect(),
            routed: Vec::new(),
            whole_buckets: false,
            following: false,
            live: 0,
            pairs: HashMap::default(),
            partners: Partners::default(),
            stats: NearStats::default(),
            scratch: Vec::new(),
            agreements: Vec::new(),
            scratch_counts: Vec::new(),
            slot_sites: Vec::new(),
            seen: Seen::default(),
            changes: Vec::new(),
            removed: None,
        }
    }

    /// Makes the shards answer a filing with whole buckets instead of the parts the lookup
    /// needs, which must not change any result (a test's reference).
    #[doc(hidden)]
    pub fn with_whole_buckets(mut self) -> Self {
        self.whole_buckets = true;
        self
    }

    /// Rebuilds what a checkpoint leaves out (the URL map) after a restore.
    pub(crate) fn after_restore(&mut self) {
        if self.following {
            // A follower's window stays empty: the sequencer keeps it.
            return;
        }
        let pages = &self.pages;
        self.window
            .restore_urls(pages.len(), |s| pages[s as usize].as_ref().map(|p| &*p.url));
    }

    /// After a restore: gives back the room that reading the arrays left beyond their lengths
    /// (doubling as they grew, up to twice their size: the page records, before they were
    /// chunked, took 394 bytes per page instead of 208 on the medium crawl), and makes the
    /// records' URLs the pool's copies.
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        self.pages.shrink_to_fit();
        self.slot_sites.shrink_to_fit();
        self.window.stamps.shrink_to_fit();
        self.window.free.shrink_to_fit();
        self.window.expiry.shrink_to_fit();
        self.sites.pages.shrink_to_fit();
        self.sites.free.shrink_to_fit();
        for shard in &mut self.shards {
            shard.table.shrink_to_fit();
        }
        self.partners.0.shrink_to_fit();
        for page in self.pages.iter_mut().flatten() {
            pool.share(&mut page.url);
        }
    }

    /// The URLs of the page records.
    #[cfg(test)]
    pub(crate) fn url_copies(&self) -> impl Iterator<Item = &Arc<str>> {
        self.pages.iter().flatten().map(|p| &p.url)
    }

    /// The pair changes since the last call, in the order their events were emitted.
    pub fn take_changes(&mut self) -> std::vec::Drain<'_, PairChange> {
        self.changes.drain(..)
    }

    /// Keeps the URLs that leave the window (evicted, or fetched without content) for
    /// [`Self::take_removed`].
    pub fn track_removed(&mut self) {
        self.removed.get_or_insert_with(Vec::new);
    }

    /// The URLs that left the window since the last call (empty unless tracked).
    pub fn take_removed(&mut self) -> Vec<Arc<str>> {
        self.removed
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The configuration.
    pub fn config(&self) -> &NearConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> NearStats {
        self.window.counted(NearStats {
            pages: self.live,
            live_pairs: self.pairs.len() as u64,
            ..self.stats.clone()
        })
    }

    /// The URLs in the window, with their fetch times (for tests and inspection).
    pub fn window(&self) -> impl Iterator<Item = (&str, i64)> {
        self.pages
            .iter()
            .zip(&self.window.stamps)
            .filter_map(|(p, s)| p.as_ref().map(|p| (&*p.url, s.at_ms)))
    }

    /// The live pairs, as sorted URL pairs with their levels.
    pub fn live_pairs(&self) -> Vec<(String, String, PairLevel)> {
        let mut v: Vec<_> = self
            .pairs
            .iter()
            .map(|(&(a, b), info)| {
                let (ua, ub) = (self.url(a), self.url(b));
                let (ua, ub) = if ua <= ub { (ua, ub) } else { (ub, ua) };
                (ua.to_owned(), ub.to_owned(), info.level)
            })
            .collect();
        v.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
        v
    }

    /// Retracts the live pair (`a`, `b`) because a signal outside the sketches rejects it (the
    /// Hyperlink Map veto); returns whether it was live. Either page fetched again is verified
    /// afresh.
    pub fn veto(&mut self, a: &str, b: &str, crawl_id: Option<&str>, out: &mut Emitter) -> bool {
        let (Some(sa), Some(sb)) = (self.slot_of(a), self.slot_of(b)) else {
            return false;
        };
        let Some(info) = self.pairs.remove(&ordered(sa, sb)) else {
            return false;
        };
        self.unlink(sa, sb);
        self.unlink(sb, sa);
        self.stats.vetoed += 1;
        let (ua, ub) = (self.page(sa).url.clone(), self.page(sb).url.clone());
        self.emit(&ua, &ub, PairState::Retracted, &info, crawl_id, out);
        true
    }

    /// Bytes held by the index and the stored signatures (page records, tables, expiry heap,
    /// pair store), and separately by the URL strings and the URL map.
    pub fn memory_bytes(&self) -> (usize, usize) {
        let parts = self.memory_parts();
        let urls = parts.iter().find(|p| p.0 == URL_PART).map_or(0, |p| p.1);
        (parts.iter().map(|p| p.1).sum::<usize>() - urls, urls)
    }

    /// [`Self::memory_bytes`] part by part, by the index's own accounting (capacities, not
    /// lengths): the page records (signatures, boilerplate mask, URL name), the window's
    /// bookkeeping (fetch stamps, free slots, expiry heap), each slot's site with the names of
    /// the sites held (and the bits of the slots seen), the key tables (their entries, and the
    /// blocks and lists of keys held by several pages), the live pairs and each page's
    /// partners, and the URLs with their map.
    pub fn memory_parts(&self) -> [(&'static str, usize); 8] {
        let by_url = &self.window.by_url;
        let tables = self.shards.iter().map(|s| s.table.bytes());
        [
            (
                "page records",
                self.pages.capacity() * std::mem::size_of::<Option<Page>>(),
            ),
            ("window bookkeeping", self.window.bytes()),
            (
                "slot sites",
                self.slot_sites.capacity() * 4 + self.seen.bytes() + self.sites.bytes(),
            ),
            ("key table entries", tables.clone().map(|t| t.0).sum()),
            ("key table lists", tables.map(|t| t.1).sum()),
            (
                "live pairs",
                self.pairs.capacity() * (std::mem::size_of::<((u32, u32), PairInfo)>() + 1),
            ),
            ("pair partners", self.partners.bytes()),
            (
                URL_PART,
                by_url.bytes()
                    + (self.pages.iter().flatten())
                        .map(|p| p.url.len() + 16)
                        .sum::<usize>(),
            ),
        ]
    }

    /// The sketch the window holds for `url`, as its record keeps it: whole but for the
    /// normalised-text hash, of which it keeps 31 bits (see `Stored`).
    pub fn sketch_of(&self, url: &str) -> Option<Sketch> {
        self.slot_of(url).map(|s| self.page(s).sketch.sketch())
    }

    fn url(&self, slot: u32) -> &str {
        &self.page(slot).url
    }

    /// The slot of `url`, when the window holds it.
    fn slot_of(&self, url: &str) -> Option<u32> {
        self.window.by_url.get(url, |s| self.url(s))
    }

    /// Loads one byte of every cache line the verification reads of the records of `slots`,
    /// before any is used. The index is bound by memory latency (a page's boilerplate sample
    /// and its candidates are records scattered over the window); these loads do not depend on
    /// each other, so the CPU overlaps their misses, which the longer verification loop cannot.
    /// (A prefetch instruction would need `unsafe`, which the workspace forbids.)
    fn touch_records(&self, slots: &[u32]) {
        let mut acc = 0u64;
        for &s in slots {
            if let Some(Some(p)) = self.pages.get(s as usize) {
                // Records are 192 bytes, and where a chunk begins decides where cache lines
                // fall in them: these fields lie less than 64 bytes apart from the first byte
                // verification reads to the last (a test checks it against the layout the
                // compiler chose).
                acc ^= u64::from(p.sketch.simhash[0])
                    ^ u64::from(p.sketch.simhash[11])
                    ^ u64::from(p.sketch.mins[0])
                    ^ u64::from(p.sketch.mins[MINVALUES / 2])
                    ^ u64::from(p.sketch.mins[MINVALUES - 1])
                    ^ u64::from(p.mask.0[0])
                    ^ u64::from(p.name);
            }
        }
        std::hint::black_box(acc);
    }

    fn page(&self, slot: u32) -> &Page {
        self.pages[slot as usize]
            .as_ref()
            .expect("slot of a live page")
    }

    /// Moves the window to `watermark_ms`: every page fetched before `watermark − window` leaves
    /// it, retracting its pairs.
    pub fn advance(&mut self, watermark_ms: i64, crawl_id: Option<&str>, out: &mut Emitter) {
        let mut window = std::mem::take(&mut self.window);
        let window_ms = self.cfg.window_ms;
        window.advance(
            watermark_ms,
            window_ms,
            crawl_id,
            &mut Lockstep { index: self, out },
        );
        self.window = window;
    }

    /// Handles one fetch. A fetch older than the URL's entry, or already outside the window,
    /// is ignored (counted as stale).
    pub fn observe(&mut self, f: &Fetch<'_>, out: &mut Emitter) {
        self.observe_with(f, |u: &str| Arc::from(u), out)
    }

    /// [`Self::observe`], a new page's URL made by `url_of` (the state's
    /// [`crate::intern::UrlPool`], to share it with the other parts).
    pub(crate) fn observe_with(
        &mut self,
        f: &Fetch<'_>,
        url_of: impl FnOnce(&str) -> Arc<str>,
        out: &mut Emitter,
    ) {
        // The window is taken out while it runs, so that the index can carry out its changes.
        let mut window = std::mem::take(&mut self.window);
        let max_pages = self.cfg.max_pages;
        window.observe(f, max_pages, &mut Lockstep { index: self, out }, url_of);
        self.window = window;
    }

    /// The URLs the page budget (`max_pages`) evicted since the last call, oldest first.
    pub fn take_over_budget(&mut self) -> Vec<Arc<str>> {
        self.window.take_over_budget()
    }

    /// Files `url`'s content `sketch` in `slot`, after the URL's previous content leaves
    /// `replaced` (its pairs are verified again), and emits the pair changes (of crawl round
    /// `crawl_id`). `answers` are the key shards' answers to the filing, from outside for a
    /// [`Self::follower`].
    #[allow(clippy::too_many_arguments)]
    fn file(
        &mut self,
        slot: u32,
        replaced: Option<u32>,
        url: Arc<str>,
        sketch: &Sketch,
        crawl_id: Option<&str>,
        answers: Option<&[ShardAnswer]>,
        out: &mut Emitter,
    ) {
        // New or changed content: the old record leaves silently, its pairs are re-verified.
        let mut old: Vec<(u32, Arc<str>, PairInfo)> = Vec::new();
        if let Some(slot) = replaced {
            for partner in self.partners.take(slot) {
                let info = self.pairs.remove(&ordered(slot, partner)).expect("pair");
                self.unlink(partner, slot);
                old.push((partner, self.page(partner).url.clone(), info));
            }
            self.drop_record(slot);
        }
        let mut candidates = self.insert_record(slot, url, sketch, answers);
        self.mature_sample(slot, crawl_id, out);
        for (p, _, _) in &old {
            if self.seen.first(*p) {
                candidates.push(*p);
            }
        }
        self.touch_records(&candidates);
        let mut found: Vec<(Arc<str>, u32, PairInfo)> = Vec::new();
        for &c in &candidates {
            if c == slot {
                continue;
            }
            self.stats.verified += 1;
            if let (cmp, Some(level)) = self.judge(slot, c) {
                let info = self.pair_info(slot, c, level, &cmp);
                found.push((self.page(c).url.clone(), c, info));
            }
        }
        for (_, partner, info) in &found {
            self.pairs.insert(ordered(slot, *partner), *info);
            self.partners.link(slot, *partner);
        }
        // Events in partner-URL order: retractions of pairs that no longer hold, detections of
        // new pairs and of level changes.
        old.sort_by(|x, y| x.1.cmp(&y.1));
        found.sort_by(|x, y| x.0.cmp(&y.0));
        let url: Arc<str> = self.page(slot).url.clone();
        for (partner, purl, info) in &old {
            if !found.iter().any(|(_, p, _)| p == partner) {
                self.emit(&url, purl, PairState::Retracted, info, crawl_id, out);
            }
        }
        for (purl, partner, info) in &found {
            let before = old.iter().find(|(p, _, _)| p == partner).map(|o| o.2.level);
            if before != Some(info.level) {
                self.emit(&url, purl, PairState::Detected, info, crawl_id, out);
                self.changes.push(PairChange {
                    a: url.clone(),
                    b: purl.clone(),
                    before,
                    after: Some(info.level),
                });
            }
        }
    }

    fn emit(
        &mut self,
        a: &Arc<str>,
        b: &Arc<str>,
        state: PairState,
        info: &PairInfo,
        crawl_id: Option<&str>,
        out: &mut Emitter,
    ) {
        match state {
            PairState::Detected => self.stats.detected += 1,
            PairState::Retracted => {
                self.stats.retracted += 1;
                // The pages' own URLs, which the clusters keep (not copies).
                self.changes.push(PairChange {
                    a: Arc::clone(a),
                    b: Arc::clone(b),
                    before: Some(info.level),
                    after: None,
                });
            }
        }
        debug_assert_eq!(info.same_site, site::same_site(a, b), "{a} {b}");
        out.emit(PairEvent::new(
            a.to_string(),
            b.to_string(),
            state,
            info.level,
            info.b,
            info.c,
            Some(info.jaccard()),
            info.same_site,
            out.at().to_owned(),
            crawl_id.map(str::to_owned),
        ));
    }

    /// What a verified pair of the pages in slots `a` and `b` reports.
    fn pair_info(&self, a: u32, b: u32, level: PairLevel, cmp: &Comparison) -> PairInfo {
        PairInfo {
            level,
            b: cmp.b_similarity,
            c: cmp.c_similarity,
            agreeing: cmp.agreeing as u8,
            same_site: self.slot_sites[a as usize] == self.slot_sites[b as usize],
        }
    }

    /// Removes a page and retracts its pairs (in partner-URL order).
    fn remove_page(&mut self, slot: u32, crawl_id: Option<&str>, out: &mut Emitter) {
        let url = self.page(slot).url.clone();
        let mut gone: Vec<(Arc<str>, PairInfo)> = Vec::new();
        for partner in self.partners.take(slot) {
            let info = self.pairs.remove(&ordered(slot, partner)).expect("pair");
            self.unlink(partner, slot);
            gone.push((self.page(partner).url.clone(), info));
        }
        gone.sort_by(|x, y| x.0.cmp(&y.0));
        for (purl, info) in &gone {
            self.emit(&url, purl, PairState::Retracted, info, crawl_id, out);
        }
        if let Some(removed) = &mut self.removed {
            removed.push(url);
        }
        self.drop_record(slot);
    }

    fn unlink(&mut self, from: u32, to: u32) {
        self.partners.unlink(from, to);
    }

    /// How the pages in slots `a` and `b` compare (on one site or two), and the policy's
    /// verdict on them given how their URLs and titles relate.
    fn judge(&self, a: u32, b: u32) -> (Comparison, Option<PairLevel>) {
        let (pa, pb) = (self.page(a), self.page(b));
        let sites = (self.slot_sites[a as usize], self.slot_sites[b as usize]);
        let (ma, mb) = (pa.mask.bits(), pb.mask.bits());
        let cmp = compare_sited(&pa.sketch, ma, &pb.sketch, mb, sites.0 == sites.1);
        let titles = match self.cfg.titles {
            true => (pa.sketch.title(), pb.sketch.title()),
            false => (0, 0),
        };
        let named = Naming::of((pa.name, pb.name), sites, titles);
        (cmp, self.cfg.verdict(&pa.sketch, &pb.sketch, &cmp, named))
    }

    /// Files a page in `slot` and returns its candidates: the pages that share a table key
    /// with it (each once; keys whose bucket is too large skipped), found by the same bucket
    /// lookups that sample the site for its boilerplate mask, in the shards' answers to the
    /// filing: asked here, or given (a [`Self::follower`]).
    fn insert_record(
        &mut self,
        slot: u32,
        url: Arc<str>,
        sketch: &Sketch,
        answers: Option<&[ShardAnswer]>,
    ) -> Vec<u32> {
        let site = self.sites.enter(&url);
        if self.pages.len() <= slot as usize {
            reserve_an_eighth(&mut self.slot_sites);
            self.pages.grow_with(slot as usize + 1, || None);
            self.slot_sites.resize(self.pages.len(), 0);
        }
        self.slot_sites[slot as usize] = site;
        let (keys, n) = keys(self.cfg.policy, sketch);
        let mut candidates = Vec::with_capacity(32);
        let mut answer = Answer::empty();
        let (mask, mature) = match answers {
            Some(answers) => {
                for a in answers {
                    for (position, len, bucket) in &a.buckets {
                        answer.lens[*position as usize] = *len as usize;
                        answer.buckets[*position as usize] = bucket;
                    }
                }
                self.lookup(sketch, site, n, &answer, &mut candidates)
            }
            None => {
                self.route(&keys[..n]);
                // The shards are taken out while the lookup reads their answer.
                let mut shards = std::mem::take(&mut self.shards);
                let limits = self.view_limits();
                for (shard, routed) in shards.iter().zip(&self.routed) {
                    if routed.n > 0 {
                        shard.answer(routed, limits, &mut answer);
                    }
                }
                let found = self.lookup(sketch, site, n, &answer, &mut candidates);
                for (shard, routed) in shards.iter_mut().zip(&self.routed) {
                    if routed.n > 0 {
                        shard.file(slot, routed);
                    }
                }
                self.shards = shards;
                found
            }
        };
        self.live += 1;
        self.pages[slot as usize] = Some(Page {
            sketch: Stored::new(sketch),
            mask: Mask::new(mask, mature),
            name: url_name(&url),
            url,
        });
        candidates
    }

    /// Splits a page's `keys` by shard into `self.routed`.
    fn route(&mut self, keys: &[u32]) {
        let shards = self.shards.len();
        self.routed.clear();
        self.routed
            .extend((0..shards).map(|i| ShardKeys::of(keys, i, shards)));
    }

    /// How much of each bucket the shards answer with.
    fn view_limits(&self) -> ViewLimits {
        match self.whole_buckets {
            false => ViewLimits::of(&self.cfg),
            true => ViewLimits {
                checksum: usize::MAX,
                other: usize::MAX,
            },
        }
    }

    /// Looks up each of a new page's `keys` once: the band buckets sample the page's site for its
    /// boilerplate mask, and the pages found are its candidates (a band bucket of more than
    /// `max_bucket` pages with the new one gives its newest, a checksum bucket of
    /// `max_pairs_per_join` none, and the default policy skips bands wholly on the mask).
    ///
    /// The buckets are the shards' answers to the page's filing, merged by key position: a
    /// band bucket's newest pages (enough for both uses) and its length, a checksum bucket whole
    /// or, when hot, none.
    fn lookup(
        &mut self,
        sketch: &Sketch,
        site: u32,
        n: usize,
        answer: &Answer<'_>,
        candidates: &mut Vec<u32>,
    ) -> (u128, bool) {
        let (lens, buckets) = (&answer.lens, &answer.buckets);
        // Each candidate once, among those of this filing.
        self.seen.clear();
        let sampling = sketch.has_terms && self.cfg.policy.uses_bands();
        let mut sample = std::mem::take(&mut self.scratch);
        sample.clear();
        let per_bucket = 4 * self.cfg.boilerplate_sample;
        // Keys after the checksum are the bands when sampling.
        if sampling {
            for &bucket in &buckets[1..n] {
                if sample.len() >= self.cfg.boilerplate_sample {
                    break;
                }
                for &c in bucket.iter().rev().take(per_bucket) {
                    if self.slot_sites[c as usize] == site && !sample.contains(&c) {
                        sample.push(c);
                        if sample.len() >= self.cfg.boilerplate_sample {
                            break;
                        }
                    }
                }
            }
        }
        let mut mask = 0u128;
        // Twice the threshold, so that a position needs half of the smallest sample, not all.
        let enough = |n: usize| sampling && n >= 2 * self.cfg.boilerplate_min;
        let mut mature = enough(sample.len());
        if mature {
            self.touch_records(&sample);
            let mut agreements = std::mem::take(&mut self.agreements);
            agreements.clear();
            agreements.extend(
                (sample.iter()).map(|&c| agreement(&self.page(c).sketch.mins, &sketch.mins)),
            );
            let cut = copy_cut(&agreements, &mut self.scratch_counts);
            let mut counts = Counts::default();
            let mut counted = 0;
            for &a in agreements.iter().filter(|a| a.count_ones() < cut) {
                counts.add(a);
                counted += 1;
            }
            mature = enough(counted);
            if mature {
                mask = counts.at_least(self.cfg.boilerplate_min) & ((1u128 << MINVALUES) - 1);
            }
            self.agreements = agreements;
        }
        // A band made only of the site's boilerplate positions is shared with the site's
        // template, not with a copy of the page's content: its bucket is not enumerated, unless
        // every band is boilerplate (default policy only: the papers' algorithms stay as
        // published, every shared band a candidate).
        let template_band = |j: usize| {
            let band = ((1u128 << BAND_ROWS) - 1) << BAND_STARTS[j];
            mask & band == band
        };
        let skip_template =
            self.cfg.policy == Policy::Neardup && sampling && (0..BANDS).any(|j| !template_band(j));
        for (i, &bucket) in buckets[..n].iter().enumerate() {
            if i > 0 && skip_template && template_band(i - 1) {
                self.stats.template_bands_skipped += 1;
                continue;
            }
            let limit = if i == 0 {
                self.cfg.max_pairs_per_join
            } else {
                self.cfg.max_bucket
            };
            // Counted with the new page, which is not filed yet. A hot band bucket gives its
            // newest pages (buckets list pages oldest first), a hot checksum bucket none.
            let bucket = if lens[i] < limit {
                bucket
            } else {
                self.stats.hot_buckets_cut += 1;
                if i == 0 {
                    &[]
                } else {
                    &bucket[bucket.len() + 1 - limit..]
                }
            };
            for &c in bucket {
                if self.seen.first(c) {
                    candidates.push(c);
                }
            }
        }
        self.scratch = sample;
        (mask, mature)
    }

    /// Removes a page's record and table entries (its pairs must be gone already).
    fn drop_record(&mut self, slot: u32) {
        let page = self.pages[slot as usize].take().expect("live page");
        self.live -= 1;
        self.sites.leave(&page.url, self.slot_sites[slot as usize]);
        if self.following {
            return;
        }
        let (keys, n) = keys(self.cfg.policy, &page.sketch);
        self.route(&keys[..n]);
        for (shard, routed) in self.shards.iter_mut().zip(&self.routed) {
            if routed.n > 0 {
                shard.drop(slot, routed);
            }
        }
    }

    /// The first pages of a site are filed before the site has enough pages to tell its
    /// boilerplate, so their pairs were judged without discounting. When a later page of the
    /// site gets a mature mask from a sample, every immature page of that sample takes the
    /// boilerplate positions it shares with the new page, and its pairs are verified again:
    /// those that no longer hold are retracted (so the answer does not depend on which pages of
    /// a site happened to come first, beyond this one catch-up).
    fn mature_sample(&mut self, slot: u32, crawl_id: Option<&str>, out: &mut Emitter) {
        let (mask, mature) = {
            let m = self.page(slot).mask;
            (m.bits(), m.mature())
        };
        if !mature || mask == 0 {
            return;
        }
        let sample = std::mem::take(&mut self.scratch);
        for &s in &sample {
            let (sk_new, p) = (&self.page(slot).sketch, self.page(s));
            if p.mask.mature() {
                continue;
            }
            let shared = agreement(&p.sketch.mins, &sk_new.mins);
            let page = self.pages[s as usize].as_mut().expect("live page");
            page.mask = Mask::new(page.mask.bits() | mask & shared, true);
            self.reverify(s, crawl_id, out);
        }
        self.scratch = sample;
    }

    /// Verifies every pair of `slot` again, retracting those that no longer hold and
    /// re-detecting those whose level changed.
    fn reverify(&mut self, slot: u32, crawl_id: Option<&str>, out: &mut Emitter) {
        let mut partners = self.partners.of(slot).to_vec();
        partners.sort_by(|x, y| self.url(*x).cmp(self.url(*y)));
        let url = self.page(slot).url.clone();
        for partner in partners {
            let (cmp, verdict) = self.judge(slot, partner);
            let purl = self.page(partner).url.clone();
            let key = ordered(slot, partner);
            let info = self.pairs[&key];
            match verdict {
                None => {
                    self.pairs.remove(&key);
                    self.unlink(slot, partner);
                    self.unlink(partner, slot);
                    self.emit(&url, &purl, PairState::Retracted, &info, crawl_id, out);
                }
                Some(level) if level != info.level => {
                    let info = self.pair_info(slot, partner, level, &cmp);
                    let before = self.pairs.insert(key, info).map(|i| i.level);
                    self.emit(&url, &purl, PairState::Detected, &info, crawl_id, out);
                    self.changes.push(PairChange {
                        a: url.clone(),
                        b: purl.clone(),
                        before,
                        after: Some(level),
                    });
                }
                Some(_) => {}
            }
        }
    }
}

/// The index carrying out its own window's changes, asking its own shards.
struct Lockstep<'a> {
    index: &'a mut NearIndex,
    out: &'a mut Emitter,
}

impl WindowHost for Lockstep<'_> {
    fn url(&self, slot: u32) -> &str {
        self.index.url(slot)
    }

    fn holds(&self, slot: u32, sketch: &Sketch) -> bool {
        self.index.page(slot).sketch == Stored::new(sketch)
    }

    fn change(&mut self, change: Change<'_>) {
        match change {
            Change::Removed { slot, crawl_id } => self.index.remove_page(slot, crawl_id, self.out),
            Change::Filed {
                slot,
                replaced,
                url,
                fetch,
            } => {
                let sketch = fetch.sketch.expect("a filed fetch has content");
                let crawl_id = fetch.crawl_id;
                self.index
                    .file(slot, replaced, url, sketch, crawl_id, None, self.out)
            }
        }
    }
}

/// Makes room for one more element of a per-slot vector, growing it by an eighth rather than
/// doubling it: these vectors hold most of the index's bytes, and doubling would leave up to
/// half of them unused (a new slot is taken only when no freed one is left).
fn reserve_an_eighth<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.capacity() / 8).max(64));
    }
}

/// Min-values a sampled page must agree on with the page being filed to count as its copy at
/// least: nine in ten, a Jaccard similarity of about 0.9.
const COPY_AGREEMENT: u32 = (MINVALUES as u32 * 9).div_ceil(10);

/// The agreement (in min-values) from which a sampled page counts as a copy of the page being
/// filed, not as a page of its site, and is left out of the boilerplate counts. A page's
/// boilerplate is what it shares with many pages of its site, and its copies on the site
/// (versions of one document, variants of one product) share its content too: counted, eight
/// copies in a sample made the content look like the site's template, and the page and its
/// copies lost their pairs. A copy agrees on [`COPY_AGREEMENT`] or more, and on more than
/// halfway from the sample's lower quartile to full agreement: where the site's pages agree on
/// nearly everything (records of a database, pages that are all template), they are its
/// template's evidence, not copies, and the quartile, one of them, keeps most of them counted.
/// If the pages left are too few for a mature sample, the page takes no mask yet (and takes one
/// later, from the sample of a page of its site that has one, see [`NearIndex::mature_sample`]).
fn copy_cut(agreements: &[u128], counts: &mut Vec<u32>) -> u32 {
    counts.clear();
    counts.extend(agreements.iter().map(|a| a.count_ones()));
    counts.sort_unstable();
    let quartile = counts.get(counts.len() / 4).copied().unwrap_or(0);
    let full = MINVALUES as u32;
    (quartile + full)
        .div_ceil(2)
        .max(quartile + 1)
        .max(COPY_AGREEMENT)
}

/// Every table key of a page under `policy`: the checksum, then the bands or the pieces.
fn keys(policy: Policy, sketch: &impl Signatures) -> ([u32; MAX_KEYS], usize) {
    let mut out = [0u32; MAX_KEYS];
    out[0] = key32(CHECKSUM_TABLE, sketch.checksum());
    let mut n = 1;
    if sketch.has_terms() && policy.uses_bands() {
        for j in 0..BANDS {
            out[n] = band_key(sketch.mins(), j);
            n += 1;
        }
    }
    if sketch.has_terms() && policy.uses_pieces() {
        let simhash = sketch.simhash();
        for j in 0..PIECES {
            out[n] = piece_key(&simhash, j);
            n += 1;
        }
    }
    (out, n)
}

fn ordered(a: u32, b: u32) -> (u32, u32) {
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}
