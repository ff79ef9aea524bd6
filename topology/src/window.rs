//! Event-time expiry shared by every windowed structure: entries are keyed by the `fetched_at`
//! of the fetch that put them there (never the wall clock) and leave oldest first once the
//! watermark has moved a window past them.

use std::collections::BTreeMap;

/// Where an entry sits in the expiry order; keep it to move or remove the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
#[derive(Debug, Clone)]
pub struct Expiry<K> {
    queue: BTreeMap<Ticket, K>,
    seq: u64,
}

impl<K> Default for Expiry<K> {
    fn default() -> Self {
        Expiry {
            queue: BTreeMap::new(),
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
        self.queue.insert(t, key);
        t
    }

    /// Takes an entry out (before its time).
    pub fn remove(&mut self, ticket: Ticket) -> Option<K> {
        self.queue.remove(&ticket)
    }

    /// The oldest entry filed before `horizon_ms`, taken out.
    pub fn pop_before(&mut self, horizon_ms: i64) -> Option<K> {
        let entry = self.queue.first_entry()?;
        (entry.key().at_ms < horizon_ms).then(|| entry.remove())
    }

    /// Entries filed.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when nothing is filed.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
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
        assert_eq!(e.pop_before(31), Some("c"));
        assert!(e.is_empty());
    }
}
