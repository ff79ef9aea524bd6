//! The sites of the windowed pages, numbered, and the per-position counts the default policy's
//! boilerplate sampling adds up (seed 001 §4: discount what recurs across one site's pages).

use crate::site;
use std::collections::HashMap;

/// Site names ([`site::site`], lower-cased) and their numbers, for the sites of the pages held:
/// a site leaves with its last page and its number is reused, so a crawl that passes millions
/// of sites through the window holds only the window's (site numbers are only compared between
/// pages held).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Sites {
    pub(super) numbers: HashMap<Box<str>, u32>,
    /// Pages held per site number (0: the number is free).
    pub(super) pages: Vec<u32>,
    pub(super) free: Vec<u32>,
}

impl Sites {
    pub(super) fn name(url: &str) -> std::borrow::Cow<'_, str> {
        let name = site::site(site::host(url));
        match name.bytes().any(|b| b.is_ascii_uppercase()) {
            true => name.to_ascii_lowercase().into(),
            false => name.into(),
        }
    }

    /// The number of `url`'s site, which holds one page more.
    pub(super) fn enter(&mut self, url: &str) -> u32 {
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
    pub(super) fn leave(&mut self, url: &str, n: u32) {
        let held = &mut self.pages[n as usize];
        *held -= 1;
        if *held == 0 {
            let removed = self.numbers.remove(Self::name(url).as_ref());
            debug_assert_eq!(removed, Some(n), "{url}");
            self.free.push(n);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.numbers.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.numbers.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
            + self.numbers.keys().map(|k| k.len()).sum::<usize>()
            + (self.pages.capacity() + self.free.capacity()) * 4
    }
}

/// One counter per min-value position, bit-sliced: plane `j` holds bit `j` of every position's
/// count, so adding a sample page's agreement bits is a ripple-carry add over a few words, not
/// one addition per position.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) planes: Vec<u128>,
}

impl Counts {
    /// Adds one to the count of every position whose bit is set in `bits`.
    pub(super) fn add(&mut self, bits: u128) {
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
    pub(super) fn at_least(&self, min: usize) -> u128 {
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

#[cfg(test)]
mod counts_props {
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
    }
}
