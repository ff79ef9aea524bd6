//! Starting a run: the Kafka clients, the checkpoint, and the checks of the topics a stage needs
//! before it joins its group.

use super::{Checkpoints, Hops, Meters, Producers, Run, Shared, UpstreamWatch};
use crate::at_end::{EndWatch, Prober};
use crate::buffers::Buffers;
use crate::checkpoints::{Saver, Store};
use crate::cli::Stage;
use crate::http::ClusterQuery;
use crate::kafka::offsets::Ownership;
use crate::kafka::pace;
use crate::kafka::{
    partition_count, DeadLetterGuard, KafkaOptions, PreparePool, Producer, ProducerLog, RunContext,
    AUTO_OFFSET_RESET, FETCH_QUEUE_BACKOFF, FETCH_WAIT, METADATA_TIMEOUT,
};
use crate::lease::Lease;
use crate::merge::Merge;
use crate::telemetry::{self, Health};
use crate::upstream::{Received, Upstream};
use anyhow::{anyhow, bail, Context as _, Result};
use futures::stream::FuturesOrdered;
use metrics::{gauge, histogram};
use neardup_topology::sign_cache::SignCache;
use neardup_topology::{SignStage, Topology};
use rdkafka::consumer::StreamConsumer;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;
use tracing::info;

impl Run {
    /// Makes the clients, loads the checkpoint, checks the topics the stage needs and joins the
    /// group (or, under a lease, the lease's group).
    pub(in crate::kafka) fn start(
        user_opts: &KafkaOptions,
        cfg: neardup_topology::Config,
        shutdown: watch::Receiver<bool>,
        queries: mpsc::Receiver<ClusterQuery>,
        health: Arc<Health>,
    ) -> Result<Run> {
        let end_watch = user_opts
            .exit_at_end
            .then(|| EndWatch::new(user_opts, cfg.key_shards));
        let received: Arc<Mutex<Received>> = Arc::default();
        // Under a lease, the watch asks only once this instance holds it.
        let (watcher, answers) = if user_opts.stage == Stage::Index
            && !user_opts.partition_wait.is_zero()
            && !user_opts.upstream_wait.is_zero()
        {
            let (watcher, lagging) = Upstream::watch(
                user_opts,
                user_opts.for_stage().group,
                received.clone(),
                !user_opts.leased(),
            );
            (Some(watcher), Some(lagging))
        } else {
            (None, None)
        };
        let opts = user_opts.for_stage();
        let started = Instant::now();
        if opts.stage == Stage::All {
            crate::sizing::warn_if_over_limit(&cfg, opts.sign_cache);
        }
        // Every stage but sign (stateless) and shard (one key shard per partition) keeps state
        // that joins pages of every partition of its input.
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
        let shared = Shared {
            applied: Arc::default(),
            revoked: Arc::default(),
            lost: Arc::default(),
            fatal: Arc::default(),
            throttle: Arc::default(),
        };
        let (producers, consumer) = clients(&opts, &cfg, &health, &shared, merging)?;

        let topics = opts.output_topics();
        let store = opts
            .checkpoint_dir
            .as_deref()
            .map(Store::open)
            .transpose()?;
        let loaded_file = store.as_ref().and_then(Store::file_stamp);
        let loaded = match &store {
            Some(s) => tokio::task::block_in_place(|| load_state(s, cfg.clone(), &opts))?,
            None => None,
        };
        let mut own = Ownership::default();
        let topo = match loaded {
            Some((topo, offsets)) => {
                own.state_from = offsets;
                topo
            }
            None => match opts.stage.role() {
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
        if topo.config().mirror_stage && matches!(opts.stage, Stage::Cluster | Stage::Mirror) {
            check_one_partition(&consumer, &opts.clustered_topic())?;
        }
        if opts.stage == Stage::Sign {
            check_signed_partitions(&consumer, &opts.input_topic, &opts.internal_topic())?;
        }
        // A run that stops at the end of its input has nothing to wait for if there is none,
        // nor if no broker answers (a run without --exit-at-end waits, with a warning every
        // 30 s, for the topic to appear and the broker to come up; /readyz says it is not ready
        // meanwhile). It is checked first, so a wrong --brokers stops it after one metadata
        // timeout.
        if opts.stage == Stage::All && opts.exit_at_end {
            match partition_count(&consumer, &opts.input_topic, METADATA_TIMEOUT) {
                Ok(0) => bail!(
                    "the input topic {} does not exist, so --exit-at-end has nothing to read: check --input-topic and --brokers",
                    opts.input_topic
                ),
                Ok(_) => {}
                Err(e) => {
                    // Rejected credentials and untrusted certificates have their own message.
                    if let Some(why) = shared.fatal.lock().expect("fatal error").take() {
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
            crate::topics::check_outputs(&consumer, &producers.fast, &opts, topo.config())
        })?;
        // Only a stage that passed its checks joins the group: a member that joins and then
        // exits on an error can keep the group waiting for it (tansu kept the next instance of
        // the shard stage unassigned for minutes).
        // Under a lease, the stage's input waits until this instance holds it (crate::lease).
        let lease = if opts.leased() {
            check_one_partition(&consumer, &opts.lease_topic())?;
            health.standby.store(true, Ordering::Relaxed);
            gauge!("neardup_lease_held").set(0.0);
            Some(Lease::join(&opts)?)
        } else {
            None
        };
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
        let mut checkpoint_tick = tokio::time::interval_at(
            tokio::time::Instant::now() + opts.checkpoint_interval,
            opts.checkpoint_interval,
        );
        checkpoint_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Under --exit-at-end each tick also looks whether the input is read to its end, so the
        // loop ticks at least once a second (a run with `--commit-interval 1h` sat at the end of
        // its input for the hour); the commit still waits for its own interval.
        let tick_period = if opts.exit_at_end {
            opts.commit_interval.min(Duration::from_secs(1))
        } else {
            opts.commit_interval
        };
        let mut tick = tokio::time::interval(tick_period);
        // A tick that took longer than the interval (asking the broker whether the stages
        // before this one are done, under --exit-at-end) must not be followed by a burst of
        // ticks: the loop prefers ticks to records, and would read none meanwhile.
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let sign_cache = Arc::new(SignCache::new(opts.sign_cache, cfg.window_ms));
        let run = Run {
            hops: Hops {
                internal: opts.internal_topic(),
                indexed: opts.indexed_topic(),
                steps: opts.steps_topic(),
                answered: opts.answered_topic(),
                clustered: opts.clustered_topic(),
            },
            offsets_reader: Prober::new(&opts),
            guard: DeadLetterGuard::new(opts.max_dead_letter_ratio, opts.dead_letter_window),
            pool: PreparePool::new(&cfg, opts.stage, &sign_cache),
            sign: SignStage::new(&cfg),
            sign_cache,
            checkpoints: Checkpoints {
                last: store.as_ref().map(|_| Instant::now()),
                saver: store.clone().map(Saver::new),
                store,
                loaded_file,
                due: None,
                tick: checkpoint_tick,
                age: gauge!("neardup_checkpoint_age_seconds"),
            },
            meters: Meters {
                process_seconds: histogram!("neardup_record_process_seconds", "step" => "apply"),
                delay_read: histogram!("neardup_record_delay_seconds", "until" => "read"),
                delay_acked: histogram!("neardup_record_delay_seconds", "until" => "acknowledged"),
                in_flight: gauge!("neardup_in_flight_records"),
            },
            subscribed: lease.is_none(),
            subscribed_in: 0,
            lease,
            lapsed: None,
            end_watch,
            upstream: UpstreamWatch {
                received,
                watcher,
                answers,
                answer: None,
            },
            opts,
            cfg,
            health,
            shutdown,
            queries,
            started,
            consumer,
            producers,
            topics,
            shared,
            topo,
            key_shards,
            by_key,
            merging,
            own,
            restored_records: 0,
            buffers: Buffers::default(),
            out: Vec::new(),
            preparing: FuturesOrdered::new(),
            pending: BTreeMap::new(),
            merge: Merge::default(),
            assigned: HashSet::new(),
            paused: HashSet::new(),
            in_flight: FuturesOrdered::new(),
            tick,
            tick_period,
            last_commit: Instant::now(),
        };
        if run.subscribed && run.opts.assign {
            run.assign_all()?;
        } else if run.subscribed {
            run.subscribe()?;
        }
        info!(topic = %run.opts.input_topic, group = %run.opts.group, brokers = %run.opts.brokers, "consuming");
        Ok(run)
    }
}

/// The run's producer and consumer, their callbacks sharing `shared` with the run loop.
fn clients(
    opts: &KafkaOptions,
    cfg: &neardup_topology::Config,
    health: &Arc<Health>,
    shared: &Shared,
    merging: bool,
) -> Result<(Producers, StreamConsumer<RunContext>)> {
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
    let make_producer = |linger: &str| -> Result<Producer> {
        opts.client_config(&[
            ("message.max.bytes", &max_output_bytes),
            ("acks", "all"),
            // A split stage after another one is fed a few records at a time, and each small
            // batch woke librdkafka's broker thread: with 5 ms, the four stages side by side on
            // the bench's medium stream spent 25-27 s of CPU, two thirds of the index stage's in
            // that thread; with 25 ms, 18-20 s (10 ms: 22 s; 50 ms: 17 s), for at most 25 ms
            // more per hop. The all-in-one process, fed in large batches, showed no difference
            // and keeps 5 ms for its latency; a second one lingers 50 ms for the outputs of a
            // backlog (`kafka::pace`). `-X linger.ms` sets one value for every producer.
            ("linger.ms", linger),
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
            throttle: shared.throttle.clone(),
            fatal: shared.fatal.clone(),
            stage: telemetry::current_stage(),
        })
        .context("cannot create the Kafka producer (check --brokers and -X properties)")
    };
    let fast_linger: u32 = if opts.stage == Stage::All { 5 } else { 25 };
    let fast = make_producer(&fast_linger.to_string())?;
    // Only the all-in-one process batches a backlog's outputs longer: in the split topology
    // the index stage and its key shards wait on each other's records (steps and answers), so
    // a longer linger there is a longer wait on every hop (with 250 ms, two key shards did not
    // finish the test stream in 60 s). The user's `linger.ms` applies to every producer: one
    // then serves both lanes.
    let user_linger =
        (opts.kafka.iter()).any(|(k, _)| k == "linger.ms" || k == "queue.buffering.max.ms");
    let bulk = if opts.stage == Stage::All && !user_linger {
        Some(make_producer(&pace::BULK_LINGER_MS.to_string())?)
    } else {
        None
    };
    let consumer: StreamConsumer<RunContext> = opts
        .client_config(&[
            ("group.id", &opts.group),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            AUTO_OFFSET_RESET,
            ("enable.partition.eof", eof),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
            ("statistics.interval.ms", "5000"),
            // A broker may hold a fetch this long waiting for data (see `FETCH_WAIT`; against
            // tansu, librdkafka's default of 500 ms made the median delay 164 ms; 50 ms, 32 ms;
            // 10 ms, 16 ms, on a machine where tansu kept up).
            FETCH_WAIT,
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
            producers: std::iter::once(fast.clone()).chain(bulk.clone()).collect(),
            applied: shared.applied.clone(),
            revoked: shared.revoked.clone(),
            flush_timeout: opts.drain_timeout,
            fatal: shared.fatal.clone(),
            throttle: shared.throttle.clone(),
            lost: shared.lost.clone(),
            stage: telemetry::current_stage(),
            group: opts.group.clone(),
            handover_reader: std::sync::Mutex::new(Prober::new(opts)),
        })
        .context("cannot create the Kafka consumer (check --brokers and -X properties)")?;
    Ok((Producers::new(fast, bulk), consumer))
}

/// The state in the checkpoint of `store` and the input offsets it reflects, if there is a
/// checkpoint; one of another stage is refused.
pub(super) fn load_state(
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
