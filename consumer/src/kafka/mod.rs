//! `neardup run`: the topology between Kafka topics, at-least-once.
//!
//! **Guarantee.** An input offset is committed only after every output record it caused has been
//! acknowledged by the broker, and only once every earlier input of its partition is in the same
//! state (the committed offset is the *next* offset to read). Outputs are idempotent by
//! `event_id`, so the repeats a restart produces can be dropped downstream.
//!
//! **State after a restart.** The topology's state (window, clusters) is rebuilt before the first
//! new record of a partition is processed: the partition is re-read silently from its earliest
//! retained offset up to the committed one, through the same deterministic topology, so the
//! outputs that follow are the ones an uninterrupted run would have produced, with the same
//! `event_id`s. With `--checkpoint-dir`, the state is restored from the last checkpoint first
//! ([`crate::checkpoints`]) and each partition is re-read only from the offset the checkpoint
//! reflects. A checkpoint is written every `--checkpoint-interval` and at shutdown, at a barrier:
//! input pauses until every record read is applied and its outputs acknowledged, the offsets are
//! committed, then the state is written with them, so a checkpoint never reflects a record whose
//! outputs could be lost. On a rebalance, a partition is released only after the outputs of
//! every record applied are flushed and its offsets committed ([`RunContext`]), and a partition
//! that comes back has the state brought up to date from where this instance stopped. Run one
//! instance per consumer group (the state spans every partition). Records of several input
//! partitions are applied in event-time order ([`crate::merge`]), so the outputs do not depend
//! on how the partitions' batches arrive, unless a partition is slower than `--partition-wait`.
//!
//! **Layout.** [`run`] starts a `run::Run` (`run/start.rs`: the clients, the checkpoint, the
//! checks of the topics), serves its loop until shutdown, the input's end or a lapsed lease, and
//! finishes it (drain, commit, checkpoint, leave the group). The loop's state and one method per
//! event it serves are in `run/mod.rs`; what it may commit and where a partition resumes, in
//! `offsets.rs`; the rebalance callbacks, in `context.rs`.
//!
//! **Limit.** A producer error that librdkafka could not resolve by its own retries
//! (`message.timeout.ms`) stops the process with an error, without committing the affected
//! offsets: the records are processed again after a restart.

use crate::cli::Stage;
use crate::http::ClusterQuery;
use crate::telemetry::Health;
use crate::workers::{preparing_threads, take_jobs};
use anyhow::{anyhow, Context as _, Result};
use metrics::histogram;
use neardup_schemas::Source;
use neardup_topology::sign_cache::{SignCache, SignCacheStats};
use neardup_topology::{
    Clustered, Emit, Indexed, InternalReader, InternalRecordError, Prepared, Preparer, Sharded,
    Topology,
};
use rdkafka::consumer::{Consumer, ConsumerContext};
use rdkafka::TopicPartitionList;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

mod context;
mod dead_letters;
mod offsets;
mod options;
mod pace;
mod run;

pub(crate) use context::Producer;
pub use context::{ProducerLog, RunContext};
pub use dead_letters::DeadLetterGuard;
use offsets::confirm;
pub use options::{check_clients, KafkaOptions};
use run::Run;

fn topic_partitions(tpl: &TopicPartitionList) -> impl Iterator<Item = (String, i32)> + '_ {
    tpl.elements()
        .into_iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
}

fn partitions(tpl: &TopicPartitionList) -> Vec<String> {
    tpl.elements()
        .iter()
        .map(|e| format!("{}/{}", e.topic(), e.partition()))
        .collect()
}

/// What a run did.
pub struct RunOutcome {
    /// The topology at the end (stats, state).
    pub topology: Topology,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Records re-read silently to restore state.
    pub restored_records: u64,
    /// What the sign cache did.
    pub sign_cache: SignCacheStats,
}

/// Runs the topology on Kafka until `shutdown` turns true (or, with `exit_at_end`, until every
/// assigned partition has been read to its end), then drains, commits and returns.
///
/// Questions about the cluster map arriving on `queries` (from [`crate::http`]) are answered
/// between two input records. `health` is kept current for `/readyz`, and the metrics of
/// [`crate::telemetry`] are recorded (they go nowhere unless a recorder is installed).
pub async fn run(
    opts: &KafkaOptions,
    cfg: neardup_topology::Config,
    shutdown: watch::Receiver<bool>,
    queries: mpsc::Receiver<ClusterQuery>,
    health: Arc<Health>,
) -> Result<RunOutcome> {
    let mut run = Run::start(opts, cfg, shutdown, queries, health)?;
    run.serve().await?;
    run.finish().await
}

/// How long a broker may hold a fetch that finds no new records: 25 ms (librdkafka's default is
/// 500). Kafka answers a fetch as soon as it has a record, so there the setting costs nothing
/// while records flow, and one fetch request per 25 ms and partition leader while the input is
/// idle. tansu 0.6.0, the test broker, holds every fetch this long, records or not, and reads
/// a partition by listing every batch it stores: a fetch costs it more the longer the topic
/// grows, and with 10 ms (neardup's setting from the fifth to the fifty-third session) the
/// bench's cold-start latency run on a slow machine saturated it, p99 1.3-10.7 s in five of
/// five runs, against 0.6-1.1 s with 25 or 50 ms. Where tansu keeps up, 10 ms was the faster
/// from a cold start, by 22-32 ms at the p99 (README, "Fetch wait on the test broker").
pub const FETCH_WAIT: (&str, &str) = ("fetch.wait.max.ms", "25");

/// How long librdkafka waits before fetching again once its local queue is over
/// `queued.max.messages.kbytes` (64 MB by default, 2,600 pages of 25 KB): 1 s by default, in
/// which neardup drained the queue in half the time and then waited, empty, for the rest (on
/// the medium stream, 2,974 records/s with 1 s, 4,792 with 20 ms).
pub(crate) const FETCH_QUEUE_BACKOFF: (&str, &str) = ("fetch.queue.backoff.ms", "20");

/// Where the consumer starts a partition its group has no offset for: at the earliest record,
/// so that a new deployment reads the whole retained topic. A `-X auto.offset.reset` wins.
pub(crate) const AUTO_OFFSET_RESET: (&str, &str) = ("auto.offset.reset", "earliest");

/// What preparing one record gives: the record, and its decoded and signed page (in the index
/// stage, the page read back from the sign stage's internal record; in the cluster stage, the
/// index stage's record read back).
type PrepareResult = (Vec<u8>, Result<Ready, InternalRecordError>);

/// A record ready to apply.
enum Ready {
    Page(Prepared),
    Indexed(Indexed),
    Sharded(Sharded),
    Clustered(Clustered),
}

impl Ready {
    /// The event time the merge orders pages by; records of the internal topics after the
    /// index stage come from one partition and need none.
    fn event_time_ms(&self) -> Option<i64> {
        match self {
            Ready::Page(page) => page.event_time_ms(),
            Ready::Indexed(_) | Ready::Sharded(_) | Ready::Clustered(_) => None,
        }
    }

    /// Applies the record (the input record `raw`, from `src`, partition `p`) to `topo` the
    /// way its stage does, appending the outputs to `out`; any record for the next stage waits
    /// in [`Topology::take_indexed`]. An error means the stages disagree about the key shards.
    fn apply(
        self,
        topo: &mut Topology,
        (raw, src, p): (&[u8], &Source, i32),
        out: &mut Vec<Emit>,
    ) -> Result<(), InternalRecordError> {
        match self {
            Ready::Page(prepared) => topo.apply(prepared, raw, src, out),
            Ready::Indexed(record) => topo.apply_indexed(record, out),
            Ready::Clustered(record) => topo.apply_clustered(record, out),
            Ready::Sharded(record) => return topo.apply_sharded(record, p, out),
        }
        Ok(())
    }
}

/// A record prepared as `stage` prepares it (on a preparing thread, or to restore state): read
/// back from an internal topic by the stages after signing, decoded and signed otherwise (by
/// `preparer`, made on first use with the shared `cache`).
fn prepare(
    stage: Stage,
    reader: &InternalReader,
    preparer: &mut Option<Preparer>,
    (cfg, cache): (&neardup_topology::Config, &Arc<SignCache>),
    payload: &[u8],
) -> Result<Ready, InternalRecordError> {
    Ok(match stage {
        Stage::Index => Ready::Page(reader.signed(payload)?),
        Stage::Cluster => Ready::Indexed(reader.indexed(payload)?),
        Stage::Mirror => Ready::Clustered(reader.clustered(payload)?),
        Stage::Shard | Stage::Verify => Ready::Sharded(reader.sharded(payload)?),
        Stage::All | Stage::Sign => Ready::Page(
            preparer
                .get_or_insert_with(|| Preparer::with_cache(cfg, Arc::clone(cache)))
                .prepare(payload),
        ),
    })
}

/// The partitions of `topic` (none: it does not exist), from the broker's metadata.
pub(crate) fn partition_ids<C: Consumer<X>, X: ConsumerContext>(
    consumer: &C,
    topic: &str,
    timeout: Duration,
) -> rdkafka::error::KafkaResult<Vec<i32>> {
    Ok(consumer
        .fetch_metadata(Some(topic), timeout)?
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect())
}

/// How long the start-up checks wait for a topic's metadata.
pub(crate) const METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// The number of partitions of `topic` (0: it does not exist). Metadata that cannot be read at
/// all is an error.
pub(crate) fn partition_count<C: Consumer<X>, X: ConsumerContext>(
    consumer: &C,
    topic: &str,
    timeout: Duration,
) -> Result<usize> {
    Ok(partition_ids(consumer, topic, timeout)
        .with_context(|| format!("cannot read the metadata of {topic}"))?
        .len())
}

/// A record to prepare, and where its result goes (with the record, for applying it).
type PrepareJob = (Vec<u8>, tokio::sync::oneshot::Sender<PrepareResult>);

/// Threads that decode and sign records (one [`Preparer`] each) ahead of the run loop, which
/// applies the results to the topology in input order: the outputs are those of processing
/// every record in turn, with the costly, stateless part spread over the cores.
struct PreparePool {
    jobs: std::sync::mpsc::Sender<PrepareJob>,
    threads: usize,
}

impl PreparePool {
    /// [`preparing_threads`] threads (one per core and one more), sharing `cache`.
    ///
    /// The threads take records from one queue, each the next one as soon as it is free: a
    /// page to sign costs some twenty times a page the sign cache knows, and records handed
    /// out in turn would leave one thread idle while another has signing queued, holding up
    /// every record applied after its own.
    fn new(cfg: &neardup_topology::Config, stage: Stage, cache: &Arc<SignCache>) -> Self {
        let threads = preparing_threads();
        let (jobs, rx) = std::sync::mpsc::channel::<PrepareJob>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..threads {
            let (cfg, cache, mut preparer) = (cfg.clone(), Arc::clone(cache), None);
            let rx = Arc::clone(&rx);
            let reader = InternalReader::new(&cfg);
            let seconds = histogram!("neardup_record_process_seconds", "step" => "prepare");
            std::thread::Builder::new()
                .name(format!("neardup-prepare-{i}"))
                .spawn(move || {
                    // Ends when the pool (the sender) is dropped.
                    take_jobs(&rx, |(raw, reply): PrepareJob| {
                        let t0 = Instant::now();
                        let prepared = prepare(stage, &reader, &mut preparer, (&cfg, &cache), &raw);
                        seconds.record(t0.elapsed().as_secs_f64());
                        // The run loop may have stopped waiting: nothing to do then.
                        let _ = reply.send((raw, prepared));
                    })
                })
                .expect("a preparing thread");
        }
        PreparePool { jobs, threads }
    }

    /// Records that may be preparing at once: enough to keep every thread busy.
    fn depth(&self) -> usize {
        64 * self.threads
    }

    /// Hands a record to the first free thread; the answer carries the record back with its
    /// result.
    fn submit(&mut self, raw: Vec<u8>) -> Result<tokio::sync::oneshot::Receiver<PrepareResult>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send((raw, reply))
            .map_err(|_| anyhow!("a preparing thread stopped"))?;
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::DeadLetterGuard;

    #[test]
    fn the_guard_trips_exactly_when_the_recent_share_is_too_high() {
        // Against a model: the dead letters among the last `size` records, counted afresh.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for (ratio, size) in [(0.5, 10), (0.2, 7), (0.0, 3), (0.9, 50)] {
            for _ in 0..20 {
                let mut guard = DeadLetterGuard::new(ratio, size);
                let mut history = vec![];
                for _ in 0..200 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let dead = rng % 100 < 40;
                    history.push(dead);
                    let recent = history.iter().rev().take(size).filter(|d| **d).count();
                    let should_trip = recent as f64 > ratio * size as f64;
                    assert_eq!(
                        guard.record(dead).is_err(),
                        should_trip,
                        "{ratio} {size} {history:?}"
                    );
                    if should_trip {
                        break;
                    }
                }
            }
        }
        let mut off = DeadLetterGuard::new(1.0, 1);
        assert!((0..100).all(|_| off.record(true).is_ok()));
    }
}
