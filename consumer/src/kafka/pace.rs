//! Which of the all-in-one `run`'s two producers takes a record's outputs: the one that lingers
//! briefly while it keeps up with its input, the one that batches longer while it works off a
//! backlog. (A split stage keeps one producer: see `run::start::clients`.)
//!
//! Every produce request costs the broker a fixed amount besides the bytes it carries, and a
//! producer that lingers 5 ms sends one or more requests every 5 ms. While `neardup run` reads
//! a backlog (a replay of a topic, a restart after an outage, the bench's throughput runs), its
//! outputs wait in Kafka for seconds anyway, and batches of 50 ms cost them nothing that
//! matters. Against the test broker on the bench's medium crawl (`neardup run --assign`, runs
//! alternated), `linger.ms` 50 instead of 5 took the broker's CPU time from 13.3 to 11.3 s and
//! the run's time from 18.9 to 17.7 s (medians of five pairs), and this lane took the broker's
//! 0.3-2.8 s down in each of nine pairs with the build before it (README, "Batching while
//! behind"). While the stage keeps up, 50 ms would be most of a pair event's delay, so the
//! short linger stays there.
//!
//! How far behind the stage is comes from each input record's Kafka timestamp, against this
//! host's clock: at [`ENTER_MS`] or more the outputs go to the bulk producer, below
//! [`LEAVE_MS`] back to the fast one (between the two, where they went). A record without a
//! timestamp counts as fresh. A clock that runs ahead of the input producers' by more than
//! [`ENTER_MS`] sends every output through the bulk producer, adding its linger to each
//! output's delay; one that runs behind keeps the fast one.
//!
//! Before the first output goes to the other producer, the one left is flushed: the outputs of
//! one key reach each topic in the order they were made, as with one producer.
//!
//! Signature events are batched longer in either lane: they go through the bulk producer
//! always (`run::Senders`), so each topic still has one producer at a time. Every input record
//! has one, and they are nearly all of the output bytes (on the bench's medium crawl 598 MB of
//! 613 MB), while the pair, cluster, hint and mirror events are 32,491 in all (several often
//! from one record) and 2 % of the bytes. With them on the fast producer, it sent a request
//! every 5 ms whether or not anything urgent was in it; without them, it sends when a record
//! has such an event. In steady state against the test broker (`e2e_bench --latency-only
//! --latency-warm 21366`, 2,576 records/s, six alternated pairs on restarted brokers), the
//! pair events' p99 was lower in five pairs of six (a median of 364 ms against 406 ms), and
//! their median in five too. A signature event waits up to [`BULK_LINGER_MS`] more.

/// A record this old (ms, by its Kafka timestamp) means a backlog.
pub(crate) const ENTER_MS: i64 = 2_000;

/// Below this age (ms), the stage has caught up.
pub(crate) const LEAVE_MS: i64 = 500;

/// The bulk producer's `linger.ms` (the all-in-one process only: a split stage keeps one
/// producer, see `run::start::clients`).
pub(crate) const BULK_LINGER_MS: u32 = 50;

/// Which producer takes the outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Lane {
    /// The producer that lingers briefly.
    #[default]
    Fast,
    /// The producer that lingers longer.
    Bulk,
}

/// The choice of lane, record by record.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    lane: Lane,
}

impl Pace {
    /// The lane for the outputs of a record `age_ms` old (None: no timestamp), and whether it
    /// differs from the last record's (then the producer of the lane left must be flushed
    /// first).
    pub(crate) fn lane(&mut self, age_ms: Option<i64>) -> (Lane, bool) {
        let next = match (self.lane, age_ms) {
            (_, None) => Lane::Fast,
            (Lane::Fast, Some(a)) if a >= ENTER_MS => Lane::Bulk,
            (Lane::Bulk, Some(a)) if a < LEAVE_MS => Lane::Fast,
            (lane, Some(_)) => lane,
        };
        let switched = next != self.lane;
        self.lane = next;
        (next, switched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_backlog_goes_to_the_bulk_lane_and_leaves_it_when_caught_up() {
        let mut p = Pace::default();
        assert_eq!(p.lane(Some(30)), (Lane::Fast, false));
        assert_eq!(p.lane(Some(ENTER_MS - 1)), (Lane::Fast, false));
        assert_eq!(p.lane(Some(ENTER_MS)), (Lane::Bulk, true));
        // Between the thresholds, it stays.
        assert_eq!(p.lane(Some(LEAVE_MS)), (Lane::Bulk, false));
        assert_eq!(p.lane(Some(LEAVE_MS - 1)), (Lane::Fast, true));
        assert_eq!(p.lane(Some(LEAVE_MS + 1)), (Lane::Fast, false));
        // No timestamp: fresh.
        assert_eq!(p.lane(Some(60_000)), (Lane::Bulk, true));
        assert_eq!(p.lane(None), (Lane::Fast, true));
        // A clock behind the input's: negative ages are fresh.
        assert_eq!(p.lane(Some(-5_000)), (Lane::Fast, false));
    }

    proptest! {
        /// Against a model: the lane is bulk exactly when the last age at or over ENTER_MS came
        /// after the last one under LEAVE_MS (or a missing timestamp), and a switch is reported
        /// exactly when the lane changes.
        #[test]
        fn lanes_follow_the_last_decisive_age(ages in prop::collection::vec(
            prop::option::weighted(0.9, -1_000i64..5_000), 0..200)) {
            let mut p = Pace::default();
            let mut before = Lane::Fast;
            for (i, &age) in ages.iter().enumerate() {
                let (lane, switched) = p.lane(age);
                let decisive = ages[..=i].iter().rev().find_map(|a| match a {
                    None => Some(Lane::Fast),
                    Some(a) if *a >= ENTER_MS => Some(Lane::Bulk),
                    Some(a) if *a < LEAVE_MS => Some(Lane::Fast),
                    Some(_) => None,
                });
                prop_assert_eq!(lane, decisive.unwrap_or(Lane::Fast));
                prop_assert_eq!(switched, lane != before);
                before = lane;
            }
        }
    }
}
