//! Alg. B: Broder shingling with min-hashing, as Henzinger (seed 001 §3, "Alg. B") and
//! Fetterly/Manasse/Najork (seed 000 §2) use it: shingles of k consecutive terms, 64-bit shingle
//! fingerprints, m = 84 min-values, l = 6 supershingles of 14 min-values each, and FMN's 15
//! megashingles.
//!
//! # Pipeline
//!
//! 1. **Terms.** The caller hashes each lower-cased term (as [`crate::text::for_each_term`]
//!    yields them) with [`term_fingerprint`]: XXH3-64 with seed [`TERM_SEED`].
//! 2. **Shingles.** Every run of k consecutive term fingerprints is one shingle
//!    ([`Profile::HENZINGER`]: k = 8, no wrap-around; a page with 1..k-1 terms has one shingle
//!    of all its terms, the benchmark's rule. [`Profile::FMN`]: k = 5 with wrap-around, so that
//!    every term starts exactly one shingle, wrapping more than once on a page of fewer than k
//!    terms.)
//! 3. **Shingle fingerprints.** A rolling cyclic polynomial ("buzhash", Cohen 1997; like
//!    Rabin's fingerprints it is linear over GF(2)) over the window, then a keyed non-linear
//!    finalizer: `raw = XOR_{j<k} rotl(t[i+j], k-1-j)`, updated in O(1) per shingle as
//!    `raw' = rotl(raw, 1) ^ rotl(t[i], k) ^ t[i+k]`, and `fp = fmix64(raw ^ profile.seed)`
//!    (MurmurHash3's 64-bit finalizer, a bijection with full avalanche). Two windows that differ
//!    in one term always differ in `raw` (rotations are bijections); other distinct windows of
//!    random term fingerprints collide with probability about 2^-64 (k <= 64 keeps the k
//!    rotations distinct). A short page's single shingle is `fmix64(raw ^ seed)` of the same
//!    formula over its n < k terms. The rolling update has no multiplication on its dependency
//!    chain; measured, it is ~20 % faster than a rolling polynomial mod 2^64.
//! 4. **Min-values.** One-permutation hashing (OPH, Li/Owen/Zhang 2012) with optimal
//!    densification (Shrivastava, ICML 2017): the shingle fingerprint `fp` (already a keyed
//!    random permutation of the shingle) goes to bin `⌊fp·84 / 2^64⌋` and each bin keeps its
//!    smallest `fp`. An empty bin `j` copies the value of the first non-empty bin on its own
//!    probe sequence `⌊fmix64(profile.seed ^ DENSIFY_TAG ^ (j<<32 | a))·84 / 2^64⌋`,
//!    a = 0, 1, 2, … (the same sequence on every page). Each min-value is therefore the
//!    fingerprint of one of the page's shingles (FMN's "pre-image"), and for two pages with
//!    shingle-set Jaccard J each min-value agrees with probability exactly J. OPH replaces 84
//!    hash evaluations per shingle by one; it was chosen because the statistics Alg. B relies
//!    on hold for it (tests below; 100,000 pairs of sets of 8..3000 shingles): agreeing
//!    min-values / 84 is unbiased (mean error −0.0002), and a supershingle agrees with
//!    probability J^14 within ±0.03 at every page size tried — per J bucket within 0.004. The
//!    largest deviations are about +0.02 on pages of under 20 shingles at J ≈ 0.9 (densification
//!    copies bins, so a supershingle depends on fewer distinct shingles) and about −0.005 to
//!    −0.01 near 100–400 shingles (the 14 bins of a supershingle sample shingles without
//!    replacement). P(>= 2 of 6 supershingles agree) matches the independent model (0.1378 vs
//!    0.1386). Signing 1,600 terms costs about 5 µs on the 2-core development machine.
//! 5. **Supershingles.** Supershingle i (0..6) = `xxh3_64_with_seed(LE bytes of
//!    minvalues[14i..14i+14], profile.seed ^ SUPERSHINGLE_TAG ^ i)`.
//! 6. **Megashingles** ([`megashingles`]): for each pair i < j in the order (0,1), (0,2), …,
//!    (0,5), (1,2), …, (4,5) — pair number p = 0..15 — `xxh3_64_with_seed(LE(ss[i]) ‖
//!    LE(ss[j]), MEGASHINGLE_SEED + p)`: FMN's concatenation with the lesser-numbered
//!    supershingle first. The pair number is in the seed, so the 15 values can share one
//!    table without coincidental cross-pair matches.
//!
//! # Empty pages
//!
//! A page with no terms has no shingles. Its sketch is [`BSketch::EMPTY`]: every min-value and
//! every supershingle is `u64::MAX` and `shingles` is 0. Two empty pages therefore compare as
//! identical (6 of 6 supershingles, estimated Jaccard 1); callers that index sketches should
//! skip `shingles == 0`. (A real shingle fingerprint equal to `u64::MAX`, probability 2^-64,
//! is treated as an empty bin.)

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// m: min-values per page.
pub const MINVALUES: usize = 84;
/// l: supershingles per page.
pub const SUPERSHINGLES: usize = 6;
/// m / l: min-values per supershingle.
pub const PER_SUPERSHINGLE: usize = MINVALUES / SUPERSHINGLES;
/// Megashingles per page: one per unordered pair of supershingles, C(6, 2).
pub const MEGASHINGLES: usize = 15;

/// Seed of the term fingerprint (`xxh3_64_with_seed(term, TERM_SEED)`); ASCII "term-fp1".
pub const TERM_SEED: u64 = 0x7465_726d_2d66_7031;
/// Xored into the profile seed for the densification probe sequences; ASCII "densify1".
pub const DENSIFY_TAG: u64 = 0x6465_6e73_6966_7931;
/// Xored into the profile seed (and the supershingle number) for supershingles; "supersh1".
pub const SUPERSHINGLE_TAG: u64 = 0x7375_7065_7273_6831;
/// Seed of megashingle number 0 (pair (0,1)); pair p uses `MEGASHINGLE_SEED + p`. "megash01".
pub const MEGASHINGLE_SEED: u64 = 0x6d65_6761_7368_3031;
/// Version of everything this module computes from term fingerprints; bump on any change.
pub const ALGORITHM_VERSION: u32 = 1;

/// Marks an empty bin while sketching, and fills the sketch of an empty page.
const EMPTY: u64 = u64::MAX;
/// After this many probes an empty bin takes the next non-empty bin in index order instead
/// (reached with probability below 1e-21 even when a single bin is non-empty).
const MAX_PROBES: u64 = 4096;

/// The fingerprint of one term: XXH3-64 of its UTF-8 bytes with seed [`TERM_SEED`]. The term
/// must already be lower-cased, as [`crate::text::for_each_term`] yields it; this function does
/// not fold case. Alg. B and Alg. C both take these fingerprints.
#[inline]
pub fn term_fingerprint(term: &str) -> u64 {
    xxh3_64_with_seed(term.as_bytes(), TERM_SEED)
}

/// Shingling parameters: shingle length, wrap-around, and the seed of the shingle fingerprint
/// (and of everything derived from it). Sketches are comparable only under equal profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Profile {
    /// Terms per shingle (1 <= k <= 64).
    pub k: usize,
    /// Wrap the shingle window from the end of the page to its beginning (FMN), so that every
    /// term starts exactly one shingle.
    pub wrap: bool,
    /// Keys the shingle fingerprint, the densification probes and the supershingles.
    pub seed: u64,
}

impl Profile {
    /// Henzinger's Alg. B (seed 001): k = 8, no wrap-around. Seed: ASCII "henzing8".
    pub const HENZINGER: Profile = Profile {
        k: 8,
        wrap: false,
        seed: 0x6865_6e7a_696e_6738,
    };
    /// Fetterly/Manasse/Najork (seed 000): k = 5 with wrap-around. Seed: ASCII "fmn-k5wr".
    pub const FMN: Profile = Profile {
        k: 5,
        wrap: true,
        seed: 0x666d_6e2d_6b35_7772,
    };
}

impl Default for Profile {
    fn default() -> Self {
        Profile::HENZINGER
    }
}

/// A page's Alg. B sketch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BSketch {
    /// The 84 min-values; each is the fingerprint of one shingle of the page.
    #[serde(with = "serde_big_array::BigArray")]
    pub minvalues: [u64; MINVALUES],
    /// Supershingle i fingerprints `minvalues[14i..14i+14]` in order.
    pub supershingles: [u64; SUPERSHINGLES],
    /// Shingle positions on the page (repeats included; saturates at `u32::MAX`). 0 marks an
    /// empty page.
    pub shingles: u32,
}

impl BSketch {
    /// The sketch of a page without terms: every value `u64::MAX`, no shingles.
    pub const EMPTY: BSketch = BSketch {
        minvalues: [EMPTY; MINVALUES],
        supershingles: [EMPTY; SUPERSHINGLES],
        shingles: 0,
    };
}

impl Default for BSketch {
    fn default() -> Self {
        BSketch::EMPTY
    }
}

/// Computes Alg. B sketches under one [`Profile`]. Owns its scratch space, so that sketching a
/// page allocates nothing once the scratch has grown to the largest wrap-around page (only the
/// FMN profile uses it).
#[derive(Debug, Clone)]
pub struct MinHasher {
    profile: Profile,
    /// The wrap-around sequence (FMN profile).
    ext: Vec<u64>,
}

impl MinHasher {
    /// A hasher for `profile`.
    ///
    /// # Panics
    /// If `profile.k` is not in 1..=64.
    pub fn new(profile: Profile) -> Self {
        assert!(
            (1..=64).contains(&profile.k),
            "shingle length k must be in 1..=64, not {}",
            profile.k
        );
        MinHasher {
            profile,
            ext: Vec::new(),
        }
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Sketches a page given the fingerprints of its terms in order ([`term_fingerprint`]).
    pub fn sketch(&mut self, term_fps: &[u64], out: &mut BSketch) {
        out.minvalues = [EMPTY; MINVALUES];
        let mins = &mut out.minvalues;
        let n = self.for_each_shingle_fp(term_fps, |fp| oph_insert(mins, fp));
        self.finish(n, out);
    }

    /// Sketches a set (or sequence) of precomputed shingle fingerprints, as [`Self::sketch`]
    /// does after step 3: for tests with sets of known Jaccard, and for callers that
    /// fingerprint shingles themselves. The fingerprints must be uniformly distributed
    /// (a good 64-bit hash of the shingle).
    pub fn sketch_shingle_fps(&mut self, shingle_fps: &[u64], out: &mut BSketch) {
        out.minvalues = [EMPTY; MINVALUES];
        for &fp in shingle_fps {
            oph_insert(&mut out.minvalues, fp);
        }
        let n = u32::try_from(shingle_fps.len()).unwrap_or(u32::MAX);
        self.finish(n, out);
    }

    /// Calls `f` with the fingerprint of every shingle of the page in order (step 3 above) and
    /// returns the number of shingles (saturating at `u32::MAX`).
    pub fn for_each_shingle_fp(&mut self, term_fps: &[u64], mut f: impl FnMut(u64)) -> u32 {
        let n = term_fps.len();
        let Profile { k, wrap, seed } = self.profile;
        if n == 0 {
            return 0;
        }
        if !wrap {
            if n < k {
                f(fmix64(window(term_fps) ^ seed));
                return 1;
            }
            roll(term_fps, k, seed, f);
            return u32::try_from(n - k + 1).unwrap_or(u32::MAX);
        }
        // Wrap-around: the sequence t[0..n] followed by t[i mod n] for i in 0..k-1 has exactly
        // n windows of k terms, one starting at every term.
        self.ext.clear();
        self.ext.extend_from_slice(term_fps);
        for i in 0..k - 1 {
            self.ext.push(term_fps[i % n]);
        }
        roll(&self.ext, k, seed, f);
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Densifies the bins and fills in the supershingles.
    fn finish(&self, shingles: u32, out: &mut BSketch) {
        out.shingles = shingles;
        if shingles == 0 {
            *out = BSketch::EMPTY;
            return;
        }
        densify(&mut out.minvalues, self.profile.seed ^ DENSIFY_TAG);
        out.supershingles = supershingles(&out.minvalues, self.profile.seed);
    }
}

/// MurmurHash3's 64-bit finalizer: a bijection on u64 with full avalanche.
#[inline(always)]
pub(crate) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// `⌊x · 84 / 2^64⌋`: a bin in 0..84 from the top of a 64-bit value.
#[inline(always)]
fn bin_of(x: u64) -> usize {
    ((u128::from(x) * MINVALUES as u128) >> 64) as usize
}

/// Keeps the smallest fingerprint per bin. Branch-free: the comparison is unpredictable early
/// in a page (measured ~35 % faster than a conditional store).
#[inline(always)]
fn oph_insert(mins: &mut [u64; MINVALUES], fp: u64) {
    let slot = &mut mins[bin_of(fp)];
    *slot = (*slot).min(fp);
}

/// The cyclic polynomial of one window: `XOR_j rotl(w[j], len-1-j)`.
#[inline(always)]
fn window(w: &[u64]) -> u64 {
    w.iter().fold(0u64, |h, &t| h.rotate_left(1) ^ t)
}

/// Rolling cyclic polynomial over every window of `k` terms of `seq` (`seq.len() >= k`,
/// `k <= 64`).
#[inline(always)]
fn roll(seq: &[u64], k: usize, seed: u64, mut f: impl FnMut(u64)) {
    let mut raw = window(&seq[..k]);
    f(fmix64(raw ^ seed));
    let out_rot = k as u32 % 64;
    for (&t_in, &t_out) in seq[k..].iter().zip(seq) {
        raw = raw.rotate_left(1) ^ t_out.rotate_left(out_rot) ^ t_in;
        f(fmix64(raw ^ seed));
    }
}

/// Optimal densification (Shrivastava 2017): every empty bin copies the (original) value of
/// the first non-empty bin on its own fixed probe sequence.
fn densify(mins: &mut [u64; MINVALUES], dseed: u64) {
    let nonempty = mins.iter().filter(|&&v| v != EMPTY).count();
    if nonempty == 0 || nonempty == MINVALUES {
        return;
    }
    let orig = *mins;
    for (j, slot) in mins.iter_mut().enumerate() {
        if orig[j] != EMPTY {
            continue;
        }
        let mut donor = None;
        for a in 0..MAX_PROBES {
            let p = bin_of(fmix64(dseed ^ ((j as u64) << 32 | a)));
            if orig[p] != EMPTY {
                donor = Some(p);
                break;
            }
        }
        let p = donor.unwrap_or_else(|| {
            (1..MINVALUES)
                .map(|d| (j + d) % MINVALUES)
                .find(|&p| orig[p] != EMPTY)
                .unwrap_or(j)
        });
        *slot = orig[p];
    }
}

fn supershingles(mins: &[u64; MINVALUES], seed: u64) -> [u64; SUPERSHINGLES] {
    let mut out = [0u64; SUPERSHINGLES];
    let mut bytes = [0u8; PER_SUPERSHINGLE * 8];
    for (i, (ss, group)) in out
        .iter_mut()
        .zip(mins.chunks_exact(PER_SUPERSHINGLE))
        .enumerate()
    {
        for (b, v) in bytes.chunks_exact_mut(8).zip(group) {
            b.copy_from_slice(&v.to_le_bytes());
        }
        *ss = xxh3_64_with_seed(&bytes, seed ^ SUPERSHINGLE_TAG ^ i as u64);
    }
    out
}

/// FMN's 15 megashingles: one per pair i < j of supershingles, in the order (0,1), (0,2), …,
/// (0,5), (1,2), …, (4,5); pair number p is `xxh3_64_with_seed(LE(ss[i]) ‖ LE(ss[j]),
/// MEGASHINGLE_SEED + p)`. Two pages share megashingle p exactly when they share both
/// supershingles of pair p (up to 2^-64 collisions), so sharing any megashingle means
/// "B-similar" (>= 2 agreeing supershingles) at the same positions.
pub fn megashingles(ss: &[u64; SUPERSHINGLES]) -> [u64; MEGASHINGLES] {
    let mut out = [0u64; MEGASHINGLES];
    let mut p = 0;
    for i in 0..SUPERSHINGLES {
        for j in i + 1..SUPERSHINGLES {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&ss[i].to_le_bytes());
            bytes[8..].copy_from_slice(&ss[j].to_le_bytes());
            out[p] = xxh3_64_with_seed(&bytes, MEGASHINGLE_SEED.wrapping_add(p as u64));
            p += 1;
        }
    }
    out
}

/// B-similarity: the number of agreeing supershingles, 0..=6 (B-similar at >= 2, "virtually
/// identical" at 6).
pub fn b_similarity(a: &BSketch, b: &BSketch) -> u8 {
    a.supershingles
        .iter()
        .zip(&b.supershingles)
        .filter(|(x, y)| x == y)
        .count() as u8
}

/// Agreeing min-values, 0..=84 (FMN's "features in common").
pub fn agreeing_minvalues(a: &BSketch, b: &BSketch) -> u8 {
    a.minvalues
        .iter()
        .zip(&b.minvalues)
        .filter(|(x, y)| x == y)
        .count() as u8
}

/// The estimate of the shingle-set Jaccard similarity: agreeing min-values / 84, in [0, 1].
/// Two empty pages estimate 1.
pub fn estimated_jaccard(a: &BSketch, b: &BSketch) -> f64 {
    f64::from(agreeing_minvalues(a, b)) / MINVALUES as f64
}

/// Everything that determines an Alg. B sketch, for the parameter fingerprint of signature
/// events.
pub fn describe(profile: &Profile) -> String {
    format!(
        "alg-b/v{ALGORITHM_VERSION}: term=xxh3_64(lower-cased term, seed={TERM_SEED:#018x}); \
         shingle=k{k} consecutive terms, wrap={wrap}{short}; \
         shingle_fp=fmix64(xor_j rotl(t[i+j],k-1-j) ^ seed), seed={seed:#018x}; \
         minhash=one-permutation, m={MINVALUES} bins by floor(fp*m/2^64), min fp per bin, \
         optimal densification probes fmix64(seed^{DENSIFY_TAG:#018x}^(j<<32|a)), max {MAX_PROBES} then next bin; \
         supershingles={SUPERSHINGLES}x{PER_SUPERSHINGLE} xxh3_64(LE min-values, seed^{SUPERSHINGLE_TAG:#018x}^i); \
         megashingles=pairs i<j lexicographic, xxh3_64(LE ss_i|ss_j, {MEGASHINGLE_SEED:#018x}+p); \
         empty page=all u64::MAX",
        k = profile.k,
        wrap = profile.wrap,
        short = if profile.wrap {
            ""
        } else {
            ", fewer than k terms = one shingle"
        },
        seed = profile.seed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: the tests' deterministic random source.
    struct Rng(u64);

    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            fmix64(self.0)
        }
        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Uniform in lo..hi.
        fn range(&mut self, lo: usize, hi: usize) -> usize {
            lo + ((u128::from(self.next_u64()) * (hi - lo) as u128) >> 64) as usize
        }
    }

    fn fps(text: &str) -> Vec<u64> {
        let mut v = Vec::new();
        crate::text::for_each_term(text, &mut String::new(), |t| v.push(term_fingerprint(t)));
        v
    }

    fn sketch(profile: Profile, text: &str) -> BSketch {
        let mut s = BSketch::default();
        MinHasher::new(profile).sketch(&fps(text), &mut s);
        s
    }

    /// Every shingle fingerprint of a page, by the definition (no rolling).
    fn naive_shingle_fps(profile: Profile, t: &[u64]) -> Vec<u64> {
        let n = t.len();
        let poly = |w: &mut dyn Iterator<Item = u64>| {
            let w: Vec<u64> = w.collect();
            let len = w.len();
            w.iter()
                .enumerate()
                .fold(0u64, |h, (j, &x)| h ^ x.rotate_left((len - 1 - j) as u32))
        };
        let windows: Vec<u64> = match (n, profile.wrap) {
            (0, _) => vec![],
            (n, false) if n < profile.k => vec![poly(&mut t.iter().copied())],
            (n, false) => (0..=n - profile.k)
                .map(|i| poly(&mut t[i..i + profile.k].iter().copied()))
                .collect(),
            (n, true) => (0..n)
                .map(|i| poly(&mut (0..profile.k).map(|j| t[(i + j) % n])))
                .collect(),
        };
        windows
            .into_iter()
            .map(|r| fmix64(r ^ profile.seed))
            .collect()
    }

    #[test]
    fn rolling_fingerprints_match_the_definition() {
        let mut rng = Rng(7);
        for profile in [Profile::HENZINGER, Profile::FMN] {
            let mut h = MinHasher::new(profile);
            for n in [0usize, 1, 2, 4, 5, 7, 8, 9, 30] {
                let t: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
                let mut got = Vec::new();
                let count = h.for_each_shingle_fp(&t, |fp| got.push(fp));
                assert_eq!(got, naive_shingle_fps(profile, &t), "{profile:?} n={n}");
                assert_eq!(count as usize, got.len());
            }
        }
    }

    #[test]
    fn shingle_counts_follow_the_profiles() {
        let mut h = MinHasher::new(Profile::HENZINGER);
        let mut f = MinHasher::new(Profile::FMN);
        let count = |m: &mut MinHasher, n: usize| m.for_each_shingle_fp(&vec![1u64; n], |_| ());
        assert_eq!(
            [0, 1, 3, 7, 8, 9, 20].map(|n| count(&mut h, n)),
            [0, 1, 1, 1, 1, 2, 13]
        );
        assert_eq!(
            [0, 1, 3, 7, 8, 9, 20].map(|n| count(&mut f, n)),
            [0, 1, 3, 7, 8, 9, 20]
        );
    }

    #[test]
    fn term_fingerprint_is_seeded_xxh3() {
        assert_eq!(
            term_fingerprint("straße"),
            xxh3_64_with_seed("straße".as_bytes(), 0x7465_726d_2d66_7031)
        );
        assert_ne!(term_fingerprint("a"), xxhash_rust::xxh3::xxh3_64(b"a"));
    }

    const GOLDEN_TEXT: &str = "The quick brown fox jumps over the lazy dog; the dog sleeps on, \
        and the fox runs into the woods where 42 other foxes live in Straße number 7.";

    /// Pins the outputs: any change here must be deliberate (and bump ALGORITHM_VERSION).
    #[test]
    fn golden_vectors() {
        let h = sketch(Profile::HENZINGER, GOLDEN_TEXT);
        let f = sketch(Profile::FMN, GOLDEN_TEXT);
        let short = sketch(Profile::HENZINGER, "Hello, world!");
        let long: String = (0..600)
            .map(|i| format!("w{} ", (i * 7919) % 1000))
            .collect();
        let l = sketch(Profile::HENZINGER, &long);
        // `cargo test golden -- --nocapture` prints the values to pin after a deliberate change.
        for (name, s) in [
            ("henzinger", &h),
            ("fmn", &f),
            ("short", &short),
            ("long", &l),
        ] {
            println!(
                "{name}: shingles {} minvalues[..4] {:#018x?} supershingles {:#018x?}",
                s.shingles,
                &s.minvalues[..4],
                s.supershingles
            );
        }
        println!(
            "megashingles[..3] {:#018x?}",
            &megashingles(&h.supershingles)[..3]
        );
        assert_eq!(h.shingles, 22);
        assert_eq!(
            h.minvalues[..4],
            [
                0xe0bc773eb855da1c,
                0xd305c65016ffed4b,
                0x066f8653c817258c,
                0x0aac69c8a3ecc818
            ]
        );
        assert_eq!(
            h.supershingles,
            [
                0xb0f493e1d1123c0f,
                0xd4a5cc323e15c9b8,
                0x93a165a381a6c744,
                0xd25adb537edf802c,
                0x1d173072905b8631,
                0xfdcdacf7d967c73c
            ]
        );
        assert_eq!(
            megashingles(&h.supershingles)[..3],
            [0x9fc70cf26158113b, 0x19745ee4ce9f153e, 0x97b7d2cbd400d9e0]
        );
        assert_eq!(f.shingles, 29);
        assert_eq!(
            f.minvalues[..4],
            [
                0x00faef84a83fcab1,
                0x032cf2605cfca540,
                0x08ff07c2ba13d080,
                0x032cf2605cfca540
            ]
        );
        assert_eq!(
            f.supershingles,
            [
                0x976444802af95ace,
                0x74ebdcb8bc5e916d,
                0x1ad2df210627b988,
                0xa05d8330983258eb,
                0xc7aa74b3bd10d568,
                0x64eaf78918b00572
            ]
        );
        assert_eq!(short.shingles, 1);
        assert_eq!(short.minvalues, [0x37880f41960204ca; 84]);
        assert_eq!(short.supershingles[0], 0x4c8aafdf8f302c4d);
        // A page long enough that no bin is empty (no densification).
        assert_eq!(l.shingles, 593);
        assert_eq!(
            l.minvalues[..4],
            [
                0x00c2ec9977000639,
                0x034edec14b876d7b,
                0x069d4ea9dc4300ef,
                0x097dd95969e3366a
            ]
        );
        assert_eq!(
            l.supershingles[..2],
            [0x673b4c5165296f77, 0x5dc04fbe17a111a7]
        );
    }

    #[test]
    fn empty_pages_have_the_empty_sketch() {
        for profile in [Profile::HENZINGER, Profile::FMN] {
            let mut s = sketch(profile, "some words here");
            MinHasher::new(profile).sketch(&[], &mut s);
            assert_eq!(s, BSketch::EMPTY);
            assert_eq!(sketch(profile, " <> ... !!"), BSketch::EMPTY);
        }
        assert_eq!(b_similarity(&BSketch::EMPTY, &BSketch::EMPTY), 6);
        assert_eq!(estimated_jaccard(&BSketch::EMPTY, &BSketch::EMPTY), 1.0);
        let one = sketch(Profile::HENZINGER, "word");
        assert_eq!(estimated_jaccard(&BSketch::EMPTY, &one), 0.0);
    }

    #[test]
    fn a_single_shingle_fills_every_bin() {
        let s = sketch(Profile::HENZINGER, "only three words");
        assert!(s.minvalues.iter().all(|&v| v == s.minvalues[0]));
        assert_eq!(s.shingles, 1);
    }

    #[test]
    fn near_duplicates_agree_and_different_pages_do_not() {
        let base: String = (0..400)
            .map(|i| format!("w{} ", (i * 7919) % 1000))
            .collect();
        let edited = base.replacen("w", "x", 1); // one term differs: ~8 of ~393 shingles
        let other: String = (0..400)
            .map(|i| format!("v{} ", (i * 7919) % 1000))
            .collect();
        let (a, b, c) = (
            sketch(Profile::HENZINGER, &base),
            sketch(Profile::HENZINGER, &edited),
            sketch(Profile::HENZINGER, &other),
        );
        assert!(agreeing_minvalues(&a, &b) >= 70);
        assert!(b_similarity(&a, &b) >= 2);
        assert_eq!(agreeing_minvalues(&a, &c), 0);
        assert_eq!(b_similarity(&a, &c), 0);
    }

    #[test]
    fn megashingle_pairs_are_lexicographic_and_keyed_by_pair() {
        let ss = [1, 2, 3, 4, 5, 6];
        let m = megashingles(&ss);
        let mut p = 0;
        for i in 0..6 {
            for j in i + 1..6 {
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&ss[i].to_le_bytes());
                bytes[8..].copy_from_slice(&ss[j].to_le_bytes());
                assert_eq!(m[p], xxh3_64_with_seed(&bytes, MEGASHINGLE_SEED + p as u64));
                p += 1;
            }
        }
        // Changing one supershingle changes exactly the 5 megashingles that contain it.
        let mut ss2 = ss;
        ss2[2] = 99;
        let m2 = megashingles(&ss2);
        assert_eq!((0..15).filter(|&p| m[p] != m2[p]).count(), 5);
        // Equal supershingles in two pairs still give different megashingles.
        assert_ne!(megashingles(&[7; 6])[0], megashingles(&[7; 6])[1]);
    }

    #[test]
    fn describe_names_the_parameters() {
        let d = describe(&Profile::HENZINGER);
        assert!(d.contains("k8") && d.contains("wrap=false") && d.contains("m=84"));
        assert_ne!(d, describe(&Profile::FMN));
    }

    /// What [`oph_statistics`] measured.
    struct Stats {
        /// Mean of (agreeing min-values / 84 − J).
        mean_error: f64,
        /// Per J bucket of width 0.05 from 0.30: (lower bound, pairs, observed supershingle
        /// agreement rate, mean J^14).
        buckets: Vec<(f64, usize, f64, f64)>,
        /// Per union-size class, pairs with J >= 0.8 only: (lower size, pairs, mean of
        /// observed − J^14).
        sizes: Vec<(usize, usize, f64)>,
        /// P(>= 2 of 6 supershingles agree): observed, and expected for independent
        /// supershingles each agreeing with probability J^14.
        b_similar: (f64, f64),
    }

    /// Statistics of OPH sketches over `pairs` pairs of shingle-fingerprint sets with known
    /// Jaccard J (a common part plus disjoint parts split at random), union sizes log-uniform
    /// over [8, 3000], J uniform over [0.3, 1].
    fn oph_statistics(pairs: usize, seed: u64) -> Stats {
        const SIZES: [usize; 5] = [8, 30, 100, 300, 1000];
        let mut rng = Rng(seed);
        let mut h = MinHasher::new(Profile::HENZINGER);
        let (mut sa, mut sb) = (BSketch::default(), BSketch::default());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut err = 0.0;
        let mut buckets = vec![(0usize, 0.0f64, 0.0f64); 14];
        let mut sizes = vec![(0usize, 0.0f64); SIZES.len()];
        let (mut bsim_obs, mut bsim_exp) = (0.0, 0.0);
        for _ in 0..pairs {
            let u = (8.0 * (3000.0f64 / 8.0).powf(rng.unit())).round() as usize;
            let jt = 0.3 + 0.7 * rng.unit();
            let i = ((jt * u as f64).round() as usize).clamp(1, u);
            let j = i as f64 / u as f64;
            let only_a = rng.range(0, u - i + 1);
            a.clear();
            b.clear();
            for _ in 0..i {
                let x = rng.next_u64();
                a.push(x);
                b.push(x);
            }
            for _ in 0..only_a {
                a.push(rng.next_u64());
            }
            for _ in only_a..u - i {
                b.push(rng.next_u64());
            }
            h.sketch_shingle_fps(&a, &mut sa);
            h.sketch_shingle_fps(&b, &mut sb);
            err += estimated_jaccard(&sa, &sb) - j;
            let agree = f64::from(b_similarity(&sa, &sb));
            let p = j.powi(14);
            let bucket = &mut buckets[(((j - 0.3) / 0.05) as usize).min(13)];
            bucket.0 += 1;
            bucket.1 += agree / 6.0;
            bucket.2 += p;
            if j >= 0.8 {
                let class = &mut sizes[SIZES.iter().rposition(|&s| u >= s).unwrap_or(0)];
                class.0 += 1;
                class.1 += agree / 6.0 - p;
            }
            bsim_obs += f64::from(u8::from(agree >= 2.0));
            bsim_exp += 1.0 - (1.0 - p).powi(6) - 6.0 * p * (1.0 - p).powi(5);
        }
        Stats {
            mean_error: err / pairs as f64,
            buckets: buckets
                .iter()
                .enumerate()
                .map(|(k, &(n, o, e))| {
                    let n1 = n.max(1) as f64;
                    (0.3 + 0.05 * k as f64, n, o / n1, e / n1)
                })
                .collect(),
            sizes: sizes
                .iter()
                .zip(SIZES)
                .map(|(&(n, d), lo)| (lo, n, d / n.max(1) as f64))
                .collect(),
            b_similar: (bsim_obs / pairs as f64, bsim_exp / pairs as f64),
        }
    }

    fn check_oph_statistics(pairs: usize) {
        let s = oph_statistics(pairs, 2026);
        println!("pairs={pairs} mean(estimate - J)={:+.5}", s.mean_error);
        println!(
            "P(B-similar): observed {:.4}, independent-supershingle model {:.4}",
            s.b_similar.0, s.b_similar.1
        );
        for &(lo, n, o, e) in &s.buckets {
            println!(
                "J in [{lo:.2},{:.2}): pairs={n:5} supershingle agreement {o:.4} vs J^14 {e:.4} ({:+.4})",
                lo + 0.05,
                o - e
            );
        }
        for &(lo, n, d) in &s.sizes {
            println!("union size >= {lo:4}, J >= 0.8: pairs={n:5} mean(observed - J^14) {d:+.4}");
        }
        assert!(s.mean_error.abs() < 0.01, "mean error {}", s.mean_error);
        for &(lo, n, o, e) in &s.buckets {
            assert!(n > 0);
            assert!((o - e).abs() <= 0.03, "bucket {lo}: {o} vs {e}");
        }
        for &(lo, n, d) in &s.sizes {
            assert!(n > 0);
            assert!(d.abs() <= 0.03, "size class {lo}: {d}");
        }
        assert!((s.b_similar.0 - s.b_similar.1).abs() <= 0.02);
    }

    /// 10,000 pairs (well under a second unoptimised).
    #[test]
    fn oph_keeps_the_minhash_statistics() {
        check_oph_statistics(10_000);
    }

    /// 100,000 pairs, for tighter figures: `cargo test -- --ignored --nocapture`.
    #[test]
    #[ignore = "100,000 pairs: a few seconds"]
    fn oph_keeps_the_minhash_statistics_100k() {
        check_oph_statistics(100_000);
    }

    /// End to end, from term sequences: pages of 20..1500 terms drawn from a Zipf vocabulary
    /// (so terms and shingles repeat), and an edited copy (random terms replaced); the exact
    /// Jaccard of their shingle-fingerprint sets against the sketches' estimate and supershingle
    /// agreement. Checks that the rolling fingerprints add no structure OPH would notice.
    #[test]
    fn end_to_end_estimates_follow_shingle_jaccard() {
        let mut rng = Rng(8);
        let vocab: Vec<u64> = (0..2000)
            .map(|i| term_fingerprint(&format!("t{i}")))
            .collect();
        let mut h = MinHasher::new(Profile::HENZINGER);
        let (mut sa, mut sb) = (BSketch::default(), BSketch::default());
        let (pairs, mut err, mut resid, mut high) = (3000, 0.0, 0.0, 0);
        for _ in 0..pairs {
            let n = (20.0 * 75f64.powf(rng.unit())) as usize;
            let a: Vec<u64> = (0..n)
                .map(|_| vocab[((2000f64.powf(rng.unit())) as usize - 1).min(1999)])
                .collect();
            let mut b = a.clone();
            let edits = (n as f64 * 0.001 * 100f64.powf(rng.unit())).round() as usize;
            for _ in 0..edits {
                let at = rng.range(0, n);
                b[at] = rng.next_u64();
            }
            let set = |h: &mut MinHasher, t: &[u64]| {
                let mut v = Vec::new();
                h.for_each_shingle_fp(t, |fp| v.push(fp));
                v.sort_unstable();
                v.dedup();
                v
            };
            let (xa, xb) = (set(&mut h, &a), set(&mut h, &b));
            let common = xa.iter().filter(|x| xb.binary_search(x).is_ok()).count();
            let j = common as f64 / (xa.len() + xb.len() - common) as f64;
            h.sketch(&a, &mut sa);
            h.sketch(&b, &mut sb);
            err += estimated_jaccard(&sa, &sb) - j;
            if j >= 0.7 {
                high += 1;
                resid += f64::from(b_similarity(&sa, &sb)) / 6.0 - j.powi(14);
            }
        }
        let (err, resid) = (err / pairs as f64, resid / f64::from(high));
        println!("end to end: {pairs} pairs, mean(estimate - J) {err:+.4}; {high} pairs with J >= 0.7, mean(supershingle agreement - J^14) {resid:+.4}");
        assert!(err.abs() < 0.01);
        assert!(high > 1000);
        assert!(resid.abs() < 0.02);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        #[test]
        fn properties(words in proptest::collection::vec(0u8..12, 0..20),
                      other in proptest::collection::vec(0u8..12, 0..20),
                      fmn in proptest::bool::ANY) {
            let profile = if fmn { Profile::FMN } else { Profile::HENZINGER };
            let mut h = MinHasher::new(profile);
            let t: Vec<u64> = words.iter().map(|w| term_fingerprint(&format!("w{w}"))).collect();
            let u: Vec<u64> = other.iter().map(|w| term_fingerprint(&format!("w{w}"))).collect();
            let (mut a, mut a2, mut b) = (BSketch::default(), BSketch::default(), BSketch::default());
            h.sketch(&t, &mut a);
            h.sketch(&u, &mut b);
            h.sketch(&t, &mut a2);
            proptest::prop_assert_eq!(a, a2);
            proptest::prop_assert_eq!(b_similarity(&a, &a2), 6);
            proptest::prop_assert_eq!(agreeing_minvalues(&a, &a2), 84);
            let j = estimated_jaccard(&a, &b);
            proptest::prop_assert!((0.0..=1.0).contains(&j));
            proptest::prop_assert!(b_similarity(&a, &b) <= 6);
            proptest::prop_assert_eq!(a.shingles == 0, t.is_empty());
            let _ = megashingles(&a.supershingles);
        }
    }
}
