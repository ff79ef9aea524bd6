//! The benchmark's ground truth (`truth.json`, `neardup-bench.truth/v1`): each round's groups,
//! exact duplicates and hard negatives.

use super::{pair, Counts, Interner, Pair, BUCKETS, TRUTH_FORMAT};
use anyhow::{bail, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::io::Read;

#[derive(Deserialize)]
pub(super) struct TruthDoc {
    pub(super) format: String,
    pub(super) rounds: Vec<RoundDoc>,
}

#[derive(Deserialize)]
pub(super) struct RoundDoc {
    pub(super) crawl_id: String,
    #[serde(default)]
    pub(super) start: Option<String>,
    #[serde(default)]
    pub(super) pages: Option<u64>,
    #[serde(default)]
    pub(super) near_duplicate_groups: Vec<GroupDoc>,
    #[serde(default)]
    pub(super) exact_duplicate_groups: Vec<Vec<String>>,
    #[serde(default)]
    pub(super) hard_negative_pairs: Vec<HardPairDoc>,
    #[serde(default)]
    pub(super) hard_negative_groups: Vec<HardGroupDoc>,
}

#[derive(Deserialize)]
pub(super) struct GroupDoc {
    pub(super) urls: Vec<String>,
    #[serde(default)]
    pub(super) jaccard_to_ref: HashMap<String, f64>,
}

#[derive(Deserialize)]
pub(super) struct HardPairDoc {
    pub(super) urls: Vec<String>,
    pub(super) reason: String,
}

#[derive(Deserialize)]
pub(super) struct HardGroupDoc {
    pub(super) reason: String,
    pub(super) urls: Vec<String>,
}

/// The parsed truth: one [`RoundTruth`] per round, reasons as ids.
pub(super) struct Truth {
    pub(super) rounds: Vec<RoundTruth>,
    pub(super) reasons: Vec<String>,
}

/// What one round of the truth says, over interned URLs.
pub(super) struct RoundTruth {
    pub(super) crawl_id: String,
    /// The first 19 characters of `start` (`YYYY-MM-DDTHH:MM:SS`), for events without a crawl id.
    pub(super) start: Option<String>,
    /// Pages fetched with content in the round, if the truth says.
    pub(super) pages: Option<u64>,
    /// URL -> (near-duplicate group, similarity to the group's ref).
    pub(super) member: HashMap<u32, (u32, f64)>,
    /// URL -> exact-duplicate group.
    pub(super) exact: HashMap<u32, u32>,
    /// Listed hard-negative pairs -> reason.
    pub(super) hard_pairs: HashMap<Pair, u16>,
    /// URL -> the hard-negative groups it is in.
    pub(super) hard_groups_of: HashMap<u32, Vec<u32>>,
    /// Reason of each hard-negative group.
    pub(super) hard_group_reason: Vec<u16>,
    /// The counts that do not depend on the prediction (truth sizes, listed hard negatives).
    pub(super) base: Counts,
}

impl Truth {
    pub(super) fn read(reader: impl Read, interner: &mut Interner) -> Result<Truth> {
        let doc: TruthDoc = serde_json::from_reader(reader)?;
        if doc.format != TRUTH_FORMAT {
            bail!(
                "format is {:?}; this neardup reads {TRUTH_FORMAT:?}",
                doc.format
            );
        }
        if doc.rounds.is_empty() {
            bail!("the truth has no rounds");
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut reason_id = |r: &str| -> u16 {
            match reasons.iter().position(|x| x == r) {
                Some(i) => i as u16,
                None => {
                    reasons.push(r.to_owned());
                    (reasons.len() - 1) as u16
                }
            }
        };
        let mut rounds = Vec::with_capacity(doc.rounds.len());
        for r in doc.rounds {
            let mut t = RoundTruth {
                crawl_id: r.crawl_id,
                start: r.start.map(|s| s.chars().take(19).collect()),
                pages: r.pages,
                member: HashMap::new(),
                exact: HashMap::new(),
                hard_pairs: HashMap::new(),
                hard_groups_of: HashMap::new(),
                hard_group_reason: Vec::new(),
                base: Counts::default(),
            };
            for (g, group) in r.near_duplicate_groups.iter().enumerate() {
                let members: Vec<(u32, f64)> = group
                    .urls
                    .iter()
                    .map(|u| {
                        let sim = group.jaccard_to_ref.get(u).copied().unwrap_or(1.0);
                        (interner.id(u), sim)
                    })
                    .collect();
                for (i, &(x, sx)) in members.iter().enumerate() {
                    t.member.insert(x, (g as u32, sx));
                    for &(y, sy) in &members[i + 1..] {
                        t.base.truth += 1;
                        t.base.site[site_index(interner.same_site((x, y)))].truth += 1;
                        t.base.buckets[bucket(sx.min(sy))].truth += 1;
                    }
                }
            }
            for (g, urls) in r.exact_duplicate_groups.iter().enumerate() {
                for u in urls {
                    t.exact.insert(interner.id(u), g as u32);
                }
                let n = urls.len() as u64;
                t.base.exact.truth += n * n.saturating_sub(1) / 2;
            }
            for hp in &r.hard_negative_pairs {
                let [x, y] = hp.urls.as_slice() else {
                    bail!(
                        "round {}: a hard-negative pair has {} URLs",
                        t.crawl_id,
                        hp.urls.len()
                    );
                };
                let reason = reason_id(&hp.reason);
                if t.hard_pairs
                    .insert(pair(interner.id(x), interner.id(y)), reason)
                    .is_none()
                {
                    t.base.hard_pair(reason).listed += 1;
                }
            }
            for (g, hg) in r.hard_negative_groups.iter().enumerate() {
                t.hard_group_reason.push(reason_id(&hg.reason));
                for u in &hg.urls {
                    let groups = t.hard_groups_of.entry(interner.id(u)).or_default();
                    if groups.last() != Some(&(g as u32)) {
                        groups.push(g as u32);
                    }
                }
            }
            rounds.push(t);
        }
        Ok(Truth { rounds, reasons })
    }

    pub(super) fn index(&self, crawl_id: &str) -> Option<usize> {
        self.rounds.iter().position(|r| r.crawl_id == crawl_id)
    }

    /// The round of an event without a crawl id: the last round that started at or before `at`.
    pub(super) fn round_at(&self, at: &str) -> usize {
        let at: String = at.chars().take(19).collect();
        self.rounds
            .iter()
            .rposition(|r| r.start.as_deref().is_some_and(|s| s <= at.as_str()))
            .unwrap_or(0)
    }
}

pub(super) fn site_index(same_site: bool) -> usize {
    if same_site {
        0
    } else {
        1
    }
}

pub(super) fn bucket(similarity: f64) -> usize {
    BUCKETS
        .iter()
        .position(|&(upper, _)| similarity < upper)
        .unwrap_or(BUCKETS.len() - 1)
}
