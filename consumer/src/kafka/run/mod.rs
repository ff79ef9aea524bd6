//! The run loop of [`super::run`]: [`Run`] holds the Kafka clients, the topology and what the
//! loop knows of each partition, and has one method per event the loop serves. [`Run::start`]
//! makes the clients and checks the topics, [`Run::serve`] turns the loop until it is asked to
//! stop (or the input ends, or a lease lapses), and [`Run::finish`] drains, commits, checkpoints
//! and leaves the group, each step bounded.

use super::offsets::{
    all_at_end, commit, group_behind, restore_partitions, resume_offsets, take_revocations, Commit,
    Ownership,
};
use super::pace::{Lane, Pace};
use super::{
    DeadLetterGuard, KafkaOptions, PreparePool, PrepareResult, Producer, Ready, RunContext,
    RunOutcome,
};
use crate::at_end::{EndWatch, Prober};
use crate::buffers::Buffers;
use crate::checkpoints::{Saver, Store};
use crate::cli::Stage;
use crate::http::ClusterQuery;
use crate::lease::{Lease, Term};
use crate::merge::Merge;
use crate::telemetry::{self, Health};
use crate::throttle::{self, Throttle};
use crate::upstream::{Lagging, Received, Upstream};
use anyhow::{anyhow, bail, Context as _, Result};
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use futures::FutureExt;
use metrics::{counter, gauge, Gauge, Histogram};
use neardup_schemas::{OutputKind, Source};
use neardup_topology::sign_cache::SignCache;
use neardup_topology::{Emit, SignOutput, SignStage, Topology};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryFuture, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use start::load_state;
use std::collections::{BTreeMap, HashSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Interval;
use tracing::{debug, info, warn};

mod start;

/// The acknowledgement of one input record's outputs: its partition, offset and ownership era.
type Delivery = BoxFuture<'static, Result<(i32, i64, u32)>>;

/// A record being prepared: its partition, offset, ownership era, Kafka timestamp (ms), and the
/// preparing thread's answer.
type Preparing = BoxFuture<
    'static,
    (
        i32,
        i64,
        u32,
        Option<i64>,
        Result<PrepareResult, oneshot::error::RecvError>,
    ),
>;

/// What the consumer's and producer's callbacks share with the run loop.
struct Shared {
    /// Per input partition, the offset after the last record applied.
    applied: Arc<Mutex<BTreeMap<i32, i64>>>,
    /// Partitions revoked since the loop last looked.
    revoked: Arc<Mutex<Vec<i32>>>,
    /// The last revocation was of partitions lost (the session expired), not handed over.
    lost: Arc<AtomicBool>,
    /// An error retrying cannot cure (rejected credentials).
    fatal: Arc<Mutex<Option<String>>>,
    /// Repeated errors, logged once per period.
    throttle: Arc<Throttle>,
}

/// Checkpoints (with `--checkpoint-dir`): where they go, the one being written, and when the
/// next falls due.
struct Checkpoints {
    store: Option<Store>,
    saver: Option<Saver>,
    /// The checkpoint file as it was when loaded (a standby taking the lease loads it again if
    /// it changed: the holder may have written it, in a shared directory).
    loaded_file: Option<(u64, std::time::SystemTime)>,
    /// While a checkpoint waits for the outputs in flight: when it fell due, and input stopped
    /// (it gives up `drain_timeout` later).
    due: Option<Instant>,
    /// When the last one was written. With checkpoints on, their age counts from the start
    /// until the first is written, so a process whose every checkpoint is skipped shows it (and
    /// `NeardupCheckpointStale` fires).
    last: Option<Instant>,
    tick: Interval,
    age: Gauge,
}

/// The metrics the loop records on every record.
struct Meters {
    /// Applying a record to the topology.
    process_seconds: Histogram,
    /// How old a record is (by its Kafka timestamp) when it is read, and when its outputs are
    /// acknowledged: what an alert on stale duplicate reports watches.
    delay_read: Histogram,
    delay_acked: Histogram,
    in_flight: Gauge,
}

/// The topics a stage's records for the next stage go to.
struct Hops {
    internal: String,
    indexed: String,
    steps: String,
    answered: String,
    clustered: String,
}

/// The index stage's view of the sign stage before it ([`crate::upstream`]): it waits for the
/// internal partitions the sign stage still fills.
struct UpstreamWatch {
    /// Per partition, the offset after the last record received.
    received: Arc<Mutex<Received>>,
    /// The thread that asks (under a lease, only once this instance holds it).
    watcher: Option<Upstream>,
    /// Its answers (none: not the index stage, or the watch ended).
    answers: Option<watch::Receiver<Lagging>>,
    /// Its latest answer, taken when it changes (none yet: every partition lags).
    answer: Lagging,
}

/// The run loop's state.
pub(super) struct Run {
    /// The stage's options ([`KafkaOptions::for_stage`]).
    opts: KafkaOptions,
    cfg: neardup_topology::Config,
    health: Arc<Health>,
    shutdown: watch::Receiver<bool>,
    queries: mpsc::Receiver<ClusterQuery>,
    started: Instant,
    consumer: StreamConsumer<RunContext>,
    producers: Producers,
    topics: BTreeMap<OutputKind, String>,
    hops: Hops,
    shared: Shared,
    /// Reads the group's committed offsets back before a checkpoint (a client of the group that
    /// never joins it; made when first used).
    offsets_reader: Prober,
    topo: Topology,
    key_shards: usize,
    /// The index stage split by key ([`Run::next_stage`]).
    by_key: bool,
    /// Records of several partitions are applied in event-time order ([`crate::merge`]).
    merging: bool,
    own: Ownership,
    restored_records: u64,
    sign: SignStage,
    sign_cache: Arc<SignCache>,
    pool: PreparePool,
    buffers: Buffers,
    out: Vec<Emit>,
    guard: DeadLetterGuard,
    /// Records read and handed to the preparing threads, in the order read.
    preparing: FuturesOrdered<Preparing>,
    /// Per partition, records read and still being prepared.
    pending: BTreeMap<i32, usize>,
    merge: Merge<Buffered>,
    assigned: HashSet<i32>,
    /// Partitions paused while the merge waits for another one.
    paused: HashSet<i32>,
    /// The outputs of records applied, until the broker acknowledges them.
    in_flight: FuturesOrdered<Delivery>,
    checkpoints: Checkpoints,
    /// Commits, telemetry and the look for the input's end.
    tick: Interval,
    tick_period: Duration,
    last_commit: Instant,
    lease: Option<Lease>,
    /// Whether the stage reads its input (under a lease: since it took it, in the lease's term
    /// `subscribed_in`).
    subscribed: bool,
    subscribed_in: u64,
    /// Why this instance stopped running the stage before it was asked to (its lease lapsed).
    lapsed: Option<String>,
    /// Under --exit-at-end, a stage after signing also waits for the stages before it.
    end_watch: Option<EndWatch>,
    upstream: UpstreamWatch,
    meters: Meters,
}

/// Lease changes, for the run loop's `select!` (never, without a lease).
async fn lease_changed(lease: &mut Option<Lease>) -> Term {
    match lease {
        Some(lease) => lease.changed().await,
        None => std::future::pending().await,
    }
}

/// New answers of the sign stage's watch, for the run loop's `select!`.
async fn upstream_changed(
    answers: &mut Option<watch::Receiver<Lagging>>,
) -> Result<(), watch::error::RecvError> {
    match answers {
        Some(answers) => answers.changed().await,
        None => std::future::pending().await,
    }
}

impl Run {
    fn subscribe(&self) -> Result<()> {
        self.consumer
            .subscribe(&[&self.opts.input_topic])
            .with_context(|| format!("cannot subscribe to {}", self.opts.input_topic))
    }

    /// `--assign`: takes every partition of the input at once, without joining the group. Each
    /// starts at the group's committed offset, or where `auto.offset.reset` says if it has none
    /// (a checkpoint moves it later, as after a group's assignment: [`Run::restore`]).
    ///
    /// The offsets are read here and given to librdkafka: told to start at the stored offset,
    /// it read the group's offsets itself and, for a partition without one, asked for the
    /// earliest only about 100 ms later, so the first record came 0.26-0.29 s after the start
    /// instead of 0.15-0.18 s (the test broker, the bench's crawl). If they cannot be read,
    /// librdkafka is left to do so.
    fn assign_all(&self) -> Result<()> {
        let topic = &self.opts.input_topic;
        let ids = super::partition_ids(&self.consumer, topic, super::METADATA_TIMEOUT)
            .with_context(|| format!("cannot read the metadata of {topic}"))?;
        let committed = crate::at_end::committed_by(&self.consumer, topic, &ids);
        let fresh = without_commit(&self.opts.kafka);
        let mut tpl = TopicPartitionList::new();
        for p in ids {
            let at = match &committed {
                Ok(committed) => committed.get(&p).map_or(fresh, |&o| Offset::Offset(o)),
                Err(_) => Offset::Stored,
            };
            tpl.add_partition_offset(topic, p, at)?;
        }
        self.consumer
            .assign(&tpl)
            .with_context(|| format!("cannot assign the partitions of {topic}"))?;
        self.health
            .owned
            .lock()
            .expect("owned partitions")
            .extend(super::topic_partitions(&tpl));
        info!(partitions = ?super::partitions(&tpl), "partitions assigned (--assign: read alone, outside the consumer group)");
        Ok(())
    }

    /// Serves the loop's events until shutdown is asked for, every assigned partition is read
    /// to its end (`--exit-at-end`), or the lease lapses ([`Run::finish`] says so then).
    pub(super) async fn serve(&mut self) -> Result<()> {
        loop {
            self.take_revocations();
            if self.shared.lost.swap(false, Ordering::Relaxed) && self.lease.is_some() {
                // Its session in the lease's group likely expired too, and another instance may
                // hold the lease already: rejoining the input's group would share its
                // partitions.
                self.lapsed = Some("the input's consumer group dropped this instance (its session expired: a stall, or the broker out of reach)".into());
                return Ok(());
            }
            if let Some(why) = self.shared.fatal.lock().expect("fatal error").take() {
                bail!("{why}; stopping without committing what is in flight");
            }
            let more_ready = self.apply_buffered().await?;
            // A checkpoint's file written meanwhile (by its own thread).
            if let Some(at) = self.checkpoints.saver.as_mut().and_then(Saver::poll) {
                self.checkpoints.last = Some(at);
            }
            self.checkpoint_if_due()?;
            // A stage that reads the input itself is done once its partitions are at their
            // end, which it tells without asking the broker: it stops then, not at the next
            // tick (up to a second later). A split stage asks the broker, at ticks only.
            if !self.own.at_end.is_empty()
                && self.end_watch.as_ref().is_some_and(EndWatch::local)
                && self.read_to_end()?
            {
                return Ok(());
            }
            self.pause_for_merge();
            let merge_wake = self.merge.deadline().map(tokio::time::Instant::from_std);
            tokio::select! {
                biased;
                changed = self.shutdown.changed() => {
                    if changed.is_err() || *self.shutdown.borrow() {
                        info!("shutdown requested: stop fetching, drain, commit");
                        return Ok(());
                    }
                }
                Some(done) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    self.acknowledge(done?);
                }
                term = lease_changed(&mut self.lease), if self.lease.is_some() => {
                    if self.lease_term(term)?.is_break() {
                        return Ok(());
                    }
                }
                Some(q) = self.queries.recv() => {
                    // The asker may have gone (a closed connection): nothing to do then. A
                    // standby's state is not the stage's: it does not answer (503).
                    if self.subscribed {
                        let _ = q.reply.send(crate::http::answer(&self.topo, &q.url));
                    }
                }
                // The sign stage filled a partition, or lags on another: the loop's head looks
                // again.
                changed = upstream_changed(&mut self.upstream.answers), if self.upstream.answers.is_some() => {
                    match changed {
                        Ok(()) => {
                            self.upstream.answer =
                                self.upstream.answers.as_ref().and_then(|u| u.borrow().clone());
                        }
                        Err(_) => self.upstream.answers = None,
                    }
                }
                // A record waited as long as it may for the other partitions: the loop's head
                // applies it.
                _ = tokio::time::sleep_until(merge_wake.unwrap_or_else(tokio::time::Instant::now)), if merge_wake.is_some() => {}
                _ = self.checkpoints.tick.tick(), if self.checkpoints.store.is_some() && self.checkpoints.due.is_none() && self.subscribed => {
                    self.checkpoint_tick();
                }
                _ = self.tick.tick() => {
                    if self.on_tick()?.is_break() {
                        return Ok(());
                    }
                }
                // Records are decoded and signed on the preparing threads, ahead, in
                // parallel... (Past the bound on records in flight only while the merge waits
                // for a partition that has nothing buffered: else a bound below the number of
                // partitions would stall the merge until every wait ran out. Once a wait runs
                // out the bound holds.)
                msg = self.consumer.recv(), if (self.in_flight.len() + self.preparing.len() + self.merge.len() < self.opts.max_in_flight
                    || self.merge.waiting(Instant::now())) && self.preparing.len() < self.pool.depth() && self.checkpoints.due.is_none() => match msg {
                    Err(KafkaError::PartitionEOF(p)) => { self.own.at_end.insert(p); }
                    Err(e) => throttle::kafka_error(&self.shared.throttle, "consumer", &e, "polling for records"),
                    Ok(m) => {
                        let (p, o, stamp) = (m.partition(), m.offset(), m.timestamp().to_millis());
                        let payload = self.buffers.copy(m.payload().unwrap_or(&[]));
                        drop(m);
                        self.read(p, o, stamp, payload)?;
                    }
                },
                // ... and applied to the topology in the order they were read.
                Some((p, o, era, stamp, ready)) = self.preparing.next(), if !self.preparing.is_empty() => {
                    self.prepared(p, o, era, stamp, ready).await?;
                }
                // The last batch of buffered records was full: the loop's head applies the next.
                _ = std::future::ready(()), if more_ready => {}
            }
        }
    }

    /// Forgets the partitions revoked since it last ran (see [`take_revocations`]); with
    /// checkpoints, a checkpoint follows, so the state as it was when the partitions left is
    /// kept too.
    fn take_revocations(&mut self) {
        if take_revocations(&self.shared.revoked, &self.shared.applied, &mut self.own)
            && self.checkpoints.store.is_some()
            && self.checkpoints.due.is_none()
        {
            self.checkpoints.due = Some(Instant::now());
        }
    }

    /// An input record's outputs are all acknowledged (`(partition, offset, era)`).
    fn acknowledge(&mut self, (p, o, era): (i32, i64, u32)) {
        if self.own.era(p) == era {
            self.own.acked.insert(p, o + 1);
        }
    }

    /// Applies buffered records in event-time order (a checkpoint needs them all applied), a
    /// batch at a time, so that acknowledgements, queries and signals are served between: true
    /// if the batch was full and more may be ready.
    async fn apply_buffered(&mut self) -> Result<bool> {
        let flush = self.checkpoints.due.is_some();
        for _ in 0..MERGE_BATCH {
            // The head that goes next is one of those buffered: while any of them came after
            // the sign stage's latest answer, every partition is taken to lag (crate::upstream).
            let lagging = self.upstream.answers.is_some().then(|| {
                self.upstream
                    .answer
                    .as_ref()
                    .filter(|a| self.merge.heads().all(|(h, item)| a.covers(h, item.0)))
                    .map(|a| &a.lagging)
            });
            let (opts, at_end, pending) = (&self.opts, &self.own.at_end, &self.pending);
            let Some((p, (o, era, stamp, payload, prepared))) = self.merge.pop(
                &self.assigned,
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
                return Ok(false);
            };
            if self.own.era(p) != era {
                continue;
            }
            self.apply(p, o, era, stamp, payload, prepared).await?;
        }
        Ok(true)
    }

    /// Once a checkpoint is due and every record applied is acknowledged: commits, then writes
    /// the state with its offsets (skipped if the outputs in flight take longer than
    /// `drain_timeout`).
    fn checkpoint_if_due(&mut self) -> Result<()> {
        let Some(paused) = self
            .checkpoints
            .due
            .filter(|_| self.checkpoints.saver.is_some())
        else {
            return Ok(());
        };
        if self.preparing.is_empty() && self.merge.is_empty() && self.in_flight.is_empty() {
            // Every record applied is acknowledged: commit, then the state with its offsets.
            let committing = Instant::now();
            let held = self.commit_confirmed()?;
            let opts = &self.opts;
            let saver = self.checkpoints.saver.as_mut().expect("a saver");
            let offsets = self.own.state_offsets();
            let behind = if held {
                tokio::task::block_in_place(|| {
                    group_behind(
                        &mut self.offsets_reader,
                        &opts.group,
                        &opts.input_topic,
                        &offsets,
                    )
                })
            } else {
                Some("the group did not take the commit of its offsets".into())
            };
            if let Some(why) = behind {
                // A checkpoint ahead of the group's offsets would be refused at the next start
                // (the group seems reset behind its state): keep the last one.
                warn!("checkpoint skipped: {why}; the last checkpoint stays");
            } else if let Some(at) = tokio::task::block_in_place(|| {
                // The state is copied now; it is serialized into its file while input resumes.
                saver.begin(
                    &self.topo,
                    &opts.input_topic,
                    &offsets,
                    paused,
                    committing.elapsed(),
                )
            }) {
                self.checkpoints.last = Some(at);
            }
            self.checkpoints.due = None;
        } else if paused.elapsed() >= self.opts.drain_timeout {
            warn!(pending = self.in_flight.len(), "checkpoint skipped: outputs in flight were not acknowledged in time (drain_timeout); input resumes");
            self.checkpoints.due = None;
        }
        Ok(())
    }

    /// Commits the offsets of every record acknowledged and reads them back from the broker
    /// within `drain_timeout` (before a checkpoint, and at shutdown): true if the group took
    /// them.
    fn commit_confirmed(&mut self) -> Result<bool> {
        commit(
            &self.consumer,
            &self.opts.input_topic,
            &self.own.acked,
            &mut self.own.committed,
            Commit::Within(
                self.opts.drain_timeout,
                &mut self.offsets_reader,
                &self.opts.group,
            ),
        )
    }

    /// While the merge waits past the bound on records in flight, the partitions it holds
    /// records of are paused, so what is read is what it waits for (librdkafka drops what it
    /// fetched of them, and fetches again from the next record on resumption). They are
    /// resumed once the wait is over, or once the merge holds nothing more of them (they may be
    /// awaited then). Revoked ones too: librdkafka keeps a partition paused across an
    /// assignment.
    fn pause_for_merge(&mut self) {
        let topic = &self.opts.input_topic;
        let waiting = self.merge.waiting(Instant::now());
        if waiting
            && self.in_flight.len() + self.preparing.len() + self.merge.len()
                >= self.opts.max_in_flight
        {
            let hold: Vec<i32> = self
                .merge
                .heads()
                .map(|(q, _)| q)
                .filter(|q| !self.paused.contains(q))
                .collect();
            if !hold.is_empty() {
                debug!(partitions = ?hold, "paused while the merge waits for another partition");
                match self.consumer.pause(&tpl_of(topic, &hold)) {
                    Ok(()) => self.paused.extend(hold),
                    // Reading on past the bound, as before pausing existed, until the wait ends.
                    Err(e) => warn!("cannot pause the partitions {hold:?}: {e}"),
                }
            }
        }
        let resume: Vec<i32> = self
            .paused
            .iter()
            .copied()
            .filter(|&q| !waiting || !self.merge.holds(q))
            .collect();
        if !resume.is_empty() {
            self.paused.retain(|q| !resume.contains(q));
            if let Err(e) = self.consumer.resume(&tpl_of(topic, &resume)) {
                warn!("cannot resume the partitions {resume:?}: {e}");
            }
        }
    }

    /// The lease came or went: a holder that lost it stops (`Break`); a standby that took it
    /// takes up the input.
    fn lease_term(&mut self, term: Term) -> Result<ControlFlow<()>> {
        gauge!("neardup_lease_held").set(if term.held { 1.0 } else { 0.0 });
        self.health.standby.store(!term.held, Ordering::Relaxed);
        if self.subscribed && (!term.held || term.taken != self.subscribed_in) {
            // Another instance may run the stage now, or did meanwhile (the lease lapsed and
            // came back between two looks).
            self.lapsed = Some("the lease's consumer group gave its partition away from this instance (its session there expired: a stall, or the broker out of reach)".into());
            return Ok(ControlFlow::Break(()));
        }
        // A standby takes up the input once it holds the lease.
        if term.held && !self.subscribed {
            info!(topic = %self.opts.input_topic, group = %self.opts.group, "lease taken: this instance runs the stage now, from where the group's offsets and the state say");
            // In a directory the instances share, the holder before this one may have written a
            // checkpoint since this one started: the state starts from it.
            if let Some(store) = &self.checkpoints.store {
                let now = store.file_stamp();
                if now.is_some() && now != self.checkpoints.loaded_file {
                    if let Some((topo, offsets)) = tokio::task::block_in_place(|| {
                        load_state(store, self.cfg.clone(), &self.opts)
                    })? {
                        self.topo = topo;
                        self.own.state_from = offsets;
                        self.checkpoints.loaded_file = now;
                    }
                }
            }
            self.subscribe()?;
            if let Some(w) = &self.upstream.watcher {
                w.activate();
            }
            (self.subscribed, self.subscribed_in) = (true, term.taken);
        }
        Ok(ControlFlow::Continue(()))
    }

    /// A checkpoint falls due: input stops, and the loop's head takes it once the outputs of
    /// every record read are acknowledged.
    fn checkpoint_tick(&mut self) {
        if self.checkpoints.saver.as_ref().is_some_and(Saver::busy) {
            // A volume slower than the interval: input goes on, and the next tick tries again,
            // rather than wait here for the file before.
            warn!("checkpoint skipped: the one before is still being written (a slow volume, or a --checkpoint-interval shorter than a write)");
        } else {
            self.checkpoints.due = Some(Instant::now());
        }
    }

    /// The periodic tick: the commit, telemetry, and under `--exit-at-end` the look whether
    /// every assigned partition is read to its end (`Break`: it is).
    fn on_tick(&mut self) -> Result<ControlFlow<()>> {
        if let Some(t) = self.checkpoints.last {
            self.checkpoints.age.set(t.elapsed().as_secs_f64());
        }
        let opts = &self.opts;
        if self.tick_period == opts.commit_interval
            || self.last_commit.elapsed() >= opts.commit_interval
        {
            commit(
                &self.consumer,
                &opts.input_topic,
                &self.own.acked,
                &mut self.own.committed,
                Commit::Async,
            )?;
            self.last_commit = Instant::now();
        }
        telemetry::record_topology(&self.topo);
        telemetry::record_sign_cache(&self.sign_cache.stats());
        self.meters.in_flight.set(self.in_flight.len() as f64);
        counter!("neardup_restored_records_total").absolute(self.restored_records);
        if self.merging {
            self.assigned = assignment(&self.consumer)?;
        }
        if self.read_to_end()? {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Under `--exit-at-end`: whether every assigned partition is read to its end with every
    /// output acknowledged and, for a split stage, every stage before it done (said in the log).
    fn read_to_end(&mut self) -> Result<bool> {
        if !(self.opts.exit_at_end
            && self.in_flight.is_empty()
            && self.preparing.is_empty()
            && self.merge.is_empty()
            && all_at_end(&self.consumer, &self.own.at_end)?)
        {
            return Ok(false);
        }
        let own = assignment(&self.consumer)?;
        // Questions to the broker, bounded: nothing else is to be done meanwhile.
        let done = self.end_watch.as_mut().is_none_or(|w| {
            tokio::task::block_in_place(|| w.done(&self.consumer, &own, &self.own.acked))
        });
        if done {
            info!("every assigned partition read to its end");
        }
        Ok(done)
    }

    /// A record was read: it goes to the preparing threads.
    fn read(&mut self, p: i32, o: i64, stamp: Option<i64>, payload: Vec<u8>) -> Result<()> {
        self.take_revocations();
        if let Some(t) = stamp {
            self.meters.delay_read.record(seconds_since(t));
        }
        let era = self.own.era(p);
        self.health.broker_up.store(true, Ordering::Relaxed);
        self.own.at_end.remove(&p);
        if self.upstream.answers.is_some() {
            self.upstream
                .received
                .lock()
                .expect("received offsets")
                .internal
                .insert(p, o + 1);
        }
        let ready = self.pool.submit(payload)?;
        *self.pending.entry(p).or_default() += 1;
        self.preparing
            .push_back(async move { (p, o, era, stamp, ready.await) }.boxed());
        Ok(())
    }

    /// A record is prepared, in the order read: it is applied, or buffered for the merge.
    async fn prepared(
        &mut self,
        p: i32,
        o: i64,
        era: u32,
        stamp: Option<i64>,
        ready: Result<PrepareResult, oneshot::error::RecvError>,
    ) -> Result<()> {
        let (payload, prepared) = ready.map_err(|_| anyhow!("a preparing thread stopped"))?;
        if let Some(n) = self.pending.get_mut(&p) {
            *n = n.saturating_sub(1);
        }
        if self.own.era(p) != era {
            // Read before the partition was revoked: its next owner processes it.
            return Ok(());
        }
        let prepared = prepared.map_err(|e| {
            anyhow!(
                "{e} ({}/{p} offset {o}, not committed)",
                self.opts.input_topic
            )
        })?;
        if let (Some(_), Ready::Page(page)) = (&self.upstream.answers, &prepared) {
            if let Some((q, at)) = page.origin() {
                self.upstream
                    .received
                    .lock()
                    .expect("received offsets")
                    .input
                    .insert(q, at + 1);
            }
        }
        if self.merging {
            if !self.assigned.contains(&p) {
                self.assigned = assignment(&self.consumer)?;
                self.assigned.insert(p);
            }
            self.merge.push(
                p,
                prepared.event_time_ms(),
                (o, era, stamp, payload, prepared),
            );
            Ok(())
        } else {
            self.apply(p, o, era, stamp, payload, prepared).await
        }
    }

    /// Where the record for the next stage goes: from the index stage split by key to shard 0,
    /// from shard i to shard i + 1 or, from the last, to the verify stage; from the cluster
    /// stage to the mirror stage; else to the cluster stage.
    fn next_stage(&self, p: i32) -> (&str, Option<i32>) {
        match self.opts.stage {
            Stage::Index if self.by_key => (&self.hops.steps, Some(0)),
            Stage::Shard if (p as usize) + 1 < self.key_shards => (&self.hops.steps, Some(p + 1)),
            Stage::Shard => (&self.hops.answered, Some(0)),
            Stage::Cluster => (&self.hops.clustered, None),
            _ => (&self.hops.indexed, None),
        }
    }

    /// Applies one prepared record of partition `p` at offset `o` read in ownership `era`, and
    /// hands its outputs to the producer.
    async fn apply(
        &mut self,
        p: i32,
        o: i64,
        era: u32,
        stamp: Option<i64>,
        payload: Vec<u8>,
        prepared: Ready,
    ) -> Result<()> {
        let age = stamp.map(|t| (t, self.meters.delay_acked.clone()));
        if self.opts.stage == Stage::Sign {
            return self.apply_signed(p, o, era, age, payload, prepared).await;
        }
        if !self.own.restored.contains(&p) {
            self.restore(p, o)?;
        }
        if self.own.ahead.contains(&p) && self.own.state_from.get(&p).is_some_and(|&from| o < from)
        {
            // Already applied (and its outputs delivered) before the partition was revoked:
            // only its offset moves on.
            self.in_flight
                .push_back(futures::future::ready(Ok((p, o, era))).boxed());
            return Ok(());
        }
        let input = &self.opts.input_topic;
        let stopped = |e: &dyn std::fmt::Display| {
            anyhow!("{e} (stopped at {input}/{p} offset {o}, not committed)")
        };
        let src = Source::Kafka {
            topic: input.clone(),
            partition: p,
            offset: o,
        };
        let t0 = Instant::now();
        let dead_before = self.topo.stats().dead_letter_total();
        let leaps_before = self.topo.event_time_leaps();
        prepared
            .apply(&mut self.topo, (&payload, &src, p), &mut self.out)
            .map_err(|e| stopped(&e))?;
        self.meters
            .process_seconds
            .record(t0.elapsed().as_secs_f64());
        let leaps = self.topo.event_time_leaps();
        // The 1st, 10th, 100th, ...: enough to be seen, never a flood.
        if leaps > leaps_before && is_power_of_ten(leaps) {
            warn!(
                topic = %input, partition = p, offset = o, leaps,
                "a record dated more than --max-event-time-lead ahead of the event time did not move the windows (a crawler's clock or date field is wrong, or a pause in the crawl that 16 records in a row will confirm)"
            );
        }
        self.guard
            .record(self.topo.stats().dead_letter_total() > dead_before)
            .map_err(|e| stopped(&e))?;
        let senders = self.producers.for_record(stamp, self.opts.drain_timeout);
        let mut deliveries = Vec::with_capacity(self.out.len());
        for e in self.out.drain(..) {
            deliveries.push(send(senders.of(e.kind), &self.topics[&e.kind], &e).await?);
        }
        if let Some((key, value)) = self.topo.take_indexed() {
            let (topic, partition) = self.next_stage(p);
            deliveries.push(send_raw(&senders.lane, topic, partition, &key, &value).await?);
        }
        self.sent((p, o, era), age, deliveries, payload);
        Ok(())
    }

    /// The sign stage's part of [`Run::apply`]: the signed page goes to the internal partition
    /// with its input partition's number (or a dead letter to its topic).
    async fn apply_signed(
        &mut self,
        p: i32,
        o: i64,
        era: u32,
        age: Option<(i64, Histogram)>,
        payload: Vec<u8>,
        prepared: Ready,
    ) -> Result<()> {
        let Ready::Page(prepared) = prepared else {
            bail!("the sign stage was given an indexed record");
        };
        let input = &self.opts.input_topic;
        let src = Source::Kafka {
            topic: input.clone(),
            partition: p,
            offset: o,
        };
        let (topic, partition, key, value, dead) =
            match self.sign.output(prepared, &payload, &src, &mut self.topo) {
                SignOutput::Internal { key, value } => {
                    (&self.hops.internal, Some(p), key, value, false)
                }
                SignOutput::DeadLetter(e) => (&self.topics[&e.kind], None, e.key, e.value, true),
            };
        self.guard
            .record(dead)
            .map_err(|e| anyhow!("{e} (stopped at {input}/{p} offset {o}, not committed)"))?;
        // A split stage has one producer (`start::clients`).
        let delivery = send_raw(&self.producers.fast, topic, partition, &key, &value).await?;
        self.sent((p, o, era), age, vec![delivery], payload);
        Ok(())
    }

    /// The outputs of the record at `(p, o)` read in ownership `era` are with the producer:
    /// their acknowledgement is awaited, the record counts as applied (a hand-over flushes and
    /// commits up to it), and its buffer is reused.
    fn sent(
        &mut self,
        (p, o, era): (i32, i64, u32),
        age: Option<(i64, Histogram)>,
        deliveries: Vec<DeliveryFuture>,
        payload: Vec<u8>,
    ) {
        self.in_flight
            .push_back(acknowledged(deliveries, p, o, era, age).boxed());
        self.shared
            .applied
            .lock()
            .expect("applied offsets")
            .insert(p, o + 1);
        self.buffers.put(payload);
    }

    /// Rebuilds the state of partition `p` before offset `o`, its first record since it was
    /// assigned, and of every other partition whose first record is buffered, together: merged
    /// in event-time order, as it was applied.
    fn restore(&mut self, p: i32, o: i64) -> Result<()> {
        let mut first: Vec<(i32, i64)> = vec![(p, o)];
        for (q, (qo, qera, ..)) in self.merge.heads() {
            if q != p && !self.own.restored.contains(&q) && self.own.era(q) == *qera {
                first.push((q, *qo));
            }
        }
        // And, where partitions are merged by event time, every other partition assigned with
        // nothing read yet (at its end, or slower), from where the group resumes it: else p's
        // records would be applied before the state of its records before that is rebuilt, out
        // of event-time order (a page's previous fetch in one of them went missing from its
        // change). (A shard stage's partitions are shards of their own, each restored when its
        // first record comes.)
        if self.merging {
            let known: Vec<i32> = first.iter().map(|f| f.0).collect();
            let restored = &self.own.restored;
            let more = tokio::task::block_in_place(|| {
                resume_offsets(&self.consumer, &self.opts.input_topic, |q| {
                    restored.contains(&q) || known.contains(&q)
                })
            })?;
            first.extend(more);
        }
        let mut ranges = Vec::new();
        for (q, first) in first {
            self.own.restored.insert(q);
            let from = self.own.state_from.get(&q).copied();
            match from {
                // Applied here before the partition went away and came back.
                Some(from) if self.own.ahead.contains(&q) && from > first => {}
                _ => ranges.push((q, from, first)),
            }
        }
        self.health.restoring.fetch_add(1, Ordering::Relaxed);
        let n = restore_partitions(
            &self.opts,
            &self.consumer,
            &mut self.topo,
            &self.sign_cache,
            &ranges,
        );
        self.health.restoring.fetch_sub(1, Ordering::Relaxed);
        self.restored_records += n?;
        Ok(())
    }

    /// Drains (every output already handed to the producer gets its acknowledgement), commits,
    /// writes the last checkpoint and leaves the groups, each step bounded; then stops with an
    /// error if the lease lapsed.
    pub(super) async fn finish(mut self) -> Result<RunOutcome> {
        let deadline = tokio::time::Instant::now() + self.opts.drain_timeout;
        while !self.in_flight.is_empty() {
            match tokio::time::timeout_at(deadline, self.in_flight.next()).await {
                Ok(Some(done)) => self.acknowledge(done?),
                Ok(None) => break,
                Err(_) => {
                    warn!(
                        pending = self.in_flight.len(),
                        "drain timed out; their offsets stay uncommitted and are processed again after a restart"
                    );
                    break;
                }
            }
        }
        let held = self.commit_confirmed()?;
        let opts = &self.opts;
        if held {
            info!(offsets = ?self.own.committed, "committed");
        }
        if let Some(saver) = &mut self.checkpoints.saver {
            let offsets = self.own.state_offsets();
            // Each wait for the volume is bounded, as every other step of the shutdown.
            tokio::task::block_in_place(|| {
                saver.wait_within(opts.drain_timeout);
                if saver.busy() {
                    warn!("no checkpoint at shutdown: the one before is still being written");
                } else if !self.subscribed {
                    // A standby never ran the stage: its state is the one it loaded.
                } else if !held {
                    // The group's offsets are behind the state (the broker out of reach, or a
                    // lease holder the group dropped): a checkpoint of it would be refused at
                    // the next start as ahead of the group. The last one stays, and the restart
                    // re-reads from it.
                    warn!("no checkpoint at shutdown: the group did not take the final commit; the last checkpoint stays");
                } else if !self.in_flight.is_empty() {
                    warn!("no checkpoint at shutdown: the state holds records whose outputs were not acknowledged; the last checkpoint stays");
                } else if let Some(why) = group_behind(
                    &mut self.offsets_reader,
                    &opts.group,
                    &opts.input_topic,
                    &offsets,
                ) {
                    warn!("no checkpoint at shutdown: {why}; the last checkpoint stays");
                } else {
                    saver.begin(
                        &self.topo,
                        &opts.input_topic,
                        &offsets,
                        Instant::now(),
                        Duration::ZERO,
                    );
                    saver.wait_within(opts.drain_timeout);
                }
            });
        }
        telemetry::record_topology(&self.topo);
        telemetry::record_sign_cache(&self.sign_cache.stats());
        // Leaving the group (librdkafka's consumer close, with the revocation callback's flush
        // and commit) is bounded too: a shard instance whose member the broker no longer knew
        // (`UnknownMemberId`) stayed in it for minutes after its outputs were flushed and its
        // offsets committed. The group's coordinator notices an instance gone at its session
        // timeout.
        let limit = opts.drain_timeout.max(Duration::from_secs(5));
        let Run {
            consumer,
            producers,
            offsets_reader,
            end_watch,
            lease,
            lapsed,
            topo,
            started,
            restored_records,
            sign_cache,
            ..
        } = self;
        // Each Kafka client closes on a thread of its own, at once: librdkafka's destroy waits
        // for the client's threads, 40-105 ms a client on the test machine, and one client
        // after another held the exit of a run for about 0.36 s. The readers of offsets close
        // beside the consumer; the producers after it, as its revocation callback flushes
        // them (the last of their handles, dropped on those threads, closes them).
        let mut closing = vec![drop_aside((offsets_reader, end_watch))];
        if !drop_within(consumer, limit) {
            warn!(
                seconds = limit.as_secs(),
                "the consumer did not leave its group in time; exiting without waiting (outputs are flushed and offsets committed)"
            );
        }
        let Producers { fast, bulk, .. } = producers;
        closing.extend(std::iter::once(fast).chain(bulk).map(drop_aside));
        // Only then is the lease handed on: its next holder finds the input's partitions free.
        if let Some(lease) = lease {
            if !lease.release(limit) {
                warn!(
                    seconds = limit.as_secs(),
                    "the lease's consumer did not leave its group in time; the next instance takes the lease at its session timeout"
                );
            }
        }
        let deadline = Instant::now() + limit;
        let closed = closing.into_iter().all(|done| {
            done.is_none_or(|d| {
                d.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                    .is_ok()
            })
        });
        if !closed {
            warn!(
                seconds = limit.as_secs(),
                "a producer or an offsets reader did not close in time; exiting without waiting (outputs are flushed and offsets committed)"
            );
        }
        // A holder whose lease lapsed stops rather than rejoin its groups: the member the group
        // dropped may wait there for minutes (tansu kept one from the lease for over 90 s), a
        // new process joins at once, and meanwhile the instance that took the lease runs the
        // stage.
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
}

/// Where a partition the group has no offset for starts: as `auto.offset.reset` says (the
/// user's `-X` value, else neardup's [`super::AUTO_OFFSET_RESET`]), or wherever librdkafka takes it
/// to say.
fn without_commit(kafka: &[(String, String)]) -> Offset {
    let (key, default) = super::AUTO_OFFSET_RESET;
    let reset = crate::config::kafka_value(kafka, key).unwrap_or(default);
    match reset {
        "smallest" | "earliest" | "beginning" => Offset::Beginning,
        "largest" | "latest" | "end" => Offset::End,
        _ => Offset::Stored,
    }
}

/// The list of `partitions` of `topic`.
fn tpl_of(topic: &str, partitions: &[i32]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition(topic, p);
    }
    tpl
}

/// Buffered records applied before the run loop serves its other events again.
const MERGE_BATCH: usize = 64;

/// Drops `value` on a thread of its own and waits at most `limit` for it: true if the drop
/// finished. A drop that blocks longer (a Kafka client closing against a broker that does not
/// answer as it should) is left to finish, or to end with the process.
fn drop_within<T: Send + 'static>(value: T, limit: Duration) -> bool {
    drop_aside(value).is_none_or(|finished| finished.recv_timeout(limit).is_ok())
}

/// Drops `value` on a thread of its own: what hears when the drop finished (none: it finished
/// here, as no thread could be started).
fn drop_aside<T: Send + 'static>(value: T) -> Option<std::sync::mpsc::Receiver<()>> {
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("neardup-close".into())
        .spawn(move || {
            drop(value);
            let _ = done.send(());
        });
    // Without a thread the value was dropped here, with the closure.
    spawned.ok().map(|_| finished)
}

/// 1, 10, 100, ...: when a count is worth a log line.
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n % 10 == 0 {
        n /= 10;
    }
    n == 1
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

/// A prepared record the merge holds: its offset, the ownership era it was read in, its Kafka
/// timestamp (ms), the record and what preparing it gave.
type Buffered = (i64, u32, Option<i64>, Vec<u8>, Ready);

/// The run's producers: the fast lane's, and in the all-in-one process the bulk lane's unless
/// the user set `linger.ms` (else the fast one serves both); which one takes a record's
/// outputs follows how far behind the input the stage is ([`super::pace`]).
pub(super) struct Producers {
    pub(super) fast: Producer,
    bulk: Option<Producer>,
    pace: Pace,
}

impl Producers {
    pub(super) fn new(fast: Producer, bulk: Option<Producer>) -> Producers {
        Producers {
            fast,
            bulk,
            pace: Pace::default(),
        }
    }

    /// The producers for the outputs of a record with Kafka timestamp `stamp` (ms). When the
    /// lane changes, the producer left is flushed first, for at most `timeout`, so that the
    /// outputs of one key stay in order.
    fn for_record(&mut self, stamp: Option<i64>, timeout: Duration) -> Senders {
        let Some(bulk) = &self.bulk else {
            return Senders::one(&self.fast);
        };
        let (lane, switched) = self.pace.lane(stamp.map(millis_since));
        let (now, left) = match lane {
            Lane::Fast => (&self.fast, bulk),
            Lane::Bulk => (bulk, &self.fast),
        };
        if switched {
            let flushed =
                tokio::task::block_in_place(|| rdkafka::producer::Producer::flush(left, timeout));
            match lane {
                Lane::Bulk => info!(
                    "the input is a backlog (records over {} s old): outputs are batched longer",
                    super::pace::ENTER_MS / 1000
                ),
                Lane::Fast => info!("caught up with the input: outputs are sent promptly again"),
            }
            if let Err(e) = flushed {
                warn!(error = %e, "the outputs sent before the change did not all reach the broker in time; a key's outputs may arrive out of order");
            }
            counter!("neardup_output_lane_switches_total").increment(1);
        }
        Senders {
            lane: now.clone(),
            signatures: bulk.clone(),
        }
    }
}

/// The producers that take one record's outputs: its lane's ([`Producers::for_record`]), and
/// for its signature event the bulk lane's, whichever lane the record is in, where there is
/// one (`super::pace`: signature events are batched longer).
pub(super) struct Senders {
    lane: Producer,
    signatures: Producer,
}

impl Senders {
    /// One producer for every output.
    fn one(p: &Producer) -> Senders {
        Senders {
            lane: p.clone(),
            signatures: p.clone(),
        }
    }

    /// The producer for an output of `kind`: signature events always through the bulk one,
    /// the other kinds through their lane's, which changes only after a flush; so each
    /// topic's records keep their order.
    fn of(&self, kind: OutputKind) -> &Producer {
        match kind {
            OutputKind::Signatures => &self.signatures,
            _ => &self.lane,
        }
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
    millis_since(stamp).max(0) as f64 / 1000.0
}

/// Milliseconds from `stamp` (a Kafka timestamp, ms since the epoch) to now, by this host's
/// clock (negative for a timestamp ahead of it).
fn millis_since(stamp: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    now.saturating_sub(stamp)
}

#[cfg(test)]
mod tests {
    use super::{
        drop_aside, drop_within, is_power_of_ten, millis_since, without_commit, Producer,
        Producers, Senders,
    };
    use neardup_schemas::OutputKind;
    use rdkafka::Offset;
    use std::sync::{mpsc, Arc, Condvar, Mutex};
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

    /// A value whose drop waits (at most 10 s) until `n` such drops have begun, then says
    /// whether they all had.
    struct Meet {
        begun: Arc<(Mutex<usize>, Condvar)>,
        n: usize,
        met: mpsc::Sender<bool>,
    }

    impl Drop for Meet {
        fn drop(&mut self) {
            let (count, changed) = &*self.begun;
            let mut begun = count.lock().expect("count");
            *begun += 1;
            changed.notify_all();
            let (begun, _) = changed
                .wait_timeout_while(begun, Duration::from_secs(10), |b| *b < self.n)
                .expect("count");
            let _ = self.met.send(*begun >= self.n);
        }
    }

    #[test]
    fn drops_aside_run_at_once() {
        let begun = Arc::new((Mutex::new(0), Condvar::new()));
        let (met, heard) = mpsc::channel();
        let done: Vec<_> = (0..4)
            .map(|_| {
                drop_aside(Meet {
                    begun: begun.clone(),
                    n: 4,
                    met: met.clone(),
                })
            })
            .collect();
        for d in done {
            d.expect("a thread").recv().expect("the drop finished");
        }
        // Dropped one after another, the first would have waited in vain.
        assert_eq!(heard.try_iter().collect::<Vec<_>>(), vec![true; 4]);
        assert_eq!(*begun.0.lock().expect("count"), 4);
    }

    #[test]
    fn a_partition_without_a_commit_starts_where_the_reset_policy_says() {
        let kafka = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(without_commit(&[]), Offset::Beginning);
        assert_eq!(
            without_commit(&kafka(&[("auto.offset.reset", "latest")])),
            Offset::End
        );
        // The last value given wins, as in the client's configuration.
        assert_eq!(
            without_commit(&kafka(&[
                ("auto.offset.reset", "largest"),
                ("linger.ms", "5"),
                ("auto.offset.reset", "smallest"),
            ])),
            Offset::Beginning
        );
        // `error` (fail on a partition without an offset) is librdkafka's to apply.
        assert_eq!(
            without_commit(&kafka(&[("auto.offset.reset", "error")])),
            Offset::Stored
        );
    }

    /// A producer that never reaches a broker (none is asked for until it sends).
    fn idle_producer() -> Producer {
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .create_with_context(crate::kafka::context::ProducerLog {
                throttle: Arc::new(crate::throttle::Throttle::new(Duration::from_secs(30))),
                fatal: Arc::new(Mutex::new(None)),
                stage: None,
            })
            .expect("a producer")
    }

    /// Which of `named` `p` is (a clone shares its original's client).
    fn which(p: &Producer, named: &[(&'static str, &Producer)]) -> &'static str {
        let client = |p: &Producer| rdkafka::producer::Producer::client(p).native_ptr();
        let found = named.iter().find(|(_, q)| client(q) == client(p));
        found.expect("one of the producers made").0
    }

    #[test]
    fn signature_events_go_through_the_bulk_producer_in_either_lane() {
        // Milliseconds since the epoch, as the input's timestamps are.
        let now = || millis_since(0);
        let timeout = Duration::from_secs(5);
        let (fast, bulk, only) = (idle_producer(), idle_producer(), idle_producer());
        let named = [("fast", &fast), ("bulk", &bulk), ("only", &only)];
        let kinds = |s: &Senders| {
            [
                OutputKind::Signatures,
                OutputKind::Pairs,
                OutputKind::Clusters,
            ]
            .map(|k| which(s.of(k), &named))
        };
        let mut two = Producers::new(fast.clone(), Some(bulk.clone()));
        // Caught up: the signature event waits for the bulk batch, the others are sent promptly.
        let caught_up = two.for_record(Some(now()), timeout);
        assert_eq!(kinds(&caught_up), ["bulk", "fast", "fast"]);
        // A backlog: every output batched longer.
        let behind = two.for_record(Some(now() - 10_000), timeout);
        assert_eq!(kinds(&behind), ["bulk", "bulk", "bulk"]);
        // The user's linger.ms: one producer for everything.
        let mut one = Producers::new(only.clone(), None);
        let only = one.for_record(Some(now()), timeout);
        assert_eq!(kinds(&only), ["only", "only", "only"]);
    }

    #[test]
    fn powers_of_ten_are_told() {
        let logged: Vec<u64> = (0..=100_000).filter(|&n| is_power_of_ten(n)).collect();
        assert_eq!(logged, vec![1, 10, 100, 1000, 10_000, 100_000]);
    }
}
