//! How clusters evolve between crawl rounds (seed 000 §3): the cluster containment coefficient
//! Φ and similarity coefficient Ψ, averaged over the URLs of round 1 bucketed by the size of
//! their round-1 cluster, the cluster-size distribution of every round and the share of pages
//! that are near-duplicates.
//!
//! A round is the run of page events with one `crawl_id`. When the `crawl_id` changes, the
//! `very_similar` clusters are snapshotted for the round that ended. Following seed 000, C_n(u)
//! is u's cluster in round n, or {u} when u was fetched with content in round n but is in no
//! cluster (a cluster of size 1), or the empty set when u had no content in round n (seed 000's
//! "could not download" cluster, which shares nothing with any other). Then
//! Φ_1^n(u) = |C_1(u) ∩ C_n(u)| / |C_1(u)| (how much of u's round-1 cluster is still with it),
//! the reverse Φ_n^1(u) = |C_1(u) ∩ C_n(u)| / |C_n(u)| (0 when C_n(u) is empty), and
//! Ψ_1^n(u) = |C_1(u) ∩ C_n(u)| / |C_1(u) ∪ C_n(u)|.
//!
//! Per round it also gives the views of a crawl the replay report draws: the change buckets of
//! seed 000 fig. 10 (how each page changed since its previous fetch), the largest clusters with
//! their hosts and canonical URL (seed 000 tables 1–2), and seed 004's table 4: duplicates in
//! the part of the round's link graph reachable from its entry pages ("connected") and in the
//! rest ("disconnected"). The entry pages are each host's home page: its URL in the round with
//! the shortest path (ties: the smaller URL), as a crawl seeded with a list of sites starts
//! there. A page's duplicates are the members of its cluster beyond one; for a subcollection,
//! the clusters are cut to it first (seed 004: a cluster may split or vanish).
//!
//! Kept only when asked for (replays): it remembers every round's URLs and out-links.

use crate::clusters::Clusters;
use crate::rounds::{Rounds, Step};
use crate::site;
use neardup_schemas::ChangeBucket;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The maps here hold URLs and fingerprints of every page of a replay: the fixed, fast hasher
/// (`crate::hash`) instead of SipHash.
type HashMap<K, V> = std::collections::HashMap<K, V, crate::hash::StrBuild>;
type HashSet<K> = std::collections::HashSet<K, crate::hash::StrBuild>;

/// Size buckets of round-1 clusters, as in seed 000's figures 4, 5 and 7.
pub const BUCKETS: [(u64, u64); 7] = [
    (1, 1),
    (2, 2),
    (3, 4),
    (5, 10),
    (11, 100),
    (101, 1000),
    (1001, u64::MAX),
];

/// One round's clusters: URL -> group, group sizes (singletons included).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Snapshot {
    crawl_id: String,
    group: HashMap<Arc<str>, u32>,
    sizes: Vec<u64>,
}

/// The figures of one round.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RoundFigures {
    /// The round.
    pub crawl_id: String,
    /// URLs fetched with content in the round.
    pub pages: u64,
    /// Of them, in a `very_similar` cluster at the round's end.
    pub near_duplicate_pages: u64,
    /// `near_duplicate_pages / pages`.
    pub near_duplicate_share: f64,
    /// Clusters of two or more pages.
    pub clusters: u64,
    /// Cluster size -> number of clusters of that size (singletons included, as size 1).
    pub size_distribution: BTreeMap<u64, u64>,
    /// Against round 1, per size bucket of the round-1 cluster (absent for round 1 itself).
    pub versus_first: Vec<BucketFigures>,
    /// Pages of the round by how they changed since their previous fetch (seed 000 fig. 10);
    /// first fetches are not counted.
    pub change_buckets: BTreeMap<ChangeBucket, u64>,
    /// The largest clusters of the round, largest first (at most [`LARGEST`]).
    pub largest_clusters: Vec<ClusterView>,
    /// Duplicates in the connected and disconnected parts of the round's link graph.
    pub link_graph: LinkGraphFigures,
    /// Seed 004 tables 2-3: duplicates and near-duplicates by shingle paragraphs.
    pub paragraph_duplicates: ParagraphFigures,
    /// Events of the round that came after a later round had begun (late, at the edge of two
    /// rounds that overlap): left out of these figures, which the round's end fixed.
    pub late_events: u64,
}

/// Seed 004's duplicates by shingle paragraphs (three sentences, no overlap) over the round's
/// pages of at least 450 characters: a cluster is a set of pages with the same paragraphs (as a
/// multiset); a page is a near-duplicate at X % when it shares at least X % of the paragraphs of
/// both itself and another page (shared / the larger count) and is no duplicate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ParagraphFigures {
    /// Pages considered (with content, not short).
    pub documents: u64,
    /// Clusters of two or more pages with the same paragraphs.
    pub clusters: u64,
    /// Pages in them.
    pub clustered: u64,
    /// `clustered - clusters`: the copies beyond one per cluster.
    pub duplicates: u64,
    /// Near-duplicates (not duplicates) at 90 %, 70 % and 50 % shared paragraphs.
    pub near_90: u64,
    /// At 70 %.
    pub near_70: u64,
    /// At 50 %.
    pub near_50: u64,
}

/// A paragraph on more pages than this is template text: it does not make candidates.
const PARAGRAPH_POSTING_CAP: usize = 200;

/// How many of the largest clusters a round lists.
pub const LARGEST: usize = 20;

/// One cluster as the report lists it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ClusterView {
    /// Pages of the round in the cluster.
    pub size: u64,
    /// Distinct hosts among them.
    pub host_count: u64,
    /// The first hosts, sorted (at most 10).
    pub hosts: Vec<String>,
    /// The cluster's canonical URL.
    pub representative: String,
}

/// Seed 004 table 4 for one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LinkGraphFigures {
    /// Entry pages (one per host).
    pub entry_pages: u64,
    /// Pages reachable from an entry page by out-links within the round.
    pub connected_pages: u64,
    /// The others.
    pub disconnected_pages: u64,
    /// Duplicates in the whole round.
    pub duplicates: u64,
    /// Duplicates with the clusters cut to the connected pages.
    pub connected_duplicates: u64,
    /// Duplicates with the clusters cut to the disconnected pages.
    pub disconnected_duplicates: u64,
}

/// Averages over the URLs of one round-1 size bucket.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BucketFigures {
    /// Smallest round-1 cluster size in the bucket.
    pub min_size: u64,
    /// Largest (u64::MAX: unbounded).
    pub max_size: u64,
    /// URLs in the bucket.
    pub urls: u64,
    /// Mean Φ_1^n: the share of u's round-1 cluster still with u.
    pub containment: f64,
    /// Mean reverse Φ_n^1: the share of u's round-n cluster that was with u in round 1.
    pub reverse_containment: f64,
    /// Mean Ψ_1^n.
    pub similarity: f64,
}

/// Pages' out-links as the 64-bit hashes of their URLs ([`link_hash`]), sorted and without
/// repeats. The link graph only asks which of the round's pages a link names, and a page's
/// links as strings took about 5 KB per page on the benchmark crawls, for every page of two
/// rounds; two URLs of a round share a hash with odds of about 2^-64 per pair.
type Links = HashMap<Arc<str>, Box<[u64]>>;

/// The hash by which [`Links`] names a URL.
fn link_hash(url: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(url.as_bytes())
}

/// Pages' shingle-paragraph fingerprints, sorted.
type Paragraphs = HashMap<Arc<str>, Box<[u64]>>;

/// The evolution tracker.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Evolution {
    /// The round under way, and those that ended ([`crate::rounds`]).
    crawl: Rounds,
    /// Whether the event being handled is late: of a round that has ended, whose figures it
    /// does not change (counted in that round's [`RoundFigures::late_events`]).
    late: bool,
    pages: HashSet<Arc<str>>,
    links: Links,
    paragraphs: Paragraphs,
    /// The links and paragraphs of the round before, for the pages a 304 carries over: those
    /// of the pages not yet fetched in this round (a page fetched or carried over leaves them,
    /// so they shrink as the round grows).
    before: (Links, Paragraphs),
    changes: BTreeMap<ChangeBucket, u64>,
    rounds: Vec<Snapshot>,
    figures: Vec<RoundFigures>,
}

impl Evolution {
    /// An empty tracker.
    pub fn new() -> Self {
        Evolution::default()
    }

    /// Call before handling a page event of round `crawl_id` (events without one belong to the
    /// current round, or to none before the first): a round not seen before closes the one
    /// under way; an event of a round that has closed is late, and counted in its figures
    /// (see the `rounds` module).
    pub fn begin(&mut self, crawl_id: Option<&str>, clusters: &Clusters) {
        self.late = false;
        match self.crawl.step(crawl_id) {
            Step::Same => {}
            Step::New(ended) => {
                if let Some(ended) = ended {
                    self.close_round(ended, clusters);
                }
            }
            Step::Late => {
                self.late = true;
                let id = crawl_id.expect("a late event names its round");
                if let Some(f) = self.figures.iter_mut().rev().find(|f| f.crawl_id == id) {
                    f.late_events += 1;
                }
            }
        }
    }

    /// A URL was fetched with content (`true`) or without (`false`) in the current round.
    pub fn fetched(&mut self, url: &str, content: bool) {
        if !self.open() {
            return;
        }
        self.before.0.remove(url);
        self.before.1.remove(url);
        if content {
            self.pages.insert(Arc::from(url));
        } else {
            self.pages.remove(url);
            self.links.remove(url);
            self.paragraphs.remove(url);
        }
    }

    /// A 304 (Not Modified) of `url`, whose content the windows hold, in the current round: the
    /// page is in the round with that content, its out-links and paragraphs those of its fetch
    /// in the round before (none known when it was not fetched then). A page fetched whole in
    /// this round keeps what that fetch gave.
    pub fn unchanged(&mut self, url: &str) {
        if !self.open() || self.pages.contains(url) {
            return;
        }
        let url: Arc<str> = Arc::from(url);
        if let Some(l) = self.before.0.remove(&url) {
            self.links.insert(url.clone(), l);
        }
        if let Some(p) = self.before.1.remove(&url) {
            self.paragraphs.insert(url.clone(), p);
        }
        self.pages.insert(url);
    }

    /// The out-links of `url`'s fetch in the current round (a later fetch replaces them).
    pub fn links<'a>(&mut self, url: &str, out: impl Iterator<Item = &'a str>) {
        if !self.open() {
            return;
        }
        let mut hashes: Vec<u64> = out.map(link_hash).collect();
        hashes.sort_unstable();
        hashes.dedup();
        self.links.insert(Arc::from(url), hashes.into());
    }

    /// The shingle-paragraph fingerprints of `url`'s fetch in the current round; `short`
    /// pages (under 450 characters) are left out, as in seed 004.
    pub fn paragraphs(&mut self, url: &str, fps: impl Iterator<Item = u64>, short: bool) {
        if !self.open() {
            return;
        }
        if short {
            self.paragraphs.remove(url);
        } else {
            let mut v: Vec<u64> = fps.collect();
            v.sort_unstable();
            self.paragraphs.insert(Arc::from(url), v.into());
        }
    }

    /// A page of the current round changed by `bucket` since its previous fetch.
    pub fn changed(&mut self, bucket: ChangeBucket) {
        if !self.open() {
            return;
        }
        *self.changes.entry(bucket).or_default() += 1;
    }

    /// Whether a round is open: page events before the first with a `crawl_id` belong to no
    /// round, and nothing is kept of them. A stream without crawl ids (one whose rounds are
    /// not known) would otherwise hold every URL it ever had, with its out-links and
    /// paragraphs, for figures no round would ever give.
    fn open(&self) -> bool {
        self.crawl.current().is_some() && !self.late
    }

    /// Closes the current round (also at the end of a replay). Idempotent.
    pub fn close(&mut self, clusters: &Clusters) {
        if let Some(crawl_id) = self.crawl.end() {
            self.close_round(crawl_id, clusters);
        }
    }

    /// Closes round `crawl_id`, the one under way until now.
    fn close_round(&mut self, crawl_id: String, clusters: &Clusters) {
        let mut snap = Snapshot {
            crawl_id,
            ..Snapshot::default()
        };
        let mut by_cluster: HashMap<u32, u32> = HashMap::default();
        let mut urls: Vec<&Arc<str>> = self.pages.iter().collect();
        urls.sort();
        let mut near = 0u64;
        for u in urls {
            let g = match clusters.cluster_number(u) {
                Some(c) => {
                    near += 1;
                    *by_cluster.entry(c).or_insert_with(|| {
                        snap.sizes.push(0);
                        (snap.sizes.len() - 1) as u32
                    })
                }
                None => {
                    snap.sizes.push(0);
                    (snap.sizes.len() - 1) as u32
                }
            };
            snap.sizes[g as usize] += 1;
            snap.group.insert(u.clone(), g);
        }
        let mut size_distribution = BTreeMap::new();
        for &s in &snap.sizes {
            *size_distribution.entry(s).or_insert(0u64) += 1;
        }
        let pages = snap.group.len() as u64;
        let versus_first = self
            .rounds
            .first()
            .map(|first| compare(first, &snap))
            .unwrap_or_default();
        self.figures.push(RoundFigures {
            crawl_id: snap.crawl_id.clone(),
            pages,
            near_duplicate_pages: near,
            near_duplicate_share: if pages == 0 {
                0.0
            } else {
                near as f64 / pages as f64
            },
            clusters: by_cluster.len() as u64,
            size_distribution,
            versus_first,
            change_buckets: std::mem::take(&mut self.changes),
            largest_clusters: largest(&snap, &by_cluster, clusters),
            link_graph: link_graph(&snap, &self.links),
            paragraph_duplicates: paragraph_duplicates(&self.paragraphs),
            late_events: 0,
        });
        // Only round 1 is compared against; later rounds need only their figures.
        if self.rounds.is_empty() {
            self.rounds.push(snap);
        }
        self.pages.clear();
        self.before = (
            std::mem::take(&mut self.links),
            std::mem::take(&mut self.paragraphs),
        );
    }

    /// The figures of every closed round.
    pub fn figures(&self) -> &[RoundFigures] {
        &self.figures
    }
}

/// The largest clusters of a round (cluster number -> group in `by_cluster`).
fn largest(
    snap: &Snapshot,
    by_cluster: &HashMap<u32, u32>,
    clusters: &Clusters,
) -> Vec<ClusterView> {
    let mut members: HashMap<u32, Vec<&str>> = HashMap::default();
    for (u, g) in &snap.group {
        members.entry(*g).or_default().push(u);
    }
    let mut views: Vec<ClusterView> = by_cluster
        .iter()
        .map(|(&c, g)| {
            let mut hosts: Vec<&str> = members[g].iter().map(|u| site::host(u)).collect();
            hosts.sort_unstable();
            hosts.dedup();
            ClusterView {
                size: snap.sizes[*g as usize],
                host_count: hosts.len() as u64,
                hosts: hosts.iter().take(10).map(|h| (*h).to_owned()).collect(),
                representative: clusters
                    .canonical_of(c)
                    .map(|u| u.to_string())
                    .unwrap_or_default(),
            }
        })
        .collect();
    views.sort_by(|a, b| {
        b.size
            .cmp(&a.size)
            .then_with(|| a.representative.cmp(&b.representative))
    });
    views.truncate(LARGEST);
    views
}

/// Seed 004 tables 2-3 over the round's pages.
fn paragraph_duplicates(pages: &Paragraphs) -> ParagraphFigures {
    let mut docs: Vec<(&Arc<str>, &[u64])> = pages
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(u, p)| (u, &**p))
        .collect();
    docs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut f = ParagraphFigures {
        documents: docs.len() as u64,
        ..ParagraphFigures::default()
    };
    let mut same: HashMap<&[u64], u64> = HashMap::default();
    for (_, p) in &docs {
        *same.entry(p).or_default() += 1;
    }
    for &n in same.values().filter(|&&n| n >= 2) {
        f.clusters += 1;
        f.clustered += n;
    }
    f.duplicates = f.clustered - f.clusters;
    // Candidates share a paragraph that is not template text.
    let mut postings: HashMap<u64, Vec<u32>> = HashMap::default();
    for (i, (_, p)) in docs.iter().enumerate() {
        let mut last = None;
        for &fp in p.iter() {
            if last != Some(fp) {
                postings.entry(fp).or_default().push(i as u32);
                last = Some(fp);
            }
        }
    }
    let mut shared: HashMap<u32, u32> = HashMap::default();
    for (i, (_, p)) in docs.iter().enumerate() {
        if same[p] >= 2 {
            continue;
        }
        shared.clear();
        let mut last = None;
        for &fp in p.iter() {
            if last == Some(fp) {
                continue;
            }
            last = Some(fp);
            let list = &postings[&fp];
            if list.len() <= PARAGRAPH_POSTING_CAP {
                for &j in list.iter().filter(|&&j| j as usize != i) {
                    *shared.entry(j).or_default() += 1;
                }
            }
        }
        let best = shared
            .iter()
            .map(|(&j, &n)| f64::from(n) / p.len().max(docs[j as usize].1.len()) as f64)
            .fold(0.0, f64::max);
        f.near_90 += u64::from(best >= 0.9);
        f.near_70 += u64::from(best >= 0.7);
        f.near_50 += u64::from(best >= 0.5);
    }
    f
}

/// The length of a URL's path and query, for choosing a host's entry page.
fn path_len(url: &str) -> usize {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or(0, |i| rest.len() - i)
}

/// Seed 004 table 4: BFS over the round's out-links from each host's entry page.
fn link_graph(snap: &Snapshot, links: &Links) -> LinkGraphFigures {
    let mut urls: Vec<(&Arc<str>, u32)> = snap.group.iter().map(|(u, &g)| (u, g)).collect();
    urls.sort_unstable_by(|a, b| a.0.cmp(b.0));
    // The round's pages by number, so that the search marks a page with one lookup per link.
    let number: HashMap<u64, u32> = (urls.iter().enumerate())
        .map(|(i, (u, _))| (link_hash(u), i as u32))
        .collect();
    let mut entry: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (u, _)) in urls.iter().enumerate() {
        let e = entry.entry(site::host(u)).or_insert(i);
        if path_len(u) < path_len(urls[*e].0) {
            *e = i;
        }
    }
    let mut connected = vec![false; urls.len()];
    let mut queue: Vec<usize> = entry.values().copied().collect();
    for &i in &queue {
        connected[i] = true;
    }
    while let Some(i) = queue.pop() {
        let out = links.get(&**urls[i].0).map_or(&[][..], |l| &**l);
        for l in out {
            if let Some(&j) = number.get(l) {
                if !std::mem::replace(&mut connected[j as usize], true) {
                    queue.push(j as usize);
                }
            }
        }
    }
    // Per group: members in the connected part, members in all.
    let mut split: HashMap<u32, (u64, u64)> = HashMap::default();
    for (&(_, g), &conn) in urls.iter().zip(&connected) {
        let e = split.entry(g).or_default();
        e.1 += 1;
        e.0 += u64::from(conn);
    }
    let connected = connected.iter().filter(|&&c| c).count();
    let dup = |n: u64| n.saturating_sub(1);
    let mut f = LinkGraphFigures {
        entry_pages: entry.len() as u64,
        connected_pages: connected as u64,
        disconnected_pages: (urls.len() - connected) as u64,
        ..LinkGraphFigures::default()
    };
    for (conn, all) in split.values() {
        f.duplicates += dup(*all);
        f.connected_duplicates += dup(*conn);
        f.disconnected_duplicates += dup(all - conn);
    }
    f
}

fn compare(first: &Snapshot, now: &Snapshot) -> Vec<BucketFigures> {
    // |C_1(u) ∩ C_n(u)| for every (round-1 group, round-n group) pair that shares URLs.
    let mut both: HashMap<(u32, u32), u64> = HashMap::default();
    for (u, &g1) in &first.group {
        if let Some(&gn) = now.group.get(u) {
            *both.entry((g1, gn)).or_default() += 1;
        }
    }
    let mut sums = vec![(0u64, 0.0f64, 0.0f64, 0.0f64); BUCKETS.len()];
    // Floating-point sums depend on their order: sum in URL order, so that the figures are the
    // same bits in every run (a hash map's order changes from process to process).
    let mut urls: Vec<(&Arc<str>, u32)> = first.group.iter().map(|(u, &g)| (u, g)).collect();
    urls.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (u, g1) in urls {
        let s1 = first.sizes[g1 as usize];
        let Some(b) = BUCKETS.iter().position(|&(lo, hi)| lo <= s1 && s1 <= hi) else {
            continue;
        };
        let (common, sn) = match now.group.get(u) {
            Some(&gn) => (both[&(g1, gn)], now.sizes[gn as usize]),
            None => (0, 0),
        };
        let common = common as f64;
        let e = &mut sums[b];
        e.0 += 1;
        e.1 += common / s1 as f64;
        e.2 += if sn == 0 { 0.0 } else { common / sn as f64 };
        e.3 += jaccard(common, s1 as f64, sn as f64);
    }
    BUCKETS
        .iter()
        .zip(sums)
        .filter(|(_, s)| s.0 > 0)
        .map(|(&(lo, hi), (n, phi, rphi, psi))| BucketFigures {
            min_size: lo,
            max_size: hi,
            urls: n,
            containment: phi / n as f64,
            reverse_containment: rphi / n as f64,
            similarity: psi / n as f64,
        })
        .collect()
}

/// |A ∩ B| / |A ∪ B| from the sizes.
fn jaccard(common: f64, a: f64, b: f64) -> f64 {
    let union = a + b - common;
    if union <= 0.0 {
        0.0
    } else {
        common / union
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::Emitter;
    use neardup_schemas::PairLevel;

    fn u(x: &str) -> String {
        format!("http://{x}.example/")
    }

    #[test]
    fn pages_before_any_round_are_not_kept() {
        let cl = Clusters::new(PairLevel::VerySimilar);
        let mut ev = Evolution::new();
        // A stream without crawl ids: nothing of its pages is held.
        for x in ["a", "b", "c"] {
            ev.begin(None, &cl);
            ev.fetched(&u(x), true);
            ev.links(&u(x), ["http://z.example/"].into_iter());
            ev.paragraphs(&u(x), [1, 2, 3].into_iter(), false);
            ev.changed(ChangeBucket::Small);
        }
        ev.unchanged(&u("d"));
        assert!(ev.pages.is_empty() && ev.links.is_empty() && ev.paragraphs.is_empty());
        assert!(ev.changes.is_empty());
        ev.close(&cl);
        assert!(ev.figures().is_empty());
        // Once a round is open, pages without a crawl id belong to it; those before it do not.
        ev.begin(Some("w1"), &cl);
        ev.fetched(&u("e"), true);
        ev.begin(None, &cl);
        ev.fetched(&u("f"), true);
        ev.close(&cl);
        assert_eq!(ev.figures().len(), 1);
        assert_eq!(ev.figures()[0].pages, 2);
    }

    #[test]
    fn containment_and_similarity_follow_seed_000() {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut out = Emitter::new();
        let mut ev = Evolution::new();
        ev.begin(Some("w1"), &cl);
        for x in ["a", "b", "c", "d", "e", "f"] {
            ev.fetched(&u(x), true);
        }
        for (x, y) in [("a", "b"), ("b", "c"), ("d", "e")] {
            cl.add_pair(&u(x), &u(y), 0, &mut out);
        }
        ev.begin(Some("w2"), &cl);
        // Round 2: c changed and left its cluster, e is gone (404), the rest unchanged.
        cl.remove_pair(&u("b"), &u("c"), &mut out);
        cl.remove_pair(&u("d"), &u("e"), &mut out);
        for x in ["a", "b", "c", "d", "f"] {
            ev.fetched(&u(x), true);
        }
        ev.fetched(&u("e"), false);
        ev.close(&cl);
        let f = ev.figures();
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].pages, f[0].near_duplicate_pages, f[0].clusters),
            (6, 5, 2)
        );
        assert_eq!(
            f[0].size_distribution,
            BTreeMap::from([(1, 1), (2, 1), (3, 1)])
        );
        assert!(f[0].versus_first.is_empty());
        assert_eq!((f[1].pages, f[1].near_duplicate_pages), (5, 2));
        let b = |lo: u64| {
            f[1].versus_first
                .iter()
                .find(|b| b.min_size == lo)
                .expect("bucket")
        };
        let close = |x: f64, y: f64| assert!((x - y).abs() < 1e-12, "{x} != {y}");
        // Size 3 {a,b,c}: a and b keep 2 of 3, c keeps 1 of 3.
        close(b(3).containment, 5.0 / 9.0);
        close(b(3).reverse_containment, 1.0);
        close(b(3).similarity, 5.0 / 9.0);
        // Size 2 {d,e}: d keeps 1 of 2, e is gone.
        close(b(2).containment, 0.25);
        close(b(2).reverse_containment, 0.5);
        close(b(2).similarity, 0.25);
        // Size 1 {f}: stays itself.
        close(b(1).containment, 1.0);
        assert_eq!(b(1).urls, 1);
    }

    #[test]
    fn link_graph_change_buckets_and_largest_clusters() {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut out = Emitter::new();
        let mut ev = Evolution::new();
        ev.begin(Some("w1"), &cl);
        let a = |p: &str| format!("http://a.example/{p}");
        let b = |p: &str| format!("http://b.example/{p}");
        for u in [a(""), a("x"), a("y"), b(""), b("q"), b("z"), b("w")] {
            ev.fetched(&u, true);
        }
        // Entry pages a/ and b/ (shortest paths); a/ -> a/x -> b/q; b/ links outside the round.
        ev.links(&a(""), [a("x")].iter().map(String::as_str));
        ev.links(
            &a("x"),
            [b("q"), "http://elsewhere.example/".into()]
                .iter()
                .map(String::as_str),
        );
        ev.links(
            &b(""),
            ["http://elsewhere.example/".to_owned()]
                .iter()
                .map(String::as_str),
        );
        ev.links(&b("z"), [a("y")].iter().map(String::as_str)); // from an unreachable page
        for (x, y) in [(a("x"), b("q")), (b("q"), b("z")), (a("y"), b("w"))] {
            cl.add_pair(&x, &y, 0, &mut out);
        }
        ev.changed(ChangeBucket::Large);
        ev.changed(ChangeBucket::NoChange);
        ev.changed(ChangeBucket::Large);
        ev.close(&cl);
        let f = &ev.figures()[0];
        assert_eq!(
            f.link_graph,
            LinkGraphFigures {
                entry_pages: 2,
                connected_pages: 4,
                disconnected_pages: 3,
                // {a/x, b/q, b/z}: 2 in all, 1 among the connected (a/x, b/q), 0 among the rest;
                // {a/y, b/w}: 1 in all, 0 connected, 1 disconnected.
                duplicates: 3,
                connected_duplicates: 1,
                disconnected_duplicates: 1,
            }
        );
        assert_eq!(
            f.change_buckets,
            BTreeMap::from([(ChangeBucket::Large, 2), (ChangeBucket::NoChange, 1)])
        );
        assert_eq!(f.largest_clusters.len(), 2);
        let big = &f.largest_clusters[0];
        assert_eq!((big.size, big.host_count), (3, 2));
        assert_eq!(big.hosts, vec!["a.example", "b.example"]);
        assert!(
            [a("x"), b("q"), b("z")].contains(&big.representative),
            "{big:?}"
        );
        assert_eq!(f.largest_clusters[1].size, 2);
        // The next round starts from nothing.
        ev.begin(Some("w2"), &cl);
        ev.fetched(&a(""), true);
        ev.close(&cl);
        let g = &ev.figures()[1];
        assert!(g.change_buckets.is_empty());
        assert_eq!(
            (g.link_graph.entry_pages, g.link_graph.connected_pages),
            (1, 1)
        );
    }

    #[test]
    fn a_304_carries_its_page_into_the_round_with_its_links_and_paragraphs() {
        let cl = Clusters::new(PairLevel::VerySimilar);
        let mut ev = Evolution::new();
        let h = |p: &str| format!("http://h.example/{p}");
        let (a, b, c) = (h(""), h("b"), h("c/d"));
        ev.begin(Some("w1"), &cl);
        for x in [&a, &b] {
            ev.fetched(x, true);
            ev.paragraphs(x, [1, 2, 3].into_iter(), false);
        }
        ev.links(&a, [b.as_str()].into_iter());
        ev.close(&cl);
        // Round 2: a revalidated (304), b fetched whole again without the paragraphs, c
        // revalidated but not fetched in round 1.
        ev.begin(Some("w2"), &cl);
        ev.unchanged(&a);
        ev.fetched(&b, true);
        ev.unchanged(&c);
        ev.close(&cl);
        // Round 3: a revalidated again, its links carried on from round 2.
        ev.begin(Some("w3"), &cl);
        ev.unchanged(&a);
        ev.fetched(&b, true);
        ev.close(&cl);
        let f = ev.figures();
        assert_eq!(f.iter().map(|r| r.pages).collect::<Vec<_>>(), vec![2, 3, 2]);
        for r in [&f[1], &f[2]] {
            // a (the host's entry page: the shortest path) reaches b through its carried link.
            assert_eq!(r.link_graph.connected_pages, 2, "{}", r.crawl_id);
            assert_eq!(r.paragraph_duplicates.documents, 1, "a's paragraphs only");
        }
        assert_eq!(f[0].paragraph_duplicates.documents, 2);
    }

    #[test]
    fn paragraph_duplicates_follow_seed_004() {
        let cl = Clusters::new(PairLevel::VerySimilar);
        let mut ev = Evolution::new();
        ev.begin(Some("w1"), &cl);
        let ten: Vec<u64> = (6..16).collect();
        let mut nine = ten.clone();
        nine[0] = 99;
        let pages: [(&str, Vec<u64>, bool); 6] = [
            ("a", vec![1, 2, 3, 4], false),
            ("b", vec![4, 3, 2, 1], false), // the same paragraphs: a duplicate of a
            ("c", vec![1, 2, 3, 5], false), // 3 of 4 with a: near at 70 % and 50 %
            ("d", ten, false),
            ("e", nine, false),            // 9 of 10 with d: both near at 90 %
            ("f", vec![1, 2, 3, 4], true), // short: left out
        ];
        for (x, fps, short) in pages {
            ev.fetched(&u(x), true);
            ev.paragraphs(&u(x), fps.into_iter(), short);
        }
        ev.close(&cl);
        assert_eq!(
            ev.figures()[0].paragraph_duplicates,
            ParagraphFigures {
                documents: 5,
                clusters: 1,
                clustered: 2,
                duplicates: 1,
                near_90: 2,
                near_70: 3,
                near_50: 3,
            }
        );
    }
}
