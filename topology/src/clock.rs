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
//!
//! **Leaps.** One record dated far ahead (a fetcher whose clock is years off, a date parsed
//! from the wrong field) would otherwise move the watermark there at once: every page in the
//! window would leave, every pair would be retracted, and the records after it, dated as they
//! should be, would all be stale. So a record more than `max_lead_ms` ahead of the newest event
//! time trusted so far is a *leap*: it is processed, but its time moves nothing until
//! [`LEAP_RECORDS`] records of its partition in a row leap too (the crawl really moved on, after
//! a pause); a record of that partition within the bound ends the leap. By default the topology
//! bounds the lead by the window's length, so that no single record can empty it, and files a
//! page whose date is held back at the newest trusted time (so a later fetch of its URL is not
//! stale). The cost falls on a real pause longer than the bound: the first `LEAP_RECORDS − 1`
//! pages after it are filed at the old time and leave the window with the old pages when the
//! clock follows, until they are fetched again.
//!
//! **The first date is on probation.** A fresh clock has nothing to compare its first record
//! with, so it publishes no watermark (nothing leaves a window, nothing is stale) until
//! [`LEAP_RECORDS`] records agree with the first date, within the bound. If that many records
//! in a row are dated more than the bound behind it instead, the first record was the odd one
//! out (a fetcher's clock years ahead at the very start), and the clock starts from the dates
//! of the records that were behind it. With no bound (`i64::MAX`) every date is trusted from
//! the first.

use std::collections::BTreeMap;

/// Records of one partition in a row that must all lead the clock by more than the bound before
/// it follows them.
pub const LEAP_RECORDS: u32 = 16;

/// Per partition, the newest event time; and the watermark they make.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventClock {
    newest: BTreeMap<i32, i64>,
    /// Per partition, the leap under way: how many records in a row led by more than the
    /// bound, and the newest of them.
    leaps: BTreeMap<i32, (u32, i64)>,
    newest_overall: i64,
    watermark: i64,
    /// Records whose time was held back as a leap.
    held: u64,
    /// While the first date is on probation (see the module doc): records in agreement with
    /// it so far, how many in a row were dated more than the bound behind it, and the newest
    /// of all those behind it, by partition. `None` once the clock trusts its dates.
    probation: Option<(u32, u32, BTreeMap<i32, i64>)>,
}

impl Default for EventClock {
    fn default() -> Self {
        EventClock {
            newest: BTreeMap::new(),
            leaps: BTreeMap::new(),
            newest_overall: i64::MIN,
            watermark: i64::MIN,
            held: 0,
            probation: Some((0, 0, BTreeMap::new())),
        }
    }
}

impl EventClock {
    /// Notes a record of `partition` at `at_ms` and returns the watermark: the slowest
    /// partition's newest event time, but at least `max_skew_ms` behind the newest of all.
    /// It never goes back. A record more than `max_lead_ms` ahead of the newest trusted time is
    /// a leap (see the module doc): it moves nothing until [`LEAP_RECORDS`] in a row confirm it.
    pub fn observe(
        &mut self,
        partition: i32,
        at_ms: i64,
        max_skew_ms: i64,
        max_lead_ms: i64,
    ) -> i64 {
        if max_lead_ms == i64::MAX {
            // Every date trusted: nothing is on probation.
            self.probation = None;
        }
        if self.newest_overall != i64::MIN && self.outvoted(partition, at_ms, max_lead_ms) {
            return self.watermark;
        }
        let at_ms = match self.leap(at_ms, max_lead_ms) {
            false => {
                self.leaps.remove(&partition);
                at_ms
            }
            true => {
                let (count, newest) = self.leaps.entry(partition).or_insert((0, i64::MIN));
                *count += 1;
                *newest = (*newest).max(at_ms);
                if *count < LEAP_RECORDS {
                    self.held += 1;
                    return self.watermark;
                }
                let confirmed = *newest;
                self.leaps.remove(&partition);
                // Records enough agree on the new time: the first date is not in question.
                self.probation = None;
                confirmed
            }
        };
        let newest = self.newest.entry(partition).or_insert(i64::MIN);
        *newest = (*newest).max(at_ms);
        self.newest_overall = self.newest_overall.max(at_ms);
        if let Some((agreeing, _, _)) = &mut self.probation {
            *agreeing += 1;
            if *agreeing < LEAP_RECORDS {
                return self.watermark;
            }
            self.probation = None;
        }
        let slowest = self.newest.values().copied().min().unwrap_or(i64::MIN);
        let bound = self.newest_overall.saturating_sub(max_skew_ms.max(0));
        self.watermark = self.watermark.max(slowest.max(bound));
        self.watermark
    }

    /// While the first date is on probation, notes a record dated more than the bound behind
    /// it (true: the clock is not moved) or ends a run of such records (false). When
    /// [`LEAP_RECORDS`] records in a row are that far behind, the first date was the odd one
    /// out: the clock starts again from the dates of every record that was behind it (false:
    /// the record completing the run goes on).
    fn outvoted(&mut self, partition: i32, at_ms: i64, max_lead_ms: i64) -> bool {
        let Some((_, behind, run)) = &mut self.probation else {
            return false;
        };
        if at_ms >= self.newest_overall.saturating_sub(max_lead_ms.max(0)) {
            *behind = 0;
            return false;
        }
        *behind += 1;
        let newest = run.entry(partition).or_insert(i64::MIN);
        *newest = (*newest).max(at_ms);
        if *behind < LEAP_RECORDS {
            return true;
        }
        self.newest = std::mem::take(run);
        self.newest_overall = self.newest.values().copied().max().unwrap_or(i64::MIN);
        self.leaps.clear();
        self.probation = None;
        // The record goes on as a trusted one, and the watermark (never published while on
        // probation) is made from the new dates.
        false
    }

    /// Takes the watermark and newest event time another stage's clock reached (a split
    /// cluster stage follows its index stage's). The watermark never goes back.
    pub fn follow(&mut self, watermark: i64, newest: i64) {
        self.watermark = self.watermark.max(watermark);
        self.newest_overall = self.newest_overall.max(newest);
    }

    /// The watermark (`i64::MIN` before any record, and while the first date is on probation).
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// The newest event time of any partition (`i64::MIN` before any record), leaps not
    /// confirmed left out.
    pub fn newest(&self) -> i64 {
        self.newest_overall
    }

    /// Whether a record at `at_ms` would be a leap: more than `max_lead_ms` ahead of the
    /// newest trusted event time (never the first record).
    pub fn leap(&self, at_ms: i64, max_lead_ms: i64) -> bool {
        self.newest_overall != i64::MIN
            && at_ms > self.newest_overall.saturating_add(max_lead_ms.max(0))
    }

    /// Whether [`Self::observe`] would hold a record of `partition` at `at_ms` back: a leap
    /// that is not the one completing [`LEAP_RECORDS`] in a row.
    pub fn would_hold(&self, partition: i32, at_ms: i64, max_lead_ms: i64) -> bool {
        let run = self.leaps.get(&partition).map_or(0, |l| l.0);
        self.leap(at_ms, max_lead_ms) && run + 1 < LEAP_RECORDS
    }

    /// Records whose time was held back as a leap, in all.
    pub fn held(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;
    /// A lead bound no record passes: the clock as it was before leaps.
    const NO_LEAPS: i64 = i64::MAX;

    #[test]
    fn one_partition_moves_the_watermark_to_its_newest_event() {
        let mut c = EventClock::default();
        assert_eq!(c.observe(0, 10 * H, 24 * H, NO_LEAPS), 10 * H);
        // Out of order within the partition: the watermark stays.
        assert_eq!(c.observe(0, 7 * H, 24 * H, NO_LEAPS), 10 * H);
        assert_eq!(c.observe(0, 12 * H, 24 * H, NO_LEAPS), 12 * H);
    }

    #[test]
    fn the_slowest_partition_holds_the_watermark_within_the_skew() {
        let mut c = EventClock::default();
        c.observe(0, 100 * H, 24 * H, NO_LEAPS);
        // Partition 1 is replayed from 10 hours behind.
        assert_eq!(
            c.observe(1, 90 * H, 24 * H, NO_LEAPS),
            100 * H,
            "it never goes back"
        );
        assert_eq!(
            c.observe(0, 105 * H, 24 * H, NO_LEAPS),
            100 * H,
            "held by partition 1"
        );
        assert_eq!(c.observe(1, 103 * H, 24 * H, NO_LEAPS), 103 * H);
        // Partition 1 stops; partition 0 runs on: held back at most the skew.
        assert_eq!(c.observe(0, 120 * H, 24 * H, NO_LEAPS), 103 * H);
        assert_eq!(c.observe(0, 130 * H, 24 * H, NO_LEAPS), 106 * H);
        assert_eq!(c.observe(0, 200 * H, 24 * H, NO_LEAPS), 176 * H);
        assert_eq!(c.newest(), 200 * H);
    }

    #[test]
    fn a_skew_of_zero_is_the_newest_event_time() {
        let mut c = EventClock::default();
        c.observe(0, 5 * H, 0, NO_LEAPS);
        assert_eq!(c.observe(1, H, 0, NO_LEAPS), 5 * H);
        assert_eq!(c.observe(1, 9 * H, 0, NO_LEAPS), 9 * H);
    }

    /// A clock past its probation: LEAP_RECORDS records of partition 0 at `at`.
    fn settled(at: i64, lead: i64) -> EventClock {
        let mut c = EventClock::default();
        for _ in 0..LEAP_RECORDS {
            c.observe(0, at, 24 * H, lead);
        }
        assert_eq!(c.watermark(), at);
        c
    }

    #[test]
    fn the_first_date_is_on_probation_until_enough_records_agree() {
        let lead = 14 * 24 * H;
        // Agreeing records: the watermark is published on the LEAP_RECORDS-th.
        let mut c = EventClock::default();
        for k in 1..LEAP_RECORDS {
            assert_eq!(c.observe(0, i64::from(k) * H, 24 * H, lead), i64::MIN);
        }
        let last = i64::from(LEAP_RECORDS) * H;
        assert_eq!(c.observe(0, last, 24 * H, lead), last);
        // A first record a century ahead: the records after it outvote it, and the clock
        // starts from their dates on the LEAP_RECORDS-th.
        let far = 100 * 365 * 24 * H;
        let mut c = EventClock::default();
        assert_eq!(c.observe(0, far, 24 * H, lead), i64::MIN);
        for k in 1..LEAP_RECORDS {
            assert_eq!(
                c.observe(k as i32 % 2, i64::from(k) * H, 24 * H, lead),
                i64::MIN
            );
        }
        assert_eq!(c.newest(), far, "not yet outvoted");
        assert_eq!(
            c.observe(1, last, 24 * H, lead),
            last - 2 * H,
            "the slower partition's"
        );
        assert_eq!(c.newest(), last);
        // Leaps off (no bound): every date is trusted from the first.
        let mut c = EventClock::default();
        assert_eq!(c.observe(0, far, 24 * H, NO_LEAPS), far);
    }

    #[test]
    fn a_leap_moves_the_clock_only_when_enough_records_in_a_row_make_it() {
        let lead = 14 * 24 * H;
        let mut c = settled(10 * H, lead);
        let far = 10 * H + 100 * 365 * 24 * H;
        // One record a century ahead moves nothing, nor do the next ones while a record within
        // the bound comes between.
        assert!(c.would_hold(0, far, lead) && !c.would_hold(0, 11 * H, lead));
        assert_eq!(c.observe(0, far, 24 * H, lead), 10 * H);
        assert_eq!(c.newest(), 10 * H);
        for _ in 0..LEAP_RECORDS - 2 {
            assert_eq!(c.observe(0, far, 24 * H, lead), 10 * H);
        }
        assert_eq!(
            c.observe(0, 11 * H, 24 * H, lead),
            11 * H,
            "within the bound"
        );
        assert_eq!(c.held(), u64::from(LEAP_RECORDS) - 1);
        // A pause longer than the bound, after which every record is ahead: the clock follows
        // on the LEAP_RECORDS-th, to the newest of them.
        let resumed = 11 * H + 30 * 24 * H;
        for k in 0..LEAP_RECORDS - 1 {
            assert_eq!(c.observe(0, resumed + i64::from(k), 24 * H, lead), 11 * H);
        }
        let last = resumed + i64::from(LEAP_RECORDS);
        assert!(
            c.leap(last, lead) && !c.would_hold(0, last, lead),
            "the one that completes it"
        );
        assert_eq!(c.observe(0, last, 24 * H, lead), last);
        assert_eq!(c.newest(), last);
        // Another partition's leap is its own: partition 1's records do not end partition 0's.
        let mut c = settled(10 * H, lead);
        for _ in 0..LEAP_RECORDS - 1 {
            c.observe(0, far, 24 * H, lead);
            c.observe(1, 10 * H, 24 * H, lead);
        }
        assert_eq!(
            c.observe(0, far, 24 * H, lead),
            far - 24 * H,
            "the skew bound holds it"
        );
    }

    proptest! {
        /// A few records dated far ahead (fewer than LEAP_RECORDS in each partition, so never
        /// enough in a row) change nothing: at every other record the watermark is what it is
        /// without them, and at theirs it stays where it was.
        #[test]
        fn isolated_leaps_change_nothing(
            records in proptest::collection::vec((0i32..3, 0i64..1000), 1..150),
            bogus in proptest::collection::vec((0usize..150, 0i32..3, 0i64..1_000_000), 0..15),
            skew in 0i64..300,
        ) {
            let lead = 1000;
            let mut clean = EventClock::default();
            let want: Vec<i64> = records.iter().map(|&(p, t)| clean.observe(p, t, skew, lead)).collect();
            let mut c = EventClock::default();
            let mut last = i64::MIN;
            for (i, &(p, t)) in records.iter().enumerate() {
                for &(_, bp, bt) in bogus.iter().filter(|b| b.0 == i) {
                    // Far ahead of anything, but not the first record (the next test).
                    if i > 0 {
                        prop_assert_eq!(c.observe(bp, 2000 + bt, skew, lead), last);
                    }
                }
                last = c.observe(p, t, skew, lead);
                prop_assert_eq!(last, want[i]);
            }
            prop_assert_eq!(c.newest(), clean.newest());
        }

        /// A first record dated far ahead is outvoted by the records after it: at every one of
        /// them the watermark is what it is without it (none while the first dates are on
        /// probation, as for any stream).
        #[test]
        fn a_first_record_far_ahead_changes_nothing(
            records in proptest::collection::vec((0i32..3, 0i64..1000), 1..150),
            first in (0i32..3, 0i64..1_000_000),
            skew in 0i64..300,
        ) {
            let lead = 1000;
            let mut clean = EventClock::default();
            let mut c = EventClock::default();
            c.observe(first.0, 2000 + first.1, skew, lead);
            for &(p, t) in &records {
                prop_assert_eq!(c.observe(p, t, skew, lead), clean.observe(p, t, skew, lead));
            }
            if records.len() >= LEAP_RECORDS as usize {
                prop_assert_eq!(c.newest(), clean.newest());
            }
        }

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
                let w = c.observe(p, t, skew, NO_LEAPS);
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
