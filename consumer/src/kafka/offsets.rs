//! Offsets: which partitions the run owns, what it may commit (up to the lowest offset whose
//! outputs are all acknowledged; the committed offset is the next one to read), and where each
//! partition resumes after a restart or a rebalance.

use super::{partitions, prepare, topic_partitions, Ready, FETCH_QUEUE_BACKOFF};
use super::{KafkaOptions, RunContext};
use crate::at_end::Prober;
use crate::merge::Merge;
use anyhow::{anyhow, bail, Context as _, Result};
use metrics::gauge;
use neardup_schemas::Source;
use neardup_topology::sign_cache::SignCache;
use neardup_topology::{InternalReader, Topology};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// What the run loop knows about the partitions it owns.
#[derive(Default)]
pub(super) struct Ownership {
    /// Per partition, how many times it was revoked: records and acknowledgements of an
    /// earlier ownership are dropped.
    pub(super) epoch: BTreeMap<i32, u32>,
    /// Partitions whose state is rebuilt up to where this ownership started reading them.
    pub(super) restored: HashSet<i32>,
    /// Per partition, the offset after the last record whose outputs are all acknowledged.
    pub(super) acked: BTreeMap<i32, i64>,
    /// Per partition, the offset last committed.
    pub(super) committed: BTreeMap<i32, i64>,
    /// Partitions read to their end.
    pub(super) at_end: HashSet<i32>,
    /// Per input partition, the offset the state reflects the records before (from a
    /// checkpoint, or where this instance stopped when the partition was revoked).
    pub(super) state_from: BTreeMap<i32, i64>,
    /// Partitions this instance owned before and applied further than their next owner
    /// committed: records below `state_from` were applied and their outputs delivered here.
    pub(super) ahead: HashSet<i32>,
}

impl Ownership {
    /// The ownership era of partition `p`: the number of times it was revoked.
    pub(super) fn era(&self, p: i32) -> u32 {
        self.epoch.get(&p).copied().unwrap_or(0)
    }

    /// The input offsets the state reflects: those of the checkpoint it was restored from,
    /// moved on for every partition this run has restored and processed (all of whose records
    /// are acknowledged when this is called).
    pub(super) fn state_offsets(&self) -> BTreeMap<i32, i64> {
        let mut offsets = self.state_from.clone();
        for p in &self.restored {
            if let Some(&o) = self.acked.get(p) {
                offsets.insert(*p, o);
            }
        }
        offsets
    }
}

/// Forgets the partitions revoked since the last call: their records still on the way are
/// dropped (the next owner reads them from the committed offset), their offsets are no longer
/// committed here, and the state's position in each is remembered, so that if the partition
/// comes back the state is brought up to date from there (re-reading what the other owner
/// processed) instead of from the partition's start.
pub(super) fn take_revocations(
    revoked: &std::sync::Mutex<Vec<i32>>,
    applied: &std::sync::Mutex<BTreeMap<i32, i64>>,
    own: &mut Ownership,
) -> bool {
    let gone: Vec<i32> = std::mem::take(&mut *revoked.lock().expect("revoked partitions"));
    let any = !gone.is_empty();
    let applied = applied.lock().expect("applied offsets");
    for p in gone {
        *own.epoch.entry(p).or_default() += 1;
        own.acked.remove(&p);
        own.committed.remove(&p);
        own.at_end.remove(&p);
        if own.restored.remove(&p) {
            if let Some(&next) = applied.get(&p) {
                own.state_from.insert(p, next);
                own.ahead.insert(p);
            }
        }
        info!(partition = p, state_at = ?own.state_from.get(&p), "partition released");
    }
    any
}

/// The partitions of `wanted` (and their offsets) that the group's committed offsets `held` do
/// not reach: none committed, or one before the offset wanted.
pub(super) fn not_held<'a>(
    held: &'a BTreeMap<i32, i64>,
    wanted: &'a BTreeMap<i32, i64>,
) -> impl Iterator<Item = (i32, i64)> + 'a {
    wanted
        .iter()
        .filter(|&(p, &o)| held.get(p).is_none_or(|&c| c < o))
        .map(|(&p, &o)| (p, o))
}

/// Why a checkpoint of the state at `offsets` must not be written, if it must not: a partition
/// whose offset is past the one the group's committed (or that has none). The next start would
/// refuse such a checkpoint as ahead of the group, as if the group's offsets had been reset by
/// hand. The broker is asked (by `reader`, as in [`confirm`]) rather than this process's own
/// record of its commits, which counts an asynchronous commit as made once sent, and a
/// partition released in a rebalance as committed on its release; no answer in time counts as
/// behind.
pub(super) fn group_behind(
    reader: &mut Prober,
    group: &str,
    topic: &str,
    offsets: &BTreeMap<i32, i64>,
) -> Option<String> {
    let partitions: Vec<i32> = offsets.keys().copied().collect();
    let held = match reader.committed(group, topic, &partitions) {
        Ok(held) => held,
        Err(e) => {
            return Some(format!(
                "the group's committed offsets could not be read ({e:#})"
            ))
        }
    };
    let ahead: Vec<String> = not_held(&held, offsets)
        .map(|(p, o)| format!("{topic}/{p} at {o}, committed {:?}", held.get(&p)))
        .collect();
    (!ahead.is_empty()).then(|| {
        format!(
            "the state is ahead of the group's committed offsets ({})",
            ahead.join(", ")
        )
    })
}

/// How [`commit`] commits: sent and left to librdkafka, or confirmed by the broker within a
/// bound (before a checkpoint, and at shutdown).
pub(super) enum Commit<'a> {
    Async,
    /// Confirmed within the bound, the group's offsets read back with the reader.
    Within(Duration, &'a mut Prober, &'a str),
}

/// Commits the offsets of `acked` that `committed` does not hold yet (confirmed: of every
/// partition assigned). A refused commit is not fatal (the next one carries the same or later
/// offsets); the answer says whether the commit was taken (asynchronously: sent), as a
/// checkpoint of the state at `acked` may be written only then.
///
/// A confirmed commit is sent asynchronously and then read back from the broker until it
/// shows or the bound passes: librdkafka's synchronous commit has no bound of its own, and
/// with the broker gone it waited past a minute at shutdown (the coordinator's requests time
/// out at `socket.timeout.ms`).
pub(super) fn commit(
    consumer: &StreamConsumer<RunContext>,
    topic: &str,
    acked: &BTreeMap<i32, i64>,
    committed: &mut BTreeMap<i32, i64>,
    how: Commit<'_>,
) -> Result<bool> {
    // Only partitions still assigned: one whose revocation the run loop has yet to take was
    // committed on its release, and may be another instance's now, whose commits this one's
    // would undo. (librdkafka runs the revocation callback inside this task's poll of the
    // consumer, so the assignment cannot change between here and the commit.)
    let assigned: HashSet<i32> = consumer
        .assignment()
        .map(|tpl| {
            topic_partitions(&tpl)
                .filter(|(t, _)| t == topic)
                .map(|(_, p)| p)
                .collect()
        })
        .unwrap_or_default();
    // A confirmed commit sends the offset of every partition still assigned, even one taken as
    // committed: an asynchronous commit counts as made once sent, and the broker may still
    // have refused it.
    let confirmed = matches!(how, Commit::Within(..));
    let mut tpl = TopicPartitionList::new();
    for (&p, &next) in acked {
        if assigned.contains(&p) && (confirmed || committed.get(&p) != Some(&next)) {
            tpl.add_partition_offset(topic, p, Offset::Offset(next))?;
        }
    }
    if tpl.count() == 0 {
        return Ok(true);
    }
    let sent = consumer.commit(&tpl, CommitMode::Async);
    let taken = match (sent, how) {
        (Err(e), _) => Err(e.to_string()),
        (Ok(()), Commit::Async) => Ok(()),
        (Ok(()), Commit::Within(limit, reader, group)) => {
            let wanted: BTreeMap<i32, i64> = topic_partitions(&tpl)
                .map(|(_, p)| (p, acked[&p]))
                .collect();
            tokio::task::block_in_place(|| confirm(reader, group, topic, &wanted, limit))
        }
    };
    match taken {
        Ok(()) => {
            debug!(offsets = ?partitions(&tpl), "commit sent");
            for (p, o) in acked {
                gauge!("neardup_committed_offset", "partition" => p.to_string()).set(*o as f64);
            }
            committed.extend(acked.iter().map(|(p, o)| (*p, *o)));
            Ok(true)
        }
        // Not fatal: the next commit carries the same (or later) offsets; at shutdown, they are
        // processed again after a restart (at least once).
        Err(e) => {
            match confirmed {
                true => warn!(
                    error = %e,
                    "commit failed; the records since the last commit are processed again after a restart (no checkpoint is written ahead of the group's offsets)"
                ),
                false => {
                    warn!(error = %e, "commit failed; will retry with the next commit")
                }
            }
            Ok(false)
        }
    }
}

/// Waits until the broker says `group` committed at least `wanted` for each partition of
/// `topic`, asking again every 5 ms, for at most `limit`. `reader` asks as a client of the
/// group that never joins it: the member's own client waits out a rebalance under way before
/// it answers (5 s on tansu, after a partition's release).
pub(super) fn confirm(
    reader: &mut Prober,
    group: &str,
    topic: &str,
    wanted: &BTreeMap<i32, i64>,
    limit: Duration,
) -> std::result::Result<(), String> {
    let deadline = Instant::now() + limit;
    let partitions: Vec<i32> = wanted.keys().copied().collect();
    let mut last = String::from("no answer");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the broker did not confirm it within {limit:?} ({last})"
            ));
        }
        match reader.committed_within(group, topic, &partitions, left.min(Duration::from_secs(5))) {
            Ok(held) => {
                if not_held(&held, wanted).next().is_none() {
                    return Ok(());
                }
                last = format!("committed {held:?}");
            }
            Err(e) => last = format!("{e:#}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(super) fn all_at_end(
    consumer: &StreamConsumer<RunContext>,
    at_end: &HashSet<i32>,
) -> Result<bool> {
    let assignment = consumer.assignment()?;
    Ok(assignment.count() > 0
        && assignment
            .elements()
            .iter()
            .all(|e| at_end.contains(&e.partition())))
}

/// The assigned partitions of `topic` but those `skip` names, each with the offset the group
/// resumes it at (its committed offset; a partition without one starts at its earliest record,
/// before which there is nothing to rebuild, and is left out).
pub(super) fn resume_offsets(
    consumer: &StreamConsumer<RunContext>,
    topic: &str,
    skip: impl Fn(i32) -> bool,
) -> Result<Vec<(i32, i64)>> {
    let partitions: Vec<i32> = topic_partitions(&consumer.assignment()?)
        .filter(|(t, q)| t == topic && !skip(*q))
        .map(|(_, q)| q)
        .collect();
    let committed = crate::at_end::committed_by(consumer, topic, &partitions)?;
    Ok(committed.into_iter().collect())
}

/// Where re-reading partition `p` starts to rebuild the state it contributed before offset
/// `first`: the offset the state already reflects (`state_from`, from a checkpoint), or else its
/// earliest retained record.
pub(super) fn restore_start(
    opts: &KafkaOptions,
    consumer: &StreamConsumer<RunContext>,
    p: i32,
    state_from: Option<i64>,
    first: i64,
) -> Result<i64> {
    let (low, _high) = consumer
        .fetch_watermarks(&opts.input_topic, p, Duration::from_secs(30))
        .with_context(|| format!("cannot read the watermarks of {}/{p}", opts.input_topic))?;
    Ok(match state_from {
        Some(from) if from > first => bail!(
            "the checkpoint reflects {}/{p} up to offset {from}, but the group resumes at {first}: \
             the checkpoint is ahead of the group's committed offset (were the group's offsets \
             reset?). Remove the checkpoint file to rebuild the state from the topic, or reset \
             the group to {from}",
            opts.input_topic
        ),
        Some(from) if from < low => {
            warn!(
                partition = p,
                checkpoint = from,
                earliest = low,
                "records after the checkpoint were deleted by retention: the state misses them"
            );
            low
        }
        Some(from) => from,
        None => low,
    })
}

/// Rebuilds the state the partitions of `ranges` (partition, offset the state reflects it up
/// to from a checkpoint, offset the run resumes it at) contributed before the run resumes them:
/// re-reads each silently from [`restore_start`] and applies the records merged in event-time
/// order by the run loop's own [`Merge`] (here every partition not yet done has its next record
/// at hand, so nothing is waited for), so the state is the one the run built. Returns the
/// number of records re-read.
pub(super) fn restore_partitions(
    opts: &KafkaOptions,
    consumer: &StreamConsumer<RunContext>,
    topo: &mut Topology,
    sign_cache: &Arc<SignCache>,
    ranges: &[(i32, Option<i64>, i64)],
) -> Result<u64> {
    let mut todo: Vec<(i32, i64)> = Vec::new();
    let mut readers: Vec<BaseConsumer> = Vec::new();
    for &(p, state_from, first) in ranges {
        let low = restore_start(opts, consumer, p, state_from, first)?;
        if first <= low {
            continue;
        }
        info!(
            partition = p,
            from = low,
            to = first,
            "restoring state: re-reading the partition up to the committed offset"
        );
        // One reader per partition, so each is read only as far as the merge needs it; each
        // prefetches little (librdkafka's defaults queue up to 100,000 records or 64 MiB per
        // client), so memory stays bounded however many partitions restore together.
        let reader: BaseConsumer = opts
            .client_config(&[
                ("group.id", &format!("{}.restore", opts.group)),
                ("enable.auto.commit", "false"),
                ("enable.partition.eof", "false"),
                ("queued.min.messages", "1000"),
                ("queued.max.messages.kbytes", "8192"),
                FETCH_QUEUE_BACKOFF,
            ])
            .create()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&opts.input_topic, p, Offset::Offset(low))?;
        reader.assign(&tpl)?;
        todo.push((p, first));
        readers.push(reader);
    }
    if todo.is_empty() {
        return Ok(0);
    }
    tokio::task::block_in_place(|| {
        let internal = InternalReader::new(topo.config());
        let mut preparer = None;
        // Per partition of `todo`: its next record is in the merge, or it is read up to `first`.
        let (mut buffered, mut done) = (vec![false; todo.len()], vec![false; todo.len()]);
        let mut merge: Merge<(i64, Vec<u8>, Ready)> = Merge::default();
        let no_wait = HashSet::new();
        let mut scratch = Vec::new();
        let mut n = 0u64;
        loop {
            for (i, &(p, first)) in todo.iter().enumerate() {
                if done[i] || buffered[i] {
                    continue;
                }
                let m = match readers[i].poll(Duration::from_secs(30)) {
                    None => bail!(
                        "timed out re-reading {}/{p} to restore state",
                        opts.input_topic
                    ),
                    Some(r) => {
                        r.map_err(|e| anyhow!("re-reading {}/{p}: {e}", opts.input_topic))?
                    }
                };
                if m.offset() >= first {
                    done[i] = true;
                    continue;
                }
                let payload = m.payload().unwrap_or(&[]).to_vec();
                let ready = prepare(
                    opts.stage,
                    &internal,
                    &mut preparer,
                    (topo.config(), sign_cache),
                    &payload,
                )
                .with_context(|| {
                    format!(
                        "restoring state from {}/{p} offset {}",
                        opts.input_topic,
                        m.offset()
                    )
                })?;
                merge.push(p, ready.event_time_ms(), (m.offset(), payload, ready));
                buffered[i] = true;
            }
            let Some((p, (offset, payload, ready))) =
                merge.pop(&no_wait, |_| None, Instant::now(), true)
            else {
                break;
            };
            let i = todo
                .iter()
                .position(|t| t.0 == p)
                .expect("a restored partition");
            buffered[i] = false;
            let src = Source::Kafka {
                topic: opts.input_topic.clone(),
                partition: p,
                offset,
            };
            ready
                .apply(topo, (&payload, &src, p), &mut scratch)
                .with_context(|| {
                    format!(
                        "restoring state from {}/{p} offset {offset}",
                        opts.input_topic
                    )
                })?;
            // Its record for the next stage was sent when it was first applied.
            topo.take_indexed();
            scratch.clear();
            n += 1;
        }
        let partitions: Vec<i32> = todo.iter().map(|t| t.0).collect();
        info!(?partitions, records = n, "state restored");
        Ok(n)
    })
}
