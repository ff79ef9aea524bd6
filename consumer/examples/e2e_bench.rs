//! End-to-end figures of `neardup run` against a real broker (issue 7's performance bar), in one
//! run so they can be compared:
//!
//! ```sh
//! tests/kafka-test-broker.sh start            # or any broker
//! cargo build --release -p neardup --example e2e_bench
//! target/release/examples/e2e_bench --brokers 127.0.0.1:19092 --events crawl/events.jsonl \
//!     [--limit N] [--latency-records N] [--latency-rate R] [--latency-profile MS] \
//!     [--latency-warm N] [--latency-only] [--latency-from-first-output] \
//!     [--bare-x KEY=VALUE]... [--produce-x KEY=VALUE]... [--bare-only] [--split-latency] \
//!     [--live-stages S,S] [--live-partitions N] [--echo-baseline] [--echo-only] \
//!     [--checkpoints INTERVAL] [--assign-rounds N] [--broker-pid PID] [-- NEARDUP_RUN_ARGS...]
//! ```
//!
//! 1. **Load**: the events file is produced to a fresh one-partition topic (one record per line).
//! 2. **Bare read**: a plain rdkafka consumer reads the whole topic and does nothing else: the
//!    rate the broker and client allow. It is assigned the partition, so it starts at once;
//!    then a second one subscribes in a new consumer group, as neardup does, and reads it all
//!    again: from its creation to its last record, it waits out the same group join as
//!    neardup's start to exit (on tansu, half the session timeout: 5 s).
//! 3. **neardup run**: the release binary (beside this example) consumes the same topic with
//!    `--exit-at-end` into fresh output topics: records per second from its start to its exit,
//!    and from its first signature event to its last (without the process start, the consumer
//!    group join and the shutdown), and its peak resident memory (`/proc/PID/status` VmHWM),
//!    per windowed page at the end.
//!    Then it runs again with `--assign` (every partition assigned at start, outside the
//!    group, as the first bare read is): records per second from its start to its exit, in
//!    `--assign-rounds` rounds (3), each against a bare read just before it (the first
//!    round's, the one above); the median round's share is the figure. With `--broker-pid PID`
//!    (a broker on this machine, as process PID), each round also gives the broker's CPU time
//!    during its bare read and during neardup's run, beside neardup's own, and the median
//!    round its CPU budget: the two processes' CPU time spread over every core is the least
//!    time the run could take, however well they overlapped, and so bounds the share from
//!    above.
//! 4. **Latency**: a second, live run; the events (all, or the first `--latency-records`) are
//!    produced at half the rate of step 3 (or `--latency-rate`), and each pair event's delay is
//!    the time a consumer tailing the pairs topic receives it minus the produce time of the
//!    page event that caused it (matched by URL and `fetched_at`): median, p99 and max, over all
//!    of them and over the pages produced after the first two seconds. It is printed again to
//!    the pair event's broker timestamp, which is its own produce time (tansu stamps no append
//!    time): that leaves out neardup's producer linger, the produce request and the append,
//!    which the delay to the consumer includes with the consumer's own fetch. The producer
//!    connects (with a record to another topic) before the first timed record.
//!    `--latency-profile MS` also prints the worst delay of each MS milliseconds of the run. `--latency-warm N` first feeds the live run the first N of
//!    those records as fast as it takes them, untimed, and waits until it has signed them all,
//!    so that the timed records meet a running deployment (its window filled, its sign cache
//!    warm) rather than a fresh one: with N the crawl's first round, the timed records are its
//!    later rounds, the steady state of a crawl fetched again week after week.
//!    The all-in-one live run also serves its metrics: its own `neardup_record_delay_seconds`
//!    (page event produced -> read by neardup, and -> its outputs acknowledged) is read before
//!    and after the timed records, and its median and p99 printed as bucket bounds.
//!    `--latency-from-first-output` feeds it at half the rate of step 3 from its first output to
//!    its last instead of from its start to its exit.
//!    `--latency-only --latency-rate R` skips steps 1-3 (R: half the rate a full run of the
//!    bench measured), so the live run meets a fresh broker: tansu keeps every topic in memory
//!    and grows slower as it holds more (`--echo-baseline` shows how much).
//!
//! `--split-latency` makes step 4's live run go through the split stages (sign, index, cluster
//! and mirror, each a process of its own) instead of the all-in-one process, and prints each
//! hop's delay (page produced -> `internal.signed` -> `internal.indexed`, record by record,
//! and from a page's `internal.indexed` record to its pair events);
//! `--live-stages sign,index` runs only the stages listed.
//!
//! `--live-partitions N` gives step 4's input topic (and its `internal.signed`) N partitions,
//! record i going to partition i % N: the all-in-one process, or the index stage, then merges
//! the partitions by event time while they arrive, and the latency includes its waits (the
//! index stage's wait for what the sign stage has yet to sign among them).
//!
//! `--echo-baseline` runs, before and after step 4, a consumer that only passes each record on
//! (with neardup's client settings), fed the same records at the same rate: the delay the broker
//! and the client library add on their own at that rate, the floor under step 4's latency.
//! `--echo-only --latency-rate R` runs that consumer instead of step 4 (and of steps 1-3), on a
//! broker it does not load further: with `--latency-warm N`, the first N records are produced at
//! once and passed over, untimed, as step 4's warm-up leaves the broker holding them.
//!
//! `--checkpoints INTERVAL` makes every neardup run (but the sign stage, which keeps no state)
//! take checkpoints at that interval, each into a directory of its own under the temporary
//! directory (removed after the run), and prints how many it wrote and how long input waited
//! for each: a deployment's checkpoints, whose pauses step 4's latency then includes.
//!
//! `--bare-x KEY=VALUE` sets a librdkafka property of the bare consumers (repeatable);
//! `--produce-x KEY=VALUE` one of the producer of the page events, in every step (e.g.
//! `compression.type=lz4`: a crawler's producer may compress its pages, which the broker then
//! stores and serves in a fraction of the bytes);
//! `--bare-only` stops after the bare reads.
//!
//! `--split-stages` replaces step 4: the split stages (`--stage sign`, `index`, `cluster` and,
//! with `--mirror-stage`, `mirror`) run one after another on the same topic, each reading the
//! whole of its input topic, as a stage catching up does: per stage, records per second from
//! its first internal record to its last (the mirror stage publishes too few records for that:
//! start to exit) and its CPU time, against the all-in-one run's.
//!
//! `--split-side-by-side` replaces step 4 too: the same four stages started at once, each with
//! `--exit-at-end`, as a replay through a split topology runs: records per second from the sign
//! stage's first internal record to the last the cluster stage passes on, and from the start to
//! the last stage's exit, against the bare read; each stage's CPU time and peak RSS.
//!
//! `--scale-out` replaces step 4 too: the same four stages in one process (`neardup run
//! --scale-out --mirror-stage --exit-at-end`), measured as `--split-side-by-side` measures them.
//!
//! The ratio of 3 to 2 is issue 7's bar (at least 50 %); the machine is shared, so compare the
//! ratio, not the absolute rates. neardup's start to exit is also given against the bare read
//! in a group, both with the join, and with `--assign` against the assigned bare read, both
//! without it.

#[path = "../../topology/benches/common/events.rs"]
mod events_file;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// With `--checkpoints`: how many checkpoints a run wrote, and how long input waited for each
/// and, of that, the copy of the state, or its serialization in earlier builds (the
/// `checkpoint written` lines of its log).
fn report_checkpoints(run: &str, log: &str) {
    let field = |line: &str, name: &str| -> Option<f64> {
        line.split(&format!(" {name}="))
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let written: Vec<(f64, f64)> = log
        .lines()
        .filter(|l| l.contains("checkpoint written"))
        .filter_map(|l| {
            // Builds before the twenty-fifth session serialized the state where they now copy
            // it, and logged that time as `serialized`: the bench compares both.
            let took = field(l, "copied").or_else(|| field(l, "serialized"))?;
            Some((field(l, "input_paused")?, took))
        })
        .collect();
    if written.is_empty() {
        return;
    }
    let mut paused: Vec<f64> = written.iter().map(|w| w.0).collect();
    paused.sort_by(f64::total_cmp);
    let each: Vec<String> = written
        .iter()
        .map(|(p, s)| format!("{:.0}/{:.0}", p * 1e3, s * 1e3))
        .collect();
    println!(
        "{run}: {} checkpoints written, input paused for each: median {:.0} ms, max {:.0} ms (ms paused/copying the state, in order: {})",
        paused.len(),
        paused[paused.len() / 2] * 1e3,
        paused[paused.len() - 1] * 1e3,
        each.join(" ")
    );
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64
}

fn config(brokers: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers);
    c
}

/// Creates the topics `names`, each with one partition, but those in `wide`, with `partitions`.
fn create_topics(brokers: &str, names: &[String], wide: &[String], partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = config(brokers).create().expect("admin");
    let topics: Vec<NewTopic> = names
        .iter()
        .map(|n| {
            let p = if wide.contains(n) { partitions } else { 1 };
            NewTopic::new(n, p, TopicReplication::Fixed(1))
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for r in rt
        .block_on(admin.create_topics(&topics, &AdminOptions::new()))
        .expect("create topics")
    {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

/// The page events' producer: where, and its `--produce-x` properties.
struct Pages<'a> {
    brokers: &'a str,
    props: &'a [(String, String)],
}

/// Produces `lines` to `topic`; with `rate`, paced to that many records per second. Returns the
/// produce time (ms) of each record.
fn produce(to: &Pages, topic: &str, lines: &[Vec<u8>], rate: Option<f64>) -> Vec<i64> {
    produce_to(to, topic, lines, rate, 1)
}

/// [`produce`] to `partitions` partitions, record `i` to partition `i % partitions`.
fn produce_to(
    to: &Pages,
    topic: &str,
    lines: &[Vec<u8>],
    rate: Option<f64>,
    partitions: i32,
) -> Vec<i64> {
    let mut cfg = config(to.brokers);
    cfg.set("linger.ms", "5")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("message.max.bytes", "20000000");
    for (k, v) in to.props {
        cfg.set(k, v);
    }
    let producer: BaseProducer = cfg.create().expect("producer");
    if rate.is_some() {
        // A paced run times each record from its send: first connect to the broker and learn
        // the topic's leader, with a record to another topic, so that the first timed records
        // do not also wait for this producer's start.
        let warm = warm_up_topic(topic);
        producer
            .send(BaseRecord::<(), [u8]>::to(&warm).payload(&b"warm-up"[..]))
            .map_err(|(e, _)| e)
            .expect("warm-up record");
        producer.flush(Duration::from_secs(30)).expect("warm-up");
        producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .expect("metadata of the paced topic");
    }
    let start = Instant::now();
    let mut times = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if let Some(r) = rate {
            let due = Duration::from_secs_f64(i as f64 / r);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        let t = now_ms();
        times.push(t);
        let mut record = BaseRecord::<(), [u8]>::to(topic).payload(l).timestamp(t);
        if partitions > 1 {
            record = record.partition(i as i32 % partitions);
        }
        send(&producer, record);
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(300)).expect("flush");
    times
}

/// Sends `rec`, waiting while the producer's queue is full.
fn send<K, P>(producer: &BaseProducer, mut rec: BaseRecord<'_, K, P>)
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send(rec) {
            Ok(()) => return,
            Err((_, r)) => {
                rec = r;
                producer.poll(Duration::from_millis(10));
            }
        }
    }
}

/// Where a paced producer sends its warm-up record (created with the bench's topics).
fn warm_up_topic(topic: &str) -> String {
    format!("{topic}.warm-up")
}

/// A bare consumer's configuration: up to 20 MB per fetch, then `own` properties, then the
/// `--bare-x` ones (`extra`), which override both.
fn bare_config(brokers: &str, own: &[(&str, &str)], extra: &[(String, String)]) -> ClientConfig {
    let mut cfg = config(brokers);
    cfg.set("fetch.message.max.bytes", "20000000");
    for (k, v) in own {
        cfg.set(*k, *v);
    }
    for (k, v) in extra {
        cfg.set(k, v);
    }
    cfg
}

/// Reads `n` records from `c` and returns their payload bytes. `poll` also returns `None` after
/// serving a rebalance (a subscribed consumer's assignment), so only 30 s without a record is a
/// failure.
fn read_records(c: &BaseConsumer, n: usize, what: &str) -> u64 {
    let (mut got, mut bytes, mut last) = (0usize, 0u64, Instant::now());
    while got < n {
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                got += 1;
                bytes += m.payload().map_or(0, |p| p.len() as u64);
                last = Instant::now();
            }
            Some(Err(e)) => panic!("{what}: {e}"),
            None => assert!(
                last.elapsed() < Duration::from_secs(30),
                "{what} timed out after {got} records"
            ),
        }
    }
    bytes
}

fn bare_read(brokers: &str, topic: &str, n: usize, extra: &[(String, String)]) -> (f64, u64) {
    let c = from_beginning(bare_config(brokers, &[], extra), topic, "bare");
    let start = Instant::now();
    let bytes = read_records(&c, n, "bare read");
    (n as f64 / start.elapsed().as_secs_f64(), bytes)
}

/// The bare read as neardup reads: subscribed in a new consumer group, with neardup's session
/// timeout and heartbeat, so it waits out the same group join (tansu assigns partitions half a
/// session timeout after the first join; Kafka, `group.initial.rebalance.delay.ms` after it);
/// records per second from the consumer's creation to its last record.
fn bare_group_read(brokers: &str, topic: &str, n: usize, extra: &[(String, String)]) -> f64 {
    let group = format!("{topic}.bare-group");
    let own = [
        ("group.id", group.as_str()),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "1000"),
    ];
    let start = Instant::now();
    let c: BaseConsumer = bare_config(brokers, &own, extra)
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    read_records(&c, n, "bare read in a group");
    n as f64 / start.elapsed().as_secs_f64()
}

/// Runs `neardup run` on `topic` until it exits (or is stopped); returns (seconds, peak RSS KiB,
/// stderr, CPU seconds: user + system, as last sampled, at most 50 ms before the exit).
fn neardup(
    brokers: &str,
    topic: &str,
    prefix: &str,
    extra: &[&str],
    stop_after: Option<Duration>,
) -> (f64, u64, String, f64) {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("neardup"))
        .expect("target dir");
    let start = Instant::now();
    let mut child = Command::new(&bin)
        .args(["run", "--brokers", brokers, "--input-topic", topic])
        .args([
            "--group",
            &format!("{prefix}group"),
            "--output-prefix",
            prefix,
        ])
        .args(extra)
        .env("NEARDUP_LOG", "warn,neardup::checkpoints=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {} ({e}): cargo build --release -p neardup",
                bin.display()
            )
        });
    let pid = child.id();
    let (mut peak, mut cpu_ticks) = (0u64, 0u64);
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(v) = s.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                peak = peak.max(v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0));
            }
        }
        if let Some(ticks) = cpu_ticks_of(pid) {
            cpu_ticks = cpu_ticks.max(ticks);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if stop_after.is_some_and(|d| start.elapsed() > d) {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let secs = start.elapsed().as_secs_f64();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    // A run that failed would give a rate of nothing.
    assert!(
        status.success(),
        "neardup run {} failed ({status}):\n{err}",
        extra.join(" ")
    );
    (secs, peak, err, cpu_ticks as f64 / TICKS_PER_SECOND)
}

/// The CPU time of an `--assign` round, in seconds, with `--broker-pid`.
#[derive(Clone, Copy)]
struct Budget {
    /// neardup's (user + system), as last sampled, at most 50 ms before its exit.
    neardup: f64,
    /// The broker's during neardup's run.
    broker: f64,
    /// The broker's during the bare read the round compares the run with.
    bare_broker: f64,
}

/// Linux counts a process's CPU time in `/proc/PID/stat` in ticks of 1/100 s (USER_HZ).
const TICKS_PER_SECOND: f64 = 100.0;

/// The CPU time process `pid` has used so far, all its threads, user + system, in clock ticks
/// (fields 14 and 15 of `/proc/PID/stat`, after the parenthesised command name); `None` when
/// it cannot be read (no such process, or not Linux).
fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    (f.len() == 2).then(|| f.iter().sum())
}

/// With `--broker-pid`: the broker's CPU time while `f` runs, in seconds, beside what `f` gives.
fn with_broker_cpu<T>(broker: Option<u32>, f: impl FnOnce() -> T) -> (T, Option<f64>) {
    let before = broker.and_then(cpu_ticks_of);
    let out = f();
    let after = broker.and_then(cpu_ticks_of);
    let cpu = before
        .zip(after)
        .map(|(b, a)| a.saturating_sub(b) as f64 / TICKS_PER_SECOND);
    (out, cpu)
}

/// Waits until `topic` has records and has taken no new one for two seconds; returns how many
/// it holds (the sum of its partitions' high watermarks). Gives up, saying so, when it has
/// none after two minutes (the run writing it did not start, or failed). tansu's high
/// watermark can trail the records it serves by part of a batch: after the medium crawl's
/// first round (21,366 records) it said 21,239-21,357 signature events, also after ten quiet
/// seconds; after 34 records more, 21,396 of 21,400, while a consumer read all 21,400.
fn settled(brokers: &str, topic: &str) -> i64 {
    let c: BaseConsumer = config(brokers).create().expect("consumer");
    let parts = partitions(&c, topic);
    let (mut last, mut since, start) = (-1, Instant::now(), Instant::now());
    loop {
        let held: i64 = (0..parts)
            .map(|p| {
                c.fetch_watermarks(topic, p, Duration::from_secs(30))
                    .expect("watermarks")
                    .1
            })
            .sum();
        if held != last {
            (last, since) = (held, Instant::now());
        } else if held > 0 && since.elapsed() >= Duration::from_secs(2) {
            return held;
        }
        assert!(
            held > 0 || start.elapsed() < Duration::from_secs(120),
            "{topic} has no records after two minutes: did the neardup run writing it start?"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The cumulative buckets of `neardup_record_delay_seconds` served at `port`, by label `until`:
/// (upper bound in seconds, records at or under it). Waits up to 30 s for the process to serve
/// them.
fn record_delays(port: u16) -> Vec<(String, f64, u64)> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = std::net::TcpStream::connect(("127.0.0.1", port))
            .and_then(|mut c| {
                write!(c, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
                let mut text = String::new();
                c.read_to_string(&mut text)?;
                Ok(text)
            })
            .unwrap_or_default();
        let buckets: Vec<(String, f64, u64)> = body
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("neardup_record_delay_seconds_bucket{until=\"")?;
                let (until, rest) = rest.split_once("\",le=\"")?;
                let (le, count) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((until.to_owned(), le, count.trim().parse().ok()?))
            })
            .collect();
        if !buckets.is_empty() || Instant::now() > deadline {
            return buckets;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// "median <= M ms, p99 <= P ms (N records)" of the records counted under `until` between two
/// readings of [`record_delays`]: the upper bounds of the buckets the percentiles fall in.
fn bucket_spread(
    before: &[(String, f64, u64)],
    after: &[(String, f64, u64)],
    until: &str,
) -> String {
    let counted = |at: &[(String, f64, u64)], le: f64| -> u64 {
        at.iter()
            .find(|(u, l, _)| u == until && *l == le)
            .map_or(0, |b| b.2)
    };
    if after.is_empty() {
        // `record_delays` gave up: the process no longer served /metrics (a run that fell far
        // behind can reach its time limit before the bench asks).
        return "not read: neardup's /metrics did not answer within 30 s".into();
    }
    let bounds: Vec<f64> = after
        .iter()
        .filter(|(u, ..)| u == until)
        .map(|b| b.1)
        .collect();
    let cumulative: Vec<u64> = bounds
        .iter()
        .map(|&le| counted(after, le) - counted(before, le).min(counted(after, le)))
        .collect();
    let total = cumulative.last().copied().unwrap_or(0);
    if total == 0 {
        return "no records counted".into();
    }
    let at = |q: f64| -> String {
        let want = (q * total as f64).ceil() as u64;
        let i = cumulative
            .iter()
            .position(|&c| c >= want)
            .unwrap_or(bounds.len() - 1);
        match bounds[i] {
            le if le.is_finite() => format!("{:.0} ms", le * 1e3),
            _ => "over the largest bucket".into(),
        }
    };
    format!(
        "median <= {}, p99 <= {} ({total} records)",
        at(0.5),
        at(0.99)
    )
}

/// Every record of `topic`, from all its partitions, as (broker timestamp, payload).
fn read_all(brokers: &str, topic: &str) -> Vec<(i64, Vec<u8>)> {
    let c = from_beginning(config(brokers), topic, "reader");
    let mut out = vec![];
    while let Some(m) = c.poll(Duration::from_secs(3)) {
        let m = m.expect("read");
        let ts = match m.timestamp() {
            Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => t,
            Timestamp::NotAvailable => 0,
        };
        out.push((ts, m.payload().unwrap_or(&[]).to_vec()));
    }
    out
}

/// Seconds from the first record of `topic` to its last (broker timestamps, at least 1 ms), or
/// `None` for an empty topic.
fn first_to_last(brokers: &str, topic: &str) -> Option<f64> {
    let stamps = stamps(brokers, topic);
    let (first, last) = (stamps.iter().min()?, stamps.iter().max()?);
    Some((last - first).max(1) as f64 / 1000.0)
}

/// The broker timestamps (ms) of the records of `topic`.
fn stamps(brokers: &str, topic: &str) -> Vec<i64> {
    read_all(brokers, topic)
        .into_iter()
        .map(|(t, _)| t)
        .collect()
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// "median M ms, p99 P ms, max X ms" of sorted delays.
fn spread(sorted: &[i64]) -> String {
    format!(
        "median {} ms, p99 {} ms, max {} ms",
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted.last().copied().unwrap_or(0)
    )
}

const USAGE: &str = "usage: e2e_bench --brokers HOST:PORT --events EVENTS.jsonl [--limit N] \
     [--latency-records N] [--latency-rate R] [--latency-profile MS] [--latency-warm N] \
     [--latency-only] [--latency-from-first-output] [--bare-x KEY=VALUE]... \
     [--produce-x KEY=VALUE]... [--bare-only] [--split-latency] [--split-stages] \
     [--split-side-by-side] [--scale-out] \
     [--live-stages S,S] [--live-partitions N] [--echo-baseline] [--echo-only] \
     [--checkpoints INTERVAL] [--assign-rounds N] [--broker-pid PID] [-- NEARDUP_RUN_ARGS...]\n\
     EVENTS.jsonl: make_crawl.py's events file; the broker: tests/kafka-test-broker.sh start \
     (see the comment at the top of consumer/examples/e2e_bench.rs)";

/// Says what is wrong with the command line, and how to use it, and exits 2.
fn usage_error(what: &str) -> ! {
    eprintln!("e2e_bench: {what}\n{USAGE}");
    std::process::exit(2)
}

/// The number after flag `name`, if given; a usage error if it is not a number.
fn number<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    flag(args, name).map(|v| {
        v.parse()
            .unwrap_or_else(|_| usage_error(&format!("{name} takes a number, not {v:?}")))
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help") {
        println!("{USAGE}");
        return;
    }
    // Every argument is checked here, before minutes of loading and measuring.
    let brokers = flag(&args, "--brokers").unwrap_or_else(|| "127.0.0.1:19092".into());
    let events = flag(&args, "--events").unwrap_or_else(|| usage_error("--events is required"));
    let limit: usize = number(&args, "--limit").unwrap_or(usize::MAX);
    let latency_n: usize = number(&args, "--latency-records").unwrap_or(usize::MAX);
    let latency_rate: Option<f64> = number(&args, "--latency-rate");
    let latency_profile: Option<i64> = number(&args, "--latency-profile");
    let latency_warm: usize = number(&args, "--latency-warm").unwrap_or(0);
    // `--echo-only`: the echo consumer alone, in place of the live run (and of steps 1-3).
    let echo_only = args.iter().any(|a| a == "--echo-only");
    let latency_only = echo_only || args.iter().any(|a| a == "--latency-only");
    // `--latency-from-first-output`: the live run at half the first-output-to-last rate.
    let from_first_output = args.iter().any(|a| a == "--latency-from-first-output");
    if latency_only && latency_rate.is_none() {
        usage_error(
            "--latency-only and --echo-only need --latency-rate (half the rate a full run measured)",
        );
    }
    // `--bare-x KEY=VALUE` (repeatable): a librdkafka property for the bare consumer;
    // `--produce-x KEY=VALUE`, for the producer of the page events (e.g.
    // `compression.type=lz4`, as a crawler's producer may compress them).
    let properties = |name: &str| -> Vec<(String, String)> {
        args.windows(2)
            .filter(|w| w[0] == name)
            .map(|w| match w[1].split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => usage_error(&format!("{name} takes KEY=VALUE, not {:?}", w[1])),
            })
            .collect()
    };
    let bare_x = properties("--bare-x");
    let produce_x = properties("--produce-x");
    let pages = Pages {
        brokers: &brokers,
        props: &produce_x,
    };
    let file = events_file::open(&events)
        .unwrap_or_else(|e| usage_error(&format!("cannot open --events {events}: {e}")));
    let lines: Vec<Vec<u8>> = file
        .split(b'\n')
        .map(|l| l.expect("read"))
        .filter(|l| !l.is_empty())
        .take(limit)
        .collect();
    let id = now_ms();
    let topic = format!("bench-{id}.pages");
    let kinds = [
        "signatures",
        "pairs",
        "clusters",
        "mirrors",
        "collections",
        "recrawl",
        "dead-letter",
    ];
    let prefix = |run: &str| format!("bench-{id}.{run}.");
    let live_topic = format!("bench-{id}.live.pages");
    let echo_topic = |when: &str| format!("bench-{id}.echo-{when}.pages");
    let mut names = vec![
        topic.clone(),
        live_topic.clone(),
        warm_up_topic(&live_topic),
    ];
    for when in ["before", "after", "only"] {
        let t = echo_topic(when);
        names.extend([warm_up_topic(&t), format!("{t}.out"), t]);
    }
    // `--broker-pid PID`: the broker runs on this machine as process PID; each `--assign`
    // round then reports its CPU time beside neardup's.
    let broker_pid: Option<u32> = number(&args, "--broker-pid");
    // `--assign-rounds N` (3 by default): the `--assign` run, each after a bare read of its own.
    let assign_rounds: usize = flag(&args, "--assign-rounds").map_or(3, |n| {
        n.parse()
            .ok()
            .filter(|&n| n >= 1)
            .expect("--assign-rounds: a number of 1 or more")
    });
    let assign_run = |round: usize| {
        if round == 0 {
            "assign".to_owned()
        } else {
            format!("assign-{}", round + 1)
        }
    };
    let runs = ["run", "live", "split"]
        .map(String::from)
        .into_iter()
        .chain((0..assign_rounds).map(assign_run));
    for run in runs {
        names.extend(kinds.iter().map(|k| format!("{}{k}", prefix(&run))));
    }
    for run in ["live", "split"] {
        names.extend(INTERNAL.iter().map(|t| format!("{}{t}", prefix(run))));
    }
    // `--live-partitions N`: the live run's input (and its internal.signed) has N partitions,
    // record i going to partition i % N, so the index stage merges them by event time.
    let live_partitions: i32 = flag(&args, "--live-partitions").map_or(1, |n| {
        n.parse()
            .ok()
            .filter(|&n| n >= 1)
            .expect("--live-partitions: a number of 1 or more")
    });
    let wide = [
        live_topic.clone(),
        format!("{}internal.signed", prefix("live")),
    ];
    create_topics(&brokers, &names, &wide, live_partitions);

    // Arguments after `--` go to both runs of neardup (e.g. `-X compression.type=lz4`).
    let passed: Vec<&str> = args
        .iter()
        .position(|a| a == "--")
        .map_or(&[][..], |i| &args[i + 1..])
        .iter()
        .map(String::as_str)
        .collect();
    // `--checkpoints INTERVAL`: every neardup run takes checkpoints at that interval, each
    // into a directory of its own (they read different topics).
    let checkpoints = flag(&args, "--checkpoints");
    let checkpoint_dir =
        |run: &str| std::env::temp_dir().join(format!("neardup-e2e-{}", prefix(run)));
    let checkpoint_args = |run: &str| -> Vec<String> {
        match &checkpoints {
            Some(every) => {
                let dir = checkpoint_dir(run);
                let _ = std::fs::remove_dir_all(&dir);
                vec![
                    "--checkpoint-dir".into(),
                    dir.display().to_string(),
                    "--checkpoint-interval".into(),
                    every.clone(),
                ]
            }
            None => vec![],
        }
    };
    // `--latency-only`: no load, bare read or throughput run; the live run alone, fed at
    // `--latency-rate` (on a fresh broker, which holds nothing else yet).
    let rate = if latency_only {
        0.0
    } else {
        let t0 = Instant::now();
        produce(&pages, &topic, &lines, None);
        let mb = lines.iter().map(|l| l.len()).sum::<usize>() as f64 / 1e6;
        println!(
            "loaded {} records ({mb:.0} MB) into {topic} in {:.1} s",
            lines.len(),
            t0.elapsed().as_secs_f64()
        );

        let ((bare, _), bare_broker) = with_broker_cpu(broker_pid, || {
            bare_read(&brokers, &topic, lines.len(), &bare_x)
        });
        println!(
            "bare rdkafka consumer: {bare:.0} records/s ({:.1} MB/s)",
            bare * mb / lines.len() as f64
        );
        if let Some(cpu) = bare_broker {
            println!("  the broker's CPU time during the bare read: {cpu:.2} s");
        }
        let bare_group = bare_group_read(&brokers, &topic, lines.len(), &bare_x);
        println!(
            "bare read in a new consumer group (joining it as neardup does; creation to last record): {bare_group:.0} records/s"
        );
        if args.iter().any(|a| a == "--bare-only") {
            return;
        }
        let run_checkpoints = checkpoint_args("run");
        let run_args: Vec<&str> = std::iter::once("--exit-at-end")
            .chain(passed.iter().copied())
            .chain(run_checkpoints.iter().map(String::as_str))
            .collect();
        let (secs, peak_kib, err, cpu) = neardup(&brokers, &topic, &prefix("run"), &run_args, None);
        report_checkpoints("neardup run", &err);
        let _ = std::fs::remove_dir_all(checkpoint_dir("run"));
        let rate = lines.len() as f64 / secs;
        let window = err
            .lines()
            .find_map(|l| l.trim().strip_prefix("sketch window"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        println!(
            "neardup run (all stages, start to exit): {rate:.0} records/s = {:.1} % of the bare read; \
             its CPU time (user + system) {cpu:.1} s",
            100.0 * rate / bare
        );
        println!(
            "neardup run, start to exit, against the bare read in a group (both joining a new group): {:.1} %",
            100.0 * rate / bare_group
        );
        // The same run without its start (process, consumer group join: tansu assigns partitions
        // half a session timeout after the first join) and its shutdown: the input records over
        // the time from its first signature event to its last (broker timestamps).
        let steady = first_to_last(&brokers, &format!("{}signatures", prefix("run"))).map(|span| {
            let steady = lines.len() as f64 / span;
            println!(
                "neardup run, first output to last ({span:.1} s of {secs:.1} s): {steady:.0} records/s = {:.1} % of the bare read",
                100.0 * steady / bare
            );
            steady
        });
        // The same run reading alone (`--assign`: every partition assigned at start, no group
        // join), against the assigned bare read: neither waits for a group. The broker is
        // shared with this machine's other work and slows as it holds more, so each round
        // pairs a run with a bare read just before it (the first round, the one above), and
        // the median of the rounds' shares is the figure.
        // (neardup's rate, the bare read's, neardup's seconds, the CPU time) of each round.
        let mut rounds: Vec<(f64, f64, f64, Option<Budget>)> = vec![];
        for round in 0..assign_rounds {
            let (bare, bare_broker) = if round == 0 {
                (bare, bare_broker)
            } else {
                let ((bare, _), cpu) = with_broker_cpu(broker_pid, || {
                    bare_read(&brokers, &topic, lines.len(), &bare_x)
                });
                (bare, cpu)
            };
            let run = assign_run(round);
            let assign_checkpoints = checkpoint_args(&run);
            let assign_args: Vec<&str> = ["--exit-at-end", "--assign"]
                .into_iter()
                .chain(passed.iter().copied())
                .chain(assign_checkpoints.iter().map(String::as_str))
                .collect();
            let ((assign_secs, _, assign_err, assign_cpu), run_broker) =
                with_broker_cpu(broker_pid, || {
                    neardup(&brokers, &topic, &prefix(&run), &assign_args, None)
                });
            report_checkpoints("neardup run --assign", &assign_err);
            let _ = std::fs::remove_dir_all(checkpoint_dir(&run));
            let alone = lines.len() as f64 / assign_secs;
            let budget = run_broker
                .zip(bare_broker)
                .map(|(broker, bare_broker)| Budget {
                    neardup: assign_cpu,
                    broker,
                    bare_broker,
                });
            println!(
                "  round {}: bare read {bare:.0} records/s, neardup run --assign {alone:.0} records/s ({assign_secs:.1} s) = {:.1} %{}",
                round + 1,
                100.0 * alone / bare,
                budget.map_or(String::new(), |b| format!(
                    "; CPU time: neardup {:.1} s, the broker {:.1} s (in the bare read {:.1} s)",
                    b.neardup, b.broker, b.bare_broker
                ))
            );
            rounds.push((alone, bare, assign_secs, budget));
        }
        rounds.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        let (alone, bare, assign_secs, budget) = rounds[rounds.len() / 2];
        println!(
            "neardup run --assign (reading alone, without a group join), start to exit: {alone:.0} records/s = {:.1} % of the bare read ({assign_secs:.1} s; the median round of {assign_rounds}, against its bare read of {bare:.0} records/s)",
            100.0 * alone / bare
        );
        if let Some(b) = budget {
            // Both processes share this machine's cores: however well they overlapped, the
            // run could not take less than their CPU time spread over every core.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let floor = (b.neardup + b.broker) / cores;
            println!(
                "CPU budget of that round: neardup {:.1} s + the broker {:.1} s = {:.1} s of CPU time on {cores} cores, so the run takes at least {floor:.1} s: at most {:.1} % of the bare read with this CPU time (the bare read: the broker {:.1} s)",
                b.neardup,
                b.broker,
                b.neardup + b.broker,
                100.0 * (lines.len() as f64 / floor) / bare,
                b.bare_broker
            );
        }
        println!(
            "peak resident memory {:.0} MiB; {:.0} pages in the window at the end: {:.1} KiB per windowed page (all state and buffers; at this size mostly fixed costs: what the state takes per page, checkpoint_bench counts)",
            peak_kib as f64 / 1024.0,
            window,
            if window > 0.0 { peak_kib as f64 / window } else { 0.0 }
        );

        if args.iter().any(|a| a == "--split-stages") {
            return split_stages(
                &brokers,
                &topic,
                &prefix("split"),
                &passed,
                lines.len(),
                cpu,
            );
        }
        // The split stages started at once: as processes side by side, or in one process.
        let together: Option<SplitRun> = if args.iter().any(|a| a == "--scale-out") {
            Some(scale_out)
        } else if args.iter().any(|a| a == "--split-side-by-side") {
            Some(split_side_by_side)
        } else {
            None
        };
        if let Some(run) = together {
            return run(
                &brokers,
                &topic,
                &prefix("split"),
                &passed,
                lines.len(),
                (bare, cpu),
            );
        }
        // `--latency-from-first-output`: the live run's rate is half the steady one.
        steady.filter(|_| from_first_output).unwrap_or(rate)
    };

    // Latency: a live run, fed at half the measured rate.
    let n = latency_n.min(lines.len());
    // `--latency-warm W`: the first W of them untimed, before the paced ones.
    let warm = latency_warm.min(n.saturating_sub(1));
    let timed = &lines[warm..n];
    // `--latency-rate R` feeds the live run at R records/s instead.
    let half = latency_rate.unwrap_or(rate / 2.0);
    if echo_only {
        let t = &echo_topic("only");
        echo_baseline(&pages, t, timed, half, "instead of", &lines[..warm]);
        return;
    }
    let echo = args.iter().any(|a| a == "--echo-baseline");
    if echo {
        echo_baseline(&pages, &echo_topic("before"), timed, half, "before", &[]);
    }
    let brokers2 = brokers.clone();
    let live_prefix = prefix("live");
    let mut live_args: Vec<String> = passed.iter().map(|a| a.to_string()).collect();
    // The all-in-one live run serves its metrics, so that its own record delays (from each
    // record's produce time to its reading, and to its outputs' acknowledgement) can be read
    // before and after the timed records.
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let live_topic2 = live_topic.clone();
    // `--split-latency`: the live run through the four split stages, each a process of its
    // own (the pairs come from the index stage, one hop after the sign stage).
    // `--live-stages S,S,...` runs only those split stages (to time one hop on its own).
    let live_stages = flag(&args, "--live-stages");
    let stages: Vec<&str> = match &live_stages {
        Some(list) => list.split(',').collect(),
        None if args.iter().any(|a| a == "--split-latency") => {
            vec!["sign", "index", "cluster", "mirror"]
        }
        None => vec!["all"],
    };
    if stages == ["all"] {
        live_args.extend(["--http-listen".into(), format!("127.0.0.1:{metrics_port}")]);
    }
    let runners: Vec<_> = stages
        .iter()
        .map(|&stage| {
            let (brokers, topic, prefix) =
                (brokers2.clone(), live_topic2.clone(), live_prefix.clone());
            let mut args = live_args.clone();
            if stage != "all" {
                args.extend(stage_args(stage).map(String::from));
            }
            if stage != "sign" {
                args.extend(checkpoint_args(&format!("live-{stage}")));
            }
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                neardup(
                    &brokers,
                    &topic,
                    &prefix,
                    &args,
                    // A warm-up takes at most a millisecond a record on this machine.
                    Some(Duration::from_secs_f64(
                        (n - warm) as f64 / half + warm as f64 / 1000.0 + 20.0,
                    )),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(12)); // group join and assignment
    if warm > 0 {
        let t = Instant::now();
        produce_to(&pages, &live_topic, &lines[..warm], None, live_partitions);
        let signed = settled(&brokers, &format!("{}signatures", prefix("live")));
        println!(
            "warm-up: the first {warm} records produced at once and their signature events \
             published (the topic's high watermark: {signed}) in {:.1} s; the next {} are timed",
            t.elapsed().as_secs_f64(),
            n - warm
        );
    }
    let delays_before = (stages == ["all"]).then(|| record_delays(metrics_port));
    // A downstream consumer of the pair events, reading them as they arrive: the broker
    // timestamps of neardup's records are their produce times (tansu keeps a topic's
    // `LogAppendTime` as `CreateTime`), before the producer's linger and the broker's append.
    let stop_tail = Arc::new(AtomicBool::new(false));
    let tailed = tail(
        &brokers,
        &format!("{}pairs", prefix("live")),
        stop_tail.clone(),
    );
    let produced = produce_to(&pages, &live_topic, timed, Some(half), live_partitions);
    if let Some(before) = delays_before {
        settled(&brokers, &format!("{}signatures", prefix("live")));
        let after = record_delays(metrics_port);
        for until in ["read", "acknowledged"] {
            println!(
                "  neardup's own histogram, page event produced -> {until}: {}",
                bucket_spread(&before, &after, until)
            );
        }
    }
    for (stage, runner) in stages.iter().zip(runners) {
        if let Ok((_, _, err, _)) = runner.join() {
            report_checkpoints(&format!("live run, {stage}"), &err);
        }
        let _ = std::fs::remove_dir_all(checkpoint_dir(&format!("live-{stage}")));
    }
    stop_tail.store(true, Ordering::Relaxed);
    let received = tailed.join().expect("the tail thread");
    // The internal records' append times, one per page event, in input order.
    let mut indexed: Vec<i64> = vec![];
    if stages != ["all"] && live_partitions > 1 {
        println!("  (each hop's delay is matched record by record on one partition only)");
    } else if stages != ["all"] && warm > 0 {
        println!("  (each hop's delay is matched record by record without --latency-warm only)");
    } else if stages != ["all"] {
        // Each hop's delay, record by record: the stages keep the order of the one partition,
        // and every page event gives one record to each internal topic.
        let at = |t: &str| stamps(&brokers, &format!("{}{t}", prefix("live")));
        let signed = at("internal.signed");
        indexed = at("internal.indexed");
        for (hop, from, to) in [
            ("page produced -> signed", &produced, &signed),
            ("signed -> indexed", &signed, &indexed),
        ] {
            if from.len() != to.len() {
                println!(
                    "  {hop}: {} records against {}, not matched",
                    to.len(),
                    from.len()
                );
                continue;
            }
            let mut d: Vec<i64> = from.iter().zip(to.iter()).map(|(a, b)| b - a).collect();
            d.sort_unstable();
            println!("  {hop}: {}", spread(&d));
        }
    }
    // (produce time, input position) of each page event.
    let mut sent: HashMap<(String, String), (i64, usize)> = HashMap::new();
    for (i, (l, t)) in timed.iter().zip(&produced).enumerate() {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(l) {
            if let (Some(u), Some(f)) = (v["url"].as_str(), v["fetched_at"].as_str()) {
                sent.insert((u.to_owned(), f.to_owned()), (*t, i));
            }
        }
    }
    // (the causing page event's produce time, the pair event's time, the page's input
    // position) of each pair event in `records` (time, payload).
    let pair_times = |records: &[(i64, Vec<u8>)]| -> Vec<(i64, i64, usize)> {
        let mut out = vec![];
        for (ts, p) in records {
            let v: serde_json::Value = serde_json::from_slice(p).expect("pair event");
            if v["state"] != "detected" {
                continue;
            }
            let at = v["at"].as_str().unwrap_or("").to_owned();
            for side in ["a", "b"] {
                let key = (v[side].as_str().unwrap_or("").to_owned(), at.clone());
                if let Some(&(t, i)) = sent.get(&key) {
                    out.push((t, *ts, i));
                    break;
                }
            }
        }
        out
    };
    // Each pair event as the downstream consumer received it; and by its own produce time.
    // (produce time from the first page's, delay) of each pair event received.
    let by_time: Vec<(i64, i64)> = pair_times(&received)
        .into_iter()
        .map(|(t, ts, _)| (t - produced[0], ts - t))
        .collect();
    let stamped = pair_times(&read_all(&brokers, &format!("{}pairs", prefix("live"))));
    // Split stages: the delay from the page's internal.indexed record to its pair event (both
    // produced by the index stage).
    let mut after_indexed: Vec<i64> = if indexed.len() == n {
        stamped.iter().map(|&(_, ts, i)| ts - indexed[i]).collect()
    } else {
        vec![]
    };
    if let Some(ms) = latency_profile {
        // The worst delay of the pair events caused by the page events of each MS milliseconds.
        let mut worst: std::collections::BTreeMap<i64, (i64, usize)> = Default::default();
        for &(s, d) in &by_time {
            let w = worst.entry(s / ms * ms).or_default();
            w.0 = w.0.max(d);
            w.1 += 1;
        }
        let line: Vec<String> = worst
            .iter()
            .map(|(s, (d, n))| format!("{s}:{d}/{n}"))
            .collect();
        println!(
            "worst delay (ms) of the pairs of the pages produced in each {ms} ms (from ms: worst/pairs): {}",
            line.join(" ")
        );
    }
    // The same without the pages produced in the live run's first two seconds: a fresh
    // process's first second (heaps, caches and the broker's new topic warming up) weighs 1/T
    // of a T-second measurement, against nothing in a long-running deployment.
    let mut steady: Vec<i64> = by_time
        .iter()
        .filter(|&&(t, _)| t >= 2000)
        .map(|&(_, d)| d)
        .collect();
    steady.sort_unstable();
    let mut delays: Vec<i64> = by_time.iter().map(|&(_, d)| d).collect();
    delays.sort_unstable();
    println!(
        "latency, page event produced -> pair event received by a consumer of the pairs topic, at {half:.0} records/s over {} records: \
         {} pair events, {}",
        timed.len(),
        delays.len(),
        spread(&delays)
    );
    println!(
        "  of which the pages produced after the first 2 s: {} pair events, {}",
        steady.len(),
        spread(&steady)
    );
    let mut own: Vec<i64> = stamped.iter().map(|&(t, ts, _)| ts - t).collect();
    own.sort_unstable();
    println!(
        "  to the pair event's own produce time (its broker timestamp: before neardup's producer \
         lingers, sends it and the broker appends it): {} pair events, {}",
        own.len(),
        spread(&own)
    );
    if echo {
        // Again after neardup's run: tansu, which keeps every topic in memory, grows slower
        // as it holds more, so the two bracket the broker's share of the live run's delays.
        echo_baseline(&pages, &echo_topic("after"), timed, half, "after", &[]);
    }
    if !after_indexed.is_empty() {
        after_indexed.sort_unstable();
        println!(
            "  page's internal.indexed record -> its pair event: median {} ms, p99 {} ms, min {} ms, max {} ms",
            percentile(&after_indexed, 0.5),
            percentile(&after_indexed, 0.99),
            after_indexed[0],
            after_indexed.last().copied().unwrap_or(0)
        );
    }
}

/// `--echo-baseline`: the delay the broker and the client library alone add at the live run's
/// rate. A consumer that does nothing but pass each record on (a small record with its key, to
/// `TOPIC.out`), with the librdkafka settings `neardup run` uses for both directions (but for
/// `fetch.message.max.bytes`, 20 MB as the bare read's, where neardup takes 8 MiB), is fed
/// `lines` at `rate` records/s, alone on the machine, `when` (before, after or instead of)
/// neardup's live run: each record's delay is the append time of the record passed on minus
/// the produce time of the page event. It is the floor under neardup's latency on this broker
/// at this hour.
///
/// `warm` records (`--latency-warm` with `--echo-only`) are produced first, at once, and passed
/// over untimed, so that the broker holds what it holds when the live run's timed records come.
fn echo_baseline(
    pages: &Pages,
    topic: &str,
    lines: &[Vec<u8>],
    rate: f64,
    when: &str,
    warm: &[Vec<u8>],
) {
    let brokers = pages.brokers;
    let out = format!("{topic}.out");
    let n = lines.len();
    if !warm.is_empty() {
        let t = Instant::now();
        produce(pages, topic, warm, None);
        println!(
            "warm-up: the first {} records produced at once in {:.1} s, passed over by the echo consumer; the next {n} are timed",
            warm.len(),
            t.elapsed().as_secs_f64()
        );
    }
    let skip = warm.len() as i64;
    // Set once the echo consumer has read past the warm records (at once without any).
    let past_warm = Arc::new(AtomicBool::new(skip == 0));
    let past_warm2 = past_warm.clone();
    let (brokers2, topic2, out2) = (brokers.to_owned(), topic.to_owned(), out.clone());
    // Reading the warm records takes well under a millisecond each.
    let deadline = Duration::from_secs_f64(n as f64 / rate + skip as f64 / 1000.0 + 30.0);
    let echo = std::thread::spawn(move || {
        let mut cfg = config(&brokers2);
        // neardup's fetch wait, so that the floor is that of neardup's consumer settings.
        let (wait_key, wait) = neardup::kafka::FETCH_WAIT;
        cfg.set("fetch.message.max.bytes", "20000000")
            .set(wait_key, wait);
        let consumer = from_beginning(cfg, &topic2, "echo");
        let producer: BaseProducer = config(&brokers2)
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set("acks", "all")
            .create()
            .expect("echo producer");
        let start = Instant::now();
        let mut passed = 0;
        while passed < n && start.elapsed() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.expect("echo read");
                if m.offset() < skip {
                    if m.offset() == skip - 1 {
                        past_warm2.store(true, Ordering::Relaxed);
                    }
                    continue;
                }
                let rec = BaseRecord::<[u8], [u8]>::to(&out2)
                    .key(m.key().unwrap_or(&[]))
                    .payload(&b"1"[..]);
                send(&producer, rec);
                passed += 1;
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(30)).expect("echo flush");
        passed
    });
    std::thread::sleep(Duration::from_secs(3)); // the consumer's connection and first fetch
    let waited = Instant::now();
    while !past_warm.load(Ordering::Relaxed) && waited.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let produced = produce(pages, topic, lines, Some(rate));
    let passed = echo.join().expect("echo thread");
    let echoed = stamps(brokers, &out);
    if passed != n || echoed.len() != n {
        println!(
            "echo baseline ({when} neardup's live run): {passed} records passed on, {} appended, of {n}: not matched",
            echoed.len()
        );
        return;
    }
    let delays = |from_ms: i64| {
        let mut d: Vec<i64> = produced
            .iter()
            .zip(&echoed)
            .filter(|(p, _)| **p - produced[0] >= from_ms)
            .map(|(p, e)| e - p)
            .collect();
        d.sort_unstable();
        d
    };
    let (all, steady) = (delays(0), delays(2000));
    println!(
        "echo baseline ({when} neardup's live run: the broker and client alone), page event produced -> record passed on (its produce time, as the broker stamps it), at {rate:.0} records/s over {n} records: {}; after the first 2 s: {}",
        spread(&all),
        spread(&steady),
    );
}

/// The internal topics of a split topology with a mirror stage (one partition each, as the
/// input topic has).
const INTERNAL: [&str; 4] = [
    "internal.signed",
    "internal.indexed",
    "internal.clustered",
    "internal.lease",
];

/// The arguments that make `neardup run` the split stage `stage` (with a mirror stage, so each
/// of the four stages runs in a process of its own).
fn stage_args(stage: &str) -> [&str; 3] {
    ["--stage", stage, "--mirror-stage"]
}

/// Runs `--stage STAGE --mirror-stage --exit-at-end` (and `passed`) on `topic` to its end,
/// which it must reach: its wall time, peak RSS (KiB) and CPU time.
fn run_stage(
    brokers: &str,
    topic: &str,
    prefix: &str,
    stage: &str,
    passed: &[&str],
) -> (f64, u64, f64) {
    let args: Vec<&str> = stage_args(stage)
        .into_iter()
        .chain(["--exit-at-end"])
        .chain(passed.iter().copied())
        .collect();
    let (secs, peak_kib, err, cpu) = neardup(brokers, topic, prefix, &args, None);
    assert!(
        err.contains("neardup summary"),
        "--stage {stage} did not finish:\n{err}"
    );
    (secs, peak_kib, cpu)
}

/// `--split-stages`: the split stages one after another on `topic` (`n` records), each to the
/// end of its input; `all_cpu` is the all-in-one run's CPU time.
fn split_stages(brokers: &str, topic: &str, prefix: &str, passed: &[&str], n: usize, all_cpu: f64) {
    let mut total_cpu = 0.0;
    for (stage, output) in [
        ("sign", Some("internal.signed")),
        ("index", Some("internal.indexed")),
        ("cluster", Some("internal.clustered")),
        ("mirror", None),
    ] {
        let (secs, peak_kib, cpu) = run_stage(brokers, topic, prefix, stage, passed);
        total_cpu += cpu;
        let steady = output
            .and_then(|t| first_to_last(brokers, &format!("{prefix}{t}")))
            .map(|span| n as f64 / span);
        println!(
            "--stage {stage:<7}: {} records/s from its first internal record to its last; \
             {:.0} records/s start to exit ({secs:.1} s); CPU {cpu:.1} s; peak RSS {:.0} MiB",
            steady.map_or("-".into(), |r| format!("{r:.0}")),
            n as f64 / secs,
            peak_kib as f64 / 1024.0
        );
    }
    println!(
        "split stages' CPU time together {total_cpu:.1} s, against {all_cpu:.1} s all-in-one ({:.2}x)",
        total_cpu / all_cpu
    );
}

/// A run of the split stages started at once: (brokers, topic, prefix, arguments passed, records,
/// (the bare read's rate, the all-in-one's CPU time)).
type SplitRun = fn(&str, &str, &str, &[&str], usize, (f64, f64));

/// `--split-side-by-side`: the four split stages started at once on `topic` (`n` records), each
/// with `--exit-at-end`, as a replay of a topic through a split topology runs on this machine;
/// `bare` is the bare read's rate, `all_cpu` the all-in-one run's CPU time.
fn split_side_by_side(
    brokers: &str,
    topic: &str,
    prefix: &str,
    passed: &[&str],
    n: usize,
    (bare, all_cpu): (f64, f64),
) {
    let started = Instant::now();
    let runs: Vec<_> = ["mirror", "cluster", "index", "sign"]
        .into_iter()
        .map(|stage| {
            let passed: Vec<String> = passed.iter().map(|a| a.to_string()).collect();
            let (brokers, topic, prefix) =
                (brokers.to_owned(), topic.to_owned(), prefix.to_owned());
            let run = std::thread::spawn(move || {
                let passed: Vec<&str> = passed.iter().map(String::as_str).collect();
                run_stage(&brokers, &topic, &prefix, stage, &passed)
            });
            (stage, run)
        })
        .collect();
    let mut total_cpu = 0.0;
    for (stage, run) in runs {
        let (secs, peak_kib, cpu) = run.join().expect("a stage's monitor");
        total_cpu += cpu;
        println!(
            "  --stage {stage:<7}: exited after {secs:.1} s; CPU {cpu:.1} s; peak RSS {:.0} MiB",
            peak_kib as f64 / 1024.0
        );
    }
    let secs = started.elapsed().as_secs_f64();
    steady_rate("split stages side by side", brokers, prefix, n, secs, bare);
    println!(
        "split stages side by side, start to the last exit: {:.0} records/s = {:.1} % of the bare read; CPU time together {total_cpu:.1} s, against {all_cpu:.1} s all-in-one ({:.2}x)",
        n as f64 / secs,
        100.0 * n as f64 / secs / bare,
        total_cpu / all_cpu
    );
}

/// Prints the rate of the split stages under `prefix` (`n` records, `secs` from start to the
/// last exit) from the sign stage's first internal record to the last record the cluster stage
/// passed on, against the `bare` read.
fn steady_rate(what: &str, brokers: &str, prefix: &str, n: usize, secs: f64, bare: f64) {
    let first = stamps(brokers, &format!("{prefix}internal.signed"))
        .into_iter()
        .min();
    let last = stamps(brokers, &format!("{prefix}internal.clustered"))
        .into_iter()
        .max();
    if let (Some(first), Some(last)) = (first, last) {
        let span = (last - first).max(1) as f64 / 1000.0;
        println!(
            "{what}, first signed record to last clustered ({span:.1} s of {secs:.1} s): {:.0} records/s = {:.1} % of the bare read",
            n as f64 / span,
            100.0 * n as f64 / span / bare
        );
    }
}

/// `--scale-out`: the four split stages in one process on `topic` (`n` records), measured as
/// [`split_side_by_side`] measures them.
fn scale_out(
    brokers: &str,
    topic: &str,
    prefix: &str,
    passed: &[&str],
    n: usize,
    (bare, all_cpu): (f64, f64),
) {
    let args: Vec<&str> = ["--scale-out", "--mirror-stage", "--exit-at-end"]
        .into_iter()
        .chain(passed.iter().copied())
        .collect();
    let (secs, peak_kib, err, cpu) = neardup(brokers, topic, prefix, &args, None);
    assert!(
        err.contains("stage mirror:"),
        "neardup run --scale-out did not finish:\n{err}"
    );
    steady_rate("--scale-out", brokers, prefix, n, secs, bare);
    println!(
        "--scale-out, start to exit: {:.0} records/s = {:.1} % of the bare read; CPU time {cpu:.1} s, against {all_cpu:.1} s all-in-one ({:.2}x); peak RSS {:.0} MiB",
        n as f64 / secs,
        100.0 * n as f64 / secs / bare,
        cpu / all_cpu,
        peak_kib as f64 / 1024.0
    );
}

/// A consumer of its own group reading partition 0 of `topic` from its first record.
fn from_beginning(mut cfg: ClientConfig, topic: &str, group: &str) -> BaseConsumer {
    let c: BaseConsumer = cfg
        .set("group.id", format!("{topic}.{group}"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    // Every partition: the output topics the broker creates on first use have its default
    // number of them (tansu: 4), not the input's one.
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions(&c, topic) {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("tpl");
    }
    c.assign(&tpl).expect("assign");
    c
}

/// The number of partitions of `topic` (at least 1: a missing topic is read as one partition,
/// which the broker may create on first use).
fn partitions(c: &BaseConsumer, topic: &str) -> i32 {
    c.fetch_metadata(Some(topic), Duration::from_secs(30))
        .expect("metadata")
        .topics()
        .first()
        .map_or(1, |t| t.partitions().len().max(1)) as i32
}

/// Reads every partition of `topic` from its beginning on a thread of its own, as a downstream
/// consumer would, until `stop` is set and three seconds pass without a record: each record
/// with the wall-clock time (ms since the epoch) it reached this consumer. It waits for the
/// topic to exist (the broker creates it with neardup's first record of it).
fn tail(
    brokers: &str,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(i64, Vec<u8>)>> {
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    std::thread::spawn(move || {
        let probe: BaseConsumer = config(&brokers).create().expect("consumer");
        let exists = || {
            probe
                .fetch_metadata(Some(&topic), Duration::from_secs(30))
                .ok()
                .and_then(|m| m.topics().first().map(|t| !t.partitions().is_empty()))
                .unwrap_or(false)
        };
        while !exists() {
            if stop.load(Ordering::Relaxed) {
                return vec![];
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // A fetch held at most 10 ms when the broker has nothing new (as neardup read until
        // the fifty-fourth session; kept, so that the instrument stays the same).
        let mut cfg = config(&brokers);
        cfg.set("fetch.wait.max.ms", "10");
        let c = from_beginning(cfg, &topic, "tail");
        let mut out = vec![];
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) || last.elapsed() < Duration::from_secs(3) {
            if let Some(m) = c.poll(Duration::from_millis(100)) {
                let m = m.expect("read");
                out.push((now_ms(), m.payload().unwrap_or(&[]).to_vec()));
                last = Instant::now();
            }
        }
        out
    })
}
