//! The exact-duplicate index over an event-time window, its `exact` pairs and its clusters.
//!
//! Pages with byte-identical bodies (equal 128-bit content checksums) form a group; a group of
//! two or more members is an exact-duplicate cluster whose id is derived from the checksum
//! (`exact:<checksum>`), so the id is stable while any member holds that content, whatever
//! joins or leaves. A URL leaves its group when it is fetched again with other content, when a
//! fetch returns no content (404, 410, 0, redirects and the other non-2xx statuses but the
//! inconclusive 304, 429 and 5xx, which the topology does not pass on), or when its last fetch
//! falls out of the window. A 304 (Not Modified) renews its place as the same content would.
//!
//! Canonical member (documented survivor policy, after Nutch's `DeduplicationJob`): the member
//! seen first with this content; ties broken by https over http, then the shorter URL, then the
//! lexicographically smaller URL.
//!
//! Pair events are bounded per group: a member that joins a group already holding
//! `max_pairs_per_join` members gets no pair events (the cluster events still name it). A pair
//! exists iff both its members joined under the cap, a rule that depends only on the join order,
//! so every detected pair is later retracted exactly once.
//!
//! Crawl hints come from the near-duplicate clusters (`hints.rs`), which contain these groups.

use crate::emit::Emitter;
use crate::intern::UrlPool;
use crate::site;
use crate::window::{Expiry, Ticket};
use neardup_schemas::{
    ClusterChangeKind, ClusterEvent, OutputKind, PairEvent, PairLevel, PairState,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A URL's current entry.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct UrlEntry {
    checksum: u128,
    /// Its place in the expiry order (which also holds its fetch time).
    ticket: Ticket,
}

/// A member of a checksum group.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Member {
    /// When the URL was first seen with this content (event time).
    first_seen_ms: i64,
    /// Members the group held when this one joined; pairs exist only below the cap.
    ordinal: usize,
}

#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct Group {
    /// Sorted by URL, so every iteration (and so every output) is deterministic.
    members: Members,
    canonical: Option<Arc<str>>,
}

/// A group's members by URL. Most groups hold one URL (a page without an exact copy), kept
/// inline: a `BTreeMap` allocates a node of 11 entries (368 bytes) even for one, which made the
/// exact groups the largest part of the state (697 bytes per windowed page on the medium crawl).
/// Encoded as the map it stands for, so checkpoints read the same either way. Not a
/// [`crate::small::SortedMap`]: its vector allocates even for one member, and the groups took
/// 473 B per page with it against 401 B (medium crawl).
#[derive(Debug, Default, Clone)]
enum Members {
    #[default]
    Empty,
    One(Arc<str>, Member),
    Many(BTreeMap<Arc<str>, Member>),
}

impl Members {
    fn len(&self) -> usize {
        match self {
            Members::Empty => 0,
            Members::One(..) => 1,
            Members::Many(m) => m.len(),
        }
    }

    /// The members in URL order.
    fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Member)> {
        let (one, many) = match self {
            Members::Empty => (None, None),
            Members::One(url, m) => (Some((url, m)), None),
            Members::Many(map) => (None, Some(map)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// Adds `url`, not a member yet.
    fn insert(&mut self, url: Arc<str>, member: Member) {
        match std::mem::take(self) {
            Members::Empty => *self = Members::One(url, member),
            Members::One(first, m) => {
                debug_assert!(first != url, "{url} is a member already");
                *self = Members::Many(BTreeMap::from([(first, m), (url, member)]));
            }
            Members::Many(mut map) => {
                let before = map.insert(url, member);
                debug_assert!(before.is_none(), "a member already");
                *self = Members::Many(map);
            }
        }
    }

    /// Takes `url` out; a group left with one member keeps it inline again.
    fn remove(&mut self, url: &str) -> Option<Member> {
        match self {
            Members::Empty => None,
            Members::One(first, _) if first.as_ref() != url => None,
            Members::One(..) => match std::mem::take(self) {
                Members::One(_, m) => Some(m),
                _ => unreachable!("matched One"),
            },
            Members::Many(map) => {
                let gone = map.remove(url)?;
                if map.len() == 1 {
                    let (last, m) = map.pop_first().expect("one member left");
                    *self = Members::One(last, m);
                }
                Some(gone)
            }
        }
    }
}

impl serde::Serialize for Members {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::small::serialize_map(s, self.len(), self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = BTreeMap::<Arc<str>, Member>::deserialize(d)?;
        Ok(match map.len() {
            0 => Members::Empty,
            1 => {
                let (url, m) = map.pop_first().expect("one member");
                Members::One(url, m)
            }
            _ => Members::Many(map),
        })
    }
}

/// Counters the index keeps (exposed as metrics and in summaries).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExactStats {
    /// URLs currently in the window.
    pub urls: u64,
    /// Exact-duplicate clusters currently alive.
    pub clusters: u64,
    /// Entries evicted because their fetch left the window, or because the sketch window's
    /// page budget evicted their page ([`ExactIndex::evict`]).
    pub evicted: u64,
    /// Fetches older than the URL's entry, ignored.
    pub stale: u64,
    /// Pair events not emitted because a group was over the cap.
    pub pairs_suppressed: u64,
}

/// The exact-duplicate index.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ExactIndex {
    window_ms: i64,
    max_pairs_per_join: usize,
    by_url: HashMap<Arc<str>, UrlEntry>,
    groups: HashMap<u128, Group>,
    /// URLs by fetch time, oldest first, for eviction by event time.
    expiry: Expiry<Arc<str>>,
    stats: ExactStats,
}

/// One observation of a URL: its content checksum now, or `None` when it has no content.
pub struct Observation<'a> {
    /// The page URL.
    pub url: &'a str,
    /// The body checksum, or `None` for a fetch without content.
    pub checksum: Option<u128>,
    /// Event time.
    pub fetched_at_ms: i64,
}

impl ExactIndex {
    /// An empty index holding fetches for `window_ms` of event time.
    pub fn new(window_ms: i64, max_pairs_per_join: usize) -> Self {
        ExactIndex {
            window_ms,
            max_pairs_per_join,
            by_url: HashMap::new(),
            groups: HashMap::new(),
            expiry: Expiry::default(),
            stats: ExactStats::default(),
        }
    }

    /// After a restore: makes every URL the pool's copy ([`crate::intern`]).
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        pool.share_keys(&mut self.by_url);
        for group in self.groups.values_mut() {
            match &mut group.members {
                Members::Empty => {}
                Members::One(url, _) => pool.share(url),
                Members::Many(members) => pool.share_ordered_keys(members),
            }
            if let Some(url) = &mut group.canonical {
                pool.share(url);
            }
        }
        self.expiry.fit_restored(pool);
    }

    /// Every URL held, as often as held.
    #[cfg(test)]
    pub(crate) fn url_copies(&self) -> impl Iterator<Item = &Arc<str>> {
        let members = self.groups.values().flat_map(|g| {
            g.members
                .iter()
                .map(|(url, _)| url)
                .chain(g.canonical.as_ref())
        });
        self.by_url.keys().chain(members).chain(self.expiry.keys())
    }

    /// The index's counters.
    pub fn stats(&self) -> ExactStats {
        ExactStats {
            urls: self.by_url.len() as u64,
            clusters: self
                .groups
                .values()
                .filter(|g| g.members.len() >= 2)
                .count() as u64,
            ..self.stats.clone()
        }
    }

    /// URLs held.
    pub fn urls(&self) -> usize {
        self.by_url.len()
    }

    /// The exact-duplicate cluster id of `url`, if it is in one.
    pub fn cluster_of(&self, url: &str) -> Option<String> {
        let e = self.by_url.get(url)?;
        (self.groups.get(&e.checksum)?.members.len() >= 2).then(|| cluster_id(e.checksum))
    }

    /// Evicts every entry fetched before `watermark_ms - window`.
    pub fn advance(&mut self, watermark_ms: i64, out: &mut Emitter) {
        let horizon = watermark_ms.saturating_sub(self.window_ms);
        while let Some(url) = self.expiry.pop_before(horizon) {
            self.stats.evicted += 1;
            self.remove(&url, out);
        }
    }

    /// Takes `url` out of its group, as if its fetch had left the window: the sketch window's
    /// page budget evicted it, and the exact groups keep no more URLs than that window.
    pub fn evict(&mut self, url: &str, out: &mut Emitter) {
        let Some(entry) = self.by_url.get(url) else {
            return;
        };
        let url = self
            .expiry
            .remove(entry.ticket)
            .expect("expiry tracks every URL");
        self.stats.evicted += 1;
        self.remove(&url, out);
    }

    /// Applies one fetch of a URL.
    pub(crate) fn observe(&mut self, obs: &Observation<'_>, urls: &mut UrlPool, out: &mut Emitter) {
        if let Some(old) = self.by_url.get_mut(obs.url) {
            if Some(old.checksum) == obs.checksum {
                // Same content again: refresh its place in the window; nothing changes.
                if !self.expiry.renew(&mut old.ticket, obs.fetched_at_ms) {
                    self.stats.stale += 1;
                }
                return;
            }
            if obs.fetched_at_ms < old.ticket.at_ms() {
                self.stats.stale += 1;
                return;
            }
            let url = self
                .expiry
                .remove(old.ticket)
                .expect("expiry tracks every URL");
            self.remove(&url, out);
        }
        if let Some(checksum) = obs.checksum {
            self.insert(urls.url(obs.url), checksum, obs.fetched_at_ms, out);
        }
    }

    /// A fetch at `at_ms` that found `url`'s content unchanged (the same checksum, or a 304 Not
    /// Modified): the URL's place in the window moves to it; nothing else changes.
    pub fn renew(&mut self, url: &str, at_ms: i64) {
        if let Some(e) = self.by_url.get_mut(url) {
            if !self.expiry.renew(&mut e.ticket, at_ms) {
                self.stats.stale += 1;
            }
        }
    }

    fn insert(&mut self, url: Arc<str>, checksum: u128, at_ms: i64, out: &mut Emitter) {
        let ticket = self.expiry.insert(at_ms, url.clone());
        self.by_url
            .insert(url.clone(), UrlEntry { checksum, ticket });
        let group = self.groups.entry(checksum).or_default();
        let ordinal = group.members.len();
        let cap = self.max_pairs_per_join;
        for (other, m) in group.members.iter() {
            // A pair exists iff both members joined under the cap: the same rule as retraction.
            if ordinal < cap && m.ordinal < cap {
                out.emit(exact_pair(&url, other, PairState::Detected, out.at()));
            } else {
                self.stats.pairs_suppressed += 1;
            }
        }
        group.members.insert(
            url.clone(),
            Member {
                first_seen_ms: at_ms,
                ordinal,
            },
        );
        let id = cluster_id(checksum);
        match group.members.len() {
            1 => {}
            2 => {
                let canonical = canonical(group);
                group.canonical = Some(canonical.clone());
                let added: Vec<String> = group.members.iter().map(|(u, _)| u.to_string()).collect();
                out.emit(cluster_event(
                    &id,
                    ClusterChangeKind::Created,
                    group,
                    added,
                    vec![],
                    out.at(),
                ));
            }
            _ => membership_changed(&id, group, ClusterChangeKind::Joined, &url, out),
        }
    }

    /// Removes `url` (already taken out of `expiry`) from its group.
    fn remove(&mut self, url: &Arc<str>, out: &mut Emitter) {
        let Some(entry) = self.by_url.remove(url) else {
            return;
        };
        let group = self
            .groups
            .get_mut(&entry.checksum)
            .expect("group of a member");
        let gone = group.members.remove(url).expect("member of its group");
        for (other, m) in group.members.iter() {
            if gone.ordinal.max(m.ordinal) < self.max_pairs_per_join {
                out.emit(exact_pair(url, other, PairState::Retracted, out.at()));
            }
        }
        let id = cluster_id(entry.checksum);
        match group.members.len() {
            0 => {
                self.groups.remove(&entry.checksum);
            }
            1 => {
                let last = group.members.iter().next().expect("one member").0.clone();
                group.canonical = None;
                let mut removed = vec![url.to_string(), last.to_string()];
                removed.sort();
                out.emit(cluster_event(
                    &id,
                    ClusterChangeKind::Dissolved,
                    group,
                    vec![],
                    removed,
                    out.at(),
                ));
            }
            _ => membership_changed(&id, group, ClusterChangeKind::Left, url, out),
        }
    }
}

/// A group of two or more members after `url` joined or left it (`change`): the group's
/// canonical member chosen again, the change stated, then the canonical's change if it moved.
fn membership_changed(
    id: &str,
    group: &mut Group,
    change: ClusterChangeKind,
    url: &str,
    out: &mut Emitter,
) {
    let before = group.canonical.clone();
    let canonical = canonical(group);
    group.canonical = Some(canonical.clone());
    let moved = vec![url.to_string()];
    let (added, removed) = if change == ClusterChangeKind::Joined {
        (moved, vec![])
    } else {
        debug_assert_eq!(change, ClusterChangeKind::Left, "a member joins or leaves");
        (vec![], moved)
    };
    out.emit(cluster_event(id, change, group, added, removed, out.at()));
    if before.as_ref() != Some(&canonical) {
        out.emit(cluster_event(
            id,
            ClusterChangeKind::CanonicalChanged,
            group,
            vec![],
            vec![],
            out.at(),
        ));
    }
}

/// The cluster id of an exact-duplicate group.
pub fn cluster_id(checksum: u128) -> String {
    format!("exact:{checksum:032x}")
}

fn canonical(group: &Group) -> Arc<str> {
    group
        .members
        .iter()
        .min_by(|(ua, ma), (ub, mb)| {
            ma.first_seen_ms
                .cmp(&mb.first_seen_ms)
                .then_with(|| ub.starts_with("https:").cmp(&ua.starts_with("https:")))
                .then_with(|| ua.len().cmp(&ub.len()))
                .then_with(|| ua.cmp(ub))
        })
        .map(|(u, _)| u.clone())
        .expect("canonical of a non-empty group")
}

fn exact_pair(a: &str, b: &str, state: PairState, at: &str) -> PairEvent {
    PairEvent::new(
        a.to_owned(),
        b.to_owned(),
        state,
        PairLevel::Exact,
        6,
        384,
        Some(1.0),
        site::same_site(a, b),
        at.to_owned(),
        None,
    )
}

fn cluster_event(
    id: &str,
    change: ClusterChangeKind,
    group: &Group,
    added: Vec<String>,
    removed: Vec<String>,
    at: &str,
) -> ClusterEvent {
    let alive = change != ClusterChangeKind::Dissolved;
    ClusterEvent {
        schema: OutputKind::Clusters.schema().into(),
        event_id: String::new(),
        cluster_id: id.to_owned(),
        level: PairLevel::Exact,
        change,
        size: if alive { group.members.len() as u64 } else { 0 },
        canonical: if alive {
            group.canonical.as_deref().map(str::to_owned)
        } else {
            None
        },
        added,
        removed,
        related: vec![],
        at: at.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `Members` against the `BTreeMap` it stands for, over random joins and leaves: the
        /// same members in the same order, and the same bytes in a checkpoint.
        #[test]
        fn members_behave_and_encode_as_a_map(ops in proptest::collection::vec((any::<bool>(), 0u8..6), 0..40)) {
            let mut members = Members::default();
            let mut model = BTreeMap::<Arc<str>, Member>::new();
            for (i, (join, n)) in ops.into_iter().enumerate() {
                let url: Arc<str> = Arc::from(format!("http://h/{n}"));
                if join && !model.contains_key(&url) {
                    let m = Member { first_seen_ms: i as i64, ordinal: i };
                    model.insert(url.clone(), m.clone());
                    members.insert(url, m);
                } else if !join {
                    let gone = members.remove(&url).map(|m| m.first_seen_ms);
                    prop_assert_eq!(gone, model.remove(&url).map(|m| m.first_seen_ms));
                }
                prop_assert_eq!(members.len(), model.len());
                prop_assert_eq!(matches!(members, Members::Many(_)), model.len() >= 2);
                let listed: Vec<(&Arc<str>, i64)> = members.iter().map(|(u, m)| (u, m.first_seen_ms)).collect();
                let expected: Vec<(&Arc<str>, i64)> = model.iter().map(|(u, m)| (u, m.first_seen_ms)).collect();
                prop_assert_eq!(listed, expected);
                let bytes = postcard::to_allocvec(&members).unwrap();
                prop_assert_eq!(&bytes, &postcard::to_allocvec(&model).unwrap());
                let back: Members = postcard::from_bytes(&bytes).unwrap();
                prop_assert_eq!(back.len(), model.len());
                prop_assert_eq!(matches!(back, Members::Many(_)), model.len() >= 2);
            }
        }
    }
}
