use super::*;
use crate::sketch::minhash::{fmix64, PER_SUPERSHINGLE, SUPERSHINGLES};

#[test]
fn url_names_keep_the_query_and_treat_directories_as_wildcards() {
    assert_eq!(
        url_name("http://a.example/docs/x.html"),
        url_name("https://b.example/m/x.html#top")
    );
    assert_eq!(
        url_name("http://a.example/item.php?id=1"),
        url_name("https://b.example/shop/item.php?id=1#reviews")
    );
    assert_ne!(
        url_name("http://a.example/item.php?id=1"),
        url_name("http://a.example/item.php?id=2")
    );
    assert_ne!(
        url_name("http://a.example/docs/x.html?sid=1"),
        url_name("http://a.example/docs/x.html")
    );
    assert_ne!(url_name("http://a.example/?page=2"), 0);
    assert_eq!(
        url_name("http://a.example/docs/#x?y"),
        0,
        "a ? in the fragment"
    );
    assert_ne!(
        url_name("http://a.example/docs/x.html"),
        url_name("http://a.example/docs/y.html")
    );
    assert_eq!(url_name("http://a.example/docs/"), 0);
    assert_eq!(url_name("http://a.example"), 0);
    assert_eq!(url_name("http://a.example/docs/index.html"), 0);
    assert!(same_name(0, url_name("http://a.example/x.html")));
}

proptest::proptest! {
    /// The byte scans find the name the string splits find.
    #[test]
    fn url_name_matches_the_split_form(url in "(https?://)?[a-z./?#:]{0,20}(index\\.html)?[a-z=?#]{0,6}") {
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let before_fragment = rest.split('#').next().unwrap_or("");
        let (path, query) = before_fragment.split_once('?').unwrap_or((before_fragment, ""));
        let last = match path.split_once('/') {
            Some((_, p)) => p.rsplit('/').next().unwrap_or(""),
            None => "",
        };
        let want = if query.is_empty() && (last.is_empty() || last.starts_with("index.")) {
            0
        } else {
            let mut h = xxhash_rust::xxh3::xxh3_64(last.as_bytes());
            if !query.is_empty() {
                h ^= xxhash_rust::xxh3::xxh3_64(query.as_bytes()).rotate_left(17);
            }
            (h as u32).max(1)
        };
        proptest::prop_assert_eq!(url_name(&url), want);
    }
}

/// Golden points of the band S-curve, worked out by hand: at J = 0.6 a byte agrees with
/// probability 0.6 + 0.4/256, a band with its third power (0.2177), and one of 14 bands with
/// 1 − (1 − 0.2177)^14.
#[test]
fn the_band_curve_is_the_b_bit_s_curve() {
    let byte: f64 = 0.6 + 0.4 / 256.0;
    let expected = 1.0 - (1.0 - byte.powi(3)).powi(14);
    assert!((band_candidate_probability(0.6) - expected).abs() < 1e-12);
    assert!((expected - 0.9678).abs() < 1e-3, "{expected}");
    assert_eq!(band_candidate_probability(1.0), 1.0);
    // Unrelated pages still agree on a byte in 256, on a whole band one time in 2^24: on one
    // of the 14 about once in 1.2 million pairs.
    let unrelated = band_candidate_probability(0.0);
    assert!(unrelated > 8e-7 && unrelated < 9e-7, "{unrelated}");
    let mut last = 0.0;
    for i in 0..=100 {
        let p = band_candidate_probability(f64::from(i) / 100.0);
        assert!(p >= last, "the curve falls at J = {i}%");
        last = p;
    }
}

/// The bands do not overlap, each lies inside one supershingle, and each supershingle holds
/// at least two: a B-similar pair (two supershingles whose 14 min-values all agree) shares at
/// least four bands, so the band tables find every pair FMN's megashingle tables would.
#[test]
fn every_supershingle_holds_two_whole_bands() {
    let mut rows = [0u8; MINVALUES];
    let mut per_supershingle = [0; SUPERSHINGLES];
    for &start in &BAND_STARTS {
        let s = start / PER_SUPERSHINGLE;
        assert_eq!(
            (start + BAND_ROWS - 1) / PER_SUPERSHINGLE,
            s,
            "band at {start}"
        );
        per_supershingle[s] += 1;
        for r in &mut rows[start..start + BAND_ROWS] {
            *r += 1;
        }
    }
    assert!(rows.iter().all(|&r| r <= 1), "bands overlap");
    assert_eq!(per_supershingle, [3, 3, 2, 2, 2, 2]);
}

#[test]
fn the_description_names_each_policys_thresholds() {
    let cfg = NearConfig::default();
    let d = cfg.describe();
    assert!(d.starts_with("pair policy neardup"), "{d}");
    for part in [
        ">= 0.7",
        "different names: 0.9",
        "on one site: 0.98",
        ">= 12 min-values",
        ">= 330 of 384",
        "14 bands of 3",
        "0.6: 0.968",
        "0.7: 0.997",
    ] {
        assert!(d.contains(part), "{part:?} missing from {d}");
    }
    let d = NearConfig {
        titles: false,
        min_jaccard: 0.6,
        ..cfg.clone()
    }
    .describe();
    assert!(
        d.contains(">= 0.6 ") && d.contains("titles not compared"),
        "{d}"
    );
    let of = |policy| {
        NearConfig {
            policy,
            ..cfg.clone()
        }
        .describe()
    };
    let c = of(Policy::AlgC);
    assert!(
        c.contains(">= 372 of 384")
            && c.contains("12 simhash pieces of 32 bits")
            && c.contains("at most 11 bits")
            && !c.contains("bands"),
        "{c}"
    );
    let b = of(Policy::AlgB);
    assert!(
        b.contains(">= 2 of 6 supershingles") && b.contains("14 bands"),
        "{b}"
    );
    let comb = of(Policy::Combined);
    assert!(
        comb.contains(">= 355 of 384") && comb.contains("14 bands"),
        "{comb}"
    );
}

#[test]
fn bbit_estimate_corrects_random_byte_matches() {
    assert_eq!(bbit_estimate(84, 84), 1.0);
    // A random pair agrees on 84/256 of positions in expectation: estimate 0.
    assert!(bbit_estimate(0, 84) == 0.0);
    assert!((bbit_estimate(42, 84) - (0.5 - 1.0 / 256.0) / (1.0 - 1.0 / 256.0)).abs() < 1e-12);
}

/// `touch_records` reads fields less than 64 bytes apart from the first byte of a record
/// that verification reads to the last (none of them crossing a line: records start at a
/// multiple of 8 and the fields are aligned), so it loads every line verification reads
/// wherever the record starts.
#[test]
fn touched_fields_cover_every_cache_line_verification_reads() {
    use std::mem::offset_of;
    let sk = offset_of!(Page, sketch);
    let read = [
        (sk + offset_of!(Stored, mins), MINVALUES),
        (sk + offset_of!(Stored, ss), 2 * SUPERSHINGLES),
        (sk + offset_of!(Stored, simhash), 48),
        (sk + offset_of!(Stored, checksum), 8),
        (sk + offset_of!(Stored, text), 4),
        (sk + offset_of!(Stored, title), 4),
        (offset_of!(Page, mask), 12),
        (offset_of!(Page, name), 4),
    ];
    let start = read.iter().map(|r| r.0).min().unwrap();
    let end = read.iter().map(|r| r.0 + r.1).max().unwrap();
    let simhash = sk + offset_of!(Stored, simhash);
    let mins = sk + offset_of!(Stored, mins);
    let mut touched = [
        simhash,
        simhash + 44,
        mins,
        mins + MINVALUES / 2,
        mins + MINVALUES - 1,
        offset_of!(Page, mask),
        offset_of!(Page, name),
    ];
    touched.sort();
    assert_eq!(std::mem::size_of::<Page>() % 8, 0);
    assert!(touched[0] <= start, "{touched:?} from {start}");
    assert_eq!(touched[6] / 8, (end - 1) / 8, "{touched:?} to {end}");
    assert!(touched.windows(2).all(|w| w[1] - w[0] < 64), "{touched:?}");
}

/// A site is held while the window holds one of its pages; its number then goes to the
/// next new site, and pages keep telling their sites apart.
#[test]
fn sites_leave_with_their_last_page_and_their_numbers_are_reused() {
    let cfg = NearConfig {
        window_ms: 1_000,
        ..NearConfig::default()
    };
    let mut index = NearIndex::new(cfg);
    let mut out = Emitter::new();
    let (a, b) = differing_in_first(0);
    let mut fetch = |index: &mut NearIndex, url: &str, sketch: Option<&Sketch>, at: i64| {
        index.advance(at, None, &mut out);
        let f = Fetch {
            url,
            sketch,
            fetched_at_ms: at,
            crawl_id: None,
        };
        index.observe(&f, &mut out);
    };
    fetch(&mut index, "http://a.example/x", Some(&a), 0);
    fetch(&mut index, "http://A.EXAMPLE/y", Some(&b), 0);
    fetch(&mut index, "http://b.example/x", Some(&a), 0);
    assert_eq!(index.sites.len(), 2);
    let number = |index: &NearIndex, url: &str| {
        let slot = index.slot_of(url).expect("a held URL");
        index.slot_sites[slot as usize]
    };
    let site_a = number(&index, "http://a.example/x");
    assert_eq!(number(&index, "http://A.EXAMPLE/y"), site_a);
    fetch(&mut index, "http://a.example/x", None, 1);
    assert_eq!(index.sites.len(), 2);
    fetch(&mut index, "http://A.EXAMPLE/y", None, 1);
    assert_eq!(index.sites.len(), 1);
    // The freed number goes to the next new site, which is not b.example's.
    fetch(&mut index, "http://c.example/x", Some(&b), 2);
    assert_eq!(number(&index, "http://c.example/x"), site_a);
    assert_ne!(number(&index, "http://b.example/x"), site_a);
    assert_eq!(index.live_pairs().len(), 1);
    assert!(!index.pairs.values().next().unwrap().same_site);
    // Out of the window by event time: no site is held.
    fetch(&mut index, "http://d.example/x", None, 5_000);
    assert_eq!(index.sites.len(), 0);
    assert_eq!(index.stats().pages, 0);
}

/// Pages refetched again and again leave a stale expiry entry per fetch; the heap drops them
/// when a quarter of it is stale instead of growing, and the pages still leave on time.
#[test]
fn the_expiry_heap_drops_stale_entries_of_refetched_pages() {
    let cfg = NearConfig {
        window_ms: 1_000_000,
        ..NearConfig::default()
    };
    let mut index = NearIndex::new(cfg);
    let mut out = Emitter::new();
    let pages: Vec<(String, Sketch)> = (0..7)
        .map(|i| {
            (
                format!("http://s{i}.example/p"),
                differing_in_first(i * 12).1,
            )
        })
        .collect();
    for t in 0..10_000i64 {
        let (url, sketch) = &pages[t as usize % pages.len()];
        index.advance(t, None, &mut out);
        let fetch = Fetch {
            url,
            sketch: Some(sketch),
            fetched_at_ms: t,
            crawl_id: None,
        };
        index.observe(&fetch, &mut out);
    }
    let heap = &index.window.expiry;
    assert!(heap.capacity() <= 64, "{} entries held", heap.capacity());
    assert!(heap.len() >= 7);
    // The newest fetch of each page is still current: each leaves a window after it.
    index.advance(9_993 + 1_000_000, None, &mut out);
    assert_eq!(index.stats().pages, 7);
    index.advance(9_994 + 1_000_000, None, &mut out);
    assert_eq!(index.stats().pages, 6);
    index.advance(10_000 + 1_000_000, None, &mut out);
    assert_eq!(index.stats().pages, 0);
    assert_eq!(index.stats().evicted_by_time, 7);
}

#[test]
fn a_pair_entry_takes_16_bytes_and_reports_the_comparisons_jaccard() {
    assert_eq!(std::mem::size_of::<((u32, u32), PairInfo)>(), 16);
    for agreeing in 0..=MINVALUES as u32 {
        let info = PairInfo {
            level: PairLevel::VerySimilar,
            b: 0,
            c: 0,
            agreeing: agreeing as u8,
            same_site: false,
        };
        let estimate = bbit_estimate(agreeing, MINVALUES as u32);
        assert_eq!(info.jaccard(), (estimate * 1e4).round() / 1e4, "{agreeing}");
    }
}

#[test]
fn a_page_record_takes_192_bytes_and_its_mask_keeps_bits_and_flag() {
    assert_eq!(std::mem::size_of::<Option<Page>>(), 192);
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    for _ in 0..1000 {
        let x = next();
        let bits = (u128::from(x) << 64 | u128::from(x.rotate_left(29))) & ((1 << MINVALUES) - 1);
        for mature in [false, true] {
            let m = Mask::new(bits, mature);
            assert_eq!((m.bits(), m.mature()), (bits, mature));
        }
    }
}

/// A xorshift generator from `seed` (not 0), for tests that want many varied values.
fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A sketch of random-looking fields drawn from `seed`.
fn sketch_of_seed(seed: u64) -> Sketch {
    let word = |i: u64| fmix64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i);
    Sketch {
        mins: std::array::from_fn(|i| word(i as u64) as u8),
        ss: std::array::from_fn(|i| word(100 + i as u64) as u16),
        simhash: std::array::from_fn(|i| word(200 + i as u64)),
        checksum: word(300),
        text: word(301),
        title: word(302) as u32,
        has_terms: true,
    }
}

/// A record keeps a sketch whole but for the text hash, of which it keeps 31 bits, and
/// compares as the sketch does: the same comparison of every pair, and equal texts only where
/// every min-value agrees too.
#[test]
fn a_stored_sketch_keeps_the_sketch_and_compares_as_it_does() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for i in 0..500 {
        let mut a = sketch_of_seed(next());
        let mut b = a.clone();
        // Some positions, simhash bits and supershingles changed; some pairs with equal texts.
        for _ in 0..(next() % 40) {
            b.mins[(next() % MINVALUES as u64) as usize] = next() as u8;
        }
        b.simhash[(next() % 6) as usize] ^= next();
        if next() % 3 == 0 {
            b.ss[(next() % SUPERSHINGLES as u64) as usize] ^= 1;
        }
        b.text = if i % 4 == 0 { a.text } else { next() };
        b.checksum = if i % 10 == 0 { a.checksum } else { next() };
        (a.has_terms, b.has_terms) = (i % 7 != 0, i % 11 != 0);
        a.title = next() as u32;
        for s in [&a, &b] {
            let back = Stored::new(s).sketch();
            let mut want = s.clone();
            want.text &= 0x7fff_ffff;
            assert_eq!(back, want);
        }
        let (ma, mb) = (u128::from(next()), u128::from(next()) << 20);
        for one_site in [false, true] {
            let whole = compare_sited(&a, ma, &b, mb, one_site);
            let kept = compare_sited(&Stored::new(&a), ma, &Stored::new(&b), mb, one_site);
            assert_eq!(kept, whole, "{i}");
            assert_eq!(whole.same_text, a.text == b.text && a.mins == b.mins);
        }
    }
    // Texts that agree in the 31 bits kept and no more count as equal only with every
    // min-value equal.
    let a = sketch_of_seed(1);
    let mut b = sketch_of_seed(2);
    b.text = a.text ^ 1 << 40;
    let (sa, sb) = (Stored::new(&a), Stored::new(&b));
    assert!(!compare_sited(&sa, 0, &sb, 0, false).same_text);
    b.mins = a.mins;
    assert!(compare_sited(&sa, 0, &Stored::new(&b), 0, false).same_text);
}

/// The memory accounting adds up, and each part grows with what it holds: two copies on
/// two sites fill two records, their keys and one live pair.
#[test]
fn memory_parts_add_up_to_the_memory_figure() {
    let mut index = NearIndex::new(NearConfig::default());
    let empty = index.memory_parts();
    let (a, mut b) = differing_in_first(0);
    b.checksum = a.checksum;
    b.text = a.text;
    let urls = ["http://a.example/doc/x.html", "http://b.example/doc/x.html"];
    for (url, sketch) in urls.iter().zip([&a, &b]) {
        index.observe(
            &Fetch {
                url,
                sketch: Some(sketch),
                fetched_at_ms: 0,
                crawl_id: None,
            },
            &mut Emitter::new(),
        );
    }
    assert_eq!(index.stats().live_pairs, 1);
    let parts = index.memory_parts();
    let part = |name: &str| parts.iter().find(|p| p.0 == name).unwrap().1;
    let (index_bytes, url_bytes) = index.memory_bytes();
    assert_eq!(
        index_bytes + url_bytes,
        parts.iter().map(|p| p.1).sum::<usize>()
    );
    assert_eq!(url_bytes, part(URL_PART));
    assert!(part("page records") >= 2 * std::mem::size_of::<Option<Page>>());
    assert!(url_bytes >= urls.iter().map(|u| u.len()).sum::<usize>());
    let parts_growing = [
        "key table entries",
        "key table lists",
        "live pairs",
        "pair partners",
        "slot sites",
    ];
    for name in parts_growing {
        let before = empty.iter().find(|p| p.0 == name).unwrap().1;
        assert!(part(name) > before, "{name}: {before} -> {}", part(name));
    }
}

/// Two sketches of different text that differ in their first `n` min-values only (equal
/// simhashes and supershingle fields).
fn differing_in_first(n: usize) -> (Sketch, Sketch) {
    let mut a = Sketch {
        mins: [0; MINVALUES],
        ss: [0; 6],
        simhash: [0; 6],
        checksum: 1,
        text: 1,
        title: 0,
        has_terms: true,
    };
    for (i, m) in a.mins.iter_mut().enumerate() {
        *m = i as u8;
    }
    let mut b = a.clone();
    b.checksum = 2;
    b.text = 2;
    for m in b.mins.iter_mut().take(n) {
        *m = m.wrapping_add(100);
    }
    (a, b)
}

/// A pair agreeing on 80 of 84 min-values (Jaccard ≈ 0.95) is a pair under the same name
/// (0.7) and across sites under different names (0.9), not on one site under different
/// names (0.98).
#[test]
fn renamed_pages_of_one_site_need_more_agreement() {
    let (a, b) = differing_in_first(4);
    let c = compare(&a, 0, &b, 0);
    assert!((0.94..0.96).contains(&c.discounted_jaccard), "{c:?}");
    let cfg = NearConfig::default();
    let level = Some(PairLevel::VerySimilar);
    assert_eq!(cfg.verdict(&a, &b, &c, Naming::SameName), level);
    assert_eq!(cfg.verdict(&a, &b, &c, Naming::Renamed), level);
    assert_eq!(cfg.verdict(&a, &b, &c, Naming::RenamedOnSite), None);
    let (x, y) = (
        url_name("http://a.example/x.html"),
        url_name("http://a.example/y.html"),
    );
    assert_eq!(Naming::of((x, y), (1, 1), (0, 0)), Naming::RenamedOnSite);
    assert_eq!(Naming::of((x, y), (1, 2), (0, 0)), Naming::Renamed);
    assert_eq!(Naming::of((x, x), (1, 1), (0, 0)), Naming::SameName);
    assert_eq!(
        Naming::of((x, 0), (1, 1), (0, 0)),
        Naming::SameName,
        "an index page matches any name"
    );
}

/// Renamed pages whose titles differ as well need near-identical text (0.98) on two sites
/// too, and so do pages of one site under one name with different titles; equal titles, a
/// missing title or one name on two sites leave the thresholds as they were.
#[test]
fn renamed_and_retitled_pages_need_near_identical_text() {
    let (x, y) = (
        url_name("http://a.example/x.html"),
        url_name("http://b.example/y.html"),
    );
    let retitled = |same_name, one_site| Naming::Retitled {
        same_name,
        one_site,
    };
    assert_eq!(Naming::of((x, y), (1, 2), (5, 6)), retitled(false, false));
    assert_eq!(Naming::of((x, y), (1, 1), (5, 6)), retitled(false, true));
    assert_eq!(Naming::of((x, y), (1, 2), (5, 5)), Naming::Renamed);
    assert_eq!(Naming::of((x, y), (1, 2), (5, 0)), Naming::Renamed);
    assert_eq!(Naming::of((x, y), (1, 1), (0, 6)), Naming::RenamedOnSite);
    assert_eq!(Naming::of((x, x), (1, 2), (5, 6)), Naming::SameName);
    assert_eq!(Naming::of((0, 0), (1, 2), (5, 6)), Naming::SameName);
    assert_eq!(Naming::of((x, x), (1, 1), (5, 6)), retitled(true, true));
    assert_eq!(Naming::of((0, 0), (1, 1), (5, 6)), retitled(true, true));
    assert_eq!(Naming::of((0, 0), (1, 1), (5, 5)), Naming::SameName);
    let cfg = NearConfig::default();
    // Jaccard ≈ 0.95: short of 0.98.
    let (a, b) = differing_in_first(4);
    let c = compare(&a, 0, &b, 0);
    assert_eq!(cfg.verdict(&a, &b, &c, retitled(false, false)), None);
    assert!(cfg.verdict(&a, &b, &c, Naming::Renamed).is_some());
    // One min-value of 84 differs: Jaccard ≈ 0.988.
    let (a, b) = differing_in_first(1);
    let c = compare(&a, 0, &b, 0);
    assert!(c.discounted_jaccard >= 0.98, "{c:?}");
    assert!(cfg.verdict(&a, &b, &c, retitled(false, false)).is_some());
    // A lower retitled threshold does not undercut the names' own: renamed on one site
    // still needs 0.98, and a Jaccard of 0.95 passes only where the names allow it.
    let low = NearConfig {
        min_jaccard_retitled: 0.5,
        ..NearConfig::default()
    };
    let (a, b) = differing_in_first(4);
    let c = compare(&a, 0, &b, 0);
    assert_eq!(low.verdict(&a, &b, &c, retitled(false, true)), None);
    assert!(low.verdict(&a, &b, &c, retitled(false, false)).is_some());
    assert!(low.verdict(&a, &b, &c, retitled(true, true)).is_some());
    // A higher one holds every retitled pair to it.
    let high = NearConfig {
        min_jaccard_retitled: 0.99,
        ..NearConfig::default()
    };
    let (a, b) = differing_in_first(1);
    let c = compare(&a, 0, &b, 0);
    assert_eq!(high.verdict(&a, &b, &c, retitled(true, true)), None);
    assert!(high.verdict(&a, &b, &c, Naming::SameName).is_some());
}

/// 40 pages of one site share a template on min-values 0..51, which hold 10 whole bands (those
/// starting at 0, 3, 6, 14, 17, 20, 28, 31, 42 and 45), and differ in the rest. A page
/// that copies one of them under another directory finds its copy through the content
/// bands, and the template bands, shared with every page of the site, are not enumerated:
/// the template siblings are not even verified. Alg. B, as published, still takes every
/// page sharing a band as a candidate.
#[test]
fn template_bands_give_no_candidates() {
    let (skipped, verified) = copy_of_a_template_page(Policy::Neardup);
    assert_eq!(skipped, 10);
    let template_bands = BAND_STARTS
        .iter()
        .filter(|&&s| s + BAND_ROWS <= TEMPLATE_POSITIONS)
        .count();
    assert_eq!(skipped, template_bands as u64);
    assert_eq!(verified, 1, "only the copy is verified");
    let (skipped, verified) = copy_of_a_template_page(Policy::AlgB);
    assert_eq!(skipped, 0);
    assert_eq!(verified, 40, "every page of the site");
}

const TEMPLATE_POSITIONS: usize = 51;

/// Files 40 template pages of one site and then a copy of one of them; returns the template
/// bands skipped and the candidates verified for the copy.
fn copy_of_a_template_page(policy: Policy) -> (u64, u64) {
    let page = |i: u64| {
        let mut s = Sketch {
            mins: [0; MINVALUES],
            ss: [0; 6],
            simhash: [fmix64(i), fmix64(i + 1), 0, 0, 0, 0],
            checksum: i,
            text: i,
            title: 0,
            has_terms: true,
        };
        for (p, m) in s.mins.iter_mut().enumerate() {
            *m = if p < TEMPLATE_POSITIONS {
                p as u8
            } else {
                (fmix64(i * 1000 + p as u64) >> 8) as u8
            };
        }
        s
    };
    let mut index = NearIndex::new(NearConfig {
        policy,
        ..NearConfig::default()
    });
    let mut out = Emitter::new();
    for i in 0..40u64 {
        index.observe(
            &Fetch {
                url: &format!("http://site.example/a/page{i}.html"),
                sketch: Some(&page(i)),
                fetched_at_ms: i as i64,
                crawl_id: None,
            },
            &mut out,
        );
    }
    if policy == Policy::Neardup {
        assert_eq!(out.drain().count(), 0, "template siblings are no pairs");
    }
    out.drain().for_each(drop);
    let before = index.stats();
    let mut copy = page(7);
    copy.checksum = 1_000;
    copy.mins[MINVALUES - 1] ^= 1;
    index.observe(
        &Fetch {
            url: "http://site.example/b/page7.html",
            sketch: Some(&copy),
            fetched_at_ms: 40,
            crawl_id: None,
        },
        &mut out,
    );
    let after = index.stats();
    if policy == Policy::Neardup {
        let events: Vec<_> = out.drain().collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(after.detected - before.detected, 1);
    }
    (
        after.template_bands_skipped - before.template_bands_skipped,
        after.verified - before.verified,
    )
}

/// Pages of one template whose few own positions all agree are a pair on fewer than
/// `min_support` positions, down to half of it; one disagreement, or fewer positions, is not.
#[test]
fn few_undiscounted_positions_must_all_agree() {
    let (a, b) = differing_in_first(2);
    let cfg = NearConfig::default();
    let keep_first = |n: usize| ((1u128 << MINVALUES) - 1) & !((1u128 << n) - 1);
    let judge = |kept: usize| {
        let c = compare(&a, keep_first(kept), &b, 0);
        (c.support, cfg.verdict(&a, &b, &c, Naming::SameName))
    };
    let level = Some(PairLevel::VerySimilar);
    // Positions 2.. agree; keeping positions 2..2+n means n unanimous positions.
    let unanimous = |n: usize| compare(&a, keep_first(2 + n) | 0b11, &b, 0);
    let agreeing_only = |n: usize| {
        let c = unanimous(n);
        (
            c.support,
            c.kept_agreeing,
            cfg.verdict(&a, &b, &c, Naming::SameName),
        )
    };
    assert_eq!(agreeing_only(8), (8, 8, level));
    assert_eq!(agreeing_only(6), (6, 6, level));
    assert_eq!(agreeing_only(5), (5, 5, None), "under half of min_support");
    // 8 positions with the two differing ones among them: not unanimous.
    assert_eq!(judge(8), (8, None));
    assert!(cfg.min_support == 12, "the cases above assume the default");
    // A pair held to a stricter threshold needs min_support positions: under other names,
    // or with other titles, 11 unanimous positions are not enough, 12 are.
    let stricter = |n: usize, naming: Naming| cfg.verdict(&a, &b, &unanimous(n), naming);
    let retitled = Naming::Retitled {
        same_name: true,
        one_site: false,
    };
    for naming in [Naming::Renamed, Naming::RenamedOnSite, retitled] {
        assert_eq!(stricter(11, naming), None, "{naming:?}");
        assert_eq!(stricter(12, naming), level, "{naming:?}");
    }
    assert_eq!(stricter(11, Naming::SameName), level);
}

/// A band bucket over `max_bucket` pages gives its newest pages as candidates: a group of
/// near-identical pages larger than the cap still pairs each page with the ones before it.
#[test]
fn hot_band_buckets_give_their_newest_pages() {
    let cfg = NearConfig {
        max_bucket: 4,
        ..NearConfig::default()
    };
    let mut index = NearIndex::new(cfg);
    let mut out = Emitter::new();
    let (base, _) = differing_in_first(0);
    let mut partners = Vec::new();
    let site = |i: u64| format!("http://site{i}.example/");
    for i in 0..6u64 {
        let mut s = base.clone();
        (s.checksum, s.text) = (100 + i, 100 + i);
        index.observe(
            &Fetch {
                url: &site(i),
                sketch: Some(&s),
                fetched_at_ms: i as i64,
                crawl_id: None,
            },
            &mut out,
        );
        let mut found: Vec<String> = out
            .drain()
            .map(|e| {
                let v: serde_json::Value = serde_json::from_slice(&e.value).expect("JSON");
                let (a, b) = (v["a"].as_str().expect("a"), v["b"].as_str().expect("b"));
                if a == site(i) { b } else { a }.to_owned()
            })
            .collect();
        found.sort();
        partners.push(found);
    }
    // Pages 0..4 find every page before them (buckets of at most 4 with the new page).
    assert_eq!(partners[3], vec![site(0), site(1), site(2)]);
    // Page 4 meets buckets of 4 pages: the newest 3 only; page 5, the newest 3 of 5.
    assert_eq!(partners[4], vec![site(1), site(2), site(3)]);
    assert_eq!(partners[5], vec![site(2), site(3), site(4)]);
    assert!(index.stats().hot_buckets_cut > 0);
}

#[test]
fn boilerplate_positions_do_not_count() {
    let (a, b) = differing_in_first(20);
    let none = compare(&a, 0, &b, 0);
    assert_eq!(none.agreeing, 64);
    assert_eq!(none.support, 84);
    // If positions 20..84 are a template, only the 20 differing positions are left.
    let template: u128 = ((1u128 << 84) - 1) & !((1u128 << 20) - 1);
    let c = compare(&a, template, &b, 0);
    assert_eq!(c.support, 20);
    assert_eq!(c.discounted_jaccard, 0.0);
    let cfg = NearConfig::default();
    assert!(
        cfg.verdict(&a, &b, &none, Naming::SameName).is_none()
            || none.discounted_jaccard >= cfg.min_jaccard
    );
    assert_eq!(cfg.verdict(&a, &b, &c, Naming::SameName), None);
}

/// On one site, a position counts unless both pages show a template value in it: a template
/// value against a value of the page's own is a difference. Across sites it does not count.
#[test]
fn on_one_site_a_template_value_against_an_own_value_is_a_difference() {
    // The pages differ in positions 0..20; positions 10..84 are template for page a, and
    // 15..84 for page b.
    let (a, b) = differing_in_first(20);
    let from = |i: u32| ((1u128 << 84) - 1) & !((1u128 << i) - 1);
    let (mask_a, mask_b) = (from(10), from(15));
    let two_sites = compare_sited(&a, mask_a, &b, mask_b, false);
    assert_eq!(two_sites, compare(&a, mask_a, &b, mask_b));
    assert_eq!((two_sites.support, two_sites.kept_agreeing), (10, 0));
    // On one site: 0..10 differ (no template), 10..15 differ with a template value in a
    // only: counted; 15..20 differ with template values in both: dropped, as are 20..84,
    // where both agree on the template.
    let one_site = compare_sited(&a, mask_a, &b, mask_b, true);
    assert_eq!((one_site.support, one_site.kept_agreeing), (15, 0));
    // Agreeing positions where only one page shows a template are dropped too.
    let same = compare_sited(&a, from(10), &a, 0, true);
    assert_eq!((same.support, same.kept_agreeing), (10, 10));
    // Without masks the two agree.
    assert_eq!(compare_sited(&a, 0, &b, 0, true), compare(&a, 0, &b, 0));
}

/// A site holding many versions of one document (12, filed among its other pages, or 20, filed
/// one after another) and a mirror of the last version on another site: every pair of the
/// versions and the mirror holds, and no page of the site pairs with another. Before copies
/// were left out of the site sample, the versions were most of the sample, their content was
/// taken for the site's template, and 45 of the 78 pairs (41 of the 210) were found.
#[test]
fn versions_of_one_document_on_one_site_are_not_its_template() {
    // Min-values 0..30 are the site's template; a document's content the rest; version v
    // differs from version 0 in min-values 30 + 2v and 31 + 2v.
    let bytes = |site: u64, doc: u64, version: u64| {
        let mut b = [0u8; MINVALUES];
        for (r, m) in b.iter_mut().enumerate() {
            let r64 = r as u64;
            *m = if r < 30 {
                (fmix64(site * 7919 + r64) >> 8) as u8
            } else {
                let changed = version > 0 && (r - 30) / 2 == version as usize;
                let salt = if changed { version * 977 } else { 0 };
                (fmix64(doc * 1_000_003 + r64 * 31 + salt) >> 8) as u8
            };
        }
        b
    };
    let sketch = |id: u64, mins: [u8; MINVALUES]| Sketch {
        mins,
        ss: [0; 6],
        simhash: [fmix64(id), 0, 0, 0, 0, 0],
        checksum: id,
        text: id,
        title: 0,
        has_terms: true,
    };
    for (versions, one_after_another) in [(12u64, false), (20, true)] {
        let mut index = NearIndex::new(NearConfig::default());
        let mut out = Emitter::new();
        let mut at = 0;
        let mut file = |index: &mut NearIndex, url: &str, s: Sketch| {
            at += 1;
            let fetch = Fetch {
                url,
                sketch: Some(&s),
                fetched_at_ms: at,
                crawl_id: None,
            };
            index.observe(&fetch, &mut out);
        };
        let version = |v: u64| (format!("http://a.example/v{v}/d.html"), bytes(1, 7, v));
        for i in 0..60 {
            let doc = format!("http://a.example/doc{i}.html");
            file(&mut index, &doc, sketch(1000 + i, bytes(1, 100 + i, 0)));
            if !one_after_another && i < versions {
                let (url, mins) = version(i);
                file(&mut index, &url, sketch(5000 + i, mins));
            }
        }
        if one_after_another {
            for v in 0..versions {
                let (url, mins) = version(v);
                file(&mut index, &url, sketch(5000 + v, mins));
            }
        }
        for i in 0..60 {
            let doc = format!("http://b.example/doc{i}.html");
            file(&mut index, &doc, sketch(9000 + i, bytes(2, 300 + i, 0)));
        }
        let mirror = "http://b.example/mirror/d.html";
        file(&mut index, mirror, sketch(99, bytes(2, 7, versions - 1)));
        let pairs = index.live_pairs();
        let among = |x: &str| x.ends_with("/d.html");
        let copies = pairs
            .iter()
            .filter(|(x, y, _)| among(x) && among(y))
            .count();
        let n = versions as usize + 1;
        assert_eq!(copies, n * (n - 1) / 2, "{versions} versions");
        assert_eq!(
            pairs.len(),
            copies,
            "pages of the sites pair only as copies"
        );
        let last = index.slot_of(&version(versions - 1).0).unwrap();
        let copy = index.slot_of(mirror).unwrap();
        let (a, b) = (index.page(last), index.page(copy));
        let c = compare_sited(&a.sketch, a.mask.bits(), &b.sketch, b.mask.bits(), false);
        assert!(c.support >= 50, "the content counts: {c:?}");
    }
}

/// The copy cut: halfway from the lower quartile to full agreement, at least nine in ten.
#[test]
fn the_copy_cut_sits_above_the_sites_pages() {
    let with = |counts: &[u32]| {
        let agreements: Vec<u128> = counts.iter().map(|&n| (1u128 << n) - 1).collect();
        copy_cut(&agreements, &mut Vec::new())
    };
    // A light template: its pages agree on about 15; copies from 76 on.
    assert_eq!(with(&[10, 12, 14, 15, 15, 16, 18, 80, 82]), 76);
    // Pages that agree on nearly everything: halfway from the lower quartile (79, the third of
    // eight) to 84, rounded up.
    assert_eq!(with(&[78, 78, 79, 80, 81, 82, 83, 84]), 82);
    // All alike: none is a copy.
    assert_eq!(with(&[84, 84, 84, 84]), 85);
}
