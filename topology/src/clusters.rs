//! Incremental near-duplicate clusters: the connected components of the live verified pairs at
//! one level, kept up to date as pairs are detected and retracted (seed 000 §2–3).
//!
//! # Rules
//! - **Arrival** of a pair (a, b): if neither page is clustered, a cluster is `created`; if one
//!   is, the other `joined`; if both are, in different clusters, the clusters are `merged` into
//!   the larger one (ties: the older one), which keeps its id; the absorbed cluster's id is
//!   named in `related` and is not used again. Cost: proportional to the absorbed cluster.
//! - **Retraction** of a pair (a, b) in one cluster: a bidirectional breadth-first search from
//!   a and from b, expanding the smaller frontier first, either meets (still connected: nothing
//!   happens) or exhausts one side, which is then a complete component. So a split costs in
//!   proportion to the smaller part (at most the affected cluster), never the whole map.
//!   The larger part keeps the id (ties: the part holding the canonical member). The other part
//!   becomes a new cluster (`split` on the old id naming it in `related`, then `created`), or,
//!   if it is a single page, that page has `left`; a cluster left with one page is `dissolved`.
//! - **Ids** are `<level>-<16 hex>`, a hash of the level, the first pair and a per-level counter,
//!   so a replay of the same input gives the same ids, and a cluster keeps its id while members
//!   join and leave.
//! - **Canonical member** (the survivor policy, after Nutch's `DeduplicationJob`, extended to
//!   near-duplicates): by default the member that entered the clustering first (the event time
//!   of its first live pair at this level); ties broken by https over http, then the shorter
//!   URL, then the earlier arrival. The order of the criteria is a [`CanonicalPolicy`]
//!   (`earliest`, `https`, `shorter`, `inlinks` (more in-links first, counts kept by
//!   [`crate::inlinks`] and updated as pages link and unlink), each at most once; arrival order
//!   breaks any tie left).
//!   Every change that moves the canonical emits `canonical_changed`.

use crate::emit::Emitter;
use neardup_schemas::{ClusterChangeKind, ClusterEvent, OutputKind, PairLevel};

use crate::small::SortedSet;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// One criterion of the canonical (survivor) choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CanonicalCriterion {
    /// The member that entered the clustering first (its first live pair at this level).
    Earliest,
    /// https before http.
    Https,
    /// The shorter URL.
    Shorter,
    /// More in-links: distinct pages in the window whose latest fetch links to the URL
    /// ([`crate::inlinks`]).
    Inlinks,
}

/// The survivor policy: the criteria in order of precedence; arrival order breaks ties left.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CanonicalPolicy(Vec<CanonicalCriterion>);

impl Default for CanonicalPolicy {
    fn default() -> Self {
        use CanonicalCriterion::*;
        CanonicalPolicy(vec![Earliest, Https, Shorter])
    }
}

impl CanonicalPolicy {
    /// A policy from criteria in order of precedence (a repeated criterion adds nothing).
    pub fn new(criteria: impl IntoIterator<Item = CanonicalCriterion>) -> Self {
        let mut v: Vec<CanonicalCriterion> = vec![];
        for c in criteria {
            if !v.contains(&c) {
                v.push(c);
            }
        }
        CanonicalPolicy(v)
    }

    /// The criteria in order of precedence.
    pub fn criteria(&self) -> &[CanonicalCriterion] {
        &self.0
    }

    /// True when the policy ranks by in-links (so in-link counts must be kept).
    pub fn uses_inlinks(&self) -> bool {
        self.0.contains(&CanonicalCriterion::Inlinks)
    }

    /// The sort key of a member under this policy: smaller is preferred.
    fn key(&self, first_ms: i64, url: &str, inlinks: u32) -> [u64; 4] {
        let mut key = [0u64; 4];
        for (k, c) in key.iter_mut().zip(&self.0) {
            *k = match c {
                // Order-preserving map of i64 onto u64.
                CanonicalCriterion::Earliest => (first_ms as u64) ^ (1 << 63),
                CanonicalCriterion::Https => u64::from(!url.starts_with("https:")),
                CanonicalCriterion::Shorter => url.len() as u64,
                CanonicalCriterion::Inlinks => u64::from(u32::MAX - inlinks),
            };
        }
        key
    }
}

impl std::str::FromStr for CanonicalPolicy {
    type Err = String;

    /// `earliest,https,shorter,inlinks` (any order, any subset, each at most once).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut v = vec![];
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let c = match name {
                "earliest" => CanonicalCriterion::Earliest,
                "https" => CanonicalCriterion::Https,
                "shorter" => CanonicalCriterion::Shorter,
                "inlinks" => CanonicalCriterion::Inlinks,
                other => {
                    return Err(format!(
                        "unknown canonical criterion {other:?}: use earliest, https, shorter, inlinks (comma-separated, in order of precedence)"
                    ))
                }
            };
            if v.contains(&c) {
                return Err(format!("canonical criterion {name:?} given twice"));
            }
            v.push(c);
        }
        Ok(CanonicalPolicy(v))
    }
}

impl std::fmt::Display for CanonicalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .0
            .iter()
            .map(|c| match c {
                CanonicalCriterion::Earliest => "earliest",
                CanonicalCriterion::Https => "https",
                CanonicalCriterion::Shorter => "shorter",
                CanonicalCriterion::Inlinks => "inlinks",
            })
            .collect();
        write!(f, "{}", names.join(","))
    }
}

/// The order of members for the canonical choice: smaller is preferred.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
struct Rank {
    key: [u64; 4],
    /// Arrival order: when the URL entered the clustering (its first pair since it last had
    /// none); unique, so it settles every tie the criteria leave.
    arrival: u64,
    node: u32,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Cluster {
    id: Arc<str>,
    /// Sorted by rank: the canonical member first (most clusters are small).
    members: SortedSet<Rank>,
}

impl Cluster {
    fn canonical(&self) -> u32 {
        self.members.first().expect("non-empty cluster").node
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Node {
    url: Arc<str>,
    /// When it entered the clustering (event time), for the `earliest` criterion.
    first_ms: i64,
    rank: Rank,
    cluster: Option<u32>,
    adj: Vec<u32>,
}

/// Counters.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterStats {
    /// Clusters alive now.
    pub clusters: u64,
    /// Pages in a cluster now.
    pub clustered_pages: u64,
    /// Splits (a cluster into two of two or more pages).
    pub splits: u64,
    /// Merges.
    pub merges: u64,
}

/// The clusters of one level.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Clusters {
    level: PairLevel,
    policy: CanonicalPolicy,
    /// URLs that entered the clustering so far (the arrival order of [`Rank`]).
    arrivals: u64,
    nodes: Vec<Node>,
    by_url: HashMap<Arc<str>, u32, crate::hash::StrBuild>,
    free_nodes: Vec<u32>,
    clusters: HashMap<u32, Cluster>,
    next_cluster: u32,
    created: u64,
    stats: ClusterStats,
    moves: Vec<Move>,
}

/// A page moving between clusters. Cluster numbers are internal (not the public ids) and are
/// never reused for another cluster. A move from a cluster to itself names the cluster's new
/// canonical member when only its in-link rank changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Move {
    /// The page.
    pub url: Arc<str>,
    /// The cluster it was in.
    pub from: Option<u32>,
    /// The cluster it is in now.
    pub to: Option<u32>,
}

/// A cluster as the map shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster id.
    pub id: String,
    /// Members.
    pub size: u64,
    /// The canonical member.
    pub canonical: String,
}

impl Clusters {
    /// After a restore: gives back the node array's room beyond its length and makes every
    /// URL and cluster id the pool's copy ([`crate::intern`]).
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        self.nodes.shrink_to_fit();
        self.free_nodes.shrink_to_fit();
        for node in &mut self.nodes {
            pool.share(&mut node.url);
        }
        pool.share_keys(&mut self.by_url);
        for cluster in self.clusters.values_mut() {
            pool.share(&mut cluster.id);
        }
    }

    /// Every URL held, as often as held.
    #[cfg(test)]
    pub(crate) fn url_copies(&self) -> impl Iterator<Item = &Arc<str>> {
        self.nodes.iter().map(|n| &n.url).chain(self.by_url.keys())
    }

    /// Empty clusters of `level`, with the default survivor policy.
    pub fn new(level: PairLevel) -> Self {
        Self::with_policy(level, CanonicalPolicy::default())
    }

    /// Empty clusters of `level` whose canonical members follow `policy`.
    pub fn with_policy(level: PairLevel, policy: CanonicalPolicy) -> Self {
        Clusters {
            level,
            policy,
            arrivals: 0,
            nodes: Vec::new(),
            by_url: HashMap::default(),
            free_nodes: Vec::new(),
            clusters: HashMap::new(),
            next_cluster: 0,
            created: 0,
            stats: ClusterStats::default(),
            moves: Vec::new(),
        }
    }

    /// The level.
    pub fn level(&self) -> PairLevel {
        self.level
    }

    /// Counters.
    pub fn stats(&self) -> ClusterStats {
        ClusterStats {
            clusters: self.clusters.len() as u64,
            clustered_pages: self.clusters.values().map(|c| c.members.len() as u64).sum(),
            ..self.stats.clone()
        }
    }

    /// The cluster of `url`, if any.
    pub fn cluster_of(&self, url: &str) -> Option<ClusterInfo> {
        let node = &self.nodes[*self.by_url.get(url)? as usize];
        let c = &self.clusters[&node.cluster?];
        Some(ClusterInfo {
            id: c.id.to_string(),
            size: c.members.len() as u64,
            canonical: self.nodes[c.canonical() as usize].url.to_string(),
        })
    }

    /// Every cluster's internal number and members, in no particular order.
    pub fn members_by_cluster(&self) -> Vec<(u32, Vec<&str>)> {
        self.clusters
            .iter()
            .map(|(&c, cl)| {
                let m = cl
                    .members
                    .iter()
                    .map(|r| &*self.nodes[r.node as usize].url)
                    .collect();
                (c, m)
            })
            .collect()
    }

    /// The internal number of `url`'s cluster (stable while the cluster lives, never reused).
    pub fn cluster_number(&self, url: &str) -> Option<u32> {
        self.nodes[*self.by_url.get(url)? as usize].cluster
    }

    /// The canonical member of the cluster numbered `c`, if it is alive.
    pub fn canonical_of(&self, c: u32) -> Option<&Arc<str>> {
        let cl = self.clusters.get(&c)?;
        Some(&self.nodes[cl.canonical() as usize].url)
    }

    /// The public id of the cluster numbered `c`, if it is alive.
    pub fn id_of(&self, c: u32) -> Option<&Arc<str>> {
        Some(&self.clusters.get(&c)?.id)
    }

    /// The members of the cluster numbered `c` in the survivor policy's order (none if it is
    /// not alive).
    pub fn members_of(&self, c: u32) -> impl Iterator<Item = &Arc<str>> + '_ {
        self.clusters
            .get(&c)
            .into_iter()
            .flat_map(|cl| cl.members.iter())
            .map(|r| &self.nodes[r.node as usize].url)
    }

    /// Every clustered URL with its cluster, sorted by URL (the cluster map).
    pub fn map(&self) -> Vec<(String, ClusterInfo)> {
        let mut out: Vec<(String, ClusterInfo)> = self
            .by_url
            .keys()
            .filter_map(|u| Some((u.to_string(), self.cluster_of(u)?)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The member sets of all clusters, each sorted, sorted (for tests).
    pub fn components(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = self
            .clusters
            .values()
            .map(|c| {
                let mut m: Vec<String> = c
                    .members
                    .iter()
                    .map(|r| self.nodes[r.node as usize].url.to_string())
                    .collect();
                m.sort();
                m
            })
            .collect();
        out.sort();
        out
    }

    fn node(&mut self, url: &Arc<str>, at_ms: i64, inlinks: &dyn Fn(&str) -> u32) -> u32 {
        if let Some(&n) = self.by_url.get(&**url) {
            return n;
        }
        let url = Arc::clone(url);
        let fresh = Node {
            url: url.clone(),
            first_ms: at_ms,
            rank: Rank {
                key: self.policy.key(at_ms, &url, inlinks(&url)),
                arrival: self.arrivals,
                node: 0,
            },
            cluster: None,
            adj: Vec::new(),
        };
        self.arrivals += 1;
        let n = match self.free_nodes.pop() {
            Some(n) => {
                self.nodes[n as usize] = fresh;
                n
            }
            None => {
                self.nodes.push(fresh);
                (self.nodes.len() - 1) as u32
            }
        };
        self.nodes[n as usize].rank.node = n;
        self.by_url.insert(url, n);
        n
    }

    /// Forgets a node that has no edges and no cluster, so a later return ranks it anew.
    fn release(&mut self, n: u32) {
        let node = &self.nodes[n as usize];
        if node.adj.is_empty() && node.cluster.is_none() && self.by_url.get(&node.url) == Some(&n) {
            let url = node.url.clone();
            self.by_url.remove(&url);
            self.free_nodes.push(n);
        }
    }

    fn new_cluster(&mut self, a: u32, b: u32) -> u32 {
        self.created += 1;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(level_tag(self.level).as_bytes());
        h.update(&[0]);
        h.update(self.nodes[a as usize].url.as_bytes());
        h.update(&[0]);
        h.update(self.nodes[b as usize].url.as_bytes());
        h.update(&self.created.to_le_bytes());
        let id: Arc<str> = Arc::from(format!("{}-{:016x}", level_tag(self.level), h.digest()));
        // Numbers wrap after 2^32 clusters (a week at 7,000 new clusters a second); a number
        // still in use is skipped. A cluster given a number 2^32 creations ago and still alive
        // is all that it could meet, and the stages downstream forget a cluster's number in the
        // batch of moves that ends it.
        let c = loop {
            let c = self.next_cluster;
            self.next_cluster = self.next_cluster.wrapping_add(1);
            if !self.clusters.contains_key(&c) {
                break c;
            }
        };
        self.clusters.insert(
            c,
            Cluster {
                id,
                members: SortedSet::default(),
            },
        );
        c
    }

    fn attach(&mut self, c: u32, n: u32) {
        let from = self.nodes[n as usize].cluster;
        self.moves.push(Move {
            url: self.nodes[n as usize].url.clone(),
            from,
            to: Some(c),
        });
        self.nodes[n as usize].cluster = Some(c);
        let rank = self.nodes[n as usize].rank;
        self.clusters
            .get_mut(&c)
            .expect("cluster")
            .members
            .insert(rank);
    }

    fn detach(&mut self, n: u32) {
        let from = self.nodes[n as usize].cluster.take();
        self.moves.push(Move {
            url: self.nodes[n as usize].url.clone(),
            from,
            to: None,
        });
    }

    /// `url` now has `count` in-links: under the `inlinks` criterion its rank moves, and if that
    /// moves its cluster's canonical, `canonical_changed` is emitted and a move of the new
    /// canonical from its cluster to the same cluster is recorded (so that whoever follows the
    /// moves, like the crawl hints, sees the cluster changed).
    pub fn set_inlinks(&mut self, url: &str, count: u32, out: &mut Emitter) {
        if !self.policy.uses_inlinks() {
            return;
        }
        let Some(&n) = self.by_url.get(url) else {
            return;
        };
        let node = &self.nodes[n as usize];
        let key = self.policy.key(node.first_ms, &node.url, count);
        if key == node.rank.key {
            return;
        }
        let old = node.rank;
        self.nodes[n as usize].rank.key = key;
        let Some(c) = self.nodes[n as usize].cluster else {
            return;
        };
        let before = self.clusters[&c].canonical();
        let members = &mut self.clusters.get_mut(&c).expect("cluster").members;
        members.remove(&old);
        members.insert(self.nodes[n as usize].rank);
        let now = self.clusters[&c].canonical();
        if now != before {
            self.moves.push(Move {
                url: self.nodes[now as usize].url.clone(),
                from: Some(c),
                to: Some(c),
            });
            self.canonical_moved(c, before, out);
        }
    }

    /// The membership moves since the last call, in order (for the mirror stage). Whoever
    /// owns the clusters drains them after every step, or they accumulate.
    pub fn take_moves(&mut self) -> std::vec::Drain<'_, Move> {
        self.moves.drain(..)
    }

    /// A pair became live at this level.
    pub fn add_pair(&mut self, a: &str, b: &str, at_ms: i64, out: &mut Emitter) {
        self.add_pair_ranked(a, b, at_ms, &|_| 0, out);
    }

    /// [`Clusters::add_pair`], with the in-link counts of URLs that enter the clustering (for
    /// the `inlinks` criterion).
    pub fn add_pair_ranked(
        &mut self,
        a: &str,
        b: &str,
        at_ms: i64,
        inlinks: &dyn Fn(&str) -> u32,
        out: &mut Emitter,
    ) {
        self.add_pair_shared(&Arc::from(a), &Arc::from(b), at_ms, inlinks, out);
    }

    /// [`Clusters::add_pair_ranked`], keeping the URLs given (shared with the rest of the
    /// state) for pages that enter the clustering.
    pub(crate) fn add_pair_shared(
        &mut self,
        a: &Arc<str>,
        b: &Arc<str>,
        at_ms: i64,
        inlinks: &dyn Fn(&str) -> u32,
        out: &mut Emitter,
    ) {
        let (na, nb) = (self.node(a, at_ms, inlinks), self.node(b, at_ms, inlinks));
        if na == nb || self.nodes[na as usize].adj.contains(&nb) {
            return;
        }
        self.nodes[na as usize].adj.push(nb);
        self.nodes[nb as usize].adj.push(na);
        match (
            self.nodes[na as usize].cluster,
            self.nodes[nb as usize].cluster,
        ) {
            (None, None) => {
                let c = self.new_cluster(na, nb);
                self.attach(c, na);
                self.attach(c, nb);
                let mut added = vec![self.url(na), self.url(nb)];
                added.sort();
                self.emit(c, ClusterChangeKind::Created, added, vec![], vec![], out);
            }
            (Some(c), None) | (None, Some(c)) => {
                let joiner = if self.nodes[na as usize].cluster.is_none() {
                    na
                } else {
                    nb
                };
                let before = self.clusters[&c].canonical();
                self.attach(c, joiner);
                let added = vec![self.url(joiner)];
                self.emit(c, ClusterChangeKind::Joined, added, vec![], vec![], out);
                self.canonical_moved(c, before, out);
            }
            (Some(ca), Some(cb)) if ca != cb => {
                let (sa, sb) = (
                    self.clusters[&ca].members.len(),
                    self.clusters[&cb].members.len(),
                );
                // The larger keeps its id; on a tie the older (lower number) does.
                let (keep, gone) = if sa > sb || (sa == sb && ca < cb) {
                    (ca, cb)
                } else {
                    (cb, ca)
                };
                let before = self.clusters[&keep].canonical();
                let absorbed = self.clusters.remove(&gone).expect("cluster");
                let mut added = Vec::with_capacity(absorbed.members.len());
                for r in absorbed.members.iter() {
                    self.attach(keep, r.node);
                    added.push(self.url(r.node));
                }
                added.sort();
                self.stats.merges += 1;
                let related = vec![absorbed.id.to_string()];
                self.emit(keep, ClusterChangeKind::Merged, added, vec![], related, out);
                self.canonical_moved(keep, before, out);
            }
            _ => {}
        }
    }

    /// A pair stopped being live at this level.
    pub fn remove_pair(&mut self, a: &str, b: &str, out: &mut Emitter) {
        let (Some(&na), Some(&nb)) = (self.by_url.get(a), self.by_url.get(b)) else {
            return;
        };
        let Some(p) = self.nodes[na as usize].adj.iter().position(|&x| x == nb) else {
            return;
        };
        self.nodes[na as usize].adj.swap_remove(p);
        let q = self.nodes[nb as usize]
            .adj
            .iter()
            .position(|&x| x == na)
            .expect("symmetric edge");
        self.nodes[nb as usize].adj.swap_remove(q);
        let c = self.nodes[na as usize]
            .cluster
            .expect("an edge lies in a cluster");
        if let Some(part) = self.separated(na, nb) {
            self.split_off(c, part, out);
        }
        self.release(na);
        self.release(nb);
    }

    /// `None` if a and b are still connected; else the complete component of one of them (the
    /// one whose search ran out first).
    fn separated(&self, a: u32, b: u32) -> Option<Vec<u32>> {
        let mut seen: [HashSet<u32>; 2] = [HashSet::from([a]), HashSet::from([b])];
        let mut queue: [VecDeque<u32>; 2] = [VecDeque::from([a]), VecDeque::from([b])];
        let mut order: [Vec<u32>; 2] = [vec![a], vec![b]];
        loop {
            // Expand the side with the smaller frontier; stop when one side is exhausted.
            let s = usize::from(queue[1].len() < queue[0].len());
            let Some(x) = queue[s].pop_front() else {
                return Some(std::mem::take(&mut order[s]));
            };
            for &y in &self.nodes[x as usize].adj {
                if seen[1 - s].contains(&y) {
                    return None;
                }
                if seen[s].insert(y) {
                    queue[s].push_back(y);
                    order[s].push(y);
                }
            }
        }
    }

    fn split_off(&mut self, c: u32, part: Vec<u32>, out: &mut Emitter) {
        let total = self.clusters[&c].members.len();
        let before = self.clusters[&c].canonical();
        let part_set: HashSet<u32> = part.iter().copied().collect();
        let (moving, staying_len) = {
            // The larger part keeps the id; on a tie, the part holding the canonical member.
            let rest = total - part.len();
            if part.len() > rest || (part.len() == rest && part_set.contains(&before)) {
                let cl = &self.clusters[&c];
                let others: Vec<u32> = cl
                    .members
                    .iter()
                    .map(|r| r.node)
                    .filter(|n| !part_set.contains(n))
                    .collect();
                (others, part.len())
            } else {
                (part, rest)
            }
        };
        for &n in &moving {
            let rank = self.nodes[n as usize].rank;
            self.clusters
                .get_mut(&c)
                .expect("cluster")
                .members
                .remove(&rank);
            self.detach(n);
        }
        let mut removed: Vec<String> = moving.iter().map(|&n| self.url(n)).collect();
        removed.sort();
        if moving.len() >= 2 {
            let (a, b) = {
                let mut m = moving.clone();
                m.sort_by(|x, y| {
                    self.nodes[*x as usize]
                        .url
                        .cmp(&self.nodes[*y as usize].url)
                });
                (m[0], m[1])
            };
            let nc = self.new_cluster(a, b);
            for &n in &moving {
                self.attach(nc, n);
            }
            self.stats.splits += 1;
            let related = vec![self.clusters[&nc].id.to_string()];
            self.emit(
                c,
                ClusterChangeKind::Split,
                vec![],
                removed.clone(),
                related,
                out,
            );
            self.emit(nc, ClusterChangeKind::Created, removed, vec![], vec![], out);
            self.canonical_moved(c, before, out);
        } else if staying_len >= 2 {
            self.emit(c, ClusterChangeKind::Left, vec![], removed, vec![], out);
            self.canonical_moved(c, before, out);
        } else {
            // Two pages, now apart: the cluster is gone.
            let last = self.clusters[&c].canonical();
            self.detach(last);
            removed.push(self.url(last));
            removed.sort();
            let gone = self.clusters.remove(&c).expect("cluster");
            out.emit(ClusterEvent {
                schema: OutputKind::Clusters.schema().into(),
                event_id: String::new(),
                cluster_id: gone.id.to_string(),
                level: self.level,
                change: ClusterChangeKind::Dissolved,
                size: 0,
                canonical: None,
                added: vec![],
                removed,
                related: vec![],
                at: out.at().to_owned(),
            });
            self.release(last);
        }
        for n in moving {
            self.release(n);
        }
    }

    fn canonical_moved(&mut self, c: u32, before: u32, out: &mut Emitter) {
        if self.clusters[&c].canonical() != before {
            self.emit(
                c,
                ClusterChangeKind::CanonicalChanged,
                vec![],
                vec![],
                vec![],
                out,
            );
        }
    }

    fn url(&self, n: u32) -> String {
        self.nodes[n as usize].url.to_string()
    }

    /// Emits `change` of cluster `c`. A merge or a split of thousands of pages would list
    /// them all in one event, over any producer's limit, and be dead-lettered: a consumer
    /// keeping the membership would lose the change. So a list over [`MAX_LIST_BYTES`] is
    /// stated in parts: `change` with the first part, then `joined` (the rest of `added`) or
    /// `left` (the rest of `removed`) events, each with the cluster as it is after the change.
    fn emit(
        &self,
        c: u32,
        change: ClusterChangeKind,
        added: Vec<String>,
        removed: Vec<String>,
        related: Vec<String>,
        out: &mut Emitter,
    ) {
        let cl = &self.clusters[&c];
        let at = out.at().to_owned();
        let event = |change, added, removed, related| ClusterEvent {
            schema: OutputKind::Clusters.schema().into(),
            event_id: String::new(),
            cluster_id: cl.id.to_string(),
            level: self.level,
            change,
            size: cl.members.len() as u64,
            canonical: Some(self.url(cl.canonical())),
            added,
            removed,
            related,
            at: at.clone(),
        };
        let (mut added, mut removed) = (in_parts(added), in_parts(removed));
        let first = event(
            change,
            added.next().unwrap_or_default(),
            removed.next().unwrap_or_default(),
            related,
        );
        out.emit(first);
        for part in added {
            out.emit(event(ClusterChangeKind::Joined, part, vec![], vec![]));
        }
        for part in removed {
            out.emit(event(ClusterChangeKind::Left, vec![], part, vec![]));
        }
    }
}

/// The most bytes of URLs (as JSON strings, with their commas, as
/// [`crate::signer::ListCaps::link_cost`] counts them) one cluster event lists.
const MAX_LIST_BYTES: usize = 256 * 1024;

/// `urls` in consecutive parts of at most [`MAX_LIST_BYTES`] each (a longer URL alone).
fn in_parts(urls: Vec<String>) -> impl Iterator<Item = Vec<String>> {
    let mut parts: Vec<Vec<String>> = Vec::new();
    let mut bytes = 0;
    for u in urls {
        let cost = crate::signer::ListCaps::link_cost(&u);
        match parts.last_mut() {
            Some(part) if bytes + cost <= MAX_LIST_BYTES => {
                bytes += cost;
                part.push(u);
            }
            _ => {
                bytes = cost;
                parts.push(vec![u]);
            }
        }
    }
    parts.into_iter()
}

fn level_tag(level: PairLevel) -> &'static str {
    match level {
        PairLevel::Exact => "ex",
        PairLevel::VirtuallyIdentical => "vi",
        PairLevel::VerySimilar => "vs",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cluster numbers wrap at 2^32 and skip the numbers of live clusters.
    #[test]
    fn cluster_numbers_wrap_around_live_clusters() {
        let mut c = Clusters::new(PairLevel::VerySimilar);
        let mut out = Emitter::new();
        c.next_cluster = u32::MAX;
        c.add_pair("http://a.example/1", "http://b.example/1", 0, &mut out);
        assert_eq!(c.cluster_number("http://a.example/1"), Some(u32::MAX));
        c.next_cluster = u32::MAX;
        c.add_pair("http://a.example/2", "http://b.example/2", 0, &mut out);
        // u32::MAX is taken: the number wraps to 0.
        assert_eq!(c.cluster_number("http://a.example/2"), Some(0));
        c.add_pair("http://a.example/3", "http://b.example/3", 0, &mut out);
        assert_eq!(c.cluster_number("http://a.example/3"), Some(1));
        assert_eq!(c.stats().clusters, 3);
    }

    /// A merge and a split of thousands of pages are stated in events under the limit: the
    /// change with the first part of the list, then `joined` or `left` with the rest, and
    /// together they list every page that moved, once.
    #[test]
    fn a_merge_or_split_of_thousands_of_pages_is_stated_in_parts() {
        let mut c = Clusters::new(PairLevel::VerySimilar);
        let mut out = Emitter::new();
        let url = |side: &str, i: usize| format!("http://{side}.example/{}/{i}", "d/".repeat(40));
        // Two stars of 3,000 pages each (about 300 KB of URLs each).
        for i in 1..3000 {
            c.add_pair(&url("a", 0), &url("a", i), 0, &mut out);
            c.add_pair(&url("b", 0), &url("b", i), 0, &mut out);
        }
        out.drain().for_each(drop);
        let events = |out: &mut Emitter| -> Vec<ClusterEvent> {
            out.drain()
                .map(|e| {
                    assert!(e.value.len() < MAX_LIST_BYTES + 2048, "{}", e.value.len());
                    serde_json::from_slice(&e.value).unwrap()
                })
                .collect()
        };
        let listed = |evs: &[ClusterEvent], f: fn(&ClusterEvent) -> &Vec<String>| {
            let mut all: Vec<String> = evs.iter().flat_map(|e| f(e).clone()).collect();
            all.sort();
            all
        };
        let mut b_side: Vec<String> = (0..3000).map(|i| url("b", i)).collect();
        b_side.sort();

        // A bridge merges them: the absorbed star's 3,000 URLs, in parts.
        c.add_pair(&url("a", 0), &url("b", 0), 0, &mut out);
        let merged = events(&mut out);
        let kinds: Vec<ClusterChangeKind> = merged.iter().map(|e| e.change).collect();
        assert_eq!(
            kinds,
            [ClusterChangeKind::Merged, ClusterChangeKind::Joined]
        );
        assert!(merged
            .iter()
            .all(|e| e.size == 6000 && e.removed.is_empty()));
        assert_eq!(merged[0].related.len(), 1);
        assert!(merged[1].related.is_empty());
        assert_eq!(listed(&merged, |e| &e.added), b_side);

        // Without it, they split again: `split` and `left` from the one, `created` and
        // `joined` for the other, each listing the 3,000 that moved.
        c.remove_pair(&url("a", 0), &url("b", 0), &mut out);
        let split = events(&mut out);
        let kinds: Vec<ClusterChangeKind> = split.iter().map(|e| e.change).collect();
        use ClusterChangeKind::*;
        assert_eq!(kinds, [Split, Left, Created, Joined]);
        assert!(split.iter().all(|e| e.size == 3000));
        let (old, new) = split.split_at(2);
        assert_eq!(listed(old, |e| &e.removed), listed(new, |e| &e.added));
        assert_eq!(listed(old, |e| &e.removed).len(), 3000);
        assert!(old.iter().all(|e| e.cluster_id == old[0].cluster_id));
        assert!(new.iter().all(|e| e.cluster_id == new[0].cluster_id));
    }

    #[test]
    fn parts_keep_the_order_and_a_long_url_alone() {
        let long = "x".repeat(MAX_LIST_BYTES);
        let urls = vec!["a".to_owned(), long.clone(), "b".to_owned(), "c".to_owned()];
        let parts: Vec<Vec<String>> = in_parts(urls).collect();
        assert_eq!(
            parts,
            [
                vec!["a".to_owned()],
                vec![long],
                vec!["b".to_owned(), "c".to_owned()]
            ]
        );
        assert_eq!(in_parts(vec![]).count(), 0);
    }
}
