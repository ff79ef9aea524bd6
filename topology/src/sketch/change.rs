//! Week-to-week change of one URL: Fetterly, Manasse, Najork, *On the evolution of clusters of
//! near-duplicate web pages* (seed 000), §3, figs. 8–10.
//!
//! Two successive successful fetches of a URL are compared by how many of their 84 min-values
//! ("features") agree. Fig. 8's horizontal axis runs from 0 to 85: "A value of 0 indicates that two
//! successive downloads of a URL have no features in common, a value of 84 means that they agree in
//! all features, and a value of 85 means that they are bitwise identical, including the HTML
//! markup." Figs. 10 and 11 group that axis into six buckets:
//!
//! | bucket | paper (fig. 10 text) | here |
//! | --- | --- | --- |
//! | [`ChangeBucket::Complete`] | "complete change (0 common features)" | 0 agreeing min-values |
//! | [`ChangeBucket::Large`] | "large change (1-28 common features)" | 1..=28 |
//! | [`ChangeBucket::Medium`] | "medium change (29-56 common features)" | 29..=56 |
//! | [`ChangeBucket::Small`] | "small change (57-83 common features)" | 57..=83, or 84 with changed text |
//! | [`ChangeBucket::NoTextChange`] | "no text change (84 common features)" | same normalized text, other bytes |
//! | [`ChangeBucket::NoChange`] | "no change (subset 85: 84 common features and a common checksum)" | same content checksum |
//!
//! Parameters: [`MIN_VALUES`] = 84 and the bucket upper bounds [`LARGE_MAX`] = 28,
//! [`MEDIUM_MAX`] = 56, [`SMALL_MAX`] = 83 (the thirds of 84). No hash is computed here: the
//! agreeing count, the content checksum and the normalized-text hash come from elsewhere.
//!
//! One refinement over the paper: it had only the features and the checksum, so "no text change"
//! meant "all 84 features agree". Sampling 84 min-values misses small edits (a pair of Jaccard
//! 0.99 agrees in all 84 with probability 0.99^84 ≈ 0.43), and we also have the normalized-text
//! hash (`text::text_hash`), so [`change_bucket`] calls a fetch "no text change" only when that
//! hash is equal, and 84 agreeing min-values with a changed text is a small change. The paper's
//! rule, by features alone, is [`change_bucket_by_features`].

/// Min-values compared per fetch pair (seed 000 §2: "84 different ... one-to-one functions").
pub const MIN_VALUES: u8 = 84;
/// Largest agreeing count of a "large change" (fig. 10: "1-28 common features").
pub const LARGE_MAX: u8 = 28;
/// Largest agreeing count of a "medium change" (fig. 10: "29-56 common features").
pub const MEDIUM_MAX: u8 = 56;
/// Largest agreeing count of a "small change" (fig. 10: "57-83 common features").
pub const SMALL_MAX: u8 = 83;

/// One of the six change buckets of seed 000 fig. 10 (defined with the event contract).
pub use neardup_schemas::ChangeBucket;

/// The bucket of a fetch pair: same checksum → no change; same normalized text → no text change;
/// otherwise by agreeing min-values (84 with a changed text is small). Counts above 84 count as 84.
pub fn change_bucket(agreeing_minvalues: u8, same_checksum: bool, same_text: bool) -> ChangeBucket {
    if same_checksum {
        ChangeBucket::NoChange
    } else if same_text {
        ChangeBucket::NoTextChange
    } else {
        by_agreement(agreeing_minvalues.min(SMALL_MAX))
    }
}

/// The paper's own rule, by features alone: 84 agreeing is "no text change" whatever the text.
pub fn change_bucket_by_features(agreeing_minvalues: u8, same_checksum: bool) -> ChangeBucket {
    match common_features(agreeing_minvalues, same_checksum) {
        85 => ChangeBucket::NoChange,
        MIN_VALUES => ChangeBucket::NoTextChange,
        n => by_agreement(n),
    }
}

/// Fig. 8's horizontal axis, 0..=85: the agreeing min-values (at most 84), or 85 when the
/// content checksums are equal ("bitwise identical, including the HTML markup").
pub fn common_features(agreeing_minvalues: u8, same_checksum: bool) -> u8 {
    if same_checksum {
        MIN_VALUES + 1
    } else {
        agreeing_minvalues.min(MIN_VALUES)
    }
}

/// Buckets of fig. 10 for 0..=83 agreeing min-values.
fn by_agreement(n: u8) -> ChangeBucket {
    if n == 0 {
        ChangeBucket::Complete
    } else if n <= LARGE_MAX {
        ChangeBucket::Large
    } else if n <= MEDIUM_MAX {
        ChangeBucket::Medium
    } else {
        ChangeBucket::Small
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fig_10_boundaries() {
        let b = |n| change_bucket(n, false, false);
        assert_eq!(b(0), ChangeBucket::Complete);
        assert_eq!(b(1), ChangeBucket::Large);
        assert_eq!(b(28), ChangeBucket::Large);
        assert_eq!(b(29), ChangeBucket::Medium);
        assert_eq!(b(56), ChangeBucket::Medium);
        assert_eq!(b(57), ChangeBucket::Small);
        assert_eq!(b(83), ChangeBucket::Small);
        // All 84 agree but the text hash differs: an edit the sample missed.
        assert_eq!(b(84), ChangeBucket::Small);
        assert_eq!(b(255), ChangeBucket::Small);
        assert_eq!(change_bucket(84, false, true), ChangeBucket::NoTextChange);
        assert_eq!(change_bucket(84, true, true), ChangeBucket::NoChange);
    }

    #[test]
    fn paper_rule_by_features() {
        let b = |n| change_bucket_by_features(n, false);
        assert_eq!(b(0), ChangeBucket::Complete);
        assert_eq!(b(28), ChangeBucket::Large);
        assert_eq!(b(29), ChangeBucket::Medium);
        assert_eq!(b(57), ChangeBucket::Small);
        assert_eq!(b(83), ChangeBucket::Small);
        assert_eq!(b(84), ChangeBucket::NoTextChange);
        assert_eq!(b(200), ChangeBucket::NoTextChange);
        assert_eq!(change_bucket_by_features(84, true), ChangeBucket::NoChange);
        assert_eq!(common_features(84, true), 85);
        assert_eq!(common_features(90, false), 84);
    }

    #[test]
    fn names_and_serde_agree() {
        let names: Vec<_> = ChangeBucket::ALL.iter().map(|b| b.as_str()).collect();
        assert_eq!(
            names,
            [
                "complete",
                "large",
                "medium",
                "small",
                "no_text_change",
                "no_change"
            ]
        );
        for b in ChangeBucket::ALL {
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{}\"", b.as_str()));
            assert_eq!(serde_json::from_str::<ChangeBucket>(&json).unwrap(), b);
            assert_eq!(b.to_string(), b.as_str());
        }
        assert!(ChangeBucket::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    proptest! {
        #[test]
        fn monotone_in_agreeing_minvalues(n in 0u8..=255, m in 0u8..=255, same_text: bool) {
            let (lo, hi) = (n.min(m), n.max(m));
            prop_assert!(change_bucket(lo, false, same_text) <= change_bucket(hi, false, same_text));
            prop_assert!(change_bucket_by_features(lo, false) <= change_bucket_by_features(hi, false));
            // More evidence of sameness never means more change.
            prop_assert!(change_bucket(n, false, false) <= change_bucket(n, false, true));
            prop_assert!(change_bucket(n, false, true) <= change_bucket(n, true, same_text));
            // Both rules agree except at 84 with a changed text.
            if n < MIN_VALUES {
                prop_assert_eq!(change_bucket(n, false, false), change_bucket_by_features(n, false));
            }
        }
    }
}
