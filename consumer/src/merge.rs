//! Event-time order across input partitions.
//!
//! Kafka orders records within a partition only, and one consumer receives its partitions in
//! batches: a whole batch of one partition may arrive before anything of another, though the
//! other's records are older. Applied in arrival order, a page of the ahead partition would be
//! compared with pages of the other from long before, and pairs that held in between would be
//! missed. So the stateful stages buffer prepared records per partition and apply the partition
//! heads in event-time order, the rule Kafka Streams uses: the head with the oldest event time
//! goes next, once every assigned partition that may have more data has a head to compare with.
//! A partition read to its end (with nothing of it still being prepared) is not waited for; one
//! whose data is slow to come is waited for at most `--partition-wait`, after which records go
//! on in event-time order among those there. The index stage of a split topology also waits,
//! up to `--upstream-wait`, for a partition of its internal topic that the sign stage has not
//! yet filled (its input partition not signed to the end: [`crate::upstream`]): that partition
//! being at its end says nothing while the instance signing it lags.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Prepared records waiting to be applied, per partition in offset order.
#[derive(Debug)]
pub struct Merge<T> {
    queues: BTreeMap<i32, VecDeque<(Option<i64>, T)>>,
    len: usize,
    /// When the current wait for an empty partition began.
    waiting_since: Option<Instant>,
    /// How long the current wait may last (the longest any awaited partition is waited for).
    wait: Duration,
}

impl<T> Default for Merge<T> {
    fn default() -> Self {
        Merge {
            queues: BTreeMap::new(),
            len: 0,
            waiting_since: None,
            wait: Duration::ZERO,
        }
    }
}

impl<T> Merge<T> {
    /// Buffers the next record of `partition`, with its event time (`None`: a record without
    /// one, such as a dead letter, which goes as soon as it is a head).
    pub fn push(&mut self, partition: i32, event_ms: Option<i64>, item: T) {
        self.queues
            .entry(partition)
            .or_default()
            .push_back((event_ms, item));
        self.len += 1;
    }

    /// Each partition's first buffered record.
    pub fn heads(&self) -> impl Iterator<Item = (i32, &T)> {
        self.queues
            .iter()
            .filter_map(|(&p, q)| q.front().map(|(_, item)| (p, item)))
    }

    /// Records buffered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing buffered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next record to apply: the head with the oldest event time (ties: the lower
    /// partition). `None` while nothing is buffered, or while an assigned partition that has
    /// nothing buffered is awaited and the wait, begun at the first such call, is shorter than
    /// the longest `wait_for` of the awaited partitions (`wait_for(p)`: how long `p` may be
    /// waited for, `None` if it has nothing more to give, being read to its end with nothing
    /// still being prepared). With `flush` it never waits (a checkpoint needs every record read
    /// applied).
    pub fn pop(
        &mut self,
        assigned: &HashSet<i32>,
        wait_for: impl Fn(i32) -> Option<Duration>,
        now: Instant,
        flush: bool,
    ) -> Option<(i32, T)> {
        if self.len == 0 {
            self.waiting_since = None;
            return None;
        }
        let wait = assigned
            .iter()
            .filter(|p| self.queues.get(p).is_none_or(VecDeque::is_empty))
            .filter_map(|&p| wait_for(p))
            .max();
        match wait {
            Some(wait) if !flush => {
                let since = *self.waiting_since.get_or_insert(now);
                self.wait = wait;
                if now < since + wait {
                    return None;
                }
            }
            _ => self.waiting_since = None,
        }
        let (&partition, _) = self
            .queues
            .iter()
            .filter_map(|(p, q)| q.front().map(|(at, _)| (p, at.unwrap_or(i64::MIN))))
            .min_by_key(|&(p, at)| (at, *p))?;
        let (_, item) = self.queues.get_mut(&partition)?.pop_front()?;
        self.len -= 1;
        Some((partition, item))
    }

    /// A wait for a partition's next record holds the buffered records back at `now`: the run
    /// loop reads on, past its bound on records in flight, since nothing buffered can go before
    /// that record arrives (or the wait runs out, and the bound holds again).
    pub fn waiting(&self, now: Instant) -> bool {
        self.waiting_since
            .is_some_and(|since| now < since + self.wait)
    }

    /// When the current wait ends, if one is under way.
    pub fn deadline(&self) -> Option<Instant> {
        self.waiting_since.map(|since| since + self.wait)
    }

    /// Whether `partition` has records buffered.
    pub fn holds(&self, partition: i32) -> bool {
        self.queues.get(&partition).is_some_and(|q| !q.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WAIT: Duration = Duration::from_secs(1);

    fn set(ps: &[i32]) -> HashSet<i32> {
        ps.iter().copied().collect()
    }

    #[test]
    fn heads_go_in_event_time_order_with_records_without_one_first() {
        let mut m = Merge::default();
        m.push(0, Some(10), "a10");
        m.push(0, Some(30), "a30");
        m.push(1, Some(20), "b20");
        m.push(1, None, "b-dead");
        m.push(1, Some(30), "b30");
        let now = Instant::now();
        let mut order = vec![];
        while let Some((_, x)) = m.pop(&set(&[0, 1]), |_| None, now, false) {
            order.push(x);
        }
        // b's dead letter waits behind b20 (order within a partition is kept); ties go to the
        // lower partition.
        assert_eq!(order, ["a10", "b20", "b-dead", "a30", "b30"]);
        assert!(m.is_empty());
    }

    #[test]
    fn an_empty_partition_that_may_have_more_is_waited_for_at_most_the_wait() {
        let mut m = Merge::default();
        let t0 = Instant::now();
        m.push(0, Some(50), "a50");
        m.push(0, Some(60), "a60");
        let assigned = set(&[0, 1]);
        assert!(!m.waiting(t0));
        assert!(m.pop(&assigned, |_| Some(WAIT), t0, false).is_none());
        assert_eq!(m.deadline(), Some(t0 + WAIT));
        assert!(
            m.waiting(t0 + WAIT / 2),
            "the run loop may read past its bound now"
        );
        assert!(!m.waiting(t0 + WAIT), "not once the wait ran out");
        // Partition 1's older record arrives in time: it goes first.
        m.push(1, Some(40), "b40");
        let t1 = t0 + WAIT / 2;
        assert_eq!(
            m.pop(&assigned, |_| Some(WAIT), t1, false),
            Some((1, "b40"))
        );
        assert_eq!(
            m.deadline(),
            None,
            "no wait under way after a pop without one"
        );
        assert!(!m.waiting(t1));
        // Partition 1 is empty again: wait anew, then go on without it.
        assert!(m.pop(&assigned, |_| Some(WAIT), t1, false).is_none());
        let late = t1 + WAIT;
        assert_eq!(
            m.pop(&assigned, |_| Some(WAIT), late, false),
            Some((0, "a50"))
        );
        assert_eq!(
            m.pop(&assigned, |_| Some(WAIT), late, false),
            Some((0, "a60"))
        );
        assert_eq!(m.pop(&assigned, |_| Some(WAIT), late, false), None);
    }

    #[test]
    fn partitions_that_have_no_more_are_not_waited_for_and_a_flush_never_waits() {
        let t0 = Instant::now();
        let mut m = Merge::default();
        m.push(0, Some(5), 5);
        assert_eq!(
            m.pop(&set(&[0, 1]), |p| (p == 0).then_some(WAIT), t0, false),
            Some((0, 5))
        );
        m.push(0, Some(6), 6);
        assert_eq!(m.pop(&set(&[0, 1]), |_| Some(WAIT), t0, true), Some((0, 6)));
    }

    #[test]
    fn a_partition_the_stage_before_still_fills_is_waited_for_longer() {
        let mut m = Merge::default();
        let t0 = Instant::now();
        m.push(0, Some(50), "a50");
        let assigned = set(&[0, 1, 2]);
        let long = WAIT * 30;
        // Partition 1 is slow in its own topic; partition 2's signer lags.
        let wait_for = |p| match p {
            1 => Some(WAIT),
            2 => Some(long),
            _ => None,
        };
        assert!(m.pop(&assigned, wait_for, t0, false).is_none());
        assert_eq!(m.deadline(), Some(t0 + long));
        assert!(
            m.pop(&assigned, wait_for, t0 + WAIT, false).is_none(),
            "past the short wait, the long one holds"
        );
        assert!(m.waiting(t0 + WAIT));
        // Partition 2's record arrives: only partition 1's wait is left, and it ran out.
        m.push(2, Some(60), "c60");
        assert!(m.holds(2) && !m.holds(1));
        assert_eq!(
            m.pop(&assigned, wait_for, t0 + WAIT, false),
            Some((0, "a50"))
        );
        assert!(!m.waiting(t0 + WAIT));
    }

    proptest! {
        /// With every record buffered and nothing awaited, the order is the merge of the
        /// partitions' sequences by (event time, partition), each partition's order kept: the
        /// model takes the smallest head each time.
        #[test]
        fn buffered_records_come_out_merged(
            parts in proptest::collection::vec(
                proptest::collection::vec(proptest::option::weighted(0.9, 0i64..50), 0..20), 1..4),
        ) {
            let mut m = Merge::default();
            for (p, recs) in parts.iter().enumerate() {
                for (i, at) in recs.iter().enumerate() {
                    m.push(p as i32, *at, (p, i));
                }
            }
            let mut heads = vec![0usize; parts.len()];
            let assigned: HashSet<i32> = (0..parts.len() as i32).collect();
            let now = Instant::now();
            while let Some((p, item)) = m.pop(&assigned, |_| None, now, false) {
                let want = (0..parts.len())
                    .filter(|&q| heads[q] < parts[q].len())
                    .min_by_key(|&q| (parts[q][heads[q]].unwrap_or(i64::MIN), q))
                    .unwrap();
                prop_assert_eq!(item, (want, heads[want]));
                prop_assert_eq!(p as usize, want);
                heads[want] += 1;
            }
            prop_assert!(heads.iter().zip(&parts).all(|(h, r)| *h == r.len()));
        }
    }
}
