//! The configuration file (`--config FILE` or `NEARDUP_CONFIG`), merged with the environment
//! and the command line.
//!
//! **Precedence**, highest first: a command-line flag, its `NEARDUP_*` environment variable, the
//! file, the built-in default. librdkafka properties merge the same way, key by key: `[kafka]` in
//! the file, then `NEARDUP_KAFKA_<NAME>` variables (`NEARDUP_KAFKA_SASL_PASSWORD` sets
//! `sasl.password`: lower-cased, `_` read as `.`; made for Kubernetes secrets), then
//! `NEARDUP_KAFKA=k=v,...` or `-X k=v`.
//!
//! **Keys** are the flags' names with `_` for `-`: the run keys at the top level, the topology's in
//! `[topology]`, librdkafka's in `[kafka]` (dotted keys, quoted or not: `security.protocol =
//! "SASL_SSL"` and `"security.protocol" = "SASL_SSL"` mean the same). Unknown keys are errors that
//! name the key and its line, so a typo cannot silently leave a default in place. Durations are
//! strings (`"500ms"`, `"45s"`, `"14d"`), sizes integers of bytes or strings (`"5MiB"`).
//! `consumer/neardup.example.toml` lists every key with its default; a test keeps it complete.
//!
//! `neardup run --check-config` validates everything (including the librdkafka properties, by
//! creating, not connecting, the clients) and prints the effective configuration as TOML with
//! secrets redacted.

use crate::cli::{profile_name, ReplayArgs, RunArgs, TopologyArgs};
use crate::duration::{format_duration, parse_duration, parse_size};
use anyhow::{bail, Context as _, Result};
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file's contents. Every key is optional: a missing key leaves the default.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Kafka bootstrap servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<String>,
    /// Consumer group id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Input topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_topic: Option<String>,
    /// Output topic prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_prefix: Option<String>,
    /// HTTP listen address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_listen: Option<String>,
    /// The URL other instances reach this one's HTTP endpoints at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_advertise: Option<String>,
    /// Commit interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_interval: Option<Dur>,
    /// Bound on inputs awaiting acknowledgement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<usize>,
    /// Bound on the shutdown drain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<Dur>,
    /// Bound on a record's wait for the other input partitions (event-time order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_wait: Option<Dur>,
    /// Bound on the index stage's wait for what the sign stage has yet to sign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_wait: Option<Dur>,
    /// Checkpoint directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoint interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval: Option<Dur>,
    /// Stop at the end of the assigned partitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_at_end: Option<bool>,
    /// Read every input partition without joining the group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assign: Option<bool>,
    /// One active instance per group of a stage whose state spans the partitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<bool>,
    /// Every stage of the split topology in this process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_out: Option<bool>,
    /// The dead-letter guard's ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dead_letter_ratio: Option<f64>,
    /// The dead-letter guard's window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_window: Option<usize>,
    /// Topology parameters.
    #[serde(default, skip_serializing_if = "TopologyFile::is_empty")]
    pub topology: TopologyFile,
    /// librdkafka properties (nested tables are flattened with `.`).
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub kafka: toml::Table,
}

/// `[topology]`.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is the flag of the same name (see `neardup run --help`).
pub struct TopologyFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Dur>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_partition_skew: Option<Dur>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_event_time_lead: Option<Dur>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pairs_per_join: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sign_cache: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_shards: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_stage: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shingle_profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_terms: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emit_minvalues: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_window_pages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_jaccard: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_jaccard_renamed: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_jaccard_renamed_on_site: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_jaccard_retitled: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub titles: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collections: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hm_veto: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint_level: Option<String>,
}

impl TopologyFile {
    fn is_empty(&self) -> bool {
        *self == TopologyFile::default()
    }
}

/// A duration written as a string (`"45s"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d).map_err(|_| {
            serde::de::Error::custom("a duration is a string such as \"500ms\", \"45s\" or \"14d\"")
        })?;
        parse_duration(&s)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(self.0))
    }
}

/// A size in bytes: an integer, or a string with a unit (`"5MiB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub usize);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("a size is an integer of bytes or a string such as \"5MiB\"")
        })? {
            Raw::N(n) => usize::try_from(n)
                .map(Size)
                .map_err(|_| serde::de::Error::custom("size too large")),
            Raw::S(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0 as u64)
    }
}

/// Reads and parses a configuration file; errors name the file, the key and the line.
pub fn load(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
    parse(&text).with_context(|| format!("in the configuration file {}", path.display()))
}

/// Parses configuration text.
pub fn parse(text: &str) -> Result<FileConfig> {
    let cfg: FileConfig = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Check the [kafka] values now, so a bad one is reported with the file.
    flatten_kafka(&cfg.kafka)?;
    Ok(cfg)
}

/// `[kafka]` as librdkafka `key=value` pairs: nested tables joined with `.`, scalars as text.
pub fn flatten_kafka(t: &toml::Table) -> Result<Vec<(String, String)>> {
    fn walk(prefix: &str, t: &toml::Table, out: &mut Vec<(String, String)>) -> Result<()> {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Table(inner) => {
                    walk(&key, inner, out)?;
                    continue;
                }
                other => bail!(
                    "kafka.{key} = {other}: a librdkafka property is a string, number or boolean"
                ),
            };
            out.push((key, text));
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk("", t, &mut out)?;
    Ok(out)
}

/// librdkafka properties from `NEARDUP_KAFKA_<NAME>` variables, sorted by name.
pub fn kafka_from_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vars
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("NEARDUP_KAFKA_")?;
            (!name.is_empty()).then(|| (name.to_ascii_lowercase().replace('_', "."), v))
        })
        .collect();
    out.sort();
    out
}

/// The value of librdkafka property `key` among `kafka` as the client takes it: the last one
/// given (none: librdkafka's or neardup's default).
pub fn kafka_value<'a>(kafka: &'a [(String, String)], key: &str) -> Option<&'a str> {
    let (_, v) = kafka.iter().rev().find(|(k, _)| k == key)?;
    Some(v)
}

/// Whether the value of argument `id` came from its built-in default (so the file may set it).
fn defaulted(m: &ArgMatches, id: &str) -> bool {
    matches!(m.value_source(id), None | Some(ValueSource::DefaultValue))
}

/// Sets `$dst` from the file's `$src` when the flag and its variable were not given; string
/// values go through the flag's own parser, so the file accepts exactly what the flag accepts.
macro_rules! overlay {
    ($m:expr, $dst:expr, $src:expr, $id:literal) => {
        if let Some(v) = $src.clone() {
            if defaulted($m, $id) {
                $dst = v.into();
            }
        }
    };
    ($m:expr, $dst:expr, $src:expr, $id:literal, $parse:expr) => {
        if let Some(v) = &$src {
            if defaulted($m, $id) {
                $dst = $parse(v).map_err(|e| anyhow::anyhow!("{}: {e}", $id))?;
            }
        }
    };
}

impl From<Dur> for Duration {
    fn from(d: Dur) -> Duration {
        d.0
    }
}

impl From<Dur> for Option<Duration> {
    fn from(d: Dur) -> Option<Duration> {
        Some(d.0)
    }
}

impl From<Size> for usize {
    fn from(s: Size) -> usize {
        s.0
    }
}

/// Applies the file's `[topology]` under the flags and variables given.
pub fn apply_topology(a: &mut TopologyArgs, m: &ArgMatches, f: &TopologyFile) -> Result<()> {
    use crate::cli::{parse_hint_level, parse_policy, parse_profile};
    let in_topology = |e: anyhow::Error| e.context("in [topology]");
    (|| -> Result<()> {
        overlay!(m, a.window, f.window, "window");
        overlay!(
            m,
            a.max_partition_skew,
            f.max_partition_skew,
            "max_partition_skew"
        );
        overlay!(
            m,
            a.max_event_time_lead,
            f.max_event_time_lead,
            "max_event_time_lead"
        );
        overlay!(m, a.max_body_bytes, f.max_body_bytes, "max_body_bytes");
        overlay!(
            m,
            a.max_output_bytes,
            f.max_output_bytes,
            "max_output_bytes"
        );
        overlay!(m, a.sign_cache, f.sign_cache, "sign_cache");
        overlay!(
            m,
            a.max_pairs_per_join,
            f.max_pairs_per_join,
            "max_pairs_per_join"
        );
        overlay!(m, a.key_shards, f.key_shards, "key_shards");
        overlay!(m, a.mirror_stage, f.mirror_stage, "mirror_stage");
        overlay!(
            m,
            a.shingle_profile,
            f.shingle_profile,
            "shingle_profile",
            |v: &String| parse_profile(v)
        );
        overlay!(m, a.max_terms, f.max_terms, "max_terms");
        overlay!(m, a.emit_minvalues, f.emit_minvalues, "emit_minvalues");
        overlay!(m, a.policy, f.policy, "policy", |v: &String| parse_policy(
            v
        ));
        overlay!(
            m,
            a.max_window_pages,
            f.max_window_pages,
            "max_window_pages"
        );
        overlay!(m, a.min_jaccard, f.min_jaccard, "min_jaccard");
        overlay!(
            m,
            a.min_jaccard_renamed,
            f.min_jaccard_renamed,
            "min_jaccard_renamed"
        );
        overlay!(
            m,
            a.min_jaccard_renamed_on_site,
            f.min_jaccard_renamed_on_site,
            "min_jaccard_renamed_on_site"
        );
        overlay!(
            m,
            a.min_jaccard_retitled,
            f.min_jaccard_retitled,
            "min_jaccard_retitled"
        );
        overlay!(m, a.titles, f.titles, "titles");
        overlay!(m, a.collections, f.collections, "collections");
        overlay!(m, a.hm_veto, f.hm_veto, "hm_veto");
        overlay!(m, a.mirrors, f.mirrors, "mirrors");
        overlay!(m, a.canonical, f.canonical, "canonical", |v: &String| {
            v.parse::<neardup_topology::clusters::CanonicalPolicy>()
        });
        overlay!(m, a.hint_level, f.hint_level, "hint_level", |v: &String| {
            parse_hint_level(v)
        });
        Ok(())
    })()
    .map_err(in_topology)
}

/// Applies the file, then the `NEARDUP_KAFKA_*` variables, under the flags and variables given.
pub fn apply_run(
    a: &mut RunArgs,
    m: &ArgMatches,
    f: &FileConfig,
    env: Vec<(String, String)>,
) -> Result<()> {
    if a.brokers.is_none() {
        a.brokers = f.brokers.clone();
    }
    overlay!(m, a.group, f.group, "group");
    overlay!(m, a.input_topic, f.input_topic, "input_topic");
    overlay!(m, a.output_prefix, f.output_prefix, "output_prefix");
    if a.http_listen.is_none() {
        a.http_listen = f.http_listen.clone();
    }
    if a.http_advertise.is_none() {
        a.http_advertise = f.http_advertise.clone();
    }
    overlay!(m, a.commit_interval, f.commit_interval, "commit_interval");
    overlay!(m, a.max_in_flight, f.max_in_flight, "max_in_flight");
    overlay!(m, a.drain_timeout, f.drain_timeout, "drain_timeout");
    overlay!(m, a.partition_wait, f.partition_wait, "partition_wait");
    overlay!(m, a.upstream_wait, f.upstream_wait, "upstream_wait");
    if a.checkpoint_dir.is_none() {
        a.checkpoint_dir = f.checkpoint_dir.clone();
    }
    overlay!(
        m,
        a.checkpoint_interval,
        f.checkpoint_interval,
        "checkpoint_interval"
    );
    overlay!(m, a.exit_at_end, f.exit_at_end, "exit_at_end");
    overlay!(m, a.assign, f.assign, "assign");
    overlay!(m, a.lease, f.lease, "lease");
    overlay!(m, a.scale_out, f.scale_out, "scale_out");
    overlay!(
        m,
        a.max_dead_letter_ratio,
        f.max_dead_letter_ratio,
        "max_dead_letter_ratio"
    );
    overlay!(
        m,
        a.dead_letter_window,
        f.dead_letter_window,
        "dead_letter_window"
    );
    apply_topology(&mut a.topology, m, &f.topology)?;
    // Properties: file < NEARDUP_KAFKA_* < -X / NEARDUP_KAFKA; later entries win in a ClientConfig.
    let mut kafka = flatten_kafka(&f.kafka)?;
    kafka.extend(env);
    kafka.append(&mut a.kafka);
    a.kafka = kafka;
    Ok(())
}

/// The `run` arguments with the file (`--config`) and the `NEARDUP_KAFKA_*` variables applied,
/// validated. `m` is the `run` subcommand's matches (which tell the flags given from the defaults).
pub fn resolve_run(a: &mut RunArgs, m: &ArgMatches) -> Result<()> {
    let file = match &a.config {
        Some(p) => load(p)?,
        None => FileConfig::default(),
    };
    apply_run(a, m, &file, kafka_from_env(utf8_vars()))?;
    validate_run(a)
}

/// The `replay` arguments with the file's `[topology]` applied, validated.
pub fn resolve_replay(a: &mut ReplayArgs, m: &ArgMatches) -> Result<()> {
    if let Some(p) = &a.config {
        apply_topology(&mut a.topology, m, &load(p)?.topology)?;
    }
    validate_topology(&a.topology)
}

fn utf8_vars() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}

/// Start-up checks, with errors that name the setting (flag / variable / file key).
pub fn validate_topology(a: &TopologyArgs) -> Result<()> {
    let name = |key: &str| {
        format!(
            "--{} / NEARDUP_{} / topology.{key}",
            key.replace('_', "-"),
            key.to_ascii_uppercase()
        )
    };
    if a.window.is_zero() {
        bail!("{}: the window must be longer than 0", name("window"));
    }
    for (key, v) in [
        ("min_jaccard", a.min_jaccard),
        ("min_jaccard_renamed", a.min_jaccard_renamed),
        ("min_jaccard_renamed_on_site", a.min_jaccard_renamed_on_site),
        ("min_jaccard_retitled", a.min_jaccard_retitled),
    ] {
        if !(0.0..=1.0).contains(&v) {
            bail!(
                "{}: {v} is not a Jaccard similarity between 0 and 1",
                name(key)
            );
        }
    }
    if !(0.0..=1.0).contains(&a.hm_veto) {
        bail!(
            "{}: {} is not an HM distance in (0, 1]; 0 turns the veto off",
            name("hm_veto"),
            a.hm_veto
        );
    }
    for (key, v) in [
        ("max_window_pages", a.max_window_pages),
        ("max_terms", a.max_terms),
        ("max_body_bytes", a.max_body_bytes),
    ] {
        if v == 0 {
            bail!("{}: must be at least 1", name(key));
        }
    }
    // A dead letter holds up to 64 KiB of its record, which JSON may make six times longer
    // (control characters as \u00XX): it must always fit.
    if a.max_output_bytes < MIN_OUTPUT_BYTES {
        bail!(
            "{}: {} bytes is under {MIN_OUTPUT_BYTES} (512KiB): the dead letter of an output over the limit must fit under it",
            name("max_output_bytes"),
            a.max_output_bytes
        );
    }
    Ok(())
}

/// The smallest `max_output_bytes` accepted.
const MIN_OUTPUT_BYTES: usize = 512 * 1024;

/// Start-up checks of `neardup run`.
pub fn validate_run(a: &RunArgs) -> Result<()> {
    let name = |key: &str| {
        format!(
            "--{} / NEARDUP_{} / {key}",
            key.replace('_', "-"),
            key.to_ascii_uppercase()
        )
    };
    match &a.brokers {
        Some(b) if !b.trim().is_empty() => {}
        _ => bail!(
            "no Kafka brokers: set {} (e.g. kafka-0.kafka:9092)",
            name("brokers")
        ),
    }
    for (key, v) in [
        ("group", &a.group),
        ("input_topic", &a.input_topic),
        ("output_prefix", &a.output_prefix),
    ] {
        if v.trim().is_empty() {
            bail!("{}: must not be empty", name(key));
        }
    }
    if a.scale_out && a.stage != crate::cli::Stage::All {
        bail!(
            "{} runs every stage in this process: leave out --stage {} (NEARDUP_STAGE)",
            name("scale_out"),
            a.stage.name()
        );
    }
    if a.assign && !(a.exit_at_end && a.stage == crate::cli::Stage::All) {
        bail!(
            "{} reads the whole input alone, for a run that stops at its end: it needs {} and the all-in-one stage (no --stage, --scale-out or --lease); a run that goes on, or a split stage, joins its consumer group",
            name("assign"),
            name("exit_at_end")
        );
    }
    if a.assign && (a.lease || a.scale_out) {
        bail!(
            "{} reads the whole input alone: leave out {} and {}, which share the work among the instances of a group",
            name("assign"),
            name("lease"),
            name("scale_out")
        );
    }
    if a.commit_interval.is_zero() {
        bail!("{}: must be longer than 0", name("commit_interval"));
    }
    if let Some(url) = &a.http_advertise {
        crate::http::Peer::parse(url)
            .map_err(|e| anyhow::anyhow!("{}: {e}", name("http_advertise")))?;
    }
    for (key, v) in [
        ("max_in_flight", a.max_in_flight),
        ("dead_letter_window", a.dead_letter_window),
    ] {
        if v == 0 {
            bail!("{}: must be at least 1", name(key));
        }
    }
    if !(0.0..=1.0).contains(&a.max_dead_letter_ratio) {
        bail!(
            "{}: {} is not a share between 0 and 1 (1 disables the guard)",
            name("max_dead_letter_ratio"),
            a.max_dead_letter_ratio
        );
    }
    // The producer must take every output the topology lets through.
    if let Some(v) = kafka_value(&a.kafka, "message.max.bytes") {
        if v.trim()
            .parse::<usize>()
            .is_ok_and(|n| n < a.topology.max_output_bytes)
        {
            bail!(
                "kafka property message.max.bytes = {v} is under {} = {}: outputs between the two would stop the run; lower max_output_bytes to it, or leave message.max.bytes to neardup (it takes max_output_bytes)",
                name("max_output_bytes"),
                a.topology.max_output_bytes
            );
        }
    }
    validate_topology(&a.topology)
}

/// Property names whose values are secrets.
fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "jaas", "key.pem", "token"]
        .iter()
        .any(|s| k.contains(s))
}

/// The effective configuration as a file would write it (secrets redacted).
pub fn effective(a: &RunArgs) -> FileConfig {
    let t = &a.topology;
    let mut kafka = toml::Table::new();
    for (k, v) in &a.kafka {
        let v: &str = if is_secret(k) { "<redacted>" } else { v };
        kafka.insert(k.clone(), toml::Value::String(v.to_owned()));
    }
    FileConfig {
        brokers: a.brokers.clone(),
        group: Some(a.group.clone()),
        input_topic: Some(a.input_topic.clone()),
        output_prefix: Some(a.output_prefix.clone()),
        http_listen: a.http_listen.clone(),
        http_advertise: a.http_advertise.clone(),
        commit_interval: Some(Dur(a.commit_interval)),
        max_in_flight: Some(a.max_in_flight),
        drain_timeout: Some(Dur(a.drain_timeout)),
        partition_wait: Some(Dur(a.partition_wait)),
        upstream_wait: Some(Dur(a.upstream_wait)),
        checkpoint_dir: a.checkpoint_dir.clone(),
        checkpoint_interval: Some(Dur(a.checkpoint_interval)),
        exit_at_end: Some(a.exit_at_end),
        assign: Some(a.assign),
        lease: Some(a.lease),
        scale_out: Some(a.scale_out),
        max_dead_letter_ratio: Some(a.max_dead_letter_ratio),
        dead_letter_window: Some(a.dead_letter_window),
        topology: TopologyFile {
            window: Some(Dur(t.window)),
            max_partition_skew: Some(Dur(t.max_partition_skew)),
            max_event_time_lead: t.max_event_time_lead.map(Dur),
            max_body_bytes: Some(Size(t.max_body_bytes)),
            max_output_bytes: Some(Size(t.max_output_bytes)),
            sign_cache: Some(Size(t.sign_cache)),
            max_pairs_per_join: Some(t.max_pairs_per_join),
            key_shards: Some(t.key_shards),
            mirror_stage: Some(t.mirror_stage),
            shingle_profile: Some(profile_name(t.shingle_profile).to_owned()),
            max_terms: Some(t.max_terms),
            emit_minvalues: Some(t.emit_minvalues),
            policy: Some(t.policy.name().to_owned()),
            max_window_pages: Some(t.max_window_pages),
            min_jaccard: Some(t.min_jaccard),
            min_jaccard_renamed: Some(t.min_jaccard_renamed),
            min_jaccard_renamed_on_site: Some(t.min_jaccard_renamed_on_site),
            min_jaccard_retitled: Some(t.min_jaccard_retitled),
            titles: Some(t.titles),
            collections: Some(t.collections),
            hm_veto: Some(t.hm_veto),
            mirrors: Some(t.mirrors),
            canonical: Some(t.canonical.to_string()),
            hint_level: Some(t.hint_level.as_str().to_owned()),
        },
        kafka,
    }
}

/// Renders a configuration as TOML.
pub fn to_toml(c: &FileConfig) -> String {
    toml::to_string(c).unwrap_or_else(|e| format!("# cannot render the configuration: {e}\n"))
}

/// The keys a configuration sets, dotted (`topology.window`), for completeness checks.
pub fn keys(c: &FileConfig) -> BTreeMap<String, ()> {
    let value = toml::Table::try_from(c).unwrap_or_default();
    let mut out = BTreeMap::new();
    for (k, v) in value {
        match (k.as_str(), v) {
            ("kafka", _) => {}
            (_, toml::Value::Table(t)) => {
                for inner in t.keys() {
                    out.insert(format!("{k}.{inner}"), ());
                }
            }
            _ => {
                out.insert(k, ());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn typed_values_parse_and_unknown_keys_name_the_key_and_line() {
        let c = parse(
            "brokers = \"k:9092\"\ncommit_interval = \"500ms\"\n[topology]\nwindow = \"7d\"\n\
             max_body_bytes = \"2MiB\"\n[kafka]\nsecurity.protocol = \"SASL_SSL\"\n\
             \"sasl.mechanism\" = \"PLAIN\"\n\"queue.buffering.max.ms\" = 20\n",
        )
        .unwrap();
        assert_eq!(c.commit_interval, Some(Dur(Duration::from_millis(500))));
        assert_eq!(
            c.topology.window,
            Some(Dur(Duration::from_secs(7 * 86_400)))
        );
        assert_eq!(c.topology.max_body_bytes, Some(Size(2 * 1024 * 1024)));
        let kafka = flatten_kafka(&c.kafka).unwrap();
        assert!(kafka.contains(&("security.protocol".into(), "SASL_SSL".into())));
        assert!(kafka.contains(&("sasl.mechanism".into(), "PLAIN".into())));
        assert!(kafka.contains(&("queue.buffering.max.ms".into(), "20".into())));

        let err = format!(
            "{:#}",
            parse("group = \"g\"\n[topology]\nwindw = \"7d\"\n").unwrap_err()
        );
        assert!(err.contains("windw") && err.contains("line 3"), "{err}");
        let err = format!("{:#}", parse("[topology]\nwindow = 7\n").unwrap_err());
        assert!(err.contains("duration") && err.contains("window"), "{err}");
        let err = format!("{:#}", parse("[topology]\nwindow = \"7w\"\n").unwrap_err());
        assert!(err.contains("unknown duration unit"), "{err}");
        let err = format!("{:#}", parse("[kafka]\n\"x\" = [1]\n").unwrap_err());
        assert!(err.contains("kafka.x"), "{err}");
    }

    #[test]
    fn kafka_properties_come_from_prefixed_variables() {
        let vars = [
            ("NEARDUP_KAFKA_SASL_PASSWORD", "s3cret"),
            ("NEARDUP_KAFKA", "ignored=here"),
            ("NEARDUP_GROUP", "g"),
            ("NEARDUP_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            kafka_from_env(vars.into_iter()),
            vec![
                ("sasl.password".to_owned(), "s3cret".to_owned()),
                ("security.protocol".to_owned(), "SASL_PLAINTEXT".to_owned()),
            ]
        );
    }

    #[test]
    fn the_example_file_parses_and_lists_every_key() {
        let example = parse(include_str!("../neardup.example.toml")).unwrap();
        // Every key of the effective configuration (all set) appears in the example, except
        // http_listen, http_advertise, checkpoint_dir and max_event_time_lead, which are unset
        // by default and shown commented out.
        let args = crate::cli::Cli::try_parse_from([
            "neardup",
            "run",
            "--http-listen",
            "x:1",
            "--http-advertise",
            "http://x:1",
            "--checkpoint-dir",
            "/x",
            "--max-event-time-lead",
            "1d",
            "--brokers",
            "localhost:9092",
        ])
        .map(|c| match c.command {
            crate::cli::Command::Run(a) => a,
            _ => unreachable!(),
        })
        .unwrap();
        let mut all = keys(&effective(&args));
        all.remove("http_listen");
        all.remove("http_advertise");
        all.remove("checkpoint_dir");
        all.remove("topology.max_event_time_lead");
        assert_eq!(
            keys(&example),
            all,
            "consumer/neardup.example.toml is out of date"
        );
        // And its values are the defaults.
        let mut defaults = effective(&args);
        defaults.http_listen = None;
        defaults.http_advertise = None;
        defaults.checkpoint_dir = None;
        defaults.topology.max_event_time_lead = None;
        let mut example = example;
        example.kafka.clear();
        assert_eq!(example, defaults);
    }

    #[test]
    fn an_advertised_url_that_is_not_plain_http_is_refused_naming_the_key() {
        let run = |url: &str| {
            let cli = crate::cli::Cli::try_parse_from([
                "neardup",
                "run",
                "--brokers",
                "localhost:9092",
                "--http-advertise",
                url,
            ])
            .unwrap();
            match cli.command {
                crate::cli::Command::Run(a) => validate_run(&a),
                _ => unreachable!(),
            }
        };
        assert!(run("http://10.0.3.7:9090").is_ok());
        let e = run("https://10.0.3.7:9090").unwrap_err().to_string();
        assert!(
            e.starts_with("--http-advertise / NEARDUP_HTTP_ADVERTISE / http_advertise: ")
                && e.contains("not an http:// URL"),
            "{e}"
        );
    }

    #[test]
    fn reading_alone_is_refused_where_a_group_must_share_the_work_naming_the_key() {
        let run = |extra: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from(
                [
                    &["neardup", "run", "--brokers", "localhost:9092"][..],
                    extra,
                ]
                .concat(),
            )
            .unwrap();
            match cli.command {
                crate::cli::Command::Run(a) => validate_run(&a).map_err(|e| e.to_string()),
                _ => unreachable!(),
            }
        };
        assert!(run(&["--assign", "--exit-at-end"]).is_ok());
        for extra in [
            &["--assign"][..],
            &["--assign", "--exit-at-end", "--stage", "sign"],
            &["--assign", "--exit-at-end", "--lease"],
            &["--assign", "--exit-at-end", "--scale-out"],
        ] {
            let e = run(extra).unwrap_err();
            assert!(
                e.starts_with("--assign / NEARDUP_ASSIGN / assign "),
                "{extra:?}: {e}"
            );
        }
        assert!(run(&["--assign"]).unwrap_err().contains("--exit-at-end"));
    }

    #[test]
    fn secrets_are_redacted() {
        assert!(is_secret("sasl.password"));
        assert!(is_secret("ssl.key.password"));
        assert!(is_secret("sasl.oauthbearer.client.secret"));
        assert!(!is_secret("security.protocol"));
    }
}
