//! The index split the way N instances run it (DESIGN.md §3): a [`Sequencer`] turns fetches
//! into [`Step`]s ahead of verification, each [`KeyShardStage`] takes the steps on its own and
//! answers the filings, and a [`NearIndex::follower`] verifies the steps with the answers,
//! giving exactly the pairs of one index.

use super::{
    keys, Answer, Change, KeyShard, NearConfig, NearIndex, NearStats, Policy, ShardKeys,
    ViewLimits, Window, WindowHost,
};
use super::{Fetch, Sketch};
use crate::emit::Emitter;
use std::sync::Arc;

/// One step of the window, as a [`Sequencer`] decides it, for the key shards
/// ([`KeyShardStage`]) and the verifying index ([`NearIndex::follower`]), which take the steps
/// in the sequencer's order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Step {
    /// The page in `slot` left the window (its `keys` leave the shards; its pairs are retracted).
    Remove {
        /// The page's slot.
        slot: u32,
        /// The page's table keys.
        keys: Vec<u32>,
        /// The crawl round, for the retractions.
        crawl_id: Option<String>,
    },
    /// A fetch's content is filed in `slot` under `keys`, after the URL's previous content left
    /// `replaced` (with its keys).
    File {
        /// The page's slot.
        slot: u32,
        /// The slot and keys of the URL's previous content.
        replaced: Option<(u32, Vec<u32>)>,
        /// The page's table keys.
        keys: Vec<u32>,
        /// The URL.
        url: String,
        /// The content's signatures.
        sketch: Box<Sketch>,
        /// The crawl round.
        crawl_id: Option<String>,
    },
}

/// The window's bookkeeping on its own: it turns fetches and watermarks into [`Step`]s without
/// waiting for any verification, so that key shards can answer a page's filing while earlier
/// pages are still being verified (the index stage split by key: sequencer -> key shards ->
/// verifier). It keeps each windowed page's URL and signatures, to tell an unchanged refetch
/// and to name the keys that leave.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Sequencer {
    pub(super) cfg: NearConfig,
    pub(super) window: Window,
    pub(super) held: Vec<Option<(Arc<str>, Sketch)>>,
    #[serde(skip)]
    pub(super) steps: Vec<Step>,
}

/// The sequencer's pages, turning the window's changes into steps.
pub(super) struct Held<'a> {
    pub(super) held: &'a mut Vec<Option<(Arc<str>, Sketch)>>,
    pub(super) steps: &'a mut Vec<Step>,
    pub(super) policy: Policy,
}

impl WindowHost for Held<'_> {
    fn url(&self, slot: u32) -> &str {
        &self.held[slot as usize].as_ref().expect("held page").0
    }

    fn holds(&self, slot: u32, sketch: &Sketch) -> bool {
        self.held[slot as usize].as_ref().expect("held page").1 == *sketch
    }

    fn change(&mut self, change: Change<'_>) {
        let Held {
            held,
            steps,
            policy,
        } = self;
        let mut take = |slot: u32| {
            let (_, sketch) = held[slot as usize].take().expect("held page");
            let (k, n) = keys(*policy, &sketch);
            k[..n].to_vec()
        };
        match change {
            Change::Removed { slot, crawl_id } => steps.push(Step::Remove {
                slot,
                keys: take(slot),
                crawl_id: crawl_id.map(str::to_owned),
            }),
            Change::Filed {
                slot,
                replaced,
                url,
                fetch,
            } => {
                let replaced = replaced.map(|r| (r, take(r)));
                let sketch = fetch.sketch.expect("a filed fetch has content").clone();
                let (k, n) = keys(*policy, &sketch);
                if held.len() <= slot as usize {
                    held.resize(slot as usize + 1, None);
                }
                held[slot as usize] = Some((url.clone(), sketch.clone()));
                steps.push(Step::File {
                    slot,
                    replaced,
                    keys: k[..n].to_vec(),
                    url: url.to_string(),
                    sketch: Box::new(sketch),
                    crawl_id: fetch.crawl_id.map(str::to_owned),
                });
            }
        }
    }
}

impl Sequencer {
    /// An empty window.
    pub fn new(cfg: NearConfig) -> Self {
        Sequencer {
            cfg,
            window: Window::default(),
            held: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Rebuilds what a checkpoint leaves out (the URL map) after a restore.
    pub(crate) fn after_restore(&mut self) {
        let held = &self.held;
        self.window
            .restore_urls(held.len(), |s| held[s as usize].as_ref().map(|p| &*p.0));
    }

    /// True when `url` is in the window.
    pub fn holds(&self, url: &str) -> bool {
        self.sketch_of(url).is_some()
    }

    /// The content sketch `url` holds in the window, if any.
    pub fn sketch_of(&self, url: &str) -> Option<&Sketch> {
        let url_of = |s: u32| &*self.held[s as usize].as_ref().expect("held page").0;
        let slot = self.window.by_url.get(url, url_of)?;
        self.held[slot as usize].as_ref().map(|(_, sketch)| sketch)
    }

    /// The window's counters (pages, evictions, stale fetches); the pair counters are the
    /// verifier's.
    pub fn stats(&self) -> NearStats {
        self.window.counted(NearStats {
            pages: self.window.by_url.len() as u64,
            ..NearStats::default()
        })
    }

    /// The steps of one fetch (as [`NearIndex::observe`]).
    pub fn observe(&mut self, f: &Fetch<'_>) -> Vec<Step> {
        let mut host = Held {
            held: &mut self.held,
            steps: &mut self.steps,
            policy: self.cfg.policy,
        };
        self.window
            .observe(f, self.cfg.max_pages, &mut host, |u: &str| Arc::from(u));
        std::mem::take(&mut self.steps)
    }

    /// As [`NearIndex::take_over_budget`].
    pub fn take_over_budget(&mut self) -> Vec<Arc<str>> {
        self.window.take_over_budget()
    }

    /// The steps of moving the window's end to `watermark_ms` (as [`NearIndex::advance`]).
    pub fn advance(&mut self, watermark_ms: i64, crawl_id: Option<&str>) -> Vec<Step> {
        let mut host = Held {
            held: &mut self.held,
            steps: &mut self.steps,
            policy: self.cfg.policy,
        };
        self.window
            .advance(watermark_ms, self.cfg.window_ms, crawl_id, &mut host);
        std::mem::take(&mut self.steps)
    }
}

/// A key shard's part of the answer to a filing: for each of the page's keys that it holds,
/// the key's position, the bucket's length before the filing and its pages that the lookup
/// needs (the newest, oldest first).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardAnswer {
    pub(super) buckets: Vec<(u8, u32, Vec<u32>)>,
}

/// Shard `index` of `of` key shards on its own, as an instance of an index stage partitioned
/// by key: it takes a [`Sequencer`]'s steps in order, keeps the buckets of its keys, and answers
/// each filing for the verifier ([`NearIndex::follow`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KeyShardStage {
    pub(super) shard: KeyShard,
    pub(super) index: usize,
    pub(super) of: usize,
    pub(super) limits: ViewLimits,
}

impl KeyShardStage {
    /// Shard `index` of `of` under `cfg`'s limits.
    pub fn new(cfg: &NearConfig, index: usize, of: usize) -> Self {
        assert!(index < of, "shard {index} of {of}");
        KeyShardStage {
            shard: KeyShard::default(),
            index,
            of,
            limits: ViewLimits::of(cfg),
        }
    }

    /// Applies one step; a filing is answered with the buckets as they were before it.
    pub fn apply(&mut self, step: &Step) -> Option<ShardAnswer> {
        match step {
            Step::Remove { slot, keys, .. } => {
                self.shard.drop(*slot, &self.mine(keys));
                None
            }
            Step::File {
                slot,
                replaced,
                keys,
                ..
            } => {
                if let Some((r, old)) = replaced {
                    self.shard.drop(*r, &self.mine(old));
                }
                let mine = self.mine(keys);
                let mut answer = Answer::empty();
                self.shard.answer(&mine, self.limits, &mut answer);
                let buckets = mine.positions[..mine.n]
                    .iter()
                    .map(|&p| {
                        let p = p as usize;
                        (p as u8, answer.lens[p] as u32, answer.buckets[p].to_vec())
                    })
                    .collect();
                self.shard.file(*slot, &mine);
                Some(ShardAnswer { buckets })
            }
        }
    }

    /// The keys of `keys` that this shard holds.
    pub(super) fn mine(&self, keys: &[u32]) -> ShardKeys {
        ShardKeys::of(keys, self.index, self.of)
    }
}

impl NearIndex {
    /// An index that verifies a [`Sequencer`]'s steps with the key shards' answers
    /// ([`Self::follow`]) instead of keeping its own window and tables; its pair events are
    /// those of one [`NearIndex`] fed the same fetches. Its [`Self::window`] and page count stay
    /// empty (the sequencer keeps the window).
    pub fn follower(cfg: NearConfig) -> Self {
        let mut index = Self::with_key_shards(cfg, 1);
        index.following = true;
        index
    }

    /// Carries out one step of the sequencer, with every shard's answer to it (a filing) or
    /// none (a removal).
    pub fn follow(&mut self, step: &Step, answers: &[ShardAnswer], out: &mut Emitter) {
        assert!(self.following, "follow() needs NearIndex::follower");
        match step {
            Step::Remove { slot, crawl_id, .. } => {
                self.remove_page(*slot, crawl_id.as_deref(), out)
            }
            Step::File {
                slot,
                replaced,
                url,
                sketch,
                crawl_id,
                ..
            } => self.file(
                *slot,
                replaced.as_ref().map(|r| r.0),
                Arc::from(url.as_str()),
                sketch,
                crawl_id.as_deref(),
                Some(answers),
                out,
            ),
        }
    }
}
