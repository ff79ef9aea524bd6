//! Which partitions of the index stage's input the sign stage may still fill.
//!
//! The index stage merges the partitions of `PREFIX internal.signed` by event time
//! ([`crate::merge`]), and a partition read to its end is not waited for. But while the sign
//! stage runs beside it, an internal partition at its end may only mean that the instance
//! signing the matching input partition lags (it started later, restarts, or was slow): applying
//! the other partitions' records meanwhile would apply them before older pages of that one, and
//! the outputs would depend on how the sign instances were scheduled. So a thread watches the
//! sign stage as the index stage's consumer cannot. An internal partition is *filled* once its
//! input partition has no record past the sign group's committed offset (a stage commits an
//! offset only once the outputs of the records before it are acknowledged, so they are then all
//! in the internal partition) or past the last page the index stage received of it (each
//! internal record carries the input offset it was signed from), and the internal partition
//! holds nothing past what the index stage has received. Every other partition is *lagging*,
//! and the merge waits for it up to `--upstream-wait`.
//!
//! It is the rule [`crate::at_end`] applies once, at the end of a run, applied all along: a
//! cross-stage watermark. While the input keeps growing, the index stage applies a record once
//! every partition has one to compare with, or once the signer of a partition that has none has
//! caught up with its input (an idle input partition holds the others back for about one
//! question, 100 ms, or until the sign group's commit when its last records were dead letters).

use crate::at_end::Prober;
use crate::kafka::KafkaOptions;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{debug, info};

/// How often the thread asks the broker again.
const PERIOD: Duration = Duration::from_millis(100);

/// An answer: the lagging partitions of the index stage's input, as of the moment the index
/// stage had received the records before `as_of` (per partition). A partition not lagging is
/// filled for those records only: a record received later may have been signed from an input
/// record that came after the answer was asked, so it waits for the next answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    /// The partitions the sign stage may still fill.
    pub lagging: HashSet<i32>,
    /// Per partition, the offset after the last record received when the question was asked.
    pub as_of: BTreeMap<i32, i64>,
}

impl Answer {
    /// Whether the answer holds for a record at `offset` of `partition`: one received after the
    /// question was asked waits for the next answer.
    pub fn covers(&self, partition: i32, offset: i64) -> bool {
        self.as_of.get(&partition).is_some_and(|&end| offset < end)
    }
}

/// What the index stage has received, per partition (the internal topic's and the input's
/// partitions have the same numbers).
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// The offset after the last record received of each internal partition.
    pub internal: BTreeMap<i32, i64>,
    /// The input offset after the last page received (and decoded) from each partition: the sign
    /// stage has signed the input partition that far.
    pub input: BTreeMap<i32, i64>,
}

/// The latest answer; `None` until the first (every partition is then taken to lag).
pub type Lagging = Option<Answer>;

/// The watching thread, stopped when dropped.
pub struct Upstream {
    stop: Arc<AtomicBool>,
    /// Whether the index stage reads its input, so that there is something to ask: a standby
    /// (`--lease`, and every standing-by instance of `--scale-out`) does not ask the broker
    /// ten times a second for nothing.
    active: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    /// Watches the sign stage of `opts` (the index stage's options, as the user gave them,
    /// before `KafkaOptions::for_stage`): its group and the input topic, and the internal
    /// topic the index stage reads as group `index_group`. `received`: what the index stage
    /// has received, which its run loop keeps. The answers go to the returned receiver.
    /// It asks only once [`Upstream::activate`]d, or from the start if `active`.
    pub fn watch(
        opts: &KafkaOptions,
        index_group: String,
        received: Arc<Mutex<Received>>,
        active: bool,
    ) -> (Upstream, watch::Receiver<Lagging>) {
        let (tx, rx) = watch::channel(None);
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicBool::new(active));
        let asks = active.clone();
        let mut probe = Prober::new(opts);
        let sign_group = opts.group.clone();
        let input = opts.input_topic.clone();
        let internal = opts.internal_topic();
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("upstream".into())
            .spawn(crate::telemetry::staged(move || {
                let mut said: Option<Vec<i32>> = None;
                while !stopping.load(Ordering::Relaxed) {
                    if !asks.load(Ordering::Relaxed) {
                        std::thread::sleep(PERIOD);
                        continue;
                    }
                    let asking = std::time::Instant::now();
                    let asked = lagging(
                        &mut probe,
                        &sign_group,
                        &input,
                        &index_group,
                        &internal,
                        &received,
                    );
                    debug!(took = ?asking.elapsed(), answer = ?asked.as_ref().map_err(|e| format!("{e:#}")), "asked where the sign stage stands");
                    match asked {
                        Ok(answer) => {
                            let mut shown: Vec<i32> = answer.lagging.iter().copied().collect();
                            shown.sort_unstable();
                            if said.as_ref() != Some(&shown) {
                                if shown.is_empty() {
                                    info!(group = %sign_group, "the sign stage has signed every input partition to its end and the records are here");
                                } else {
                                    info!(group = %sign_group, partitions = ?shown, "the sign stage has not yet signed these input partitions to their end: the index stage waits for their records (--upstream-wait)");
                                }
                                said = Some(shown);
                            }
                            tx.send_if_modified(|now| {
                                let changed = now.as_ref() != Some(&answer);
                                *now = Some(answer);
                                changed
                            });
                        }
                        // Unanswered: the last answer stands (at first, every partition lags).
                        Err(e) => debug!("cannot tell yet where the sign stage stands: {e:#}"),
                    }
                    std::thread::sleep(PERIOD);
                }
            }))
            .expect("a thread to watch the sign stage");
        (
            Upstream {
                stop,
                active,
                thread: Some(thread),
            },
            rx,
        )
    }
}

impl Upstream {
    /// Starts asking: the index stage reads its input now (a standby took the lease).
    pub fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Each question to the broker is bounded, so the thread ends soon; nobody waits for it.
        drop(self.thread.take());
    }
}

/// The partitions of `internal` that may still get records: those whose input partition has
/// records past the sign group's commit and past the last page the index stage received of
/// it, and those holding records past what the index
/// stage had received when asked (or, for a partition it had received nothing of, past its
/// group's commit).
fn lagging(
    probe: &mut Prober,
    sign_group: &str,
    input: &str,
    index_group: &str,
    internal: &str,
    received: &Mutex<Received>,
) -> anyhow::Result<Answer> {
    // What the index stage has received, before the sign stage's commits are read.
    let got = received.lock().expect("received offsets").clone();
    let partitions = probe.partitions(input)?;
    let signed = probe.committed(sign_group, input, &partitions)?;
    // Signed up to the group's commit, or up to the last page received if further (the commit
    // follows by up to the sign stage's --commit-interval).
    let from: Vec<(i32, Option<i64>)> = partitions
        .iter()
        .map(|&p| {
            let through = [signed.get(&p), got.input.get(&p)]
                .into_iter()
                .flatten()
                .max();
            (p, through.copied())
        })
        .collect();
    let mut lag = probe.partitions_with_records(input, &from)?;
    // Read after the sign group's commits: what they cover is in the internal topic now.
    let filled: Vec<i32> = partitions
        .iter()
        .copied()
        .filter(|p| !lag.contains(p))
        .collect();
    let unseen: Vec<i32> = filled
        .iter()
        .copied()
        .filter(|p| !got.internal.contains_key(p))
        .collect();
    let committed = probe.committed(index_group, internal, &unseen)?;
    let from: Vec<(i32, Option<i64>)> = filled
        .iter()
        .map(|&p| (p, got.internal.get(&p).or(committed.get(&p)).copied()))
        .collect();
    lag.extend(probe.partitions_with_records(internal, &from)?);
    Ok(Answer {
        lagging: lag,
        as_of: got.internal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_holds_only_for_records_received_before_it_was_asked() {
        let answer = Answer {
            lagging: [1].into_iter().collect(),
            as_of: [(0, 10), (1, 4)].into_iter().collect(),
        };
        assert!(answer.covers(0, 9));
        assert!(!answer.covers(0, 10), "received after the question");
        assert!(answer.covers(1, 3));
        assert!(
            !answer.covers(2, 0),
            "a partition it knew nothing of when asked"
        );
    }
}
