//! Event-time expiry shared by every windowed structure: entries are keyed by the `fetched_at`
//! of the fetch that put them there (never the wall clock) and leave oldest first once the
//! watermark has moved a window past them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// Where an entry sits in the expiry order; keep it to move or remove the entry.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Ticket {
    at_ms: i64,
    seq: u64,
}

impl Ticket {
    /// The event time the entry was filed under.
    pub fn at_ms(self) -> i64 {
        self.at_ms
    }
}

/// Keys in event-time order, for oldest-first eviction. Out-of-order event times are fine.
///
/// A binary heap of tickets with lazy deletion, beside a map from a ticket's sequence number to
/// its key: removing an entry forgets its key, and its ticket is dropped when it reaches the top.
/// Both keep their capacity, so a steady stream of re-fetches allocates nothing (a B-tree
/// allocates a node every few inserts); stale tickets are compacted away once they outnumber the
/// live ones, so memory stays proportional to the entries filed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Expiry<K> {
    heap: BinaryHeap<Reverse<Ticket>>,
    keys: HashMap<u64, K, BuildHasherDefault<SeqHasher>>,
    seq: u64,
}

impl<K> Default for Expiry<K> {
    fn default() -> Self {
        Expiry {
            heap: BinaryHeap::new(),
            keys: HashMap::default(),
            seq: 0,
        }
    }
}

impl<K> Expiry<K> {
    /// Files `key` at event time `at_ms`.
    pub fn insert(&mut self, at_ms: i64, key: K) -> Ticket {
        self.seq += 1;
        let t = Ticket {
            at_ms,
            seq: self.seq,
        };
        if self.heap.len() >= 2 * self.keys.len() + 1024 {
            let keys = &self.keys;
            self.heap.retain(|Reverse(t)| keys.contains_key(&t.seq));
        }
        self.heap.push(Reverse(t));
        self.keys.insert(t.seq, key);
        t
    }

    /// Takes an entry out (before its time).
    pub fn remove(&mut self, ticket: Ticket) -> Option<K> {
        self.keys.remove(&ticket.seq)
    }

    /// A later fetch of the same content at `at_ms`: files the live entry of `ticket` again
    /// there and updates `ticket`. False, and nothing moved, when `at_ms` is before the entry's
    /// time (a stale fetch).
    pub fn renew(&mut self, ticket: &mut Ticket, at_ms: i64) -> bool {
        if at_ms < ticket.at_ms {
            return false;
        }
        let key = self.remove(*ticket).expect("a live entry's ticket");
        *ticket = self.insert(at_ms, key);
        true
    }

    /// The oldest entry filed before `horizon_ms`, taken out.
    pub fn pop_before(&mut self, horizon_ms: i64) -> Option<K> {
        while let Some(&Reverse(t)) = self.heap.peek() {
            if t.at_ms >= horizon_ms {
                return None;
            }
            self.heap.pop();
            if let Some(key) = self.keys.remove(&t.seq) {
                return Some(key);
            }
        }
        None
    }

    /// Entries filed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when nothing is filed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys filed, in no order.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.keys.values()
    }
}

impl Expiry<std::sync::Arc<str>> {
    /// After a restore: gives back the heap's room beyond its length and makes each key the
    /// pool's copy of its URL.
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        self.heap.shrink_to_fit();
        for key in self.keys.values_mut() {
            pool.share(key);
        }
    }
}

/// Hashes the sequence numbers of tickets: distinct integers, mixed by one multiplication.
#[derive(Debug, Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_oldest_first_and_only_before_the_horizon() {
        let mut e = Expiry::default();
        let late = e.insert(30, "c");
        e.insert(10, "a");
        let b = e.insert(20, "b");
        assert_eq!(e.remove(b), Some("b"));
        assert_eq!(e.pop_before(25), Some("a"));
        assert_eq!(e.pop_before(25), None);
        assert_eq!(late.at_ms(), 30);
        let mut late = late;
        assert!(e.renew(&mut late, 40));
        assert_eq!(late.at_ms(), 40);
        assert!(!e.renew(&mut late, 39), "an earlier fetch is stale");
        assert_eq!(late.at_ms(), 40);
        assert_eq!(e.pop_before(31), None, "filed later");
        assert_eq!(e.pop_before(41), Some("c"));
        assert!(e.is_empty());
    }

    proptest::proptest! {
        /// Against a model (a sorted list of live tickets): pops come out oldest first, only
        /// before the horizon, never a removed entry, whatever the mix of operations, and the
        /// heap's stale tickets stay bounded by the live ones.
        #[test]
        fn behaves_like_a_sorted_list(ops in proptest::collection::vec((0u8..4, 0i64..50, 0usize..64), 0..3000)) {
            let mut e = Expiry::default();
            let mut model: Vec<(Ticket, usize)> = vec![];
            for (op, t, pick) in ops {
                match op {
                    0 | 1 => {
                        let ticket = e.insert(t, pick);
                        model.push((ticket, pick));
                    }
                    2 if !model.is_empty() => {
                        let (ticket, key) = model.remove(pick % model.len());
                        proptest::prop_assert_eq!(e.remove(ticket), Some(key));
                        proptest::prop_assert_eq!(e.remove(ticket), None);
                    }
                    _ => {
                        model.sort();
                        let expect = model.first().filter(|(tk, _)| tk.at_ms < t).map(|&(_, k)| k);
                        if expect.is_some() {
                            model.remove(0);
                        }
                        proptest::prop_assert_eq!(e.pop_before(t), expect);
                    }
                }
                proptest::prop_assert_eq!(e.len(), model.len());
                proptest::prop_assert!(e.heap.len() <= 2 * e.keys.len() + 1025);
            }
        }
    }
}
