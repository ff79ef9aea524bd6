//! Crawl rounds as the page events name them (`crawl_id`), for what ends with a round: the
//! collections epoch and the figures by round.
//!
//! A crawl's rounds overlap at their edges: a fetcher still finishing round 1 sends its last
//! pages after round 2's first have come, or a topic's partitions, merged, interleave the two.
//! A round is over when a round not seen before begins, not whenever the crawl id differs
//! from the last one: an event of a round that has ended is *late* and ends nothing. Taken the
//! other way, each late event ended the round under way and began a round of its own (a
//! replay of the benchmark's small crawl shuffled within blocks of 500 events gave 131 rounds
//! instead of 3; shuffled whole, 6,057), and each of those ends ran the collections epoch
//! over every cluster (12.6 s instead of 0.9 s for that crawl shuffled whole).

use std::collections::VecDeque;

/// How many ended rounds are remembered: an event of a round ended longer ago begins a round
/// again. A stream that names a round per fetch (a fetch id as the crawl id) keeps no more
/// than this many names.
const REMEMBERED: usize = 64;

/// The round under way and those that ended before it.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Rounds {
    current: Option<String>,
    /// The last [`REMEMBERED`] ended rounds, oldest first.
    ended: VecDeque<String>,
}

/// What an event's crawl id says of the rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// The round under way, or no crawl id (an event without one belongs to the round under
    /// way).
    Same,
    /// A round not seen before begins; the one under way, if any (named), has ended.
    New(Option<String>),
    /// An event of a round that has ended: it ends nothing.
    Late,
}

impl Rounds {
    /// What an event of round `crawl_id` is, the rounds moved on accordingly.
    pub(crate) fn step(&mut self, crawl_id: Option<&str>) -> Step {
        let Some(id) = crawl_id else {
            return Step::Same;
        };
        if self.current.as_deref() == Some(id) {
            return Step::Same;
        }
        if self.ended.iter().any(|e| e == id) {
            return Step::Late;
        }
        let ended = self.current.replace(id.to_owned());
        if let Some(e) = &ended {
            self.remember(e.clone());
        }
        Step::New(ended)
    }

    /// Ends the round under way (at the end of a replay), returning its name. Idempotent.
    pub(crate) fn end(&mut self) -> Option<String> {
        let ended = self.current.take()?;
        self.remember(ended.clone());
        Some(ended)
    }

    /// The round under way.
    pub(crate) fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    fn remember(&mut self, ended: String) {
        if self.ended.len() == REMEMBERED {
            self.ended.pop_front();
        }
        self.ended.push_back(ended);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn steps(ids: &[Option<&str>]) -> Vec<Step> {
        let mut r = Rounds::default();
        ids.iter().map(|id| r.step(*id)).collect()
    }

    #[test]
    fn a_late_event_ends_nothing_and_a_new_round_ends_the_one_under_way() {
        let got = steps(&[
            None,
            Some("w1"),
            Some("w1"),
            Some("w2"),
            Some("w1"),
            None,
            Some("w2"),
            Some("w3"),
            Some("w1"),
            Some("w2"),
        ]);
        use Step::*;
        let w = |s: &str| New(Some(s.to_owned()));
        assert_eq!(
            got,
            [
                Same,
                New(None),
                Same,
                w("w1"),
                Late,
                Same,
                Same,
                w("w2"),
                Late,
                Late
            ]
        );
    }

    #[test]
    fn end_closes_the_round_under_way_once_and_it_stays_ended() {
        let mut r = Rounds::default();
        assert_eq!(r.end(), None);
        r.step(Some("w1"));
        assert_eq!(r.current(), Some("w1"));
        assert_eq!(r.end(), Some("w1".to_owned()));
        assert_eq!(r.end(), None);
        assert_eq!(r.step(Some("w1")), Step::Late);
    }

    #[test]
    fn only_the_last_rounds_are_remembered() {
        let mut r = Rounds::default();
        for i in 0..=REMEMBERED + 1 {
            assert_eq!(
                r.step(Some(&i.to_string())),
                Step::New((i > 0).then(|| (i - 1).to_string()))
            );
        }
        assert_eq!(r.ended.len(), REMEMBERED);
        // Round 1 is among the last REMEMBERED ended; round 0 is forgotten and begins again.
        assert_eq!(r.step(Some("1")), Step::Late);
        assert!(matches!(r.step(Some("0")), Step::New(_)));
    }

    proptest! {
        /// Rounds one after another, each event of a round possibly held back (late) past the
        /// first events of the next few: every round begins once, in order, and each late event
        /// is told late; events in order are never late.
        #[test]
        fn overlapping_rounds_begin_once_each_in_order(
            sizes in prop::collection::vec(1usize..12, 1..8),
            delays in prop::collection::vec(0usize..20, 100),
        ) {
            // (position in the stream, round); an event held back by d slots sorts d later.
            let mut events = Vec::new();
            let mut at = 0usize;
            for (round, &n) in sizes.iter().enumerate() {
                for i in 0..n {
                    // A round's first event is never held back: it is where the round begins.
                    let d = if i == 0 { 0 } else { delays[(at + i) % delays.len()] };
                    events.push((at + i + d, at + i, round));
                }
                at += n;
            }
            events.sort();
            let mut r = Rounds::default();
            let mut begun = Vec::new();
            let mut newest = None;
            for &(_, _, round) in &events {
                let id = format!("w{round}");
                match r.step(Some(&id)) {
                    Step::New(_) => begun.push(round),
                    Step::Late => prop_assert!(newest.is_some_and(|n| round < n)),
                    Step::Same => prop_assert_eq!(newest, Some(round)),
                }
                newest = newest.max(Some(round));
            }
            let in_order: Vec<usize> = (0..sizes.len()).collect();
            prop_assert_eq!(begun, in_order);
        }
    }
}
