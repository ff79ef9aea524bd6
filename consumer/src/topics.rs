//! The topics a deployment reads and writes: which ones a configuration needs and with how many
//! partitions (`plan`), what the broker has (`inspect`), the missing ones created on request
//! (`neardup topics --create`), and the check `neardup run` makes of its own outputs before it
//! reads anything.
//!
//! Why a check at start: against a broker that does not create topics on first use (many
//! production clusters: `auto.create.topics.enable=false`), a run whose outputs are missing
//! applied records and stopped some 30 s later on the first unacknowledged output
//! (`UnknownTopicOrPartition`, one topic named, no way out said), and so did every restart.
//! Asked first, the broker says at once everything that is missing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use neardup_schemas::OutputKind;
use rdkafka::admin::{
    AdminClient, AdminOptions, NewTopic, OwnedResourceSpecifier, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::Producer as _;

use crate::cli::Stage;
use crate::kafka::{partition_count, KafkaOptions, METADATA_TIMEOUT};

/// How many partitions a topic must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    /// Any number (outputs, keyed by URL, pair or cluster: consumers scale with them).
    Any,
    /// As many as the input topic (the sign stage writes each page to the partition of its input
    /// partition's number).
    AsInput,
    /// Exactly this many.
    Exactly(usize),
}

/// What a topic is for in the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The page events neardup reads: the crawler's topic, never created here.
    Input,
    /// One of neardup's outputs.
    Output(OutputKind),
    /// A topic between two split stages.
    Internal,
}

/// A topic a configuration needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The topic's name.
    pub name: String,
    /// What it is for.
    pub role: Role,
    /// The partitions it must have.
    pub partitions: Partitions,
    /// Who writes it and who reads it, for the report.
    pub purpose: String,
}

/// The outputs a stage publishes: the topics `neardup run --stage STAGE` needs to exist.
pub fn stage_outputs(stage: Stage, cfg: &neardup_topology::Config) -> Vec<OutputKind> {
    use OutputKind::*;
    let downstream = |mirrors_here: bool| {
        let mut v = vec![Clusters, Recrawl];
        if mirrors_here && cfg.mirrors {
            v.push(Mirrors);
        }
        if mirrors_here && cfg.collections {
            v.push(Collections);
        }
        v
    };
    let mut kinds = match stage {
        Stage::All => {
            let mut v = vec![Signatures, Pairs];
            v.extend(downstream(true));
            v.push(DeadLetter);
            v
        }
        Stage::Sign => vec![DeadLetter],
        // The signature events (and, not split by key, the pairs); a signature event over
        // --max-output-bytes becomes a dead letter.
        Stage::Index if cfg.key_shards > 0 => vec![Signatures, DeadLetter],
        Stage::Index => vec![Signatures, Pairs, DeadLetter],
        Stage::Shard => vec![],
        Stage::Verify => vec![Pairs],
        Stage::Cluster => downstream(!cfg.mirror_stage),
        Stage::Mirror => {
            let mut v = downstream(true);
            v.retain(|k| matches!(k, Mirrors | Collections));
            v
        }
    };
    kinds.sort_by_key(|k| OutputKind::ALL.iter().position(|a| a == k));
    kinds
}

/// Every topic a deployment of this configuration reads or writes: the input, the outputs of
/// every stage, and with `split` (also implied by `--key-shards` and `--mirror-stage`) the
/// internal topics between the split stages, each with the partitions it must have.
pub fn plan(opts: &KafkaOptions, cfg: &neardup_topology::Config, split: bool) -> Vec<Need> {
    let split = split || cfg.key_shards > 0 || cfg.mirror_stage || opts.stage != Stage::All;
    let mut needs = vec![Need {
        name: opts.input_topic.clone(),
        role: Role::Input,
        partitions: Partitions::Any,
        purpose: "input: page events".into(),
    }];
    let topics = opts.output_topics();
    for kind in stage_outputs(Stage::All, cfg) {
        needs.push(Need {
            name: topics[&kind].clone(),
            role: Role::Output(kind),
            partitions: Partitions::Any,
            purpose: format!("output: {}", kind.short_name()),
        });
    }
    let mut internal = |name: String, partitions, purpose: &str| {
        needs.push(Need {
            name,
            role: Role::Internal,
            partitions,
            purpose: purpose.into(),
        })
    };
    if opts.lease {
        internal(
            opts.lease_topic(),
            Partitions::Exactly(1),
            "--lease: its one partition is the lease of each stage whose state spans the partitions (written only with --http-advertise: the holder's URL)",
        );
    }
    if split {
        internal(opts.internal_topic(), Partitions::AsInput, "sign -> index");
        if cfg.key_shards > 0 {
            internal(
                opts.steps_topic(),
                Partitions::Exactly(cfg.key_shards),
                "index -> shard (one partition per key shard)",
            );
            internal(
                opts.answered_topic(),
                Partitions::Exactly(1),
                "shard -> verify",
            );
        }
        internal(
            opts.indexed_topic(),
            Partitions::Exactly(1),
            if cfg.key_shards > 0 {
                "verify -> cluster"
            } else {
                "index -> cluster"
            },
        );
        if cfg.mirror_stage {
            internal(
                opts.clustered_topic(),
                Partitions::Exactly(1),
                "cluster -> mirror",
            );
        }
    }
    needs
}

/// The plan as TOML comments, for `neardup topics --check-config` (no broker asked).
pub fn describe(needs: &[Need]) -> String {
    let mut out = String::from("# topics this configuration needs\n");
    for n in needs {
        let partitions = match n.partitions {
            Partitions::Any => "any number of partitions".to_owned(),
            Partitions::AsInput => "as many partitions as the input topic".to_owned(),
            Partitions::Exactly(1) => "exactly 1 partition".to_owned(),
            Partitions::Exactly(k) => format!("exactly {k} partitions"),
        };
        let _ = writeln!(out, "#   {} ({}; {partitions})", n.name, n.purpose);
    }
    out
}

/// What the broker has of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Found {
    /// Its partitions (0: the topic does not exist).
    pub partitions: usize,
    /// Its `max.message.bytes`, when the broker tells it.
    pub max_message_bytes: Option<u64>,
}

/// The largest record batch a topic accepts that is enough for every output under
/// `--max-output-bytes` (a record's key and value), with room for the batch's and the record's
/// headers. Kafka's own default, 1,048,588, is enough for the default limit (1,000,000).
pub fn max_message_bytes_for(max_output_bytes: usize) -> u64 {
    (max_output_bytes as u64 + 4096).max(1_048_588)
}

/// How a topic the broker has (or lacks) fits the need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It works as it is.
    Ok,
    /// Missing.
    Missing {
        /// The partitions it is created with when asked (none: not created here).
        create_with: Option<usize>,
    },
    /// It exists but cannot work as it is: what to do.
    Wrong(String),
}

/// Judges `found` against `need`; `input_partitions` is the input topic's count (0: missing),
/// `default_partitions` what a created output gets, `max_output_bytes` the outputs' limit.
pub fn judge(
    need: &Need,
    found: Found,
    input_partitions: usize,
    default_partitions: usize,
    max_output_bytes: usize,
) -> Verdict {
    let wanted = match need.partitions {
        Partitions::Any => None,
        Partitions::AsInput => Some(input_partitions),
        Partitions::Exactly(n) => Some(n),
    };
    if found.partitions == 0 {
        return match need.role {
            Role::Input => Verdict::Missing { create_with: None },
            _ => match wanted {
                Some(0) => Verdict::Missing { create_with: None },
                Some(n) => Verdict::Missing {
                    create_with: Some(n),
                },
                None => Verdict::Missing {
                    create_with: Some(default_partitions),
                },
            },
        };
    }
    if let Some(n) = wanted.filter(|&n| n > 0 && n != found.partitions) {
        let how = match need.partitions {
            Partitions::AsInput => format!(
                "has {} partitions, needs as many as the input topic ({n}): each input partition's pages go to the partition of the same number (add partitions, or delete it and run `neardup topics --create`)",
                found.partitions
            ),
            _ if n == 1 => format!(
                "has {} partitions, needs exactly 1, so that the next stage applies pages in the order the stage before it did (delete it and run `neardup topics --create`)",
                found.partitions
            ),
            _ => format!(
                "has {} partitions, needs {n}: one per key shard (--key-shards; delete and recreate it, or give every stage --key-shards {})",
                found.partitions, found.partitions
            ),
        };
        return Verdict::Wrong(how);
    }
    if need.role != Role::Input {
        if let Some(m) = found
            .max_message_bytes
            .filter(|&m| m < max_output_bytes as u64)
        {
            return Verdict::Wrong(format!(
                "accepts records up to {m} bytes (max.message.bytes) and --max-output-bytes is {max_output_bytes}: a larger output would be refused and stop the run; raise the topic's max.message.bytes to {} or lower --max-output-bytes",
                max_message_bytes_for(max_output_bytes)
            ));
        }
    }
    Verdict::Ok
}

/// What the broker has of each of `names`.
async fn inspect(
    consumer: &BaseConsumer,
    admin: &AdminClient<DefaultClientContext>,
    names: &[&str],
) -> Result<BTreeMap<String, Found>> {
    let mut found = BTreeMap::new();
    for &name in names {
        let partitions =
            tokio::task::block_in_place(|| partition_count(consumer, name, METADATA_TIMEOUT))?;
        found.insert(
            name.to_owned(),
            Found {
                partitions,
                max_message_bytes: None,
            },
        );
    }
    // Topic configurations: a broker that does not answer (or answers only what was set
    // explicitly, as tansu does) leaves max.message.bytes unknown.
    let existing: Vec<ResourceSpecifier<'_>> = names
        .iter()
        .filter(|n| found[**n].partitions > 0)
        .map(|n| ResourceSpecifier::Topic(n))
        .collect();
    if !existing.is_empty() {
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
        if let Ok(results) = admin.describe_configs(&existing, &options).await {
            for r in results.into_iter().flatten() {
                if let OwnedResourceSpecifier::Topic(t) = &r.specifier {
                    let max = r
                        .get("max.message.bytes")
                        .and_then(|e| e.value.as_deref())
                        .and_then(|v| v.parse().ok());
                    if let Some(f) = found.get_mut(t) {
                        f.max_message_bytes = max;
                    }
                }
            }
        }
    }
    Ok(found)
}

/// `neardup topics`: what to create and how.
#[derive(Debug, Clone)]
pub struct TopicsRequest {
    /// Create the missing topics (else only check).
    pub create: bool,
    /// Include the split topology's internal topics.
    pub split: bool,
    /// Partitions of a created output topic (default: the input topic's, else 1).
    pub partitions: Option<usize>,
    /// Replication factor of created topics (-1: the broker's default).
    pub replication_factor: i32,
}

/// Checks (and with `create`, creates) every topic the configuration needs; returns the report
/// and whether every topic neardup writes is ready (the input may be missing still: `neardup
/// run` waits for it, unless the split topology needs its partition count).
pub async fn topics(
    opts: &KafkaOptions,
    cfg: &neardup_topology::Config,
    req: &TopicsRequest,
) -> Result<(String, bool)> {
    let consumer: BaseConsumer = opts
        .client_config(&[("group.id", &opts.group)])
        .create()
        .context("cannot create a Kafka client (check --brokers and -X properties)")?;
    let admin: AdminClient<DefaultClientContext> = opts
        .client_config(&[])
        .create()
        .context("cannot create a Kafka admin client (check --brokers and -X properties)")?;
    let needs = plan(opts, cfg, req.split);
    let names: Vec<&str> = needs.iter().map(|n| n.name.as_str()).collect();
    let mut found = inspect(&consumer, &admin, &names).await.with_context(|| {
        format!(
            "cannot read the topics from the brokers {}: check --brokers (NEARDUP_BROKERS), the network, and \
             the kafka properties security.protocol, ssl.* and sasl.*",
            opts.brokers
        )
    })?;
    let input_partitions = found[&opts.input_topic].partitions;
    let default_partitions = req.partitions.unwrap_or(input_partitions.max(1));
    let judged = |found: &BTreeMap<String, Found>| -> Vec<Verdict> {
        needs
            .iter()
            .map(|n| {
                judge(
                    n,
                    found[&n.name],
                    input_partitions,
                    default_partitions,
                    cfg.max_output_bytes,
                )
            })
            .collect()
    };
    let mut created: Vec<String> = Vec::new();
    if req.create {
        let max_message_bytes = max_message_bytes_for(cfg.max_output_bytes).to_string();
        let to_create: Vec<(String, usize)> = needs
            .iter()
            .zip(judged(&found))
            .filter_map(|(n, v)| match v {
                Verdict::Missing {
                    create_with: Some(p),
                } => Some((n.name.clone(), p)),
                _ => None,
            })
            .collect();
        if !to_create.is_empty() {
            let new: Vec<NewTopic<'_>> = to_create
                .iter()
                .map(|(name, p)| {
                    NewTopic::new(
                        name,
                        *p as i32,
                        TopicReplication::Fixed(req.replication_factor),
                    )
                    .set("max.message.bytes", &max_message_bytes)
                })
                .collect();
            let options = AdminOptions::new()
                .operation_timeout(Some(Duration::from_secs(30)))
                .request_timeout(Some(Duration::from_secs(30)));
            let results = admin
                .create_topics(&new, &options)
                .await
                .context("cannot create the topics")?;
            for r in results {
                match r {
                    Ok(name) => created.push(name),
                    // Created meanwhile (another instance, or the broker on first use).
                    Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((name, e)) => bail!(
                        "cannot create the topic {name}: {e} (check --replication-factor against the number of brokers, and the ACLs of this principal)"
                    ),
                }
            }
            // The new topics' metadata, once the broker has them.
            for _ in 0..50 {
                found = inspect(&consumer, &admin, &names).await?;
                if to_create.iter().all(|(n, _)| found[n].partitions > 0) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let verdicts = judged(&found);
    let mut report = String::new();
    let width = needs.iter().map(|n| n.name.len()).max().unwrap_or(5).max(5);
    let for_width = needs
        .iter()
        .map(|n| n.purpose.len())
        .max()
        .unwrap_or(3)
        .max(3);
    let _ = writeln!(
        report,
        "{:width$}  {:for_width$}  {:>10}  {:>7}  status",
        "topic", "for", "partitions", "needs"
    );
    let mut ready = true;
    for (n, v) in needs.iter().zip(&verdicts) {
        let f = found[&n.name];
        let needs_text = match n.partitions {
            Partitions::Any => "any".to_owned(),
            Partitions::AsInput if input_partitions > 0 => input_partitions.to_string(),
            Partitions::AsInput => "input's".to_owned(),
            Partitions::Exactly(k) => k.to_string(),
        };
        let has = if f.partitions > 0 {
            f.partitions.to_string()
        } else {
            "-".to_owned()
        };
        let status = match v {
            Verdict::Ok if created.contains(&n.name) => "created".to_owned(),
            Verdict::Ok => "ok".to_owned(),
            // Not created here: its partitions are the crawl's choice. (In a split deployment
            // the sign stage's internal topic, which must match them, is reported missing too.)
            Verdict::Missing { .. } if n.role == Role::Input => {
                "missing: the crawler's topic, not created here; `neardup run` waits for it"
                    .to_owned()
            }
            Verdict::Missing { create_with } => {
                ready = false;
                match create_with {
                    Some(p) => format!(
                        "missing (`--create` makes it with {p} partition{})",
                        if *p == 1 { "" } else { "s" }
                    ),
                    None => {
                        "missing (it needs as many partitions as the input topic, which is missing)"
                            .to_owned()
                    }
                }
            }
            Verdict::Wrong(how) => {
                ready = false;
                format!("wrong: {how}")
            }
        };
        let _ = writeln!(
            report,
            "{:width$}  {:for_width$}  {has:>10}  {needs_text:>7}  {status}",
            n.name, n.purpose
        );
    }
    Ok((report, ready))
}

/// `neardup run`'s check of the outputs its stage publishes: each must exist, or be created by
/// the broker on first use (asked through the producer, which requests it unless
/// `allow.auto.create.topics` is false). Metadata that cannot be read at all (no broker yet,
/// rejected credentials) is left to the run loop, which says what librdkafka reports.
pub(crate) fn check_outputs<K: Consumer<X>, X: ConsumerContext>(
    consumer: &K,
    producer: &crate::kafka::Producer,
    opts: &KafkaOptions,
    cfg: &neardup_topology::Config,
) -> Result<()> {
    let topics = opts.output_topics();
    let wanted: Vec<&str> = stage_outputs(opts.stage, cfg)
        .iter()
        .map(|k| topics[k].as_str())
        .collect();
    let missing = |timeout| -> Option<Vec<&str>> {
        let mut m = Vec::new();
        for &t in &wanted {
            match partition_count(consumer, t, timeout) {
                Ok(0) => m.push(t),
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "output topics not checked: no metadata");
                    return None;
                }
            }
        }
        Some(m)
    };
    let Some(first) = missing(Duration::from_secs(10)) else {
        return Ok(());
    };
    if first.is_empty() {
        return Ok(());
    }
    // A broker that creates topics on first use does so when a producer asks for them.
    for t in &first {
        let _ = producer
            .client()
            .fetch_metadata(Some(t), Duration::from_secs(5));
    }
    let mut still = first;
    for _ in 0..20 {
        match missing(Duration::from_secs(5)) {
            None => return Ok(()),
            Some(m) if m.is_empty() => {
                tracing::info!("the broker created the missing output topics on first use");
                return Ok(());
            }
            Some(m) => still = m,
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    bail!(
        "the output topic{} {} of --stage {} do{} not exist on {}, and the broker did not create {} on first use: create {} with `neardup topics --create` and the same configuration (it lists every topic the deployment needs), or check --output-prefix",
        if still.len() > 1 { "s" } else { "" },
        still.join(", "),
        opts.stage.name(),
        if still.len() > 1 { "" } else { "es" },
        opts.brokers,
        if still.len() > 1 { "them" } else { "it" },
        if still.len() > 1 { "them" } else { "it" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> KafkaOptions {
        KafkaOptions {
            input_topic: "crawl.pages".into(),
            output_prefix: "nd.".into(),
            ..KafkaOptions::example(Stage::All)
        }
    }

    fn names(needs: &[Need]) -> Vec<(&str, Partitions)> {
        needs
            .iter()
            .map(|n| (n.name.as_str(), n.partitions))
            .collect()
    }

    #[test]
    fn the_all_in_one_needs_its_outputs_and_no_internal_topic() {
        let cfg = neardup_topology::Config::default();
        let needs = plan(&opts(), &cfg, false);
        assert_eq!(
            names(&needs),
            vec![
                ("crawl.pages", Partitions::Any),
                ("nd.signatures", Partitions::Any),
                ("nd.pairs", Partitions::Any),
                ("nd.clusters", Partitions::Any),
                ("nd.mirrors", Partitions::Any),
                ("nd.recrawl", Partitions::Any),
                ("nd.dead-letter", Partitions::Any),
            ]
        );
        let cfg = neardup_topology::Config {
            collections: true,
            mirrors: false,
            ..Default::default()
        };
        let kinds = stage_outputs(Stage::All, &cfg);
        assert!(kinds.contains(&OutputKind::Collections));
        assert!(!kinds.contains(&OutputKind::Mirrors));
    }

    #[test]
    fn a_leased_deployment_needs_the_lease_topic_with_one_partition() {
        let cfg = neardup_topology::Config::default();
        let leased = KafkaOptions {
            lease: true,
            ..opts()
        };
        for split in [false, true] {
            let needs = plan(&leased, &cfg, split);
            let lease: Vec<_> = needs
                .iter()
                .filter(|n| n.name == "nd.internal.lease")
                .collect();
            assert_eq!(lease.len(), 1, "{split}");
            assert_eq!(lease[0].partitions, Partitions::Exactly(1));
            assert_eq!(lease[0].role, Role::Internal);
            assert!(!plan(&opts(), &cfg, split)
                .iter()
                .any(|n| n.name == "nd.internal.lease"));
        }
        // Each stage's lease is its own group's: GROUP.lease for the all-in-one,
        // GROUP.STAGE.lease for a split stage.
        assert_eq!(
            KafkaOptions::example(Stage::All).for_stage().lease_group(),
            "g.lease"
        );
        assert_eq!(
            KafkaOptions::example(Stage::Cluster)
                .for_stage()
                .lease_group(),
            "g.cluster.lease"
        );
        assert!(!KafkaOptions::example(Stage::Sign).leased());
        let leased = |stage| KafkaOptions {
            lease: true,
            ..KafkaOptions::example(stage)
        };
        assert!(!leased(Stage::Sign).leased());
        assert!(!leased(Stage::Shard).leased());
        for stage in [
            Stage::All,
            Stage::Index,
            Stage::Verify,
            Stage::Cluster,
            Stage::Mirror,
        ] {
            assert!(leased(stage).leased(), "{stage:?}");
        }
    }

    #[test]
    fn the_split_topology_adds_its_internal_topics_with_their_partitions() {
        let cfg = neardup_topology::Config {
            key_shards: 3,
            mirror_stage: true,
            ..Default::default()
        };
        let needs = plan(&opts(), &cfg, false);
        let internal: Vec<_> = needs
            .iter()
            .filter(|n| n.role == Role::Internal)
            .map(|n| (n.name.as_str(), n.partitions))
            .collect();
        assert_eq!(
            internal,
            vec![
                ("nd.internal.signed", Partitions::AsInput),
                ("nd.internal.steps", Partitions::Exactly(3)),
                ("nd.internal.answered", Partitions::Exactly(1)),
                ("nd.internal.indexed", Partitions::Exactly(1)),
                ("nd.internal.clustered", Partitions::Exactly(1)),
            ]
        );
        // --split alone: sign, index and cluster.
        let plain = neardup_topology::Config::default();
        let split = plan(&opts(), &plain, true);
        assert_eq!(split.iter().filter(|n| n.role == Role::Internal).count(), 2);
        // A stage other than `all` means a split deployment.
        let mut o = opts();
        o.stage = Stage::Cluster;
        assert_eq!(plan(&o, &plain, false).len(), split.len());
    }

    #[test]
    fn every_output_is_published_by_exactly_one_stage_of_the_split_topology() {
        for (key_shards, mirror_stage, collections) in [
            (0, false, false),
            (4, false, true),
            (0, true, true),
            (2, true, false),
        ] {
            let cfg = neardup_topology::Config {
                key_shards,
                mirror_stage,
                collections,
                ..Default::default()
            };
            let mut stages = vec![Stage::Sign, Stage::Index, Stage::Cluster];
            if key_shards > 0 {
                stages.extend([Stage::Shard, Stage::Verify]);
            }
            if mirror_stage {
                stages.push(Stage::Mirror);
            }
            let mut kinds: Vec<OutputKind> = stages
                .iter()
                .flat_map(|s| stage_outputs(*s, &cfg))
                .collect();
            kinds.sort_by_key(|k| OutputKind::ALL.iter().position(|a| a == k));
            let all = stage_outputs(Stage::All, &cfg);
            // The dead letters come from sign and index; every other kind from one stage.
            kinds.dedup();
            assert_eq!(kinds, all, "{key_shards} {mirror_stage} {collections}");
        }
    }

    #[test]
    fn a_topic_is_judged_by_its_partitions_and_its_record_limit() {
        let need = |partitions| Need {
            name: "t".into(),
            role: Role::Internal,
            partitions,
            purpose: String::new(),
        };
        let found = |partitions, max| Found {
            partitions,
            max_message_bytes: max,
        };
        let j = |n: &Need, f| judge(n, f, 4, 6, 1_000_000);
        assert_eq!(
            j(&need(Partitions::AsInput), found(0, None)),
            Verdict::Missing {
                create_with: Some(4)
            }
        );
        assert_eq!(
            j(&need(Partitions::Any), found(0, None)),
            Verdict::Missing {
                create_with: Some(6)
            }
        );
        assert_eq!(
            judge(&need(Partitions::AsInput), found(0, None), 0, 1, 1_000_000),
            Verdict::Missing { create_with: None }
        );
        assert_eq!(j(&need(Partitions::AsInput), found(4, None)), Verdict::Ok);
        assert!(matches!(
            j(&need(Partitions::AsInput), found(2, None)),
            Verdict::Wrong(w) if w.contains("as the input topic (4)")
        ));
        assert!(matches!(
            j(&need(Partitions::Exactly(1)), found(3, None)),
            Verdict::Wrong(w) if w.contains("exactly 1")
        ));
        assert!(matches!(
            j(&need(Partitions::Exactly(3)), found(2, None)),
            Verdict::Wrong(w) if w.contains("--key-shards 2")
        ));
        assert!(matches!(
            j(&need(Partitions::Any), found(1, Some(65_536))),
            Verdict::Wrong(w) if w.contains("max.message.bytes") && w.contains("to 1048588")
        ));
        assert_eq!(
            j(&need(Partitions::Any), found(1, Some(1_048_588))),
            Verdict::Ok
        );
        let input = Need {
            role: Role::Input,
            ..need(Partitions::Any)
        };
        assert_eq!(
            j(&input, found(0, None)),
            Verdict::Missing { create_with: None }
        );
        // The input's record limit is the crawler's business.
        assert_eq!(j(&input, found(2, Some(10))), Verdict::Ok);
    }

    #[test]
    fn created_topics_take_records_as_large_as_any_output() {
        assert_eq!(max_message_bytes_for(1_000_000), 1_048_588);
        assert_eq!(max_message_bytes_for(4 << 20), (4 << 20) + 4096);
    }
}
