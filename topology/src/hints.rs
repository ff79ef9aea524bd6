//! Crawl hints (`neardup.recrawl`) from the near-duplicate clusters of one level (seed 003 §5.1:
//! crawling one copy of replicated content instead of all of them saved 40 % of its crawl).
//!
//! Each URL's hint is a function of the clusters: a cluster's canonical member is `keep`, every
//! other member is `deprioritize` (naming the canonical), and a URL in no cluster has no hint.
//! A hint is emitted whenever that function's value for a URL changes, so the latest record per
//! URL (the topic is keyed by URL, fit for compaction) is always the current advice: a member
//! whose canonical changes gets a new `deprioritize`; a URL that leaves every cluster gets
//! `restore` (crawl as usual again). A cluster id changing alone (the cluster was absorbed by a
//! merge) re-emits nothing: the hint's `cluster_id` is the cluster it was derived from when it
//! was issued.
//!
//! Cost per step: proportional to the URLs that moved, plus the members of a cluster whose
//! canonical moved (each of them needs the new canonical anyway).

use crate::clusters::{Clusters, Move};
use crate::emit::Emitter;
use neardup_schemas::{OutputKind, RecrawlEvent, RecrawlHint};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// The hint state: what each URL was last told.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Hints {
    /// URL -> (canonical named in its last `keep`/`deprioritize`, the cluster id it named).
    last: HashMap<Arc<str>, (Arc<str>, Arc<str>)>,
    /// Internal cluster number -> its canonical when its members were last hinted.
    canonical: HashMap<u32, Arc<str>>,
    stats: HintStats,
}

impl Hints {
    /// After a restore: makes every URL and cluster id the pool's copy ([`crate::intern`]).
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        pool.share_keys(&mut self.last);
        for (canonical, id) in self.last.values_mut() {
            pool.share(canonical);
            pool.share(id);
        }
        pool.share_values(&mut self.canonical);
    }
}

/// Counters.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HintStats {
    /// URLs whose current hint is `deprioritize`.
    pub deprioritized: u64,
    /// URLs whose current hint is `keep`.
    pub kept: u64,
    /// `restore` hints issued so far.
    pub restored: u64,
}

impl Hints {
    /// No hints yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters now.
    pub fn stats(&self) -> &HintStats {
        &self.stats
    }

    /// Brings the hints up to date with `clusters` after the membership `moves` of one step
    /// (everything `Clusters::take_moves` returned, in order).
    pub fn apply(&mut self, clusters: &Clusters, moves: &[Move], out: &mut Emitter) {
        if moves.is_empty() {
            return;
        }
        let touched: BTreeSet<u32> = moves
            .iter()
            .flat_map(|m| [m.from, m.to])
            .flatten()
            .collect();
        for c in touched {
            let Some(now) = clusters.canonical_of(c) else {
                self.canonical.remove(&c);
                continue;
            };
            if self.canonical.get(&c) == Some(now) {
                continue;
            }
            self.canonical.insert(c, now.clone());
            let id = clusters.id_of(c).expect("a live cluster has an id");
            for url in clusters.members_of(c) {
                self.tell(url, now, id, out);
            }
        }
        for m in moves {
            match clusters.cluster_number(&m.url) {
                Some(c) => {
                    let now = self.canonical[&c].clone();
                    let id = clusters.id_of(c).expect("a live cluster has an id");
                    self.tell(&m.url, &now, id, out);
                }
                None => {
                    if let Some((canonical, id)) = self.last.remove(&m.url) {
                        self.count(&m.url, &canonical, -1);
                        self.stats.restored += 1;
                        emit(out, &m.url, RecrawlHint::Restore, None, &id);
                    }
                }
            }
        }
    }

    /// Tells `url` its canonical, unless that is what it was last told.
    fn tell(&mut self, url: &Arc<str>, canonical: &Arc<str>, id: &Arc<str>, out: &mut Emitter) {
        match self.last.get(url) {
            Some((c, _)) if c == canonical => return,
            Some((c, _)) => {
                let c = c.clone();
                self.count(url, &c, -1);
            }
            None => {}
        }
        self.count(url, canonical, 1);
        self.last
            .insert(url.clone(), (canonical.clone(), id.clone()));
        let hint = if url == canonical {
            RecrawlHint::Keep
        } else {
            RecrawlHint::Deprioritize
        };
        emit(out, url, hint, Some(canonical), id);
    }

    fn count(&mut self, url: &str, canonical: &str, by: i64) {
        let n = if url == canonical {
            &mut self.stats.kept
        } else {
            &mut self.stats.deprioritized
        };
        *n = n.wrapping_add_signed(by);
    }
}

fn emit(out: &mut Emitter, url: &str, hint: RecrawlHint, canonical: Option<&str>, id: &str) {
    out.emit(RecrawlEvent {
        schema: OutputKind::Recrawl.schema().into(),
        event_id: String::new(),
        url: url.to_owned(),
        hint,
        canonical: canonical.map(str::to_owned),
        cluster_id: id.to_owned(),
        at: out.at().to_owned(),
    });
}
