//! The bag of words of a page: its distinct term fingerprints with their counts.
//!
//! Di Iorio's RP signature (seed 002 §2.1) projects the bag of words itself, so it is computed
//! from the bag rather than from every token: a page has about a quarter as many distinct terms
//! as tokens. (Alg. C, which weights every term by its frequency, counts its tokens bit-sliced
//! instead, which measured faster: see `simhash.rs`.) The bag is
//! counted in an open-addressing table keyed by the term fingerprint (already a uniform 64-bit
//! hash, so its low bits index the table directly), with a generation stamp per slot so that
//! nothing is cleared between pages and nothing is allocated once the table has grown to the
//! largest page seen.

/// Distinct term fingerprints of one page with their counts.
#[derive(Debug, Clone, Default)]
pub struct TermBag {
    /// (fingerprint, index into `entries`, generation) per slot.
    slots: Vec<(u64, u32, u32)>,
    generation: u32,
    entries: Vec<(u64, u32)>,
    tokens: usize,
}

impl TermBag {
    /// An empty bag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts the term fingerprints of a page (replacing the previous page's bag). Entries come
    /// in the order of their first occurrence.
    pub fn count(&mut self, term_fps: &[u64]) {
        self.entries.clear();
        self.tokens = term_fps.len();
        // At most half full, so probe runs stay short.
        let size = (term_fps.len() * 2).next_power_of_two().max(256);
        if size > self.slots.len() {
            self.slots.clear();
            self.slots.resize(size, (0, 0, 0));
            self.generation = 0;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Every 2^32 pages: stale stamps could look current, so clear them once.
            self.slots.iter_mut().for_each(|s| s.2 = 0);
            self.generation = 1;
        }
        let (generation, mask) = (self.generation, size - 1);
        let slots = &mut self.slots[..size];
        for &fp in term_fps {
            let mut i = fp as usize & mask;
            loop {
                let slot = &mut slots[i];
                if slot.2 != generation {
                    *slot = (fp, self.entries.len() as u32, generation);
                    self.entries.push((fp, 1));
                    break;
                }
                if slot.0 == fp {
                    let e = &mut self.entries[slot.1 as usize];
                    e.1 = e.1.saturating_add(1);
                    break;
                }
                i = (i + 1) & mask;
            }
        }
    }

    /// The distinct fingerprints with their counts.
    pub fn entries(&self) -> &[(u64, u32)] {
        &self.entries
    }

    /// The number of tokens counted (the sum of the counts).
    pub fn tokens(&self) -> usize {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The bag equals a map from fingerprint to count, in first-occurrence order, however
        /// many pages of whatever sizes came before (stale slots never leak into a page).
        #[test]
        fn bag_counts_like_a_map(pages in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![0u64..40, any::<u64>(), (0u64..8).prop_map(|x| x << 8)], 0..700), 1..6)) {
            let mut bag = TermBag::new();
            for fps in pages {
                bag.count(&fps);
                let mut expect: BTreeMap<u64, u32> = BTreeMap::new();
                let mut order = vec![];
                for &f in &fps {
                    let c = expect.entry(f).or_insert(0);
                    if *c == 0 {
                        order.push(f);
                    }
                    *c += 1;
                }
                let want: Vec<(u64, u32)> = order.iter().map(|f| (*f, expect[f])).collect();
                prop_assert_eq!(bag.entries(), &want[..]);
                prop_assert_eq!(bag.tokens(), fps.len());
            }
        }
    }
}
