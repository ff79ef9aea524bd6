//! neardup's processing logic: sans-IO and clock-free (DESIGN.md §1).
//!
//! Every decision uses the event's own time (`fetched_at`), never the wall clock, so replaying the
//! same input gives the same output bytes. The consumer crate only moves bytes in and out.
//!
//! ```
//! use neardup_schemas::{OutputKind, Source};
//! use neardup_topology::{Config, Topology};
//!
//! let mut topo = Topology::new(Config::default());
//! let page = |url: &str, t: &str| format!(
//!     r#"{{"url":"{url}","fetched_at":"{t}","status":200,"body":"<p>the same page</p>"}}"#);
//! let src = Source::File { file: "doc".into(), line: 1 };
//! let mut out = Vec::new();
//! topo.process(page("http://a.example/x", "2026-11-02T10:00:00Z").as_bytes(), &src, &mut out);
//! topo.process(page("http://b.example/x", "2026-11-02T10:00:01Z").as_bytes(), &src, &mut out);
//! let pairs: Vec<_> = out.iter().filter(|e| e.kind == OutputKind::Pairs).collect();
//! assert_eq!(pairs.len(), 1);
//! assert_eq!(pairs[0].key, "http://a.example/x http://b.example/x");
//! ```

pub mod charset;
pub mod checkpoint;
pub mod clock;
pub mod clusters;
pub mod collections;
pub mod decode;
mod emit;
pub mod evolution;
pub mod exact;
mod fixed;
pub mod hash;
pub mod hints;
pub mod history;
pub mod inlinks;
mod intern;
pub mod mirrors;
mod multimap;
pub mod near;
pub mod replicas;
pub mod resolve;
pub mod sign_cache;
mod signed;
pub mod signer;
pub mod site;
pub mod sketch;
mod small;
#[cfg(test)]
mod testutil;
pub mod text;
pub mod window;

pub use decode::{decode, DecodeError, DecodeLimits};
pub use emit::{Emit, Emitter};

use neardup_schemas::{
    Body, ChangeSinceLast, DeadLetterReason, OutputKind, PageEvent, PairLevel, SignatureEvent,
    Source,
};
use signed::{Signed, SignedParts};
use signer::{Signer, SignerConfig};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use time::format_description::well_known::Rfc3339;

/// Version of the tokenizer rules (visible text + terms). Bump on any change that alters terms.
/// v2: `<img>` URL terms (seed 001 §2), block-level line breaks. v3: each character of a
/// script written without spaces (Chinese, Japanese) is a term. v4: also of Thai, Lao, Khmer,
/// Myanmar and Tai Tham.
pub const TOKENIZER_VERSION: u32 = 4;

/// Longest stretch of event time between two collections epochs (one day).
const EPOCH_MS: i64 = 24 * 3600 * 1000;

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
    /// input partition (default one day; see [`clock`]).
    pub max_partition_skew_ms: i64,
    /// A record dated more than this ahead of the newest event time so far is a leap: it
    /// moves the windows only when [`clock::LEAP_RECORDS`] records of its partition in a row
    /// lead as far, so that one record with a wrong date cannot empty the window (`None`, the
    /// default: the window's length; see [`clock`]).
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
    /// ([`Role::Shard`], [`Role::Verify`]); 0, the default, keeps them in the index stage. The
    /// pairs are the same for any number.
    pub key_shards: usize,
    /// The largest output record (key and value, in bytes) the topology publishes: a larger
    /// one (a signature event's lists are capped, [`signer::ListCaps`], so in practice one
    /// of a URL of hundreds of kilobytes) becomes an `output_too_large` dead letter instead,
    /// so that a Kafka producer and topic that accept records this large never stop on it
    /// (default 1,000,000, librdkafka's `message.max.bytes` and about Kafka's default
    /// `max.message.bytes`).
    pub max_output_bytes: usize,
    /// Split stages only: mirrors and collections run in a mirror stage of their own
    /// ([`Role::Mirror`]), fed by the cluster stage, instead of in the cluster stage. The
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

/// Counters of what the topology has seen, for summaries and metrics.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Input records.
    pub records: u64,
    /// Fetches with content (2xx with a body).
    pub pages: u64,
    /// Fetches without content (a status that says so, or no body).
    pub no_content: u64,
    /// Fetches that told nothing of the content (304, 429, 5xx): the URL kept what it had.
    pub inconclusive: u64,
    /// Dead letters, by reason.
    pub dead_letters: BTreeMap<DeadLetterReason, u64>,
    /// Output records, by kind.
    pub outputs: BTreeMap<OutputKind, u64>,
    /// Pair detections (every level, including level changes).
    pub pairs_detected: u64,
    /// Index and cluster stages: records of the previous stage received again and skipped.
    pub repeats_skipped: u64,
    /// Signature events with a list cut to its cap (out-links, chunks or paragraphs: see
    /// [`signer::ListCaps`]); each states how much it left out.
    pub lists_capped: u64,
}

impl Stats {
    /// Counts a fetch: with content, inconclusive, or without content.
    fn count(&mut self, content: bool, inconclusive: bool) {
        match (content, inconclusive) {
            (true, _) => self.pages += 1,
            (false, true) => self.inconclusive += 1,
            (false, false) => self.no_content += 1,
        }
    }

    /// All dead letters.
    pub fn dead_letter_total(&self) -> u64 {
        self.dead_letters.values().sum()
    }
}

/// The whole topology in one process: decode, text, signatures, exact index, clusters.
pub struct Topology {
    cfg: Config,
    params: String,
    /// [`Config::state_fingerprint`], carried by the index stage's records.
    state_fingerprint: String,
    state: State,
    preparer: Preparer,
    emitter: Emitter,
    /// The record of the page just applied for the next stage: the index stage's for the
    /// cluster stage, or, in an index split by key, for the next key shard or the verify stage;
    /// the cluster stage's for the mirror stage.
    indexed: Option<(String, Vec<u8>)>,
    /// The steps of the page being applied, in an index stage split by key.
    steps: Vec<near::Step>,
}

/// A fetch as the parts downstream of the pairs see it.
struct DownstreamFetch<'a> {
    url: &'a str,
    fetched_at_ms: i64,
    ip: Option<&'a str>,
    links: Option<Links<'a>>,
}

/// A page's out-links: in its signatures, or in the index stage's record.
#[derive(Clone, Copy)]
enum Links<'a> {
    Parts(&'a SignedParts),
    List(&'a [String]),
}

impl<'a> Links<'a> {
    fn iter(self) -> impl Iterator<Item = &'a str> {
        let (parts, list) = match self {
            Links::Parts(p) => (Some(p), None),
            Links::List(l) => (None, Some(l)),
        };
        let parts = parts.into_iter().flat_map(|p| p.links());
        parts.chain(list.into_iter().flatten().map(String::as_str))
    }
}

/// URLs held by the parts of a [`Topology`] that keep URLs of the window
/// ([`Topology::kept_urls`]): each is bounded by the window's event time and by its page
/// budget (`near.max_pages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptUrls {
    /// Pages in the sketch window (in a split index stage, its window's).
    pub window: usize,
    /// URLs in the exact-duplicate groups (where exact groups run).
    pub exact: usize,
    /// URLs whose last fetch the change history keeps (where signatures are emitted).
    pub history: usize,
    /// Pages whose out-links the in-link counts hold (with an in-link canonical policy).
    pub inlinks: usize,
}

/// The index stage's record of one applied page for the cluster stage: everything the parts
/// downstream of the pairs read of the page, the index's window and the pair changes.
#[derive(serde::Serialize, serde::Deserialize)]
struct IndexedPage {
    format: u32,
    /// [`Config::state_fingerprint`] of the index stage.
    state: String,
    url: String,
    fetched_at_ms: i64,
    crawl_id: Option<String>,
    ip: Option<String>,
    /// Content checksum (`None`: no content, unless `inconclusive`).
    checksum: Option<u128>,
    /// The fetch told nothing of the content (304, 429, 5xx): the URL keeps what it had.
    inconclusive: bool,
    /// The fetch was a 304 Not Modified: the URL's content is current as of it, so its
    /// entries' times move to it.
    confirmed: bool,
    /// Out-links, only when collections or the in-link ranking use them.
    links: Option<Vec<String>>,
    /// The newest event time before this page, and the watermark and newest after it.
    newest_before: i64,
    watermark: i64,
    newest: i64,
    /// Where the index stage read the page (partition, offset): repeats are recognised by it.
    origin: (i32, i64),
    /// The URL is in the index's window after this page.
    in_window: bool,
    /// URLs that left the index's window while this page was applied.
    left: Vec<Arc<str>>,
    /// Those of `left` that the page budget evicted: they leave the exact groups and the
    /// in-links too.
    over_budget: Vec<Arc<str>>,
    /// The pair changes this page caused, in order.
    changes: Vec<near::PairChange>,
}

impl IndexedPage {
    /// The fetch as the parts downstream of the pairs see it.
    fn fetch(&self) -> DownstreamFetch<'_> {
        DownstreamFetch {
            url: &self.url,
            fetched_at_ms: self.fetched_at_ms,
            ip: self.ip.as_deref(),
            links: self.links.as_deref().map(Links::List),
        }
    }
}

/// A page's record through an index stage split by key (`key_shards`): the sequencer's steps
/// for it, passed from key shard to key shard, each adding its answers to the filings, and on
/// to the verify stage, which verifies the steps and completes the record for the cluster
/// stage.
#[derive(serde::Serialize, serde::Deserialize)]
struct ShardedPage {
    /// The record for the cluster stage, without the pair changes and the URLs that left the
    /// window (the verify stage adds them).
    page: IndexedPage,
    /// The window's steps for the page, in order.
    steps: Vec<near::Step>,
    /// Per filing among `steps`, in order, the answers of the key shards it has passed.
    answers: Vec<Vec<near::ShardAnswer>>,
}

/// The cluster stage's record of one applied page for the mirror stage (`mirror_stage`): the
/// index stage's record as the cluster stage read it (without the pair changes, and with the
/// out-links only when collections use them) and the moves it caused among the `very_similar`
/// clusters, which the mirror stage follows instead of keeping the clusters.
#[derive(serde::Serialize, serde::Deserialize)]
struct ClusteredPage {
    page: IndexedPage,
    moves: Vec<clusters::Move>,
}

/// A key shard's state in a shard stage.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct ShardState {
    stage: near::KeyShardStage,
    /// Per partition of the index stage's input, the last origin applied (repeats are skipped).
    origin_upto: BTreeMap<i32, i64>,
}

/// Everything a topology accumulates from its input: what a checkpoint saves
/// ([`checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    exact: exact::ExactIndex,
    near: near::NearIndex,
    /// Clusters over all live pairs (`very_similar` and up).
    similar: clusters::Clusters,
    /// Clusters over `virtually_identical` and `exact` pairs.
    identical: clusters::Clusters,
    /// Mirrored hosts, aliases and auto-mirrors, from the `very_similar` clusters.
    mirrors: mirrors::Mirrors,
    /// Crawl hints from the clusters of `cfg.hint_level`.
    hints: hints::Hints,
    /// In-link counts, kept only when the canonical policy ranks by them.
    inlinks: Option<inlinks::InLinks>,
    evolution: Option<evolution::Evolution>,
    collections: collections::Collections,
    /// RP signatures of the windowed pages, kept only for the Hyperlink Map veto.
    rps: HashMap<Arc<str>, Box<[f32]>, hash::StrBuild>,
    /// The crawl round and the event time of the last collections epoch.
    epoch: (Option<String>, i64),
    history: history::History,
    /// Event time per input partition, and the watermark that moves the windows.
    clock: clock::EventClock,
    stats: Stats,
    /// The part of the topology this state belongs to.
    role: Role,
    /// In the cluster stage, or the mirror stage: the URLs in the index stage's window (what
    /// collections keep).
    window: std::collections::HashSet<Arc<str>, hash::StrBuild>,
    /// In the mirror stage: the members of each `very_similar` cluster, followed from the
    /// cluster stage's moves (what collections are computed from).
    members: BTreeMap<u32, BTreeSet<Arc<str>>>,
    /// In the index and cluster stages: per partition of the input the previous stage read
    /// (the records carry where they came from), the last offset whose record was applied. A
    /// previous stage sends records again after a restart or a rebalance (at least once);
    /// applying one twice would apply its fetch, or its pair changes, twice.
    origin_upto: BTreeMap<i32, i64>,
    /// In an index stage split by key: the window's bookkeeping, whose steps go to the key
    /// shards and on to the verify stage (`near` stays empty).
    sequencer: Option<near::Sequencer>,
    /// In a shard stage: per partition of the steps topic (the shard's number), its key shard.
    key_shards: BTreeMap<i32, ShardState>,
    /// The URLs the parts hold, one copy each ([`intern`]; rebuilt after a restore).
    #[serde(skip)]
    urls: intern::UrlPool,
}

impl State {
    /// A copy of every part, for a checkpoint to write while this state goes on
    /// ([`checkpoint::snapshot`]). The copy shares the URLs' strings (one more reference each),
    /// and leaves out the URL pool, which a checkpoint does not hold (a restore rebuilds it from
    /// the parts). A URL the copy alone still holds stays in the pool until a sweep after the
    /// copy is dropped.
    fn snapshot(&self) -> State {
        State {
            exact: self.exact.clone(),
            near: self.near.clone(),
            similar: self.similar.clone(),
            identical: self.identical.clone(),
            mirrors: self.mirrors.clone(),
            hints: self.hints.clone(),
            inlinks: self.inlinks.clone(),
            evolution: self.evolution.clone(),
            collections: self.collections.clone(),
            rps: self.rps.clone(),
            epoch: self.epoch.clone(),
            history: self.history.clone(),
            clock: self.clock.clone(),
            stats: self.stats.clone(),
            role: self.role,
            window: self.window.clone(),
            members: self.members.clone(),
            origin_upto: self.origin_upto.clone(),
            sequencer: self.sequencer.clone(),
            key_shards: self.key_shards.clone(),
            urls: intern::UrlPool::default(),
        }
    }
}

/// The part of the topology a process runs (DESIGN.md §3). The split stages together give
/// exactly the outputs of [`Role::All`]: the index stage the signatures and pairs, the cluster
/// stage the clusters (exact ones included), crawl hints, mirrors and collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Role {
    /// Everything in one process.
    All,
    /// The sketch window, pair verification and signature events; each page's
    /// [`Topology::take_indexed`] record carries what the cluster stage needs.
    Index,
    /// Everything downstream of the pairs, fed by [`Topology::apply_indexed`].
    Cluster,
    /// With `key_shards` N: one key shard of an index stage split by key, fed by
    /// [`Topology::apply_sharded`] from partition i (shard i of N) of the steps topic; its
    /// record goes to partition i + 1, or to the verify stage after the last shard.
    Shard,
    /// With `key_shards` N: the verification of an index stage split by key (its pair events,
    /// and the record for the cluster stage), fed by [`Topology::apply_sharded`] with the
    /// records that passed every key shard.
    Verify,
    /// With `mirror_stage`: mirrors and collections, fed by [`Topology::apply_clustered`] with
    /// the cluster stage's records (the cluster stage then leaves them out).
    Mirror,
}

/// Why a configuration cannot run split.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RoleError(String);

impl RoleError {
    fn all_in_one(what: &str) -> Self {
        RoleError(format!("{what} runs only in the all-in-one stage (it feeds back into the index, or needs every page's signatures); turn it off or run --stage all"))
    }
}

impl Topology {
    /// A topology with empty state.
    pub fn new(cfg: Config) -> Self {
        let state = State {
            // Pairs of every level come from the near index; the exact index keeps the exact
            // clusters, and with a pair cap of 0 emits no pairs of its own.
            exact: exact::ExactIndex::new(cfg.window_ms, 0),
            near: near::NearIndex::new(near::NearConfig {
                window_ms: cfg.window_ms,
                max_pairs_per_join: cfg.max_pairs_per_join,
                ..cfg.near.clone()
            }),
            similar: clusters::Clusters::with_policy(PairLevel::VerySimilar, cfg.canonical.clone()),
            identical: clusters::Clusters::with_policy(
                PairLevel::VirtuallyIdentical,
                cfg.canonical.clone(),
            ),
            mirrors: mirrors::Mirrors::new(mirrors::MirrorConfig::default()),
            hints: hints::Hints::new(),
            inlinks: cfg
                .canonical
                .uses_inlinks()
                .then(|| inlinks::InLinks::new(cfg.window_ms)),
            evolution: cfg.track_evolution.then(evolution::Evolution::new),
            collections: collections::Collections::new(collections::CollectionConfig::default()),
            rps: HashMap::default(),
            epoch: (None, i64::MIN),
            history: history::History::new(cfg.window_ms),
            clock: clock::EventClock::default(),
            stats: Stats::default(),
            role: Role::All,
            urls: intern::UrlPool::default(),
            window: Default::default(),
            members: BTreeMap::new(),
            origin_upto: BTreeMap::new(),
            sequencer: None,
            key_shards: BTreeMap::new(),
        };
        Topology {
            params: cfg.params_fingerprint(),
            state_fingerprint: cfg.state_fingerprint(),
            state,
            preparer: Preparer::new(&cfg),
            cfg,
            emitter: Emitter::new(),
            indexed: None,
            steps: Vec::new(),
        }
    }

    /// Drops the state's parts one at a time, calling `dropped(name)` after each, so that a
    /// counting allocator tells what each part held (`checkpoint_bench --parts`). The state is
    /// empty afterwards.
    #[doc(hidden)]
    pub fn release_parts(&mut self, mut dropped: impl FnMut(&'static str)) {
        let empty = Topology::new(self.cfg.clone()).state;
        dropped("(an empty state, made first)");
        let State {
            exact,
            near,
            similar,
            identical,
            mirrors,
            hints,
            inlinks,
            evolution,
            collections,
            rps,
            history,
            window,
            members,
            urls,
            ..
        } = std::mem::replace(&mut self.state, empty);
        drop(urls);
        dropped("URL pool (its table; each URL goes with its last holder)");
        drop(exact);
        dropped("exact-duplicate groups");
        drop(near);
        dropped("sketch index (pairs included)");
        drop(similar);
        dropped("very_similar clusters");
        drop(identical);
        dropped("virtually_identical clusters");
        drop(mirrors);
        dropped("mirrors");
        drop(hints);
        dropped("crawl hints");
        drop(inlinks);
        dropped("in-links");
        drop(evolution);
        dropped("evolution");
        drop(collections);
        dropped("collections");
        drop((rps, window, members));
        dropped("RP signatures, stage window, members");
        drop(history);
        dropped("change history");
    }

    /// A topology with empty state that runs one part of a split topology.
    pub fn with_role(cfg: Config, role: Role) -> Result<Self, RoleError> {
        if role != Role::All {
            if cfg.hm_veto.is_some() {
                return Err(RoleError::all_in_one("the Hyperlink Map veto (hm_veto)"));
            }
            if cfg.track_evolution {
                return Err(RoleError::all_in_one("cluster evolution"));
            }
        }
        if role == Role::Mirror && !cfg.mirror_stage {
            return Err(RoleError(
                "the mirror stage needs mirror_stage (--mirror-stage) given to every stage, so that the cluster stage leaves mirrors and collections to it and sends it their input".into(),
            ));
        }
        if matches!(role, Role::Shard | Role::Verify) && cfg.key_shards == 0 {
            return Err(RoleError(format!(
                "the {} stage needs key_shards (--key-shards), the number of key shards the index stage splits its key tables over: 1 or more, the same in every stage",
                if role == Role::Shard { "shard" } else { "verify" }
            )));
        }
        let split = cfg.key_shards > 0;
        let mut topo = Topology::new(cfg);
        let near_cfg = topo.state.near.config().clone();
        match role {
            Role::Index if split => topo.state.sequencer = Some(near::Sequencer::new(near_cfg)),
            Role::Verify => topo.state.near = near::NearIndex::follower(near_cfg),
            // The cluster stage ranks canonical members by in-links.
            Role::Mirror => topo.state.inlinks = None,
            _ => {}
        }
        topo.state.role = role;
        topo.after_restore();
        Ok(topo)
    }

    /// Rebuilds what a checkpoint leaves out.
    pub(crate) fn after_restore(&mut self) {
        // One copy of each URL for all the parts ([`intern`]): reading the checkpoint made one
        // for every place that held it.
        let s = &mut self.state;
        let mut pool = std::mem::take(&mut s.urls);
        s.near.fit_restored(&mut pool);
        s.exact.fit_restored(&mut pool);
        s.history.fit_restored(&mut pool);
        s.similar.fit_restored(&mut pool);
        s.identical.fit_restored(&mut pool);
        s.hints.fit_restored(&mut pool);
        s.collections.fit_restored(&mut pool);
        pool.share_keys(&mut s.rps);
        pool.share_set(&mut s.window);
        for members in s.members.values_mut() {
            pool.share_ordered_set(members);
        }
        s.urls = pool;
        self.state.near.after_restore();
        if let Some(s) = &mut self.state.sequencer {
            s.after_restore();
        }
        if matches!(self.state.role, Role::Index | Role::Verify) {
            self.state.near.track_removed();
        }
    }

    /// The part of the topology this one runs.
    pub fn role(&self) -> Role {
        self.state.role
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.state.stats
    }

    /// The exact-duplicate index's counters.
    pub fn exact_stats(&self) -> exact::ExactStats {
        self.state.exact.stats()
    }

    /// The sketch index's memory by its own accounting ([`near::NearIndex::memory_parts`]).
    #[doc(hidden)]
    pub fn near_memory_parts(&self) -> [(&'static str, usize); 8] {
        self.state.near.memory_parts()
    }

    /// The sketch index's counters (in an index stage split by key, its window's).
    pub fn near_stats(&self) -> near::NearStats {
        match &self.state.sequencer {
            Some(s) => s.stats(),
            None => self.state.near.stats(),
        }
    }

    /// How many URLs each part that keeps URLs of the window holds now.
    pub fn kept_urls(&self) -> KeptUrls {
        KeptUrls {
            window: self.near_stats().pages as usize,
            exact: self.state.exact.urls(),
            history: self.state.history.len(),
            inlinks: self.state.inlinks.as_ref().map_or(0, |l| l.pages()),
        }
    }

    /// The sketch index (for inspection: live pairs, window, memory).
    pub fn near_index(&self) -> &near::NearIndex {
        &self.state.near
    }

    /// The watermark (milliseconds since the epoch): the event time the windows have moved to,
    /// that of the slowest input partition within `max_partition_skew_ms` of the newest event
    /// (see [`clock`]).
    pub fn watermark_ms(&self) -> Option<i64> {
        let w = self.state.clock.watermark();
        (w != i64::MIN).then_some(w)
    }

    /// Handles one input record, appending its outputs to `out`. Never panics on bad input:
    /// a record that cannot be decoded becomes one dead-letter output.
    pub fn process(&mut self, raw: &[u8], source: &Source, out: &mut Vec<Emit>) {
        let prepared = self.preparer.prepare(raw);
        self.apply(prepared, raw, source, out);
    }

    /// Handles one input record that a [`Preparer`] of this configuration already decoded and
    /// signed (on any thread): `process(raw)` is `apply(prepare(raw), raw)`. Records must be
    /// applied in input order; preparing them may run ahead, in parallel.
    pub fn apply(&mut self, prepared: Prepared, raw: &[u8], source: &Source, out: &mut Vec<Emit>) {
        self.state.stats.records += 1;
        match prepared.0 {
            Ok(p) => {
                // A page the sign stage sent again is applied once.
                if !p.origin.is_some_and(|o| self.is_repeat(o)) {
                    self.process_page(&p.page, p.signed, source);
                }
            }
            Err(e) => {
                *self.state.stats.dead_letters.entry(e.reason).or_default() += 1;
                let dl = e.into_dead_letter(raw, source, &self.cfg.decode);
                self.emitter.emit(dl);
            }
        }
        self.dead_letter_oversized(source);
        self.drain_outputs(out);
    }

    /// Replaces every output waiting in the emitter that is over `max_output_bytes` by the
    /// dead letter of the input record at `source` that names it (the outputs of the stages
    /// after the index, which name a URL or two, and dead letters, cut to their payload limit,
    /// stay far below any limit a producer accepts).
    fn dead_letter_oversized(&mut self, source: &Source) {
        let limit = self.cfg.max_output_bytes;
        // A dead letter is the way out already (its payload cut to the decoding limits').
        let over =
            |e: &Emit| e.kind != OutputKind::DeadLetter && e.key.len() + e.value.len() > limit;
        if !self.emitter.records().iter().any(over) {
            return;
        }
        let records: Vec<Emit> = self.emitter.drain().collect();
        for e in records {
            if !over(&e) {
                self.emitter.push(e);
                continue;
            }
            let reason = DeadLetterReason::OutputTooLarge;
            *self.state.stats.dead_letters.entry(reason).or_default() += 1;
            // The key is a URL or two: named in full unless it is itself the problem.
            let key: String = e.key.chars().take(2048).collect();
            let detail = format!(
                "its {} event (key {key:?}{}) is {} bytes, over the {limit}-byte output limit (max_output_bytes): it was not published; to publish such events, raise max_output_bytes and the output topic's max.message.bytes",
                e.kind.short_name(),
                if key.len() < e.key.len() { ", cut" } else { "" },
                e.key.len() + e.value.len()
            );
            let dl =
                DecodeError { reason, detail }.into_dead_letter(&e.value, source, &self.cfg.decode);
            self.emitter.emit(dl);
        }
    }

    /// Hands the emitted outputs to `out`, counting them.
    fn drain_outputs(&mut self, out: &mut Vec<Emit>) {
        for e in self.emitter.drain() {
            *self.state.stats.outputs.entry(e.kind).or_default() += 1;
            if e.kind == OutputKind::Pairs && is_detected(&e.value) {
                self.state.stats.pairs_detected += 1;
            }
            out.push(e);
        }
    }

    /// True (and counted) for a record of the previous stage whose origin (partition, offset
    /// of that stage's input) was applied already; otherwise notes it as applied.
    fn is_repeat(&mut self, origin: (i32, i64)) -> bool {
        let repeat = already_applied(&mut self.state.origin_upto, origin);
        self.state.stats.repeats_skipped += u64::from(repeat);
        repeat
    }

    fn process_page(&mut self, page: &PageEvent, signed: Option<Signed>, source: &Source) {
        let at = format_time(page.fetched_at_ms);
        let partition = match source {
            Source::Kafka { partition, .. } => *partition,
            Source::File { .. } => 0,
        };
        // The date of a leap the clock holds back is not trusted (see `clock`): the windows
        // file the page at the newest trusted event time instead, so that a later fetch of its
        // URL is not stale and nothing is dated by it. Its signature event still states the
        // date it came with.
        let lead = self.max_lead_ms();
        let at_ms = if self
            .state
            .clock
            .would_hold(partition, page.fetched_at_ms, lead)
        {
            self.state.clock.newest()
        } else {
            page.fetched_at_ms
        };
        self.emitter.set_at(&format_time(at_ms));
        // The parts downstream of the pairs: here unless a cluster stage runs them.
        let downstream = self.state.role == Role::All;
        if downstream {
            if let Some(ev) = &mut self.state.evolution {
                ev.begin(page.crawl_id.as_deref(), &self.state.similar);
            }
            self.maybe_close_epoch(page.crawl_id.as_deref(), at_ms);
        }
        let newest_before = self.state.clock.newest();
        let before = self.state.clock.watermark();
        let watermark = self.state.clock.observe(
            partition,
            page.fetched_at_ms,
            self.cfg.max_partition_skew_ms,
            lead,
        );
        if watermark > before {
            if downstream {
                self.advance_downstream(watermark);
            }
            match &mut self.state.sequencer {
                Some(s) => self
                    .steps
                    .extend(s.advance(watermark, page.crawl_id.as_deref())),
                None => {
                    self.state
                        .near
                        .advance(watermark, page.crawl_id.as_deref(), &mut self.emitter)
                }
            }
            self.state.history.advance(watermark);
        }
        // The change since the previous fetch needs the window's history: it is the part of
        // signing that is not prepared ahead.
        let change = signed.as_ref().and_then(|sg| {
            let p = &sg.parts;
            let urls = &mut self.state.urls;
            self.state
                .history
                .record(&page.url, at_ms, p.checksum, p.text_hash, &p.b, |u| {
                    urls.url(u)
                })
                .map(|c| ChangeSinceLast {
                    previous_fetched_at: format_time(c.previous_ms),
                    agreeing_minvalues: c.agreeing_minvalues,
                    same_checksum: c.same_checksum,
                    same_text: c.same_text,
                    bucket: c.bucket,
                })
        });
        // A fetch that tells nothing of the content leaves the URL as it was: it moves the
        // clock (above) and has its signature event, nothing else, but that a 304 (Not
        // Modified) renews the URL's entries as a fetch of the same content would.
        let inconclusive = signed.is_none() && page.is_inconclusive();
        let confirmed = inconclusive && page.status == 304;
        // A 304 is an unchanged fetch for the change buckets, when the previous one is known.
        let renewed = confirmed && self.state.history.renew(&page.url, at_ms);
        self.state.stats.count(signed.is_some(), inconclusive);
        let parts = signed.as_ref().map(|sg| &*sg.parts);
        let checksum = parts.map(|p| p.checksum);
        if self.cfg.hm_veto.is_some() {
            match parts {
                Some(p) => {
                    // As the signature event states it.
                    let rp: Box<[f32]> = p.rp_rounded().map(|v| v as f32).collect();
                    self.state.rps.insert(Arc::from(page.url.as_str()), rp);
                }
                None if inconclusive => {}
                None => {
                    self.state.rps.remove(page.url.as_str());
                }
            }
        }
        let fetch = DownstreamFetch {
            url: &page.url,
            fetched_at_ms: at_ms,
            ip: page.ip.as_deref(),
            links: parts.map(Links::Parts),
        };
        if downstream && !inconclusive {
            self.fetched_downstream(&fetch);
        }
        if let Some(ev) = &mut self.state.evolution {
            if let Some(p) = parts {
                ev.links(&page.url, p.links());
                ev.paragraphs(&page.url, p.paragraphs.iter().copied(), p.short_page);
            }
            if let Some(c) = &change {
                ev.changed(c.bucket);
            }
            if renewed {
                ev.changed(neardup_schemas::ChangeBucket::NoChange);
            }
        }
        let links: Option<Vec<String>> = (self.state.role == Role::Index
            && (self.cfg.collections || self.cfg.canonical.uses_inlinks()))
        .then(|| parts.map(|p| p.links().map(str::to_owned).collect()))
        .flatten();
        let sketch = signed.as_ref().map(|sg| &sg.sketch);
        let caps = self.cfg.signer.caps;
        if parts.is_some_and(|p| {
            p.links_omitted > 0 || p.chunks_omitted > 0 || p.paragraphs.len() > caps.paragraphs
        }) {
            self.state.stats.lists_capped += 1;
        }
        self.emitter.emit(SignatureEvent {
            schema: OutputKind::Signatures.schema().into(),
            event_id: String::new(),
            url: page.url.clone(),
            fetched_at: at,
            crawl_id: page.crawl_id.clone(),
            status: page.status,
            params: self.params.clone(),
            content: signed.as_ref().map(|sg| &*sg.content),
            change,
        });
        if downstream && confirmed {
            self.renew_downstream(&page.url, at_ms);
        } else if downstream && !inconclusive {
            self.observe_exact(&page.url, checksum, at_ms);
        }
        let fetch = near::Fetch {
            url: &page.url,
            sketch,
            fetched_at_ms: at_ms,
            crawl_id: page.crawl_id.as_deref(),
        };
        // A 304 is a page of its round when the window holds its content.
        let mut held = false;
        match &mut self.state.sequencer {
            _ if confirmed => held = self.renew_window(&fetch),
            _ if inconclusive => {}
            Some(s) => self.steps.extend(s.observe(&fetch)),
            None => {
                let urls = &mut self.state.urls;
                (self.state.near).observe_with(&fetch, |u| urls.url(u), &mut self.emitter)
            }
        }
        // Pages the page budget evicted leave what the topology keeps of their URLs too.
        let over_budget = match &mut self.state.sequencer {
            Some(s) => s.take_over_budget(),
            None => self.state.near.take_over_budget(),
        };
        for url in &over_budget {
            self.state.history.forget(url);
        }
        if downstream {
            self.evict_downstream(&over_budget);
        }
        let changes: Vec<near::PairChange> = self.state.near.take_changes().collect();
        match self.state.role {
            Role::Index => {
                let record = IndexedPage {
                    format: INTERNAL_FORMAT,
                    state: self.state_fingerprint.clone(),
                    url: page.url.clone(),
                    fetched_at_ms: at_ms,
                    crawl_id: page.crawl_id.clone(),
                    ip: page.ip.clone(),
                    checksum,
                    inconclusive,
                    confirmed,
                    links,
                    newest_before,
                    watermark,
                    newest: self.state.clock.newest(),
                    origin: match source {
                        Source::Kafka {
                            partition, offset, ..
                        } => (*partition, *offset),
                        Source::File { line, .. } => (0, *line as i64),
                    },
                    in_window: match &self.state.sequencer {
                        Some(s) => s.holds(&page.url),
                        None => self.state.near.sketch_of(&page.url).is_some(),
                    },
                    left: self.state.near.take_removed(),
                    over_budget,
                    changes,
                };
                let key = record.url.clone();
                let value = if self.state.sequencer.is_some() {
                    let steps = std::mem::take(&mut self.steps);
                    postcard::to_stdvec(&ShardedPage {
                        page: record,
                        answers: vec![Vec::new(); filings(&steps)],
                        steps,
                    })
                } else {
                    postcard::to_stdvec(&record)
                };
                self.indexed = Some((key, value.expect("an indexed page serializes")));
            }
            _ => {
                self.update_clusters(at_ms, changes);
            }
        }
        match &mut self.state.evolution {
            Some(ev) if !inconclusive => ev.fetched(&page.url, checksum.is_some()),
            Some(ev) if held => ev.unchanged(&page.url),
            _ => {}
        }
    }

    /// Moves the windows downstream of the pairs (exact groups, in-links, host addresses) to
    /// `watermark`.
    fn advance_downstream(&mut self, watermark: i64) {
        self.state.exact.advance(watermark, &mut self.emitter);
        if let Some(l) = &mut self.state.inlinks {
            l.advance(watermark);
        }
        if self.runs_mirrors() {
            let horizon = watermark.saturating_sub(self.cfg.window_ms);
            self.state.mirrors.forget_addresses(horizon);
        }
    }

    /// The URLs the sketch window's page budget evicted leave the exact groups and the
    /// in-links, which otherwise keep them until their fetch leaves the window by event time.
    fn evict_downstream(&mut self, urls: &[Arc<str>]) {
        for url in urls {
            self.state.exact.evict(url, &mut self.emitter);
            if let Some(l) = &mut self.state.inlinks {
                l.forget(url);
            }
        }
    }

    /// What the parts downstream of the pairs learn from a fetch before its pairs: the host's
    /// address (mirrors) and the page's out-links (collections, in-links).
    fn fetched_downstream(&mut self, f: &DownstreamFetch<'_>) {
        if self.runs_mirrors() {
            self.fetched_mirrors(f);
        }
        if let Some(l) = &mut self.state.inlinks {
            l.fetched(f.url, f.fetched_at_ms, f.links.map(Links::iter));
        }
    }

    /// What mirrors and collections learn from a fetch before its pairs.
    fn fetched_mirrors(&mut self, f: &DownstreamFetch<'_>) {
        if let (true, Some(ip)) = (self.cfg.mirrors, f.ip) {
            self.state.mirrors.host_address(f.url, ip, f.fetched_at_ms);
        }
        if self.cfg.collections || self.cfg.hm_veto.is_some() {
            let urls = &mut self.state.urls;
            (self.state.collections)
                .fetched_with(f.url, f.links.map(Links::iter), &mut |u| urls.url(u));
        }
    }

    /// True where mirrors and collections run: in the all-in-one topology, in the mirror stage,
    /// and in the cluster stage unless a mirror stage runs them (`mirror_stage`).
    fn runs_mirrors(&self) -> bool {
        match self.state.role {
            Role::All | Role::Mirror => true,
            Role::Cluster => !self.cfg.mirror_stage,
            Role::Index | Role::Shard | Role::Verify => false,
        }
    }

    /// A 304 (Not Modified) of `f`'s URL: the content the sketch window holds for it, if any,
    /// is fetched again at `f`'s time, which moves its time as a fetch of the same content
    /// would (nothing is verified again: the window sees the content unchanged). False when the
    /// window holds no content for it.
    fn renew_window(&mut self, f: &near::Fetch<'_>) -> bool {
        let held = match &self.state.sequencer {
            Some(s) => s.sketch_of(f.url),
            None => self.state.near.sketch_of(f.url),
        };
        let Some(sketch) = held.cloned() else {
            return false;
        };
        let fetch = near::Fetch {
            sketch: Some(&sketch),
            ..*f
        };
        match &mut self.state.sequencer {
            Some(s) => self.steps.extend(s.observe(&fetch)),
            None => self.state.near.observe(&fetch, &mut self.emitter),
        }
        true
    }

    /// A 304 (Not Modified) of `url` at `at_ms`, downstream of the pairs: the exact groups and
    /// the in-links keep the URL's content as if fetched then.
    fn renew_downstream(&mut self, url: &str, at_ms: i64) {
        self.state.exact.renew(url, at_ms);
        if let Some(l) = &mut self.state.inlinks {
            l.renew(url, at_ms);
        }
    }

    fn observe_exact(&mut self, url: &str, checksum: Option<u128>, fetched_at_ms: i64) {
        self.state.exact.observe(
            &exact::Observation {
                url,
                checksum,
                fetched_at_ms,
            },
            &mut self.state.urls,
            &mut self.emitter,
        );
    }

    /// The index stage: the record for the cluster stage of the page just applied (key, value).
    pub fn take_indexed(&mut self) -> Option<(String, Vec<u8>)> {
        self.indexed.take()
    }

    /// The shard and verify stages of an index split by key: applies one record of the steps
    /// topic's `partition` (a shard stage: shard `partition` of `key_shards`, which adds its
    /// answers and passes the record on through [`Self::take_indexed`]) or of the topic after
    /// the last shard (the verify stage: the pair events go to `out`, the record for the
    /// cluster stage to [`Self::take_indexed`]). The pairs are exactly those of one index
    /// stage. An error means the stages disagree (the steps topic has more partitions than
    /// `key_shards`, a shard stage did not pass the record on, or a stage of another role read
    /// it): the record is not applied.
    pub fn apply_sharded(
        &mut self,
        record: Sharded,
        partition: i32,
        out: &mut Vec<Emit>,
    ) -> Result<(), InternalRecordError> {
        let mut r = record.0;
        // Stages of another `key_shards` have another state fingerprint: the reader refused
        // their records.
        let n = self.cfg.key_shards;
        let files = filings(&r.steps);
        if files != r.answers.len() {
            return Err(InternalRecordError(format!(
                "{files} filings with answers for {}",
                r.answers.len()
            )));
        }
        self.state.stats.records += 1;
        match self.state.role {
            Role::Shard => {
                let i = usize::try_from(partition)
                    .ok()
                    .filter(|&i| i < n)
                    .ok_or_else(|| {
                        InternalRecordError(format!(
                            "a record of partition {partition} of the steps topic, which needs exactly key_shards = {n} partitions"
                        ))
                    })?;
                let near_cfg = self.state.near.config();
                let shard = self
                    .state
                    .key_shards
                    .entry(partition)
                    .or_insert_with(|| ShardState {
                        stage: near::KeyShardStage::new(near_cfg, i, n),
                        origin_upto: BTreeMap::new(),
                    });
                if already_applied(&mut shard.origin_upto, r.page.origin) {
                    self.state.stats.repeats_skipped += 1;
                    return Ok(());
                }
                let mut answers = r.answers.iter_mut();
                for step in &r.steps {
                    if let Some(a) = shard.stage.apply(step) {
                        answers.next().expect("counted above").push(a);
                    }
                }
                let value = postcard::to_stdvec(&*r).expect("a sharded page serializes");
                self.indexed = Some((r.page.url, value));
                Ok(())
            }
            Role::Verify => {
                if let Some(short) = r.answers.iter().find(|a| a.len() != n) {
                    return Err(InternalRecordError(format!(
                        "a filing answered by {} of {n} key shards (every shard stage must pass it on)",
                        short.len()
                    )));
                }
                if self.is_repeat(r.page.origin) {
                    return Ok(());
                }
                self.state
                    .stats
                    .count(r.page.checksum.is_some(), r.page.inconclusive);
                self.emitter.set_at(&format_time(r.page.fetched_at_ms));
                let mut answers = r.answers.iter();
                for step in &r.steps {
                    let a: &[near::ShardAnswer] = match step {
                        near::Step::File { .. } => answers.next().expect("counted above"),
                        near::Step::Remove { .. } => &[],
                    };
                    self.state.near.follow(step, a, &mut self.emitter);
                }
                let mut page = r.page;
                page.changes = self.state.near.take_changes().collect();
                page.left = self.state.near.take_removed();
                let value = postcard::to_stdvec(&page).expect("an indexed page serializes");
                self.indexed = Some((page.url, value));
                self.drain_outputs(out);
                Ok(())
            }
            role => Err(InternalRecordError(format!(
                "a record of the key shards given to a stage of role {role:?}"
            ))),
        }
    }

    /// The cluster stage: applies one record of the index stage ([`Self::take_indexed`],
    /// read back by [`InternalReader::indexed`]), appending the outputs it causes to `out`: exactly the
    /// clusters, hints, mirrors and collections the all-in-one topology emits for that page
    /// (with `mirror_stage`, those but the mirrors and collections, whose input goes to
    /// [`Self::take_indexed`] for the mirror stage).
    pub fn apply_indexed(&mut self, record: Indexed, out: &mut Vec<Emit>) {
        let mut r = *record.0;
        if !self.follow_indexed(&r) {
            return;
        }
        if r.confirmed {
            self.renew_downstream(&r.url, r.fetched_at_ms);
        } else if !r.inconclusive {
            self.fetched_downstream(&r.fetch());
            self.observe_exact(&r.url, r.checksum, r.fetched_at_ms);
        }
        self.evict_downstream(&r.over_budget);
        let mirrors_here = self.runs_mirrors();
        if mirrors_here {
            self.follow_window(&r);
        }
        let moves = self.update_clusters(r.fetched_at_ms, std::mem::take(&mut r.changes));
        if !mirrors_here {
            if !self.cfg.collections {
                r.links = None;
            }
            let record = ClusteredPage { page: r, moves };
            let value = postcard::to_stdvec(&record).expect("a clustered page serializes");
            self.indexed = Some((record.page.url, value));
        }
        self.drain_outputs(out);
    }

    /// The mirror stage (`mirror_stage`): applies one record of the cluster stage
    /// ([`Self::take_indexed`], read back by [`InternalReader::clustered`]), appending the
    /// mirrors and collections it causes to `out`: exactly those the all-in-one topology emits
    /// for that page.
    pub fn apply_clustered(&mut self, record: Clustered, out: &mut Vec<Emit>) {
        let ClusteredPage { page: r, moves } = *record.0;
        if !self.follow_indexed(&r) {
            return;
        }
        if !r.inconclusive {
            self.fetched_mirrors(&r.fetch());
        }
        self.follow_window(&r);
        let members = &mut self.state.members;
        for m in &moves {
            if let Some(c) = m.from {
                if let Some(set) = members.get_mut(&c) {
                    set.remove(&m.url);
                    if set.is_empty() {
                        members.remove(&c);
                    }
                }
            }
            if let Some(c) = m.to {
                members.entry(c).or_default().insert(m.url.clone());
            }
        }
        if self.cfg.mirrors {
            self.state.mirrors.apply(&moves, &mut self.emitter);
        }
        self.drain_outputs(out);
    }

    /// The cluster and mirror stages: counts a record of the stage before, and unless it is a
    /// repeat (then false), sets the page's event time and moves the clock, the collections
    /// epoch and the windows downstream of the pairs as the index stage moved its own.
    fn follow_indexed(&mut self, r: &IndexedPage) -> bool {
        self.state.stats.records += 1;
        if self.is_repeat(r.origin) {
            return false;
        }
        self.state.stats.count(r.checksum.is_some(), r.inconclusive);
        self.emitter.set_at(&format_time(r.fetched_at_ms));
        // The epoch closes at the newest event time before this page. The clock holds it since
        // the previous record; this matters when the stage starts on a topic whose earlier
        // records are gone (retention).
        let held = self.state.clock.watermark();
        self.state.clock.follow(held, r.newest_before);
        self.maybe_close_epoch(r.crawl_id.as_deref(), r.fetched_at_ms);
        let before = self.state.clock.watermark();
        self.state.clock.follow(r.watermark, r.newest);
        if r.watermark > before {
            self.advance_downstream(r.watermark);
        }
        true
    }

    /// Follows the index stage's window (what collections keep) through one of its records.
    fn follow_window(&mut self, r: &IndexedPage) {
        for url in &r.left {
            self.state.window.remove(url);
        }
        if r.in_window {
            self.state.window.insert(Arc::from(r.url.as_str()));
        } else {
            self.state.window.remove(r.url.as_str());
        }
    }

    /// How far ahead of the event time a record may be dated before it is a leap: the
    /// configured lead, or the window's length.
    fn max_lead_ms(&self) -> i64 {
        self.cfg
            .max_event_time_lead_ms
            .unwrap_or(self.cfg.window_ms)
    }

    /// Records dated so far ahead of the event time that their time was held back (see
    /// [`clock`]): a crawler's clock or dates to look at, when not 0.
    pub fn event_time_leaps(&self) -> u64 {
        self.state.clock.held()
    }

    /// A collections epoch closes when the crawl round changes, or a day of event time after
    /// the last one (streams without rounds).
    fn maybe_close_epoch(&mut self, crawl_id: Option<&str>, at_ms: i64) {
        let round_changed = crawl_id.is_some() && crawl_id != self.state.epoch.0.as_deref();
        if self.state.epoch.1 == i64::MIN {
            self.state.epoch = (crawl_id.map(str::to_owned), at_ms);
        } else if round_changed || at_ms >= self.state.epoch.1 + EPOCH_MS {
            // The epoch's events carry the time it ended at (the latest fetch before this
            // page), so they belong to the round they describe.
            let now = self.emitter.at().to_owned();
            self.emitter.set_at(&format_time(self.state.clock.newest()));
            self.close_epoch();
            self.emitter.set_at(&now);
            self.state.epoch = (crawl_id.map(str::to_owned), at_ms);
        }
    }

    fn close_epoch(&mut self) {
        if !self.cfg.collections && self.cfg.hm_veto.is_none() || !self.runs_mirrors() {
            return;
        }
        // The index's window: its own, or as the index stage reported it.
        let (near, window, role) = (&self.state.near, &self.state.window, self.state.role);
        let windowed = |url: &str| match role {
            Role::Cluster | Role::Mirror => window.contains(url),
            _ => near.sketch_of(url).is_some(),
        };
        self.state.collections.prune(windowed);
        self.state.rps.retain(|url, _| windowed(url));
        if self.cfg.collections {
            // The clusters: their members as the mirror stage follows them, or the clusters.
            let members: Vec<Vec<&str>> = match role {
                Role::Mirror => (self.state.members.values())
                    .map(|m| m.iter().map(|u| &**u).collect())
                    .collect(),
                _ => (self.state.similar.members_by_cluster().into_iter())
                    .map(|(_, m)| m)
                    .collect(),
            };
            let urls = &mut self.state.urls;
            (self.state.collections).epoch_with(members, &mut self.emitter, &mut |u| urls.url(u));
        }
        if let Some(veto) = self.cfg.hm_veto {
            self.hm_veto(veto);
        }
    }

    /// Seed 002 as a pair signal: the Hyperlink Map over the window's link graph, and the
    /// retraction of the live `very_similar` pairs whose link contexts disagree.
    fn hm_veto(&mut self, veto: replicas::HmVeto) {
        let Some(k) = self.state.rps.values().next().map(|rp| rp.len()) else {
            return;
        };
        let mut urls: Vec<&Arc<str>> = self.state.rps.keys().collect();
        urls.sort_unstable();
        let mut snap = replicas::Snapshot::new(k);
        for url in urls {
            snap.add(
                url,
                &self.state.rps[url],
                self.state.collections.links_of(url),
            );
        }
        let hm = snap.hyperlink_map(veto.gamma, veto.iterations);
        let sig = |url: &str| {
            snap.index_of(url)
                .map(|i| &hm[i as usize * k..(i as usize + 1) * k])
        };
        let vetoed: Vec<(String, String)> = self
            .state
            .near
            .live_pairs()
            .into_iter()
            .filter(|(a, b, level)| {
                *level == PairLevel::VerySimilar
                    && matches!((sig(a), sig(b)), (Some(x), Some(y)) if veto.rejects(x, y))
            })
            .map(|(a, b, _)| (a, b))
            .collect();
        let crawl_id = self.state.epoch.0.clone();
        for (a, b) in vetoed {
            self.state
                .near
                .veto(&a, &b, crawl_id.as_deref(), &mut self.emitter);
        }
        let changes = self.state.near.take_changes().collect();
        self.update_clusters(self.state.clock.watermark(), changes);
    }

    /// Ends a replay: closes the last collections epoch and crawl round, appending the outputs
    /// that causes to `out`.
    pub fn finish(&mut self, out: &mut Vec<Emit>) {
        if self.state.epoch.1 != i64::MIN {
            self.close_epoch();
        }
        if let Some(ev) = &mut self.state.evolution {
            ev.close(&self.state.similar);
        }
        for e in self.emitter.drain() {
            *self.state.stats.outputs.entry(e.kind).or_default() += 1;
            out.push(e);
        }
    }

    /// The collections of the last epoch.
    pub fn collections(&self) -> &collections::Collections {
        &self.state.collections
    }

    /// Closes the last crawl round and returns the evolution figures of every round (empty
    /// unless `track_evolution` is on).
    pub fn finish_evolution(&mut self) -> &[evolution::RoundFigures] {
        match &mut self.state.evolution {
            Some(ev) => {
                ev.close(&self.state.similar);
                ev.figures()
            }
            None => &[],
        }
    }

    /// Feeds the pair changes of the last step to the clusters of both levels; the moves among
    /// the `very_similar` clusters they caused.
    fn update_clusters(
        &mut self,
        at_ms: i64,
        changes: Vec<near::PairChange>,
    ) -> Vec<clusters::Move> {
        let identical = |l: Option<PairLevel>| {
            matches!(l, Some(PairLevel::VirtuallyIdentical | PairLevel::Exact))
        };
        for ch in changes {
            for (clusters, before, after) in [
                (
                    &mut self.state.similar,
                    ch.before.is_some(),
                    ch.after.is_some(),
                ),
                (
                    &mut self.state.identical,
                    identical(ch.before),
                    identical(ch.after),
                ),
            ] {
                match (before, after) {
                    (false, true) => {
                        let counts = |u: &str| self.state.inlinks.as_ref().map_or(0, |l| l.of(u));
                        clusters.add_pair_shared(&ch.a, &ch.b, at_ms, &counts, &mut self.emitter)
                    }
                    (true, false) => clusters.remove_pair(&ch.a, &ch.b, &mut self.emitter),
                    _ => {}
                }
            }
        }
        if let Some(l) = &mut self.state.inlinks {
            let mut changed = l.take_changed();
            changed.sort_unstable();
            changed.dedup();
            for url in changed {
                let n = l.of(&url);
                self.state.similar.set_inlinks(&url, n, &mut self.emitter);
                self.state.identical.set_inlinks(&url, n, &mut self.emitter);
            }
        }
        let identical: Vec<clusters::Move> = self.state.identical.take_moves().collect();
        let similar: Vec<clusters::Move> = self.state.similar.take_moves().collect();
        match self.cfg.hint_level {
            PairLevel::VirtuallyIdentical => {
                self.state
                    .hints
                    .apply(&self.state.identical, &identical, &mut self.emitter)
            }
            _ => self
                .state
                .hints
                .apply(&self.state.similar, &similar, &mut self.emitter),
        }
        if self.cfg.mirrors && self.runs_mirrors() {
            self.state.mirrors.apply(&similar, &mut self.emitter);
        }
        similar
    }

    /// The crawl hints' counters.
    pub fn hint_stats(&self) -> &hints::HintStats {
        self.state.hints.stats()
    }

    /// The mirror stage (for inspection).
    pub fn mirrors(&self) -> &mirrors::Mirrors {
        &self.state.mirrors
    }

    /// The clusters of a level (`very_similar` or `virtually_identical`; exact clusters are
    /// [`exact::ExactIndex`]'s).
    pub fn clusters(&self, level: PairLevel) -> Option<&clusters::Clusters> {
        match level {
            PairLevel::VerySimilar => Some(&self.state.similar),
            PairLevel::VirtuallyIdentical => Some(&self.state.identical),
            PairLevel::Exact => None,
        }
    }
}

/// A record decoded and signed, ready for [`Topology::apply`].
pub struct Prepared(Result<Box<PreparedPage>, DecodeError>);

impl Prepared {
    /// A record refused before it could be prepared, for a reason the reader found (a WARC
    /// record too large to hold, of which the reader kept only the start): applied, it is a
    /// dead letter with `reason` and `detail`, its payload the bytes given to `apply`.
    pub fn rejected(reason: DeadLetterReason, detail: impl Into<String>) -> Prepared {
        Prepared(Err(DecodeError::new(reason, detail)))
    }
}

/// A decoded page with its signatures.
struct PreparedPage {
    page: PageEvent,
    signed: Option<Signed>,
    /// For a page read back from the sign stage: where that stage read it (partition, offset
    /// of the input topic), so a repeat is recognised.
    origin: Option<(i32, i64)>,
}

/// Layout of the internal records between the sign and index stages; bump on any change.
const INTERNAL_FORMAT: u32 = 9;

/// A signed page as the sign stage hands it to the index stage (the body stays behind: the
/// signatures are all the rest of the topology reads of it).
#[derive(serde::Serialize, serde::Deserialize)]
struct InternalPage {
    format: u32,
    /// [`Config::params_fingerprint`] of the signing configuration.
    params: String,
    url: String,
    fetched_at: String,
    fetched_at_ms: i64,
    status: u16,
    content_type: Option<String>,
    ip: Option<String>,
    crawl_id: Option<String>,
    signed: Option<Signed>,
    /// Where the sign stage read the record (partition, offset of the input topic).
    origin: (i32, i64),
}

/// What the sign stage publishes for one input record.
#[derive(Debug)]
pub enum SignOutput {
    /// A decodable record: the internal record for the index stage, keyed by URL. It goes to
    /// the partition of the internal topic with the input partition's number, so each of them
    /// holds one input partition's records in their order, whichever instance signed them.
    Internal {
        /// The page's URL (the record key).
        key: String,
        /// The encoded page with its signatures.
        value: Vec<u8>,
    },
    /// A record that cannot be decoded: its dead letter.
    DeadLetter(Emit),
}

/// A record of the index stage for the cluster stage, read back.
pub struct Indexed(Box<IndexedPage>);

/// A record of an index stage split by key, read back ([`Topology::apply_sharded`]).
pub struct Sharded(Box<ShardedPage>);

/// A record of the cluster stage for the mirror stage, read back.
pub struct Clustered(Box<ClusteredPage>);

/// The filings among `steps` (each gets the key shards' answers).
fn filings(steps: &[near::Step]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, near::Step::File { .. }))
        .count()
}

/// True when `origin` (partition, offset of a previous stage's input) is at or below the last
/// one applied of its partition; otherwise notes it as applied.
fn already_applied(upto: &mut BTreeMap<i32, i64>, (partition, offset): (i32, i64)) -> bool {
    match upto.get(&partition) {
        Some(&last) if offset <= last => true,
        _ => {
            upto.insert(partition, offset);
            false
        }
    }
}

/// Reads the split topology's internal records back (on any thread), refusing those of another
/// format or made under other parameters. It holds the parameter fingerprints, so they are
/// computed once, not for every record.
pub struct InternalReader {
    params: String,
    state: String,
}

impl InternalReader {
    /// A reader for stages of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        InternalReader {
            params: cfg.params_fingerprint(),
            state: cfg.state_fingerprint(),
        }
    }

    /// The index stage: a page from the sign stage's internal record, ready for
    /// [`Topology::apply`] (where it gives exactly what the original input record gives).
    pub fn signed(&self, value: &[u8]) -> Result<Prepared, InternalRecordError> {
        let p: InternalPage = read_internal(value, |p: &InternalPage| p.format)?;
        same_parameters("signed", &p.params, &self.params)?;
        let page = PageEvent {
            url: p.url,
            fetched_at: p.fetched_at,
            fetched_at_ms: p.fetched_at_ms,
            status: p.status,
            content_type: p.content_type,
            ip: p.ip,
            crawl_id: p.crawl_id,
            body: None,
        };
        Ok(Prepared(Ok(Box::new(PreparedPage {
            page,
            signed: p.signed,
            origin: Some(p.origin),
        }))))
    }

    /// The cluster stage: a record of [`Topology::take_indexed`], for
    /// [`Topology::apply_indexed`].
    pub fn indexed(&self, value: &[u8]) -> Result<Indexed, InternalRecordError> {
        let r: IndexedPage = read_internal(value, |r: &IndexedPage| r.format)?;
        same_parameters("indexed", &r.state, &self.state)?;
        Ok(Indexed(Box::new(r)))
    }

    /// The mirror stage: a record of the cluster stage ([`Topology::take_indexed`] with
    /// `mirror_stage`), for [`Topology::apply_clustered`].
    pub fn clustered(&self, value: &[u8]) -> Result<Clustered, InternalRecordError> {
        let r: ClusteredPage = read_internal(value, |r: &ClusteredPage| r.page.format)?;
        same_parameters("clustered", &r.page.state, &self.state)?;
        Ok(Clustered(Box::new(r)))
    }

    /// The shard and verify stages of an index split by key: a record of the index stage or
    /// of a key shard, for [`Topology::apply_sharded`].
    pub fn sharded(&self, value: &[u8]) -> Result<Sharded, InternalRecordError> {
        let r: ShardedPage = read_internal(value, |r: &ShardedPage| r.page.format)?;
        same_parameters("sharded", &r.page.state, &self.state)?;
        Ok(Sharded(Box::new(r)))
    }
}

/// An internal record of the split topology, read back: one value of the current format and
/// nothing after it.
fn read_internal<T: serde::de::DeserializeOwned>(
    value: &[u8],
    format: impl Fn(&T) -> u32,
) -> Result<T, InternalRecordError> {
    let (r, rest): (T, &[u8]) =
        postcard::take_from_bytes(value).map_err(|e| InternalRecordError(e.to_string()))?;
    if format(&r) != INTERNAL_FORMAT || !rest.is_empty() {
        return Err(InternalRecordError(format!(
            "format {} (this is {INTERNAL_FORMAT}), {} bytes left over",
            format(&r),
            rest.len()
        )));
    }
    Ok(r)
}

/// Refuses an internal record made (`what`: signed, indexed) under other parameters.
fn same_parameters(what: &str, found: &str, ours: &str) -> Result<(), InternalRecordError> {
    if found == ours {
        Ok(())
    } else {
        Err(InternalRecordError(format!(
            "{what} under parameters {found}, this stage's are {ours}"
        )))
    }
}

/// Why an internal record cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("an internal record of the split topology cannot be read ({0}); its stages must run the same neardup version and parameters")]
pub struct InternalRecordError(String);

impl Prepared {
    /// The page's event time (`fetched_at`), or `None` for a record that cannot be decoded.
    pub fn event_time_ms(&self) -> Option<i64> {
        self.0.as_ref().ok().map(|p| p.page.fetched_at_ms)
    }

    /// For a page read back from the sign stage: the input partition and offset that stage
    /// read it at.
    pub fn origin(&self) -> Option<(i32, i64)> {
        self.0.as_ref().ok()?.origin
    }

    /// What the sketch index sees of the page: its URL and its sketch (`None` for a fetch
    /// without content), or `None` for a record that cannot be decoded. For benchmarks and tools
    /// that drive a [`near::NearIndex`] themselves.
    pub fn index_input(&self) -> Option<(&str, Option<&near::Sketch>)> {
        let p = self.0.as_ref().ok()?;
        Some((&p.page.url, p.signed.as_ref().map(|s| &s.sketch)))
    }
}

/// The split topology's sign stage: turns each prepared input record into what the stage
/// publishes. It holds the signing parameters' fingerprint, so that is computed once, not for
/// every record.
pub struct SignStage {
    params: String,
    decode: DecodeLimits,
    /// What the stages after it read of a page's signatures besides the signature event's
    /// `content` (the same numbers, already written as JSON): the rest is left out of the
    /// internal record.
    keep: KeptParts,
    /// [`Config::max_output_bytes`]: a larger record for the index stage becomes a dead letter.
    max_output_bytes: usize,
}

/// The parts of a page's signatures the topology reads besides its signature event's content,
/// under a configuration (the checksums and Alg. B always: the change since the last fetch).
#[derive(Debug, Clone, Copy)]
struct KeptParts {
    /// Collections, the in-link ranking, the Hyperlink Map and evolution read out-links.
    links: bool,
    /// The Hyperlink Map veto reads the random projection.
    rp: bool,
    /// Evolution reads the paragraph fingerprints.
    paragraphs: bool,
}

impl KeptParts {
    fn of(cfg: &Config) -> Self {
        KeptParts {
            links: cfg.collections
                || cfg.canonical.uses_inlinks()
                || cfg.hm_veto.is_some()
                || cfg.track_evolution,
            rp: cfg.hm_veto.is_some(),
            paragraphs: cfg.track_evolution,
        }
    }

    /// `parts` without what the topology does not read; the chunks it never does (they are in
    /// the content).
    fn of_parts(self, p: &SignedParts) -> SignedParts {
        fn kept<T: Clone + Default>(keep: bool, v: &T) -> T {
            if keep {
                v.clone()
            } else {
                T::default()
            }
        }
        SignedParts {
            charset: p.charset.clone(),
            chunks: Vec::new(),
            paragraphs: kept(self.paragraphs, &p.paragraphs),
            rp: kept(self.rp, &p.rp),
            links: kept(self.links, &p.links),
            link_ends: kept(self.links, &p.link_ends),
            ..*p
        }
    }
}

impl SignStage {
    /// The sign stage of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        SignStage {
            params: cfg.params_fingerprint(),
            decode: cfg.decode.clone(),
            keep: KeptParts::of(cfg),
            max_output_bytes: cfg.max_output_bytes,
        }
    }

    /// The record for the index stage, or the dead letter of a record that cannot be decoded
    /// (`raw` and `source` are the input record and where it came from), counted in `topo`'s
    /// stats as the all-in-one stage counts them (for the stage's summary and metrics).
    pub fn output(
        &self,
        prepared: Prepared,
        raw: &[u8],
        source: &Source,
        topo: &mut Topology,
    ) -> SignOutput {
        let stats = &mut topo.state.stats;
        stats.records += 1;
        match &prepared.0 {
            Ok(p) => stats.count(p.signed.is_some(), p.page.is_inconclusive()),
            Err(e) => {
                *stats.dead_letters.entry(e.reason).or_default() += 1;
                *stats.outputs.entry(OutputKind::DeadLetter).or_default() += 1;
            }
        }
        match prepared.0 {
            Ok(p) => {
                let PreparedPage { page, signed, .. } = *p;
                let key = page.url.clone();
                let internal = InternalPage {
                    format: INTERNAL_FORMAT,
                    params: self.params.clone(),
                    url: page.url,
                    fetched_at: page.fetched_at,
                    fetched_at_ms: page.fetched_at_ms,
                    status: page.status,
                    content_type: page.content_type,
                    ip: page.ip,
                    crawl_id: page.crawl_id,
                    signed: signed.map(|sg| Signed {
                        parts: Arc::new(self.keep.of_parts(&sg.parts)),
                        ..sg
                    }),
                    origin: match source {
                        Source::Kafka {
                            partition, offset, ..
                        } => (*partition, *offset),
                        Source::File { line, .. } => (0, *line as i64),
                    },
                };
                let value = postcard::to_stdvec(&internal).expect("a signed page serializes");
                let size = key.len() + value.len();
                if size <= self.max_output_bytes {
                    return SignOutput::Internal { key, value };
                }
                // Its signature event would be about as large: the all-in-one topology
                // publishes the dead letter of that instead, and indexes the page.
                let reason = DeadLetterReason::OutputTooLarge;
                *stats.dead_letters.entry(reason).or_default() += 1;
                *stats.outputs.entry(OutputKind::DeadLetter).or_default() += 1;
                let detail = format!(
                    "its record for the index stage is {size} bytes, over the {}-byte output limit (max_output_bytes): the page was not indexed; to index such pages, raise max_output_bytes and the internal topic's max.message.bytes",
                    self.max_output_bytes
                );
                self.dead_letter(DecodeError { reason, detail }, raw, source)
            }
            Err(e) => self.dead_letter(e, raw, source),
        }
    }

    /// The dead letter of the input record `raw` from `source`.
    fn dead_letter(&self, e: DecodeError, raw: &[u8], source: &Source) -> SignOutput {
        let mut emitter = Emitter::new();
        emitter.emit(e.into_dead_letter(raw, source, &self.decode));
        let dead = emitter.drain().next().expect("one dead letter");
        SignOutput::DeadLetter(dead)
    }
}

/// The stateless half of processing: decoding a record and signing its page depend only on
/// the record and the configuration, so any number of preparers (one per thread; each keeps
/// its own buffers) can work ahead of the one [`Topology`] that applies the results in order.
pub struct Preparer {
    decode: DecodeLimits,
    emit_minvalues: bool,
    signer: Signer,
    cache: Option<std::sync::Arc<sign_cache::SignCache>>,
}

impl Preparer {
    /// A preparer for topologies of configuration `cfg`.
    pub fn new(cfg: &Config) -> Self {
        Preparer {
            decode: cfg.decode.clone(),
            emit_minvalues: cfg.emit_minvalues,
            signer: Signer::new(cfg.signer.clone()),
            cache: None,
        }
    }

    /// How many paragraph fingerprints a signature event carries.
    fn max_paragraphs(&self) -> usize {
        self.signer.config().caps.paragraphs
    }

    /// A preparer that looks pages up in `cache` before signing them, and caches what it signs.
    /// Every preparer sharing a cache must have the same configuration; the results do not
    /// depend on the cache.
    pub fn with_cache(cfg: &Config, cache: std::sync::Arc<sign_cache::SignCache>) -> Self {
        Preparer {
            cache: Some(cache),
            ..Preparer::new(cfg)
        }
    }

    /// Decodes and signs one record.
    pub fn prepare(&mut self, raw: &[u8]) -> Prepared {
        Prepared(self.prepare_page(raw).map(Box::new))
    }

    fn prepare_page(&mut self, raw: &[u8]) -> Result<PreparedPage, DecodeError> {
        let envelope = decode::envelope(raw, &self.decode)?;
        let content = envelope.page.has_content() && envelope.has_body();
        // A page the cache knows by its body's JSON text needs no decoding of its body.
        let key = match (&self.cache, envelope.body_literal()) {
            (Some(cache), Some((literal, form))) if content => {
                let key = sign_cache::BodyKey::new(literal, form);
                if let Some(parts) = cache.get(&sign_cache::Fetch::new(&envelope.page, key)) {
                    return Ok(PreparedPage {
                        signed: Some(Signed::new(
                            parts,
                            self.emit_minvalues,
                            self.max_paragraphs(),
                        )),
                        page: envelope.page,
                        origin: None,
                    });
                }
                Some(key)
            }
            _ => None,
        };
        let mut page = envelope.into_page(&self.decode)?;
        // Only signing reads the body: it is freed here, on the preparing thread, rather than
        // carried to the one thread that applies pages in order.
        // An instant redirect (see `Extraction::redirects`) has no content, as a 3xx fetch has
        // none; it is not cached, so each fetch of it is read again (such stubs are small).
        let signed = match page.body.take() {
            Some(body) if content => self.sign_uncached(&page, &body).map(|parts| {
                let parts = Arc::new(parts);
                if let (Some(cache), Some(key)) = (&self.cache, key) {
                    cache.put(&sign_cache::Fetch::new(&page, key), Arc::clone(&parts));
                }
                Signed::new(parts, self.emit_minvalues, self.max_paragraphs())
            }),
            _ => None,
        };
        Ok(PreparedPage {
            page,
            signed,
            origin: None,
        })
    }

    /// The page's signatures; `None` when it is an instant redirect.
    fn sign_uncached(&mut self, page: &PageEvent, body: &Body) -> Option<SignedParts> {
        let checksum = xxhash_rust::xxh3::xxh3_128(body.raw());
        let page_url = url::Url::parse(&page.url).ok();
        let content_type = page.content_type.as_deref();
        let (html, charset) = match body {
            // Not text: its characters would be noise (see `charset::is_binary`).
            Body::Text(html) if charset::is_binary(html.as_bytes(), content_type) => {
                (std::borrow::Cow::Borrowed(""), charset::BINARY)
            }
            Body::Text(html) => (std::borrow::Cow::Borrowed(html.as_str()), "UTF-8"),
            // decode() already proved the bytes readable; a failure here cannot happen, but is
            // handled as empty text rather than a panic.
            Body::Bytes(bytes) => charset::read_body(bytes, content_type)
                .unwrap_or((std::borrow::Cow::Borrowed(""), "UTF-8")),
        };
        let caps = self.signer.config().caps;
        let sig = match charset::is_plain_text(content_type) {
            true => self.signer.sign_plain(&html),
            false => self.signer.sign(&html, page_url.as_ref()),
        };
        if sig.extraction.redirects() {
            return None;
        }
        // The links the cap keeps: all of them, without a list of their own, on almost
        // every page.
        let ((links, link_ends), links_omitted) = match caps.keep_links(sig.extraction.links()) {
            None => (concat_links(sig.extraction.links()), 0),
            Some((kept, omitted)) => (concat_links(kept.into_iter()), omitted),
        };
        Some(SignedParts {
            checksum,
            text_hash: sig.text_hash,
            title: sig.title,
            b: sig.b,
            c: sig.c,
            body_bytes: body.raw().len() as u64,
            text_bytes: sig.extraction.text.len() as u64,
            tokens: sig.tokens,
            charset: charset.into(),
            tokens_truncated: sig.truncated,
            chunks: sig.chunks.clone(),
            chunks_omitted: sig.chunks_omitted,
            paragraphs: sig.paragraphs.clone(),
            short_page: sig.paragraph_info.short,
            rp: sig.rp.clone(),
            links,
            link_ends,
            links_omitted: u32::try_from(links_omitted).unwrap_or(u32::MAX),
        })
    }
}

/// `links` concatenated, with where each ends, sized exactly (the sign cache keeps them).
fn concat_links<'a>(links: impl Iterator<Item = &'a str> + Clone) -> (String, Vec<usize>) {
    let mut all = String::with_capacity(links.clone().map(str::len).sum());
    let mut ends = Vec::with_capacity(links.clone().count());
    for l in links {
        all.push_str(l);
        ends.push(all.len());
    }
    (all, ends)
}

fn is_detected(value: &[u8]) -> bool {
    // Cheap check on our own serialization: the state field comes right after event_id.
    value
        .windows(b"\"state\":\"detected\"".len())
        .any(|w| w == b"\"state\":\"detected\"")
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2026-11-02T10:15:00Z`).
pub fn parse_time(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Event time as RFC 3339 UTC (`2026-11-02T10:15:00Z`; fractional seconds only when present).
pub fn format_time(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use proptest::prelude::*;

    fn envelope(url: &str, t: i64, status: u16, ct: Option<&str>, body: Option<Body>) -> Vec<u8> {
        let mut v = serde_json::json!({"url": url, "fetched_at": format_time(t), "status": status});
        if let Some(ct) = ct {
            v["content_type"] = ct.into();
        }
        match body {
            Some(Body::Text(s)) => v["body"] = s.into(),
            Some(Body::Bytes(b)) => {
                v["body_base64"] = base64::engine::general_purpose::STANDARD.encode(b).into()
            }
            None => {}
        }
        serde_json::to_vec(&v).unwrap()
    }

    fn arb_body() -> impl Strategy<Value = Option<Body>> {
        prop_oneof![
            Just(None),
            "(<[a-zA-Z!/?]{0,8}|[ -~]{0,12}|&[a-z#0-9]{0,6};?|<script>|</script>|<!--|-->|\u{e9}\u{4e2d})*"
                .prop_map(|s| Some(Body::Text(s))),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Some(Body::Bytes(b))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Whatever the body, charset, status and order of events, processing never panics and
        /// every input yields at least one output (a signature or a dead letter).
        #[test]
        fn process_never_panics(events in proptest::collection::vec((0usize..4, 0i64..2_000_000_000, prop_oneof![Just(200u16), Just(404), Just(0), Just(503)],
                proptest::option::of(prop_oneof![Just("text/html; charset=utf-8"), Just("text/html; charset=iso-8859-1"), Just("text/html; charset=shift_jis"), Just("text/html; charset=nonsense"), Just("text/html")]),
                arb_body()), 1..20)) {
            let mut topo = Topology::new(Config { window_ms: 600_000_000, ..Config::default() });
            let urls = ["http://a.example/x", "http://b.example/x", "https://www.a.example/y", "http://c.example/"];
            let src = Source::File { file: "p".into(), line: 1 };
            for (u, t, status, ct, body) in events {
                let mut out = Vec::new();
                topo.process(&envelope(urls[u], t, status, ct, body), &src, &mut out);
                prop_assert!(out.iter().any(|e| matches!(e.kind, OutputKind::Signatures | OutputKind::DeadLetter)));
            }
        }
    }

    /// Under `--canonical inlinks,shorter`, a copy that another page starts linking to becomes
    /// its cluster's canonical: `canonical_changed` is emitted and the hints follow.
    #[test]
    fn the_copy_with_more_in_links_becomes_canonical() {
        use neardup_schemas::{ClusterEvent, RecrawlEvent, RecrawlHint};
        let cfg = Config {
            canonical: "inlinks,shorter".parse().unwrap(),
            ..Config::default()
        };
        let mut topo = Topology::new(cfg);
        let src = Source::File {
            file: "t".into(),
            line: 1,
        };
        let doc: String = (0..200).map(|i| format!("word{i} ")).collect();
        let page =
            |url: &str, t: i64, body: String| envelope(url, t, 200, None, Some(Body::Text(body)));
        let (a, b) = (
            "http://a.example/doc.html",
            "http://b.example/docs/doc.html",
        );
        let t0 = 1_793_577_600_000;
        let mut out = Vec::new();
        topo.process(&page(a, t0, format!("<p>{doc}</p>")), &src, &mut out);
        topo.process(&page(b, t0 + 1000, format!("<p>{doc}</p>")), &src, &mut out);
        assert_eq!(
            canonical_of(&topo, b),
            a,
            "no in-links yet: the shorter URL"
        );
        out.clear();
        let linker = format!(r#"<p>another page entirely</p><a href="{b}">the doc</a>"#);
        topo.process(
            &page("http://c.example/links.html", t0 + 2000, linker),
            &src,
            &mut out,
        );
        assert_eq!(canonical_of(&topo, a), b, "b has an in-link now");
        let changed: Vec<ClusterEvent> = decoded(&out);
        assert!(
            changed.iter().any(|c| c.change
                == neardup_schemas::ClusterChangeKind::CanonicalChanged
                && c.canonical.as_deref() == Some(b)),
            "{changed:?}"
        );
        let hints: Vec<RecrawlEvent> = decoded(&out);
        assert!(
            hints.iter().any(|h| h.url == a
                && h.hint == RecrawlHint::Deprioritize
                && h.canonical.as_deref() == Some(b)),
            "{hints:?}"
        );
        assert!(
            hints
                .iter()
                .any(|h| h.url == b && h.hint == RecrawlHint::Keep),
            "{hints:?}"
        );
        // The linking page disappears: b loses its in-link, a (shorter) is canonical again.
        out.clear();
        topo.process(
            &envelope("http://c.example/links.html", t0 + 3000, 404, None, None),
            &src,
            &mut out,
        );
        assert_eq!(canonical_of(&topo, a), a);
    }

    /// Each URL's copies in the sketch index, the exact groups, the change history and the
    /// clusters: their allocations by string.
    fn url_copies(topo: &Topology) -> BTreeMap<String, BTreeSet<usize>> {
        let s = &topo.state;
        let mut copies: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        let all = (s.near.url_copies())
            .chain(s.exact.url_copies())
            .chain(s.history.url_copies())
            .chain(s.similar.url_copies())
            .chain(s.identical.url_copies());
        for url in all {
            let at = Arc::as_ptr(url) as *const u8 as usize;
            copies.entry(url.to_string()).or_default().insert(at);
        }
        copies
    }

    /// The running state's parts share one copy of each URL, and so do they after a restore,
    /// where reading the checkpoint made one for every place that held it (`tests/checkpoint.rs`
    /// shows that the restored state goes on as the one written).
    /// Four copies of a page on four hosts and one other page, processed.
    fn four_copies_and_another() -> Topology {
        let t0 = 1_793_577_600_000;
        let doc: String = (0..200).map(|i| format!("word{i} ")).collect();
        let other: String = (0..200).map(|i| format!("other{i} ")).collect();
        let src = Source::File {
            file: "t".into(),
            line: 1,
        };
        let mut lines = Vec::new();
        for (n, host) in ["a", "b", "c", "d"].iter().enumerate() {
            let body = format!("<p>{doc}</p>");
            lines.push(envelope(
                &format!("http://{host}.example/doc.html"),
                t0 + n as i64 * 1000,
                200,
                None,
                Some(Body::Text(body)),
            ));
        }
        lines.push(envelope(
            "http://e.example/other.html",
            t0 + 9000,
            200,
            None,
            Some(Body::Text(format!("<p>{other}</p>"))),
        ));
        let mut topo = Topology::new(Config::default());
        let mut out = Vec::new();
        for line in &lines {
            topo.process(line, &src, &mut out);
        }
        topo
    }

    #[test]
    fn the_state_holds_one_copy_of_each_url_running_and_restored() {
        let topo = four_copies_and_another();
        let offsets = BTreeMap::from([(0, 5)]);
        let bytes = checkpoint::write(&topo, "t", &offsets);
        let (restored, _) = checkpoint::restore(Config::default(), "t", &bytes).expect("restores");
        // The running state shares them too: the parts take a new URL from one pool.
        let running = url_copies(&topo);
        assert!(running.values().all(|at| at.len() == 1), "{running:?}");
        let copies = url_copies(&restored);
        assert_eq!(copies.len(), 5, "{copies:?}");
        // The four copies of the page are in the exact groups and both cluster levels too.
        assert!(copies.values().all(|at| at.len() == 1), "{copies:?}");
        assert_eq!(
            url_copies(&topo).keys().collect::<Vec<_>>(),
            copies.keys().collect::<Vec<_>>()
        );
        // The same state: a checkpoint of the same size (maps with per-process hash seeds list
        // their entries in another order).
        assert_eq!(
            checkpoint::write(&restored, "t", &offsets).len(),
            bytes.len()
        );
    }

    /// A checkpoint's snapshot shares the state's URLs instead of copying them, and holds no
    /// URL pool; its body written in chunks of a few bytes is the body written whole (the
    /// length and hash counted across chunks).
    #[test]
    fn a_snapshot_shares_the_urls_and_its_body_is_the_same_in_any_chunks() {
        let topo = four_copies_and_another();
        let snap = topo.state.snapshot();
        let urls = |s: &State| {
            let mut at: Vec<_> = (s.near.url_copies())
                .chain(s.exact.url_copies())
                .chain(s.similar.url_copies())
                .map(|u| Arc::as_ptr(u) as *const u8 as usize)
                .collect();
            at.sort_unstable();
            at
        };
        assert!(!urls(&snap).is_empty());
        assert_eq!(urls(&snap), urls(&topo.state));
        assert_eq!(snap.urls.len(), 0);
        let offsets = BTreeMap::from([(0, 5)]);
        let whole = checkpoint::write(&topo, "t", &offsets);
        for chunk in [1, 7, 4096] {
            let mut out = std::io::Cursor::new(Vec::new());
            let header = checkpoint::header(&topo, "t", &offsets);
            let n = checkpoint::write_state(&snap, header, &mut out, chunk).expect("written");
            assert_eq!(n as usize, whole.len());
            assert!(out.into_inner() == whole, "chunks of {chunk}");
        }
    }

    /// The windows move with the slowest input partition: a copy that a lagging partition
    /// delivers late still pairs with its original, which the newest event time alone would
    /// have evicted; and an idle partition holds the windows back by at most the skew.
    #[test]
    fn a_lagging_partition_is_waited_for_within_the_skew() {
        use neardup_schemas::PairEvent;
        const DAY: i64 = 24 * 3600 * 1000;
        let t0 = 1_793_577_600_000;
        let doc =
            |seed: &str| -> String { (0..200).map(|i| format!("{seed}{i} ")).collect::<String>() };
        let page = |url: &str, t: i64, body: String| {
            envelope(
                url,
                t,
                200,
                None,
                Some(Body::Text(format!("<p>{body}</p>"))),
            )
        };
        let from = |partition: i32| Source::Kafka {
            topic: "pages".into(),
            partition,
            offset: 0,
        };
        let run = |skew_ms: i64| {
            let mut topo = Topology::new(Config {
                window_ms: 2 * DAY,
                max_partition_skew_ms: skew_ms,
                // Days between records on a two-day window: not leaps here.
                max_event_time_lead_ms: Some(i64::MAX),
                ..Config::default()
            });
            let mut out = Vec::new();
            let mut feed = |url: &str, t: i64, body: String, p: i32| {
                topo.process(&page(url, t, body), &from(p), &mut out)
            };
            feed("http://a.example/x.html", t0, doc("original"), 0);
            feed("http://c.example/1.html", t0 + DAY / 10, doc("one"), 1);
            for d in 1..=3 {
                let url = format!("http://d.example/{d}.html");
                feed(&url, t0 + d * DAY, doc(&format!("filler{d}x")), 0);
            }
            // Partition 1 catches up: the copy was fetched half a day after the original.
            feed("http://b.example/x.html", t0 + DAY / 2, doc("original"), 1);
            let detected = decoded::<PairEvent>(&out)
                .iter()
                .any(|p| p.a.ends_with("x.html") && p.b.ends_with("x.html"));
            (topo, detected)
        };
        let (waited, found) = run(7 * DAY);
        assert!(found, "the late copy pairs with its original");
        assert_eq!(waited.near_stats().stale, 0);
        assert_eq!(waited.watermark_ms(), Some(t0 + DAY / 2));
        let (unaligned, found) = run(0);
        assert!(!found, "with no skew allowed, the original left the window");
        assert_eq!(
            unaligned.near_stats().stale,
            1,
            "and the copy came too late"
        );

        // Partition 1 goes idle: partition 0 moves the windows once it is a skew ahead.
        let (mut topo, _) = run(7 * DAY);
        let mut out = Vec::new();
        topo.process(
            &page("http://d.example/9.html", t0 + 9 * DAY, doc("nine")),
            &from(0),
            &mut out,
        );
        assert_eq!(topo.watermark_ms(), Some(t0 + 2 * DAY));
        assert_eq!(topo.near_index().window().count(), 7, "nothing expired yet");
        topo.process(
            &page("http://d.example/12.html", t0 + 12 * DAY, doc("twelve")),
            &from(0),
            &mut out,
        );
        assert_eq!(topo.watermark_ms(), Some(t0 + 5 * DAY));
        let left: Vec<&str> = topo.near_index().window().map(|(u, _)| u).collect();
        assert_eq!(
            left.len(),
            3,
            "only the fetches of days 3, 9 and 12 remain: {left:?}"
        );
    }

    /// The outputs of the event type `E`'s topic, decoded.
    fn decoded<E: neardup_schemas::OutputEvent + serde::de::DeserializeOwned>(
        out: &[Emit],
    ) -> Vec<E> {
        out.iter()
            .filter(|e| e.kind == E::KIND)
            .map(|e| serde_json::from_slice(&e.value).unwrap())
            .collect()
    }

    fn canonical_of(topo: &Topology, url: &str) -> String {
        let clusters = topo.clusters(PairLevel::VerySimilar).expect("level");
        clusters.cluster_of(url).expect("clustered").canonical
    }
}
