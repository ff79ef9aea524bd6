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
//! **Limit.** A producer error that librdkafka could not resolve by its own retries
//! (`message.timeout.ms`) stops the process with an error, without committing the affected
//! offsets: the records are processed again after a restart.

use crate::at_end::Prober;
use crate::buffers::Buffers;
use crate::checkpoints::{Saver, Store};
use crate::cli::Stage;
use crate::http::ClusterQuery;
use crate::lease::Lease;
use crate::merge::Merge;
use crate::telemetry::{self, Health};
use crate::throttle::{self, Throttle};
use crate::workers::take_jobs;
use anyhow::{anyhow, bail, Context as _, Result};
use futures::stream::{FuturesOrdered, StreamExt};
use futures::FutureExt;
use metrics::{counter, gauge, histogram};
use neardup_schemas::Source;
use neardup_topology::sign_cache::{SignCache, SignCacheStats};
use neardup_topology::{
    Clustered, Emit, Indexed, InternalReader, InternalRecordError, Prepared, Preparer, Sharded,
    SignOutput, SignStage, Topology,
};
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryFuture, FutureRecord};
use rdkafka::TopicPartitionList;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

mod context;
mod dead_letters;
mod offsets;
mod options;

pub(crate) use context::Producer;
pub use context::{ProducerLog, RunContext};
pub use dead_letters::DeadLetterGuard;
use offsets::{
    all_at_end, commit, confirm, group_behind, restore_partitions, resume_offsets, state_offsets,
    take_revocations, Commit, Ownership,
};
pub use options::{check_clients, KafkaOptions};

/// The list of `partitions` of `topic`.
fn tpl_of(topic: &str, partitions: &[i32]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition(topic, p);
    }
    tpl
}

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
    mut shutdown: watch::Receiver<bool>,
    mut queries: mpsc::Receiver<ClusterQuery>,
    health: Arc<Health>,
) -> Result<RunOutcome> {
    // Under --exit-at-end, a stage after signing also waits for the stages before it.
    let mut end_watch = opts
        .exit_at_end
        .then(|| crate::at_end::EndWatch::new(opts, cfg.key_shards));
    // The index stage waits for the internal partitions the sign stage still fills
    // (crate::upstream): per partition, the offset after the last record received.
    let received: Arc<std::sync::Mutex<crate::upstream::Received>> = Arc::default();
    // (Under a lease, it asks only once this instance holds it.)
    let (watcher, mut upstream) = if opts.stage == Stage::Index
        && !opts.partition_wait.is_zero()
        && !opts.upstream_wait.is_zero()
    {
        let (watcher, lagging) = crate::upstream::Upstream::watch(
            opts,
            opts.for_stage().group,
            received.clone(),
            !opts.leased(),
        );
        (Some(watcher), Some(lagging))
    } else {
        (None, None)
    };
    // Its latest answer, taken when it changes (none yet: every partition lags).
    let mut answer: crate::upstream::Lagging = None;
    let opts = &opts.for_stage();
    let started = Instant::now();
    if opts.stage == Stage::All {
        crate::sizing::warn_if_over_limit(&cfg, opts.sign_cache);
    }
    // Every stage but sign (stateless) and shard (one key shard per partition) keeps state that
    // joins pages of every partition of its input.
    let _ = health.input.set(telemetry::Input::new(
        &opts.input_topic,
        opts.stage.name(),
        !matches!(opts.stage, Stage::Sign | Stage::Shard),
    ));
    // Records of several partitions are applied in event-time order (crate::merge), which
    // needs to know which partitions are read to their end; so does --exit-at-end.
    // (Not in the shard stage: each partition of the steps topic is a shard of its own.)
    let merging =
        !matches!(opts.stage, Stage::Sign | Stage::Shard) && !opts.partition_wait.is_zero();
    let eof = if opts.exit_at_end || merging {
        "true"
    } else {
        "false"
    };
    // The internal records of the sign, index, shard and verify stages must reach the next
    // stage in order (a repeat is recognised by its offset being below the last one applied):
    // an idempotent producer keeps the order through retries.
    let idempotent = if matches!(
        opts.stage,
        Stage::Sign | Stage::Index | Stage::Shard | Stage::Verify
    ) || (opts.stage == Stage::Cluster && cfg.mirror_stage)
    {
        "true"
    } else {
        "false"
    };
    // An output over the topology's limit became a dead letter: the producer accepts the rest.
    let max_output_bytes = cfg.max_output_bytes.to_string();
    let throttle = Arc::new(Throttle::default());
    let fatal: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let producer: Producer = opts
        .client_config(&[
            ("message.max.bytes", &max_output_bytes),
            ("acks", "all"),
            // A split stage after another one is fed a few records at a time, and each small
            // batch woke librdkafka's broker thread: with 5 ms, the four stages side by side on
            // the bench's medium stream spent 25-27 s of CPU, two thirds of the index stage's in
            // that thread; with 25 ms, 18-20 s (10 ms: 22 s; 50 ms: 17 s), for at most 25 ms
            // more per hop. The all-in-one process, fed in large batches, showed no difference
            // and keeps 5 ms for its latency. `-X linger.ms` overrides either.
            (
                "linger.ms",
                if opts.stage == Stage::All { "5" } else { "25" },
            ),
            // The outputs are JSON, which LZ4 shrinks several times over for little CPU: the
            // broker receives, stores and serves a fraction of the bytes (on the bench's medium
            // stream against tansu, neardup's median rate rose from 9,903 to 10,892 records/s
            // over five alternated runs each). Every Kafka client reads LZ4; `-X
            // compression.type=none` turns it off.
            ("compression.type", "lz4"),
            ("message.timeout.ms", "120000"),
            ("enable.idempotence", idempotent),
        ])
        .create_with_context(ProducerLog {
            throttle: throttle.clone(),
            fatal: fatal.clone(),
            stage: telemetry::current_stage(),
        })
        .context("cannot create the Kafka producer (check --brokers and -X properties)")?;
    let applied_shared: Arc<std::sync::Mutex<BTreeMap<i32, i64>>> = Arc::default();
    let revoked_shared: Arc<std::sync::Mutex<Vec<i32>>> = Arc::default();
    let lost: Arc<AtomicBool> = Arc::default();
    let consumer: StreamConsumer<RunContext> = opts
        .client_config(&[
            ("group.id", &opts.group),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("auto.offset.reset", "earliest"),
            ("enable.partition.eof", eof),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
            ("statistics.interval.ms", "5000"),
            // A broker may hold a fetch this long waiting for data: a bound on the latency
            // added when records trickle in. Kafka answers at once when it has records, so the
            // cost is a fetch request per 10 ms while the input is idle; tansu holds every fetch
            // this long, records or not (librdkafka's default, 500 ms, made tansu's median
            // delay 164 ms; 50 ms, 32 ms; 10 ms, 16 ms).
            ("fetch.wait.max.ms", "10"),
            // Up to 8 MiB per partition and fetch (librdkafka's default, 1 MiB, is about 40 pages
            // of a crawl, so the broker's round trip bounded the rate): on the bench's medium
            // stream against tansu, three runs alternated with the default (nineteenth session)
            // read 5,465, 5,582 and 5,996 records/s against 4,881, 4,415 and 5,256, with a p99
            // latency of 0.6-1.1 s against 0.8-3.4 s, for about 20 MiB more peak memory. The
            // consumer's queue stays bounded by `queued.max.messages.kbytes`.
            ("max.partition.fetch.bytes", "8388608"),
            FETCH_QUEUE_BACKOFF,
        ])
        .create_with_context(RunContext {
            health: health.clone(),
            producer: producer.clone(),
            applied: applied_shared.clone(),
            revoked: revoked_shared.clone(),
            flush_timeout: opts.drain_timeout,
            fatal: fatal.clone(),
            throttle: throttle.clone(),
            lost: lost.clone(),
            stage: telemetry::current_stage(),
            group: opts.group.clone(),
            handover_reader: std::sync::Mutex::new(Prober::new(opts)),
        })
        .context("cannot create the Kafka consumer (check --brokers and -X properties)")?;

    let topics = opts.output_topics();
    let cfg_for_pool = cfg.clone();
    let store = opts
        .checkpoint_dir
        .as_deref()
        .map(Store::open)
        .transpose()?;
    // Per input partition, the offset the state reflects the records before (from a checkpoint).
    let mut state_from: BTreeMap<i32, i64> = BTreeMap::new();
    // The checkpoint file as it was when loaded (a standby taking the lease loads it again if
    // it changed: the holder may have written it, in a shared directory).
    let mut loaded_file = store.as_ref().and_then(Store::file_stamp);
    let loaded = match &store {
        Some(s) => tokio::task::block_in_place(|| load_state(s, cfg.clone(), opts))?,
        None => None,
    };
    let role = opts.stage.role();
    let mut topo = match loaded {
        Some((topo, offsets)) => {
            state_from = offsets;
            topo
        }
        None => match role {
            Some(role) => Topology::with_role(cfg.clone(), role)
                .map_err(|e| anyhow!("--stage {}: {e}", opts.stage.name()))?,
            None => Topology::new(cfg.clone()),
        },
    };
    let key_shards = topo.config().key_shards;
    let by_key =
        key_shards > 0 && matches!(opts.stage, Stage::Index | Stage::Shard | Stage::Verify);
    if by_key {
        check_steps_partitions(&consumer, &opts.steps_topic(), key_shards)?;
        check_one_partition(&consumer, &opts.answered_topic())?;
    }
    if matches!(opts.stage, Stage::Index | Stage::Verify | Stage::Cluster) {
        check_one_partition(&consumer, &opts.indexed_topic())?;
    }
    let mirror_stage = topo.config().mirror_stage;
    if mirror_stage && matches!(opts.stage, Stage::Cluster | Stage::Mirror) {
        check_one_partition(&consumer, &opts.clustered_topic())?;
    }
    if opts.stage == Stage::Sign {
        check_signed_partitions(&consumer, &opts.input_topic, &opts.internal_topic())?;
    }
    // A run that stops at the end of its input has nothing to wait for if there is none, nor
    // if no broker answers (a run without --exit-at-end waits, with a warning every 30 s, for
    // the topic to appear and the broker to come up; /readyz says it is not ready meanwhile).
    // It is checked first, so a wrong --brokers stops it after one metadata timeout.
    if opts.stage == Stage::All && opts.exit_at_end {
        match partition_count(&consumer, &opts.input_topic, METADATA_TIMEOUT) {
            Ok(0) => bail!(
                "the input topic {} does not exist, so --exit-at-end has nothing to read: check --input-topic and --brokers",
                opts.input_topic
            ),
            Ok(_) => {}
            Err(e) => {
                // Rejected credentials and untrusted certificates have their own message.
                if let Some(why) = fatal.lock().expect("fatal error").take() {
                    bail!(why);
                }
                bail!(
                    "no broker of {} answered within {} s ({e:#}): --exit-at-end reads the input topic to its end and stops, so it does not wait for a broker; check --brokers (NEARDUP_BROKERS), the network, and the kafka properties security.protocol and ssl.*",
                    opts.brokers,
                    METADATA_TIMEOUT.as_secs()
                )
            }
        }
    }
    // Metadata that cannot be read at all (no broker yet) is left to the run loop, which
    // retries, and stops on what retrying cannot cure (rejected credentials).
    tokio::task::block_in_place(|| {
        crate::topics::check_outputs(&consumer, &producer, opts, topo.config())
    })?;
    // Only a stage that passed its checks joins the group: a member that joins and then exits
    // on an error can keep the group waiting for it (tansu kept the next instance of the shard
    // stage unassigned for minutes).
    // Under a lease, the stage's input waits until this instance holds it (crate::lease).
    let mut lease = if opts.leased() {
        check_one_partition(&consumer, &opts.lease_topic())?;
        health.standby.store(true, Ordering::Relaxed);
        gauge!("neardup_lease_held").set(0.0);
        Some(Lease::join(opts)?)
    } else {
        None
    };
    let subscribe = || {
        consumer
            .subscribe(&[&opts.input_topic])
            .with_context(|| format!("cannot subscribe to {}", opts.input_topic))
    };
    // Whether the stage reads its input (under a lease: since it took it, in the lease's term
    // `subscribed_in`).
    let mut subscribed = lease.is_none();
    let mut subscribed_in = 0u64;
    // Why this instance stopped running the stage before it was asked to (its lease lapsed).
    let mut lapsed: Option<String> = None;
    if subscribed {
        subscribe()?;
    }
    // The thresholds in effect, where pairs are verified (STYLE: print the effective
    // thresholds, the band S-curve among them, at start-up).
    let verifies = match opts.stage {
        Stage::All | Stage::Verify => true,
        Stage::Index => key_shards == 0,
        Stage::Sign | Stage::Shard | Stage::Cluster | Stage::Mirror => false,
    };
    if verifies {
        info!("{}", topo.config().near.describe());
    }
    info!(topic = %opts.input_topic, group = %opts.group, brokers = %opts.brokers, "consuming");
    let mut checkpoint_tick = tokio::time::interval_at(
        tokio::time::Instant::now() + opts.checkpoint_interval,
        opts.checkpoint_interval,
    );
    checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // While a checkpoint waits for the outputs in flight: when it fell due, and input stopped
    // (it gives up `drain_timeout` later).
    let mut checkpoint_due: Option<Instant> = None;
    // With checkpoints on, their age counts from the start until the first is written, so a
    // process whose every checkpoint is skipped shows it (and `NeardupCheckpointStale` fires).
    let mut last_checkpoint: Option<Instant> = store.as_ref().map(|_| Instant::now());
    let checkpoint_age = gauge!("neardup_checkpoint_age_seconds");
    let mut saver = store.clone().map(Saver::new);
    // Reads the group's committed offsets back before a checkpoint (a client of the group
    // that never joins it; made when first used).
    let mut offsets_reader = Prober::new(opts);
    let mut restored: HashSet<i32> = HashSet::new();
    let mut restored_records = 0u64;
    let mut in_flight = FuturesOrdered::new();
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut at_end: HashSet<i32> = HashSet::new();
    // Per partition, how many times it was revoked: records and acknowledgements of an earlier
    // ownership are dropped.
    let mut epoch: BTreeMap<i32, u32> = BTreeMap::new();
    // Partitions this instance owned before and applied further than their next owner
    // committed: records below `state_from` were applied and their outputs delivered here.
    let mut ahead: HashSet<i32> = HashSet::new();
    // Under --exit-at-end each tick also looks whether the input is read to its end, so the
    // loop ticks at least once a second (a run with `--commit-interval 1h` sat at the end of
    // its input for the hour); the commit still waits for its own interval.
    let tick_period = if opts.exit_at_end {
        opts.commit_interval.min(Duration::from_secs(1))
    } else {
        opts.commit_interval
    };
    let mut tick = tokio::time::interval(tick_period);
    let mut last_commit = Instant::now();
    // A tick that took longer than the interval (asking the broker whether the stages before
    // this one are done, under --exit-at-end) must not be followed by a burst of ticks: the
    // loop prefers ticks to records, and would read none meanwhile.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut out: Vec<Emit> = Vec::new();
    let mut guard = DeadLetterGuard::new(opts.max_dead_letter_ratio, opts.dead_letter_window);
    let process_seconds = histogram!("neardup_record_process_seconds", "step" => "apply");
    // How old a record is (by its Kafka timestamp) when it is read, and when its outputs are
    // acknowledged: what an alert on stale duplicate reports watches.
    let delay_read = histogram!("neardup_record_delay_seconds", "until" => "read");
    let delay_acked = histogram!("neardup_record_delay_seconds", "until" => "acknowledged");
    let sign_cache = Arc::new(SignCache::new(opts.sign_cache, cfg_for_pool.window_ms));
    let mut pool = PreparePool::new(&cfg_for_pool, opts.stage, &sign_cache);
    let sign = SignStage::new(&cfg_for_pool);
    let internal_topic = opts.internal_topic();
    let indexed_topic = opts.indexed_topic();
    let steps_topic = opts.steps_topic();
    let answered_topic = opts.answered_topic();
    let clustered_topic = opts.clustered_topic();
    // Where the record for the next stage goes: from the index stage split by key to shard 0,
    // from shard i to shard i + 1 or, from the last, to the verify stage; from the cluster
    // stage to the mirror stage; else to the cluster stage.
    let next_stage = |p: i32| -> (&String, Option<i32>) {
        match opts.stage {
            Stage::Index if by_key => (&steps_topic, Some(0)),
            Stage::Shard if (p as usize) + 1 < key_shards => (&steps_topic, Some(p + 1)),
            Stage::Shard => (&answered_topic, Some(0)),
            Stage::Cluster => (&clustered_topic, None),
            _ => (&indexed_topic, None),
        }
    };
    let mut preparing = FuturesOrdered::new();
    let in_flight_gauge = gauge!("neardup_in_flight_records");
    let mut merge: Merge<Buffered> = Merge::default();
    let mut assigned: HashSet<i32> = HashSet::new();
    // Per partition, records read and still being prepared.
    let mut pending: BTreeMap<i32, usize> = BTreeMap::new();
    // Partitions paused while the merge waits for another one.
    let mut paused: HashSet<i32> = HashSet::new();

    // Forgets the partitions revoked since it last ran (see `take_revocations`); with checkpoints,
    // a checkpoint follows, so the state as it was when the partitions left is kept too.
    macro_rules! take_revocations {
        () => {
            if take_revocations(
                &revoked_shared,
                &applied_shared,
                &mut Ownership {
                    epoch: &mut epoch,
                    restored: &mut restored,
                    acked: &mut acked,
                    committed: &mut committed,
                    at_end: &mut at_end,
                    state_from: &mut state_from,
                    ahead: &mut ahead,
                },
            ) && store.is_some()
                && checkpoint_due.is_none()
            {
                checkpoint_due = Some(Instant::now());
            }
        };
    }

    // Applies one prepared record of partition `p` at offset `o` read in ownership `era`, and
    // hands its outputs to the producer (`continue`s the enclosing loop when it is skipped).
    let mut buffers = Buffers::default();
    macro_rules! apply {
        ($p:expr, $o:expr, $era:expr, $stamp:expr, $payload:expr, $prepared:expr) => {
            let (p, o, era, stamp, payload, prepared): (i32, i64, u32, Option<i64>, Vec<u8>, Ready) =
                ($p, $o, $era, $stamp, $payload, $prepared);
            let age = stamp.map(|t| (t, delay_acked.clone()));
            let src = Source::Kafka {
                topic: opts.input_topic.clone(),
                partition: p,
                offset: o,
            };
            if opts.stage == Stage::Sign {
                let Ready::Page(prepared) = prepared else {
                    bail!("the sign stage was given an indexed record");
                };
                // A page goes to the internal partition with its input partition's number.
                let (topic, partition, key, value, dead) =
                    match sign.output(prepared, &payload, &src, &mut topo) {
                        SignOutput::Internal { key, value } => {
                            (&internal_topic, Some(p), key, value, false)
                        }
                        SignOutput::DeadLetter(e) => (&topics[&e.kind], None, e.key, e.value, true),
                    };
                guard.record(dead).map_err(|e| {
                    anyhow!(
                        "{e} (stopped at {}/{p} offset {o}, not committed)",
                        opts.input_topic
                    )
                })?;
                let delivery = send_raw(&producer, topic, partition, &key, &value).await?;
                in_flight.push_back(acknowledged(vec![delivery], p, o, era, age).boxed());
                applied_shared
                    .lock()
                    .expect("applied offsets")
                    .insert(p, o + 1);
                buffers.put(payload);
                continue;
            }
            if !restored.contains(&p) {
                // The state of p before o, and of every other partition whose first record is
                // buffered, rebuilt together: merged in event-time order, as it was applied.
                let mut first: Vec<(i32, i64)> = vec![(p, o)];
                for (q, (qo, qera, ..)) in merge.heads() {
                    if q != p
                        && !restored.contains(&q)
                        && epoch.get(&q).copied().unwrap_or(0) == *qera
                    {
                        first.push((q, *qo));
                    }
                }
                // And, where partitions are merged by event time, every other partition
                // assigned with nothing read yet (at its end, or slower), from where the group
                // resumes it: else p's records would be applied before the state of its records
                // before that is rebuilt, out of event-time order (a page's previous fetch in
                // one of them went missing from its change). (A shard stage's partitions are
                // shards of their own, each restored when its first record comes.)
                if merging {
                    let known: Vec<i32> = first.iter().map(|f| f.0).collect();
                    let more = tokio::task::block_in_place(|| {
                        resume_offsets(&consumer, &opts.input_topic, |q| {
                            restored.contains(&q) || known.contains(&q)
                        })
                    })?;
                    first.extend(more);
                }
                let mut ranges = Vec::new();
                for (q, first) in first {
                    restored.insert(q);
                    let from = state_from.get(&q).copied();
                    match from {
                        // Applied here before the partition went away and came back.
                        Some(from) if ahead.contains(&q) && from > first => {}
                        _ => ranges.push((q, from, first)),
                    }
                }
                health.restoring.fetch_add(1, Ordering::Relaxed);
                let n = restore_partitions(opts, &consumer, &mut topo, &sign_cache, &ranges);
                health.restoring.fetch_sub(1, Ordering::Relaxed);
                restored_records += n?;
            }
            if ahead.contains(&p) && state_from.get(&p).is_some_and(|&from| o < from) {
                // Already applied (and its outputs delivered) before the partition was
                // revoked: only its offset moves on.
                in_flight.push_back(futures::future::ready(Ok((p, o, era))).boxed());
                continue;
            }
            let t0 = Instant::now();
            let dead_before = topo.stats().dead_letter_total();
            let leaps_before = topo.event_time_leaps();
            prepared
                .apply(&mut topo, (&payload, &src, p), &mut out)
                .map_err(|e| {
                    anyhow!(
                        "{e} (stopped at {}/{p} offset {o}, not committed)",
                        opts.input_topic
                    )
                })?;
            process_seconds.record(t0.elapsed().as_secs_f64());
            let leaps = topo.event_time_leaps();
            // The 1st, 10th, 100th, ...: enough to be seen, never a flood.
            if leaps > leaps_before && is_power_of_ten(leaps) {
                warn!(
                    topic = %opts.input_topic, partition = p, offset = o, leaps,
                    "a record dated more than --max-event-time-lead ahead of the event time did not move the windows (a crawler's clock or date field is wrong, or a pause in the crawl that 16 records in a row will confirm)"
                );
            }
            guard
                .record(topo.stats().dead_letter_total() > dead_before)
                .map_err(|e| {
                    anyhow!(
                        "{e} (stopped at {}/{p} offset {o}, not committed)",
                        opts.input_topic
                    )
                })?;
            let mut deliveries = Vec::with_capacity(out.len());
            for e in out.drain(..) {
                deliveries.push(send(&producer, &topics[&e.kind], &e).await?);
            }
            if let Some((key, value)) = topo.take_indexed() {
                let (topic, partition) = next_stage(p);
                deliveries.push(send_raw(&producer, topic, partition, &key, &value).await?);
            }
            in_flight.push_back(acknowledged(deliveries, p, o, era, age).boxed());
            applied_shared
                .lock()
                .expect("applied offsets")
                .insert(p, o + 1);
            buffers.put(payload);
        };
    }

    loop {
        take_revocations!();
        if lost.swap(false, Ordering::Relaxed) && lease.is_some() {
            // Its session in the lease's group likely expired too, and another instance may
            // hold the lease already: rejoining the input's group would share its partitions.
            lapsed = Some("the input's consumer group dropped this instance (its session expired: a stall, or the broker out of reach)".into());
            break;
        }
        if let Some(why) = fatal.lock().expect("fatal error").take() {
            bail!("{why}; stopping without committing what is in flight");
        }
        // Buffered records go in event-time order (a checkpoint needs them all applied), a
        // batch at a time, so that acknowledgements, queries and signals are served between.
        let flush = checkpoint_due.is_some();
        let mut more_ready = true;
        for _ in 0..MERGE_BATCH {
            // The head that goes next is one of those buffered: while any of them came after the
            // sign stage's latest answer, every partition is taken to lag (crate::upstream).
            let lagging = upstream.is_some().then(|| {
                answer
                    .as_ref()
                    .filter(|a| merge.heads().all(|(h, item)| a.covers(h, item.0)))
                    .map(|a| &a.lagging)
            });
            let Some((p, (o, era, stamp, payload, prepared))) = merge.pop(
                &assigned,
                |q| {
                    if lagging.is_some_and(|l| l.is_none_or(|l| l.contains(&q))) {
                        Some(opts.upstream_wait.max(opts.partition_wait))
                    } else if !at_end.contains(&q) || pending.get(&q).is_some_and(|&n| n > 0) {
                        Some(opts.partition_wait)
                    } else {
                        None
                    }
                },
                Instant::now(),
                flush,
            ) else {
                more_ready = false;
                break;
            };
            if epoch.get(&p).copied().unwrap_or(0) != era {
                continue;
            }
            apply!(p, o, era, stamp, payload, prepared);
        }
        // A checkpoint's file written meanwhile (by its own thread).
        if let Some(at) = saver.as_mut().and_then(Saver::poll) {
            last_checkpoint = Some(at);
        }
        if let (Some(paused), Some(saver)) = (checkpoint_due, &mut saver) {
            if preparing.is_empty() && merge.is_empty() && in_flight.is_empty() {
                // Every record applied is acknowledged: commit, then the state with its offsets.
                let committing = Instant::now();
                let held = commit(
                    &consumer,
                    &opts.input_topic,
                    &acked,
                    &mut committed,
                    Commit::Within(opts.drain_timeout, &mut offsets_reader, &opts.group),
                )?;
                let offsets = state_offsets(&state_from, &restored, &acked);
                let behind = if held {
                    tokio::task::block_in_place(|| {
                        group_behind(
                            &mut offsets_reader,
                            &opts.group,
                            &opts.input_topic,
                            &offsets,
                        )
                    })
                } else {
                    Some("the group did not take the commit of its offsets".into())
                };
                if let Some(why) = behind {
                    // A checkpoint ahead of the group's offsets would be refused at the next
                    // start (the group seems reset behind its state): keep the last one.
                    warn!("checkpoint skipped: {why}; the last checkpoint stays");
                } else if let Some(at) = tokio::task::block_in_place(|| {
                    // The state is copied now; it is serialized into its file while input
                    // resumes.
                    saver.begin(
                        &topo,
                        &opts.input_topic,
                        &offsets,
                        paused,
                        committing.elapsed(),
                    )
                }) {
                    last_checkpoint = Some(at);
                }
                checkpoint_due = None;
            } else if paused.elapsed() >= opts.drain_timeout {
                warn!(pending = in_flight.len(), "checkpoint skipped: outputs in flight were not acknowledged in time (drain_timeout); input resumes");
                checkpoint_due = None;
            }
        }
        // While the merge waits past the bound on records in flight, the partitions it holds
        // records of are paused, so what is read is what it waits for (librdkafka drops what it
        // fetched of them, and fetches again from the next record on resumption).
        let waiting = merge.waiting(Instant::now());
        if waiting && in_flight.len() + preparing.len() + merge.len() >= opts.max_in_flight {
            let hold: Vec<i32> = merge
                .heads()
                .map(|(q, _)| q)
                .filter(|q| !paused.contains(q))
                .collect();
            if !hold.is_empty() {
                debug!(partitions = ?hold, "paused while the merge waits for another partition");
                match consumer.pause(&tpl_of(&opts.input_topic, &hold)) {
                    Ok(()) => paused.extend(hold),
                    // Reading on past the bound, as before pausing existed, until the wait ends.
                    Err(e) => warn!("cannot pause the partitions {hold:?}: {e}"),
                }
            }
        }
        // Resumed once the wait is over, or once the merge holds nothing more of them (they may
        // be awaited then). Revoked ones too: librdkafka keeps a partition paused across an
        // assignment.
        let resume: Vec<i32> = paused
            .iter()
            .copied()
            .filter(|&q| !waiting || !merge.holds(q))
            .collect();
        if !resume.is_empty() {
            paused.retain(|q| !resume.contains(q));
            if let Err(e) = consumer.resume(&tpl_of(&opts.input_topic, &resume)) {
                warn!("cannot resume the partitions {resume:?}: {e}");
            }
        }
        let merge_wake = merge.deadline().map(tokio::time::Instant::from_std);
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    info!("shutdown requested: stop fetching, drain, commit");
                    break;
                }
            }
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                let (p, o, era): (i32, i64, u32) = done?;
                if epoch.get(&p).copied().unwrap_or(0) == era {
                    acked.insert(p, o + 1);
                }
            }
            term = async { lease.as_mut().expect("a lease").changed().await }, if lease.is_some() => {
                gauge!("neardup_lease_held").set(if term.held { 1.0 } else { 0.0 });
                health.standby.store(!term.held, Ordering::Relaxed);
                if subscribed && (!term.held || term.taken != subscribed_in) {
                    // Another instance may run the stage now, or did meanwhile (the lease
                    // lapsed and came back between two looks).
                    lapsed = Some("the lease's consumer group gave its partition away from this instance (its session there expired: a stall, or the broker out of reach)".into());
                    break;
                }
                // A standby takes up the input once it holds the lease.
                if term.held && !subscribed {
                    info!(topic = %opts.input_topic, group = %opts.group, "lease taken: this instance runs the stage now, from where the group's offsets and the state say");
                    // In a directory the instances share, the holder before this one may have
                    // written a checkpoint since this one started: the state starts from it.
                    if let Some(store) = &store {
                        let now = store.file_stamp();
                        if now.is_some() && now != loaded_file {
                            if let Some((t, offsets)) = tokio::task::block_in_place(|| {
                                load_state(store, cfg.clone(), opts)
                            })? {
                                (topo, state_from, loaded_file) = (t, offsets, now);
                            }
                        }
                    }
                    subscribe()?;
                    if let Some(w) = &watcher {
                        w.activate();
                    }
                    (subscribed, subscribed_in) = (true, term.taken);
                }
            }
            Some(q) = queries.recv() => {
                // The asker may have gone (a closed connection): nothing to do then. A standby's
                // state is not the stage's: it does not answer (503).
                if subscribed {
                    let _ = q.reply.send(crate::http::answer(&topo, &q.url));
                }
            }
            // The sign stage filled a partition, or lags on another: the loop's head looks again.
            changed = async { upstream.as_mut().expect("a watch").changed().await }, if upstream.is_some() => {
                match changed {
                    Ok(()) => answer = upstream.as_ref().and_then(|u| u.borrow().clone()),
                    Err(_) => upstream = None,
                }
            }
            // A record waited as long as it may for the other partitions: the loop's head
            // applies it.
            _ = tokio::time::sleep_until(merge_wake.unwrap_or_else(tokio::time::Instant::now)), if merge_wake.is_some() => {}
            _ = checkpoint_tick.tick(), if store.is_some() && checkpoint_due.is_none() && subscribed => {
                if saver.as_ref().is_some_and(Saver::busy) {
                    // A volume slower than the interval: input goes on, and the next tick
                    // tries again, rather than wait here for the file before.
                    warn!("checkpoint skipped: the one before is still being written (a slow volume, or a --checkpoint-interval shorter than a write)");
                } else {
                    // Stop reading; the loop's head takes the checkpoint once the outputs of
                    // every record read are acknowledged.
                    checkpoint_due = Some(Instant::now());
                }
            }
            _ = tick.tick() => {
                if let Some(t) = last_checkpoint {
                    checkpoint_age.set(t.elapsed().as_secs_f64());
                }
                if tick_period == opts.commit_interval || last_commit.elapsed() >= opts.commit_interval {
                    commit(&consumer, &opts.input_topic, &acked, &mut committed, Commit::Async)?;
                    last_commit = Instant::now();
                }
                telemetry::record_topology(&topo);
                telemetry::record_sign_cache(&sign_cache.stats());
                in_flight_gauge.set(in_flight.len() as f64);
                counter!("neardup_restored_records_total").absolute(restored_records);
                if merging {
                    assigned = assignment(&consumer)?;
                }
                if opts.exit_at_end && in_flight.is_empty() && preparing.is_empty() && merge.is_empty()
                    && all_at_end(&consumer, &at_end)? {
                    let own = assignment(&consumer)?;
                    // Questions to the broker, bounded: nothing else is to be done meanwhile.
                    if end_watch.as_mut().is_none_or(|w| tokio::task::block_in_place(|| w.done(&consumer, &own, &acked))) {
                        info!("every assigned partition read to its end");
                        break;
                    }
                }
            }
            // Records are decoded and signed on the preparing threads, ahead, in parallel...
            // (Past the bound on records in flight only while the merge waits for a partition
            // that has nothing buffered: else a bound below the number of partitions would
            // stall the merge until every wait ran out. Once a wait runs out the bound holds.)
            msg = consumer.recv(), if (in_flight.len() + preparing.len() + merge.len() < opts.max_in_flight
                || merge.waiting(Instant::now())) && preparing.len() < pool.depth() && checkpoint_due.is_none() => match msg {
                Err(KafkaError::PartitionEOF(p)) => { at_end.insert(p); }
                Err(e) => throttle::kafka_error(&throttle, "consumer", &e, "polling for records"),
                Ok(m) => {
                    take_revocations!();
                    let (p, o, stamp) = (m.partition(), m.offset(), m.timestamp().to_millis());
                    if let Some(t) = stamp {
                        delay_read.record(seconds_since(t));
                    }
                    let era = epoch.get(&p).copied().unwrap_or(0);
                    health.broker_up.store(true, Ordering::Relaxed);
                    at_end.remove(&p);
                    if upstream.is_some() {
                        received.lock().expect("received offsets").internal.insert(p, o + 1);
                    }
                    let ready = pool.submit(buffers.copy(m.payload().unwrap_or(&[])))?;
                    *pending.entry(p).or_default() += 1;
                    preparing.push_back(async move { (p, o, era, stamp, ready.await) }.boxed());
                }
            },
            // ... and applied to the topology in the order they were read.
            Some((p, o, era, stamp, ready)) = preparing.next(), if !preparing.is_empty() => {
                let (payload, prepared) = ready.map_err(|_| anyhow!("a preparing thread stopped"))?;
                if let Some(n) = pending.get_mut(&p) {
                    *n = n.saturating_sub(1);
                }
                if epoch.get(&p).copied().unwrap_or(0) != era {
                    // Read before the partition was revoked: its next owner processes it.
                    continue;
                }
                let prepared = prepared.map_err(|e| anyhow!("{e} ({}/{p} offset {o}, not committed)", opts.input_topic))?;
                if let (Some(_), Ready::Page(page)) = (&upstream, &prepared) {
                    if let Some((q, at)) = page.origin() {
                        received.lock().expect("received offsets").input.insert(q, at + 1);
                    }
                }
                if merging {
                    if !assigned.contains(&p) {
                        assigned = assignment(&consumer)?;
                        assigned.insert(p);
                    }
                    merge.push(p, prepared.event_time_ms(), (o, era, stamp, payload, prepared));
                } else {
                    apply!(p, o, era, stamp, payload, prepared);
                }
            }
            // The last batch of buffered records was full: the loop's head applies the next.
            _ = std::future::ready(()), if more_ready => {}
        }
    }

    // Drain: every output already handed to the producer gets its acknowledgement (bounded).
    let deadline = tokio::time::Instant::now() + opts.drain_timeout;
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, in_flight.next()).await {
            Ok(Some(done)) => {
                let (p, o, era) = done?;
                if epoch.get(&p).copied().unwrap_or(0) == era {
                    acked.insert(p, o + 1);
                }
            }
            Ok(None) => break,
            Err(_) => {
                warn!(
                    pending = in_flight.len(),
                    "drain timed out; their offsets stay uncommitted and are processed again after a restart"
                );
                break;
            }
        }
    }
    let held = commit(
        &consumer,
        &opts.input_topic,
        &acked,
        &mut committed,
        Commit::Within(opts.drain_timeout, &mut offsets_reader, &opts.group),
    )?;
    if held {
        info!(offsets = ?committed, "committed");
    }
    if let Some(saver) = &mut saver {
        // Each wait for the volume is bounded, as every other step of the shutdown.
        tokio::task::block_in_place(|| {
            saver.wait_within(opts.drain_timeout);
            if saver.busy() {
                warn!("no checkpoint at shutdown: the one before is still being written");
            } else if !subscribed {
                // A standby never ran the stage: its state is the one it loaded.
            } else if !held {
                // The group's offsets are behind the state (the broker out of reach, or a
                // lease holder the group dropped): a checkpoint of it would be refused at the
                // next start as ahead of the group. The last one stays, and the restart
                // re-reads from it.
                warn!("no checkpoint at shutdown: the group did not take the final commit; the last checkpoint stays");
            } else if !in_flight.is_empty() {
                warn!("no checkpoint at shutdown: the state holds records whose outputs were not acknowledged; the last checkpoint stays");
            } else if let Some(why) = group_behind(
                &mut offsets_reader,
                &opts.group,
                &opts.input_topic,
                &state_offsets(&state_from, &restored, &acked),
            ) {
                warn!("no checkpoint at shutdown: {why}; the last checkpoint stays");
            } else {
                let offsets = state_offsets(&state_from, &restored, &acked);
                saver.begin(
                    &topo,
                    &opts.input_topic,
                    &offsets,
                    Instant::now(),
                    Duration::ZERO,
                );
                saver.wait_within(opts.drain_timeout);
            }
        });
    }
    telemetry::record_topology(&topo);
    telemetry::record_sign_cache(&sign_cache.stats());
    // Leaving the group (librdkafka's consumer close, with the revocation callback's flush and
    // commit) is bounded too: a shard instance whose member the broker no longer knew
    // (`UnknownMemberId`) stayed in it for minutes after its outputs were flushed and its
    // offsets committed. The group's coordinator notices an instance gone at its session timeout.
    let limit = opts.drain_timeout.max(Duration::from_secs(5));
    if !drop_within(consumer, limit) {
        warn!(
            seconds = limit.as_secs(),
            "the consumer did not leave its group in time; exiting without waiting (outputs are flushed and offsets committed)"
        );
    }
    // Only then is the lease handed on: its next holder finds the input's partitions free.
    if let Some(lease) = lease {
        if !lease.release(limit) {
            warn!(
                seconds = limit.as_secs(),
                "the lease's consumer did not leave its group in time; the next instance takes the lease at its session timeout"
            );
        }
    }
    // A holder whose lease lapsed stops rather than rejoin its groups: the member the group
    // dropped may wait there for minutes (tansu kept one from the lease for over 90 s), a new
    // process joins at once, and meanwhile the instance that took the lease runs the stage.
    if let Some(why) = lapsed {
        bail!("{why}: this instance may no longer hold the lease, so it stopped running the stage (outputs flushed, offsets committed where the group still allowed it); restart it, and it stands by or takes the lease as the group decides");
    }
    Ok(RunOutcome {
        topology: topo,
        elapsed: started.elapsed(),
        restored_records,
        sign_cache: sign_cache.stats(),
    })
}

/// How long librdkafka waits before fetching again once its local queue is over
/// `queued.max.messages.kbytes` (64 MB by default, 2,600 pages of 25 KB): 1 s by default, in
/// which neardup drained the queue in half the time and then waited, empty, for the rest (on
/// the medium stream, 2,974 records/s with 1 s, 4,792 with 20 ms).
pub(crate) const FETCH_QUEUE_BACKOFF: (&str, &str) = ("fetch.queue.backoff.ms", "20");

/// Buffered records applied before the run loop serves its other events again.
const MERGE_BATCH: usize = 64;

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

/// The state in the checkpoint of `store` and the input offsets it reflects, if there is a
/// checkpoint; one of another stage is refused.
fn load_state(
    store: &Store,
    cfg: neardup_topology::Config,
    opts: &KafkaOptions,
) -> Result<Option<(Topology, BTreeMap<i32, i64>)>> {
    let Some((topo, header)) = store.load(cfg, &opts.input_topic)? else {
        return Ok(None);
    };
    let path = store.path().display().to_string();
    if Some(topo.role()) != opts.stage.role() {
        bail!(
            "the checkpoint in {path} holds the state of another stage ({:?}); give each stage its own --checkpoint-dir",
            topo.role()
        );
    }
    info!(%path, offsets = ?header.offsets, watermark = ?header.watermark, records = header.records,
        "state restored from the checkpoint");
    Ok(Some((topo, header.offsets)))
}

/// Drops `value` on a thread of its own and waits at most `limit` for it: true if the drop
/// finished. A drop that blocks longer (a Kafka client closing against a broker that does not
/// answer as it should) is left to finish, or to end with the process.
fn drop_within<T: Send + 'static>(value: T, limit: Duration) -> bool {
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("neardup-close".into())
        .spawn(move || {
            drop(value);
            let _ = done.send(());
        });
    // Without a thread the value was dropped here, with the closure.
    spawned.is_err() || finished.recv_timeout(limit).is_ok()
}

/// 1, 10, 100, ...: when a count is worth a log line.
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n % 10 == 0 {
        n /= 10;
    }
    n == 1
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

/// The partitions assigned to this instance now.
fn assignment(consumer: &StreamConsumer<RunContext>) -> Result<HashSet<i32>> {
    Ok(consumer
        .assignment()
        .context("cannot read the consumer's assignment")?
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect())
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

/// The sign stage sends each page to the internal partition with its input partition's
/// number, so that each internal partition holds one input partition's records in their order
/// whichever instance signed them, and the index stage merges them by event time exactly as
/// the all-in-one stage merges the input partitions: the counts must be equal.
fn check_signed_partitions(
    consumer: &StreamConsumer<RunContext>,
    input: &str,
    signed: &str,
) -> Result<()> {
    let (n, m) = (
        partition_count(consumer, input, METADATA_TIMEOUT)?,
        partition_count(consumer, signed, METADATA_TIMEOUT)?,
    );
    if n == 0 {
        bail!("the input topic {input} does not exist (or its metadata cannot be read): create it, or check --input-topic, before starting the sign stage");
    }
    match m {
        0 => bail!("the internal topic {signed} does not exist: create it with as many partitions as {input} ({n}) before starting the sign stage"),
        m if m != n => bail!("the internal topic {signed} has {m} partitions and the input topic {input} has {n}: they need the same number, since each input partition's records go to the internal partition of the same number (add partitions to {signed}, or recreate it, with {n})"),
        _ => Ok(()),
    }
}

/// The steps topic of an index stage split by key holds one partition per key shard.
fn check_steps_partitions(
    consumer: &StreamConsumer<RunContext>,
    topic: &str,
    key_shards: usize,
) -> Result<()> {
    match partition_count(consumer, topic, METADATA_TIMEOUT)? {
        n if n == key_shards => Ok(()),
        0 => bail!("the internal topic {topic} does not exist: create it with --key-shards ({key_shards}) partitions before starting the index, shard and verify stages"),
        n => bail!("the internal topic {topic} has {n} partitions and --key-shards is {key_shards}: each partition holds the records of one key shard, so they must be equal (recreate the topic, or give every stage --key-shards {n})"),
    }
}

/// The index stage's records reach the cluster stage in the order they were applied only
/// through a topic of one partition.
fn check_one_partition(consumer: &StreamConsumer<RunContext>, topic: &str) -> Result<()> {
    match partition_count(consumer, topic, METADATA_TIMEOUT)? {
        1 => Ok(()),
        0 => bail!("the internal topic {topic} does not exist: create it with exactly one partition before starting the stages it joins"),
        n => bail!("the internal topic {topic} has {n} partitions: it needs exactly one, so that the stage after it applies pages in the order the stage before it did"),
    }
}

/// A prepared record the merge holds: its offset, the ownership era it was read in, its Kafka
/// timestamp (ms), the record and what preparing it gave.
type Buffered = (i64, u32, Option<i64>, Vec<u8>, Ready);

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
    /// One thread per core, sharing `cache`.
    ///
    /// The threads take records from one queue, each the next one as soon as it is free: a
    /// page to sign costs some twenty times a page the sign cache knows, and records handed
    /// out in turn would leave one thread idle while another has signing queued, holding up
    /// every record applied after its own.
    fn new(cfg: &neardup_topology::Config, stage: Stage, cache: &Arc<SignCache>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (jobs, rx) = std::sync::mpsc::channel::<PrepareJob>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..cores {
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
        PreparePool {
            jobs,
            threads: cores,
        }
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

/// Hands one record to the producer, waiting while its queue is full.
async fn send(producer: &Producer, topic: &str, e: &Emit) -> Result<DeliveryFuture> {
    send_raw(producer, topic, None, &e.key, &e.value).await
}

/// Hands one record to the producer, waiting while its queue is full.
async fn send_raw(
    producer: &Producer,
    topic: &str,
    partition: Option<i32>,
    key: &str,
    value: &[u8],
) -> Result<DeliveryFuture> {
    loop {
        let mut record = FutureRecord::to(topic).key(key).payload(value);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        match producer.send_result(record) {
            Ok(f) => return Ok(f),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((err, _)) => bail!("cannot produce to {topic}: {err}"),
        }
    }
}

/// Resolves when every delivery of input `(p, o)` is acknowledged; fails on the first failure.
/// With `age` (the input's Kafka timestamp, in ms), records how old the input is then.
async fn acknowledged(
    deliveries: Vec<DeliveryFuture>,
    p: i32,
    o: i64,
    epoch: u32,
    age: Option<(i64, metrics::Histogram)>,
) -> Result<(i32, i64, u32)> {
    for d in deliveries {
        match d.await {
            Ok(Ok(_)) => {}
            Ok(Err((err, msg))) => bail!(
                "the broker did not acknowledge an output of input partition {p} offset {o} (topic {}): {err}; \
                 stopping without committing it, so it is processed again after a restart",
                msg.topic()
            ),
            Err(_) => bail!("the producer was dropped before acknowledging input partition {p} offset {o}"),
        }
    }
    if let Some((stamp, histogram)) = age {
        histogram.record(seconds_since(stamp));
    }
    Ok((p, o, epoch))
}

/// Seconds from `stamp` (a Kafka timestamp, ms since the epoch) to now, by this host's clock: 0
/// for a timestamp ahead of it (another host's clock).
fn seconds_since(stamp: i64) -> f64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    now.saturating_sub(stamp).max(0) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::{drop_within, is_power_of_ten, DeadLetterGuard};
    use std::time::{Duration, Instant};

    /// A value whose drop takes `0` long, as a Kafka consumer's close can.
    struct SlowDrop(Duration);

    impl Drop for SlowDrop {
        fn drop(&mut self) {
            std::thread::sleep(self.0);
        }
    }

    #[test]
    fn a_drop_that_blocks_is_waited_for_only_so_long() {
        let start = Instant::now();
        assert!(!drop_within(
            SlowDrop(Duration::from_secs(30)),
            Duration::from_millis(200)
        ));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(drop_within(
            SlowDrop(Duration::from_millis(10)),
            Duration::from_secs(10)
        ));
    }

    #[test]
    fn powers_of_ten_are_told() {
        let logged: Vec<u64> = (0..=100_000).filter(|&n| is_power_of_ten(n)).collect();
        assert_eq!(logged, vec![1, 10, 100, 1000, 10_000, 100_000]);
    }

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
