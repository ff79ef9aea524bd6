//! Copies of input records, used again once a record is applied (by `neardup run` and by a
//! replay): a fresh allocation of a page's size is often fresh memory, whose first touch (a page
//! fault, zeroing) cost more than the copy itself (`perf`: 14 % of the run loop's time).

/// A pool of record buffers.
#[derive(Default)]
pub(crate) struct Buffers(Vec<Vec<u8>>);

impl Buffers {
    /// Buffers kept for reuse: as many as records preparing at once on two cores.
    pub(crate) const KEEP: usize = 128;
    /// Larger buffers are freed, so the pool holds at most KEEP times this (8 MiB). 92.5 % of
    /// the bench's medium crawl's records are smaller; a larger pool cost 30 MiB of peak RSS.
    const LARGEST: usize = 64 << 10;

    /// `bytes` in a buffer of the pool large enough for them (the latest such), or a new one.
    /// A pool buffer is never grown: growing copies its old allocation whole (`realloc` knows
    /// nothing of the length), so a record larger than every pooled buffer gets a new one of
    /// exactly its size.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut b = match self.0.iter().rposition(|b| b.capacity() >= bytes.len()) {
            Some(i) => self.0.swap_remove(i),
            None => Vec::with_capacity(bytes.len()),
        };
        b.clear();
        b.extend_from_slice(bytes);
        b
    }

    /// Keeps `b` for a later record, unless the pool is full or `b` is large.
    pub(crate) fn put(&mut self, b: Vec<u8>) {
        if self.0.len() < Self::KEEP && b.capacity() <= Self::LARGEST {
            self.0.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Buffers;

    #[test]
    fn buffers_hold_each_copy_exactly_and_keep_only_small_ones() {
        let mut b = Buffers::default();
        let long = vec![7u8; 1000];
        let first = b.copy(&long);
        assert_eq!(first, long);
        b.put(first);
        // A reused buffer holds only the new bytes, not the tail of the old ones.
        assert_eq!(b.copy(b"short"), b"short");
        assert!(b.0.is_empty());
        b.put(vec![0; Buffers::LARGEST + 1]);
        assert!(b.0.is_empty(), "a large buffer is freed");
        for _ in 0..Buffers::KEEP + 10 {
            b.put(Vec::with_capacity(16));
        }
        assert_eq!(b.0.len(), Buffers::KEEP);
    }

    #[test]
    fn a_record_takes_a_pooled_buffer_large_enough_or_a_new_exact_one() {
        let mut b = Buffers::default();
        b.put(Vec::with_capacity(100));
        b.put(Vec::with_capacity(10));
        // Larger than both: a new buffer of its size, the pool untouched.
        let big = b.copy(&[1; 500]);
        assert_eq!((big.len(), big.capacity()), (500, 500));
        assert_eq!(b.0.len(), 2);
        // The latest buffer large enough is taken.
        let mid = b.copy(&[2; 50]);
        assert_eq!(mid, vec![2; 50]);
        assert_eq!(mid.capacity(), 100, "the pooled buffer, not a new one");
        assert_eq!(b.0.len(), 1);
        assert_eq!(b.0[0].capacity(), 10);
    }
}
