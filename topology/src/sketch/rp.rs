//! Random-projection (RP) signature and the Hyperlink Map step: Di Iorio, Diligenti, Gori, Maggini,
//! Pucci, *Detecting near-replicas on the Web by content and hyperlink analysis* (seed 002), §2.1,
//! §2.2 and §3.
//!
//! §2.1: "A random projection from N to K dimensions is obtained by a K × N projection matrix Π
//! whose entries π_ij may be initialized using a uniform random distribution in \[-1,+1\]. The
//! Random Projection (RP) signature R^p of the page p ... is computed from the random projection
//! R̂^p = Π D^p of the bag-of-words representation D^p of p." On K: "no substantial improvements
//! can be achieved by choosing K>5", so K = 5 ([`RpParams::k`]).
//!
//! **The matrix is never stored.** Column t of Π (the term with fingerprint `t`) is generated
//! from the fingerprint: with `base = xxh3_64_with_seed(t.to_le_bytes(), seed)` (seed
//! [`RP_SEED`] by default), π_jt is the j-th output (j = 0..K) of SplitMix64 started at `base`,
//! its top 53 bits scaled to \[-1, +1). The bag of words counts every term occurrence; terms are
//! whatever 64-bit term fingerprints the caller uses (signatures compare only under the same one).
//!
//! **Normalization — a necessary deviation.** The paper makes components lie in \[0,1\] by
//! subtracting the repository-wide minimum R̂^m_j = min_p R̂^p_j and rescaling, a statistic of
//! the whole collection that a stream never has (and that would change every stored signature
//! whenever a new page arrives). The paper does not quantize otherwise: signatures are real
//! vectors in \[0,1\]. Here each page is normalized on its own, with constants fixed in advance:
//!
//! x_j = (Π D)_j / ‖D‖₂,   r_j = clamp(1/2 + x_j / (2√3), 0, 1).
//!
//! Dividing by ‖D‖₂ makes the signature independent of page length (a page repeated twice has
//! the same signature) and ties distances to the cosine similarity the paper uses to judge its
//! results (§3): for any page E\[x_j²\] = 1/3, and for two pages of cosine s, r¹_j − r²_j has
//! standard deviation √(2(1−s))/6. The affine map sends ±3 standard deviations of x_j to \[0,1\]
//! (clamping the rare rest). A page without terms gets the centre, all 1/2. Values are `f32`.
//!
//! **Collision** (§3): "two documents ... were considered to collide with (C,D) tolerance iff
//! ‖X¹−X²‖∞ < C and ‖R¹−R²‖∞ < D" — strict, on the HM signatures X and the RP signatures R
//! ([`collide`]; [`rp_collide`] is RP alone, the paper's "C = 1" curve). The paper gives its C and
//! D only as curves in fig. 1, so the defaults are ours: D = 0.05, with which two pages of cosine
//! 0.995 collide with probability ≈ 0.99, of cosine 0.99 ≈ 0.84, of 0.95 ≈ 0.12 and of 0.8
//! ≈ 0.006 (K = 5, from the standard deviation above); C = 1, i.e. HM not used until it exists.
//!
//! **Hyperlink Map** (§2.2, eq. 1): x^p_j(t+1) = r^p_j + γ · Σ_{q ∈ ch(p)} x^q_j(t) · r^q_j, with
//! x^p(0) = r^p, iterated 3–5 times, then all vectors multiplied by 1/x_M where x_M is the largest
//! component over all pages. [`propagate_step`] computes one page's step and [`hm_scale`] the
//! final scaling; which pages and which x_M (the window's) is the caller's. The paper gives no
//! value for γ, so there is no default here.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the projection columns (the `base` of each term): the bytes `nd:rproj`.
pub const RP_SEED: u64 = u64::from_be_bytes(*b"nd:rproj");
/// The largest K supported (signatures are accumulated in a fixed stack array).
pub const MAX_K: usize = 64;

/// Parameters of the RP signature and of the (C, D) collision test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RpParams {
    /// K, the signature's dimension (§2.1: "no substantial improvements ... choosing K>5"); at
    /// most [`MAX_K`], larger values are capped.
    pub k: usize,
    /// Seed from which the projection columns are derived.
    pub seed: u64,
    /// D: RP signatures collide iff their L∞ distance is below this (strict).
    pub d: f32,
    /// C: HM signatures collide iff their L∞ distance is below this (strict; 1 = HM unused).
    pub c: f32,
}

impl Default for RpParams {
    fn default() -> Self {
        RpParams {
            k: 5,
            seed: RP_SEED,
            d: 0.05,
            c: 1.0,
        }
    }
}

/// Fills `out` (cleared first) with the K-component RP signature of the bag of the given term
/// fingerprints (one per occurrence, any order); `scratch` holds the sorted fingerprints.
pub fn rp_signature(
    term_fps: impl IntoIterator<Item = u64>,
    params: &RpParams,
    scratch: &mut Vec<u64>,
    out: &mut Vec<f32>,
) {
    scratch.clear();
    scratch.extend(term_fps);
    scratch.sort_unstable();
    rp_signature_of_bag(
        scratch
            .chunk_by(|a, b| a == b)
            .map(|run| (run[0], u32::try_from(run.len()).unwrap_or(u32::MAX))),
        params,
        out,
    );
}

/// Fills `out` (cleared first) with the RP signature of a bag given as (distinct term
/// fingerprint, count) pairs, in any order.
///
/// Each entry π_jt is an integer multiple of 2⁻⁵² (`entry_units`), so (Π D)_j is summed
/// exactly, in integers, and rounded to `f64` once: the sum does not depend on the order of
/// the bag, which therefore need not be sorted. (A sum in `f64` would round at every term, and
/// its result would depend on the order.)
pub fn rp_signature_of_bag(
    bag: impl IntoIterator<Item = (u64, u32)>,
    params: &RpParams,
    out: &mut Vec<f32>,
) {
    let k = params.k.min(MAX_K);
    let (acc, norm2) = projection(bag, params.seed, k);
    out.clear();
    if norm2 == 0 {
        out.resize(k, 0.5);
        return;
    }
    // x_j = acc_j / ‖D‖₂; r_j = 1/2 + x_j / (2√3).
    let scale = 1.0 / ((norm2 as f64).sqrt() * 2.0 * 3f64.sqrt());
    let units = 1.0 / (1u64 << 52) as f64;
    out.extend(
        acc[..k]
            .iter()
            .map(|&a| (0.5 + (a as f64 * units) * scale).clamp(0.0, 1.0) as f32),
    );
}

/// (Π D)_j for j < `k` in units of 2⁻⁵², and ‖D‖₂², both exact.
fn projection(
    bag: impl IntoIterator<Item = (u64, u32)>,
    seed: u64,
    k: usize,
) -> ([i128; MAX_K], u128) {
    // |count · entry| < 2^32 · 2^52 = 2^84 per term, so 2^43 terms fit in an i128.
    let mut acc = [0i128; MAX_K];
    let mut norm2 = 0u128;
    for (fp, count) in bag {
        if count == 0 {
            continue;
        }
        norm2 += u128::from(count) * u128::from(count);
        let base = column_base(fp, seed);
        for (j, a) in acc[..k].iter_mut().enumerate() {
            *a += i128::from(count) * i128::from(entry_units(base, j));
        }
    }
    (acc, norm2)
}

/// L∞ distance of two signatures; infinite when their lengths differ (different K).
pub fn linf(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// One page's pair of signatures (§2): RP of its content, HM of its link context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RpHm<'a> {
    /// The RP signature R.
    pub rp: &'a [f32],
    /// The Hyperlink Map signature X.
    pub hm: &'a [f32],
}

/// §3's collision with (C, D) tolerance: ‖X¹−X²‖∞ < C and ‖R¹−R²‖∞ < D.
pub fn collide(a: RpHm<'_>, b: RpHm<'_>, c: f32, d: f32) -> bool {
    linf(a.hm, b.hm) < c && linf(a.rp, b.rp) < d
}

/// Collision on the RP signatures alone: ‖R¹−R²‖∞ < D.
pub fn rp_collide(a: &[f32], b: &[f32], d: f32) -> bool {
    linf(a, b) < d
}

/// One step of eq. (1) for page p: `out` = r^p + γ Σ over children q of x^q(t) ⊙ r^q, where
/// `children` yields (x^q(t), r^q); children whose lengths differ from `own_rp`'s are ignored.
pub fn propagate_step<'a>(
    own_rp: &[f32],
    children: impl IntoIterator<Item = (&'a [f32], &'a [f32])>,
    gamma: f32,
    out: &mut Vec<f32>,
) {
    out.clear();
    out.extend_from_slice(own_rp);
    for (x, r) in children {
        if x.len() != own_rp.len() || r.len() != own_rp.len() {
            continue;
        }
        for ((o, x), r) in out.iter_mut().zip(x).zip(r) {
            *o += gamma * x * r;
        }
    }
}

/// §2.2's final scaling: multiplies an HM signature by 1/x_M (no-op unless x_M > 0).
pub fn hm_scale(x: &mut [f32], x_max: f32) {
    if x_max > 0.0 {
        x.iter_mut().for_each(|v| *v /= x_max);
    }
}

/// Where SplitMix64 starts for the column of term `fp`.
fn column_base(fp: u64, seed: u64) -> u64 {
    xxh3_64_with_seed(&fp.to_le_bytes(), seed)
}

/// π_jt: the j-th SplitMix64 output from `base`, as a uniform value in \[-1, +1).
#[cfg(test)]
fn entry(base: u64, j: usize) -> f64 {
    entry_units(base, j) as f64 / (1u64 << 52) as f64
}

/// π_jt in units of 2⁻⁵², an integer in \[-2⁵², 2⁵²): the top 53 bits of the j-th SplitMix64
/// output from `base`, less 2⁵².
fn entry_units(base: u64, j: usize) -> i64 {
    let mut z = base.wrapping_add((j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as i64 - (1 << 52)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn term_fps(text: &str) -> Vec<u64> {
        let mut v = vec![];
        crate::text::for_each_term(text, &mut String::new(), |t| {
            v.push(xxhash_rust::xxh3::xxh3_64(t.as_bytes()))
        });
        v
    }

    fn sig(text: &str) -> Vec<f32> {
        let mut out = vec![];
        rp_signature(term_fps(text), &RpParams::default(), &mut vec![], &mut out);
        out
    }

    #[test]
    fn golden_signature() {
        assert_eq!(RP_SEED, 0x6e64_3a72_7072_6f6a);
        assert_eq!(sig("Hello hello world"), GOLDEN_HELLO);
        // SplitMix64 from 0: its first output is the published 0xE220A8397B1DCDAF.
        assert_eq!(
            entry(0, 0),
            (0xE220_A839_7B1D_CDAFu64 >> 11) as f64 * 2f64.powi(-52) - 1.0
        );
    }
    const GOLDEN_HELLO: [f32; 5] = [
        0.400_902_33,
        0.257_315_22,
        0.561_533_1,
        0.280_776,
        0.281_571_1,
    ];

    #[test]
    fn by_hand_for_one_term() {
        // One term: x_j = π_j1, r_j = 1/2 + π_j1 / (2√3).
        let p = RpParams {
            k: 3,
            ..RpParams::default()
        };
        let mut out = vec![];
        rp_signature_of_bag([(42, 7)], &p, &mut out);
        let base = column_base(42, RP_SEED);
        for (j, r) in out.iter().enumerate() {
            let want = (0.5 + entry(base, j) / (2.0 * 3f64.sqrt())) as f32;
            assert_eq!(*r, want);
        }
        rp_signature_of_bag([], &p, &mut out);
        assert_eq!(out, [0.5; 3]);
        rp_signature_of_bag([(1, 1)], &RpParams { k: 1000, ..p }, &mut out);
        assert_eq!(out.len(), MAX_K);
    }

    #[test]
    fn entries_are_uniform_in_minus_one_one() {
        let n = 20_000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for fp in 0..n {
            let e = entry(column_base(fp, RP_SEED), (fp % 5) as usize);
            assert!((-1.0..1.0).contains(&e));
            sum += e;
            sq += e * e;
        }
        let (mean, var) = (sum / n as f64, sq / n as f64);
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0 / 3.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn near_replicas_collide_and_others_do_not() {
        let words: Vec<String> = (0..3000).map(|i| format!("w{}", i * 7919 % 1000)).collect();
        let page = words.join(" ");
        let edited = words[..2990].join(" ") + " something else entirely here";
        let other: String = (0..3000).map(|i| format!("v{} ", i % 700)).collect();
        let d = RpParams::default().d;
        assert!(rp_collide(&sig(&page), &sig(&edited), d));
        assert!(!rp_collide(&sig(&page), &sig(&other), d));
        let hm = [0.1f32, 0.2, 0.3, 0.4, 0.5];
        let (a, b) = (sig(&page), sig(&edited));
        let pa = RpHm { rp: &a, hm: &hm };
        let pb = RpHm { rp: &b, hm: &hm };
        assert!(collide(pa, pb, 0.01, d));
        let hm2 = [0.1f32, 0.2, 0.3, 0.4, 0.52];
        assert!(!collide(pa, RpHm { rp: &b, hm: &hm2 }, 0.01, d));
        assert!(!collide(pa, pb, 0.0, d)); // strict
    }

    #[test]
    fn hyperlink_map_step_is_equation_1() {
        let r_p = [0.5f32, 0.2];
        let (x1, r1) = ([0.4f32, 0.6], [0.5f32, 0.5]);
        let (x2, r2) = ([1.0f32, 0.0], [0.2f32, 0.9]);
        let bad = [1.0f32];
        let mut out = vec![];
        propagate_step(
            &r_p,
            [(&x1[..], &r1[..]), (&x2[..], &r2[..]), (&bad[..], &r1[..])],
            0.5,
            &mut out,
        );
        let want = [0.5 + 0.5 * (0.4 * 0.5 + 1.0 * 0.2), 0.2 + 0.5 * (0.6 * 0.5)];
        assert!(linf(&out, &want) < 1e-6, "{out:?}");
        propagate_step(&r_p, [], 0.5, &mut out);
        assert_eq!(out, r_p); // x(0) = r with no children
        hm_scale(&mut out, 0.5);
        assert_eq!(out, [1.0, 0.4]);
        assert_eq!(linf(&[0.0], &[0.0, 1.0]), f32::INFINITY);
    }

    proptest! {
        /// The projection of a bag is exact, so it does not depend on the bag's order (a sum
        /// in `f64` would), with counts up to the largest.
        #[test]
        fn a_bag_projects_the_same_in_any_order(
            bag in prop::collection::vec((any::<u64>(), prop_oneof![1u32..4, Just(u32::MAX), any::<u32>()]), 0..300),
            turn in 0usize..300,
        ) {
            let k = 5;
            let sum = projection(bag.iter().copied(), RP_SEED, k);
            prop_assert_eq!(projection(bag.iter().rev().copied(), RP_SEED, k), sum);
            let mut turned = bag.clone();
            turned.rotate_left(turn.min(bag.len()));
            prop_assert_eq!(projection(turned.iter().copied(), RP_SEED, k), sum);
            // Each term adds count · π_jt.
            let mut by_term = [0i128; MAX_K];
            for &(fp, count) in &bag {
                let (one, _) = projection([(fp, count)], RP_SEED, k);
                for j in 0..k {
                    by_term[j] += one[j];
                }
            }
            prop_assert_eq!(by_term, sum.0);
            let (mut a, mut b) = (vec![], vec![]);
            rp_signature_of_bag(bag.iter().copied(), &RpParams::default(), &mut a);
            rp_signature_of_bag(turned.iter().copied(), &RpParams::default(), &mut b);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn signature_invariants(fps in prop::collection::vec(any::<u64>(), 0..200), k in 0usize..12, seed: u64) {
            let p = RpParams { k, seed, ..RpParams::default() };
            let (mut a, mut b, mut s) = (vec![], vec![], vec![]);
            rp_signature(fps.iter().copied(), &p, &mut s, &mut a);
            prop_assert_eq!(a.len(), k);
            prop_assert!(a.iter().all(|v| (0.0..=1.0).contains(v)));
            // Order does not matter, nor does repeating the whole page.
            rp_signature(fps.iter().rev().copied(), &p, &mut s, &mut b);
            prop_assert_eq!(&a, &b);
            rp_signature(fps.iter().chain(&fps).copied(), &p, &mut s, &mut b);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(linf(&a, &b), 0.0);
            prop_assert!(rp_collide(&a, &b, f32::MIN_POSITIVE));
        }

        #[test]
        fn any_text_signs(s in any::<String>()) {
            let v = sig(&s);
            prop_assert_eq!(v.len(), 5);
            prop_assert!(v.iter().all(|x| x.is_finite()));
        }
    }
}
