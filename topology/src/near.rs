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
//! - **bands**: 21 bands of 4 consecutive min-value bytes (the band key is the 4 bytes, mixed
//!   with the band number). Any B-similar pair (>= 2 agreeing supershingles of 14 min-values)
//!   agrees on at least 3 whole bands inside each agreeing supershingle, so the band tables find
//!   every pair FMN's 15 megashingle tables find, and also pairs down to Jaccard ~0.6 (a pair of
//!   Jaccard J shares a band with probability 1 − (1 − J⁴)²¹: 0.95 at J = 0.6, 0.997 at 0.7).
//! - **pieces**: Henzinger's 12 simhash pieces of 32 bits (Alg. C and the combined policy).
//! - **checksum**: the content checksum, so exact duplicates are always candidates.
//!
//! 32-bit keys may collide; a collision only adds a candidate, which verification rejects. A
//! band bucket with more than `max_bucket` pages gives only its newest `max_bucket − 1` as
//! candidates: such a key is shared by a template or by a large group of copies (190 parked
//! domains serving one page), so the work per page stays bounded and each page still pairs with
//! the copies filed just before it. A checksum bucket of `max_pairs_per_join` pages or more gives
//! none (the exact index reports such groups). The default policy also skips the buckets of bands
//! that lie wholly on the page's site boilerplate (below). The multimap ([`crate::multimap`])
//! keeps a key's page in an 8-byte entry of a flat table, or its pages in a list.
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
//! index. These parts are not wired as stages over Kafka yet.
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
//! and is marked in the page's mask. The default policy estimates Jaccard on the positions
//! neither page marks: copies of one document still agree there, while template pages that
//! differ in their main item now disagree almost everywhere. A band whose four positions are all
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

use crate::emit::Emitter;
use crate::multimap::MultiMap;
use crate::site;
use crate::sketch::minhash::{BSketch, MINVALUES, PER_SUPERSHINGLE, SUPERSHINGLES};
use crate::sketch::simhash::{self, SimHash};
use neardup_schemas::{PairEvent, PairLevel, PairState};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// Min-value bytes per band.
pub const BAND_ROWS: usize = 4;
/// Bands over the 84 min-values.
pub const BANDS: usize = MINVALUES / BAND_ROWS;
const PIECES: usize = simhash::PIECES;
/// Alg. B (FMN): a pair is B-similar when at least this many supershingles agree.
const B_SIMILAR: u8 = 2;
/// Alg. C (Henzinger): the C-similarity a pair needs alone.
const ALG_C_MIN: u16 = 372;
/// Henzinger's combined algorithm: the C-similarity a B-similar pair needs.
const COMBINED_MIN_C: u16 = 355;
const CHECKSUM_TABLE: u32 = 255;
const PIECE_TABLE_BASE: u32 = 64;
const MAX_KEYS: usize = 1 + BANDS + PIECES;

/// Which pairs count as near-duplicates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Policy {
    /// Alg. B alone: >= 2 of 6 supershingles.
    AlgB,
    /// Alg. C alone: >= 372 of 384 simhash bits.
    AlgC,
    /// Henzinger's combined algorithm: B-similar and C-similarity >= 355.
    Combined,
    /// neardup's default: discounted Jaccard with per-site boilerplate discounting.
    Neardup,
}

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 4] = [
        Policy::AlgB,
        Policy::AlgC,
        Policy::Combined,
        Policy::Neardup,
    ];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::AlgB => "b",
            Policy::AlgC => "c",
            Policy::Combined => "combined",
            Policy::Neardup => "neardup",
        }
    }

    /// Parses a configuration name.
    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }

    fn uses_bands(self) -> bool {
        self != Policy::AlgC
    }

    fn uses_pieces(self) -> bool {
        self == Policy::AlgC
    }
}

/// Parameters of the index and the policy.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NearConfig {
    /// The verification policy.
    pub policy: Policy,
    /// How long a fetch stays in the window (event time, milliseconds).
    pub window_ms: i64,
    /// At most this many pages in the window; beyond it the oldest fetch is evicted.
    pub max_pages: usize,
    /// Band buckets with more pages than this give only their newest `max_bucket − 1` pages
    /// (with the new one, `max_bucket`) as candidates.
    pub max_bucket: usize,
    /// A page joining an exact group of this many pages or more gets no exact candidates.
    pub max_pairs_per_join: usize,
    /// Default policy: minimum discounted Jaccard for pages whose URLs end in the same name.
    pub min_jaccard: f64,
    /// Default policy: minimum discounted Jaccard for pages whose URLs end in different names.
    pub min_jaccard_renamed: f64,
    /// Default policy: minimum discounted Jaccard for pages of one site whose URLs end in
    /// different names. A site's own pages share its template and often its subject (the
    /// member lists of two classes, two releases' notes), and seed 001 found most false
    /// positives among same-site pairs; a site rarely serves one document under two names.
    pub min_jaccard_renamed_on_site: f64,
    /// Default policy: minimum discounted Jaccard for pages whose titles differ (both pages
    /// have one) and whose URLs end in different names or are on one site (or the threshold
    /// of their names alone, if higher). The name and the title are a page's two statements
    /// of which document it is; when both differ, only near-identical text overrules them
    /// (API pages of two classes whose shared members are most of their text, on two mirrors
    /// of one manual). On one site the URL's path tells documents apart even under one name
    /// (`nfs/index.html`, `spufs/index.html`), so a different title is enough. Across sites
    /// under one name it is not: a parked domain's page names its own domain in its title.
    pub min_jaccard_retitled: f64,
    /// Default policy: compare the pages' titles at all (false: pages are judged by their URLs
    /// alone, as if neither had a title).
    pub titles: bool,
    /// Default policy: minimum undiscounted min-value positions to judge on; with fewer, but at
    /// least half as many, every one of them must agree, and only a pair held to the base
    /// threshold (`min_jaccard`: one name, one title) may be judged so.
    pub min_support: u32,
    /// Default policy: minimum C-similarity.
    pub min_c_similarity: u16,
    /// Site pages sampled to find boilerplate positions.
    pub boilerplate_sample: usize,
    /// A position is boilerplate when its value recurs in this many sampled site pages.
    pub boilerplate_min: usize,
}

impl Default for NearConfig {
    fn default() -> Self {
        NearConfig {
            policy: Policy::Neardup,
            window_ms: 14 * 24 * 3600 * 1000,
            max_pages: 4_000_000,
            max_bucket: 128,
            max_pairs_per_join: 1000,
            min_jaccard: 0.7,
            min_jaccard_renamed: 0.9,
            min_jaccard_renamed_on_site: 0.98,
            min_jaccard_retitled: 0.98,
            titles: true,
            min_support: 12,
            min_c_similarity: 330,
            boilerplate_sample: 32,
            boilerplate_min: 8,
        }
    }
}

/// What the index keeps of a page's signatures.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sketch {
    /// One byte per min-value.
    #[serde(with = "crate::fixed::bytes")]
    pub mins: [u8; MINVALUES],
    /// The top 16 bits of each supershingle.
    #[serde(with = "crate::fixed::le")]
    pub ss: [u16; SUPERSHINGLES],
    /// The 384-bit simhash.
    #[serde(with = "crate::fixed::le")]
    pub simhash: [u64; 6],
    /// 64 bits of the content checksum.
    #[serde(with = "postcard::fixint::le")]
    pub checksum: u64,
    /// 64 bits of the normalised-text hash.
    #[serde(with = "postcard::fixint::le")]
    pub text: u64,
    /// The title's hash ([`crate::text::title_hash`]; 0: none).
    pub title: u32,
    /// False for a page without terms: it only takes part in exact pairs.
    pub has_terms: bool,
}

impl Sketch {
    /// The compact form of a page's signatures.
    pub fn new(checksum: u128, text_hash: u128, title: u32, b: &BSketch, c: &SimHash) -> Sketch {
        let mut mins = [0u8; MINVALUES];
        for (m, v) in mins.iter_mut().zip(&b.minvalues) {
            *m = min_byte(*v);
        }
        let mut ss = [0u16; SUPERSHINGLES];
        for (s, v) in ss.iter_mut().zip(&b.supershingles) {
            *s = (v >> 48) as u16;
        }
        Sketch {
            mins,
            ss,
            simhash: c.0,
            checksum: checksum as u64,
            text: text_hash as u64,
            title,
            has_terms: b.shingles > 0,
        }
    }
}

/// The byte kept of a 64-bit min-value: the top byte of a multiplicative mix, so every bit of
/// the min-value takes part (a min-value's own top bits are nearly fixed by its bin).
pub fn min_byte(v: u64) -> u8 {
    (mix64(v) >> 56) as u8
}

fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn key32(table: u32, value: u64) -> u32 {
    (mix64(value ^ (u64::from(table) << 56) ^ u64::from(table).wrapping_mul(0x9e37_79b9)) >> 32)
        as u32
}

/// The band key of band `j`.
fn band_key(mins: &[u8; MINVALUES], j: usize) -> u32 {
    let v = u32::from_le_bytes([
        mins[j * BAND_ROWS],
        mins[j * BAND_ROWS + 1],
        mins[j * BAND_ROWS + 2],
        mins[j * BAND_ROWS + 3],
    ]);
    key32(j as u32, u64::from(v))
}

fn piece_key(sim: &[u64; 6], j: usize) -> u32 {
    let piece = (sim[j / 2] >> (32 * (j % 2))) as u32;
    key32(PIECE_TABLE_BASE + j as u32, u64::from(piece))
}

/// How two sketches compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Agreeing supershingles, 0..=6.
    pub b_similarity: u8,
    /// Agreeing simhash bits, 0..=384.
    pub c_similarity: u16,
    /// Agreeing min-value bytes, 0..=84.
    pub agreeing: u32,
    /// Estimated shingle Jaccard (corrected for random byte matches).
    pub jaccard: f64,
    /// Positions neither page marks as boilerplate.
    pub support: u32,
    /// Estimated Jaccard on those positions.
    pub discounted_jaccard: f64,
    /// Agreeing positions among those.
    pub kept_agreeing: u32,
    /// Equal content checksums.
    pub exact: bool,
    /// Equal normalised text.
    pub same_text: bool,
}

/// The b-bit estimate: (matches − 1/256) / (1 − 1/256), clamped to [0, 1].
fn bbit_estimate(agree: u32, of: u32) -> f64 {
    if of == 0 {
        return 0.0;
    }
    let r = 1.0 / 256.0;
    ((f64::from(agree) / f64::from(of) - r) / (1.0 - r)).clamp(0.0, 1.0)
}

/// Bit i set when `a[i] == b[i]`, eight bytes at a time (SWAR: a byte of `a ^ b` is zero
/// exactly when its high bit stays clear after adding 0x7f to its low seven bits and or-ing).
pub fn agreement(a: &[u8; MINVALUES], b: &[u8; MINVALUES]) -> u128 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Gathers the eight high bits of a word into one byte, byte 0 lowest.
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let mut bits = 0u128;
    let mut i = 0;
    while i + 8 <= MINVALUES {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let t = x ^ y;
        let nonzero = ((t & LOW7).wrapping_add(LOW7) | t) & HIGH;
        let equal = !nonzero & HIGH;
        let byte = ((equal >> 7).wrapping_mul(GATHER) >> 56) as u8;
        bits |= u128::from(byte) << i;
        i += 8;
    }
    while i < MINVALUES {
        bits |= u128::from(a[i] == b[i]) << i;
        i += 1;
    }
    bits
}

/// Compares two pages' sketches and boilerplate masks, the pages on two sites: a position that
/// is boilerplate for either page does not count (each site's template is absent from the
/// other's copy of a page).
pub fn compare(a: &Sketch, mask_a: u128, b: &Sketch, mask_b: u128) -> Comparison {
    compare_sited(a, mask_a, b, mask_b, false)
}

/// Compares two pages' sketches and boilerplate masks; `one_site` when both are pages of one
/// site. The pages of one site share its template, so there a position does not count only
/// when both pages show a template value in it (the same one, or two); where one page shows a
/// template value and the other a value of its own, the second page has a shingle the first
/// lacks (or lacks a template shingle the first has): a real difference, which dropping the
/// position would hide. Across sites the templates differ, so a copy shows its own site's
/// template where the original shows the other's, and every such position is dropped.
pub fn compare_sited(
    a: &Sketch,
    mask_a: u128,
    b: &Sketch,
    mask_b: u128,
    one_site: bool,
) -> Comparison {
    let agree_bits = agreement(&a.mins, &b.mins);
    let agreeing = agree_bits.count_ones();
    let mut b_similarity = 0u8;
    for s in 0..SUPERSHINGLES {
        let group = ((1u128 << PER_SUPERSHINGLE) - 1) << (s * PER_SUPERSHINGLE);
        if a.ss[s] == b.ss[s] && agree_bits & group == group {
            b_similarity += 1;
        }
    }
    let differ: u32 = a
        .simhash
        .iter()
        .zip(&b.simhash)
        .map(|(x, y)| (x ^ y).count_ones())
        .sum();
    let all = (1u128 << MINVALUES) - 1;
    let dropped = if one_site {
        (mask_a & mask_b) | (agree_bits & (mask_a | mask_b))
    } else {
        mask_a | mask_b
    };
    let kept = all & !dropped;
    let support = kept.count_ones();
    Comparison {
        b_similarity,
        c_similarity: (simhash::BITS as u32 - differ) as u16,
        agreeing,
        jaccard: bbit_estimate(agreeing, MINVALUES as u32),
        support,
        discounted_jaccard: bbit_estimate((agree_bits & kept).count_ones(), support),
        kept_agreeing: (agree_bits & kept).count_ones(),
        exact: a.checksum == b.checksum,
        same_text: a.text == b.text,
    }
}

/// The similarities at which [`NearConfig::describe`] gives the band S-curve.
pub const CURVE_POINTS: [f64; 5] = [0.5, 0.6, 0.7, 0.8, 0.9];

/// The probability that two pages of Jaccard similarity `j` share at least one of the
/// [`BANDS`] bands, and so become a candidate pair: a min-value byte agrees with probability
/// `j + (1 − j)/256` (its min-values agree, or their kept bytes do by chance), a band when its
/// [`BAND_ROWS`] bytes do. Before the hot-bucket cut and the skipped boilerplate bands, which
/// only the crawl decides.
pub fn band_candidate_probability(j: f64) -> f64 {
    let byte = j + (1.0 - j) / 256.0;
    1.0 - (1.0 - byte.powi(BAND_ROWS as i32)).powi(BANDS as i32)
}

impl NearConfig {
    /// The policy's verdict on a comparison: the pair's level, or `None` if it is no pair.
    /// `naming`: how the two URLs relate (see [`url_name`]).
    pub fn verdict(
        &self,
        a: &Sketch,
        b: &Sketch,
        c: &Comparison,
        naming: Naming,
    ) -> Option<PairLevel> {
        if c.exact {
            return Some(PairLevel::Exact);
        }
        if !a.has_terms || !b.has_terms {
            return None;
        }
        let holds = match self.policy {
            Policy::AlgB => c.b_similarity >= B_SIMILAR,
            Policy::AlgC => c.c_similarity >= ALG_C_MIN,
            Policy::Combined => c.b_similarity >= B_SIMILAR && c.c_similarity >= COMBINED_MIN_C,
            Policy::Neardup => {
                let min_jaccard = self.min_jaccard_for(naming);
                // A few positions, all agreeing, vouch for the base threshold only: n of n
                // agree by chance with probability J^n, so 6 to 11 unanimous positions put J
                // above 0.61-0.76 (95 % one-sided) and cannot show the 0.9 or 0.98 a renamed
                // or retitled pair needs (a pair at J = 0.8 passes 6 of 6 one time in four).
                let few_suffice = min_jaccard <= self.min_jaccard;
                c.same_text
                    || ((c.support >= self.min_support
                        || (few_suffice
                            && 2 * c.support >= self.min_support
                            && c.kept_agreeing == c.support))
                        && c.discounted_jaccard >= min_jaccard
                        && c.c_similarity >= self.min_c_similarity)
            }
        };
        holds.then_some(if c.b_similarity == SUPERSHINGLES as u8 {
            PairLevel::VirtuallyIdentical
        } else {
            PairLevel::VerySimilar
        })
    }

    /// The policy's thresholds and how candidates are found, in one line, for the log at
    /// start-up: what a pair must reach to be reported, and, for the policies that search the
    /// band tables, the S-curve of [`band_candidate_probability`].
    pub fn describe(&self) -> String {
        let bands = || {
            let curve: Vec<String> = CURVE_POINTS
                .iter()
                .map(|&j| format!("{j}: {:.3}", band_candidate_probability(j)))
                .collect();
            format!(
                "candidates from {BANDS} bands of {BAND_ROWS} min-values and equal checksums; a pair of Jaccard similarity J shares a band with probability {}",
                curve.join(", ")
            )
        };
        const BITS: usize = simhash::BITS;
        let pieces = format!(
            "candidates from {PIECES} simhash pieces of {} bits and equal checksums: every pair differing in at most {} bits shares a piece",
            BITS / PIECES,
            PIECES - 1
        );
        match self.policy {
            Policy::AlgB => format!(
                "pair policy b (Alg. B): a pair holds with >= {B_SIMILAR} of {SUPERSHINGLES} supershingles agreeing; {}",
                bands()
            ),
            Policy::AlgC => format!(
                "pair policy c (Alg. C): a pair holds with >= {ALG_C_MIN} of {BITS} simhash bits agreeing; {pieces}"
            ),
            Policy::Combined => format!(
                "pair policy combined: a pair holds with >= {B_SIMILAR} of {SUPERSHINGLES} supershingles and >= {COMBINED_MIN_C} of {BITS} simhash bits agreeing; {}",
                bands()
            ),
            Policy::Neardup => format!(
                "pair policy neardup: a pair holds with equal normalised text, or a Jaccard similarity without the sites' boilerplate of >= {} (URLs ending in different names: {}; different names on one site: {}; different titles: {}{}) on >= {} min-values, and >= {} of {BITS} simhash bits agreeing; {}",
                self.min_jaccard,
                self.min_jaccard_renamed,
                self.min_jaccard_renamed_on_site,
                self.min_jaccard_retitled,
                if self.titles { "" } else { ", titles not compared" },
                self.min_support,
                self.min_c_similarity,
                bands()
            ),
        }
    }

    /// The default policy's minimum discounted Jaccard for pages related as `naming`.
    fn min_jaccard_for(&self, naming: Naming) -> f64 {
        match naming {
            Naming::SameName => self.min_jaccard,
            Naming::Renamed => self.min_jaccard_renamed,
            Naming::RenamedOnSite => self.min_jaccard_renamed_on_site,
            // A different title never makes a pair easier than its names alone.
            Naming::Retitled {
                same_name,
                one_site,
            } => self
                .min_jaccard_for(Naming::by_names(same_name, one_site))
                .max(self.min_jaccard_retitled),
        }
    }
}

/// How the URLs of a compared pair relate, for the default policy's thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// They end in the same name (see [`url_name`]).
    SameName,
    /// Different names, different sites.
    Renamed,
    /// Different names on one site.
    RenamedOnSite,
    /// Different titles, and different names or one site: held to the stricter of
    /// `min_jaccard_retitled` and the threshold of the names alone.
    Retitled {
        /// The URLs end in the same name.
        same_name: bool,
        /// Both pages are on one site.
        one_site: bool,
    },
}

impl Naming {
    /// The relation of two pages from their [`url_name`]s, site numbers and title hashes
    /// ([`Sketch::title`]; 0 for a page without a title, which never counts as a different
    /// title).
    pub fn of(names: (u32, u32), sites: (u32, u32), titles: (u32, u32)) -> Naming {
        let same = same_name(names.0, names.1);
        let one_site = sites.0 == sites.1;
        let retitled = titles.0 != 0 && titles.1 != 0 && titles.0 != titles.1;
        if retitled && (one_site || !same) {
            Naming::Retitled {
                same_name: same,
                one_site,
            }
        } else {
            Naming::by_names(same, one_site)
        }
    }

    /// The relation of two pages by their URLs alone.
    fn by_names(same_name: bool, one_site: bool) -> Naming {
        match (same_name, one_site) {
            (true, _) => Naming::SameName,
            (false, true) => Naming::RenamedOnSite,
            (false, false) => Naming::Renamed,
        }
    }
}

/// The name a URL ends in, hashed: its last path segment with its query (not the fragment);
/// `0` for a directory or an `index.*` page without a query (which match any name, as a
/// directory URL serves its index). The query is part of the name: `item.php?id=1` and
/// `item.php?id=2` are two documents of one template, and a copy that differs only in a
/// session id (`x.html?sid=...`) is identical text, which is a pair under any name.
pub fn url_name(url: &str) -> u32 {
    let rest = site::after_scheme(url);
    let path = &rest[..rest
        .bytes()
        .position(|b| b == b'?' || b == b'#')
        .unwrap_or(rest.len())];
    let last = match path.bytes().position(|b| b == b'/') {
        Some(slash) => {
            let p = &path[slash + 1..];
            &p[p.bytes().rposition(|b| b == b'/').map_or(0, |i| i + 1)..]
        }
        None => "",
    };
    let after = &rest[path.len()..];
    let query = match after.strip_prefix('?') {
        Some(q) => &q[..q.find('#').unwrap_or(q.len())],
        None => "",
    };
    if query.is_empty() && (last.is_empty() || last.starts_with("index.")) {
        return 0;
    }
    let mut h = xxhash_rust::xxh3::xxh3_64(last.as_bytes());
    if !query.is_empty() {
        h ^= xxhash_rust::xxh3::xxh3_64(query.as_bytes()).rotate_left(17);
    }
    (h as u32).max(1)
}

fn same_name(a: u32, b: u32) -> bool {
    a == 0 || b == 0 || a == b
}

// Keys that are already well mixed (table keys, slot numbers) are hashed by one multiply
// (`hash.rs`) instead of SipHash, which is built to resist collision attacks on keys an attacker
// chooses. Table keys come from a keyed mix of sketch values, so an attacker would need the mix
// to aim collisions at one bucket, and a bucket's size is capped for candidates anyway.

// ------------------------------------------------------------------------------------------
// Key shards
// ------------------------------------------------------------------------------------------

/// The shard that holds `key` among `shards`. Keys are mixed hashes, so a multiply-shift
/// spreads them evenly.
fn shard_of(key: u32, shards: usize) -> usize {
    ((u64::from(key) * shards as u64) >> 32) as usize
}

/// A page's keys that one shard holds, with their positions in the page's key list (0 the
/// checksum, then the bands or pieces).
#[derive(Debug, Clone, Copy)]
struct ShardKeys {
    positions: [u8; MAX_KEYS],
    keys: [u32; MAX_KEYS],
    n: usize,
}

impl ShardKeys {
    /// The keys of `keys` that shard `index` of `of` holds.
    fn of(keys: &[u32], index: usize, of: usize) -> ShardKeys {
        let mut out = ShardKeys {
            positions: [0; MAX_KEYS],
            keys: [0; MAX_KEYS],
            n: 0,
        };
        for (position, &k) in keys.iter().enumerate() {
            if shard_of(k, of) == index {
                out.positions[out.n] = position as u8;
                out.keys[out.n] = k;
                out.n += 1;
            }
        }
        out
    }
}

/// How much of a bucket a filing's answer carries: the lookup needs a band or piece bucket's
/// newest `max_bucket − 1` pages (its candidates when the bucket is hot) and newest
/// `4 · boilerplate_sample` (where it samples the site), and a checksum bucket whole unless it
/// has `max_pairs_per_join` pages or more (then none).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct ViewLimits {
    checksum: usize,
    other: usize,
}

impl ViewLimits {
    fn of(cfg: &NearConfig) -> ViewLimits {
        ViewLimits {
            checksum: cfg.max_pairs_per_join,
            other: cfg
                .max_bucket
                .saturating_sub(1)
                .max(4 * cfg.boilerplate_sample),
        }
    }
}

/// A filing's answer, merged over the shards by key position: each bucket's length before the
/// filing and its pages that the lookup needs (the newest, oldest first).
struct Answer<'a> {
    lens: [usize; MAX_KEYS],
    buckets: [&'a [u32]; MAX_KEYS],
}

impl Answer<'_> {
    fn empty() -> Self {
        Answer {
            lens: [0; MAX_KEYS],
            buckets: [&[][..]; MAX_KEYS],
        }
    }
}

/// One part of the key tables, split by key (DESIGN.md §3: the index partitioned by sketch
/// key). A shard knows pages only by slot. To file a page, the index asks each shard for its
/// part of the answer (what the page's lookup needs of each of its buckets), then has it file
/// the page under its keys; it asks shards to drop a page the same way. Every key lives in
/// exactly one shard and a bucket lists its pages in filing order (removals keep the order), so
/// the merged answers are the same for any number of shards. In one process an answer borrows
/// the buckets; a shard in another process would send the same pages.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct KeyShard {
    table: MultiMap,
}

impl KeyShard {
    /// Writes this shard's part of a filing's answer for `keys` into `answer`.
    fn answer<'a>(&'a self, keys: &ShardKeys, limits: ViewLimits, answer: &mut Answer<'a>) {
        let buckets: [&[u32]; MAX_KEYS] = self.table.get_all(&keys.keys[..keys.n]);
        for (&position, bucket) in keys.positions[..keys.n].iter().zip(buckets) {
            let len = bucket.len();
            let keep = match position {
                0 if len < limits.checksum => len,
                0 => 0,
                _ => len.min(limits.other),
            };
            answer.lens[position as usize] = len;
            answer.buckets[position as usize] = &bucket[len - keep..];
        }
    }

    /// Files `slot` under `keys`.
    fn file(&mut self, slot: u32, keys: &ShardKeys) {
        for &k in &keys.keys[..keys.n] {
            self.table.insert(k, slot);
        }
    }

    /// Removes `slot` from the buckets of `keys`.
    fn drop(&mut self, slot: u32, keys: &ShardKeys) {
        // Every bucket read first, so that their misses overlap before any is changed.
        let _: [&[u32]; MAX_KEYS] = self.table.get_all(&keys.keys[..keys.n]);
        for &k in &keys.keys[..keys.n] {
            self.table.remove(k, slot);
        }
    }
}

/// One counter per min-value position, bit-sliced: plane `j` holds bit `j` of every position's
/// count, so adding a sample page's agreement bits is a ripple-carry add over a few words, not
/// one addition per position.
#[derive(Debug, Default)]
struct Counts {
    planes: Vec<u128>,
}

impl Counts {
    /// Adds one to the count of every position whose bit is set in `bits`.
    fn add(&mut self, bits: u128) {
        let mut carry = bits;
        for plane in &mut self.planes {
            if carry == 0 {
                return;
            }
            let next = *plane & carry;
            *plane ^= carry;
            carry = next;
        }
        if carry != 0 {
            self.planes.push(carry);
        }
    }

    /// The positions whose count is at least `min`: compared bit by bit from the top, keeping
    /// the positions still equal to `min` so far and those already above it.
    fn at_least(&self, min: usize) -> u128 {
        let bits = (usize::BITS - min.leading_zeros()) as usize;
        let (mut above, mut equal) = (0u128, u128::MAX);
        for j in (0..bits.max(self.planes.len())).rev() {
            let plane = self.planes.get(j).copied().unwrap_or(0);
            if (min >> j) & 1 == 1 {
                equal &= plane;
            } else {
                above |= equal & plane;
                equal &= !plane;
            }
        }
        above | equal
    }
}

// ------------------------------------------------------------------------------------------
// The window's bookkeeping
// ------------------------------------------------------------------------------------------

/// When the page in a slot was fetched, and which of its expiry entries is current.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Stamp {
    at_ms: i64,
    /// The window's fetch counter when the page was filed or last refreshed, so stale expiry
    /// entries (of an earlier fetch, or of an earlier page in a reused slot) are recognised. It
    /// wraps after 2^32 fetches; a stale entry would have to outlive that many fetches to be
    /// mistaken for a current one.
    generation: u32,
    live: bool,
}

/// What the window did, for its host to carry out.
enum Change<'a> {
    /// The page in `slot` left (no content, out of the window by event time, or over the
    /// budget); the slot is free.
    Removed {
        slot: u32,
        crawl_id: Option<&'a str>,
    },
    /// The fetch's content is in `slot` under `url`; the URL's previous content left `replaced`.
    Filed {
        slot: u32,
        replaced: Option<u32>,
        url: Arc<str>,
        fetch: &'a Fetch<'a>,
    },
}

/// What keeps the pages of a [`Window`]: it tells a slot's URL and whether a slot holds a given
/// content, and carries out the window's changes in the order they happen.
trait WindowHost {
    fn url(&self, slot: u32) -> &str;
    fn holds(&self, slot: u32, sketch: &Sketch) -> bool;
    fn change(&mut self, change: Change<'_>);
}

/// Which slot holds which URL: a table of bare slot numbers, each found by the hash of the URL
/// its slot holds, which the caller reads from wherever the pages keep their URLs (`url_of`).
/// A map keyed by the URL (`HashMap<Arc<str>, u32>`) kept a second pointer to every URL beside
/// the page's own: 24 bytes an entry against 4.
#[derive(Debug, Default, Clone)]
struct UrlSlots {
    table: hashbrown::HashTable<u32>,
}

impl UrlSlots {
    fn hash(url: &str) -> u64 {
        use std::hash::BuildHasher;
        crate::hash::StrBuild::default().hash_one(url)
    }

    fn get<'a>(&self, url: &str, url_of: impl Fn(u32) -> &'a str) -> Option<u32> {
        self.table
            .find(Self::hash(url), |&s| url_of(s) == url)
            .copied()
    }

    /// Adds `url` in `slot` (not held yet; every slot held already is `url_of` it).
    fn insert<'a>(&mut self, url: &str, slot: u32, url_of: impl Fn(u32) -> &'a str) {
        self.table
            .insert_unique(Self::hash(url), slot, |&s| Self::hash(url_of(s)));
    }

    fn remove<'a>(&mut self, url: &str, url_of: impl Fn(u32) -> &'a str) -> Option<u32> {
        match self
            .table
            .find_entry(Self::hash(url), |&s| url_of(s) == url)
        {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        }
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes of the table (a control byte beside each entry).
    fn bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

/// The window's bookkeeping: which URL is in which slot, when each was fetched, and which page
/// leaves next by event time or by the page budget. It decides from URLs, event times and
/// whether a fetch brings new content, never from verification, so a [`Sequencer`] can run it
/// ahead of the verification, with key shards answering in between.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Window {
    /// Rebuilt from the pages after a restore.
    #[serde(skip)]
    by_url: UrlSlots,
    stamps: Vec<Stamp>,
    free: Vec<u32>,
    expiry: BinaryHeap<Reverse<(i64, u32, u32)>>,
    fetches: u32,
    /// Fetches before this event time are outside the window.
    horizon_ms: i64,
    stale: u64,
    evicted_by_time: u64,
    evicted_by_budget: u64,
    /// The URLs the page budget evicted since the last [`Window::take_over_budget`]: the parts
    /// downstream that keep URLs of the window (exact groups, change history, in-links) let
    /// them go too, so the budget bounds them as well.
    #[serde(skip)]
    over_budget: Vec<Arc<str>>,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            by_url: UrlSlots::default(),
            stamps: Vec::new(),
            free: Vec::new(),
            expiry: BinaryHeap::new(),
            fetches: 0,
            horizon_ms: i64::MIN,
            stale: 0,
            evicted_by_time: 0,
            evicted_by_budget: 0,
            over_budget: Vec::new(),
        }
    }
}

impl Window {
    /// Rebuilds the URL map (which a checkpoint leaves out) from the URL held in each slot.
    fn restore_urls<'a>(&mut self, slots: usize, url_in: impl Fn(u32) -> Option<&'a str>) {
        let mut by_url = UrlSlots::default();
        let url_of = |s: u32| url_in(s).expect("a held slot");
        for slot in 0..slots as u32 {
            if let Some(url) = url_in(slot) {
                by_url.insert(url, slot, url_of);
            }
        }
        self.by_url = by_url;
    }

    /// `base` with the window's own counters: stale fetches and evictions.
    fn counted(&self, base: NearStats) -> NearStats {
        NearStats {
            stale: self.stale,
            evicted_by_time: self.evicted_by_time,
            evicted_by_budget: self.evicted_by_budget,
            ..base
        }
    }

    /// Handles one fetch: a fetch older than the URL's entry, or already outside the window, is
    /// ignored (counted as stale); no content removes the URL's page; the same content only
    /// moves its fetch time; new or changed content is filed (replacing the URL's previous
    /// content), then the oldest pages leave while the window is over `max_pages`.
    fn observe(
        &mut self,
        f: &Fetch<'_>,
        max_pages: usize,
        host: &mut impl WindowHost,
        url_of: impl FnOnce(&str) -> Arc<str>,
    ) {
        if f.fetched_at_ms < self.horizon_ms {
            self.stale += 1;
            return;
        }
        let existing = self.by_url.get(f.url, |s| host.url(s));
        if let Some(slot) = existing {
            if f.fetched_at_ms < self.stamps[slot as usize].at_ms {
                self.stale += 1;
                return;
            }
        }
        let Some(sketch) = f.sketch else {
            if let Some(slot) = existing {
                self.remove(slot, f.crawl_id, host);
            }
            return;
        };
        if let Some(slot) = existing {
            if host.holds(slot, sketch) {
                self.stamp(slot, f.fetched_at_ms);
                return;
            }
            self.close(slot, host);
        }
        let url = url_of(f.url);
        let slot = self.free.pop().unwrap_or_else(|| {
            reserve_an_eighth(&mut self.stamps);
            self.stamps.push(Stamp::default());
            (self.stamps.len() - 1) as u32
        });
        self.by_url.insert(&url, slot, |s| host.url(s));
        self.stamp(slot, f.fetched_at_ms);
        host.change(Change::Filed {
            slot,
            replaced: existing,
            url,
            fetch: f,
        });
        while self.by_url.len() > max_pages {
            let Some(Reverse((_, slot, generation))) = self.expiry.pop() else {
                break;
            };
            if self.is_current(slot, generation) {
                self.evicted_by_budget += 1;
                self.over_budget.push(Arc::from(host.url(slot)));
                self.remove(slot, f.crawl_id, host);
            }
        }
    }

    /// Moves the window to end at `watermark_ms`: the pages fetched before its start leave.
    fn advance(
        &mut self,
        watermark_ms: i64,
        window_ms: i64,
        crawl_id: Option<&str>,
        host: &mut impl WindowHost,
    ) {
        let horizon = watermark_ms.saturating_sub(window_ms);
        self.horizon_ms = self.horizon_ms.max(horizon);
        while let Some(&Reverse((at, slot, generation))) = self.expiry.peek() {
            if at >= horizon {
                break;
            }
            self.expiry.pop();
            if self.is_current(slot, generation) {
                self.evicted_by_time += 1;
                self.remove(slot, crawl_id, host);
            }
        }
    }

    fn is_current(&self, slot: u32, generation: u32) -> bool {
        let s = &self.stamps[slot as usize];
        s.live && s.generation == generation
    }

    /// Records a fetch of the page in `slot` at `at_ms`.
    fn stamp(&mut self, slot: u32, at_ms: i64) {
        self.fetches = self.fetches.wrapping_add(1);
        let generation = self.fetches;
        self.stamps[slot as usize] = Stamp {
            at_ms,
            generation,
            live: true,
        };
        if self.expiry.len() == self.expiry.capacity() {
            // Every fetch of a page stays in the heap until its time leaves the window, so a
            // page refetched often would fill it with stale entries (hourly fetches in a week's
            // window, 168 per page). When a quarter of a full heap is stale, those are dropped
            // instead of growing it (each live page has one current entry: `by_url.len()`).
            // Stale entries are skipped when popped, so this changes no outcome.
            let stale = self.expiry.len().saturating_sub(self.by_url.len());
            if stale > 0 && stale * 4 >= self.expiry.len() {
                let stamps = &self.stamps;
                self.expiry.retain(|&Reverse((_, s, g))| {
                    let stamp = &stamps[s as usize];
                    stamp.live && stamp.generation == g
                });
            } else {
                // By an eighth, as the per-slot vectors ([`reserve_an_eighth`]).
                self.expiry
                    .reserve_exact((self.expiry.capacity() / 8).max(64));
            }
        }
        self.expiry.push(Reverse((at_ms, slot, generation)));
    }

    /// Frees `slot` (the host still holds its page).
    fn close(&mut self, slot: u32, host: &impl WindowHost) {
        self.by_url.remove(host.url(slot), |s| host.url(s));
        self.stamps[slot as usize].live = false;
        self.free.push(slot);
    }

    fn remove(&mut self, slot: u32, crawl_id: Option<&str>, host: &mut impl WindowHost) {
        self.close(slot, host);
        host.change(Change::Removed { slot, crawl_id });
    }

    fn take_over_budget(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.over_budget)
    }

    fn bytes(&self) -> usize {
        self.stamps.capacity() * std::mem::size_of::<Stamp>()
            + self.free.capacity() * 4
            + self.expiry.capacity() * std::mem::size_of::<Reverse<(i64, u32, u32)>>()
    }
}

// ------------------------------------------------------------------------------------------
// The index
// ------------------------------------------------------------------------------------------

/// A windowed page's record: 200 bytes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Page {
    sketch: Sketch,
    mask: Mask,
    /// [`url_name`] of the URL.
    name: u32,
    url: Arc<str>,
}

/// A page's boilerplate mask (one bit per min-value position) and whether it came from a full
/// site sample (else it may still grow: see `mature_sample`), in 12 bytes aligned to 4 (a
/// `u128`, aligned to 16, made the record 208 bytes).
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Mask([u32; 3]);

impl Mask {
    const MATURE: u32 = 1 << 31;

    fn new(bits: u128, mature: bool) -> Mask {
        debug_assert!(bits >> MINVALUES == 0);
        let hi = (bits >> 64) as u32 | if mature { Self::MATURE } else { 0 };
        Mask([bits as u32, (bits >> 32) as u32, hi])
    }

    fn bits(self) -> u128 {
        let [a, b, c] = self.0;
        u128::from(a) | u128::from(b) << 32 | u128::from(c & !Self::MATURE) << 64
    }

    fn mature(self) -> bool {
        self.0[2] & Self::MATURE != 0
    }
}

/// Each page's partners (the pages it has live pairs with), in pairing order: a [`MultiMap`]
/// keyed by slot number. The slot is multiplied by an odd constant first, a bijection that
/// spreads consecutive slots over the table's homes (which it takes from a key's high bits).
/// A `HashMap<u32, Vec<u32>>` cost about 70 bytes per page with pairs.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Partners(MultiMap);

impl Partners {
    fn key(slot: u32) -> u32 {
        slot.wrapping_mul(0x9e37_79b1)
    }

    fn of(&self, slot: u32) -> &[u32] {
        self.0.get(Self::key(slot))
    }

    /// Pairs `a` and `b`.
    fn link(&mut self, a: u32, b: u32) {
        self.0.insert(Self::key(a), b);
        self.0.insert(Self::key(b), a);
    }

    /// Removes `to` from the partners of `from`.
    fn unlink(&mut self, from: u32, to: u32) {
        self.0.remove(Self::key(from), to);
    }

    /// Removes the partners of `slot` (not `slot` from theirs) and returns them.
    fn take(&mut self, slot: u32) -> Vec<u32> {
        self.0.take(Self::key(slot))
    }

    fn bytes(&self) -> usize {
        let (entries, lists) = self.0.bytes();
        entries + lists
    }
}

/// Site names ([`site::site`], lower-cased) and their numbers, for the sites of the pages held:
/// a site leaves with its last page and its number is reused, so a crawl that passes millions
/// of sites through the window holds only the window's (site numbers are only compared between
/// pages held).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Sites {
    numbers: HashMap<Box<str>, u32>,
    /// Pages held per site number (0: the number is free).
    pages: Vec<u32>,
    free: Vec<u32>,
}

impl Sites {
    fn name(url: &str) -> std::borrow::Cow<'_, str> {
        let name = site::site(site::host(url));
        match name.bytes().any(|b| b.is_ascii_uppercase()) {
            true => name.to_ascii_lowercase().into(),
            false => name.into(),
        }
    }

    /// The number of `url`'s site, which holds one page more.
    fn enter(&mut self, url: &str) -> u32 {
        let name = Self::name(url);
        let n = match self.numbers.get(name.as_ref()) {
            Some(&n) => n,
            None => {
                let n = self.free.pop().unwrap_or_else(|| {
                    self.pages.push(0);
                    (self.pages.len() - 1) as u32
                });
                self.numbers.insert(name.into_owned().into(), n);
                n
            }
        };
        self.pages[n as usize] += 1;
        n
    }

    /// A page of `url`, on site `n`, leaves.
    fn leave(&mut self, url: &str, n: u32) {
        let held = &mut self.pages[n as usize];
        *held -= 1;
        if *held == 0 {
            let removed = self.numbers.remove(Self::name(url).as_ref());
            debug_assert_eq!(removed, Some(n), "{url}");
            self.free.push(n);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.numbers.len()
    }

    fn bytes(&self) -> usize {
        self.numbers.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
            + self.numbers.keys().map(|k| k.len()).sum::<usize>()
            + (self.pages.capacity() + self.free.capacity()) * 4
    }
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct SlotInfo {
    site: u32,
    seen: u32,
}

/// A live pair's report: 6 bytes, so an entry of the pair map is 16 (the estimated Jaccard is
/// kept as the agreeing min-value count it is computed from, not as an `f64`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct PairInfo {
    level: PairLevel,
    b: u8,
    c: u16,
    /// Agreeing min-values, 0..=84 ([`Comparison::agreeing`]).
    agreeing: u8,
    /// Both pages on one site (their site numbers agree: the URLs are not parsed again).
    same_site: bool,
}

impl PairInfo {
    /// The estimated Jaccard the pair reports ([`Comparison::jaccard`], to 4 decimals).
    fn jaccard(&self) -> f64 {
        (bbit_estimate(u32::from(self.agreeing), MINVALUES as u32) * 1e4).round() / 1e4
    }
}

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
    pages: Vec<Option<Page>>,
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
    /// Per slot, its site and the sighting it was last seen in, dense and side by side: sampling
    /// a bucket reads the site without touching page records, and deduplicating its candidates
    /// then finds the sighting in the same cache line.
    slots: Vec<SlotInfo>,
    sighting: u32,
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
            pages: Vec::new(),
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
            slots: Vec::new(),
            sighting: 0,
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
    /// (doubling as they grew, up to twice their size: the page records took 394 bytes per page
    /// instead of 208 on the medium crawl), and makes the records' URLs the pool's copies.
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        self.pages.shrink_to_fit();
        self.slots.shrink_to_fit();
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
    /// bookkeeping (fetch stamps, free slots, expiry heap), each slot's site and sighting with
    /// the names of the sites held, the key tables (their entries, and the lists of keys held
    /// by several pages), the live pairs and each page's partners, and the URLs with their map.
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
                self.slots.capacity() * std::mem::size_of::<SlotInfo>() + self.sites.bytes(),
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

    /// The sketch the window holds for `url`.
    pub fn sketch_of(&self, url: &str) -> Option<&Sketch> {
        self.slot_of(url).map(|s| &self.page(s).sketch)
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
                // Records are 200 bytes, so cache lines fall anywhere in them: these fields lie
                // less than 64 bytes apart from the first byte verification reads to the last
                // (a test checks it against the layout the compiler chose).
                acc ^= p.sketch.simhash[0]
                    ^ p.sketch.simhash[5]
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
            if self.first_sight(*p) {
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
            same_site: self.slots[a as usize].site == self.slots[b as usize].site,
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
        let sites = (self.slots[a as usize].site, self.slots[b as usize].site);
        let (ma, mb) = (pa.mask.bits(), pb.mask.bits());
        let cmp = compare_sited(&pa.sketch, ma, &pb.sketch, mb, sites.0 == sites.1);
        let titles = match self.cfg.titles {
            true => (pa.sketch.title, pb.sketch.title),
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
            reserve_an_eighth(&mut self.pages);
            reserve_an_eighth(&mut self.slots);
            self.pages.resize_with(slot as usize + 1, || None);
            self.slots.resize(self.pages.len(), SlotInfo::default());
        }
        self.slots[slot as usize].site = site;
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
            sketch: sketch.clone(),
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

    /// True the first time `slot` is seen since the last [`Self::new_sighting`].
    fn first_sight(&mut self, slot: u32) -> bool {
        let seen = &mut self.slots[slot as usize].seen;
        if *seen == self.sighting {
            return false;
        }
        *seen = self.sighting;
        true
    }

    /// Starts a new round of [`Self::first_sight`].
    fn new_sighting(&mut self) {
        self.sighting = self.sighting.wrapping_add(1);
        if self.sighting == 0 {
            self.slots.iter_mut().for_each(|s| s.seen = 0);
            self.sighting = 1;
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
        self.new_sighting();
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
                    if self.slots[c as usize].site == site && !sample.contains(&c) {
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
        let mature = sampling && sample.len() >= 2 * self.cfg.boilerplate_min;
        if mature {
            self.touch_records(&sample);
            let mut counts = Counts::default();
            for &c in &sample {
                counts.add(agreement(&self.page(c).sketch.mins, &sketch.mins));
            }
            mask = counts.at_least(self.cfg.boilerplate_min) & ((1u128 << MINVALUES) - 1);
        }
        // A band made only of the site's boilerplate positions is shared with the site's
        // template, not with a copy of the page's content: its bucket is not enumerated, unless
        // every band is boilerplate (default policy only: the papers' algorithms stay as
        // published, every shared band a candidate).
        let band = (1u128 << BAND_ROWS) - 1;
        let template_band = |j: usize| mask & (band << (j * BAND_ROWS)) == band << (j * BAND_ROWS);
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
                let seen = &mut self.slots[c as usize].seen;
                if *seen != self.sighting {
                    *seen = self.sighting;
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
        self.sites.leave(&page.url, self.slots[slot as usize].site);
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
        self.index.page(slot).sketch == *sketch
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

// ------------------------------------------------------------------------------------------
// The index split into a sequencer, key shards and a verifier
// ------------------------------------------------------------------------------------------

/// One step of the window, as a [`Sequencer`] decides it, for the key shards
/// ([`KeyShardStage`]) and the verifying index ([`NearIndex::follower`]), which take the steps
/// in the sequencer's order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Step {
    /// The page in `slot` left the window (its `keys` leave the shards; its pairs are retracted).
    Remove {
        /// The page's slot.
        slot: u32,
        /// The page's table keys.
        keys: Vec<u32>,
        /// The crawl round, for the retractions.
        crawl_id: Option<String>,
    },
    /// A fetch's content is filed in `slot` under `keys`, after the URL's previous content left
    /// `replaced` (with its keys).
    File {
        /// The page's slot.
        slot: u32,
        /// The slot and keys of the URL's previous content.
        replaced: Option<(u32, Vec<u32>)>,
        /// The page's table keys.
        keys: Vec<u32>,
        /// The URL.
        url: String,
        /// The content's signatures.
        sketch: Box<Sketch>,
        /// The crawl round.
        crawl_id: Option<String>,
    },
}

/// The window's bookkeeping on its own: it turns fetches and watermarks into [`Step`]s without
/// waiting for any verification, so that key shards can answer a page's filing while earlier
/// pages are still being verified (the index stage split by key: sequencer -> key shards ->
/// verifier). It keeps each windowed page's URL and signatures, to tell an unchanged refetch
/// and to name the keys that leave.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Sequencer {
    cfg: NearConfig,
    window: Window,
    held: Vec<Option<(Arc<str>, Sketch)>>,
    #[serde(skip)]
    steps: Vec<Step>,
}

/// The sequencer's pages, turning the window's changes into steps.
struct Held<'a> {
    held: &'a mut Vec<Option<(Arc<str>, Sketch)>>,
    steps: &'a mut Vec<Step>,
    policy: Policy,
}

impl WindowHost for Held<'_> {
    fn url(&self, slot: u32) -> &str {
        &self.held[slot as usize].as_ref().expect("held page").0
    }

    fn holds(&self, slot: u32, sketch: &Sketch) -> bool {
        self.held[slot as usize].as_ref().expect("held page").1 == *sketch
    }

    fn change(&mut self, change: Change<'_>) {
        let Held {
            held,
            steps,
            policy,
        } = self;
        let mut take = |slot: u32| {
            let (_, sketch) = held[slot as usize].take().expect("held page");
            let (k, n) = keys(*policy, &sketch);
            k[..n].to_vec()
        };
        match change {
            Change::Removed { slot, crawl_id } => steps.push(Step::Remove {
                slot,
                keys: take(slot),
                crawl_id: crawl_id.map(str::to_owned),
            }),
            Change::Filed {
                slot,
                replaced,
                url,
                fetch,
            } => {
                let replaced = replaced.map(|r| (r, take(r)));
                let sketch = fetch.sketch.expect("a filed fetch has content").clone();
                let (k, n) = keys(*policy, &sketch);
                if held.len() <= slot as usize {
                    held.resize(slot as usize + 1, None);
                }
                held[slot as usize] = Some((url.clone(), sketch.clone()));
                steps.push(Step::File {
                    slot,
                    replaced,
                    keys: k[..n].to_vec(),
                    url: url.to_string(),
                    sketch: Box::new(sketch),
                    crawl_id: fetch.crawl_id.map(str::to_owned),
                });
            }
        }
    }
}

impl Sequencer {
    /// An empty window.
    pub fn new(cfg: NearConfig) -> Self {
        Sequencer {
            cfg,
            window: Window::default(),
            held: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Rebuilds what a checkpoint leaves out (the URL map) after a restore.
    pub(crate) fn after_restore(&mut self) {
        let held = &self.held;
        self.window
            .restore_urls(held.len(), |s| held[s as usize].as_ref().map(|p| &*p.0));
    }

    /// True when `url` is in the window.
    pub fn holds(&self, url: &str) -> bool {
        self.sketch_of(url).is_some()
    }

    /// The content sketch `url` holds in the window, if any.
    pub fn sketch_of(&self, url: &str) -> Option<&Sketch> {
        let url_of = |s: u32| &*self.held[s as usize].as_ref().expect("held page").0;
        let slot = self.window.by_url.get(url, url_of)?;
        self.held[slot as usize].as_ref().map(|(_, sketch)| sketch)
    }

    /// The window's counters (pages, evictions, stale fetches); the pair counters are the
    /// verifier's.
    pub fn stats(&self) -> NearStats {
        self.window.counted(NearStats {
            pages: self.window.by_url.len() as u64,
            ..NearStats::default()
        })
    }

    /// The steps of one fetch (as [`NearIndex::observe`]).
    pub fn observe(&mut self, f: &Fetch<'_>) -> Vec<Step> {
        let mut host = Held {
            held: &mut self.held,
            steps: &mut self.steps,
            policy: self.cfg.policy,
        };
        self.window
            .observe(f, self.cfg.max_pages, &mut host, |u: &str| Arc::from(u));
        std::mem::take(&mut self.steps)
    }

    /// As [`NearIndex::take_over_budget`].
    pub fn take_over_budget(&mut self) -> Vec<Arc<str>> {
        self.window.take_over_budget()
    }

    /// The steps of moving the window's end to `watermark_ms` (as [`NearIndex::advance`]).
    pub fn advance(&mut self, watermark_ms: i64, crawl_id: Option<&str>) -> Vec<Step> {
        let mut host = Held {
            held: &mut self.held,
            steps: &mut self.steps,
            policy: self.cfg.policy,
        };
        self.window
            .advance(watermark_ms, self.cfg.window_ms, crawl_id, &mut host);
        std::mem::take(&mut self.steps)
    }
}

/// A key shard's part of the answer to a filing: for each of the page's keys that it holds,
/// the key's position, the bucket's length before the filing and its pages that the lookup
/// needs (the newest, oldest first).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardAnswer {
    buckets: Vec<(u8, u32, Vec<u32>)>,
}

/// Shard `index` of `of` key shards on its own, as an instance of an index stage partitioned
/// by key: it takes a [`Sequencer`]'s steps in order, keeps the buckets of its keys, and answers
/// each filing for the verifier ([`NearIndex::follow`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KeyShardStage {
    shard: KeyShard,
    index: usize,
    of: usize,
    limits: ViewLimits,
}

impl KeyShardStage {
    /// Shard `index` of `of` under `cfg`'s limits.
    pub fn new(cfg: &NearConfig, index: usize, of: usize) -> Self {
        assert!(index < of, "shard {index} of {of}");
        KeyShardStage {
            shard: KeyShard::default(),
            index,
            of,
            limits: ViewLimits::of(cfg),
        }
    }

    /// Applies one step; a filing is answered with the buckets as they were before it.
    pub fn apply(&mut self, step: &Step) -> Option<ShardAnswer> {
        match step {
            Step::Remove { slot, keys, .. } => {
                self.shard.drop(*slot, &self.mine(keys));
                None
            }
            Step::File {
                slot,
                replaced,
                keys,
                ..
            } => {
                if let Some((r, old)) = replaced {
                    self.shard.drop(*r, &self.mine(old));
                }
                let mine = self.mine(keys);
                let mut answer = Answer::empty();
                self.shard.answer(&mine, self.limits, &mut answer);
                let buckets = mine.positions[..mine.n]
                    .iter()
                    .map(|&p| {
                        let p = p as usize;
                        (p as u8, answer.lens[p] as u32, answer.buckets[p].to_vec())
                    })
                    .collect();
                self.shard.file(*slot, &mine);
                Some(ShardAnswer { buckets })
            }
        }
    }

    /// The keys of `keys` that this shard holds.
    fn mine(&self, keys: &[u32]) -> ShardKeys {
        ShardKeys::of(keys, self.index, self.of)
    }
}

impl NearIndex {
    /// An index that verifies a [`Sequencer`]'s steps with the key shards' answers
    /// ([`Self::follow`]) instead of keeping its own window and tables; its pair events are
    /// those of one [`NearIndex`] fed the same fetches. Its [`Self::window`] and page count stay
    /// empty (the sequencer keeps the window).
    pub fn follower(cfg: NearConfig) -> Self {
        let mut index = Self::with_key_shards(cfg, 1);
        index.following = true;
        index
    }

    /// Carries out one step of the sequencer, with every shard's answer to it (a filing) or
    /// none (a removal).
    pub fn follow(&mut self, step: &Step, answers: &[ShardAnswer], out: &mut Emitter) {
        assert!(self.following, "follow() needs NearIndex::follower");
        match step {
            Step::Remove { slot, crawl_id, .. } => {
                self.remove_page(*slot, crawl_id.as_deref(), out)
            }
            Step::File {
                slot,
                replaced,
                url,
                sketch,
                crawl_id,
                ..
            } => self.file(
                *slot,
                replaced.as_ref().map(|r| r.0),
                Arc::from(url.as_str()),
                sketch,
                crawl_id.as_deref(),
                Some(answers),
                out,
            ),
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

/// Every table key of a page under `policy`: the checksum, then the bands or the pieces.
fn keys(policy: Policy, sketch: &Sketch) -> ([u32; MAX_KEYS], usize) {
    let mut out = [0u32; MAX_KEYS];
    out[0] = key32(CHECKSUM_TABLE, sketch.checksum);
    let mut n = 1;
    if sketch.has_terms && policy.uses_bands() {
        for j in 0..BANDS {
            out[n] = band_key(&sketch.mins, j);
            n += 1;
        }
    }
    if sketch.has_terms && policy.uses_pieces() {
        for j in 0..PIECES {
            out[n] = piece_key(&sketch.simhash, j);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_names_keep_the_query_and_treat_directories_as_wildcards() {
        assert_eq!(
            url_name("http://a.example/docs/x.html"),
            url_name("https://b.example/m/x.html#top")
        );
        assert_eq!(
            url_name("http://a.example/item.php?id=1"),
            url_name("https://b.example/shop/item.php?id=1#reviews")
        );
        assert_ne!(
            url_name("http://a.example/item.php?id=1"),
            url_name("http://a.example/item.php?id=2")
        );
        assert_ne!(
            url_name("http://a.example/docs/x.html?sid=1"),
            url_name("http://a.example/docs/x.html")
        );
        assert_ne!(url_name("http://a.example/?page=2"), 0);
        assert_eq!(
            url_name("http://a.example/docs/#x?y"),
            0,
            "a ? in the fragment"
        );
        assert_ne!(
            url_name("http://a.example/docs/x.html"),
            url_name("http://a.example/docs/y.html")
        );
        assert_eq!(url_name("http://a.example/docs/"), 0);
        assert_eq!(url_name("http://a.example"), 0);
        assert_eq!(url_name("http://a.example/docs/index.html"), 0);
        assert!(same_name(0, url_name("http://a.example/x.html")));
    }

    proptest::proptest! {
        /// The byte scans find the name the string splits find.
        #[test]
        fn url_name_matches_the_split_form(url in "(https?://)?[a-z./?#:]{0,20}(index\\.html)?[a-z=?#]{0,6}") {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let before_fragment = rest.split('#').next().unwrap_or("");
            let (path, query) = before_fragment.split_once('?').unwrap_or((before_fragment, ""));
            let last = match path.split_once('/') {
                Some((_, p)) => p.rsplit('/').next().unwrap_or(""),
                None => "",
            };
            let want = if query.is_empty() && (last.is_empty() || last.starts_with("index.")) {
                0
            } else {
                let mut h = xxhash_rust::xxh3::xxh3_64(last.as_bytes());
                if !query.is_empty() {
                    h ^= xxhash_rust::xxh3::xxh3_64(query.as_bytes()).rotate_left(17);
                }
                (h as u32).max(1)
            };
            proptest::prop_assert_eq!(url_name(&url), want);
        }
    }

    /// Golden points of the band S-curve, worked out by hand: at J = 0.6 a byte agrees with
    /// probability 0.6 + 0.4/256, a band with its fourth power (0.1311), and one of 21 bands with
    /// 1 − (1 − 0.1311)^21.
    #[test]
    fn the_band_curve_is_the_b_bit_s_curve() {
        let byte: f64 = 0.6 + 0.4 / 256.0;
        let expected = 1.0 - (1.0 - byte.powi(4)).powi(21);
        assert!((band_candidate_probability(0.6) - expected).abs() < 1e-12);
        assert!((expected - 0.9475).abs() < 1e-3, "{expected}");
        assert_eq!(band_candidate_probability(1.0), 1.0);
        // Unrelated pages still agree on a byte in 256, rarely on a whole band.
        assert!(band_candidate_probability(0.0) < 1e-7);
        let mut last = 0.0;
        for i in 0..=100 {
            let p = band_candidate_probability(f64::from(i) / 100.0);
            assert!(p >= last, "the curve falls at J = {i}%");
            last = p;
        }
    }

    #[test]
    fn the_description_names_each_policys_thresholds() {
        let cfg = NearConfig::default();
        let d = cfg.describe();
        assert!(d.starts_with("pair policy neardup"), "{d}");
        for part in [
            ">= 0.7",
            "different names: 0.9",
            "on one site: 0.98",
            ">= 12 min-values",
            ">= 330 of 384",
            "21 bands of 4",
            "0.6: 0.948",
            "0.7: 0.997",
        ] {
            assert!(d.contains(part), "{part:?} missing from {d}");
        }
        let d = NearConfig {
            titles: false,
            min_jaccard: 0.6,
            ..cfg.clone()
        }
        .describe();
        assert!(
            d.contains(">= 0.6 ") && d.contains("titles not compared"),
            "{d}"
        );
        let of = |policy| {
            NearConfig {
                policy,
                ..cfg.clone()
            }
            .describe()
        };
        let c = of(Policy::AlgC);
        assert!(
            c.contains(">= 372 of 384")
                && c.contains("12 simhash pieces of 32 bits")
                && c.contains("at most 11 bits")
                && !c.contains("bands"),
            "{c}"
        );
        let b = of(Policy::AlgB);
        assert!(
            b.contains(">= 2 of 6 supershingles") && b.contains("21 bands"),
            "{b}"
        );
        let comb = of(Policy::Combined);
        assert!(
            comb.contains(">= 355 of 384") && comb.contains("21 bands"),
            "{comb}"
        );
    }

    #[test]
    fn bbit_estimate_corrects_random_byte_matches() {
        assert_eq!(bbit_estimate(84, 84), 1.0);
        // A random pair agrees on 84/256 of positions in expectation: estimate 0.
        assert!(bbit_estimate(0, 84) == 0.0);
        assert!((bbit_estimate(42, 84) - (0.5 - 1.0 / 256.0) / (1.0 - 1.0 / 256.0)).abs() < 1e-12);
    }

    /// `touch_records` reads fields less than 64 bytes apart from the first byte of a record
    /// that verification reads to the last (none of them crossing a line: records start at a
    /// multiple of 8 and the fields are aligned), so it loads every line verification reads
    /// wherever the record starts.
    #[test]
    fn touched_fields_cover_every_cache_line_verification_reads() {
        use std::mem::offset_of;
        let sk = offset_of!(Page, sketch);
        let read = [
            (sk + offset_of!(Sketch, mins), MINVALUES),
            (sk + offset_of!(Sketch, ss), 2 * SUPERSHINGLES),
            (sk + offset_of!(Sketch, simhash), 48),
            (sk + offset_of!(Sketch, checksum), 8),
            (sk + offset_of!(Sketch, text), 8),
            (sk + offset_of!(Sketch, title), 4),
            (sk + offset_of!(Sketch, has_terms), 1),
            (offset_of!(Page, mask), 12),
            (offset_of!(Page, name), 4),
        ];
        let start = read.iter().map(|r| r.0).min().unwrap();
        let end = read.iter().map(|r| r.0 + r.1).max().unwrap();
        let simhash = sk + offset_of!(Sketch, simhash);
        let mins = sk + offset_of!(Sketch, mins);
        let mut touched = [
            simhash,
            simhash + 40,
            mins,
            mins + MINVALUES / 2,
            mins + MINVALUES - 1,
            offset_of!(Page, mask),
            offset_of!(Page, name),
        ];
        touched.sort();
        assert_eq!(std::mem::size_of::<Page>() % 8, 0);
        assert!(touched[0] <= start, "{touched:?} from {start}");
        assert_eq!(touched[6] / 8, (end - 1) / 8, "{touched:?} to {end}");
        assert!(touched.windows(2).all(|w| w[1] - w[0] < 64), "{touched:?}");
    }

    /// A site is held while the window holds one of its pages; its number then goes to the
    /// next new site, and pages keep telling their sites apart.
    #[test]
    fn sites_leave_with_their_last_page_and_their_numbers_are_reused() {
        let cfg = NearConfig {
            window_ms: 1_000,
            ..NearConfig::default()
        };
        let mut index = NearIndex::new(cfg);
        let mut out = Emitter::new();
        let (a, b) = differing_in_first(0);
        let mut fetch = |index: &mut NearIndex, url: &str, sketch: Option<&Sketch>, at: i64| {
            index.advance(at, None, &mut out);
            let f = Fetch {
                url,
                sketch,
                fetched_at_ms: at,
                crawl_id: None,
            };
            index.observe(&f, &mut out);
        };
        fetch(&mut index, "http://a.example/x", Some(&a), 0);
        fetch(&mut index, "http://A.EXAMPLE/y", Some(&b), 0);
        fetch(&mut index, "http://b.example/x", Some(&a), 0);
        assert_eq!(index.sites.len(), 2);
        let number = |index: &NearIndex, url: &str| {
            let slot = index.slot_of(url).expect("a held URL");
            index.slots[slot as usize].site
        };
        let site_a = number(&index, "http://a.example/x");
        assert_eq!(number(&index, "http://A.EXAMPLE/y"), site_a);
        fetch(&mut index, "http://a.example/x", None, 1);
        assert_eq!(index.sites.len(), 2);
        fetch(&mut index, "http://A.EXAMPLE/y", None, 1);
        assert_eq!(index.sites.len(), 1);
        // The freed number goes to the next new site, which is not b.example's.
        fetch(&mut index, "http://c.example/x", Some(&b), 2);
        assert_eq!(number(&index, "http://c.example/x"), site_a);
        assert_ne!(number(&index, "http://b.example/x"), site_a);
        assert_eq!(index.live_pairs().len(), 1);
        assert!(!index.pairs.values().next().unwrap().same_site);
        // Out of the window by event time: no site is held.
        fetch(&mut index, "http://d.example/x", None, 5_000);
        assert_eq!(index.sites.len(), 0);
        assert_eq!(index.stats().pages, 0);
    }

    /// Pages refetched again and again leave a stale expiry entry per fetch; the heap drops them
    /// when a quarter of it is stale instead of growing, and the pages still leave on time.
    #[test]
    fn the_expiry_heap_drops_stale_entries_of_refetched_pages() {
        let cfg = NearConfig {
            window_ms: 1_000_000,
            ..NearConfig::default()
        };
        let mut index = NearIndex::new(cfg);
        let mut out = Emitter::new();
        let pages: Vec<(String, Sketch)> = (0..7)
            .map(|i| {
                (
                    format!("http://s{i}.example/p"),
                    differing_in_first(i * 12).1,
                )
            })
            .collect();
        for t in 0..10_000i64 {
            let (url, sketch) = &pages[t as usize % pages.len()];
            index.advance(t, None, &mut out);
            let fetch = Fetch {
                url,
                sketch: Some(sketch),
                fetched_at_ms: t,
                crawl_id: None,
            };
            index.observe(&fetch, &mut out);
        }
        let heap = &index.window.expiry;
        assert!(heap.capacity() <= 64, "{} entries held", heap.capacity());
        assert!(heap.len() >= 7);
        // The newest fetch of each page is still current: each leaves a window after it.
        index.advance(9_993 + 1_000_000, None, &mut out);
        assert_eq!(index.stats().pages, 7);
        index.advance(9_994 + 1_000_000, None, &mut out);
        assert_eq!(index.stats().pages, 6);
        index.advance(10_000 + 1_000_000, None, &mut out);
        assert_eq!(index.stats().pages, 0);
        assert_eq!(index.stats().evicted_by_time, 7);
    }

    #[test]
    fn a_pair_entry_takes_16_bytes_and_reports_the_comparisons_jaccard() {
        assert_eq!(std::mem::size_of::<((u32, u32), PairInfo)>(), 16);
        for agreeing in 0..=MINVALUES as u32 {
            let info = PairInfo {
                level: PairLevel::VerySimilar,
                b: 0,
                c: 0,
                agreeing: agreeing as u8,
                same_site: false,
            };
            let estimate = bbit_estimate(agreeing, MINVALUES as u32);
            assert_eq!(info.jaccard(), (estimate * 1e4).round() / 1e4, "{agreeing}");
        }
    }

    #[test]
    fn a_page_record_takes_200_bytes_and_its_mask_keeps_bits_and_flag() {
        assert_eq!(std::mem::size_of::<Option<Page>>(), 200);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bits =
                (u128::from(x) << 64 | u128::from(x.rotate_left(29))) & ((1 << MINVALUES) - 1);
            for mature in [false, true] {
                let m = Mask::new(bits, mature);
                assert_eq!((m.bits(), m.mature()), (bits, mature));
            }
        }
    }

    /// The memory accounting adds up, and each part grows with what it holds: two copies on
    /// two sites fill two records, their keys and one live pair.
    #[test]
    fn memory_parts_add_up_to_the_memory_figure() {
        let mut index = NearIndex::new(NearConfig::default());
        let empty = index.memory_parts();
        let (a, mut b) = differing_in_first(0);
        b.checksum = a.checksum;
        b.text = a.text;
        let urls = ["http://a.example/doc/x.html", "http://b.example/doc/x.html"];
        for (url, sketch) in urls.iter().zip([&a, &b]) {
            index.observe(
                &Fetch {
                    url,
                    sketch: Some(sketch),
                    fetched_at_ms: 0,
                    crawl_id: None,
                },
                &mut Emitter::new(),
            );
        }
        assert_eq!(index.stats().live_pairs, 1);
        let parts = index.memory_parts();
        let part = |name: &str| parts.iter().find(|p| p.0 == name).unwrap().1;
        let (index_bytes, url_bytes) = index.memory_bytes();
        assert_eq!(
            index_bytes + url_bytes,
            parts.iter().map(|p| p.1).sum::<usize>()
        );
        assert_eq!(url_bytes, part(URL_PART));
        assert!(part("page records") >= 2 * std::mem::size_of::<Option<Page>>());
        assert!(url_bytes >= urls.iter().map(|u| u.len()).sum::<usize>());
        let parts_growing = [
            "key table entries",
            "key table lists",
            "live pairs",
            "pair partners",
            "slot sites",
        ];
        for name in parts_growing {
            let before = empty.iter().find(|p| p.0 == name).unwrap().1;
            assert!(part(name) > before, "{name}: {before} -> {}", part(name));
        }
    }

    /// Two sketches of different text that differ in their first `n` min-values only (equal
    /// simhashes and supershingle fields).
    fn differing_in_first(n: usize) -> (Sketch, Sketch) {
        let mut a = Sketch {
            mins: [0; MINVALUES],
            ss: [0; 6],
            simhash: [0; 6],
            checksum: 1,
            text: 1,
            title: 0,
            has_terms: true,
        };
        for (i, m) in a.mins.iter_mut().enumerate() {
            *m = i as u8;
        }
        let mut b = a.clone();
        b.checksum = 2;
        b.text = 2;
        for m in b.mins.iter_mut().take(n) {
            *m = m.wrapping_add(100);
        }
        (a, b)
    }

    /// A pair agreeing on 80 of 84 min-values (Jaccard ≈ 0.95) is a pair under the same name
    /// (0.7) and across sites under different names (0.9), not on one site under different
    /// names (0.98).
    #[test]
    fn renamed_pages_of_one_site_need_more_agreement() {
        let (a, b) = differing_in_first(4);
        let c = compare(&a, 0, &b, 0);
        assert!((0.94..0.96).contains(&c.discounted_jaccard), "{c:?}");
        let cfg = NearConfig::default();
        let level = Some(PairLevel::VerySimilar);
        assert_eq!(cfg.verdict(&a, &b, &c, Naming::SameName), level);
        assert_eq!(cfg.verdict(&a, &b, &c, Naming::Renamed), level);
        assert_eq!(cfg.verdict(&a, &b, &c, Naming::RenamedOnSite), None);
        let (x, y) = (
            url_name("http://a.example/x.html"),
            url_name("http://a.example/y.html"),
        );
        assert_eq!(Naming::of((x, y), (1, 1), (0, 0)), Naming::RenamedOnSite);
        assert_eq!(Naming::of((x, y), (1, 2), (0, 0)), Naming::Renamed);
        assert_eq!(Naming::of((x, x), (1, 1), (0, 0)), Naming::SameName);
        assert_eq!(
            Naming::of((x, 0), (1, 1), (0, 0)),
            Naming::SameName,
            "an index page matches any name"
        );
    }

    /// Renamed pages whose titles differ as well need near-identical text (0.98) on two sites
    /// too, and so do pages of one site under one name with different titles; equal titles, a
    /// missing title or one name on two sites leave the thresholds as they were.
    #[test]
    fn renamed_and_retitled_pages_need_near_identical_text() {
        let (x, y) = (
            url_name("http://a.example/x.html"),
            url_name("http://b.example/y.html"),
        );
        let retitled = |same_name, one_site| Naming::Retitled {
            same_name,
            one_site,
        };
        assert_eq!(Naming::of((x, y), (1, 2), (5, 6)), retitled(false, false));
        assert_eq!(Naming::of((x, y), (1, 1), (5, 6)), retitled(false, true));
        assert_eq!(Naming::of((x, y), (1, 2), (5, 5)), Naming::Renamed);
        assert_eq!(Naming::of((x, y), (1, 2), (5, 0)), Naming::Renamed);
        assert_eq!(Naming::of((x, y), (1, 1), (0, 6)), Naming::RenamedOnSite);
        assert_eq!(Naming::of((x, x), (1, 2), (5, 6)), Naming::SameName);
        assert_eq!(Naming::of((0, 0), (1, 2), (5, 6)), Naming::SameName);
        assert_eq!(Naming::of((x, x), (1, 1), (5, 6)), retitled(true, true));
        assert_eq!(Naming::of((0, 0), (1, 1), (5, 6)), retitled(true, true));
        assert_eq!(Naming::of((0, 0), (1, 1), (5, 5)), Naming::SameName);
        let cfg = NearConfig::default();
        // Jaccard ≈ 0.95: short of 0.98.
        let (a, b) = differing_in_first(4);
        let c = compare(&a, 0, &b, 0);
        assert_eq!(cfg.verdict(&a, &b, &c, retitled(false, false)), None);
        assert!(cfg.verdict(&a, &b, &c, Naming::Renamed).is_some());
        // One min-value of 84 differs: Jaccard ≈ 0.988.
        let (a, b) = differing_in_first(1);
        let c = compare(&a, 0, &b, 0);
        assert!(c.discounted_jaccard >= 0.98, "{c:?}");
        assert!(cfg.verdict(&a, &b, &c, retitled(false, false)).is_some());
        // A lower retitled threshold does not undercut the names' own: renamed on one site
        // still needs 0.98, and a Jaccard of 0.95 passes only where the names allow it.
        let low = NearConfig {
            min_jaccard_retitled: 0.5,
            ..NearConfig::default()
        };
        let (a, b) = differing_in_first(4);
        let c = compare(&a, 0, &b, 0);
        assert_eq!(low.verdict(&a, &b, &c, retitled(false, true)), None);
        assert!(low.verdict(&a, &b, &c, retitled(false, false)).is_some());
        assert!(low.verdict(&a, &b, &c, retitled(true, true)).is_some());
        // A higher one holds every retitled pair to it.
        let high = NearConfig {
            min_jaccard_retitled: 0.99,
            ..NearConfig::default()
        };
        let (a, b) = differing_in_first(1);
        let c = compare(&a, 0, &b, 0);
        assert_eq!(high.verdict(&a, &b, &c, retitled(true, true)), None);
        assert!(high.verdict(&a, &b, &c, Naming::SameName).is_some());
    }

    /// 40 pages of one site share a template on bands 0..17 and differ in bands 17..21. A page
    /// that copies one of them under another directory finds its copy through the content
    /// bands, and the template bands, shared with every page of the site, are not enumerated:
    /// the template siblings are not even verified. Alg. B, as published, still takes every
    /// page sharing a band as a candidate.
    #[test]
    fn template_bands_give_no_candidates() {
        let (skipped, verified) = copy_of_a_template_page(Policy::Neardup);
        assert_eq!(skipped, 17);
        assert_eq!(verified, 1, "only the copy is verified");
        let (skipped, verified) = copy_of_a_template_page(Policy::AlgB);
        assert_eq!(skipped, 0);
        assert_eq!(verified, 40, "every page of the site");
    }

    /// Files 40 template pages of one site and then a copy of one of them; returns the template
    /// bands skipped and the candidates verified for the copy.
    fn copy_of_a_template_page(policy: Policy) -> (u64, u64) {
        let template_positions = 17 * BAND_ROWS;
        let page = |i: u64| {
            let mut s = Sketch {
                mins: [0; MINVALUES],
                ss: [0; 6],
                simhash: [mix64(i), mix64(i + 1), 0, 0, 0, 0],
                checksum: i,
                text: i,
                title: 0,
                has_terms: true,
            };
            for (p, m) in s.mins.iter_mut().enumerate() {
                *m = if p < template_positions {
                    p as u8
                } else {
                    (mix64(i * 1000 + p as u64) >> 8) as u8
                };
            }
            s
        };
        let mut index = NearIndex::new(NearConfig {
            policy,
            ..NearConfig::default()
        });
        let mut out = Emitter::new();
        for i in 0..40u64 {
            index.observe(
                &Fetch {
                    url: &format!("http://site.example/a/page{i}.html"),
                    sketch: Some(&page(i)),
                    fetched_at_ms: i as i64,
                    crawl_id: None,
                },
                &mut out,
            );
        }
        if policy == Policy::Neardup {
            assert_eq!(out.drain().count(), 0, "template siblings are no pairs");
        }
        out.drain().for_each(drop);
        let before = index.stats();
        let mut copy = page(7);
        copy.checksum = 1_000;
        copy.mins[MINVALUES - 1] ^= 1;
        index.observe(
            &Fetch {
                url: "http://site.example/b/page7.html",
                sketch: Some(&copy),
                fetched_at_ms: 40,
                crawl_id: None,
            },
            &mut out,
        );
        let after = index.stats();
        if policy == Policy::Neardup {
            let events: Vec<_> = out.drain().collect();
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(after.detected - before.detected, 1);
        }
        (
            after.template_bands_skipped - before.template_bands_skipped,
            after.verified - before.verified,
        )
    }

    /// Pages of one template whose few own positions all agree are a pair on fewer than
    /// `min_support` positions, down to half of it; one disagreement, or fewer positions, is not.
    #[test]
    fn few_undiscounted_positions_must_all_agree() {
        let (a, b) = differing_in_first(2);
        let cfg = NearConfig::default();
        let keep_first = |n: usize| ((1u128 << MINVALUES) - 1) & !((1u128 << n) - 1);
        let judge = |kept: usize| {
            let c = compare(&a, keep_first(kept), &b, 0);
            (c.support, cfg.verdict(&a, &b, &c, Naming::SameName))
        };
        let level = Some(PairLevel::VerySimilar);
        // Positions 2.. agree; keeping positions 2..2+n means n unanimous positions.
        let unanimous = |n: usize| compare(&a, keep_first(2 + n) | 0b11, &b, 0);
        let agreeing_only = |n: usize| {
            let c = unanimous(n);
            (
                c.support,
                c.kept_agreeing,
                cfg.verdict(&a, &b, &c, Naming::SameName),
            )
        };
        assert_eq!(agreeing_only(8), (8, 8, level));
        assert_eq!(agreeing_only(6), (6, 6, level));
        assert_eq!(agreeing_only(5), (5, 5, None), "under half of min_support");
        // 8 positions with the two differing ones among them: not unanimous.
        assert_eq!(judge(8), (8, None));
        assert!(cfg.min_support == 12, "the cases above assume the default");
        // A pair held to a stricter threshold needs min_support positions: under other names,
        // or with other titles, 11 unanimous positions are not enough, 12 are.
        let stricter = |n: usize, naming: Naming| cfg.verdict(&a, &b, &unanimous(n), naming);
        let retitled = Naming::Retitled {
            same_name: true,
            one_site: false,
        };
        for naming in [Naming::Renamed, Naming::RenamedOnSite, retitled] {
            assert_eq!(stricter(11, naming), None, "{naming:?}");
            assert_eq!(stricter(12, naming), level, "{naming:?}");
        }
        assert_eq!(stricter(11, Naming::SameName), level);
    }

    /// A band bucket over `max_bucket` pages gives its newest pages as candidates: a group of
    /// near-identical pages larger than the cap still pairs each page with the ones before it.
    #[test]
    fn hot_band_buckets_give_their_newest_pages() {
        let cfg = NearConfig {
            max_bucket: 4,
            ..NearConfig::default()
        };
        let mut index = NearIndex::new(cfg);
        let mut out = Emitter::new();
        let (base, _) = differing_in_first(0);
        let mut partners = Vec::new();
        let site = |i: u64| format!("http://site{i}.example/");
        for i in 0..6u64 {
            let mut s = base.clone();
            (s.checksum, s.text) = (100 + i, 100 + i);
            index.observe(
                &Fetch {
                    url: &site(i),
                    sketch: Some(&s),
                    fetched_at_ms: i as i64,
                    crawl_id: None,
                },
                &mut out,
            );
            let mut found: Vec<String> = out
                .drain()
                .map(|e| {
                    let v: serde_json::Value = serde_json::from_slice(&e.value).expect("JSON");
                    let (a, b) = (v["a"].as_str().expect("a"), v["b"].as_str().expect("b"));
                    if a == site(i) { b } else { a }.to_owned()
                })
                .collect();
            found.sort();
            partners.push(found);
        }
        // Pages 0..4 find every page before them (buckets of at most 4 with the new page).
        assert_eq!(partners[3], vec![site(0), site(1), site(2)]);
        // Page 4 meets buckets of 4 pages: the newest 3 only; page 5, the newest 3 of 5.
        assert_eq!(partners[4], vec![site(1), site(2), site(3)]);
        assert_eq!(partners[5], vec![site(2), site(3), site(4)]);
        assert!(index.stats().hot_buckets_cut > 0);
    }

    #[test]
    fn boilerplate_positions_do_not_count() {
        let (a, b) = differing_in_first(20);
        let none = compare(&a, 0, &b, 0);
        assert_eq!(none.agreeing, 64);
        assert_eq!(none.support, 84);
        // If positions 20..84 are a template, only the 20 differing positions are left.
        let template: u128 = ((1u128 << 84) - 1) & !((1u128 << 20) - 1);
        let c = compare(&a, template, &b, 0);
        assert_eq!(c.support, 20);
        assert_eq!(c.discounted_jaccard, 0.0);
        let cfg = NearConfig::default();
        assert!(
            cfg.verdict(&a, &b, &none, Naming::SameName).is_none()
                || none.discounted_jaccard >= cfg.min_jaccard
        );
        assert_eq!(cfg.verdict(&a, &b, &c, Naming::SameName), None);
    }

    /// On one site, a position counts unless both pages show a template value in it: a template
    /// value against a value of the page's own is a difference. Across sites it does not count.
    #[test]
    fn on_one_site_a_template_value_against_an_own_value_is_a_difference() {
        // The pages differ in positions 0..20; positions 10..84 are template for page a, and
        // 15..84 for page b.
        let (a, b) = differing_in_first(20);
        let from = |i: u32| ((1u128 << 84) - 1) & !((1u128 << i) - 1);
        let (mask_a, mask_b) = (from(10), from(15));
        let two_sites = compare_sited(&a, mask_a, &b, mask_b, false);
        assert_eq!(two_sites, compare(&a, mask_a, &b, mask_b));
        assert_eq!((two_sites.support, two_sites.kept_agreeing), (10, 0));
        // On one site: 0..10 differ (no template), 10..15 differ with a template value in a
        // only: counted; 15..20 differ with template values in both: dropped, as are 20..84,
        // where both agree on the template.
        let one_site = compare_sited(&a, mask_a, &b, mask_b, true);
        assert_eq!((one_site.support, one_site.kept_agreeing), (15, 0));
        // Agreeing positions where only one page shows a template are dropped too.
        let same = compare_sited(&a, from(10), &a, 0, true);
        assert_eq!((same.support, same.kept_agreeing), (10, 10));
        // Without masks the two agree.
        assert_eq!(compare_sited(&a, 0, &b, 0, true), compare(&a, 0, &b, 0));
    }
}

#[cfg(test)]
mod agreement_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The bit-sliced counts select the same positions as counting each position.
        #[test]
        fn bit_sliced_counts_agree_with_counting(rows in prop::collection::vec(any::<u128>(), 0..70),
                                                 min in 0usize..80) {
            let mut counts = Counts::default();
            let mut plain = [0usize; 128];
            for &r in &rows {
                counts.add(r);
                for (i, n) in plain.iter_mut().enumerate() {
                    *n += ((r >> i) & 1) as usize;
                }
            }
            let want = (0..128).filter(|&i| plain[i] >= min).fold(0u128, |m, i| m | 1 << i);
            prop_assert_eq!(counts.at_least(min), want);
        }

        /// The SWAR agreement equals the byte-by-byte definition.
        #[test]
        fn swar_agreement_matches_bytewise(a in prop::collection::vec(any::<u8>(), MINVALUES),
                                           flips in prop::collection::vec((0..MINVALUES, any::<u8>()), 0..40)) {
            let a: [u8; MINVALUES] = a.try_into().unwrap();
            let mut b = a;
            for (i, v) in flips {
                b[i] = v;
            }
            let mut expect = 0u128;
            for i in 0..MINVALUES {
                expect |= u128::from(a[i] == b[i]) << i;
            }
            prop_assert_eq!(agreement(&a, &b), expect);
        }
    }
}

#[cfg(test)]
mod url_slots_props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The URL a slot of `held` holds.
    fn url_of<'a>(held: &'a [Option<String>]) -> impl Fn(u32) -> &'a str {
        |s| held[s as usize].as_deref().expect("held")
    }

    proptest! {
        /// The table of bare slot numbers finds the slot of every URL held, and none of a URL
        /// let go, as a map keyed by URL does, through growth and removals, with slots reused
        /// the way the window reuses them; rebuilt from the slots, it answers the same.
        #[test]
        fn url_slots_agree_with_a_map(ops in prop::collection::vec((0u16..300, any::<bool>()), 0..600)) {
            let mut slots = UrlSlots::default();
            let mut held: Vec<Option<String>> = Vec::new();
            let mut free: Vec<u32> = Vec::new();
            let mut model: HashMap<String, u32> = HashMap::new();
            for (n, add) in ops {
                let url = format!("http://h{}.example/p{n}", n % 7);
                if add && !model.contains_key(&url) {
                    let slot = free.pop().unwrap_or_else(|| {
                        held.push(None);
                        (held.len() - 1) as u32
                    });
                    slots.insert(&url, slot, url_of(&held));
                    held[slot as usize] = Some(url.clone());
                    model.insert(url.clone(), slot);
                } else if !add {
                    let got = slots.remove(&url, url_of(&held));
                    prop_assert_eq!(got, model.remove(&url));
                    if let Some(s) = got {
                        held[s as usize] = None;
                        free.push(s);
                    }
                }
                prop_assert_eq!(slots.len(), model.len());
                let found = slots.get(&url, url_of(&held));
                prop_assert_eq!(found, model.get(&url).copied());
                if let Some(s) = found {
                    prop_assert_eq!(url_of(&held)(s), url.as_str());
                }
            }
            let mut window = Window::default();
            window.restore_urls(held.len(), |s| held[s as usize].as_deref());
            for (url, &slot) in &model {
                prop_assert_eq!(window.by_url.get(url, url_of(&held)), Some(slot));
            }
            prop_assert_eq!(window.by_url.len(), model.len());
        }
    }
}
