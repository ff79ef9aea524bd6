//! Replicated collections (seed 003, Cho, Shivakumar and Garcia-Molina §3), recomputed per
//! window epoch.
//!
//! # Algorithm
//! 1. **Trivial clusters** are the `very_similar` clusters (pages similar by transitivity)
//!    with copies on two or more hosts; a cluster on one host is that host's own duplicates.
//! 2. **Link summary**: for every ordered pair of trivial clusters (R_i, R_j), s_ij = pages of
//!    R_i that link to at least one page of R_j, d_ij = pages of R_j linked from at least one
//!    page of R_i, from the pages' resolved out-links.
//! 3. **Merge condition** |R_i| = s_ij = d_ij = |R_j| (every copy of a page links to its own
//!    copy of the other), or with the **extended condition** for partial mirrors (on by
//!    default) |R_i| = s_ij >= d_ij = |R_j|: every copy links into R_j and every copy in R_j is
//!    linked, where a partial mirror's links to pages it lacks point to another copy.
//! 4. **Union-find** over the trivial-cluster graph; a component of two or more trivial clusters
//!    is a replicated collection. Its cardinality is the largest trivial cluster (the number of
//!    copies), its size the number of trivial clusters (pages per copy); each host's copy is
//!    listed with its page count and root paths (the longest common directory of its pages
//!    under each distinct top directory, or `/` when it has pages at the host's root).
//! 5. **Roll-up of partial mirrors**: a partial mirror holds some pages on fewer hosts, so the
//!    merge condition (equal cardinalities) leaves them in components of their own; components
//!    whose root paths nest (one within the other) on at least two hosts are pieces of one tree
//!    and form one collection (neardup's addition: seed 003 reports such pieces separately).
//!    A copy's page count is every document of the window on that host under the copy's
//!    roots; a document the host serves under several paths (`/3/` and `/3.11/`) counts once.
//! 6. **Siblings**: collections on exactly the same hosts whose roots are, host by host,
//!    subdirectories of one directory are that directory's tree (books side by side on
//!    load-balanced hosts, which need not link to each other).
//!
//! # Why per epoch, and why that is sound
//! The merge condition is a property of whole trivial clusters and of every link between them,
//! so one page joining or leaving can make or break a merge anywhere in a component; an
//! incremental version would have to keep s and d for every linked pair of clusters. Instead the
//! collections are recomputed from the window's state when an epoch closes (a crawl round ends,
//! or a replay ends): the result is exactly the algorithm's on that state, whatever order the
//! pages came in, and the cost is one pass over the out-links of clustered pages. Each epoch
//! publishes `updated` for collections that are new or changed and `dissolved` for those gone.
//! A collection's id hashes the smallest URL of its root copy's first page, so it is stable
//! while that page stays in the collection.

use crate::emit::Emitter;
use crate::hash::StrBuild;
use neardup_schemas::{CollectionEvent, CollectionHost, CollectionState, OutputKind};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CollectionConfig {
    /// Use the extended merge condition for partial mirrors.
    pub extended: bool,
}

impl Default for CollectionConfig {
    fn default() -> Self {
        CollectionConfig { extended: true }
    }
}

/// One host's copy: host, root paths, pages.
pub type HostCopy = (String, Vec<String>, u64);

/// A collection as last published.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Published {
    cardinality: u64,
    size: u64,
    hosts: Vec<HostCopy>,
}

/// The collections stage.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Collections {
    cfg: CollectionConfig,
    ids: HashMap<Arc<str>, u32, StrBuild>,
    names: Vec<Arc<str>>,
    /// Out-links of the pages with content in the window, as interned URLs.
    links: HashMap<u32, Box<[u32]>, StrBuild>,
    published: BTreeMap<String, Published>,
}

/// A set of interned pages.
type Pages = HashSet<u32, StrBuild>;

fn host_and_path(url: &str) -> (&str, &str) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = path.split(['?', '#']).next().unwrap_or("/");
    (host, path)
}

/// The root paths of one host's pages: per top-level directory, the longest common directory.
fn root_paths(paths: &[&str]) -> Vec<String> {
    let mut by_top: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in paths {
        // The top directory ("" for a page at the root).
        let dir = &p[..p.rfind('/').map_or(0, |i| i + 1)];
        let top = dir.trim_start_matches('/').split('/').next().unwrap_or("");
        by_top.entry(top).or_default().push(p);
    }
    // A copy with pages at the host's root lives at "/": every other root is inside it.
    if by_top.contains_key("") {
        return vec!["/".to_owned()];
    }
    by_top
        .into_values()
        .map(|group| {
            let dirs: Vec<Vec<&str>> = group
                .iter()
                .map(|p| {
                    let d = &p[..p.rfind('/').map_or(0, |i| i + 1)];
                    d.trim_matches('/')
                        .split('/')
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .collect();
            let mut common: Vec<&str> = dirs[0].clone();
            for d in &dirs[1..] {
                let n = common.iter().zip(d).take_while(|(a, b)| a == b).count();
                common.truncate(n);
            }
            if common.is_empty() {
                "/".to_owned()
            } else {
                format!("/{}/", common.join("/"))
            }
        })
        .collect()
}

/// Splits a root under which the host serves one tree twice (`/docs/` holding `/docs/2.4/` and
/// `/docs/current/`, the same documents under both) into those path aliases: `docs` are the
/// copy's (path, document) pairs. A root stays whole unless it holds two or more
/// subdirectories sharing a document and every page of the copy under it lies in one of them.
fn split_path_aliases(roots: Vec<String>, docs: &[(&str, usize)]) -> Vec<String> {
    let mut out = Vec::with_capacity(roots.len());
    for root in roots {
        // Per document, the subdirectories of `root` holding it.
        let mut dirs_of: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        let mut all_in_subdirs = true;
        for &(path, doc) in docs {
            let Some(rest) = path.strip_prefix(root.as_str()) else {
                continue;
            };
            match rest.split_once('/') {
                Some((dir, _)) if !dir.is_empty() => dirs_of.entry(doc).or_default().push(dir),
                _ => all_in_subdirs = false,
            }
        }
        let mut aliases: Vec<&str> = dirs_of
            .values_mut()
            .filter_map(|dirs| {
                dirs.sort_unstable();
                dirs.dedup();
                (dirs.len() >= 2).then_some(dirs.as_slice())
            })
            .flatten()
            .copied()
            .collect();
        aliases.sort_unstable();
        aliases.dedup();
        let covered = dirs_of
            .values()
            .flatten()
            .all(|d| aliases.binary_search(d).is_ok());
        if all_in_subdirs && aliases.len() >= 2 && covered {
            out.extend(aliases.iter().map(|d| format!("{root}{d}/")));
        } else {
            out.push(root);
        }
    }
    out.sort();
    out
}

/// The directory that directly contains every one of `roots` outside the others (`/kb/` for
/// `/kb/gio/` and `/kb/glib/`), or `None` when they have no one parent or one is `/`.
fn common_parent<'a>(roots: &[&'a str]) -> Option<&'a str> {
    let outermost = roots
        .iter()
        .filter(|r| !roots.iter().any(|o| o != *r && r.starts_with(o)));
    let mut parent = None;
    for r in outermost {
        let trimmed = r.strip_suffix('/')?;
        let p = &r[..trimmed.rfind('/')? + 1];
        if parent.is_some_and(|q| q != p) {
            return None;
        }
        parent = Some(p);
    }
    parent
}

impl Collections {
    /// An empty stage.
    pub fn new(cfg: CollectionConfig) -> Self {
        Collections {
            cfg,
            ..Collections::default()
        }
    }

    fn id(&mut self, url: &str, url_of: &mut impl FnMut(&str) -> Arc<str>) -> u32 {
        if let Some(&i) = self.ids.get(url) {
            return i;
        }
        let a = url_of(url);
        let i = self.names.len() as u32;
        self.names.push(a.clone());
        self.ids.insert(a, i);
        i
    }

    /// A page was fetched: with content, its out-links are remembered; without, forgotten.
    pub fn fetched<'a>(&mut self, url: &str, out_links: Option<impl Iterator<Item = &'a str>>) {
        self.fetched_with(url, out_links, &mut |u: &str| Arc::from(u));
    }

    /// After a restore: makes every URL the pool's copy ([`crate::intern`]).
    pub(crate) fn fit_restored(&mut self, pool: &mut crate::intern::UrlPool) {
        self.names.shrink_to_fit();
        for name in &mut self.names {
            pool.share(name);
        }
        pool.share_keys(&mut self.ids);
    }

    /// [`Self::fetched`], new URLs made by `url_of` (the state's [`crate::intern::UrlPool`], to
    /// share them with the rest of the state).
    pub(crate) fn fetched_with<'a>(
        &mut self,
        url: &str,
        out_links: Option<impl Iterator<Item = &'a str>>,
        url_of: &mut impl FnMut(&str) -> Arc<str>,
    ) {
        let u = self.id(url, url_of);
        match out_links {
            Some(links) => {
                let mut v: Vec<u32> = links.map(|l| self.id(l, url_of)).collect();
                v.sort_unstable();
                v.dedup();
                self.links.insert(u, v.into_boxed_slice());
            }
            None => {
                self.links.remove(&u);
            }
        }
    }

    /// The remembered out-links of `url` (none when it has no content in the window).
    pub fn links_of(&self, url: &str) -> impl Iterator<Item = &str> {
        self.ids
            .get(url)
            .and_then(|u| self.links.get(u))
            .into_iter()
            .flat_map(|targets| targets.iter().map(|&t| &*self.names[t as usize]))
    }

    /// Forgets the links of pages for which `keep` is false (pages that left the window), and
    /// the interned URLs nothing refers to any more, so memory follows the window.
    pub fn prune(&mut self, keep: impl Fn(&str) -> bool) {
        let names = &self.names;
        self.links.retain(|u, _| keep(&names[*u as usize]));
        let mut map: HashMap<u32, u32, StrBuild> = HashMap::default();
        let mut names: Vec<Arc<str>> = Vec::new();
        let mut renumber = |u: u32, names: &mut Vec<Arc<str>>| -> u32 {
            *map.entry(u).or_insert_with(|| {
                names.push(self.names[u as usize].clone());
                (names.len() - 1) as u32
            })
        };
        let mut keys: Vec<u32> = self.links.keys().copied().collect();
        keys.sort_unstable();
        let mut links = HashMap::with_capacity_and_hasher(keys.len(), StrBuild::default());
        for k in keys {
            let targets = self.links.remove(&k).expect("key");
            let nk = renumber(k, &mut names);
            let nt: Box<[u32]> = targets.iter().map(|&t| renumber(t, &mut names)).collect();
            links.insert(nk, nt);
        }
        self.ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        self.names = names;
        self.links = links;
    }

    /// Closes an epoch: computes the collections from the members of each near-duplicate
    /// cluster (in any order) and the remembered links, and publishes what changed.
    pub fn epoch(&mut self, clusters: Vec<Vec<&str>>, out: &mut Emitter) {
        self.epoch_with(clusters, out, &mut |u: &str| Arc::from(u));
    }

    /// [`Self::epoch`], a member these collections have not met yet named by `url_of` (the
    /// state's [`crate::intern::UrlPool`], to share it with the rest of the state).
    pub(crate) fn epoch_with(
        &mut self,
        clusters: Vec<Vec<&str>>,
        out: &mut Emitter,
        url_of: &mut impl FnMut(&str) -> Arc<str>,
    ) {
        // 1. Trivial clusters, in a deterministic order.
        let mut trivial: Vec<Vec<u32>> = clusters
            .into_iter()
            .map(|members| {
                let mut m: Vec<u32> = (members.iter()).map(|u| self.id(u, url_of)).collect();
                m.sort_by(|a, b| self.names[*a as usize].cmp(&self.names[*b as usize]));
                m
            })
            .collect();
        trivial.sort_by(|a, b| self.names[a[0] as usize].cmp(&self.names[b[0] as usize]));
        // Every clustered page's trivial cluster (also so that a host's copies of one document,
        // served under two paths, count as one page).
        let mut of: HashMap<u32, usize, StrBuild> = HashMap::default();
        for (i, r) in trivial.iter().enumerate() {
            for &p in r {
                of.insert(p, i);
            }
        }
        // Only clusters with copies on two or more hosts are replicas; copies on one host are
        // that host's own duplicates (an auto-mirror), which the mirror stage reports. Left in,
        // two copies of a page on a third host that every copy links to would satisfy the merge
        // condition and pull that host into the collection. The others take no part in the
        // link summary, so they stay components of one and are no collection.
        let replica: Vec<bool> = trivial
            .iter()
            .map(|r| {
                let first = host_and_path(&self.names[r[0] as usize]).0;
                r.iter()
                    .any(|&p| host_and_path(&self.names[p as usize]).0 != first)
            })
            .collect();
        // 2. Link summary: (i, j) -> (sources in R_i, targets in R_j).
        let mut summary: HashMap<(usize, usize), (Pages, Pages), StrBuild> = HashMap::default();
        for (i, r) in trivial.iter().enumerate().filter(|(i, _)| replica[*i]) {
            for &p in r {
                let Some(targets) = self.links.get(&p) else {
                    continue;
                };
                for t in targets.iter() {
                    if let Some(&j) = of.get(t) {
                        if j != i && replica[j] {
                            let e = summary.entry((i, j)).or_default();
                            e.0.insert(p);
                            e.1.insert(*t);
                        }
                    }
                }
            }
        }
        // 3. Merge condition, 4. union-find.
        let mut parent: Vec<usize> = (0..trivial.len()).collect();
        fn find(parent: &mut [usize], x: usize) -> usize {
            let mut r = x;
            while parent[r] != r {
                r = parent[r];
            }
            let mut y = x;
            while parent[y] != r {
                let next = parent[y];
                parent[y] = r;
                y = next;
            }
            r
        }
        let mut edges: Vec<(usize, usize)> = summary
            .iter()
            .filter(|(&(i, j), (s, d))| {
                let (ri, rj) = (trivial[i].len(), trivial[j].len());
                if self.cfg.extended {
                    ri == s.len() && s.len() >= d.len() && d.len() == rj
                } else {
                    ri == s.len() && s.len() == d.len() && d.len() == rj
                }
            })
            .map(|(&k, _)| k)
            .collect();
        edges.sort_unstable();
        for (i, j) in edges {
            let (a, b) = (find(&mut parent, i), find(&mut parent, j));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
        let mut components: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..trivial.len() {
            let root = find(&mut parent, i);
            components.entry(root).or_default().push(i);
        }
        // 5. Roll-up: a partial mirror holds some pages of a collection on fewer hosts than the
        //    rest, so the merge condition (equal cardinalities) leaves those pages in a component
        //    of their own. Components whose copies sit at the same root paths on at least two
        //    hosts are one collection: they are pieces of one tree mirrored host to host.
        let pieces: Vec<Vec<usize>> = components.into_values().filter(|m| m.len() >= 2).collect();
        let mut roots: Vec<BTreeMap<&str, Vec<String>>> = Vec::with_capacity(pieces.len());
        for members in &pieces {
            let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for &i in members {
                for &p in &trivial[i] {
                    let (h, path) = host_and_path(&self.names[p as usize]);
                    by_host.entry(h).or_default().push(path);
                }
            }
            roots.push(
                by_host
                    .into_iter()
                    .map(|(h, paths)| (h, root_paths(&paths)))
                    .collect(),
            );
        }
        // Two pieces are one tree when, on at least two hosts, a root of one lies within a root
        // of the other (a subtree's pieces sit below the tree's roots).
        let nested = |a: &[String], b: &[String]| {
            a.iter().any(|x| {
                b.iter()
                    .any(|y| x.starts_with(y.as_str()) || y.starts_with(x.as_str()))
            })
        };
        let mut piece_parent: Vec<usize> = (0..pieces.len()).collect();
        for a in 0..pieces.len() {
            for b in a + 1..pieces.len() {
                let agreeing = roots[a]
                    .iter()
                    .filter(|(h, ra)| roots[b].get(*h).is_some_and(|rb| nested(ra, rb)))
                    .count();
                if agreeing >= 2 {
                    let (x, y) = (find(&mut piece_parent, a), find(&mut piece_parent, b));
                    if x != y {
                        piece_parent[x.max(y)] = x.min(y);
                    }
                }
            }
        }
        // 6. Siblings: collections on exactly the same hosts whose roots are, host by host,
        //    subdirectories of one directory (a portal's books side by side under `/kb/` on
        //    load-balanced hosts) are that directory's tree. Their pages need not link to each
        //    other, so the merge condition cannot join them. Distinct trees mirrored side by
        //    side stay apart unless every host holds both and nothing else holds either, and
        //    then the hosts do replicate the parent directory.
        let mut by_collection: BTreeMap<usize, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
        for (c, piece_roots) in roots.iter().enumerate() {
            let hosts = by_collection.entry(find(&mut piece_parent, c)).or_default();
            for (h, rs) in piece_roots {
                hosts
                    .entry(h)
                    .or_default()
                    .extend(rs.iter().map(String::as_str));
            }
        }
        let mut siblings: BTreeMap<Vec<(&str, &str)>, usize> = BTreeMap::new();
        for (c, hosts) in &by_collection {
            let Some(key) = hosts
                .iter()
                .map(|(h, rs)| Some((*h, common_parent(rs)?)))
                .collect::<Option<Vec<(&str, &str)>>>()
            else {
                continue;
            };
            match siblings.get(&key) {
                Some(&first) => {
                    let (x, y) = (find(&mut piece_parent, first), find(&mut piece_parent, *c));
                    if x != y {
                        piece_parent[x.max(y)] = x.min(y);
                    }
                }
                None => {
                    siblings.insert(key, *c);
                }
            }
        }
        let mut components: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (c, members) in pieces.iter().enumerate() {
            let root = find(&mut piece_parent, c);
            components.entry(root).or_default().extend(members);
        }
        for members in components.values_mut() {
            members.sort_unstable();
        }
        // Describe each collection.
        let mut window_paths: HashMap<&str, Vec<(&str, u32)>> = HashMap::new();
        for &u in self.links.keys() {
            let (h, path) = host_and_path(&self.names[u as usize]);
            window_paths.entry(h).or_default().push((path, u));
        }
        let mut now: BTreeMap<String, Published> = BTreeMap::new();
        for members in components.values().filter(|m| m.len() >= 2) {
            let cardinality = members.iter().map(|&i| trivial[i].len()).max().unwrap_or(0);
            let mut by_host: BTreeMap<&str, Vec<(&str, usize)>> = BTreeMap::new();
            for &i in members {
                for &p in &trivial[i] {
                    let (h, path) = host_and_path(&self.names[p as usize]);
                    by_host.entry(h).or_default().push((path, i));
                }
            }
            // A copy's pages: every windowed document of the host under its roots, duplicated
            // elsewhere or not (the collection's pages on that host, not only its shared ones);
            // a document the host serves under several paths counts once.
            let hosts: Vec<HostCopy> = by_host
                .iter()
                .map(|(h, docs)| {
                    let paths: Vec<&str> = docs.iter().map(|d| d.0).collect();
                    let roots = split_path_aliases(root_paths(&paths), docs);
                    let pages = window_paths.get(h).map_or(0, |all| {
                        let mut seen: HashSet<usize, StrBuild> = HashSet::default();
                        all.iter()
                            .filter(|(p, _)| roots.iter().any(|r| p.starts_with(r.as_str())))
                            .filter(|(_, u)| of.get(u).is_none_or(|&d| seen.insert(d)))
                            .count()
                    });
                    // Pages that left the collections stage's view still count.
                    let own = docs.iter().map(|d| d.1).collect::<HashSet<usize>>().len();
                    (h.to_string(), roots, pages.max(own) as u64)
                })
                .collect();
            let first = &self.names[trivial[members[0]][0] as usize];
            let id = format!("col-{:016x}", xxhash_rust::xxh3::xxh3_64(first.as_bytes()));
            now.insert(
                id,
                Published {
                    cardinality: cardinality as u64,
                    size: members.len() as u64,
                    hosts,
                },
            );
        }
        for (id, p) in &now {
            if self.published.get(id) != Some(p) {
                out.emit(event(id, CollectionState::Updated, p, out.at()));
            }
        }
        let gone: Vec<String> = self
            .published
            .keys()
            .filter(|id| !now.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            let empty = Published {
                cardinality: 0,
                size: 0,
                hosts: vec![],
            };
            out.emit(event(&id, CollectionState::Dissolved, &empty, out.at()));
        }
        self.published = now;
    }

    /// The collections of the last epoch: (id, cardinality, size, hosts with root paths and
    /// pages).
    pub fn current(&self) -> Vec<(String, u64, u64, Vec<HostCopy>)> {
        self.published
            .iter()
            .map(|(id, p)| (id.clone(), p.cardinality, p.size, p.hosts.clone()))
            .collect()
    }
}

fn event(id: &str, state: CollectionState, p: &Published, at: &str) -> CollectionEvent {
    CollectionEvent {
        schema: OutputKind::Collections.schema().into(),
        event_id: String::new(),
        collection_id: id.to_owned(),
        state,
        cardinality: p.cardinality,
        size: p.size,
        hosts: p
            .hosts
            .iter()
            .map(|(h, roots, pages)| CollectionHost {
                host: h.clone(),
                root_paths: roots.clone(),
                pages: *pages,
            })
            .collect(),
        at: at.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::Clusters;
    use neardup_schemas::PairLevel;

    /// The members of each of `cl`'s clusters, as [`Collections::epoch`] takes them.
    fn members(cl: &Clusters) -> Vec<Vec<&str>> {
        cl.members_by_cluster()
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    }

    #[test]
    fn root_paths_are_common_directories_per_top_directory() {
        assert_eq!(
            root_paths(&["/docs/2.4/index.html", "/docs/2.4/mod/core.html"]),
            vec!["/docs/2.4/".to_owned()]
        );
        assert_eq!(
            root_paths(&["/docs/2.4/a.html", "/current/b.html"]),
            vec!["/current/".to_owned(), "/docs/2.4/".to_owned()]
        );
    }

    #[test]
    fn a_root_holding_one_tree_twice_splits_into_its_path_aliases() {
        let docs = [
            ("/docs/2.4/a.html", 0),
            ("/docs/current/a.html", 0),
            ("/docs/2.4/b.html", 1),
        ];
        assert_eq!(
            split_path_aliases(vec!["/docs/".into()], &docs),
            ["/docs/2.4/", "/docs/current/"]
        );
        // Subdirectories that share no document are one tree's parts, not aliases.
        let parts = [("/docs/x/a.html", 0), ("/docs/y/b.html", 1)];
        assert_eq!(
            split_path_aliases(vec!["/docs/".into()], &parts),
            ["/docs/"]
        );
        // A page of the copy directly under the root keeps it whole.
        let mut flat = docs.to_vec();
        flat.push(("/docs/index.html", 2));
        assert_eq!(split_path_aliases(vec!["/docs/".into()], &flat), ["/docs/"]);
    }

    #[test]
    fn common_parent_is_the_directory_holding_every_outermost_root() {
        assert_eq!(common_parent(&["/kb/gio/", "/kb/glib/"]), Some("/kb/"));
        assert_eq!(common_parent(&["/kb/gio/", "/kb/gio/sub/"]), Some("/kb/"));
        assert_eq!(common_parent(&["/3/", "/3.11/"]), Some("/"));
        assert_eq!(common_parent(&["/kb/gio/", "/docs/glib/"]), None);
        assert_eq!(common_parent(&["/", "/kb/"]), None);
    }

    /// Builds the clusters and links of `trees`: each tree is a list of (url, out-links), and
    /// `copies` lists groups of urls that are near-duplicates of each other.
    fn epoch_of(copies: &[&[&str]], pages: &[(&str, &[&str])]) -> Collections {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut col = Collections::new(CollectionConfig::default());
        let mut out = Emitter::new();
        for group in copies {
            for w in group.windows(2) {
                cl.add_pair(w[0], w[1], 0, &mut out);
            }
        }
        for (url, links) in pages {
            col.fetched(url, Some(links.iter().copied()));
        }
        out.drain().for_each(drop);
        col.epoch(members(&cl), &mut out);
        col
    }

    /// Copies on p and m both link to a page of x.example that x serves twice (its index and a
    /// near-identical part page): the merge condition holds between the copies' cluster and
    /// x's one-host cluster, but x holds no copy of the tree and is not in the collection.
    #[test]
    fn a_host_linked_from_every_copy_is_not_a_copy() {
        let col = epoch_of(
            &[
                &["http://p.example/d/a.html", "http://m.example/d/a.html"],
                &["http://p.example/d/b.html", "http://m.example/d/b.html"],
                &[
                    "http://x.example/m/index.html",
                    "http://x.example/m/pt.html",
                ],
            ],
            &[
                (
                    "http://p.example/d/a.html",
                    &[
                        "http://p.example/d/b.html",
                        "http://x.example/m/index.html",
                        "http://x.example/m/pt.html",
                    ],
                ),
                (
                    "http://m.example/d/a.html",
                    &[
                        "http://m.example/d/b.html",
                        "http://x.example/m/index.html",
                        "http://x.example/m/pt.html",
                    ],
                ),
                ("http://p.example/d/b.html", &["http://p.example/d/a.html"]),
                ("http://m.example/d/b.html", &["http://m.example/d/a.html"]),
                ("http://x.example/m/index.html", &[]),
                ("http://x.example/m/pt.html", &[]),
            ],
        );
        let now = col.current();
        assert_eq!(now.len(), 1, "{now:?}");
        let hosts: Vec<&str> = now[0].3.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(hosts, ["m.example", "p.example"]);
    }

    /// p serves its tree under two paths (`/2.4/` and `/current/`); each document counts once
    /// in p's pages, and p's root is their common directory.
    #[test]
    fn a_document_served_under_two_paths_counts_once() {
        let p = |path: &str| format!("http://p.example/docs/{path}");
        let m = |path: &str| format!("http://m.example/httpd/{path}");
        let (pa, pb, pca, pcb) = (
            p("2.4/a.html"),
            p("2.4/b.html"),
            p("current/a.html"),
            p("current/b.html"),
        );
        let (ma, mb) = (m("a.html"), m("b.html"));
        let col = epoch_of(
            &[&[&ma, &pa, &pca], &[&mb, &pb, &pcb]],
            &[
                (&pa, &[&pb]),
                (&pb, &[&pa]),
                (&pca, &[&pcb]),
                (&pcb, &[&pca]),
                (&ma, &[&mb]),
                (&mb, &[&ma]),
                (&p("2.4/only-here.html"), &[]),
            ],
        );
        let now = col.current();
        assert_eq!(now.len(), 1, "{now:?}");
        let hosts: Vec<(&str, u64)> = now[0].3.iter().map(|h| (h.0.as_str(), h.2)).collect();
        assert_eq!(hosts, [("m.example", 2), ("p.example", 3)]);
        assert_eq!(now[0].3[1].1, ["/docs/2.4/", "/docs/current/"]);
    }

    /// Two books side by side under `/kb/` on two load-balanced hosts, not linked to each
    /// other: one collection rooted at `/kb/`. With a third host holding one of the books, the
    /// host sets differ and the books stay two collections.
    #[test]
    fn sibling_trees_on_the_same_hosts_are_one_collection() {
        let url = |h: &str, book: &str, page: &str| format!("http://{h}.example/kb/{book}/{page}");
        let mut copies: Vec<Vec<String>> = vec![];
        let mut pages: Vec<(String, Vec<String>)> = vec![];
        for book in ["gio", "glib"] {
            for (page, other) in [("a.html", "b.html"), ("b.html", "a.html")] {
                copies.push(["w1", "w2"].map(|h| url(h, book, page)).to_vec());
                for h in ["w1", "w2"] {
                    pages.push((url(h, book, page), vec![url(h, book, other)]));
                }
            }
        }
        let run = |copies: &[Vec<String>], pages: &[(String, Vec<String>)]| {
            let copies: Vec<Vec<&str>> = copies
                .iter()
                .map(|c| c.iter().map(String::as_str).collect())
                .collect();
            let copies: Vec<&[&str]> = copies.iter().map(Vec::as_slice).collect();
            let links: Vec<Vec<&str>> = pages
                .iter()
                .map(|(_, l)| l.iter().map(String::as_str).collect())
                .collect();
            let pages: Vec<(&str, &[&str])> = pages
                .iter()
                .zip(&links)
                .map(|((u, _), l)| (u.as_str(), l.as_slice()))
                .collect();
            epoch_of(&copies, &pages).current()
        };
        let now = run(&copies, &pages);
        assert_eq!(now.len(), 1, "{now:?}");
        let hosts: Vec<(&str, &[String], u64)> = now[0]
            .3
            .iter()
            .map(|(h, r, n)| (h.as_str(), r.as_slice(), *n))
            .collect();
        let kb = ["/kb/".to_owned()];
        assert_eq!(
            hosts,
            [("w1.example", &kb[..], 4), ("w2.example", &kb[..], 4)]
        );
        // A third host mirrors only gio.
        for (page, other) in [("a.html", "b.html"), ("b.html", "a.html")] {
            copies.push(vec![url("w1", "gio", page), url("w3", "gio", page)]);
            pages.push((url("w3", "gio", page), vec![url("w3", "gio", other)]));
        }
        let now = run(&copies, &pages);
        assert_eq!(now.len(), 2, "{now:?}");
    }

    /// Three copies of a three-page tree (index -> a, index -> b) on three hosts, and a partial
    /// mirror that lacks b and links to the primary's b instead.
    /// A tree mirrored on two hosts, whose subdirectory `sub/` is also on a third host: the
    /// subdirectory's pages have three copies, the rest two, so the merge condition leaves two
    /// components; their roots nest on both shared hosts, so they are one collection, and each
    /// copy counts every windowed page under its roots (an unshared page too).
    #[test]
    fn pieces_of_one_tree_roll_up_into_one_collection() {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut col = Collections::new(CollectionConfig::default());
        let mut out = Emitter::new();
        let trees = ["http://p.example/docs/", "http://m.example/mirror/"];
        let mut pair = |a: String, b: String| cl.add_pair(&a, &b, 0, &mut out);
        for page in ["index.html", "a.html"] {
            pair(format!("{}{page}", trees[0]), format!("{}{page}", trees[1]));
        }
        for page in ["sub/x.html", "sub/y.html"] {
            pair(format!("{}{page}", trees[0]), format!("{}{page}", trees[1]));
            pair(
                format!("{}{page}", trees[1]),
                format!("http://s.example/{page}"),
            );
        }
        let fetched = |col: &mut Collections, url: String, links: &[String]| {
            col.fetched(&url, Some(links.iter().map(String::as_str)));
        };
        for t in trees {
            fetched(&mut col, format!("{t}index.html"), &[format!("{t}a.html")]);
            fetched(&mut col, format!("{t}a.html"), &[format!("{t}index.html")]);
            fetched(
                &mut col,
                format!("{t}sub/x.html"),
                &[format!("{t}sub/y.html")],
            );
            fetched(
                &mut col,
                format!("{t}sub/y.html"),
                &[format!("{t}sub/x.html")],
            );
        }
        let s = "http://s.example/sub/";
        fetched(&mut col, format!("{s}x.html"), &[format!("{s}y.html")]);
        fetched(&mut col, format!("{s}y.html"), &[format!("{s}x.html")]);
        // A page only the primary has.
        fetched(&mut col, "http://p.example/docs/only-here.html".into(), &[]);
        out.drain().for_each(drop);
        col.epoch(members(&cl), &mut out);
        let now = col.current();
        assert_eq!(now.len(), 1, "{now:?}");
        let hosts: Vec<(&str, &[String], u64)> = now[0]
            .3
            .iter()
            .map(|(h, r, n)| (h.as_str(), r.as_slice(), *n))
            .collect();
        assert_eq!(
            hosts,
            [
                ("m.example", &["/mirror/".to_owned()][..], 4),
                ("p.example", &["/docs/".to_owned()][..], 5),
                ("s.example", &["/sub/".to_owned()][..], 2),
            ]
        );
        assert_eq!((now[0].1, now[0].2), (3, 4));
    }

    #[test]
    fn mirrored_trees_form_one_collection_and_partial_mirrors_join_it() {
        let mut cl = Clusters::new(PairLevel::VerySimilar);
        let mut col = Collections::new(CollectionConfig::default());
        let mut out = Emitter::new();
        let hosts = [
            "http://p.example/docs/",
            "http://m1.example/mirror/",
            "http://m2.example/",
        ];
        for page in ["index.html", "a.html", "b.html"] {
            for w in hosts.windows(2) {
                cl.add_pair(
                    &format!("{}{page}", w[0]),
                    &format!("{}{page}", w[1]),
                    0,
                    &mut out,
                );
            }
        }
        cl.add_pair(
            "http://p.example/docs/index.html",
            "http://part.example/x/index.html",
            0,
            &mut out,
        );
        cl.add_pair(
            "http://p.example/docs/a.html",
            "http://part.example/x/a.html",
            0,
            &mut out,
        );
        for h in hosts {
            let links = [format!("{h}a.html"), format!("{h}b.html")];
            col.fetched(
                &format!("{h}index.html"),
                Some(links.iter().map(String::as_str)),
            );
            col.fetched(&format!("{h}a.html"), Some(std::iter::empty()));
            col.fetched(&format!("{h}b.html"), Some(std::iter::empty()));
        }
        let part = [
            "http://part.example/x/a.html".to_owned(),
            "http://p.example/docs/b.html".to_owned(),
        ];
        col.fetched(
            "http://part.example/x/index.html",
            Some(part.iter().map(String::as_str)),
        );
        col.fetched("http://part.example/x/a.html", Some(std::iter::empty()));
        out.drain().for_each(drop);
        col.epoch(members(&cl), &mut out);
        let now = col.current();
        assert_eq!(now.len(), 1, "{now:?}");
        let (_, cardinality, size, hosts_found) = &now[0];
        assert_eq!((*cardinality, *size), (4, 3));
        let names: Vec<&str> = hosts_found.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(
            names,
            ["m1.example", "m2.example", "p.example", "part.example"]
        );
        assert_eq!(hosts_found[3].1, vec!["/x/".to_owned()]);
        assert_eq!(hosts_found[3].2, 2);
        assert_eq!(out.drain().count(), 1);
        // Strict condition: b's cluster (3 copies) cannot merge with index's (4 copies).
        let mut strict = Collections::new(CollectionConfig { extended: false });
        std::mem::swap(&mut strict.links, &mut col.links);
        std::mem::swap(&mut strict.ids, &mut col.ids);
        std::mem::swap(&mut strict.names, &mut col.names);
        strict.epoch(members(&cl), &mut out);
        assert!(
            strict.current().iter().all(|c| c.2 < 3),
            "{:?}",
            strict.current()
        );
        // Nothing changed: the next epoch publishes nothing.
        out.drain().for_each(drop);
        col.links = strict.links.clone();
        col.ids = strict.ids.clone();
        col.names = strict.names.clone();
        col.epoch(members(&cl), &mut out);
        assert_eq!(out.drain().count(), 0);
    }
}
