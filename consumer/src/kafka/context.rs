//! The clients' contexts: what librdkafka's callbacks tell the run loop (rebalances, errors
//! that retrying cannot cure, statistics) and how they are logged.

use super::{confirm, partitions, topic_partitions};
use crate::at_end::Prober;
use crate::telemetry::{self, Health};
use crate::throttle::{self, Throttle};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureProducer;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// Logs partition assignments and revocations, keeps [`Health`] and the lag metrics current,
/// and hands partitions over cleanly when the group rebalances: before a partition is released,
/// every output already produced is flushed and the offsets of the records applied are committed
/// (so the next owner starts exactly where this instance stopped), and the run loop is told to
/// stop applying that partition's records.
pub struct RunContext {
    pub(super) health: Arc<Health>,
    /// The run's producers (`kafka::pace`): each is flushed before partitions are released.
    pub(super) producers: Vec<Producer>,
    /// Per input partition, the offset after the last record applied (kept by the run loop).
    pub(super) applied: Arc<std::sync::Mutex<BTreeMap<i32, i64>>>,
    /// Partitions revoked since the run loop last looked.
    pub(super) revoked: Arc<std::sync::Mutex<Vec<i32>>>,
    pub(super) flush_timeout: Duration,
    /// An error retrying cannot cure (rejected credentials), for the run loop to stop on.
    pub(super) fatal: Arc<std::sync::Mutex<Option<String>>>,
    /// Repeated errors, logged once per period.
    pub(super) throttle: Arc<Throttle>,
    /// The last revocation was of partitions lost (the group dropped this member: its session
    /// expired), not handed over.
    pub(super) lost: Arc<AtomicBool>,
    /// The stage whose metrics the callbacks record, in a process that runs several.
    pub(super) stage: Option<&'static str>,
    /// The consumer group, and a client of it that never joins: the hand-over's commit is read
    /// back through it, so a release waits for the broker only so long (see
    /// [`RunContext::commit_before_release`]).
    pub(super) group: String,
    pub(super) handover_reader: std::sync::Mutex<Prober>,
}

/// The producer of `run`: its errors go through the same [`Throttle`] as the consumer's.
pub(crate) type Producer = FutureProducer<ProducerLog>;

/// The context of `run`'s producer: librdkafka's errors are counted and logged once per period
/// (the default context logs every one, twice a second per error while no broker answers).
pub struct ProducerLog {
    pub(super) throttle: Arc<Throttle>,
    /// Shared with the consumer's context: the producer's callbacks are served on its own
    /// thread, so it hears of rejected credentials first (the consumer's wait for its next poll).
    pub(super) fatal: Arc<std::sync::Mutex<Option<String>>>,
    /// The stage whose metrics the callbacks record, in a process that runs several.
    pub(super) stage: Option<&'static str>,
}

impl ClientContext for ProducerLog {
    /// The statistics a `-X statistics.interval.ms` asks of every client are the consumer's
    /// business (lag, brokers): the default would log the producer's whole document at `info`
    /// each interval.
    fn stats_raw(&self, _statistics: &[u8]) {}

    fn error(&self, error: KafkaError, reason: &str) {
        note_fatal(&self.fatal, &error, reason);
        telemetry::in_stage(self.stage, || {
            throttle::kafka_error(&self.throttle, "producer", &error, reason);
        });
    }
}

/// Keeps, for the run loop to stop on, an error that retrying cannot cure, with what to do.
pub(super) fn note_fatal(
    fatal: &std::sync::Mutex<Option<String>>,
    error: &KafkaError,
    reason: &str,
) {
    let what = match error {
        KafkaError::Global(RDKafkaErrorCode::Authentication) => format!(
            "the broker rejected neardup's credentials ({reason}); check the kafka properties \
             security.protocol, sasl.mechanism, sasl.username and sasl.password \
             (NEARDUP_KAFKA_SASL_PASSWORD)"
        ),
        // An untrusted broker certificate does not heal by retrying either. (A broker that
        // refuses neardup's own certificate only closes the connection under TLS 1.3, which
        // looks like any disconnection, so that case stays a retried warning.)
        KafkaError::Global(RDKafkaErrorCode::SSL)
            if reason.contains("certificate verify failed") =>
        {
            format!(
                "neardup does not trust the broker's TLS certificate ({reason}); set the kafka \
                 property ssl.ca.location to the certificate of the CA that signed it"
            )
        }
        _ => return,
    };
    *fatal.lock().expect("fatal error") = Some(what);
}

impl ClientContext for RunContext {
    fn stats(&self, statistics: rdkafka::Statistics) {
        telemetry::in_stage(self.stage, || {
            telemetry::record_kafka(&statistics, &self.health);
        });
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if matches!(error, KafkaError::Global(RDKafkaErrorCode::AllBrokersDown)) {
            self.health.broker_up.store(false, Ordering::Relaxed);
        }
        note_fatal(&self.fatal, &error, reason);
        // End-of-partition is expected with --exit-at-end and is handled by the loop.
        if !matches!(
            error,
            KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
        ) {
            telemetry::in_stage(self.stage, || {
                throttle::kafka_error(&self.throttle, "consumer", &error, reason);
            });
        }
    }
}

/// The longest a partition's hand-over waits for the broker to confirm its commit (shorter if
/// `--drain-timeout` is). A confirmation takes milliseconds; one that has not come by then is
/// most likely lost, and every member of the group waits for this one meanwhile. Giving up
/// costs only repeated outputs: the next owner starts at the last commit.
pub(super) const HANDOVER_COMMIT_WAIT: Duration = Duration::from_secs(5);

impl RunContext {
    /// Commits `offsets` and waits until the broker shows them, at most
    /// [`HANDOVER_COMMIT_WAIT`] or `flush_timeout`, whichever is shorter. The run loop is inside
    /// its poll of the consumer meanwhile, so this wait holds up the whole instance.
    /// librdkafka's synchronous commit has no bound of its own: a commit that its coordinator
    /// never answered held the release until librdkafka dropped the connection, 11 s later,
    /// when a heartbeat queued behind the commit timed out
    /// (`a_hand_over_whose_commit_is_never_answered_is_bounded`); the commit's own timeout is
    /// `socket.timeout.ms`, a minute. So the commit is sent asynchronously and read back, as
    /// the run loop's confirmed commits are (see [`confirm`]).
    pub(super) fn commit_before_release(
        &self,
        consumer: &BaseConsumer<Self>,
        offsets: &TopicPartitionList,
    ) -> std::result::Result<(), String> {
        consumer
            .commit(offsets, CommitMode::Async)
            .map_err(|e| e.to_string())?;
        // The consumer reads one topic (`applied` is kept by partition alone).
        let elements = offsets.elements();
        let Some(topic) = elements.first().map(|e| e.topic()) else {
            return Ok(());
        };
        let wanted: BTreeMap<i32, i64> = elements
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(next) => Some((e.partition(), next)),
                _ => None,
            })
            .collect();
        let mut reader = self.handover_reader.lock().expect("hand-over reader");
        let limit = self.flush_timeout.min(HANDOVER_COMMIT_WAIT);
        confirm(&mut reader, &self.group, topic, &wanted, limit)
    }
}

impl ConsumerContext for RunContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let lost = consumer.assignment_lost();
        if lost {
            self.lost.store(true, Ordering::Relaxed);
        }
        // The run loop is inside `recv` (which runs this callback), so every record it applied
        // has all its outputs with the producer: once they are flushed, their offsets may be
        // committed. If the flush fails, nothing is committed: the next owner starts earlier
        // and repeats outputs (with the same ids), which at-least-once allows.
        let applied = self.applied.lock().expect("applied offsets").clone();
        let mut offsets = TopicPartitionList::new();
        for e in tpl.elements() {
            if let Some(&next) = applied.get(&e.partition()) {
                let _ =
                    offsets.add_partition_offset(e.topic(), e.partition(), Offset::Offset(next));
            }
        }
        info!(partitions = ?partitions(tpl), lost, "releasing partitions: flushing their outputs, then committing");
        let deadline = std::time::Instant::now() + self.flush_timeout;
        let flushed = self.producers.iter().try_for_each(|p| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rdkafka::producer::Producer::flush(p, left)
        });
        match flushed {
            // Lost partitions (the session expired: the broker out of reach, or a stall) are
            // the group's to give away already: it would refuse the commit.
            Ok(()) if lost && offsets.count() > 0 => {
                warn!(offsets = ?partitions(&offsets), "partitions lost (this instance's session in the group expired): their outputs are flushed but their offsets not committed; the next owner repeats some outputs")
            }
            Ok(()) if offsets.count() > 0 => match self.commit_before_release(consumer, &offsets) {
                Ok(()) => {
                    info!(offsets = ?partitions(&offsets), "outputs flushed and offsets committed before the partitions are released")
                }
                Err(e) => {
                    warn!(error = %e, "commit before releasing partitions failed; the next owner repeats some outputs")
                }
            },
            Ok(()) => {}
            Err(e) => {
                warn!(error = %e, "flush before releasing partitions failed; the next owner repeats some outputs")
            }
        }
        self.revoked
            .lock()
            .expect("revoked partitions")
            .extend(tpl.elements().iter().map(|e| e.partition()));
    }

    fn post_rebalance(&self, _c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Added to (a cooperative assignment names only the partitions it adds).
                self.health
                    .owned
                    .lock()
                    .expect("owned partitions")
                    .extend(topic_partitions(tpl));
                info!(partitions = ?partitions(tpl), "partitions assigned")
            }
            Rebalance::Revoke(tpl) => {
                let mut owned = self.health.owned.lock().expect("owned partitions");
                for tp in topic_partitions(tpl) {
                    owned.remove(&tp);
                }
                info!(partitions = ?partitions(tpl), "partitions revoked")
            }
            Rebalance::Error(e) => warn!(error = %e, "rebalance error"),
        }
    }
}
