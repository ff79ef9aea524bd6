//! What `neardup run` tells the outside world about itself: Prometheus metrics (through the
//! `metrics` crate, rendered at `GET /metrics`) and readiness (`GET /readyz`).
//!
//! The topology keeps plain counters ([`neardup_topology::Stats`] and the index's and clusters'
//! own); the run loop copies them into the registry once per commit tick ([`record_topology`]),
//! so the topology stays free of global state and the hot path pays for one histogram sample per
//! record. Consumer lag per partition and broker state come from librdkafka's statistics
//! (`statistics.interval.ms`, 5 s unless the `kafka` properties say otherwise).
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `neardup_input_records_total` | counter | |
//! | `neardup_pages_total`, `neardup_no_content_total`, `neardup_inconclusive_total` | counter | (fetches with content; without; 304, 429 and 5xx, which keep the content) |
//! | `neardup_signature_lists_capped_total` | counter | (signature events with out-links, chunks or paragraphs cut to their caps) |
//! | `neardup_dead_letters_total` | counter | `reason` |
//! | `neardup_output_records_total` | counter | `kind` (signatures, pairs, ...) |
//! | `neardup_pairs_detected_total` | counter | |
//! | `neardup_repeats_skipped_total` | counter | (index and cluster stages: records of the previous stage received again) |
//! | `neardup_late_records_total` | counter | (records of a crawl round that had ended when they came: they end no round) |
//! | `neardup_window_pages`, `neardup_live_pairs` | gauge | |
//! | `neardup_window_evictions_total` | counter | `cause` (`time`, `budget`) |
//! | `neardup_clusters`, `neardup_clustered_pages` | gauge | `level` |
//! | `neardup_sign_cache_hits_total`, `neardup_sign_cache_misses_total` | counter | (pages whose signatures came from the sign cache; pages signed) |
//! | `neardup_sign_cache_bytes`, `neardup_sign_cache_entries` | gauge | |
//! | `neardup_record_process_seconds` | histogram | `step` (`prepare`: decoding and signing, on the preparing threads; `apply`: the windowed state, in order) |
//! | `neardup_record_delay_seconds` | histogram | `until` (`read`: how old a record is, by its Kafka timestamp and this host's clock, when the run loop reads it; `acknowledged`: when the run loop has every output of it acknowledged, which is what a commit waits for; its outputs were readable downstream a little before) |
//! | `neardup_in_flight_records` | gauge | |
//! | `neardup_committed_offset` | gauge | `partition` |
//! | `neardup_restored_records_total` | counter | |
//! | `neardup_checkpoint_age_seconds`, `neardup_checkpoint_bytes` | gauge | (with `--checkpoint-dir`: seconds since the last checkpoint written, since the start before the first; its size) |
//! | `neardup_checkpoint_pause_seconds`, `neardup_checkpoint_write_seconds` | histogram | (how long input waited for a checkpoint: the records read applied, their outputs acknowledged, the offsets committed, the state copied; the state copied, then serialized into its file on the volume and synced on a thread of its own while input goes on) |
//! | `neardup_checkpoints_total`, `neardup_checkpoint_failures_total` | counter | (checkpoints written; not written, the run going on) |
//! | `neardup_consumer_lag` | gauge | `topic`, `partition` (the partitions assigned; 0 for one given up since) |
//! | `neardup_brokers_up` | gauge | |
//! | `neardup_kafka_errors_total` | counter | `client` (`consumer`, `producer`), `code` (librdkafka's error code): every error the clients report, also those [`crate::throttle`] keeps out of the log |
//! | `neardup_input_partitions`, `neardup_partitions_owned` | gauge | `topic` (the stage's input topic: its partitions; those assigned to this instance) |
//! | `neardup_lease_held` | gauge | (with `--lease`, on a stage whose state spans the partitions: 1 while this instance holds the lease and runs the stage, 0 while it stands by) |
//! | `neardup_clusters_forwarded_total` | counter | `outcome` (with `--http-advertise`, `/clusters` questions a standby forwarded: `answered` by the lease's holder, whatever the status; `unreachable`, the holder did not answer; `no_holder`, none published its URL, or the broker could not say) |
//! | `neardup_state_partial` | gauge | (1 when the stage's state spans every input partition and this instance owns some of them but not all: see [`Health::input`]) |
//!
//! A process that runs every stage (`--scale-out`) adds the label `stage` (`sign`, `index`,
//! ...) to every series, so that the stages' counters and gauges stay apart: each stage runs on
//! threads of its own, which say the stage they work for ([`set_stage`], [`staged`],
//! [`in_stage`]), and [`Staged`], the recorder installed, adds it to every series registered
//! there. A process that runs one stage leaves the label out, as the Deployment running it says
//! which stage it is.

use metrics::{counter, gauge, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use neardup_schemas::PairLevel;
use neardup_topology::sign_cache::SignCacheStats;
use neardup_topology::Topology;
use rdkafka::statistics::Statistics;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// The stage the current thread works for, in a process that runs several.
    static STAGE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Says that the current thread works for `stage` (`None`: for no stage in particular).
pub fn set_stage(stage: Option<&'static str>) {
    STAGE.with(|s| s.set(stage));
}

/// The stage the current thread works for, if it said so ([`set_stage`]).
pub fn current_stage() -> Option<&'static str> {
    STAGE.with(Cell::get)
}

/// `f`, to run on another thread as working for the current thread's stage, and inside its
/// tracing span (which names the stage in the log of a `--scale-out` process).
pub fn staged<T>(f: impl FnOnce() -> T) -> impl FnOnce() -> T {
    let (stage, span) = (current_stage(), tracing::Span::current());
    move || {
        set_stage(stage);
        let _entered = span.enter();
        f()
    }
}

/// Runs `f` as working for `stage` (for librdkafka's callbacks, served on its own threads),
/// then says what the thread said before.
pub fn in_stage<T>(stage: Option<&'static str>, f: impl FnOnce() -> T) -> T {
    let before = current_stage();
    set_stage(stage.or(before));
    let out = f();
    set_stage(before);
    out
}

/// A recorder that adds the label `stage` to every series registered on a thread that works
/// for a stage ([`set_stage`]), and passes the rest to `inner`.
pub struct Staged<R> {
    inner: R,
}

impl<R> Staged<R> {
    /// `inner`, with the stage's label added.
    pub fn new(inner: R) -> Self {
        Staged { inner }
    }

    fn key(key: &Key) -> Key {
        match current_stage() {
            Some(stage) => key.with_extra_labels(vec![Label::new("stage", stage)]),
            None => key.clone(),
        }
    }
}

impl<R: Recorder> Recorder for Staged<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> metrics::Counter {
        self.inner.register_counter(&Self::key(key), metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> metrics::Gauge {
        self.inner.register_gauge(&Self::key(key), metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> metrics::Histogram {
        self.inner.register_histogram(&Self::key(key), metadata)
    }
}

/// Installs the process-wide Prometheus recorder (once) and returns its handle.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let recorder = PrometheusBuilder::new()
        // How old records are: from milliseconds (a live stream) to hours (a backlog, a
        // replay of history). A full name goes before the suffix below.
        .set_buckets_for_metric(
            Matcher::Full("neardup_record_delay_seconds".into()),
            &[
                0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5,
                5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0,
            ],
        )?
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[
                0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05,
                0.1, 0.25, 1.0,
            ],
        )?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(Staged::new(recorder))
        .map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))?;
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// Copies the topology's counters into the registry.
pub fn record_topology(topo: &Topology) {
    let s = topo.stats();
    counter!("neardup_input_records_total").absolute(s.records);
    counter!("neardup_pages_total").absolute(s.pages);
    counter!("neardup_no_content_total").absolute(s.no_content);
    counter!("neardup_inconclusive_total").absolute(s.inconclusive);
    counter!("neardup_signature_lists_capped_total").absolute(s.lists_capped);
    counter!("neardup_pairs_detected_total").absolute(s.pairs_detected);
    counter!("neardup_repeats_skipped_total").absolute(s.repeats_skipped);
    counter!("neardup_late_records_total").absolute(s.late_records);
    counter!("neardup_event_time_leaps_total").absolute(topo.event_time_leaps());
    for (reason, n) in &s.dead_letters {
        counter!("neardup_dead_letters_total", "reason" => reason.as_str()).absolute(*n);
    }
    for (kind, n) in &s.outputs {
        counter!("neardup_output_records_total", "kind" => kind.short_name()).absolute(*n);
    }
    let near = topo.near_stats();
    gauge!("neardup_window_pages").set(near.pages as f64);
    gauge!("neardup_live_pairs").set(near.live_pairs as f64);
    counter!("neardup_window_evictions_total", "cause" => "time").absolute(near.evicted_by_time);
    counter!("neardup_window_evictions_total", "cause" => "budget")
        .absolute(near.evicted_by_budget);
    for level in [PairLevel::VerySimilar, PairLevel::VirtuallyIdentical] {
        if let Some(c) = topo.clusters(level) {
            let cs = c.stats();
            gauge!("neardup_clusters", "level" => level.as_str()).set(cs.clusters as f64);
            gauge!("neardup_clustered_pages", "level" => level.as_str())
                .set(cs.clustered_pages as f64);
        }
    }
}

/// Copies the sign cache's counters into the registry.
pub fn record_sign_cache(s: &SignCacheStats) {
    counter!("neardup_sign_cache_hits_total").absolute(s.hits);
    counter!("neardup_sign_cache_misses_total").absolute(s.misses);
    gauge!("neardup_sign_cache_bytes").set(s.bytes as f64);
    gauge!("neardup_sign_cache_entries").set(s.entries as f64);
}

/// Copies librdkafka's statistics (consumer lag, broker states) into the registry and `health`.
///
/// Lag is reported for the partitions assigned to this consumer ([`Health::owned`]). A
/// partition it gave up (to another instance of the group) is set to 0 at the next statistics:
/// librdkafka goes on listing it with the lag it had then (and, after the next assignment, even
/// as `desired`), so the gauge kept that value, a group's summed lag counted the partition
/// twice, and an alert on lag without progress would have fired on the instance that only
/// lost it (the rebalance test against the broker checks this).
pub fn record_kafka(stats: &Statistics, health: &Health) {
    let owned = health.owned.lock().expect("owned partitions").clone();
    let mut reported = health.lag_reported.lock().expect("lag partitions");
    for (topic, t) in &stats.topics {
        for (p, part) in &t.partitions {
            // A lag of -1 is unknown.
            let key = (topic.clone(), *p);
            if part.consumer_lag >= 0 && owned.contains(&key) {
                gauge!("neardup_consumer_lag", "topic" => topic.clone(), "partition" => p.to_string())
                    .set(part.consumer_lag as f64);
                reported.insert(key);
            }
        }
    }
    for (topic, p) in std::mem::take(&mut *reported) {
        if owned.contains(&(topic.clone(), p)) {
            reported.insert((topic, p));
        } else {
            gauge!("neardup_consumer_lag", "topic" => topic, "partition" => p.to_string()).set(0.0);
        }
    }
    if let Some(input) = health.input.get() {
        input.record(stats, &owned);
    }
    let up = stats
        .brokers
        .values()
        .filter(|b| b.source != "internal" && b.state == "UP")
        .count();
    gauge!("neardup_brokers_up").set(up as f64);
    health.broker_up.store(up > 0, Ordering::Relaxed);
}

/// Readiness, shared between the run loop, librdkafka's callbacks and the HTTP server.
#[derive(Debug, Default)]
pub struct Health {
    /// Partitions being restored now.
    pub restoring: AtomicU32,
    /// A broker answered lately (a record arrived, or the statistics show one up).
    pub broker_up: AtomicBool,
    /// The partitions (topic, partition) assigned to the consumer, kept by its rebalance
    /// callbacks (ready needs one).
    pub owned: Mutex<BTreeSet<(String, i32)>>,
    /// The partitions whose consumer lag is reported (see [`record_kafka`]).
    pub lag_reported: Mutex<BTreeSet<(String, i32)>>,
    /// The stage's input, set once the run knows it.
    pub input: std::sync::OnceLock<Input>,
    /// Standing by for the lease (`--lease`): ready without partitions.
    pub standby: AtomicBool,
}

/// The input topic of the stage this process runs, and whether the stage's state spans every
/// partition of it (the all-in-one, index, verify, cluster and mirror stages: pairs, clusters
/// and host pairs join pages of every partition).
///
/// Such a stage needs all the partitions in one instance. A second instance in the same
/// consumer group (a StatefulSet scaled past one replica, or another deployment given the
/// same group) takes some of them, and each then misses the pairs and clusters between pages
/// of partitions the other holds, with no error anywhere. From librdkafka's statistics, each
/// instance exports how many partitions the topic has and how many it owns, and
/// `neardup_state_partial`; it logs a warning when it comes to own some but not all (a rolling
/// update's hand-over passes through that state briefly).
#[derive(Debug)]
pub struct Input {
    topic: String,
    stage: &'static str,
    spans_partitions: bool,
    partial: AtomicBool,
}

impl Input {
    /// The input `topic` of `stage`, whose state spans every partition if `spans_partitions`.
    pub fn new(topic: &str, stage: &'static str, spans_partitions: bool) -> Input {
        Input {
            topic: topic.to_owned(),
            stage,
            spans_partitions,
            partial: AtomicBool::new(false),
        }
    }

    /// Whether `owned` of `total` partitions is part of the topic but not all of it, for a stage
    /// whose state spans every partition.
    pub fn is_partial(&self, owned: usize, total: usize) -> bool {
        self.spans_partitions && owned > 0 && owned < total
    }

    fn record(&self, stats: &Statistics, owned: &BTreeSet<(String, i32)>) {
        // librdkafka lists every partition the metadata names (and -1, its unassigned queue).
        let Some(total) = stats
            .topics
            .get(&self.topic)
            .map(|t| t.partitions.keys().filter(|&&p| p >= 0).count())
        else {
            return;
        };
        let mine = owned.iter().filter(|(t, _)| *t == self.topic).count();
        gauge!("neardup_input_partitions", "topic" => self.topic.clone()).set(total as f64);
        gauge!("neardup_partitions_owned", "topic" => self.topic.clone()).set(mine as f64);
        let partial = self.is_partial(mine, total);
        gauge!("neardup_state_partial").set(if partial { 1.0 } else { 0.0 });
        if partial && !self.partial.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                topic = %self.topic,
                owned = mine,
                partitions = total,
                "this {} instance holds {mine} of the {total} partitions of {}: another instance of its consumer group holds the others, and the stage's state spans every partition, so pairs and clusters between pages of partitions held by different instances are missed; run one instance of this stage per group, or every instance with --lease (one runs, the others stand by); during a rolling update this passes",
                self.stage,
                self.topic
            );
        } else if !partial && self.partial.swap(false, Ordering::Relaxed) {
            tracing::info!(topic = %self.topic, owned = mine, partitions = total, "this instance holds every partition of its input again, or none");
        }
    }
}

impl Health {
    /// `Ok` when ready to serve, else what is missing.
    pub fn ready(&self) -> Result<(), Vec<&'static str>> {
        let mut missing = vec![];
        if !self.broker_up.load(Ordering::Relaxed) {
            missing.push("no broker reachable");
        }
        if self.owned.lock().expect("owned partitions").is_empty()
            && !self.standby.load(Ordering::Relaxed)
        {
            missing.push("no partitions assigned");
        }
        if self.restoring.load(Ordering::Relaxed) > 0 {
            missing.push("restoring state");
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }
}

/// The readiness of a process: of its one stage, or of each stage it runs (`--scale-out`).
#[derive(Debug, Clone)]
pub struct Readiness {
    stages: Vec<(Option<&'static str>, Arc<Health>)>,
}

impl Readiness {
    /// The readiness of a process running one stage.
    pub fn one(health: Arc<Health>) -> Readiness {
        Readiness {
            stages: vec![(None, health)],
        }
    }

    /// The readiness of a process running `stages`, each (name, health): ready when every one
    /// is.
    pub fn of(stages: Vec<(&'static str, Arc<Health>)>) -> Readiness {
        Readiness {
            stages: stages.into_iter().map(|(n, h)| (Some(n), h)).collect(),
        }
    }

    /// `Ok` when ready to serve, else what is missing (with the stage it is missing in, when
    /// there are several).
    pub fn ready(&self) -> Result<(), Vec<String>> {
        let missing: Vec<String> = self
            .stages
            .iter()
            .flat_map(|(name, health)| {
                health
                    .ready()
                    .err()
                    .into_iter()
                    .flatten()
                    .map(move |m| match name {
                        Some(name) => format!("{name}: {m}"),
                        None => m.to_owned(),
                    })
            })
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stage_whose_state_spans_the_partitions_is_partial_with_some_of_them() {
        let all = Input::new("t", "all", true);
        assert!(all.is_partial(1, 2));
        assert!(all.is_partial(3, 4));
        // all of them, or none (another instance has all: its outputs are whole)
        assert!(!all.is_partial(2, 2));
        assert!(!all.is_partial(0, 2));
        // the sign and shard stages share partitions by design
        assert!(!Input::new("t", "sign", false).is_partial(1, 2));
    }

    #[test]
    fn a_process_of_several_stages_is_ready_when_each_is_and_says_which_is_not() {
        let (sign, index) = (Arc::new(Health::default()), Arc::new(Health::default()));
        for h in [&sign, &index] {
            h.broker_up.store(true, Ordering::Relaxed);
        }
        sign.owned.lock().unwrap().insert(("pages".to_owned(), 0));
        let r = Readiness::of(vec![("sign", sign.clone()), ("index", index.clone())]);
        assert_eq!(
            r.ready(),
            Err(vec!["index: no partitions assigned".to_owned()])
        );
        index.standby.store(true, Ordering::Relaxed);
        assert_eq!(r.ready(), Ok(()));
        sign.restoring.fetch_add(1, Ordering::Relaxed);
        assert_eq!(r.ready(), Err(vec!["sign: restoring state".to_owned()]));
        // One stage: what is missing, as it is.
        let one = Readiness::one(Arc::new(Health::default()));
        assert_eq!(
            one.ready(),
            Err(vec![
                "no broker reachable".to_owned(),
                "no partitions assigned".to_owned()
            ])
        );
    }

    #[test]
    fn series_registered_on_a_stage_s_threads_carry_its_label() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let staged = Staged::new(recorder);
        metrics::with_local_recorder(&staged, || {
            counter!("t_records_total").increment(1);
            in_stage(Some("sign"), || {
                counter!("t_records_total").increment(2);
                // A thread spawned for the stage works for it too.
                std::thread::spawn(staged_thread_body()).join().unwrap();
            });
            assert_eq!(
                current_stage(),
                None,
                "in_stage restores the thread's stage"
            );
            set_stage(Some("index"));
            gauge!("t_pages", "kind" => "x").set(4.0);
            set_stage(None);
        });
        let text = handle.render();
        for line in [
            "t_records_total 1",
            "t_records_total{stage=\"sign\"} 2",
            "t_pages{kind=\"x\",stage=\"index\"} 4",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
    }

    /// The body of a thread spawned by a thread of the sign stage: it works for the sign stage.
    /// (The local recorder is the spawning thread's alone, so only the stage is checked.)
    fn staged_thread_body() -> impl FnOnce() {
        staged(|| assert_eq!(current_stage(), Some("sign")))
    }

    #[test]
    fn ready_only_when_assigned_restored_and_connected() {
        let h = Health::default();
        assert_eq!(
            h.ready(),
            Err(vec!["no broker reachable", "no partitions assigned"])
        );
        h.broker_up.store(true, Ordering::Relaxed);
        h.owned.lock().unwrap().insert(("pages".to_owned(), 0));
        assert_eq!(h.ready(), Ok(()));
        h.restoring.fetch_add(1, Ordering::Relaxed);
        assert_eq!(h.ready(), Err(vec!["restoring state"]));
        // A standby (--lease) owns nothing and is ready to take over, if a broker is reachable.
        let standby = Health::default();
        standby.standby.store(true, Ordering::Relaxed);
        assert_eq!(standby.ready(), Err(vec!["no broker reachable"]));
        standby.broker_up.store(true, Ordering::Relaxed);
        assert_eq!(standby.ready(), Ok(()));
    }
}
