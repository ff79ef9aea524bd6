//! Command-line interface. Every flag can also be set by a `NEARDUP_*` environment variable.

use crate::duration::{parse_duration, parse_size};
use clap::{ArgGroup, Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// neardup: near-duplicate and mirror detection on a crawl's event stream.
#[derive(Debug, Parser)]
#[command(name = "neardup", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "NEARDUP_LOG_JSON")]
    pub log_json: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume page events from Kafka and publish neardup's events (at-least-once).
    Run(RunArgs),
    /// Run the topology over JSONL or WARC files (plain, gzip or zstd) or a Kafka topic range,
    /// writing one JSONL file per output topic and a report.
    Replay(ReplayArgs),
    /// Check the topics a deployment of this configuration reads and writes (the input, the
    /// outputs, and the split stages' internal topics with the partitions each needs) and, with
    /// `--create`, create the missing ones. Takes `neardup run`'s flags, variables and file.
    Topics(TopicsArgs),
    /// Run the whole topology on an embedded Kafka cluster with a built-in sample crawl.
    Demo(DemoArgs),
    /// Score pair events (`pairs.jsonl`) against the benchmark's truth.json or labelled pairs.
    Eval(EvalArgs),
}

/// Parameters of the topology (DESIGN.md §4).
#[derive(Debug, Clone, Args)]
pub struct TopologyArgs {
    /// How long a fetch stays in the window, in event time (`fetched_at`); longer than the crawl cycle.
    #[arg(long, default_value = "14d", value_parser = parse_duration, env = "NEARDUP_WINDOW")]
    pub window: Duration,
    /// How far the watermark may lag the newest event time while it waits for the slowest
    /// input partition; an idle partition delays eviction by at most this much.
    #[arg(long, default_value = "1d", value_parser = parse_duration, env = "NEARDUP_MAX_PARTITION_SKEW")]
    pub max_partition_skew: Duration,
    /// A record dated more than this ahead of the newest event time so far is a leap: it is
    /// processed, but its date moves the windows only when 16 records of its partition in a row
    /// lead as far (a crawl resuming after a pause), so that one record with a wrong date (a
    /// fetcher's clock years off) cannot empty the window. Default: the window's length.
    #[arg(long, value_parser = parse_duration, env = "NEARDUP_MAX_EVENT_TIME_LEAD")]
    pub max_event_time_lead: Option<Duration>,
    /// Largest accepted page body in bytes; larger records go to the dead-letter topic.
    /// Accepts a unit: `5MiB`, `512KiB`, `2MB`.
    #[arg(long, default_value = "5MiB", value_parser = parse_size, env = "NEARDUP_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// Largest output record (key and value) in bytes: a larger one goes to the dead-letter
    /// topic as `output_too_large` instead, so it cannot stop a run (a signature event's lists
    /// are capped, and URLs over 8 KiB refused, to keep every output of a page under 512 KiB).
    /// `neardup run`'s producer takes it as its `message.max.bytes` (a smaller
    /// `-X message.max.bytes` is refused); keep it at most the output topics'
    /// `max.message.bytes`. At least 512KiB (a dead letter's size).
    #[arg(long, default_value = "1000000", value_parser = parse_size, env = "NEARDUP_MAX_OUTPUT_BYTES")]
    pub max_output_bytes: usize,
    /// Memory for the signatures of recent fetches, by URL: a page fetched again with the same
    /// body takes them from here instead of being signed again (the outputs are the same).
    /// To help, it must hold the URLs fetched over a crawl cycle (about 3.2 KB each on the
    /// bench's medium crawl); 0 turns it off. Accepts a unit: `256MiB`, `1GiB`.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, env = "NEARDUP_SIGN_CACHE")]
    pub sign_cache: usize,
    /// A page joining an exact-duplicate group that already has this many members gets no pair events.
    #[arg(long, default_value_t = 1000, env = "NEARDUP_MAX_PAIRS_PER_JOIN")]
    pub max_pairs_per_join: usize,
    /// Split stages: the number of key shards the index stage splits its key tables over
    /// (`--stage shard`, one per partition of PREFIX + `internal.steps`, and `--stage verify`);
    /// 0 keeps them in the index stage. Every stage must be given the same number; the pairs
    /// are the same for any.
    #[arg(long, default_value_t = 0, env = "NEARDUP_KEY_SHARDS")]
    pub key_shards: usize,
    /// Split stages: mirrors and collections run in `--stage mirror`, fed by the cluster stage
    /// through PREFIX + `internal.clustered` (one partition), instead of in the cluster stage.
    /// Give it to every stage; the outputs are the same either way.
    #[arg(long, env = "NEARDUP_MIRROR_STAGE")]
    pub mirror_stage: bool,
    /// Alg. B shingling profile: `henzinger` (k = 8, no wrap-around) or `fmn` (k = 5, wrap-around).
    #[arg(long, default_value = "henzinger", value_parser = parse_profile, env = "NEARDUP_SHINGLE_PROFILE")]
    pub shingle_profile: neardup_topology::sketch::minhash::Profile,
    /// Terms of a page beyond this many are ignored (bounds the work on pathological pages).
    #[arg(long, default_value_t = 1_000_000, env = "NEARDUP_MAX_TERMS")]
    pub max_terms: usize,
    /// Also publish the 84 min-values in signature events (large: 1.4 KB of hex per page).
    #[arg(long, env = "NEARDUP_EMIT_MINVALUES")]
    pub emit_minvalues: bool,
    /// Pair policy: `neardup` (default: discounted Jaccard with per-site boilerplate
    /// discounting), `b` (Alg. B, >= 2 of 6 supershingles), `c` (Alg. C, >= 372 of 384 bits) or
    /// `combined` (Henzinger: B-similar and C >= 355).
    #[arg(long, default_value = "neardup", value_parser = parse_policy, env = "NEARDUP_POLICY")]
    pub policy: neardup_topology::near::Policy,
    /// At most this many pages in the sketch window; beyond it the oldest fetch is evicted, and
    /// leaves the exact-duplicate groups, the change history and the in-link counts as well.
    #[arg(long, default_value_t = 4_000_000, env = "NEARDUP_MAX_WINDOW_PAGES")]
    pub max_window_pages: usize,
    /// Default policy: minimum Jaccard, estimated on the positions that are not site
    /// boilerplate, for pages whose URLs end in the same name (mirrors, aliases, session ids).
    #[arg(long, default_value_t = 0.7, env = "NEARDUP_MIN_JACCARD")]
    pub min_jaccard: f64,
    /// Also compute Cho's replicated collections (`neardup.collections`; see the README).
    #[arg(long, env = "NEARDUP_COLLECTIONS")]
    pub collections: bool,
    /// Seed 002's Hyperlink Map as a veto in the pair policy: when an epoch closes (a crawl
    /// round ends, or a day of event time), `very_similar` pairs whose HM signatures are this
    /// far apart or more (L∞, in (0, 1]) are retracted. 0 (the default) turns it off; it lowers
    /// recall on the benchmark (see the README).
    #[arg(long, default_value_t = 0.0, env = "NEARDUP_HM_VETO")]
    pub hm_veto: f64,
    /// Find mirrored hosts, aliases and auto-mirrors (`neardup.mirrors`); `--mirrors false`
    /// turns the stage off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "NEARDUP_MIRRORS")]
    pub mirrors: bool,
    /// Default policy: the same minimum for pages whose URLs end in different names.
    #[arg(long, default_value_t = 0.9, env = "NEARDUP_MIN_JACCARD_RENAMED")]
    pub min_jaccard_renamed: f64,
    /// Default policy: the same minimum for pages of one site whose URLs end in different names
    /// (a site's own pages share its template and often its subject).
    #[arg(
        long,
        default_value_t = 0.98,
        env = "NEARDUP_MIN_JACCARD_RENAMED_ON_SITE"
    )]
    pub min_jaccard_renamed_on_site: f64,
    /// Default policy: the same minimum for pages whose titles differ and whose URLs end in
    /// different names or are on one site (the URL and the title both say they are different
    /// documents); the threshold of their names alone still applies if it is higher.
    #[arg(long, default_value_t = 0.98, env = "NEARDUP_MIN_JACCARD_RETITLED")]
    pub min_jaccard_retitled: f64,
    /// Default policy: compare pages' titles (`--min-jaccard-retitled`); `--titles false` judges
    /// pages by their URLs alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "NEARDUP_TITLES")]
    pub titles: bool,
    /// The canonical member of a cluster: criteria in order of precedence, from `earliest` (entered
    /// the cluster first), `https`, `shorter` (URL), `inlinks` (more pages in the window link to
    /// it; keeps every windowed page's out-links); arrival order breaks any tie left.
    #[arg(
        long,
        default_value = "earliest,https,shorter",
        env = "NEARDUP_CANONICAL"
    )]
    pub canonical: neardup_topology::clusters::CanonicalPolicy,
    /// The cluster level the `neardup.recrawl` hints follow: `very_similar` (every near-duplicate
    /// cluster) or `virtually_identical` (only clusters of pages that agree in 6 of 6
    /// supershingles, or are byte-identical).
    #[arg(long, default_value = "very_similar", value_parser = parse_hint_level, env = "NEARDUP_HINT_LEVEL")]
    pub hint_level: neardup_schemas::PairLevel,
}

pub(crate) fn parse_hint_level(s: &str) -> Result<neardup_schemas::PairLevel, String> {
    use neardup_schemas::PairLevel;
    match s {
        "very_similar" => Ok(PairLevel::VerySimilar),
        "virtually_identical" => Ok(PairLevel::VirtuallyIdentical),
        other => Err(format!(
            "unknown hint level {other:?}; use very_similar or virtually_identical"
        )),
    }
}

pub(crate) fn parse_policy(s: &str) -> Result<neardup_topology::near::Policy, String> {
    neardup_topology::near::Policy::parse(s)
        .ok_or_else(|| format!("unknown pair policy {s:?}; use neardup, b, c or combined"))
}

/// The configuration name of a shingling profile.
pub fn profile_name(p: neardup_topology::sketch::minhash::Profile) -> &'static str {
    use neardup_topology::sketch::minhash::Profile;
    if p == Profile::FMN {
        "fmn"
    } else {
        "henzinger"
    }
}

pub(crate) fn parse_profile(s: &str) -> Result<neardup_topology::sketch::minhash::Profile, String> {
    use neardup_topology::sketch::minhash::Profile;
    match s {
        "henzinger" => Ok(Profile::HENZINGER),
        "fmn" => Ok(Profile::FMN),
        other => Err(format!(
            "unknown shingle profile {other:?}; use henzinger or fmn"
        )),
    }
}

impl TopologyArgs {
    /// The topology configuration these flags describe.
    pub fn config(&self) -> neardup_topology::Config {
        let defaults = neardup_topology::Config::default();
        neardup_topology::Config {
            window_ms: i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX),
            max_partition_skew_ms: i64::try_from(self.max_partition_skew.as_millis())
                .unwrap_or(i64::MAX),
            max_event_time_lead_ms: self
                .max_event_time_lead
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            decode: neardup_topology::DecodeLimits {
                max_body_bytes: self.max_body_bytes,
                ..defaults.decode
            },
            max_pairs_per_join: self.max_pairs_per_join,
            key_shards: self.key_shards,
            max_output_bytes: self.max_output_bytes,
            mirror_stage: self.mirror_stage,
            signer: neardup_topology::signer::SignerConfig {
                profile: self.shingle_profile,
                max_terms: self.max_terms.max(1),
                ..defaults.signer
            },
            emit_minvalues: self.emit_minvalues,
            near: neardup_topology::near::NearConfig {
                policy: self.policy,
                max_pages: self.max_window_pages.max(1),
                min_jaccard: self.min_jaccard,
                min_jaccard_renamed: self.min_jaccard_renamed,
                min_jaccard_renamed_on_site: self.min_jaccard_renamed_on_site,
                min_jaccard_retitled: self.min_jaccard_retitled,
                titles: self.titles,
                ..defaults.near
            },
            // Replays turn it on; a long-running service does not keep every round's URLs.
            track_evolution: false,
            collections: self.collections,
            hm_veto: (self.hm_veto > 0.0)
                .then(|| neardup_topology::replicas::HmVeto::new(self.hm_veto as f32)),
            mirrors: self.mirrors,
            canonical: self.canonical.clone(),
            hint_level: self.hint_level,
        }
    }
}

/// The part of the topology one `neardup run` process runs (DESIGN.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// Every stage in one process.
    All,
    /// Decode and sign pages (stateless): input topic -> PREFIX + `internal.signed` (as many
    /// partitions as the input; each page to the partition of its input partition's number;
    /// dead letters go straight to their topic). Scales with the input partitions.
    Sign,
    /// The sliding-window sketch index and pair verification, reading PREFIX + `internal.signed`
    /// with the consumer group GROUP + `.index`: publishes the signatures and pairs, and one
    /// record per page to PREFIX + `internal.indexed` for the cluster stage. With
    /// `--key-shards N`, it keeps only the window and publishes the signatures; each page's
    /// steps go to partition 0 of PREFIX + `internal.steps` (N partitions), through the shard
    /// stages to the verify stage.
    Index,
    /// With `--key-shards N`: key shard i of the index stage for each partition i of
    /// PREFIX + `internal.steps` it is assigned (consumer group GROUP + `.shard`; up to N
    /// instances): answers each filing from its part of the key tables and passes the record to
    /// partition i + 1, or, from the last shard, to PREFIX + `internal.answered`.
    Shard,
    /// With `--key-shards N`: the pair verification of an index stage split by key, reading
    /// PREFIX + `internal.answered` (consumer group GROUP + `.verify`): publishes the pairs, and
    /// one record per page to PREFIX + `internal.indexed` for the cluster stage.
    Verify,
    /// Everything downstream of the pairs: exact groups, near-duplicate clusters, crawl hints,
    /// mirrors and collections, reading PREFIX + `internal.indexed` with the consumer group
    /// GROUP + `.cluster`. With `--mirror-stage`, mirrors and collections are left to the
    /// mirror stage, and each page's record goes on to PREFIX + `internal.clustered`.
    Cluster,
    /// With `--mirror-stage`: mirror host pairs and replicated collections, reading
    /// PREFIX + `internal.clustered` (consumer group GROUP + `.mirror`).
    Mirror,
}

impl Stage {
    /// The stage's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Stage::All => "all",
            Stage::Sign => "sign",
            Stage::Index => "index",
            Stage::Shard => "shard",
            Stage::Verify => "verify",
            Stage::Cluster => "cluster",
            Stage::Mirror => "mirror",
        }
    }

    /// True for the stages whose state joins pages of every partition of their input (all but
    /// sign, which is stateless, and shard, one key shard per partition): one instance per
    /// group, or with `--lease` one active and the others standing by.
    pub fn spans_partitions(self) -> bool {
        !matches!(self, Stage::Sign | Stage::Shard)
    }

    /// True for the stages that hold the clusters (and answer `/clusters`).
    pub fn holds_clusters(self) -> bool {
        matches!(self, Stage::All | Stage::Cluster)
    }

    /// The part of the topology the stage holds state for (`None`: stateless).
    pub fn role(self) -> Option<neardup_topology::Role> {
        use neardup_topology::Role;
        match self {
            Stage::All => Some(Role::All),
            Stage::Index => Some(Role::Index),
            Stage::Shard => Some(Role::Shard),
            Stage::Verify => Some(Role::Verify),
            Stage::Cluster => Some(Role::Cluster),
            Stage::Mirror => Some(Role::Mirror),
            Stage::Sign => None,
        }
    }
}

/// `neardup run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A TOML configuration file (keys: the flags' names; see consumer/neardup.example.toml).
    /// Flags and NEARDUP_* variables override it.
    #[arg(long, env = "NEARDUP_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate the configuration (file, variables, flags, librdkafka properties), print it as
    /// TOML with secrets redacted, and exit without connecting.
    #[arg(long)]
    pub check_config: bool,
    /// Which part of the topology this process runs: `all` (every stage in one process, the
    /// default), or `sign`, `index` and `cluster`, the split stages connected by the internal
    /// topics PREFIX + `internal.signed` and PREFIX + `internal.indexed` (DESIGN.md §3); with
    /// `--key-shards N`, the index stage is split further into `index`, `shard` and `verify`,
    /// connected by PREFIX + `internal.steps` (N partitions) and PREFIX + `internal.answered`.
    /// With `--mirror-stage`, mirrors and collections run in `mirror`, after the cluster stage,
    /// connected by PREFIX + `internal.clustered`.
    #[arg(long, value_enum, default_value_t = Stage::All, env = "NEARDUP_STAGE")]
    pub stage: Stage,
    /// Kafka bootstrap servers (required: here, in NEARDUP_BROKERS or in the file).
    #[arg(long, env = "NEARDUP_BROKERS")]
    pub brokers: Option<String>,
    /// Consumer group id.
    #[arg(long, default_value = "neardup", env = "NEARDUP_GROUP")]
    pub group: String,
    /// Input topic of page events.
    #[arg(long, default_value = "crawl.pages", env = "NEARDUP_INPUT_TOPIC")]
    pub input_topic: String,
    /// Prefix of the output topics: PREFIX + signatures, pairs, clusters, mirrors, collections, recrawl, dead-letter.
    #[arg(long, default_value = "neardup.", env = "NEARDUP_OUTPUT_PREFIX")]
    pub output_prefix: String,
    /// A librdkafka property for both consumer and producer, e.g. `-X security.protocol=SASL_SSL` (repeatable).
    #[arg(short = 'X', long = "kafka", value_parser = parse_kv, env = "NEARDUP_KAFKA", value_delimiter = ',')]
    pub kafka: Vec<(String, String)>,
    /// Stop when every assigned partition has been read to its end (for batch jobs and tests).
    /// A shard stage stops when its partitions are at their end at that moment, even if the
    /// shard before it will pass it more: run shard stages until SIGTERM.
    #[arg(long, env = "NEARDUP_EXIT_AT_END")]
    pub exit_at_end: bool,
    /// Read every partition of the input topic, assigned at start, without joining the consumer
    /// group (whose committed offsets it still starts from and commits): a replay or batch job
    /// that runs alone starts reading at once instead of after the group's join (Apache Kafka
    /// holds a new group's first assignment for `group.initial.rebalance.delay.ms`, 3 s by
    /// default; tansu for half the session timeout). With `--exit-at-end` and the all-in-one
    /// stage only, and while no other instance uses the group: nothing splits the partitions,
    /// and Kafka refuses the commits of a consumer outside a group that has members.
    #[arg(long, env = "NEARDUP_ASSIGN")]
    pub assign: bool,
    /// Run a stage whose state spans every partition of its input (all, index, verify, cluster,
    /// mirror) in one instance of the group at a time: the one holding the lease, a partition of
    /// PREFIX + `internal.lease` (one partition, written only with the holder's URL under
    /// `--http-advertise`) in the group GROUP + `.lease`.
    /// Other instances stand by and take over, state restored, when it stops or dies: run two
    /// replicas of such a stage for a quick failover. Off: every instance reads the partitions
    /// the group gives it (sign and shard split the partitions either way).
    #[arg(long, env = "NEARDUP_LEASE")]
    pub lease: bool,
    /// Run every stage of the split topology in this process, each on threads of its own, so
    /// that instances of one deployment share the work: `sign` splits the input's partitions
    /// with the other instances of the group; `index` (with `--key-shards`, also `verify`, and
    /// `shard`, which splits its partitions), `cluster` (and `mirror` with `--mirror-stage`) run
    /// under the lease (`--lease` implied), each in whichever instance holds its own. The
    /// internal topics must exist (`neardup topics --create --scale-out`); with
    /// `--checkpoint-dir DIR`, each stage keeps its checkpoints in DIR/STAGE. Not with `--stage`.
    #[arg(long, env = "NEARDUP_SCALE_OUT", conflicts_with = "stage")]
    pub scale_out: bool,
    /// Serve the cluster map (`GET /clusters?url=URL`) and `/healthz` over HTTP on this address,
    /// e.g. `0.0.0.0:9090` (off unless given).
    #[arg(long, env = "NEARDUP_HTTP_LISTEN")]
    pub http_listen: Option<String>,
    /// The URL at which the other instances reach this one's HTTP endpoints, e.g.
    /// `http://10.0.3.7:9090` (in Kubernetes, the pod's IP: the chart sets it). With `--lease`
    /// (or `--scale-out`), the instance holding the lease of the stage that holds the clusters
    /// publishes it (a record keyed by the lease's group on the lease topic), and an instance
    /// standing by forwards a `/clusters` question to it, so a Service in front of every
    /// instance answers from any of them. Off unless given: a standby then
    /// answers `/clusters` with 503. An IPv6 address goes in brackets, or without them when the
    /// port follows (`http://fd00::7:9090`, as `http://$(POD_IP):9090` gives it).
    #[arg(long, env = "NEARDUP_HTTP_ADVERTISE", value_name = "URL")]
    pub http_advertise: Option<String>,
    /// How often acknowledged offsets are committed.
    #[arg(long, default_value = "1s", value_parser = parse_duration, env = "NEARDUP_COMMIT_INTERVAL")]
    pub commit_interval: Duration,
    /// Input records whose outputs may await acknowledgement at once (back-pressure bound).
    #[arg(long, default_value_t = 10_000, env = "NEARDUP_MAX_IN_FLIGHT")]
    pub max_in_flight: usize,
    /// Keep checkpoints of the state (windows, clusters, host-pair evidence) with the input
    /// offsets they reflect in this directory (a volume that outlives the process), so a restart
    /// re-reads only the records after the last checkpoint. Off unless given: a restart then
    /// re-reads each partition from its earliest record.
    #[arg(long, env = "NEARDUP_CHECKPOINT_DIR", value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// How often a checkpoint is written (with --checkpoint-dir; also at shutdown). Input pauses
    /// while the outputs in flight are acknowledged and the state is written.
    #[arg(long, default_value = "5m", value_parser = parse_duration, env = "NEARDUP_CHECKPOINT_INTERVAL")]
    pub checkpoint_interval: Duration,
    /// How long shutdown may wait for in-flight outputs before it gives up (without committing
    /// them). Also bounds the flush of a partition's outputs when it is handed over in a
    /// rebalance (the confirmation of its commit then waits at most 5 s, or this if shorter).
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "NEARDUP_DRAIN_TIMEOUT")]
    pub drain_timeout: Duration,
    /// Records of several input partitions are applied in event-time order: a record waits
    /// until every assigned partition that may have more data has a record to compare with, at
    /// most this long. 0 applies records in the order they arrive.
    #[arg(long, default_value = "1s", value_parser = parse_duration, env = "NEARDUP_PARTITION_WAIT")]
    pub partition_wait: Duration,
    /// The index stage of a split topology waits this long at most for a partition of its input
    /// that the sign stage has not yet signed to the end (an instance that starts later or
    /// restarts), so that records go in event-time order whichever sign instance runs ahead.
    /// 0 waits only as --partition-wait says.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "NEARDUP_UPSTREAM_WAIT")]
    pub upstream_wait: Duration,
    /// Stop (without committing) when more than this share of the last `dead_letter_window`
    /// records went to the dead-letter topic: a broken deployment must not drain the input into
    /// the dead letters. 1 disables the guard.
    #[arg(long, default_value_t = 0.5, env = "NEARDUP_MAX_DEAD_LETTER_RATIO")]
    pub max_dead_letter_ratio: f64,
    /// Records the dead-letter ratio is measured over.
    #[arg(long, default_value_t = 1000, env = "NEARDUP_DEAD_LETTER_WINDOW")]
    pub dead_letter_window: usize,
    /// Topology parameters.
    #[command(flatten)]
    pub topology: TopologyArgs,
}

/// `neardup replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// A TOML configuration file: its `[topology]` applies (see `neardup run --config`).
    #[arg(long, env = "NEARDUP_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Input files: JSON lines of page events, or WARC archives (their `response` and
    /// `resource` records, and their `revisit` records as the fetches they stand for), either
    /// optionally gzip- or zstd-compressed (`.warc.zst` with its dictionary too); told apart by
    /// their first bytes. `-` is the standard input; pipes (`<(curl ...)`) read as files do.
    #[arg(long, num_args = 1.., required_unless_present = "topic", conflicts_with = "topic")]
    pub input: Vec<PathBuf>,
    /// Replay a Kafka topic instead of files (needs --brokers).
    #[arg(long, requires = "brokers")]
    pub topic: Option<String>,
    /// Kafka bootstrap servers, with --topic.
    #[arg(long)]
    pub brokers: Option<String>,
    /// With --topic: the first record, an offset (in every partition) or an RFC 3339 time
    /// (each partition's first record at or after it). Default: the earliest retained.
    #[arg(long, requires = "topic", value_parser = crate::kafka_range::parse_bound)]
    pub from: Option<crate::kafka_range::Bound>,
    /// With --topic: where the range ends (exclusive), an offset or a time. Default: the end of
    /// each partition when the replay starts.
    #[arg(long, requires = "topic", value_parser = crate::kafka_range::parse_bound)]
    pub to: Option<crate::kafka_range::Bound>,
    /// With --topic: a librdkafka property, e.g. `-X security.protocol=SASL_SSL` (repeatable).
    #[arg(short = 'X', long = "kafka", value_parser = parse_kv)]
    pub kafka: Vec<(String, String)>,
    /// Output directory: one `<kind>.jsonl` per output topic.
    #[arg(long)]
    pub out: PathBuf,
    /// WARC inputs: memory for the `response` records read (as archived), so that a `revisit`
    /// record of another URL's capture (an archive deduplicated across URLs) replays as a fetch
    /// of that capture's body; a revisit whose capture is no longer held is skipped and
    /// counted. The least recently used go first; 0 keeps none. Accepts a unit: `256MiB`,
    /// `1GiB`.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, env = "NEARDUP_REVISIT_CACHE")]
    pub revisit_cache: usize,
    /// Skip the figures by crawl round (`evolution.json`, the report's charts by round and the
    /// summary's near-duplicate share by round; `evolution.json` then lists no round). To make
    /// them, the replay holds every URL of the round it reads and of the round before, with
    /// the pages' out-links (hashed) and paragraph fingerprints, beside the window: about 3 KB
    /// per URL of a round on the benchmark's medium crawl (its replay peaks at 261-268 MB with
    /// them, 198 MB without). Skip them to replay rounds larger than that memory allows. The
    /// output topics' records are the same either way.
    #[arg(long, env = "NEARDUP_NO_ROUND_FIGURES")]
    pub no_round_figures: bool,
    /// Topology parameters.
    #[command(flatten)]
    pub topology: TopologyArgs,
}

impl ReplayArgs {
    /// The topology's configuration for this replay: its parameters, with the figures by
    /// crawl round unless `--no-round-figures`.
    pub fn config(&self) -> neardup_topology::Config {
        neardup_topology::Config {
            track_evolution: !self.no_round_figures,
            ..self.topology.config()
        }
    }
}

/// `neardup topics`.
#[derive(Debug, Clone, Args)]
pub struct TopicsArgs {
    /// Create the missing topics (the input topic excepted: it is the crawler's). Without it,
    /// only check; either way the exit status is 1 when a topic neardup writes is missing or
    /// cannot work as it is (wrong partitions, too small a `max.message.bytes`).
    #[arg(long)]
    pub create: bool,
    /// Include the internal topics of the split topology (sign, index, cluster; implied by
    /// `--stage` other than `all`, `--key-shards` and `--mirror-stage`).
    #[arg(long)]
    pub split: bool,
    /// Partitions of a created output topic. Default: the input topic's, else 1. (The internal
    /// topics get the partitions they need.)
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub partitions: Option<u16>,
    /// Replication factor of the topics created; -1: the broker's default
    /// (`default.replication.factor`).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-1..=32))]
    pub replication_factor: i32,
    /// The configuration, as `neardup run` takes it.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `neardup demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Pages per simulated host in the sample crawl.
    #[arg(long, default_value_t = 12)]
    pub pages_per_host: usize,
    /// Crawl rounds (weeks) in the sample crawl.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Also write every output event as JSONL into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `neardup eval`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("reference").required(true).args(["truth", "labels"])))]
pub struct EvalArgs {
    /// The benchmark's ground truth (`truth.json`, format `neardup-bench.truth/v1`).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// Labelled pairs instead of a truth: JSON lines `{"a": URL, "b": URL, "near_duplicate": bool}`.
    #[arg(long, value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// The pair events: a `pairs.jsonl` file (optionally gzip- or zstd-compressed) or a replay output
    /// directory. Give several (e.g. one replay per `--policy`) to compare them side by side.
    #[arg(long, value_name = "PATH", required = true, num_args = 1..)]
    pub pairs: Vec<PathBuf>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// The cluster level scored when `clusters.jsonl` lies beside the pairs file:
    /// `very_similar` or `virtually_identical`.
    #[arg(long, default_value = "very_similar", value_parser = ["very_similar", "virtually_identical"])]
    pub cluster_level: String,
    /// A name for each run, repeated in the output, in the order of --pairs (default: the
    /// --pairs path).
    #[arg(long, value_name = "NAME", num_args = 1..)]
    pub label: Vec<String>,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        format!("{s:?} is not key=value; write e.g. -X security.protocol=SASL_SSL")
    })?;
    Ok((k.trim().to_owned(), v.trim().to_owned()))
}
