//! The pair policies side by side (seed 001: Alg. B and Alg. C of §2, the combined algorithm of
//! §3; and neardup's default), their parameters, and the verdict each gives on a comparison.

use super::{Comparison, Naming, Signatures, BANDS, BAND_ROWS, PIECES};
use crate::sketch::minhash::SUPERSHINGLES;
use crate::sketch::simhash;
use neardup_schemas::PairLevel;

/// Alg. B (FMN): a pair is B-similar when at least this many supershingles agree.
const B_SIMILAR: u8 = 2;
/// Alg. C (Henzinger): the C-similarity a pair needs alone.
const ALG_C_MIN: u16 = 372;
/// Henzinger's combined algorithm: the C-similarity a B-similar pair needs.
const COMBINED_MIN_C: u16 = 355;

/// Which pairs count as near-duplicates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Policy {
    /// Alg. B alone: >= 2 of 6 supershingles.
    AlgB,
    /// Alg. C alone: >= 372 of 384 simhash bits.
    AlgC,
    /// Henzinger's combined algorithm: B-similar and C-similarity >= 355.
    Combined,
    /// neardup's default: discounted Jaccard with per-site boilerplate discounting.
    Neardup,
}

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 4] = [
        Policy::AlgB,
        Policy::AlgC,
        Policy::Combined,
        Policy::Neardup,
    ];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::AlgB => "b",
            Policy::AlgC => "c",
            Policy::Combined => "combined",
            Policy::Neardup => "neardup",
        }
    }

    /// Parses a configuration name.
    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }

    pub(super) fn uses_bands(self) -> bool {
        self != Policy::AlgC
    }

    pub(super) fn uses_pieces(self) -> bool {
        self == Policy::AlgC
    }
}

/// Parameters of the index and the policy.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NearConfig {
    /// The verification policy.
    pub policy: Policy,
    /// How long a fetch stays in the window (event time, milliseconds).
    pub window_ms: i64,
    /// At most this many pages in the window; beyond it the oldest fetch is evicted.
    pub max_pages: usize,
    /// Band buckets with more pages than this give only their newest `max_bucket − 1` pages
    /// (with the new one, `max_bucket`) as candidates.
    pub max_bucket: usize,
    /// A page joining an exact group of this many pages or more gets no exact candidates.
    pub max_pairs_per_join: usize,
    /// Default policy: minimum discounted Jaccard for pages whose URLs end in the same name.
    pub min_jaccard: f64,
    /// Default policy: minimum discounted Jaccard for pages whose URLs end in different names.
    pub min_jaccard_renamed: f64,
    /// Default policy: minimum discounted Jaccard for pages of one site whose URLs end in
    /// different names. A site's own pages share its template and often its subject (the
    /// member lists of two classes, two releases' notes), and seed 001 found most false
    /// positives among same-site pairs; a site rarely serves one document under two names.
    pub min_jaccard_renamed_on_site: f64,
    /// Default policy: minimum discounted Jaccard for pages whose titles differ (both pages
    /// have one) and whose URLs end in different names or are on one site (or the threshold
    /// of their names alone, if higher). The name and the title are a page's two statements
    /// of which document it is; when both differ, only near-identical text overrules them
    /// (API pages of two classes whose shared members are most of their text, on two mirrors
    /// of one manual). On one site the URL's path tells documents apart even under one name
    /// (`nfs/index.html`, `spufs/index.html`), so a different title is enough. Across sites
    /// under one name it is not: a parked domain's page names its own domain in its title.
    pub min_jaccard_retitled: f64,
    /// Default policy: compare the pages' titles at all (false: pages are judged by their URLs
    /// alone, as if neither had a title).
    pub titles: bool,
    /// Default policy: minimum undiscounted min-value positions to judge on; with fewer, but at
    /// least half as many, every one of them must agree, and only a pair held to the base
    /// threshold (`min_jaccard`: one name, one title) may be judged so.
    pub min_support: u32,
    /// Default policy: minimum C-similarity.
    pub min_c_similarity: u16,
    /// Site pages sampled to find boilerplate positions.
    pub boilerplate_sample: usize,
    /// A position is boilerplate when its value recurs in this many sampled site pages.
    pub boilerplate_min: usize,
}

impl Default for NearConfig {
    fn default() -> Self {
        NearConfig {
            policy: Policy::Neardup,
            window_ms: 14 * 24 * 3600 * 1000,
            max_pages: 4_000_000,
            max_bucket: 128,
            max_pairs_per_join: 1000,
            min_jaccard: 0.7,
            min_jaccard_renamed: 0.9,
            min_jaccard_renamed_on_site: 0.98,
            min_jaccard_retitled: 0.98,
            titles: true,
            min_support: 12,
            min_c_similarity: 330,
            boilerplate_sample: 32,
            boilerplate_min: 8,
        }
    }
}

/// The similarities at which [`NearConfig::describe`] gives the band S-curve.
pub const CURVE_POINTS: [f64; 5] = [0.5, 0.6, 0.7, 0.8, 0.9];

/// The probability that two pages of Jaccard similarity `j` share at least one of the
/// [`BANDS`] bands, and so become a candidate pair: a min-value byte agrees with probability
/// `j + (1 − j)/256` (its min-values agree, or their kept bytes do by chance), a band when its
/// [`BAND_ROWS`] bytes do. Before the hot-bucket cut and the skipped boilerplate bands, which
/// only the crawl decides.
pub fn band_candidate_probability(j: f64) -> f64 {
    let byte = j + (1.0 - j) / 256.0;
    1.0 - (1.0 - byte.powi(BAND_ROWS as i32)).powi(BANDS as i32)
}

impl NearConfig {
    /// The policy's verdict on a comparison: the pair's level, or `None` if it is no pair.
    /// `naming`: how the two URLs relate (see [`super::url_name`]).
    pub fn verdict<S: Signatures>(
        &self,
        a: &S,
        b: &S,
        c: &Comparison,
        naming: Naming,
    ) -> Option<PairLevel> {
        if c.exact {
            return Some(PairLevel::Exact);
        }
        if !a.has_terms() || !b.has_terms() {
            return None;
        }
        let holds = match self.policy {
            Policy::AlgB => c.b_similarity >= B_SIMILAR,
            Policy::AlgC => c.c_similarity >= ALG_C_MIN,
            Policy::Combined => c.b_similarity >= B_SIMILAR && c.c_similarity >= COMBINED_MIN_C,
            Policy::Neardup => {
                let min_jaccard = self.min_jaccard_for(naming);
                // A few positions, all agreeing, vouch for the base threshold only: n of n
                // agree by chance with probability J^n, so 6 to 11 unanimous positions put J
                // above 0.61-0.76 (95 % one-sided) and cannot show the 0.9 or 0.98 a renamed
                // or retitled pair needs (a pair at J = 0.8 passes 6 of 6 one time in four).
                let few_suffice = min_jaccard <= self.min_jaccard;
                c.same_text
                    || ((c.support >= self.min_support
                        || (few_suffice
                            && 2 * c.support >= self.min_support
                            && c.kept_agreeing == c.support))
                        && c.discounted_jaccard >= min_jaccard
                        && c.c_similarity >= self.min_c_similarity)
            }
        };
        holds.then_some(if c.b_similarity == SUPERSHINGLES as u8 {
            PairLevel::VirtuallyIdentical
        } else {
            PairLevel::VerySimilar
        })
    }

    /// The policy's thresholds and how candidates are found, in one line, for the log at
    /// start-up: what a pair must reach to be reported, and, for the policies that search the
    /// band tables, the S-curve of [`band_candidate_probability`].
    pub fn describe(&self) -> String {
        let bands = || {
            let curve: Vec<String> = CURVE_POINTS
                .iter()
                .map(|&j| format!("{j}: {:.3}", band_candidate_probability(j)))
                .collect();
            format!(
                "candidates from {BANDS} bands of {BAND_ROWS} min-values and equal checksums; a pair of Jaccard similarity J shares a band with probability {}",
                curve.join(", ")
            )
        };
        const BITS: usize = simhash::BITS;
        let pieces = format!(
            "candidates from {PIECES} simhash pieces of {} bits and equal checksums: every pair differing in at most {} bits shares a piece",
            BITS / PIECES,
            PIECES - 1
        );
        match self.policy {
            Policy::AlgB => format!(
                "pair policy b (Alg. B): a pair holds with >= {B_SIMILAR} of {SUPERSHINGLES} supershingles agreeing; {}",
                bands()
            ),
            Policy::AlgC => format!(
                "pair policy c (Alg. C): a pair holds with >= {ALG_C_MIN} of {BITS} simhash bits agreeing; {pieces}"
            ),
            Policy::Combined => format!(
                "pair policy combined: a pair holds with >= {B_SIMILAR} of {SUPERSHINGLES} supershingles and >= {COMBINED_MIN_C} of {BITS} simhash bits agreeing; {}",
                bands()
            ),
            Policy::Neardup => format!(
                "pair policy neardup: a pair holds with equal normalised text, or a Jaccard similarity without the sites' boilerplate of >= {} (URLs ending in different names: {}; different names on one site: {}; different titles: {}{}) on >= {} min-values, and >= {} of {BITS} simhash bits agreeing; {}",
                self.min_jaccard,
                self.min_jaccard_renamed,
                self.min_jaccard_renamed_on_site,
                self.min_jaccard_retitled,
                if self.titles { "" } else { ", titles not compared" },
                self.min_support,
                self.min_c_similarity,
                bands()
            ),
        }
    }

    /// The default policy's minimum discounted Jaccard for pages related as `naming`.
    fn min_jaccard_for(&self, naming: Naming) -> f64 {
        match naming {
            Naming::SameName => self.min_jaccard,
            Naming::Renamed => self.min_jaccard_renamed,
            Naming::RenamedOnSite => self.min_jaccard_renamed_on_site,
            // A different title never makes a pair easier than its names alone.
            Naming::Retitled {
                same_name,
                one_site,
            } => self
                .min_jaccard_for(Naming::by_names(same_name, one_site))
                .max(self.min_jaccard_retitled),
        }
    }
}
