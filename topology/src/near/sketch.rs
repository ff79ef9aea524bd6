//! What the index keeps of a page's signatures ([`Sketch`]) and how two sketches compare
//! ([`compare_sited`]): Alg. B's supershingles and Alg. C's simhash bits (seed 001 §2, after
//! Broder et al. and Charikar), and the b-bit min-value agreement the default policy estimates
//! Jaccard from; and the 32-bit table keys (bands, pieces, checksum) a page is filed under.

use super::{BAND_ROWS, BAND_STARTS, PIECE_TABLE_BASE};
use crate::sketch::minhash::{fmix64, BSketch, MINVALUES, PER_SUPERSHINGLE, SUPERSHINGLES};
use crate::sketch::simhash::{self, SimHash};

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

/// What verification reads of a page's signatures: a [`Sketch`], or the index's compact record
/// of one (which keeps fewer bits of the normalised-text hash).
pub trait Signatures {
    /// One byte per min-value.
    fn mins(&self) -> &[u8; MINVALUES];
    /// The top 16 bits of each supershingle.
    fn ss(&self) -> &[u16; SUPERSHINGLES];
    /// The 384-bit simhash.
    fn simhash(&self) -> [u64; 6];
    /// 64 bits of the content checksum.
    fn checksum(&self) -> u64;
    /// Bits of the normalised-text hash: equal for equal texts, unequal for all but a few
    /// unequal ones.
    fn text(&self) -> u64;
    /// The title's hash (0: none).
    fn title(&self) -> u32;
    /// False for a page without terms: it only takes part in exact pairs.
    fn has_terms(&self) -> bool;
}

impl Signatures for Sketch {
    fn mins(&self) -> &[u8; MINVALUES] {
        &self.mins
    }
    fn ss(&self) -> &[u16; SUPERSHINGLES] {
        &self.ss
    }
    fn simhash(&self) -> [u64; 6] {
        self.simhash
    }
    fn checksum(&self) -> u64 {
        self.checksum
    }
    fn text(&self) -> u64 {
        self.text
    }
    fn title(&self) -> u32 {
        self.title
    }
    fn has_terms(&self) -> bool {
        self.has_terms
    }
}

/// The byte kept of a 64-bit min-value: the top byte of a multiplicative mix, so every bit of
/// the min-value takes part (a min-value's own top bits are nearly fixed by its bin).
pub fn min_byte(v: u64) -> u8 {
    (fmix64(v) >> 56) as u8
}

pub(super) fn key32(table: u32, value: u64) -> u32 {
    (fmix64(value ^ (u64::from(table) << 56) ^ u64::from(table).wrapping_mul(0x9e37_79b9)) >> 32)
        as u32
}

/// The band key of band `j`: its [`BAND_ROWS`] min-value bytes from [`BAND_STARTS`].
pub(super) fn band_key(mins: &[u8; MINVALUES], j: usize) -> u32 {
    let mut v = 0u64;
    for &m in &mins[BAND_STARTS[j]..BAND_STARTS[j] + BAND_ROWS] {
        v = v << 8 | u64::from(m);
    }
    key32(j as u32, v)
}

pub(super) fn piece_key(sim: &[u64; 6], j: usize) -> u32 {
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
pub(super) fn bbit_estimate(agree: u32, of: u32) -> f64 {
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
pub fn compare_sited<S: Signatures>(
    a: &S,
    mask_a: u128,
    b: &S,
    mask_b: u128,
    one_site: bool,
) -> Comparison {
    let agree_bits = agreement(a.mins(), b.mins());
    let agreeing = agree_bits.count_ones();
    let mut b_similarity = 0u8;
    let (ssa, ssb) = (a.ss(), b.ss());
    for s in 0..SUPERSHINGLES {
        let group = ((1u128 << PER_SUPERSHINGLE) - 1) << (s * PER_SUPERSHINGLE);
        if ssa[s] == ssb[s] && agree_bits & group == group {
            b_similarity += 1;
        }
    }
    let differ: u32 = (a.simhash().iter())
        .zip(&b.simhash())
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
        exact: a.checksum() == b.checksum(),
        // Equal texts have every min-value equal. Requiring it keeps a chance match of the
        // index's 31 text bits (one unequal pair in two billion) from making a pair of pages
        // that differ in their shingles; pages whose min-values all agree are near-identical.
        same_text: a.text() == b.text() && agreeing == MINVALUES as u32,
    }
}

#[cfg(test)]
mod agreement_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
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
