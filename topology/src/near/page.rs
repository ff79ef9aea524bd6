//! What the index keeps per windowed page: the record with its sketch and boilerplate mask,
//! and the slots seen while a page is filed.

use super::{Signatures, Sketch};
use crate::sketch::minhash::{MINVALUES, SUPERSHINGLES};
use std::sync::Arc;

/// A windowed page's record: 192 bytes (200 while it kept a whole [`Sketch`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Page {
    pub(super) sketch: Stored,
    pub(super) mask: Mask,
    /// [`url_name`] of the URL.
    pub(super) name: u32,
    pub(super) url: Arc<str>,
}

/// A page's [`Sketch`] as its record keeps it, in 160 bytes aligned to 4 (a `Sketch` takes 168
/// aligned to 8, for its `u64`s and its flag, and made the record 200 bytes): the simhash and
/// the checksum in 32-bit words, and 31 bits of the normalised-text hash with the flag in the
/// 32nd. Two unequal texts agree in 31 bits once in two billion pairs, and a pair needs every
/// min-value equal as well to count as equal texts ([`super::compare_sited`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Stored {
    #[serde(with = "crate::fixed::bytes")]
    pub(super) mins: [u8; MINVALUES],
    #[serde(with = "crate::fixed::le")]
    pub(super) ss: [u16; SUPERSHINGLES],
    #[serde(with = "crate::fixed::le")]
    pub(super) simhash: [u32; 12],
    pub(super) checksum: [u32; 2],
    /// 31 bits of the normalised-text hash, and [`Stored::TERMS`].
    pub(super) text: u32,
    pub(super) title: u32,
}

impl Stored {
    const TERMS: u32 = 1 << 31;

    pub(super) fn new(s: &Sketch) -> Stored {
        Stored {
            mins: s.mins,
            ss: s.ss,
            simhash: std::array::from_fn(|i| halves(s.simhash[i / 2])[i % 2]),
            checksum: halves(s.checksum),
            text: (s.text as u32 & !Self::TERMS) | if s.has_terms { Self::TERMS } else { 0 },
            title: s.title,
        }
    }

    /// The sketch this record keeps, with the text bits it keeps.
    pub(super) fn sketch(&self) -> Sketch {
        Sketch {
            mins: self.mins,
            ss: self.ss,
            simhash: self.simhash(),
            checksum: self.checksum(),
            text: self.text(),
            title: self.title,
            has_terms: self.has_terms(),
        }
    }
}

/// A `u64` as its low and high 32-bit halves.
fn halves(w: u64) -> [u32; 2] {
    [w as u32, (w >> 32) as u32]
}

/// The `u64` of its low and high halves ([`halves`] undone).
fn whole([low, high]: [u32; 2]) -> u64 {
    u64::from(low) | u64::from(high) << 32
}

impl Signatures for Stored {
    fn mins(&self) -> &[u8; MINVALUES] {
        &self.mins
    }
    fn ss(&self) -> &[u16; SUPERSHINGLES] {
        &self.ss
    }
    fn simhash(&self) -> [u64; 6] {
        std::array::from_fn(|i| whole([self.simhash[2 * i], self.simhash[2 * i + 1]]))
    }
    fn checksum(&self) -> u64 {
        whole(self.checksum)
    }
    fn text(&self) -> u64 {
        u64::from(self.text & !Self::TERMS)
    }
    fn title(&self) -> u32 {
        self.title
    }
    fn has_terms(&self) -> bool {
        self.text & Self::TERMS != 0
    }
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

/// The slots seen since the last [`Seen::clear`]: a bit per slot, and the slots whose bit is
/// set. Clearing costs as many steps as slots were seen, not as the window has.
#[derive(Debug, Default, Clone)]
pub(super) struct Seen {
    bits: Vec<u64>,
    set: Vec<u32>,
}

impl Seen {
    /// True the first time `slot` is seen since the last [`Self::clear`].
    pub(super) fn first(&mut self, slot: u32) -> bool {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        if word >= self.bits.len() {
            self.bits.resize(word + 1 + word / 8, 0);
        }
        if self.bits[word] & bit != 0 {
            return false;
        }
        self.bits[word] |= bit;
        self.set.push(slot);
        true
    }

    /// Forgets every slot seen.
    pub(super) fn clear(&mut self) {
        for slot in self.set.drain(..) {
            self.bits[slot as usize / 64] = 0;
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.set.capacity() * 4
    }
}

#[cfg(test)]
mod seen_props {
    use super::Seen;
    use proptest::prelude::*;
    use std::collections::HashSet;

    proptest! {
        /// `first` answers as a set of the slots seen since the last clear does, over slots
        /// that share words and slots far apart, and `clear` forgets them all.
        #[test]
        fn seen_agrees_with_a_set(ops in prop::collection::vec(
            prop_oneof![
                8 => (0u32..300).prop_map(Some),
                1 => (0u32..100_000).prop_map(Some),
                2 => Just(None),
            ], 0..500)) {
            let mut seen = Seen::default();
            let mut model = HashSet::new();
            for op in ops {
                match op {
                    Some(slot) => prop_assert_eq!(seen.first(slot), model.insert(slot)),
                    None => {
                        seen.clear();
                        model.clear();
                        prop_assert!(seen.bits.iter().all(|&w| w == 0));
                    }
                }
            }
        }
    }
}
