//! The whole topology in one process ([`Topology`]): a prepared record applied in order to the
//! sketch index, the exact index, clusters, mirrors, collections and crawl hints; and each split
//! stage's part of it ([`Role`]).

use crate::internal::{
    already_applied, filings, Clustered, Indexed, InternalRecordError, Sharded, INTERNAL_FORMAT,
};
use crate::prepare::{Prepared, Preparer};
use crate::signed::{Signed, SignedParts};
use crate::{
    clock, clusters, collections, evolution, exact, hash, hints, history, inlinks, intern, mirrors,
    near, replicas, rounds,
};
use crate::{format_time, Config, DecodeError, Emit, Emitter};
use neardup_schemas::{
    ChangeSinceLast, DeadLetterReason, OutputKind, PageEvent, PairLevel, SignatureEvent, Source,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Longest stretch of event time between two collections epochs (one day).
const EPOCH_MS: i64 = 24 * 3600 * 1000;

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
    /// Records of a crawl round that had ended (a later round had begun) when they came: they
    /// are processed as any other, but end neither the round under way nor its collections
    /// epoch, and count in the figures by round only as late (see the `rounds` module).
    /// All-in-one and cluster stage.
    pub late_records: u64,
    /// Signature events with a list cut to its cap (out-links, chunks or paragraphs: see
    /// [`crate::signer::ListCaps`]); each states how much it left out.
    pub lists_capped: u64,
}

impl Stats {
    /// Counts a fetch: with content, inconclusive, or without content.
    pub(crate) fn count(&mut self, content: bool, inconclusive: bool) {
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
    pub(crate) cfg: Config,
    pub(crate) params: String,
    /// [`Config::state_fingerprint`], carried by the index stage's records.
    pub(crate) state_fingerprint: String,
    pub(crate) state: State,
    pub(crate) preparer: Preparer,
    pub(crate) emitter: Emitter,
    /// The record of the page just applied for the next stage: the index stage's for the
    /// cluster stage, or, in an index split by key, for the next key shard or the verify stage;
    /// the cluster stage's for the mirror stage.
    pub(crate) indexed: Option<(String, Vec<u8>)>,
    /// The steps of the page being applied, in an index stage split by key.
    pub(crate) steps: Vec<near::Step>,
}

/// A fetch as the parts downstream of the pairs see it.
pub(crate) struct DownstreamFetch<'a> {
    pub(crate) url: &'a str,
    pub(crate) fetched_at_ms: i64,
    pub(crate) ip: Option<&'a str>,
    pub(crate) links: Option<Links<'a>>,
}

/// A page's out-links: in its signatures, or in the index stage's record.
#[derive(Clone, Copy)]
pub(crate) enum Links<'a> {
    Parts(&'a SignedParts),
    List(&'a [String]),
}

impl<'a> Links<'a> {
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a str> {
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
pub(crate) struct IndexedPage {
    pub(crate) format: u32,
    /// [`Config::state_fingerprint`] of the index stage.
    pub(crate) state: String,
    pub(crate) url: String,
    pub(crate) fetched_at_ms: i64,
    pub(crate) crawl_id: Option<String>,
    pub(crate) ip: Option<String>,
    /// Content checksum (`None`: no content, unless `inconclusive`).
    pub(crate) checksum: Option<u128>,
    /// The fetch told nothing of the content (304, 429, 5xx): the URL keeps what it had.
    pub(crate) inconclusive: bool,
    /// The fetch was a 304 Not Modified: the URL's content is current as of it, so its
    /// entries' times move to it.
    pub(crate) confirmed: bool,
    /// Out-links, only when collections or the in-link ranking use them.
    pub(crate) links: Option<Vec<String>>,
    /// The newest event time before this page, and the watermark and newest after it.
    pub(crate) newest_before: i64,
    pub(crate) watermark: i64,
    pub(crate) newest: i64,
    /// Where the index stage read the page (partition, offset): repeats are recognised by it.
    pub(crate) origin: (i32, i64),
    /// The URL is in the index's window after this page.
    pub(crate) in_window: bool,
    /// URLs that left the index's window while this page was applied.
    pub(crate) left: Vec<Arc<str>>,
    /// Those of `left` that the page budget evicted: they leave the exact groups and the
    /// in-links too.
    pub(crate) over_budget: Vec<Arc<str>>,
    /// The pair changes this page caused, in order.
    pub(crate) changes: Vec<near::PairChange>,
}

impl IndexedPage {
    /// The fetch as the parts downstream of the pairs see it.
    pub(crate) fn fetch(&self) -> DownstreamFetch<'_> {
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
pub(crate) struct ShardedPage {
    /// The record for the cluster stage, without the pair changes and the URLs that left the
    /// window (the verify stage adds them).
    pub(crate) page: IndexedPage,
    /// The window's steps for the page, in order.
    pub(crate) steps: Vec<near::Step>,
    /// Per filing among `steps`, in order, the answers of the key shards it has passed.
    pub(crate) answers: Vec<Vec<near::ShardAnswer>>,
}

/// The cluster stage's record of one applied page for the mirror stage (`mirror_stage`): the
/// index stage's record as the cluster stage read it (without the pair changes, and with the
/// out-links only when collections use them) and the moves it caused among the `very_similar`
/// clusters, which the mirror stage follows instead of keeping the clusters.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusteredPage {
    pub(crate) page: IndexedPage,
    pub(crate) moves: Vec<clusters::Move>,
}

/// A key shard's state in a shard stage.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ShardState {
    pub(crate) stage: near::KeyShardStage,
    /// Per partition of the index stage's input, the last origin applied (repeats are skipped).
    pub(crate) origin_upto: BTreeMap<i32, i64>,
}

/// Everything a topology accumulates from its input: what a checkpoint saves
/// ([`checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct State {
    pub(crate) exact: exact::ExactIndex,
    pub(crate) near: near::NearIndex,
    /// Clusters over all live pairs (`very_similar` and up).
    pub(crate) similar: clusters::Clusters,
    /// Clusters over `virtually_identical` and `exact` pairs.
    pub(crate) identical: clusters::Clusters,
    /// Mirrored hosts, aliases and auto-mirrors, from the `very_similar` clusters.
    pub(crate) mirrors: mirrors::Mirrors,
    /// Crawl hints from the clusters of `cfg.hint_level`.
    pub(crate) hints: hints::Hints,
    /// In-link counts, kept only when the canonical policy ranks by them.
    pub(crate) inlinks: Option<inlinks::InLinks>,
    pub(crate) evolution: Option<evolution::Evolution>,
    pub(crate) collections: collections::Collections,
    /// RP signatures of the windowed pages, kept only for the Hyperlink Map veto.
    pub(crate) rps: HashMap<Arc<str>, Box<[f32]>, hash::StrBuild>,
    /// The crawl rounds, and the event time of the last collections epoch.
    pub(crate) epoch: (rounds::Rounds, i64),
    pub(crate) history: history::History,
    /// Event time per input partition, and the watermark that moves the windows.
    pub(crate) clock: clock::EventClock,
    pub(crate) stats: Stats,
    /// The part of the topology this state belongs to.
    pub(crate) role: Role,
    /// In the cluster stage, or the mirror stage: the URLs in the index stage's window (what
    /// collections keep).
    pub(crate) window: std::collections::HashSet<Arc<str>, hash::StrBuild>,
    /// In the mirror stage: the members of each `very_similar` cluster, followed from the
    /// cluster stage's moves (what collections are computed from).
    pub(crate) members: BTreeMap<u32, BTreeSet<Arc<str>>>,
    /// In the index and cluster stages: per partition of the input the previous stage read
    /// (the records carry where they came from), the last offset whose record was applied. A
    /// previous stage sends records again after a restart or a rebalance (at least once);
    /// applying one twice would apply its fetch, or its pair changes, twice.
    pub(crate) origin_upto: BTreeMap<i32, i64>,
    /// In an index stage split by key: the window's bookkeeping, whose steps go to the key
    /// shards and on to the verify stage (`near` stays empty).
    pub(crate) sequencer: Option<near::Sequencer>,
    /// In a shard stage: per partition of the steps topic (the shard's number), its key shard.
    pub(crate) key_shards: BTreeMap<i32, ShardState>,
    /// The URLs the parts hold, one copy each ([`intern`]; rebuilt after a restore).
    #[serde(skip)]
    pub(crate) urls: intern::UrlPool,
}

impl State {
    /// A copy of every part, for a checkpoint to write while this state goes on
    /// ([`checkpoint::snapshot`]). The copy shares the URLs' strings (one more reference each),
    /// and leaves out the URL pool, which a checkpoint does not hold (a restore rebuilds it from
    /// the parts). A URL the copy alone still holds stays in the pool until a sweep after the
    /// copy is dropped.
    pub(crate) fn snapshot(&self) -> State {
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
pub struct RoleError(pub(crate) String);

impl RoleError {
    pub(crate) fn all_in_one(what: &str) -> Self {
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
            epoch: (rounds::Rounds::default(), i64::MIN),
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
    /// (see [`crate::clock`]).
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
    pub(crate) fn dead_letter_oversized(&mut self, source: &Source) {
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
    pub(crate) fn drain_outputs(&mut self, out: &mut Vec<Emit>) {
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
    pub(crate) fn is_repeat(&mut self, origin: (i32, i64)) -> bool {
        let repeat = already_applied(&mut self.state.origin_upto, origin);
        self.state.stats.repeats_skipped += u64::from(repeat);
        repeat
    }

    pub(crate) fn process_page(
        &mut self,
        page: &PageEvent,
        signed: Option<Signed>,
        source: &Source,
    ) {
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
        let event = SignatureEvent {
            schema: OutputKind::Signatures.schema().into(),
            event_id: String::new(),
            url: page.url.clone(),
            fetched_at: at,
            crawl_id: page.crawl_id.clone(),
            status: page.status,
            params: self.params.clone(),
            content: None,
            change,
        };
        self.emitter
            .emit_signature(event, signed.as_ref().map(|sg| &sg.content));
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
    pub(crate) fn advance_downstream(&mut self, watermark: i64) {
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
    pub(crate) fn evict_downstream(&mut self, urls: &[Arc<str>]) {
        for url in urls {
            self.state.exact.evict(url, &mut self.emitter);
            if let Some(l) = &mut self.state.inlinks {
                l.forget(url);
            }
        }
    }

    /// What the parts downstream of the pairs learn from a fetch before its pairs: the host's
    /// address (mirrors) and the page's out-links (collections, in-links).
    pub(crate) fn fetched_downstream(&mut self, f: &DownstreamFetch<'_>) {
        if self.runs_mirrors() {
            self.fetched_mirrors(f);
        }
        if let Some(l) = &mut self.state.inlinks {
            l.fetched(f.url, f.fetched_at_ms, f.links.map(Links::iter));
        }
    }

    /// What mirrors and collections learn from a fetch before its pairs.
    pub(crate) fn fetched_mirrors(&mut self, f: &DownstreamFetch<'_>) {
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
    pub(crate) fn runs_mirrors(&self) -> bool {
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
    pub(crate) fn renew_window(&mut self, f: &near::Fetch<'_>) -> bool {
        let held = match &self.state.sequencer {
            Some(s) => s.sketch_of(f.url).cloned(),
            None => self.state.near.sketch_of(f.url),
        };
        let Some(sketch) = held else {
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
    pub(crate) fn renew_downstream(&mut self, url: &str, at_ms: i64) {
        self.state.exact.renew(url, at_ms);
        if let Some(l) = &mut self.state.inlinks {
            l.renew(url, at_ms);
        }
    }

    pub(crate) fn observe_exact(&mut self, url: &str, checksum: Option<u128>, fetched_at_ms: i64) {
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
    /// read back by [`crate::InternalReader::indexed`]), appending the outputs it causes to
    /// `out`: exactly the clusters, hints, mirrors and collections the all-in-one topology emits
    /// for that page (with `mirror_stage`, those but the mirrors and collections, whose input
    /// goes to [`Self::take_indexed`] for the mirror stage).
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
    /// ([`Self::take_indexed`], read back by [`crate::InternalReader::clustered`]), appending the
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
    pub(crate) fn follow_indexed(&mut self, r: &IndexedPage) -> bool {
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
    pub(crate) fn follow_window(&mut self, r: &IndexedPage) {
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
    pub(crate) fn max_lead_ms(&self) -> i64 {
        self.cfg
            .max_event_time_lead_ms
            .unwrap_or(self.cfg.window_ms)
    }

    /// Records dated so far ahead of the event time that their time was held back (see
    /// [`crate::clock`]): a crawler's clock or dates to look at, when not 0.
    pub fn event_time_leaps(&self) -> u64 {
        self.state.clock.held()
    }

    /// A collections epoch closes when a crawl round not seen before begins (an event of a
    /// round that has ended is late, and ends nothing: [`crate::rounds`]), or a day of event
    /// time after the last one (streams without rounds).
    pub(crate) fn maybe_close_epoch(&mut self, crawl_id: Option<&str>, at_ms: i64) {
        let step = self.state.epoch.0.step(crawl_id);
        if step == rounds::Step::Late {
            self.state.stats.late_records += 1;
        }
        let round_changed = matches!(step, rounds::Step::New(_));
        if self.state.epoch.1 == i64::MIN {
            self.state.epoch.1 = at_ms;
        } else if round_changed || at_ms >= self.state.epoch.1 + EPOCH_MS {
            // The epoch's round: the one that ended, or the one under way.
            let round = match step {
                rounds::Step::New(ended) => ended,
                _ => self.state.epoch.0.current().map(str::to_owned),
            };
            // The epoch's events carry the time it ended at (the latest fetch before this
            // page), so they belong to the round they describe.
            let now = self.emitter.at().to_owned();
            self.emitter.set_at(&format_time(self.state.clock.newest()));
            self.close_epoch(round.as_deref());
            self.emitter.set_at(&now);
            self.state.epoch.1 = at_ms;
        }
    }

    /// Closes the collections epoch of crawl round `round`.
    pub(crate) fn close_epoch(&mut self, round: Option<&str>) {
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
            self.hm_veto(veto, round);
        }
    }

    /// Seed 002 as a pair signal: the Hyperlink Map over the window's link graph, and the
    /// retraction of the live `very_similar` pairs whose link contexts disagree.
    pub(crate) fn hm_veto(&mut self, veto: replicas::HmVeto, round: Option<&str>) {
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
        for (a, b) in vetoed {
            self.state.near.veto(&a, &b, round, &mut self.emitter);
        }
        let changes = self.state.near.take_changes().collect();
        self.update_clusters(self.state.clock.watermark(), changes);
    }

    /// Ends a replay: closes the last collections epoch and crawl round, appending the outputs
    /// that causes to `out`.
    pub fn finish(&mut self, out: &mut Vec<Emit>) {
        if self.state.epoch.1 != i64::MIN {
            let round = self.state.epoch.0.current().map(str::to_owned);
            self.close_epoch(round.as_deref());
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
    pub(crate) fn update_clusters(
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

pub(crate) fn is_detected(value: &[u8]) -> bool {
    // Cheap check on our own serialization: the state field comes right after event_id.
    value
        .windows(b"\"state\":\"detected\"".len())
        .any(|w| w == b"\"state\":\"detected\"")
}

#[cfg(test)]
mod tests;
