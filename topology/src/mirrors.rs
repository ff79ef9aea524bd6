//! Mirrored hosts, aliases and auto-mirrors, from the near-duplicate clusters, kept up to date
//! as pages move between clusters (seed 000 §4; DESIGN.md §4).
//!
//! # Evidence
//! For every cluster the stage keeps its members grouped by host. A cluster with pages on hosts
//! h1 and h2 is one *shared page* of the host pair (FMN count shared clusters, i.e. documents,
//! not URL pairs). For the pair's **URL-suffix evidence** the cluster's representative URLs on
//! the two hosts (the smallest URL of each host in the cluster) are compared with the query
//! dropped: they *agree* when they end in the same file name (the last path arc), and then the
//! paths minus their longest common suffix of arcs are the pair's corresponding **prefixes**
//! (`/docs/2.4/mod/core.html` and `/httpd/mod/core.html` give `/docs/2.4/` and `/httpd/`).
//! Every change to a cluster subtracts its old contribution and adds the new one, so counts are
//! exact at all times and no rescan ever happens; a cluster spread over more than
//! `max_hosts_per_cluster` hosts (a licence page copied everywhere) contributes nothing, which
//! bounds the work per change.
//!
//! # Verdicts, per host pair with at least `min_shared` shared pages (default 10, FMN's)
//! - `alias`: the two names differ only by a leading `www.`, or they have the same address and
//!   the same prefixes (one server under two names). Never reported as a mirror.
//! - `confirmed`: at least half of the shared pages agree on their suffix; the event lists the
//!   prefix pairs that at least `min_prefix_share` of the agreeing pages support.
//! - `candidate`: enough shared pages, not (yet) enough suffix evidence.
//! - `retracted`: a pair that was reported falls below the threshold.
//!
//! # Auto-mirrors
//! One host with two or more URLs in one cluster has copies of its own: URLs that differ only
//! in the query are `session_id` copies, others `path_alias` copies (the same pages under two
//! prefixes). A host with copies in at least `min_shared` clusters is reported once as
//! `auto_mirror` (hosts `[h, h]`, prefixes the corresponding pairs seen), and `retracted` if it
//! falls below.

use crate::emit::Emitter;
use crate::small::SortedMap;
use neardup_schemas::{MirrorEvent, MirrorState};
use std::collections::HashMap;
use std::sync::Arc;

/// Parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MirrorConfig {
    /// Shared pages (clusters) a host pair needs (FMN: 10).
    pub min_shared: u32,
    /// Clusters over more hosts than this are ignored.
    pub max_hosts_per_cluster: usize,
    /// A prefix pair is listed when this share of the agreeing pages supports it.
    pub min_prefix_share: f64,
}

impl Default for MirrorConfig {
    fn default() -> Self {
        MirrorConfig {
            min_shared: 10,
            max_hosts_per_cluster: 64,
            min_prefix_share: 0.2,
        }
    }
}

type Host = Arc<str>;
type PrefixPair = (Arc<str>, Arc<str>);

/// What one cluster contributes to one host pair (hosts in sorted order).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Contribution {
    hosts: (Host, Host),
    prefixes: Option<PrefixPair>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct PairEvidence {
    shared: u32,
    agreeing: u32,
    prefixes: HashMap<PrefixPair, u32>,
    reported: Option<MirrorState>,
    reported_prefixes: Vec<[String; 2]>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct HostCopies {
    clusters: u32,
    session: u32,
    prefixes: HashMap<PrefixPair, u32>,
    reported: bool,
}

/// What one cluster contributes to one host's auto-mirror evidence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SelfCopy {
    host: Host,
    session: bool,
    prefixes: Option<PrefixPair>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct ClusterState {
    /// Members by host, each host's URLs sorted (most clusters span a few hosts).
    by_host: SortedMap<Host, Vec<Arc<str>>>,
    pairs: Vec<Contribution>,
    copies: Vec<SelfCopy>,
}

/// The mirror stage.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Mirrors {
    cfg: MirrorConfig,
    clusters: HashMap<u32, ClusterState>,
    pairs: HashMap<(Host, Host), PairEvidence>,
    hosts: HashMap<Host, HostCopies>,
    /// Each host's last address, with the newest fetch time it was seen with.
    addresses: HashMap<Host, (Arc<str>, i64)>,
    /// Hosts in `addresses` after the last [`Self::forget_addresses`] pass.
    addresses_kept: usize,
}

/// The host of a URL (lower-case) and its path without query or fragment.
fn split_url(url: &str) -> (&str, &str, bool) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = host.split(':').next().unwrap_or(host);
    let cut = path.find(['?', '#']).unwrap_or(path.len());
    (host, &path[..cut], cut < path.len())
}

/// The prefixes of two paths below which they agree, if they end in the same file name.
fn corresponding_prefixes(a: &str, b: &str) -> Option<(String, String)> {
    let (ta, tb) = (a.trim_start_matches('/'), b.trim_start_matches('/'));
    let (xa, xb): (Vec<&str>, Vec<&str>) = (ta.split('/').collect(), tb.split('/').collect());
    let common = xa
        .iter()
        .rev()
        .zip(xb.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    if common == 0 {
        return None;
    }
    let prefix = |arcs: &[&str]| {
        let keep = &arcs[..arcs.len() - common];
        if keep.is_empty() {
            "/".to_owned()
        } else {
            format!("/{}/", keep.join("/"))
        }
    };
    Some((prefix(&xa), prefix(&xb)))
}

fn strip_www(h: &str) -> &str {
    h.strip_prefix("www.").unwrap_or(h)
}

impl Mirrors {
    /// An empty stage.
    pub fn new(cfg: MirrorConfig) -> Self {
        Mirrors {
            cfg,
            ..Mirrors::default()
        }
    }

    /// Records the address a host was fetched from (the page event's `ip`) at `at_ms`.
    pub fn host_address(&mut self, url: &str, ip: &str, at_ms: i64) {
        let host = split_url(url).0.to_ascii_lowercase();
        match self.addresses.get_mut(host.as_str()) {
            Some((a, at)) => {
                *at = (*at).max(at_ms);
                if **a != *ip {
                    *a = Arc::from(ip);
                }
            }
            None => {
                self.addresses
                    .insert(Arc::from(host), (Arc::from(ip), at_ms));
            }
        }
    }

    /// Hosts whose address is held.
    pub fn addresses_held(&self) -> usize {
        self.addresses.len()
    }

    /// Forgets the addresses of hosts last fetched before `horizon_ms`, once the hosts have
    /// doubled since the last pass (so each pass is paid for by as many new hosts). A host that
    /// left the window has no page in a cluster, so no host pair of it is reported until it is
    /// fetched again, which records its address again; without this the map kept every host
    /// ever fetched.
    pub fn forget_addresses(&mut self, horizon_ms: i64) {
        if self.addresses.len() < 2 * self.addresses_kept.max(1024) {
            return;
        }
        self.addresses.retain(|_, (_, at)| *at >= horizon_ms);
        self.addresses_kept = self.addresses.len();
    }

    /// Applies a batch of cluster membership moves, then reports what changed.
    pub fn apply<'a>(
        &mut self,
        moves: impl IntoIterator<Item = &'a crate::clusters::Move>,
        out: &mut Emitter,
    ) {
        let mut touched: Vec<u32> = Vec::new();
        for m in moves {
            let host: Host = Arc::from(split_url(&m.url).0.to_ascii_lowercase());
            if let Some(c) = m.from {
                let st = self.clusters.entry(c).or_default();
                if let Some(list) = st.by_host.get_mut(&host) {
                    list.retain(|u| *u != m.url);
                    if list.is_empty() {
                        st.by_host.remove(&host);
                    }
                }
                touched.push(c);
            }
            if let Some(c) = m.to {
                let by_host = &mut self.clusters.entry(c).or_default().by_host;
                let list = by_host.entry(host, Vec::new);
                if let Err(i) = list.binary_search(&m.url) {
                    list.insert(i, m.url.clone());
                }
                touched.push(c);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let mut pairs_changed: Vec<(Host, Host)> = Vec::new();
        let mut hosts_changed: Vec<Host> = Vec::new();
        for c in touched {
            let (old_pairs, old_copies) = {
                let st = self.clusters.get_mut(&c).expect("touched cluster");
                (
                    std::mem::take(&mut st.pairs),
                    std::mem::take(&mut st.copies),
                )
            };
            for k in &old_pairs {
                self.account_pair(k, -1);
                pairs_changed.push(k.hosts.clone());
            }
            for k in &old_copies {
                self.account_copy(k, -1);
                hosts_changed.push(k.host.clone());
            }
            let st = &self.clusters[&c];
            let (new_pairs, new_copies) = contributions(st, self.cfg.max_hosts_per_cluster);
            for k in &new_pairs {
                self.account_pair(k, 1);
                pairs_changed.push(k.hosts.clone());
            }
            for k in &new_copies {
                self.account_copy(k, 1);
                hosts_changed.push(k.host.clone());
            }
            let st = self.clusters.get_mut(&c).expect("touched cluster");
            if st.by_host.is_empty() {
                self.clusters.remove(&c);
            } else {
                st.pairs = new_pairs;
                st.copies = new_copies;
            }
        }
        pairs_changed.sort();
        pairs_changed.dedup();
        for hp in pairs_changed {
            self.report_pair(&hp, out);
        }
        hosts_changed.sort();
        hosts_changed.dedup();
        for h in hosts_changed {
            self.report_host(&h, out);
        }
    }

    fn account_pair(&mut self, k: &Contribution, d: i32) {
        let e = self.pairs.entry(k.hosts.clone()).or_default();
        e.shared = e.shared.wrapping_add_signed(d);
        if let Some(p) = &k.prefixes {
            e.agreeing = e.agreeing.wrapping_add_signed(d);
            let n = e.prefixes.entry(p.clone()).or_default();
            *n = n.wrapping_add_signed(d);
            if *n == 0 {
                e.prefixes.remove(p);
            }
        }
    }

    fn account_copy(&mut self, k: &SelfCopy, d: i32) {
        let e = self.hosts.entry(k.host.clone()).or_default();
        e.clusters = e.clusters.wrapping_add_signed(d);
        if k.session {
            e.session = e.session.wrapping_add_signed(d);
        }
        if let Some(p) = &k.prefixes {
            let n = e.prefixes.entry(p.clone()).or_default();
            *n = n.wrapping_add_signed(d);
            if *n == 0 {
                e.prefixes.remove(p);
            }
        }
    }

    fn listed_prefixes(
        &self,
        prefixes: &HashMap<PrefixPair, u32>,
        agreeing: u32,
    ) -> Vec<[String; 2]> {
        let least = ((f64::from(agreeing) * self.cfg.min_prefix_share).ceil() as u32).max(1);
        let mut v: Vec<[String; 2]> = prefixes
            .iter()
            .filter(|(_, &n)| n >= least)
            .map(|(p, _)| [p.0.to_string(), p.1.to_string()])
            .collect();
        v.sort();
        v
    }

    fn report_pair(&mut self, hp: &(Host, Host), out: &mut Emitter) {
        let Some(e) = self.pairs.get(hp) else { return };
        let state = if e.shared >= self.cfg.min_shared {
            let prefixes = self.listed_prefixes(&e.prefixes, e.agreeing);
            let same_address = matches!(
                (self.addresses.get(&hp.0), self.addresses.get(&hp.1)),
                (Some((a, _)), Some((b, _))) if a == b
            );
            let same_paths = !prefixes.is_empty() && prefixes.iter().all(|[a, b]| a == b);
            if strip_www(&hp.0) == strip_www(&hp.1) || (same_address && same_paths) {
                Some(MirrorState::Alias)
            } else if 2 * e.agreeing >= e.shared {
                Some(MirrorState::Confirmed)
            } else {
                Some(MirrorState::Candidate)
            }
        } else {
            None
        };
        let e = self.pairs.get(hp).expect("evidence");
        let prefixes = match state {
            Some(MirrorState::Confirmed | MirrorState::Alias) => {
                self.listed_prefixes(&e.prefixes, e.agreeing)
            }
            _ => vec![],
        };
        let shared = e.shared;
        let reported = e.reported;
        // A new state, or the same state with other corresponding prefixes, is news.
        let next = match (reported, state) {
            (None, None) => None,
            (Some(_), None) => Some(MirrorState::Retracted),
            (before, Some(s)) if before != Some(s) || prefixes != e.reported_prefixes => Some(s),
            _ => None,
        };
        if let Some(s) = next {
            out.emit(MirrorEvent::new(
                hp.0.to_string(),
                hp.1.to_string(),
                s,
                u64::from(shared),
                prefixes.clone(),
                out.at().to_owned(),
            ));
        }
        let e = self.pairs.get_mut(hp).expect("evidence");
        e.reported = state;
        e.reported_prefixes = prefixes;
        if e.shared == 0 && e.reported.is_none() {
            self.pairs.remove(hp);
        }
    }

    fn report_host(&mut self, h: &Host, out: &mut Emitter) {
        let Some(e) = self.hosts.get(h) else { return };
        let now = e.clusters >= self.cfg.min_shared;
        if now != e.reported {
            let prefixes = if now {
                self.listed_prefixes(&e.prefixes, e.clusters - e.session)
            } else {
                vec![]
            };
            let state = if now {
                MirrorState::AutoMirror
            } else {
                MirrorState::Retracted
            };
            out.emit(MirrorEvent::new(
                h.to_string(),
                h.to_string(),
                state,
                u64::from(e.clusters),
                prefixes,
                out.at().to_owned(),
            ));
        }
        let e = self.hosts.get_mut(h).expect("host");
        e.reported = now;
        if e.clusters == 0 && !now {
            self.hosts.remove(h);
        }
    }

    /// The host pairs currently reported, with their states (for tests and the report).
    pub fn reported(&self) -> Vec<(String, String, MirrorState, u32)> {
        let mut v: Vec<_> = self
            .pairs
            .iter()
            .filter_map(|(hp, e)| Some((hp.0.to_string(), hp.1.to_string(), e.reported?, e.shared)))
            .chain(self.hosts.iter().filter(|(_, e)| e.reported).map(|(h, e)| {
                (
                    h.to_string(),
                    h.to_string(),
                    MirrorState::AutoMirror,
                    e.clusters,
                )
            }))
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        v
    }
}

/// What a cluster contributes: one entry per host pair, one per host with copies.
fn contributions(st: &ClusterState, max_hosts: usize) -> (Vec<Contribution>, Vec<SelfCopy>) {
    let mut pairs = Vec::new();
    let mut copies = Vec::new();
    if st.by_host.len() > max_hosts {
        return (pairs, copies);
    }
    let hosts: Vec<(&Host, &Vec<Arc<str>>)> = st.by_host.iter().collect();
    for (i, (h1, u1)) in hosts.iter().enumerate() {
        if u1.len() >= 2 {
            let (_, p0, q0) = split_url(&u1[0]);
            let (_, p1, q1) = split_url(&u1[1]);
            let session = p0 == p1 && (q0 || q1);
            let prefixes = if session {
                None
            } else {
                corresponding_prefixes(p0, p1).map(|(a, b)| (Arc::from(a), Arc::from(b)))
            };
            copies.push(SelfCopy {
                host: (*h1).clone(),
                session,
                prefixes,
            });
        }
        for (h2, u2) in &hosts[i + 1..] {
            let (_, pa, _) = split_url(&u1[0]);
            let (_, pb, _) = split_url(&u2[0]);
            let prefixes =
                corresponding_prefixes(pa, pb).map(|(a, b)| (Arc::from(a), Arc::from(b)));
            pairs.push(Contribution {
                hosts: ((*h1).clone(), (*h2).clone()),
                prefixes,
            });
        }
    }
    (pairs, copies)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts not fetched since the horizon are forgotten once the map has doubled; a host
    /// fetched again since (under another address too) keeps its newest address.
    #[test]
    fn addresses_of_hosts_out_of_the_window_are_forgotten() {
        let mut m = Mirrors::default();
        for h in 0..1500i64 {
            m.host_address(&format!("http://h{h}.example/"), "192.0.2.1", h);
            m.forget_addresses(1000);
        }
        // Not yet twice the first pass's minimum of 1024.
        assert_eq!(m.addresses.len(), 1500);
        m.host_address("http://h3.example/x", "192.0.2.9", 1200);
        m.host_address("http://h4.example/x", "192.0.2.1", 1300);
        m.host_address("http://h5.example/x", "192.0.2.9", 5);
        for h in 1500..2048i64 {
            m.host_address(&format!("http://h{h}.example/"), "192.0.2.1", h);
        }
        m.forget_addresses(1000);
        // h1000..h2047 are at or after the horizon; h3 and h4 were fetched again since.
        assert_eq!(m.addresses.len(), 1048 + 2);
        assert_eq!(
            m.addresses.get("h3.example"),
            Some(&(Arc::from("192.0.2.9"), 1200))
        );
        assert_eq!(m.addresses.get("h4.example").map(|a| a.1), Some(1300));
        assert!(!m.addresses.contains_key("h5.example"));
        assert!(!m.addresses.contains_key("h999.example"));
        // The next pass waits until the map has doubled again.
        m.host_address("http://late.example/", "192.0.2.1", 3000);
        m.forget_addresses(3000);
        assert_eq!(m.addresses.len(), 1051);
    }

    #[test]
    fn prefixes_are_the_paths_minus_their_common_suffix() {
        assert_eq!(
            corresponding_prefixes("/docs/2.4/mod/core.html", "/httpd/mod/core.html"),
            Some(("/docs/2.4/".into(), "/httpd/".into()))
        );
        assert_eq!(
            corresponding_prefixes("/index.html", "/manual/index.html"),
            Some(("/".into(), "/manual/".into()))
        );
        assert_eq!(corresponding_prefixes("/a/x.html", "/a/y.html"), None);
    }

    #[test]
    fn urls_split_into_host_and_path_without_query() {
        assert_eq!(
            split_url("http://user@Www.A.example:8080/p/q.html?sid=1#f"),
            ("Www.A.example", "/p/q.html", true)
        );
        assert_eq!(split_url("https://a.example"), ("a.example", "/", false));
    }
}

#[cfg(test)]
mod stage_tests {
    use super::*;
    use crate::clusters::Clusters;
    use neardup_schemas::{MirrorState, PairLevel};

    fn states(out: &mut Emitter) -> Vec<(String, MirrorState)> {
        out.drain()
            .map(|e| {
                let m: MirrorEvent = serde_json::from_slice(&e.value).expect("mirror event");
                (m.hosts.join(" "), m.state)
            })
            .collect()
    }

    #[test]
    fn ten_shared_pages_confirm_a_pair_and_losing_them_retracts_it() {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut m = Mirrors::new(MirrorConfig::default());
        let mut out = Emitter::new();
        let mut mirror_out = Emitter::new();
        let feed = |cl: &mut Clusters, m: &mut Mirrors, out: &mut Emitter| {
            let moves: Vec<_> = cl.take_moves().collect();
            m.apply(&moves, out);
        };
        for i in 0..12 {
            cl.add_pair(
                &format!("http://a.example/docs/p{i}.html"),
                &format!("http://b.example/mirror/docs/p{i}.html"),
                0,
                &mut out,
            );
            out.drain().for_each(drop);
            feed(&mut cl, &mut m, &mut mirror_out);
        }
        let s = states(&mut mirror_out);
        assert_eq!(
            s,
            vec![("a.example b.example".to_owned(), MirrorState::Confirmed)]
        );
        assert_eq!(m.reported()[0].3, 12);
        for i in 0..3 {
            cl.remove_pair(
                &format!("http://a.example/docs/p{i}.html"),
                &format!("http://b.example/mirror/docs/p{i}.html"),
                &mut out,
            );
            out.drain().for_each(drop);
            feed(&mut cl, &mut m, &mut mirror_out);
        }
        assert_eq!(
            states(&mut mirror_out),
            vec![("a.example b.example".to_owned(), MirrorState::Retracted)]
        );
        assert!(m.reported().is_empty());
    }
}
