//! What the index keeps per windowed page: the record with its sketch and boilerplate mask,
//! and the dense per-slot site and sighting.

use super::Sketch;
use crate::sketch::minhash::MINVALUES;
use std::sync::Arc;

/// A windowed page's record: 200 bytes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Page {
    pub(super) sketch: Sketch,
    pub(super) mask: Mask,
    /// [`url_name`] of the URL.
    pub(super) name: u32,
    pub(super) url: Arc<str>,
}

/// A page's boilerplate mask (one bit per min-value position) and whether it came from a full
/// site sample (else it may still grow: see `mature_sample`), in 12 bytes aligned to 4 (a
/// `u128`, aligned to 16, made the record 208 bytes).
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Mask(pub(super) [u32; 3]);

impl Mask {
    pub(super) const MATURE: u32 = 1 << 31;

    pub(super) fn new(bits: u128, mature: bool) -> Mask {
        debug_assert!(bits >> MINVALUES == 0);
        let hi = (bits >> 64) as u32 | if mature { Self::MATURE } else { 0 };
        Mask([bits as u32, (bits >> 32) as u32, hi])
    }

    pub(super) fn bits(self) -> u128 {
        let [a, b, c] = self.0;
        u128::from(a) | u128::from(b) << 32 | u128::from(c & !Self::MATURE) << 64
    }

    pub(super) fn mature(self) -> bool {
        self.0[2] & Self::MATURE != 0
    }
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct SlotInfo {
    pub(super) site: u32,
    pub(super) seen: u32,
}
