//! When a stage of a split topology may stop under `--exit-at-end`.
//!
//! A stage after signing reads an internal topic that the stages before it may still be
//! writing: that its partitions are at their end says nothing while they run. So such a stage
//! stops only once every stage before it, first to last, has committed its whole input (a stage
//! commits an offset only when the outputs of the records before it are acknowledged, so its
//! outputs are then all in the next topic, whose end is final from then on), and it has itself
//! applied its input to that end. Checked in that order, each end is final when it is read.
//!
//! "To the end" is asked of the fetch path, not of the partition's listed end offset: a client
//! that joins no group starts reading the partition at the offset in question, and the partition is at
//! its end there if the broker answers with its end, not with a record. (tansu 0.6.0 lists a
//! partition's end as the start of its last batch, plus one; its fetches are exact.) A
//! partition with no committed offset is read from its start, so an empty one is done.
//! Another group's committed offsets are read with a client of that group that never joins
//! it. The sign and all-in-one stages read the input itself and keep the plain rule: stop
//! once every assigned partition is at its end.

use crate::cli::Stage;
use crate::kafka::KafkaOptions;
use anyhow::{anyhow, Context as _, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use tracing::{debug, info};

/// Bound on each question to the broker (a question unanswered in time means "not yet").
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// A stage before this one, as the consumer group and topic it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feeder {
    /// The stage's name.
    pub stage: &'static str,
    /// Its consumer group.
    pub group: String,
    /// Its input topic.
    pub topic: String,
}

/// The stage that writes `stage`'s input topic (`None` for the stages that read the input).
pub fn feeder_of(stage: Stage, key_shards: usize) -> Option<Stage> {
    match stage {
        Stage::All | Stage::Sign => None,
        Stage::Index => Some(Stage::Sign),
        // Shard i reads partition i, which the index stage (i = 0) or shard i - 1 writes: the
        // index stage comes first, and the lower partitions are checked with the stage's own.
        Stage::Shard => Some(Stage::Index),
        Stage::Verify => Some(Stage::Shard),
        Stage::Cluster if key_shards > 0 => Some(Stage::Verify),
        Stage::Cluster => Some(Stage::Index),
        Stage::Mirror => Some(Stage::Cluster),
    }
}

/// Every stage before `opts.stage` (given as the user gave them, before
/// `KafkaOptions::for_stage`), first to last.
pub fn feeders(opts: &KafkaOptions, key_shards: usize) -> Vec<Feeder> {
    let mut chain = Vec::new();
    let mut at = opts.stage;
    while let Some(up) = feeder_of(at, key_shards) {
        let mut o = opts.clone();
        o.stage = up;
        let o = o.for_stage();
        chain.push(Feeder {
            stage: up.name(),
            group: o.group,
            topic: o.input_topic,
        });
        at = up;
    }
    chain.reverse();
    chain
}

/// Whether every stage before this one is done; asked again on each tick at the end.
pub struct EndWatch {
    /// The stage, and the topic it reads.
    stage: Stage,
    topic: String,
    chain: Vec<Feeder>,
    probe: Prober,
    /// What the stage last said it waits for, without offsets (said again when it changes).
    said: Option<String>,
}

impl EndWatch {
    /// For the stage `opts.stage` (options as the user gave them).
    pub fn new(opts: &KafkaOptions, key_shards: usize) -> Self {
        EndWatch {
            stage: opts.stage,
            topic: opts.for_stage().input_topic,
            chain: feeders(opts, key_shards),
            probe: Prober::new(opts),
            said: None,
        }
    }

    /// Whether the stage reads the input itself (sign, all-in-one): then [`Self::done`] asks
    /// the broker nothing and is always true.
    pub fn local(&self) -> bool {
        self.chain.is_empty()
    }

    /// Whether the stage has applied all it will be given: every stage before it committed
    /// its whole input, then each of `own` (this instance's partitions of its input) is applied
    /// to its end (`applied`: per partition, the offset after the last record applied and
    /// acknowledged). A shard stage also waits for the lower partitions of its topic, which
    /// feed its own, to be committed by its group. Always true without stages before it.
    pub fn done<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
        &mut self,
        consumer: &C,
        own: &HashSet<i32>,
        applied: &BTreeMap<i32, i64>,
    ) -> bool {
        if self.chain.is_empty() {
            return true;
        }
        match self.first_unfinished(consumer, own, applied) {
            Ok(None) => true,
            Ok(Some(what)) => {
                self.say(format!("at the end of its input, the stage waits for {what} before exiting (--exit-at-end)"));
                false
            }
            Err(e) => {
                self.say(format!("at the end of its input, the stage cannot tell yet whether the stages before it are done ({e}); asking again"));
                false
            }
        }
    }

    /// Logs `what`, unless it was the last thing said but for the offsets in parentheses
    /// (which move on every tick while the stage before works).
    fn say(&mut self, what: String) {
        let gist = what.split(" (").next().unwrap_or_default().to_string();
        if self.said.as_ref() != Some(&gist) {
            info!("{what}");
            self.said = Some(gist);
        }
    }

    fn first_unfinished<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
        &mut self,
        consumer: &C,
        own: &HashSet<i32>,
        applied: &BTreeMap<i32, i64>,
    ) -> std::result::Result<Option<String>, String> {
        let topic = self.topic.clone();
        let err = |e: anyhow::Error| format!("{e:#}");
        let chain = self.chain.clone();
        for f in &chain {
            let partitions = crate::kafka::partition_ids(consumer, &f.topic, ASK_TIMEOUT)
                .with_context(|| format!("no metadata for {}", f.topic))
                .map_err(err)?;
            if partitions.is_empty() {
                return Ok(Some(format!(
                    "the topic {}, which does not exist yet",
                    f.topic
                )));
            }
            let committed = self
                .probe
                .committed(&f.group, &f.topic, &partitions)
                .map_err(err)?;
            let from: Vec<(i32, Option<i64>)> = partitions
                .iter()
                .map(|&p| (p, committed.get(&p).copied()))
                .collect();
            if let Some(&(p, next)) = self
                .probe
                .records_after(&f.topic, &from, true)
                .map_err(err)?
                .first()
            {
                return Ok(Some(format!(
                    "the {} stage (group {}) to finish {}/{p} (committed: {:?}; a record at {next})",
                    f.stage,
                    f.group,
                    f.topic,
                    committed.get(&p)
                )));
            }
        }
        let Some(&top) = own.iter().max() else {
            return Ok(Some(format!("partitions of {topic}")));
        };
        // The lower partitions a shard stage's own depend on, held by other instances.
        let others: Vec<i32> = if self.stage == Stage::Shard {
            (0..top).filter(|p| !own.contains(p)).collect()
        } else {
            Vec::new()
        };
        // Where the group stands: for the other instances' partitions, and for this
        // instance's that it has applied nothing of in this run (it resumed at the commit).
        let ask: Vec<i32> = own
            .iter()
            .filter(|p| !applied.contains_key(p))
            .chain(&others)
            .copied()
            .collect();
        let group_committed = committed_by(consumer, &topic, &ask).map_err(err)?;
        // Read after the committed offsets, so an end another instance committed is final.
        let from: Vec<(i32, Option<i64>)> = own
            .iter()
            .map(|p| (*p, applied.get(p).or(group_committed.get(p)).copied()))
            .chain(others.iter().map(|p| (*p, group_committed.get(p).copied())))
            .collect();
        let next = self.probe.records_after(&topic, &from, true).map_err(err)?;
        Ok(next.first().map(|&(p, next)| {
            let at = from.iter().find(|f| f.0 == p).and_then(|f| f.1);
            if own.contains(&p) {
                format!("the records of {topic}/{p} still on their way (applied to: {at:?}; a record at {next})")
            } else {
                format!("another instance of this stage to finish {topic}/{p} (committed: {at:?}; a record at {next})")
            }
        }))
    }
}

/// Clients that ask the broker where other groups stand and where topics end, joining no
/// group (made when first needed, kept for the next question).
pub struct Prober {
    /// Clients reading other groups' committed offsets, by group.
    clients: HashMap<String, BaseConsumer<Quiet>>,
    /// Clients of no group reading where a topic ends, by topic.
    probes: HashMap<String, BaseConsumer<Quiet>>,
    /// The client configuration, for those.
    config: rdkafka::ClientConfig,
}

impl Prober {
    /// With the connection settings of `opts`.
    pub fn new(opts: &KafkaOptions) -> Self {
        Prober {
            clients: HashMap::new(),
            probes: HashMap::new(),
            config: opts.client_config(&[]),
        }
    }

    /// The committed offsets of `partitions` of `topic` by `group` (a partition without one is
    /// left out).
    pub fn committed(
        &mut self,
        group: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>> {
        self.committed_within(group, topic, partitions, ASK_TIMEOUT)
    }

    /// [`Self::committed`], waiting at most `timeout` for the answer.
    pub fn committed_within(
        &mut self,
        group: &str,
        topic: &str,
        partitions: &[i32],
        timeout: Duration,
    ) -> Result<BTreeMap<i32, i64>> {
        committed_within(self.client(group)?, topic, partitions, timeout)
            .with_context(|| format!("cannot read group {group}'s committed offsets"))
    }

    /// The value of the last record keyed `key` among the last `span` records of
    /// `topic`/`partition` (none: no such record there).
    pub fn last_keyed(
        &mut self,
        topic: &str,
        partition: i32,
        key: &[u8],
        span: i64,
    ) -> Result<Option<Vec<u8>>> {
        let Some(&(low, high)) = self.watermarks(topic, &[partition])?.get(&partition) else {
            return Ok(None);
        };
        if high <= low {
            return Ok(None);
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(low.max(high - span)))?;
        let mut last = None;
        self.scan(topic, &tpl, |polled| match polled {
            Some(Ok(m)) => {
                if m.key() == Some(key) {
                    last = m.payload().map(<[u8]>::to_vec);
                }
                (m.offset() >= high - 1).then(|| Ok(last.take()))
            }
            Some(Err(KafkaError::PartitionEOF(_))) => Some(Ok(last.take())),
            Some(Err(e)) => Some(Err(anyhow!("reading {topic}: {e}"))),
            None => None,
        })
    }

    /// Reads `tpl` of `topic` from the offsets it names, handing `step` each poll's outcome
    /// (`None`: nothing yet) until it gives the answer, for at most [`ASK_TIMEOUT`].
    fn scan<T>(
        &mut self,
        topic: &str,
        tpl: &TopicPartitionList,
        mut step: impl FnMut(
            Option<rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'_>>>,
        ) -> Option<Result<T>>,
    ) -> Result<T> {
        let probe = self.probe(topic)?;
        // A new assignment discards what the previous one fetched (librdkafka versions them).
        probe
            .assign(tpl)
            .with_context(|| format!("cannot read {topic}"))?;
        let deadline = Instant::now() + ASK_TIMEOUT;
        let answer = loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break Err(anyhow!("no answer from {topic} in {ASK_TIMEOUT:?}"));
            };
            if let Some(answer) = step(probe.poll(left)) {
                break answer;
            }
        };
        probe
            .unassign()
            .with_context(|| format!("cannot stop reading {topic}"))?;
        answer
    }

    /// The partitions of `topic` (none: it does not exist).
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<i32>> {
        let probe = self.probe(topic)?;
        crate::kafka::partition_ids(probe, topic, ASK_TIMEOUT)
            .with_context(|| format!("no metadata for {topic}"))
    }

    /// The partitions of `topic` with a record at or after their offset in `from` (`None`: the
    /// partition's start), each with that record's offset, as fetches from there say (all
    /// partitions at once). With `first_only`, the first such partition to answer only.
    pub fn records_after(
        &mut self,
        topic: &str,
        from: &[(i32, Option<i64>)],
        first_only: bool,
    ) -> Result<Vec<(i32, i64)>> {
        if from.is_empty() {
            return Ok(Vec::new());
        }
        let mut tpl = TopicPartitionList::new();
        for &(p, offset) in from {
            tpl.add_partition_offset(topic, p, offset.map_or(Offset::Beginning, Offset::Offset))?;
        }
        let mut answered: Vec<i32> = Vec::new();
        let mut found: Vec<(i32, i64)> = Vec::new();
        self.scan(topic, &tpl, |polled| {
            match polled {
                Some(Err(KafkaError::PartitionEOF(p))) if !answered.contains(&p) => {
                    answered.push(p);
                }
                Some(Err(KafkaError::PartitionEOF(_))) | None => {}
                Some(Ok(m)) => {
                    let p = m.partition();
                    let asked = from.iter().find(|f| f.0 == p);
                    if !answered.contains(&p)
                        && asked.is_some_and(|f| f.1.is_none_or(|o| m.offset() >= o))
                    {
                        answered.push(p);
                        found.push((p, m.offset()));
                    }
                }
                Some(Err(e)) => return Some(Err(anyhow!("reading {topic}: {e}"))),
            }
            (from.iter().all(|(p, _)| answered.contains(p)) || (first_only && !found.is_empty()))
                .then(|| Ok(std::mem::take(&mut found)))
        })
    }

    /// The partitions of `topic` with a record at or after their offset in `from` (as
    /// [`Self::records_after`], without the offsets). A partition whose listed end is past the
    /// offset is taken without a fetch, which would bring a whole batch of records: the end a
    /// broker lists is never past the true end (tansu 0.6.0 lists less, the start of the last
    /// batch plus one), so only the others need a fetch to tell.
    pub fn partitions_with_records(
        &mut self,
        topic: &str,
        from: &[(i32, Option<i64>)],
    ) -> Result<HashSet<i32>> {
        let mut found = HashSet::new();
        let mut ask = Vec::new();
        let partitions: Vec<i32> = from.iter().map(|f| f.0).collect();
        let ends = self.watermarks(topic, &partitions)?;
        for &(p, offset) in from {
            let (low, high) = ends[&p];
            if offset.unwrap_or(low).max(low) < high {
                found.insert(p);
            } else {
                ask.push((p, offset));
            }
        }
        found.extend(
            self.records_after(topic, &ask, false)?
                .into_iter()
                .map(|(p, _)| p),
        );
        Ok(found)
    }

    /// Where each of `partitions` of `topic` starts and ends (its low and high watermarks), asked
    /// of all of them at once: one request for the starts and one for the ends to each
    /// partition's leader. Asked partition by partition, as `fetch_watermarks` asks, that took
    /// two round trips per partition, and the index stage's watch asks ten times a second.
    pub fn watermarks(
        &mut self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, (i64, i64)>> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let probe = self.probe(topic)?;
        // A list offsets request takes a timestamp per partition, -2 (`Beginning`) for the
        // start and -1 (`End`) for the end: librdkafka sends the same request for
        // `fetch_watermarks`, one partition at a time.
        let ask = |at: Offset, which: &str| -> Result<BTreeMap<i32, i64>> {
            let mut tpl = TopicPartitionList::new();
            for &p in partitions {
                tpl.add_partition_offset(topic, p, at)?;
            }
            let got = probe
                .offsets_for_times(tpl, ASK_TIMEOUT)
                .with_context(|| format!("cannot read where the partitions of {topic} {which}"))?;
            got.elements()
                .iter()
                .map(|e| {
                    let p = e.partition();
                    e.error()
                        .with_context(|| format!("cannot read where {topic}/{p} {which}"))?;
                    match e.offset() {
                        Offset::Offset(o) => Ok((p, o)),
                        other => Err(anyhow!(
                            "the broker gave no offset for where {topic}/{p} {which} ({other:?})"
                        )),
                    }
                })
                .collect()
        };
        let low = ask(Offset::Beginning, "starts")?;
        let high = ask(Offset::End, "ends")?;
        partitions
            .iter()
            .map(|&p| match (low.get(&p), high.get(&p)) {
                (Some(&l), Some(&h)) => Ok((p, (l, h))),
                _ => Err(anyhow!("the broker did not say where {topic}/{p} ends")),
            })
            .collect()
    }

    fn probe(&mut self, topic: &str) -> Result<&BaseConsumer<Quiet>> {
        Ok(match self.probes.entry(topic.to_string()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let mut c = self.config.clone();
                // librdkafka assigns partitions only to a consumer with a group id; this one
                // neither joins nor commits.
                c.set("group.id", "neardup-end-probe")
                    .set("enable.partition.eof", "true")
                    .set("enable.auto.commit", "false")
                    .set("fetch.wait.max.ms", "10")
                    .set("max.partition.fetch.bytes", "1024")
                    .set("queued.min.messages", "1");
                e.insert(
                    c.create_with_context(Quiet)
                        .context("cannot create a client to read the end of a topic")?,
                )
            }
        })
    }

    fn client(&mut self, group: &str) -> Result<&BaseConsumer<Quiet>> {
        if !self.clients.contains_key(group) {
            let mut c = self.config.clone();
            c.set("group.id", group).set("enable.auto.commit", "false");
            let client = c.create_with_context(Quiet).with_context(|| {
                format!("cannot create a client to read group {group}'s offsets")
            })?;
            self.clients.insert(group.to_string(), client);
        }
        Ok(&self.clients[group])
    }
}

/// The context of the clients that read other groups' offsets and where topics end: the end of a partition is what they look for, and any other trouble
/// shows in the answer (or in the stage's own consumer), so librdkafka's errors are not
/// logged above debug.
pub struct Quiet;

impl rdkafka::ClientContext for Quiet {
    /// Not parsed, nor logged at `info` as the default does (`-X statistics.interval.ms`
    /// reaches these clients too).
    fn stats_raw(&self, _statistics: &[u8]) {}

    fn error(&self, error: KafkaError, reason: &str) {
        debug!(error = %error, reason, "librdkafka error (reading where a topic ends)");
    }
}

impl rdkafka::consumer::ConsumerContext for Quiet {}

/// The committed offsets of `partitions` of `topic`, of `consumer`'s group (a partition without
/// one is left out).
pub(crate) fn committed_by<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
    consumer: &C,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>> {
    committed_within(consumer, topic, partitions, ASK_TIMEOUT)
}

fn committed_within<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
    consumer: &C,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<BTreeMap<i32, i64>> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, timeout)
        .with_context(|| format!("no committed offsets for {topic}"))?;
    Ok(got
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(stage: Stage) -> KafkaOptions {
        KafkaOptions::example(stage)
    }

    fn chain(stage: Stage, key_shards: usize) -> Vec<(&'static str, String, String)> {
        feeders(&opts(stage), key_shards)
            .into_iter()
            .map(|f| (f.stage, f.group, f.topic))
            .collect()
    }

    #[test]
    fn each_stage_waits_for_every_stage_before_it_in_order() {
        let f = |s: &'static str, g: &str, t: &str| (s, g.to_string(), t.to_string());
        assert!(chain(Stage::All, 0).is_empty());
        assert!(chain(Stage::Sign, 2).is_empty());
        assert_eq!(chain(Stage::Index, 0), [f("sign", "g", "pages")]);
        let to_index = [
            f("sign", "g", "pages"),
            f("index", "g.index", "p.internal.signed"),
        ];
        assert_eq!(chain(Stage::Cluster, 0), to_index);
        assert_eq!(chain(Stage::Shard, 2), to_index);
        let to_verify = [
            f("sign", "g", "pages"),
            f("index", "g.index", "p.internal.signed"),
            f("shard", "g.shard", "p.internal.steps"),
        ];
        assert_eq!(chain(Stage::Verify, 2), to_verify);
        let mut to_mirror = to_verify.to_vec();
        to_mirror.push(f("verify", "g.verify", "p.internal.answered"));
        to_mirror.push(f("cluster", "g.cluster", "p.internal.indexed"));
        assert_eq!(chain(Stage::Mirror, 2), to_mirror);
        assert_eq!(
            chain(Stage::Mirror, 0),
            [
                f("sign", "g", "pages"),
                f("index", "g.index", "p.internal.signed"),
                f("cluster", "g.cluster", "p.internal.indexed"),
            ]
        );
    }
}
