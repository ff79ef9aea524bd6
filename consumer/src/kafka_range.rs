//! A Kafka topic range as a replay source (`neardup replay --topic T [--from X] [--to Y]`).
//!
//! Bounds are offsets (an integer, applied to every partition) or times (RFC 3339: records with
//! a timestamp at or after `--from` and before `--to`). `--from` is inclusive (default: the
//! earliest retained offset), `--to` exclusive (default: the end of each partition when the
//! replay starts), so a replay always ends. That end is found by fetching from the end the
//! broker lists, not taken from the list alone: tansu 0.6.0 lists a partition's end as the
//! start of its last batch, plus one (192 records sent in one batch were listed as 1), while its
//! fetches serve every record. Records appended while the replay looks for the end (at most
//! `END_SEARCH`) count as there when it started. A time is looked up with the broker's
//! offsets-for-times to skip what comes before it, and then checked on every record, so time
//! bounds are exact even where that lookup is coarse (tansu 0.6.0 answers it with the earliest
//! offset); a partition's range ends at its first record at or after `--to`.
//!
//! Partitions are merged by record timestamp (ties: partition, then offset), so the topology
//! sees the crawl in time order and the same range gives byte-identical outputs, whatever
//! order the broker delivers partitions in. Dead letters name the topic, partition and offset.
//! No consumer group offsets are read or committed.

use crate::replay::{Progress, ReplayReport, Replayer};
use crate::throttle::Logged;
use anyhow::{anyhow, bail, Context as _, Result};
use neardup_schemas::Source;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// One end of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// An offset, in every partition.
    Offset(i64),
    /// A time, in milliseconds since the Unix epoch.
    Time(i64),
}

/// Parses `12345` (an offset) or `2026-11-02T00:00:00Z` (a time).
pub fn parse_bound(s: &str) -> Result<Bound, String> {
    if let Ok(o) = s.trim().parse::<i64>() {
        return if o >= 0 {
            Ok(Bound::Offset(o))
        } else {
            Err(format!("offset {o} is negative"))
        };
    }
    neardup_topology::parse_time(s.trim())
        .map(Bound::Time)
        .ok_or_else(|| {
            format!("{s:?} is neither an offset nor an RFC 3339 time (e.g. 2026-11-02T00:00:00Z)")
        })
}

/// The range to replay.
#[derive(Debug, Clone)]
pub struct KafkaRange {
    /// Bootstrap servers.
    pub brokers: String,
    /// The topic.
    pub topic: String,
    /// First record (inclusive).
    pub from: Option<Bound>,
    /// End (exclusive).
    pub to: Option<Bound>,
    /// librdkafka properties.
    pub kafka: Vec<(String, String)>,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// How long the replay reads past the listed ends of the partitions, looking for their true
/// ends, at most (a partition written without a pause may never be found at its end).
const END_SEARCH: Duration = Duration::from_secs(5);

impl KafkaRange {
    fn consumer(&self) -> Result<BaseConsumer<Logged>> {
        self.consumer_with(&[])
    }

    /// A consumer of the range, with the librdkafka properties `extra` (under `-X`).
    fn consumer_with(&self, extra: &[(&str, &str)]) -> Result<BaseConsumer<Logged>> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("group.id", "neardup-replay")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set(
                crate::kafka::FETCH_QUEUE_BACKOFF.0,
                crate::kafka::FETCH_QUEUE_BACKOFF.1,
            );
        for (k, v) in extra {
            c.set(*k, *v);
        }
        for (k, v) in &self.kafka {
            c.set(k, v);
        }
        c.create_with_context(Logged::new("replay"))
            .context("cannot create a Kafka consumer (check --brokers and -X properties)")
    }

    /// Each partition's `[start, end)`. Assigns `c` the partitions, to find their ends.
    fn offsets(&self, c: &BaseConsumer<Logged>) -> Result<Vec<(i32, i64, i64)>> {
        let partitions =
            crate::kafka::partition_ids(c, &self.topic, TIMEOUT).with_context(|| {
                format!(
                    "cannot read the metadata of topic {} from {}",
                    self.topic, self.brokers
                )
            })?;
        if partitions.is_empty() {
            bail!(
                "topic {} does not exist on {} (or has no partitions)",
                self.topic,
                self.brokers
            );
        }
        let mut listed = vec![];
        for p in partitions {
            let (low, high) = c
                .fetch_watermarks(&self.topic, p, TIMEOUT)
                .with_context(|| format!("cannot read the offsets of {}/{p}", self.topic))?;
            listed.push((p, low, high));
        }
        let ends = self.fetched_ends(c, &listed)?;
        let mut out = vec![];
        for (p, low, _) in listed {
            let high = ends[&p];
            let resolve = |b: Option<Bound>, default: i64| -> Result<i64> {
                Ok(match b {
                    None => default,
                    Some(Bound::Offset(o)) => o.clamp(low, high),
                    Some(Bound::Time(t)) => self.offset_for_time(c, p, t, high)?,
                })
            };
            let start = resolve(self.from, low)?;
            // A time end is checked on the records themselves (see the module documentation).
            let end = match self.to {
                Some(Bound::Time(_)) => high,
                b => resolve(b, high)?,
            }
            .max(start);
            out.push((p, start, end));
        }
        Ok(out)
    }

    /// Each partition's end as its fetches find it, read from the end `listed` for it (partition,
    /// low, high): the offset after the last record served, or the listed end when there is
    /// none past it. Stops when every partition is at its end, or after [`END_SEARCH`]. `c` is
    /// assigned those partitions.
    fn fetched_ends(
        &self,
        c: &BaseConsumer<Logged>,
        listed: &[(i32, i64, i64)],
    ) -> Result<HashMap<i32, i64>> {
        let mut ends: HashMap<i32, i64> = listed.iter().map(|&(p, _, high)| (p, high)).collect();
        let mut tpl = TopicPartitionList::new();
        for &(p, _, high) in listed {
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(high))?;
        }
        c.assign(&tpl)?;
        let mut open: HashSet<i32> = listed.iter().map(|&(p, ..)| p).collect();
        let deadline = Instant::now() + END_SEARCH;
        while !open.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match c.poll(left) {
                None => break,
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    open.remove(&p);
                }
                Some(Err(e)) => {
                    return Err(anyhow!("looking for the end of {}: {e}", self.topic));
                }
                Some(Ok(m)) => {
                    // Only the partitions of `listed` are assigned, each with its listed end.
                    if let Some(end) = ends.get_mut(&m.partition()) {
                        *end = (*end).max(m.offset() + 1);
                    }
                }
            }
        }
        Ok(ends)
    }

    fn offset_for_time(&self, c: &BaseConsumer<Logged>, p: i32, t: i64, high: i64) -> Result<i64> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, p, Offset::Offset(t))?;
        let found = c.offsets_for_times(tpl, TIMEOUT).with_context(|| {
            format!("the broker could not look up a time in {}/{p}", self.topic)
        })?;
        let e = found
            .find_partition(&self.topic, p)
            .ok_or_else(|| anyhow!("no answer for {}/{p} from offsets-for-times", self.topic))?;
        Ok(match e.offset() {
            Offset::Offset(o) => o.min(high),
            // No record at or after the time: the range starts (or ends) at the end.
            _ => high,
        })
    }
}

/// One partition being read: its consumer, its next record, its end.
struct Cursor {
    partition: i32,
    consumer: BaseConsumer<Logged>,
    end: i64,
    /// Time bounds: records before `from_ms` are skipped, the first at or after `to_ms` ends.
    from_ms: Option<i64>,
    to_ms: Option<i64>,
    head: Option<OwnedMessage>,
}

impl Cursor {
    /// Reads the next record of the range into `head` (`None` at the end of the range).
    fn advance(&mut self, topic: &str) -> Result<()> {
        self.head = None;
        loop {
            match self.consumer.poll(TIMEOUT) {
                None => bail!("timed out reading {topic}/{}", self.partition),
                Some(Err(KafkaError::PartitionEOF(_))) => return Ok(()),
                Some(Err(e)) => return Err(anyhow!("reading {topic}/{}: {e}", self.partition)),
                Some(Ok(m)) => {
                    let ts = m.timestamp().to_millis();
                    if self.from_ms.is_some_and(|f| ts.is_some_and(|t| t < f)) {
                        continue;
                    }
                    let past_time = self.to_ms.is_some_and(|e| ts.is_some_and(|t| t >= e));
                    if m.offset() < self.end && !past_time {
                        self.head = Some(m.detach());
                    }
                    return Ok(());
                }
            }
        }
    }

    fn key(&self) -> Option<(i64, i32, i64)> {
        let m = self.head.as_ref()?;
        Some((
            m.timestamp().to_millis().unwrap_or(-1),
            self.partition,
            m.offset(),
        ))
    }
}

/// Replays `range` through a fresh topology, writing outputs into `out_dir`.
pub fn replay_kafka(
    range: &KafkaRange,
    out_dir: &Path,
    cfg: neardup_topology::Config,
    sign_cache: usize,
) -> Result<ReplayReport> {
    // The range first: a topic that cannot be read leaves no output directory behind.
    // The probe looks for each partition's end by fetching, where a broker holds a fetch at
    // the end up to `fetch.wait.max.ms`: 10 ms, not librdkafka's 500.
    let probe = range.consumer_with(&[("fetch.wait.max.ms", "10")])?;
    let offsets = range.offsets(&probe)?;
    drop(probe);
    let mut r = Replayer::new(out_dir, cfg, sign_cache)?;
    let total: i64 = offsets.iter().map(|(_, s, e)| e - s).sum();
    let progress = Progress::records(total as u64);
    let mut cursors = vec![];
    for &(p, start, end) in &offsets {
        if start >= end {
            continue;
        }
        let consumer = range.consumer()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&range.topic, p, Offset::Offset(start))?;
        consumer.assign(&tpl)?;
        let time = |b: Option<Bound>| match b {
            Some(Bound::Time(t)) => Some(t),
            _ => None,
        };
        let mut c = Cursor {
            partition: p,
            consumer,
            end,
            from_ms: time(range.from),
            to_ms: time(range.to),
            head: None,
        };
        c.advance(&range.topic)?;
        cursors.push(c);
    }
    while let Some(i) = (0..cursors.len())
        .filter(|&i| cursors[i].head.is_some())
        .min_by_key(|&i| cursors[i].key())
    {
        let c = &mut cursors[i];
        let m = c.head.take().expect("a head");
        let src = Source::Kafka {
            topic: range.topic.clone(),
            partition: c.partition,
            offset: m.offset(),
        };
        r.record(m.payload().unwrap_or(&[]), &src);
        if r.records % 1024 == 0 {
            progress.update(r.records, r.records);
        }
        c.advance(&range.topic)?;
    }
    progress.finish();
    let parts: Vec<String> = offsets
        .iter()
        .map(|(p, s, e)| format!("{p}:[{s},{e})"))
        .collect();
    let notes = format!(
        "  Kafka range: {} partitions {}\n",
        range.topic,
        parts.join(" ")
    );
    let name = format!("kafka://{}/{}", range.brokers, range.topic);
    r.end(&[name], &notes, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_offsets_or_times() {
        assert_eq!(parse_bound("42"), Ok(Bound::Offset(42)));
        assert_eq!(parse_bound("1970-01-01T00:00:01Z"), Ok(Bound::Time(1000)));
        assert!(parse_bound("-3").unwrap_err().contains("negative"));
        assert!(parse_bound("yesterday").unwrap_err().contains("RFC 3339"));
    }
}
