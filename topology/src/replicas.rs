//! Near-replicas by content and hyperlink context: Di Iorio, Diligenti, Gori, Maggini, Pucci
//! (seed 002), §2.2 and §3, over a snapshot of pages (a crawl round, or the window).
//!
//! Each page brings its RP signature R (§2.1, [`crate::sketch::rp`]) and its out-links. The
//! **Hyperlink Map** X is eq. (1), iterated from x(0) = r over the links among the snapshot's
//! pages (a link to a page outside the snapshot carries no signature and is ignored):
//!
//! x^p(t+1) = r^p + γ · Σ_{q ∈ ch(p)} x^q(t) ⊙ r^q,
//!
//! then every vector is multiplied by 1/x_M, x_M the largest component over all pages (§2.2).
//! Two pages **collide with (C, D) tolerance** iff ‖X¹−X²‖∞ < C and ‖R¹−R²‖∞ < D (§3); C = 1
//! is the paper's "RP alone" curve (every scaled X lies in \[0, 1\]).
//!
//! **Finding the collisions.** Pages are filed in a grid over the first (up to five) RP
//! coordinates with cells of side D: two signatures closer than D in every coordinate lie in the
//! same or neighbouring cells, so each page is compared only with the pages of the 3^k cells
//! around its own (k ≤ 5), then verified on every coordinate of R and X.
//!
//! **Choices the paper leaves open.** γ ("a dumping factor") and the (C, D) values appear only as
//! curves (fig. 1), and the iterations as "3–5": the defaults here (γ = 0.1, 4 iterations,
//! C = 0.05, D = 0.05) are ours, chosen on nothing but the paper's ranges; the evaluation in the
//! README reports several settings. Duplicated out-links count once; a self-link is ignored.

use crate::sketch::rp::linf;
use std::collections::HashMap;

/// The parameters of §2.2 and §3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicaParams {
    /// γ, the damping factor of eq. (1).
    pub gamma: f32,
    /// Iterations of eq. (1) (the paper: 3–5).
    pub iterations: usize,
    /// C: HM signatures collide iff their L∞ distance is below this (1 = HM not used).
    pub c: f32,
    /// D: RP signatures collide iff their L∞ distance is below this.
    pub d: f32,
}

impl Default for ReplicaParams {
    fn default() -> Self {
        ReplicaParams {
            gamma: 0.1,
            iterations: 4,
            c: 0.05,
            d: 0.05,
        }
    }
}

/// Seed 002's Hyperlink Map as a veto in the pair policy: when an epoch closes, the HM
/// signatures of the window's pages are computed over its link graph, and a live
/// `very_similar` pair whose HM signatures are `c` or more apart (L∞) is retracted: its pages'
/// text agrees but their link contexts do not. Exact and virtually identical pairs are never
/// vetoed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HmVeto {
    /// C: the largest L∞ distance of HM signatures a pair may have (exclusive).
    pub c: f32,
    /// Damping γ of eq. (1).
    pub gamma: f32,
    /// Iterations of eq. (1).
    pub iterations: usize,
}

impl HmVeto {
    /// A veto at tolerance `c` with γ = 0.1 and 4 iterations (the README's measured setting).
    pub fn new(c: f32) -> Self {
        HmVeto {
            c,
            gamma: 0.1,
            iterations: 4,
        }
    }

    /// Whether HM signatures `x` and `y` are too far apart for a pair.
    pub fn rejects(&self, x: &[f32], y: &[f32]) -> bool {
        x.iter().zip(y).any(|(a, b)| (a - b).abs() >= self.c)
    }
}

/// The pages of one snapshot with their RP signatures and out-links.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    urls: Vec<String>,
    by_url: HashMap<String, u32>,
    /// K values per page.
    rp: Vec<f32>,
    k: usize,
    /// Out-links as given, resolved to pages when the map is computed.
    links: Vec<Vec<String>>,
}

impl Snapshot {
    /// An empty snapshot of pages whose RP signatures have `k` components.
    pub fn new(k: usize) -> Self {
        Snapshot {
            k,
            ..Snapshot::default()
        }
    }

    /// Pages in the snapshot.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// True when the snapshot has no page.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    /// The number of page `url`, if it is in the snapshot.
    pub fn index_of(&self, url: &str) -> Option<u32> {
        self.by_url.get(url).copied()
    }

    /// K, the number of values per signature.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The URL of page `i`.
    pub fn url(&self, i: u32) -> &str {
        &self.urls[i as usize]
    }

    /// Adds a page (a URL added again replaces its signature and links: the latest fetch
    /// counts). A signature of another length than K is ignored.
    pub fn add<'a>(&mut self, url: &str, rp: &[f32], out_links: impl IntoIterator<Item = &'a str>) {
        if rp.len() != self.k {
            return;
        }
        let links: Vec<String> = out_links.into_iter().map(str::to_owned).collect();
        match self.by_url.get(url) {
            Some(&i) => {
                let i = i as usize;
                self.rp[i * self.k..(i + 1) * self.k].copy_from_slice(rp);
                self.links[i] = links;
            }
            None => {
                self.by_url.insert(url.to_owned(), self.urls.len() as u32);
                self.urls.push(url.to_owned());
                self.rp.extend_from_slice(rp);
                self.links.push(links);
            }
        }
    }

    /// The children of every page: its distinct out-links to other pages of the snapshot.
    fn children(&self) -> Vec<Vec<u32>> {
        self.links
            .iter()
            .enumerate()
            .map(|(p, links)| {
                let mut ch: Vec<u32> = links
                    .iter()
                    .filter_map(|l| self.by_url.get(l).copied())
                    .filter(|&q| q as usize != p)
                    .collect();
                ch.sort_unstable();
                ch.dedup();
                ch
            })
            .collect()
    }

    /// The Hyperlink Map signatures of every page (K values each), eq. (1) iterated
    /// `iterations` times with damping `gamma`, then scaled by 1/x_M.
    pub fn hyperlink_map(&self, gamma: f32, iterations: usize) -> Vec<f32> {
        let k = self.k;
        let children = self.children();
        let mut x = self.rp.clone();
        let mut next = vec![0f32; x.len()];
        for _ in 0..iterations {
            for (p, ch) in children.iter().enumerate() {
                let out = &mut next[p * k..(p + 1) * k];
                out.copy_from_slice(&self.rp[p * k..(p + 1) * k]);
                for &q in ch {
                    let q = q as usize;
                    let (xq, rq) = (&x[q * k..(q + 1) * k], &self.rp[q * k..(q + 1) * k]);
                    for j in 0..k {
                        out[j] += gamma * xq[j] * rq[j];
                    }
                }
            }
            std::mem::swap(&mut x, &mut next);
        }
        let x_max = x.iter().copied().fold(0f32, f32::max);
        if x_max > 0.0 {
            x.iter_mut().for_each(|v| *v /= x_max);
        }
        x
    }

    /// Every pair of pages (i < j) that collides with (C, D) tolerance, sorted.
    pub fn collisions(&self, params: &ReplicaParams) -> Vec<(u32, u32)> {
        let hm = self.hyperlink_map(params.gamma, params.iterations);
        self.collisions_with(&hm, params.c, params.d)
    }

    /// The collisions given the HM signatures.
    pub fn collisions_with(&self, hm: &[f32], c: f32, d: f32) -> Vec<(u32, u32)> {
        let k = self.k;
        if k == 0 || d <= 0.0 {
            return vec![];
        }
        let dims = k.min(5);
        let cell = |i: usize| -> Vec<i64> {
            self.rp[i * k..i * k + dims]
                .iter()
                .map(|&v| (v / d).floor() as i64)
                .collect()
        };
        let mut grid: HashMap<Vec<i64>, Vec<u32>> = HashMap::new();
        for i in 0..self.len() {
            grid.entry(cell(i)).or_default().push(i as u32);
        }
        let mut pairs = vec![];
        let mut around = vec![0i64; dims];
        for i in 0..self.len() {
            let home = cell(i);
            for offset in 0..3usize.pow(dims as u32) {
                let mut o = offset;
                for (a, h) in around.iter_mut().zip(&home) {
                    *a = h + (o % 3) as i64 - 1;
                    o /= 3;
                }
                let Some(pages) = grid.get(&around) else {
                    continue;
                };
                for &j in pages {
                    let j = j as usize;
                    if j <= i {
                        continue;
                    }
                    let r = linf(&self.rp[i * k..(i + 1) * k], &self.rp[j * k..(j + 1) * k]);
                    let x = linf(&hm[i * k..(i + 1) * k], &hm[j * k..(j + 1) * k]);
                    if r < d && x < c {
                        pairs.push((i as u32, j as u32));
                    }
                }
            }
        }
        pairs.sort_unstable();
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hyperlink_map_follows_equation_one() {
        // a -> b, a -> c, b -> c; c links out of the snapshot.
        let mut s = Snapshot::new(2);
        s.add("a", &[0.5, 0.2], ["b", "c", "b", "a"]);
        s.add("b", &[0.4, 0.6], ["c"]);
        s.add("c", &[0.8, 0.1], ["http://elsewhere/"]);
        let g = 0.5f32;
        // by hand: one step from x(0) = r
        let (ra, rb, rc) = ([0.5f32, 0.2], [0.4f32, 0.6], [0.8f32, 0.1]);
        let xc1 = rc;
        let xb1 = [rb[0] + g * rc[0] * rc[0], rb[1] + g * rc[1] * rc[1]];
        let xa1 = [
            ra[0] + g * (rb[0] * rb[0] + rc[0] * rc[0]),
            ra[1] + g * (rb[1] * rb[1] + rc[1] * rc[1]),
        ];
        // a second step uses x(1) of the children
        let xa2 = [
            ra[0] + g * (xb1[0] * rb[0] + xc1[0] * rc[0]),
            ra[1] + g * (xb1[1] * rb[1] + xc1[1] * rc[1]),
        ];
        let xb2 = xb1; // c's x never changes, so b's second step equals its first
        let max = [xa2[0], xa2[1], xb2[0], xb2[1], rc[0], rc[1]]
            .into_iter()
            .fold(0f32, f32::max);
        let x = s.hyperlink_map(g, 2);
        let want = [xa2[0], xa2[1], xb2[0], xb2[1], rc[0], rc[1]].map(|v| v / max);
        for (got, want) in x.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{x:?} vs {want:?}");
        }
        assert!(x.iter().all(|&v| (0.0..=1.0).contains(&v)));
        let _ = xa1;
    }

    #[test]
    fn a_refetch_replaces_the_page() {
        let mut s = Snapshot::new(1);
        s.add("a", &[0.1], ["b"]);
        s.add("b", &[0.9], []);
        s.add("a", &[0.9], []);
        assert_eq!(s.len(), 2);
        let p = ReplicaParams {
            c: 1.01,
            ..ReplicaParams::default()
        };
        assert_eq!(s.collisions(&p), vec![(0, 1)]);
    }

    proptest! {
        /// The grid finds exactly the pairs a comparison of every pair finds.
        #[test]
        fn grid_finds_every_colliding_pair(
            pages in proptest::collection::vec((proptest::collection::vec(0f32..1.0, 6), proptest::collection::vec(0usize..30, 0..4)), 0..30),
            d in 0.05f32..0.6, c in 0.05f32..1.1, gamma in 0f32..0.5,
        ) {
            let mut s = Snapshot::new(6);
            let urls: Vec<String> = (0..pages.len()).map(|i| format!("u{i}")).collect();
            for (i, (rp, links)) in pages.iter().enumerate() {
                s.add(&urls[i], rp, links.iter().map(|&l| format!("u{l}")).collect::<Vec<_>>().iter().map(String::as_str));
            }
            let hm = s.hyperlink_map(gamma, 3);
            let got = s.collisions_with(&hm, c, d);
            let k = 6;
            let mut want = vec![];
            for i in 0..s.len() {
                for j in i + 1..s.len() {
                    let r = linf(&s.rp[i * k..(i + 1) * k], &s.rp[j * k..(j + 1) * k]);
                    let x = linf(&hm[i * k..(i + 1) * k], &hm[j * k..(j + 1) * k]);
                    if r < d && x < c {
                        want.push((i as u32, j as u32));
                    }
                }
            }
            prop_assert_eq!(got, want);
        }
    }
}
