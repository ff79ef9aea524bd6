//! How long the index stage's watch of the sign stage takes to learn where the partitions of a
//! topic start and end, asked partition by partition (`fetch_watermarks`, as it asked until the
//! thirtieth session) and all at once ([`neardup::at_end::Prober::watermarks`]), alternating in
//! one run against a real broker:
//!
//! ```sh
//! tests/kafka-test-broker.sh start            # or any broker
//! cargo run --release -p neardup --example watermarks_bench -- --brokers 127.0.0.1:19092 \
//!     [--partitions 4,32,128] [--reps 15]
//! ```
//!
//! Each size gets a fresh topic, partition `p` holding `p % 5` records; both ways must give the
//! same offsets (the run stops otherwise). Prints the median time of each and their ratio.

use anyhow::{ensure, Context as _, Result};
use clap::Parser as _;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let brokers = arg(&args, "--brokers").unwrap_or_else(|| "127.0.0.1:19092".into());
    let sizes: Vec<i32> = arg(&args, "--partitions")
        .unwrap_or_else(|| "4,32,128".into())
        .split(',')
        .map(|s| {
            s.parse()
                .context("--partitions takes numbers, e.g. 4,32,128")
        })
        .collect::<Result<_>>()?;
    let reps: usize = arg(&args, "--reps").map_or(Ok(15), |s| s.parse())?;
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &brokers);
    let admin: AdminClient<DefaultClientContext> = config.create()?;
    let producer: BaseProducer = config.create()?;
    let consumer: BaseConsumer = config.create()?;
    let cli = neardup::cli::Cli::try_parse_from(["neardup", "run", "--brokers", &brokers])?;
    let neardup::cli::Command::Run(run) = cli.command else {
        unreachable!("parsed as run")
    };
    let mut prober = neardup::at_end::Prober::new(&neardup::kafka::KafkaOptions::from(&run));
    for n in sizes {
        let topic = format!("watermarks-bench-{}-{n}", std::process::id());
        let made = admin
            .create_topics(
                &[NewTopic::new(&topic, n, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await?;
        for r in made {
            r.map_err(|(t, e)| anyhow::anyhow!("cannot create {t}: {e}"))?;
        }
        for p in 0..n {
            for i in 0..p % 5 {
                let value = format!("record {i}");
                producer
                    .send(BaseRecord::<(), _>::to(&topic).partition(p).payload(&value))
                    .map_err(|(e, _)| e)?;
            }
        }
        producer.flush(Duration::from_secs(30))?;
        let partitions: Vec<i32> = (0..n).collect();
        let (mut one_by_one, mut at_once) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let t = Instant::now();
            let each: BTreeMap<i32, (i64, i64)> = partitions
                .iter()
                .map(|&p| {
                    Ok((
                        p,
                        consumer.fetch_watermarks(&topic, p, Duration::from_secs(5))?,
                    ))
                })
                .collect::<Result<_>>()?;
            one_by_one.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let all = prober.watermarks(&topic, &partitions)?;
            at_once.push(t.elapsed().as_secs_f64() * 1e3);
            ensure!(
                each == all,
                "the two ways disagree on {topic}: {each:?} vs {all:?}"
            );
        }
        let (a, b) = (median(one_by_one), median(at_once));
        println!(
            "{n} partitions: one by one {a:.2} ms, all at once {b:.2} ms (medians of {reps}): {:.1} times faster",
            a / b
        );
    }
    Ok(())
}
