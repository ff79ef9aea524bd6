//! The topology's parameters ([`Config`]), their defaults (DESIGN.md §4) and their fingerprints.

use crate::signer::SignerConfig;
use crate::DecodeLimits;
use crate::{clusters, near, replicas};
use neardup_schemas::PairLevel;

/// The topology's parameters. Every one is configurable; the defaults are DESIGN.md §4's.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Decoding limits.
    pub decode: DecodeLimits,
    /// Signature parameters (Alg. B profile, chunks, RP, term cap).
    pub signer: SignerConfig,
    /// Also publish the 84 min-values in signature events (672 bytes of hex each; off by default).
    pub emit_minvalues: bool,
    /// How long a fetch stays in the window, in milliseconds of event time (default 14 days: two
    /// cycles of a weekly crawl, so a page is normally refetched before its entry expires).
    pub window_ms: i64,
    /// How far the watermark may lag the newest event time while it waits for the slowest
    /// input partition (default one day; see [`crate::clock`]).
    pub max_partition_skew_ms: i64,
    /// A record dated more than this ahead of the newest event time so far is a leap: it
    /// moves the windows only when [`crate::clock::LEAP_RECORDS`] records of its partition in a row
    /// lead as far, so that one record with a wrong date cannot empty the window (`None`, the
    /// default: the window's length; see [`crate::clock`]).
    pub max_event_time_lead_ms: Option<i64>,
    /// A page joining an exact group that already has this many members gets no exact
    /// candidates (and so no pairs from that group).
    pub max_pairs_per_join: usize,
    /// Compute Cho's replicated collections per epoch (off by default: they keep every windowed
    /// page's out-links).
    pub collections: bool,
    /// Seed 002's Hyperlink Map as a veto in the pair policy, applied when an epoch closes
    /// (`None`, the default: off). Keeps every windowed page's RP signature and out-links.
    pub hm_veto: Option<replicas::HmVeto>,
    /// Find mirrored hosts, aliases and auto-mirrors from the clusters (on by default).
    pub mirrors: bool,
    /// Track cluster evolution between crawl rounds (seed 000 §3; replays: it remembers
    /// every round's URLs).
    pub track_evolution: bool,
    /// The sketch index and pair policy (its `window_ms` and `max_pairs_per_join` are taken from
    /// the fields above).
    pub near: near::NearConfig,
    /// How each near-duplicate cluster's canonical member is chosen.
    pub canonical: clusters::CanonicalPolicy,
    /// The cluster level whose canonical members and copies the `neardup.recrawl` hints name
    /// (`very_similar` by default, or `virtually_identical`).
    pub hint_level: PairLevel,
    /// Split stages only: the number of key shards the index stage splits its key tables over
    /// ([`crate::Role::Shard`], [`crate::Role::Verify`]); 0, the default, keeps them in the
    /// index stage. The pairs are the same for any number.
    pub key_shards: usize,
    /// The largest output record (key and value, in bytes) the topology publishes: a larger
    /// one (a signature event's lists are capped, [`crate::signer::ListCaps`], and URLs over
    /// [`crate::MAX_URL_BYTES`] refused, so that no output of a page passes 512 KiB: a safety
    /// net) becomes an `output_too_large` dead letter instead,
    /// so that a Kafka producer and topic that accept records this large never stop on it
    /// (default 1,000,000, librdkafka's `message.max.bytes` and about Kafka's default
    /// `max.message.bytes`).
    pub max_output_bytes: usize,
    /// Split stages only: mirrors and collections run in a mirror stage of their own
    /// ([`crate::Role::Mirror`]), fed by the cluster stage, instead of in the cluster stage. The
    /// outputs are the same either way.
    pub mirror_stage: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            decode: DecodeLimits::default(),
            signer: SignerConfig::default(),
            emit_minvalues: false,
            window_ms: 14 * 24 * 3600 * 1000,
            max_partition_skew_ms: 24 * 3600 * 1000,
            max_event_time_lead_ms: None,
            max_pairs_per_join: 1000,
            near: near::NearConfig::default(),
            track_evolution: false,
            collections: false,
            hm_veto: None,
            mirrors: true,
            canonical: clusters::CanonicalPolicy::default(),
            hint_level: PairLevel::VerySimilar,
            key_shards: 0,
            max_output_bytes: 1_000_000,
            mirror_stage: false,
        }
    }
}

impl Config {
    /// A fingerprint of every parameter that changes signatures, carried by signature events so
    /// that signatures computed under other parameters are never compared silently.
    pub fn params_fingerprint(&self) -> String {
        let desc = format!("checksum=xxh3-128(raw body);{}", self.signer.describe());
        format!("p2-{:016x}", xxhash_rust::xxh3::xxh3_64(desc.as_bytes()))
    }
}

impl Config {
    /// A fingerprint of every parameter that shapes the topology's state (window, pair policy
    /// and thresholds, canonical policy, hint level, mirrors, collections, HM veto, evolution and
    /// the signature parameters), so that a checkpoint is never restored under other ones.
    /// Decoding limits and `emit_minvalues` only change outputs and are left out.
    pub fn state_fingerprint(&self) -> String {
        let shaping = Config {
            decode: DecodeLimits::default(),
            emit_minvalues: false,
            ..self.clone()
        };
        let desc = format!("{shaping:?}");
        format!("s1-{:016x}", xxhash_rust::xxh3::xxh3_64(desc.as_bytes()))
    }
}
