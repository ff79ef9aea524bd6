//! `neardup demo`: the whole topology over the real Kafka code path, with no external setup.
//!
//! It starts librdkafka's in-process mock cluster (`rdkafka::mocking::MockCluster`: consumer
//! groups, commits and produce acknowledgements behave as on a broker, no process, no network
//! beyond loopback), creates the topics, produces the built-in sample crawl (synthetic text,
//! see [`crate::sample`]), runs exactly what `neardup run --exit-at-end --assign` runs against it
//! until the input is drained, then reads the output topics back and prints what neardup found.
//! It reads alone, as a replay does: joining a consumer group would only wait out the mock
//! cluster's initial rebalance delay (3 s, five times the rest of the demo).

use crate::cli::DemoArgs;
use crate::kafka::{self, KafkaOptions};
use crate::replay::FileSink;
use crate::sample::{sample_crawl, SampleOptions};
use anyhow::{Context as _, Result};
use neardup_schemas::{
    ClusterEvent, DeadLetterEvent, MirrorEvent, OutputKind, PairEvent, PairLevel, PairState,
};
use neardup_topology::Emit;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::watch;

const INPUT: &str = "crawl.pages";
/// One input partition: records of different partitions are processed in arrival order, not
/// in event-time order, so only a single partition reproduces the sample's timeline exactly.
const INPUT_PARTITIONS: i32 = 1;
const PARTITIONS: i32 = 3;

/// Runs the demo and prints its report.
pub async fn demo(args: &DemoArgs) -> Result<()> {
    let sample = sample_crawl(&SampleOptions {
        rounds: args.rounds,
        pages_per_host: args.pages_per_host,
        ..SampleOptions::default()
    });
    println!(
        "neardup demo: embedded Kafka (librdkafka mock cluster), sample crawl of {} records ({} malformed on purpose)",
        sample.records.len(),
        sample.bad_records.len()
    );
    let cluster = MockCluster::new(1).context("cannot start the embedded mock cluster")?;
    let brokers = cluster.bootstrap_servers();
    let opts = KafkaOptions {
        brokers: brokers.clone(),
        group: "neardup-demo".into(),
        input_topic: INPUT.into(),
        output_prefix: "neardup.".into(),
        kafka: vec![],
        exit_at_end: true,
        // Alone, so no group join to wait for (see the module's documentation).
        assign: true,
        commit_interval: Duration::from_millis(200),
        max_in_flight: 10_000,
        drain_timeout: Duration::from_secs(30),
        partition_wait: Duration::from_secs(1),
        upstream_wait: Duration::from_secs(60),
        checkpoint_dir: None,
        checkpoint_interval: Duration::from_secs(300),
        stage: crate::cli::Stage::All,
        max_dead_letter_ratio: 0.5,
        dead_letter_window: 1000,
        sign_cache: 64 << 20,
        lease: false,
        advertise: None,
    };
    cluster.create_topic(INPUT, INPUT_PARTITIONS, 1)?;
    for topic in opts.output_topics().values() {
        cluster.create_topic(topic, PARTITIONS, 1)?;
    }

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()?;
    let mut deliveries = Vec::with_capacity(sample.records.len());
    for record in &sample.records {
        deliveries.push(
            producer
                .send_result(
                    FutureRecord::to(INPUT)
                        .key(&crate::sample::record_key(record))
                        .payload(record),
                )
                .map_err(|(e, _)| e)
                .context("producing the sample crawl")?,
        );
    }
    for d in deliveries {
        d.await?
            .map_err(|(e, _)| e)
            .context("producing the sample crawl")?;
    }
    println!(
        "produced the sample to topic {INPUT} ({PARTITIONS} partitions); running the topology..."
    );

    let (_tx, rx) = watch::channel(false);
    // No HTTP in the demo: the query channel's sender is dropped at once.
    let (_, queries) = tokio::sync::mpsc::channel(1);
    let outcome = kafka::run(
        &opts,
        neardup_topology::Config::default(),
        rx,
        queries,
        Default::default(),
    )
    .await?;
    let outputs = read_back(&brokers, &opts.output_topics())?;
    if let Some(dir) = &args.out {
        let mut sink = FileSink::create(dir)?;
        for e in &outputs {
            sink.write(e)?;
        }
        sink.finish()?;
        println!("outputs written to {}", dir.display());
    }
    print!(
        "{}",
        crate::summary::render(&outcome.topology, outcome.elapsed)
            + &crate::summary::sign_cache(&outcome.sign_cache)
    );
    report(&sample, &outputs);
    println!(
        "\nTo run on a real cluster instead: neardup run --brokers HOST:9092 --input-topic crawl.pages \
         [-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 ...]"
    );
    Ok(())
}

/// Reads every output topic from the beginning to its end (all partitions at once).
fn read_back(brokers: &str, topics: &BTreeMap<OutputKind, String>) -> Result<Vec<Emit>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "neardup-demo-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    let mut remaining: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, OutputKind> = BTreeMap::new();
    for (kind, topic) in topics {
        kinds.insert(topic, *kind);
        for p in 0..PARTITIONS {
            let (low, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
            if high > low {
                tpl.add_partition_offset(topic, p, Offset::Offset(low))?;
                remaining.insert((topic.clone(), p), high);
            }
        }
    }
    consumer.assign(&tpl)?;
    let mut out = Vec::new();
    while !remaining.is_empty() {
        let m = consumer
            .poll(Duration::from_secs(10))
            .context("timed out reading outputs back")??;
        let key = (m.topic().to_owned(), m.partition());
        if remaining
            .get(&key)
            .is_some_and(|&high| m.offset() + 1 >= high)
        {
            remaining.remove(&key);
        }
        let kind = kinds[m.topic()];
        out.push((
            (kind, m.partition(), m.offset()),
            Emit {
                kind,
                key: String::from_utf8_lossy(m.key().unwrap_or(&[])).into_owned(),
                value: m.payload().unwrap_or(&[]).to_vec(),
            },
        ));
    }
    // Per topic, in partition and offset order, whatever order the partitions arrived in (so
    // `--out` writes the same files on every run).
    out.sort_by_key(|(at, _)| *at);
    Ok(out.into_iter().map(|(_, e)| e).collect())
}

fn report(sample: &crate::sample::SampleCrawl, outputs: &[Emit]) {
    let of = |k: OutputKind| outputs.iter().filter(move |e| e.kind == k);
    let pairs: Vec<PairEvent> = of(OutputKind::Pairs)
        .filter_map(|e| serde_json::from_slice(&e.value).ok())
        .collect();
    let detected: BTreeSet<(String, String)> = pairs
        .iter()
        .filter(|p| p.state == PairState::Detected)
        .map(|p| (p.a.clone(), p.b.clone()))
        .collect();
    let expected: BTreeSet<(String, String)> = sample
        .exact_groups
        .iter()
        .flat_map(|(_, urls)| {
            urls.iter()
                .enumerate()
                .flat_map(move |(i, a)| urls[i + 1..].iter().map(move |b| (a.clone(), b.clone())))
        })
        .collect();
    let found = expected.intersection(&detected).count();
    let at_level = |l: PairLevel| {
        pairs
            .iter()
            .filter(|p| p.state == PairState::Detected && p.level == l)
            .count()
    };
    println!(
        "\npairs: {} detected, of {} distinct pairs ({} exact, {} virtually identical, {} very \
         similar), {} retracted; the sample has {} exact-duplicate pairs by construction, {} of \
         them found",
        pairs
            .iter()
            .filter(|p| p.state == PairState::Detected)
            .count(),
        detected.len(),
        at_level(PairLevel::Exact),
        at_level(PairLevel::VirtuallyIdentical),
        at_level(PairLevel::VerySimilar),
        pairs
            .iter()
            .filter(|p| p.state == PairState::Retracted)
            .count(),
        expected.len(),
        found
    );
    for p in pairs
        .iter()
        .filter(|p| p.state == PairState::Detected && p.level != PairLevel::Exact)
        .take(3)
    {
        let j = p.jaccard.unwrap_or(f64::NAN);
        println!(
            "  {}  ~  {}  ({}, Jaccard ~{j:.2})",
            p.a,
            p.b,
            p.level.as_str()
        );
    }
    for p in pairs
        .iter()
        .filter(|p| p.state == PairState::Detected && p.level == PairLevel::Exact)
        .take(3)
    {
        println!("  {}  ==  {}", p.a, p.b);
    }
    for m in
        of(OutputKind::Mirrors).filter_map(|e| serde_json::from_slice::<MirrorEvent>(&e.value).ok())
    {
        println!(
            "mirror finding: {} / {}: {}, {} shared pages, prefixes {:?}",
            m.hosts[0],
            m.hosts[1],
            wire_name(m.state),
            m.shared_pages,
            m.prefixes
        );
    }
    let clusters: Vec<ClusterEvent> = of(OutputKind::Clusters)
        .filter_map(|e| serde_json::from_slice(&e.value).ok())
        .collect();
    let mut changes: BTreeMap<String, usize> = BTreeMap::new();
    for c in &clusters {
        *changes.entry(wire_name(c.change)).or_default() += 1;
    }
    println!("cluster changes: {changes:?}");
    let dead: Vec<DeadLetterEvent> = of(OutputKind::DeadLetter)
        .filter_map(|e| serde_json::from_slice(&e.value).ok())
        .collect();
    println!(
        "dead letters: {} (the sample has {} malformed records)",
        dead.len(),
        sample.bad_records.len()
    );
    for d in dead.iter().take(4) {
        println!("  {} at {}: {}", d.reason.as_str(), d.source, d.detail);
    }
}

/// The name a unit variant has in the events (its serialized string), as the demo prints it.
fn wire_name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
