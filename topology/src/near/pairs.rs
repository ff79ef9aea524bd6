//! What the index keeps per live pair: its report, and each page's partners.

use super::bbit_estimate;
use crate::multimap::MultiMap;
use crate::sketch::minhash::MINVALUES;
use neardup_schemas::PairLevel;

/// Each page's partners (the pages it has live pairs with), in pairing order: a [`MultiMap`]
/// keyed by slot number. The slot is multiplied by an odd constant first, a bijection that
/// spreads consecutive slots over the table's homes (which it takes from a key's high bits).
/// A `HashMap<u32, Vec<u32>>` cost about 70 bytes per page with pairs.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Partners(pub(super) MultiMap);

impl Partners {
    pub(super) fn key(slot: u32) -> u32 {
        slot.wrapping_mul(0x9e37_79b1)
    }

    pub(super) fn of(&self, slot: u32) -> &[u32] {
        self.0.get(Self::key(slot))
    }

    /// Pairs `a` and `b`.
    pub(super) fn link(&mut self, a: u32, b: u32) {
        self.0.insert(Self::key(a), b);
        self.0.insert(Self::key(b), a);
    }

    /// Removes `to` from the partners of `from`.
    pub(super) fn unlink(&mut self, from: u32, to: u32) {
        self.0.remove(Self::key(from), to);
    }

    /// Removes the partners of `slot` (not `slot` from theirs) and returns them.
    pub(super) fn take(&mut self, slot: u32) -> Vec<u32> {
        self.0.take(Self::key(slot))
    }

    pub(super) fn bytes(&self) -> usize {
        let (entries, lists) = self.0.bytes();
        entries + lists
    }
}

/// A live pair's report: 6 bytes, so an entry of the pair map is 16 (the estimated Jaccard is
/// kept as the agreeing min-value count it is computed from, not as an `f64`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct PairInfo {
    pub(super) level: PairLevel,
    pub(super) b: u8,
    pub(super) c: u16,
    /// Agreeing min-values, 0..=84 ([`Comparison::agreeing`]).
    pub(super) agreeing: u8,
    /// Both pages on one site (their site numbers agree: the URLs are not parsed again).
    pub(super) same_site: bool,
}

impl PairInfo {
    /// The estimated Jaccard the pair reports ([`Comparison::jaccard`], to 4 decimals).
    pub(super) fn jaccard(&self) -> f64 {
        (bbit_estimate(u32::from(self.agreeing), MINVALUES as u32) * 1e4).round() / 1e4
    }
}
