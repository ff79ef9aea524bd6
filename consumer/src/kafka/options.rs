//! What `run` needs to talk to Kafka ([`KafkaOptions`]): the brokers, topics, group and
//! librdkafka properties of each stage, and the clients made from them.

use crate::cli::{RunArgs, Stage};
use anyhow::{Context as _, Result};
use neardup_schemas::OutputKind;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::FutureProducer;
use std::collections::BTreeMap;
use std::time::Duration;

/// Everything `run` needs to talk to Kafka.
#[derive(Debug, Clone)]
pub struct KafkaOptions {
    /// Bootstrap servers.
    pub brokers: String,
    /// Consumer group id.
    pub group: String,
    /// Input topic.
    pub input_topic: String,
    /// Output topic prefix (`neardup.` gives `neardup.pairs`, ...).
    pub output_prefix: String,
    /// librdkafka properties passed through to consumer and producer.
    pub kafka: Vec<(String, String)>,
    /// Stop at the end of every assigned partition.
    pub exit_at_end: bool,
    /// Read every input partition without joining the group (`--assign`).
    pub assign: bool,
    /// Commit interval.
    pub commit_interval: Duration,
    /// Bound on inputs awaiting acknowledgement.
    pub max_in_flight: usize,
    /// Bound on the shutdown drain.
    pub drain_timeout: Duration,
    /// Bound on a record's wait for the other input partitions.
    pub partition_wait: Duration,
    /// Bound on the index stage's wait for an internal partition the sign stage still fills.
    pub upstream_wait: Duration,
    /// Where checkpoints are kept (none: no checkpoints).
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// How often one is written.
    pub checkpoint_interval: Duration,
    /// The part of the topology this process runs.
    pub stage: Stage,
    /// The dead-letter guard: at most this share ...
    pub max_dead_letter_ratio: f64,
    /// ... of this many latest records.
    pub dead_letter_window: usize,
    /// Bytes of signatures kept to skip signing pages fetched again unchanged (0: none).
    pub sign_cache: usize,
    /// A stage whose state spans the partitions runs in the lease's holder only (`--lease`).
    pub lease: bool,
    /// The URL of this instance's HTTP endpoints, which the lease's holder publishes
    /// (`--http-advertise`).
    pub advertise: Option<String>,
}

impl From<&RunArgs> for KafkaOptions {
    fn from(a: &RunArgs) -> Self {
        KafkaOptions {
            brokers: a.brokers.clone().unwrap_or_default(),
            group: a.group.clone(),
            input_topic: a.input_topic.clone(),
            output_prefix: a.output_prefix.clone(),
            kafka: a.kafka.clone(),
            exit_at_end: a.exit_at_end,
            assign: a.assign,
            commit_interval: a.commit_interval,
            max_in_flight: a.max_in_flight.max(1),
            drain_timeout: a.drain_timeout,
            partition_wait: a.partition_wait,
            upstream_wait: a.upstream_wait,
            checkpoint_dir: a.checkpoint_dir.clone(),
            checkpoint_interval: a.checkpoint_interval,
            stage: a.stage,
            max_dead_letter_ratio: a.max_dead_letter_ratio,
            dead_letter_window: a.dead_letter_window.max(1),
            sign_cache: a.topology.sign_cache,
            // Every stage of a scale-out process runs under the lease.
            lease: a.lease || a.scale_out,
            advertise: a.http_advertise.clone(),
        }
    }
}

impl KafkaOptions {
    /// Options for unit tests: input `pages`, prefix `p.`, group `g`, `--exit-at-end`.
    #[cfg(test)]
    pub(crate) fn example(stage: Stage) -> KafkaOptions {
        KafkaOptions {
            brokers: String::new(),
            group: "g".into(),
            input_topic: "pages".into(),
            output_prefix: "p.".into(),
            kafka: vec![],
            exit_at_end: true,
            assign: false,
            commit_interval: Duration::from_secs(1),
            max_in_flight: 1,
            drain_timeout: Duration::from_secs(1),
            partition_wait: Duration::from_secs(1),
            upstream_wait: Duration::from_secs(60),
            checkpoint_dir: None,
            checkpoint_interval: Duration::from_secs(1),
            stage,
            max_dead_letter_ratio: 0.5,
            dead_letter_window: 1,
            sign_cache: 0,
            lease: false,
            advertise: None,
        }
    }

    /// The topic each output kind goes to.
    pub fn output_topics(&self) -> BTreeMap<OutputKind, String> {
        OutputKind::ALL
            .iter()
            .map(|k| (*k, format!("{}{}", self.output_prefix, k.short_name())))
            .collect()
    }

    /// The internal topic from the sign stage to the index stage.
    pub fn internal_topic(&self) -> String {
        format!("{}internal.signed", self.output_prefix)
    }

    /// The internal topic from the index stage to the cluster stage (one partition).
    pub fn indexed_topic(&self) -> String {
        format!("{}internal.indexed", self.output_prefix)
    }

    /// The internal topic from the cluster stage to the mirror stage, with `--mirror-stage`
    /// (one partition).
    pub fn clustered_topic(&self) -> String {
        format!("{}internal.clustered", self.output_prefix)
    }

    /// The internal topic of an index stage split by key: partition i holds the records for key
    /// shard i (as many partitions as `key_shards`).
    pub fn steps_topic(&self) -> String {
        format!("{}internal.steps", self.output_prefix)
    }

    /// The internal topic from the last key shard to the verify stage (one partition).
    pub fn answered_topic(&self) -> String {
        format!("{}internal.answered", self.output_prefix)
    }

    /// The topic whose one partition is the lease of a stage (`--lease`; written only with the
    /// holder's URL under `--http-advertise`).
    pub fn lease_topic(&self) -> String {
        format!("{}internal.lease", self.output_prefix)
    }

    /// The consumer group whose member assigned the lease's partition runs the stage: of the
    /// stage's options (see `KafkaOptions::for_stage`), its group + `.lease`.
    pub fn lease_group(&self) -> String {
        format!("{}.lease", self.group)
    }

    /// Whether this stage runs under a lease: `--lease`, on a stage whose state spans the
    /// partitions.
    pub fn leased(&self) -> bool {
        self.lease && self.stage.spans_partitions()
    }

    /// These options as the stage reads its input: each stage after signing reads the internal
    /// topic before it with a consumer group of its own (GROUP + `.` + the stage's name).
    pub(crate) fn for_stage(&self) -> KafkaOptions {
        let mut o = self.clone();
        let input = match self.stage {
            Stage::Index => Some(self.internal_topic()),
            Stage::Shard => Some(self.steps_topic()),
            Stage::Verify => Some(self.answered_topic()),
            Stage::Cluster => Some(self.indexed_topic()),
            Stage::Mirror => Some(self.clustered_topic()),
            Stage::All | Stage::Sign => None,
        };
        if let Some(topic) = input {
            o.input_topic = topic;
            o.group = format!("{}.{}", self.group, self.stage.name());
        }
        if self.stage == Stage::Sign {
            // Nothing to keep: signing is stateless.
            o.checkpoint_dir = None;
        }
        o
    }

    pub(crate) fn client_config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in defaults {
            c.set(*k, *v);
        }
        // The user's properties win over neardup's defaults.
        for (k, v) in &self.kafka {
            c.set(k, v);
        }
        c
    }
}

/// Creates (without waiting for a connection) the consumer and producer `run` would create, so
/// librdkafka rejects unknown or invalid properties now, with its own message.
pub fn check_clients(opts: &KafkaOptions) -> Result<()> {
    let _consumer: BaseConsumer = opts
        .client_config(&[("group.id", &opts.group)])
        .create()
        .context(
            "the Kafka consumer configuration is invalid (check brokers and the kafka properties)",
        )?;
    let _producer: FutureProducer = opts.client_config(&[]).create().context(
        "the Kafka producer configuration is invalid (check brokers and the kafka properties)",
    )?;
    Ok(())
}
