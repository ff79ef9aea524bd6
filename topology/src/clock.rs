//! Event time across input partitions: the watermark that moves the windows.
//!
//! Kafka orders records within a partition only. One consumer reads several partitions, and
//! they need not advance together: after a restart one partition may be replayed from far
//! behind the others, and a partition that a slow crawler feeds lags one that a fast crawler
//! feeds. Were the windows moved by the newest event time of any partition, the records of a
//! lagging partition would fall outside the window and be ignored as stale, and the pages they
//! would have paired with would be evicted too early.
//!
//! So each partition keeps the newest event time it has delivered, and the watermark is the
//! slowest partition's (as Flink and Kafka Streams align event time). A partition that stops
//! delivering (its crawler is done, or it went to another instance) must not hold the windows
//! forever; the watermark therefore never lags the newest event time by more than
//! `max_skew_ms`, which bounds what an idle partition costs: the window holds at most that
//! much more event time. A record further behind than the window plus the skew is stale. The
//! clock only reads records' event times, never the wall clock, so a replay of one record
//! order moves it identically.

use std::collections::BTreeMap;

/// Per partition, the newest event time; and the watermark they make.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventClock {
    newest: BTreeMap<i32, i64>,
    newest_overall: i64,
    watermark: i64,
}

impl Default for EventClock {
    fn default() -> Self {
        EventClock {
            newest: BTreeMap::new(),
            newest_overall: i64::MIN,
            watermark: i64::MIN,
        }
    }
}

impl EventClock {
    /// Notes a record of `partition` at `at_ms` and returns the watermark: the slowest
    /// partition's newest event time, but at least `max_skew_ms` behind the newest of all.
    /// It never goes back.
    pub fn observe(&mut self, partition: i32, at_ms: i64, max_skew_ms: i64) -> i64 {
        let newest = self.newest.entry(partition).or_insert(i64::MIN);
        *newest = (*newest).max(at_ms);
        self.newest_overall = self.newest_overall.max(at_ms);
        let slowest = self.newest.values().copied().min().unwrap_or(i64::MIN);
        let bound = self.newest_overall.saturating_sub(max_skew_ms.max(0));
        self.watermark = self.watermark.max(slowest.max(bound));
        self.watermark
    }

    /// Takes the watermark and newest event time another stage's clock reached (a split
    /// cluster stage follows its index stage's). The watermark never goes back.
    pub fn follow(&mut self, watermark: i64, newest: i64) {
        self.watermark = self.watermark.max(watermark);
        self.newest_overall = self.newest_overall.max(newest);
    }

    /// The watermark (`i64::MIN` before any record).
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// The newest event time of any partition (`i64::MIN` before any record).
    pub fn newest(&self) -> i64 {
        self.newest_overall
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    #[test]
    fn one_partition_moves_the_watermark_to_its_newest_event() {
        let mut c = EventClock::default();
        assert_eq!(c.observe(0, 10 * H, 24 * H), 10 * H);
        // Out of order within the partition: the watermark stays.
        assert_eq!(c.observe(0, 7 * H, 24 * H), 10 * H);
        assert_eq!(c.observe(0, 12 * H, 24 * H), 12 * H);
    }

    #[test]
    fn the_slowest_partition_holds_the_watermark_within_the_skew() {
        let mut c = EventClock::default();
        c.observe(0, 100 * H, 24 * H);
        // Partition 1 is replayed from 10 hours behind.
        assert_eq!(c.observe(1, 90 * H, 24 * H), 100 * H, "it never goes back");
        assert_eq!(
            c.observe(0, 105 * H, 24 * H),
            100 * H,
            "held by partition 1"
        );
        assert_eq!(c.observe(1, 103 * H, 24 * H), 103 * H);
        // Partition 1 stops; partition 0 runs on: held back at most the skew.
        assert_eq!(c.observe(0, 120 * H, 24 * H), 103 * H);
        assert_eq!(c.observe(0, 130 * H, 24 * H), 106 * H);
        assert_eq!(c.observe(0, 200 * H, 24 * H), 176 * H);
        assert_eq!(c.newest(), 200 * H);
    }

    #[test]
    fn a_skew_of_zero_is_the_newest_event_time() {
        let mut c = EventClock::default();
        c.observe(0, 5 * H, 0);
        assert_eq!(c.observe(1, H, 0), 5 * H);
        assert_eq!(c.observe(1, 9 * H, 0), 9 * H);
    }

    proptest! {
        /// Against a direct model: the watermark is the running maximum of
        /// max(min over partitions of their newest, newest overall - skew), so it never goes
        /// back, never passes the newest event, and never lags it by more than the skew.
        #[test]
        fn the_watermark_follows_the_model(
            records in proptest::collection::vec((0i32..4, 0i64..1000), 1..200),
            skew in 0i64..300,
        ) {
            let mut c = EventClock::default();
            let mut newest: BTreeMap<i32, i64> = BTreeMap::new();
            let mut last = i64::MIN;
            for (p, t) in records {
                let w = c.observe(p, t, skew);
                let e = newest.entry(p).or_insert(t);
                *e = (*e).max(t);
                let all = *newest.values().max().unwrap();
                let slowest = *newest.values().min().unwrap();
                let want = last.max(slowest.max(all - skew));
                prop_assert_eq!(w, want);
                prop_assert!(w <= all && w >= all - skew && w >= last);
                last = w;
            }
        }
    }
}
