//! Counting a round's live pairs against its truth: true and false positives, by site, level,
//! similarity bucket and hard-negative kind.

use super::{
    bucket, site_index, Example, Interner, Level, Live, Pair, RoundTruth, BUCKETS, EXAMPLES,
};
use serde::Serialize;
use std::collections::HashMap;

/// Predicted, truth and true-positive counts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Prc {
    pub(super) predicted: u64,
    pub(super) truth: u64,
    pub(super) tp: u64,
}

/// Truth pairs and found ones in one similarity stratum.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Found {
    pub(super) truth: u64,
    pub(super) found: u64,
}

/// Listed and reported hard-negative pairs of one reason.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Listed {
    /// Pairs the truth lists.
    pub listed: u64,
    /// Of them, pairs in the prediction.
    pub reported: u64,
}

/// Raw counts of one round (or of several, added up).
#[derive(Debug, Clone, Default)]
pub(super) struct Counts {
    pub(super) predicted: u64,
    pub(super) truth: u64,
    pub(super) tp: u64,
    /// Same site, different site.
    pub(super) site: [Prc; 2],
    pub(super) buckets: [Found; BUCKETS.len()],
    pub(super) exact: ExactCounts,
    /// By reason id.
    pub(super) hard_pairs: Vec<Listed>,
    /// By reason id.
    pub(super) hard_group_pairs: Vec<u64>,
    /// Predicted and true positives by [`Level`].
    pub(super) levels: [(u64, u64); 3],
    pub(super) unlabelled: u64,
}

/// Exact-duplicate pairs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ExactCounts {
    /// Pairs inside the truth's exact-duplicate groups.
    pub truth: u64,
    /// Of them, pairs in the prediction (any level).
    pub found: u64,
    /// Of those, pairs predicted with level `exact`.
    pub found_as_exact: u64,
}

impl Counts {
    pub(super) fn hard_pair(&mut self, reason: u16) -> &mut Listed {
        let r = reason as usize;
        if self.hard_pairs.len() <= r {
            self.hard_pairs.resize(r + 1, Listed::default());
        }
        &mut self.hard_pairs[r]
    }

    pub(super) fn hard_group_pair(&mut self, reason: u16) -> &mut u64 {
        let r = reason as usize;
        if self.hard_group_pairs.len() <= r {
            self.hard_group_pairs.resize(r + 1, 0);
        }
        &mut self.hard_group_pairs[r]
    }

    pub(super) fn add(&mut self, o: &Counts) {
        self.predicted += o.predicted;
        self.truth += o.truth;
        self.tp += o.tp;
        for (s, t) in self.site.iter_mut().zip(&o.site) {
            s.predicted += t.predicted;
            s.truth += t.truth;
            s.tp += t.tp;
        }
        for (s, t) in self.buckets.iter_mut().zip(&o.buckets) {
            s.truth += t.truth;
            s.found += t.found;
        }
        self.exact.truth += o.exact.truth;
        self.exact.found += o.exact.found;
        self.exact.found_as_exact += o.exact.found_as_exact;
        for (r, l) in o.hard_pairs.iter().enumerate() {
            let s = self.hard_pair(r as u16);
            s.listed += l.listed;
            s.reported += l.reported;
        }
        for (r, n) in o.hard_group_pairs.iter().enumerate() {
            *self.hard_group_pair(r as u16) += n;
        }
        for (s, t) in self.levels.iter_mut().zip(&o.levels) {
            s.0 += t.0;
            s.1 += t.1;
        }
        self.unlabelled += o.unlabelled;
    }
}

/// What a false positive is, as far as the truth says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum FpKind {
    Unlabelled,
    HardNegativeGroup(u16),
    HardNegativePair(u16),
}

/// Scores one snapshot against one round of the truth.
pub(super) fn score_round(
    live: &HashMap<Pair, Live>,
    t: &RoundTruth,
    interner: &Interner,
    reasons: &[String],
) -> (Counts, Vec<Example>) {
    let mut c = t.base.clone();
    let mut fps: Vec<(FpKind, Pair, Live)> = Vec::new();
    for (&p, &l) in live {
        let same = interner.same_site(p);
        c.predicted += 1;
        c.site[site_index(same)].predicted += 1;
        c.levels[l.level as usize].0 += 1;
        if let Some(&reason) = t.hard_pairs.get(&p) {
            c.hard_pair(reason).reported += 1;
        }
        let (mx, my) = (t.member.get(&p.0), t.member.get(&p.1));
        if let (Some(&(gx, sx)), Some(&(gy, sy))) = (mx, my) {
            if gx == gy {
                c.tp += 1;
                c.site[site_index(same)].tp += 1;
                c.buckets[bucket(sx.min(sy))].found += 1;
                c.levels[l.level as usize].1 += 1;
                if let (Some(ex), Some(ey)) = (t.exact.get(&p.0), t.exact.get(&p.1)) {
                    if ex == ey {
                        c.exact.found += 1;
                        if l.level == Level::Exact {
                            c.exact.found_as_exact += 1;
                        }
                    }
                }
                continue;
            }
        }
        // A false positive: which truth list, if any, names it?
        let kind = if let Some(&reason) = t.hard_pairs.get(&p) {
            FpKind::HardNegativePair(reason)
        } else if let Some(g) = common_group(t, p) {
            let reason = t.hard_group_reason[g as usize];
            *c.hard_group_pair(reason) += 1;
            FpKind::HardNegativeGroup(reason)
        } else {
            c.unlabelled += 1;
            FpKind::Unlabelled
        };
        fps.push((kind, p, l));
    }
    // Examples: unlabelled first (the ones the truth cannot explain), then the most similar.
    let examples = pick_examples(fps, interner, |k| match k {
        FpKind::Unlabelled => ("unlabelled", None),
        FpKind::HardNegativeGroup(r) => ("hard_negative_group", Some(reasons[r as usize].clone())),
        FpKind::HardNegativePair(r) => ("hard_negative_pair", Some(reasons[r as usize].clone())),
    });
    (c, examples)
}

/// The first hard-negative group holding both URLs of `p` (also counted when one is in a group
/// of a pair listed among `hard_negative_pairs`).
pub(super) fn common_group(t: &RoundTruth, (x, y): Pair) -> Option<u32> {
    let gx = t.hard_groups_of.get(&x)?;
    let gy = t.hard_groups_of.get(&y)?;
    gx.iter().copied().find(|g| gy.contains(g))
}

/// Up to [`EXAMPLES`] false positives, ordered by kind, then by decreasing Jaccard, then by URL.
pub(super) fn pick_examples<K: Ord + Copy>(
    mut fps: Vec<(K, Pair, Live)>,
    interner: &Interner,
    describe: impl Fn(K) -> (&'static str, Option<String>),
) -> Vec<Example> {
    let jac = |l: &Live| l.jaccard.map_or(f32::NEG_INFINITY, |j| j);
    let key = |(k, p, l): &(K, Pair, Live)| (*k, -jac(l), interner.ordered(*p));
    let by = |x: &(K, Pair, Live), y: &(K, Pair, Live)| {
        let (kx, jx, ux) = key(x);
        let (ky, jy, uy) = key(y);
        kx.cmp(&ky).then(jx.total_cmp(&jy)).then(ux.cmp(&uy))
    };
    if fps.len() > EXAMPLES {
        fps.select_nth_unstable_by(EXAMPLES - 1, by);
        fps.truncate(EXAMPLES);
    }
    fps.sort_by(by);
    fps.into_iter()
        .map(|(k, p, l)| {
            let (a, b) = interner.ordered(p);
            let (kind, reason) = describe(k);
            Example {
                a,
                b,
                level: l.level,
                jaccard: l.jaccard,
                kind,
                reason,
            }
        })
        .collect()
}
