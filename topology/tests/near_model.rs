//! Model-based property tests of the sliding-window sketch index (`near::NearIndex`).
//!
//! Random sequences of fetches (new content, changed content, the same content again, no
//! content), out-of-order fetch times and time jumps run against the index and against a plain
//! model: `url -> (content, fetched_at)`, where a page leaves when a fetch without content comes,
//! or when the watermark has moved a window past its fetch. After every step:
//! - the index's window holds exactly the model's pages (so never an expired one);
//! - the pair events, replayed from the start, give exactly the pairs the policy's verdict
//!   accepts among the model's pages, with the same levels; a detection is never a repeat and a
//!   retraction always names a live pair;
//! - with a page budget, the window never exceeds it and the pairs still match its contents.

use neardup_schemas::{OutputKind, PairEvent, PairLevel, PairState};
use neardup_topology::near::{
    compare, url_name, Fetch, Naming, NearConfig, NearIndex, Policy, Sketch,
};
use neardup_topology::site;
use neardup_topology::{Emitter, Topology};
use proptest::prelude::*;
use std::collections::BTreeMap;

const URLS: [&str; 7] = [
    "http://a.example/x",
    "http://a.example/y",
    "http://a.example/sub/x",
    "http://b.example/x",
    "http://www.b.example/z",
    "http://c.example/x",
    "http://d.example/q",
];
const DAY_MS: i64 = 86_400_000;
const WINDOW_MS: i64 = 3 * DAY_MS;

/// Deterministic pseudo-random bytes.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Contents: 0 the base page; 1 the base with supershingle 0 changed (B = 5); 2 the base with
/// supershingles 0–3 changed (B = 2); 3 unrelated; 4 the base's text under other bytes (same
/// sketch, other checksum); 5 the base with supershingles 0–4 changed (B = 1: no Alg. B pair);
/// 6 the base with 4 min-values changed (Jaccard ≈ 0.95) under another title. 3 has no title;
/// all but 6 share one title.
fn content(k: usize) -> Sketch {
    let mut base = 1u64;
    let mut other = 99u64 + k as u64;
    let mut mins = [0u8; 84];
    for m in mins.iter_mut() {
        *m = splitmix(&mut base) as u8;
    }
    let changed = match k {
        1 => 14,
        2 => 56,
        3 => 84,
        5 => 70,
        6 => 4,
        _ => 0,
    };
    for m in mins.iter_mut().take(changed) {
        *m = splitmix(&mut other) as u8 ^ 0x5a;
    }
    let mut ss = [0u16; 6];
    for (s, tag) in ss.iter_mut().enumerate() {
        let mut h = 7u64;
        for &m in &mins[s * 14..s * 14 + 14] {
            h = h.wrapping_mul(31).wrapping_add(u64::from(m));
        }
        *tag = splitmix(&mut h) as u16;
    }
    let mut sim_state = if k == 3 { 5u64 } else { 3u64 };
    let mut simhash = [0u64; 6];
    for w in simhash.iter_mut() {
        *w = splitmix(&mut sim_state);
    }
    // Flip bits in proportion to the change, so C-similarity varies too.
    simhash[0] ^= (1u64 << (changed / 6)) - 1;
    Sketch {
        mins,
        ss,
        simhash,
        checksum: 1000 + k as u64,
        text: if k == 4 { 1000 } else { 1000 + k as u64 },
        title: match k {
            3 => 0,
            6 => 2,
            _ => 1,
        },
        has_terms: true,
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Fetch URL with content (`None` = 404), `dt_ms` after the previous step's time (negative
    /// = out of order).
    Fetch(usize, Option<usize>, i64),
}

fn arb_op() -> impl Strategy<Value = Op> {
    fetch_op(prop_oneof![
        3 => 0..DAY_MS / 2,
        1 => DAY_MS..2 * WINDOW_MS,
        1 => -DAY_MS..0i64,
    ])
}

/// Fetches mostly close together in time, with a rare jump: many fetches fall in one window,
/// so the expiry heap fills with stale entries.
fn dense_op() -> impl Strategy<Value = Op> {
    fetch_op(prop_oneof![
        30 => 0..DAY_MS / 50,
        1 => DAY_MS..2 * WINDOW_MS,
        2 => -DAY_MS / 10..0i64,
    ])
}

/// Fetches mostly at the very time of the one before: a page that leaves (no content) and the
/// page filed next in its slot often share a fetch time, so the expiry entry of the first names
/// the time and slot of the second.
fn tied_op() -> impl Strategy<Value = Op> {
    fetch_op(prop_oneof![
        20 => Just(0i64),
        4 => 1..3i64,
        1 => DAY_MS..2 * WINDOW_MS,
    ])
}

/// A fetch of a random URL with a random content (or none), `dt` after the previous one.
fn fetch_op(dt: impl Strategy<Value = i64>) -> impl Strategy<Value = Op> {
    (
        0..URLS.len(),
        prop_oneof![4 => (0..7usize).prop_map(Some), 1 => Just(None)],
        dt,
    )
        .prop_map(|(u, c, dt)| Op::Fetch(u, c, dt))
}

#[derive(Default)]
struct Model {
    live: BTreeMap<usize, (usize, i64)>,
}

impl Model {
    fn fetch(&mut self, url: usize, content: Option<usize>, at: i64, watermark: i64) {
        self.live.retain(|_, (_, t)| *t >= watermark - WINDOW_MS);
        if at < watermark - WINDOW_MS {
            return;
        }
        if let Some((_, t)) = self.live.get(&url) {
            if at < *t {
                return;
            }
        }
        match content {
            Some(c) => {
                self.live.insert(url, (c, at));
            }
            None => {
                self.live.remove(&url);
            }
        }
    }
}

fn expected_pairs(
    cfg: &NearConfig,
    pages: &BTreeMap<usize, usize>,
) -> BTreeMap<(String, String), PairLevel> {
    let mut out = BTreeMap::new();
    for (&x, &cx) in pages {
        for (&y, &cy) in pages {
            if URLS[x] >= URLS[y] {
                continue;
            }
            let (a, b) = (content(cx), content(cy));
            let (nx, ny) = (url_name(URLS[x]), url_name(URLS[y]));
            let site_of = |u: &str| site::site(site::host(u)).to_ascii_lowercase();
            let same_name = nx == 0 || ny == 0 || nx == ny;
            let one_site = site_of(URLS[x]) == site_of(URLS[y]);
            let named =
                if a.title != 0 && b.title != 0 && a.title != b.title && (one_site || !same_name) {
                    Naming::Retitled {
                        same_name,
                        one_site,
                    }
                } else if same_name {
                    Naming::SameName
                } else if one_site {
                    Naming::RenamedOnSite
                } else {
                    Naming::Renamed
                };
            if let Some(level) = cfg.verdict(&a, &b, &compare(&a, 0, &b, 0), named) {
                out.insert((URLS[x].to_owned(), URLS[y].to_owned()), level);
            }
        }
    }
    out
}

fn replay(
    pairs: &mut BTreeMap<(String, String), PairLevel>,
    out: &mut Emitter,
) -> Result<(), TestCaseError> {
    for e in out.drain() {
        prop_assert_eq!(e.kind, OutputKind::Pairs);
        let p: PairEvent = serde_json::from_slice(&e.value).expect("pair event");
        prop_assert!(p.a < p.b);
        let key = (p.a.clone(), p.b.clone());
        match p.state {
            PairState::Detected => prop_assert!(
                pairs.insert(key, p.level) != Some(p.level),
                "detected again at the same level: {:?}",
                p
            ),
            PairState::Retracted => {
                prop_assert!(pairs.remove(&key).is_some(), "retracted, not live: {:?}", p)
            }
        }
    }
    Ok(())
}

fn run(ops: &[Op], policy: Policy, max_pages: usize) -> Result<(), TestCaseError> {
    let cfg = NearConfig {
        policy,
        window_ms: WINDOW_MS,
        max_pages,
        ..NearConfig::default()
    };
    let mut index = NearIndex::new(cfg.clone());
    let mut model = Model::default();
    let mut out = Emitter::new();
    let mut pairs = BTreeMap::new();
    let (mut t, mut watermark) = (10 * WINDOW_MS, i64::MIN);
    for op in ops {
        let Op::Fetch(url, c, dt) = *op;
        t += dt;
        watermark = watermark.max(t);
        out.set_at("2026-11-02T00:00:00Z");
        index.advance(watermark, None, &mut out);
        let sketch = c.map(content);
        index.observe(
            &Fetch {
                url: URLS[url],
                sketch: sketch.as_ref(),
                fetched_at_ms: t,
                crawl_id: None,
            },
            &mut out,
        );
        replay(&mut pairs, &mut out)?;
        let window: BTreeMap<String, i64> =
            index.window().map(|(u, t)| (u.to_owned(), t)).collect();
        for &at in window.values() {
            prop_assert!(
                at >= watermark - WINDOW_MS,
                "an expired page is in the window"
            );
        }
        prop_assert!(window.len() <= max_pages, "over the page budget");
        if max_pages >= URLS.len() {
            model.fetch(url, c, t, watermark);
            let expect: BTreeMap<String, i64> = model
                .live
                .iter()
                .map(|(&u, &(_, at))| (URLS[u].to_owned(), at))
                .collect();
            prop_assert_eq!(&window, &expect, "window differs from the model");
            let contents = model.live.iter().map(|(&u, &(c, _))| (u, c)).collect();
            prop_assert_eq!(&pairs, &expected_pairs(&cfg, &contents));
        } else {
            // Under a budget the window is a subset; pairs must match whatever it holds.
            let contents: BTreeMap<usize, usize> = index
                .window()
                .map(|(u, _)| URLS.iter().position(|x| *x == u).expect("known URL"))
                .map(|u| (u, current_content(ops, u, &index)))
                .collect();
            prop_assert_eq!(&pairs, &expected_pairs(&cfg, &contents));
        }
        let live: BTreeMap<(String, String), PairLevel> = index
            .live_pairs()
            .into_iter()
            .map(|(a, b, l)| ((a, b), l))
            .collect();
        prop_assert_eq!(
            &live,
            &pairs,
            "the index's live pairs differ from its events"
        );
    }
    Ok(())
}

/// The content the index holds for `url`: the one whose checksum its window entry carries.
fn current_content(_ops: &[Op], url: usize, index: &NearIndex) -> usize {
    let checksum = index.sketch_of(URLS[url]).expect("in window").checksum;
    (checksum - 1000) as usize
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn alg_b_index_matches_the_model(ops in prop::collection::vec(arb_op(), 1..50)) {
        run(&ops, Policy::AlgB, 1000)?;
    }

    #[test]
    fn combined_index_matches_the_model(ops in prop::collection::vec(arb_op(), 1..50)) {
        run(&ops, Policy::Combined, 1000)?;
    }

    #[test]
    fn alg_c_index_matches_the_model(ops in prop::collection::vec(arb_op(), 1..50)) {
        run(&ops, Policy::AlgC, 1000)?;
    }

    /// The default policy, whose thresholds depend on the URLs' names, their sites and the
    /// pages' titles (too few pages for a site sample: no position is boilerplate).
    #[test]
    fn default_policy_index_matches_the_model(ops in prop::collection::vec(arb_op(), 1..50)) {
        run(&ops, Policy::Neardup, 1000)?;
    }

    #[test]
    fn page_budget_is_never_exceeded(ops in prop::collection::vec(arb_op(), 1..50)) {
        run(&ops, Policy::AlgB, 3)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    /// Long sequences: the expiry heap fills with the stale entries of refetched pages and drops
    /// them (from 64 entries on), and evictions by time and by budget still match the model.
    #[test]
    fn long_sequences_match_the_model(ops in prop::collection::vec(dense_op(), 100..300)) {
        run(&ops, Policy::Neardup, 1000)?;
        run(&ops, Policy::AlgB, 3)?;
    }

    /// Fetch times that tie, so that expiry entries of pages gone name the time and slot of the
    /// pages after them: the window holds the model's pages, and under a budget of 3 it keeps
    /// to the budget with pairs that match what it holds.
    #[test]
    fn tied_fetch_times_match_the_model(ops in prop::collection::vec(tied_op(), 50..200)) {
        run(&ops, Policy::Neardup, 1000)?;
        run(&ops, Policy::AlgB, 3)?;
    }
}

/// The default policy through the whole topology: two copies of a page on different sites pair,
/// a 404 retracts the pair, and an unrelated page never pairs.
#[test]
fn default_policy_pairs_copies_and_retracts_on_404() {
    let mut topo = Topology::new(neardup_topology::Config::default());
    let src = neardup_schemas::Source::File {
        file: "t".into(),
        line: 1,
    };
    let body = "<p>".to_owned()
        + &(0..300)
            .map(|i| format!("word{} ", i * 7919 % 1000))
            .collect::<String>()
        + "</p>";
    let other = "<p>".to_owned()
        + &(0..300)
            .map(|i| format!("term{} ", i * 104729 % 977))
            .collect::<String>()
        + "</p>";
    let line = |url: &str, t: u32, status: u16, body: &str| {
        let b = if status == 200 {
            format!(r#","body":"{body}""#)
        } else {
            String::new()
        };
        format!(r#"{{"url":"{url}","fetched_at":"2026-11-02T10:00:{t:02}Z","status":{status}{b}}}"#)
    };
    let mut out = Vec::new();
    let banner = body.replace("<p>", "<p>mirrored by another host ");
    topo.process(
        line("http://a.example/p", 1, 200, &body).as_bytes(),
        &src,
        &mut out,
    );
    topo.process(
        line("http://mirror.example/p", 2, 200, &banner).as_bytes(),
        &src,
        &mut out,
    );
    topo.process(
        line("http://c.example/q", 3, 200, &other).as_bytes(),
        &src,
        &mut out,
    );
    let pairs = |out: &[neardup_topology::Emit]| -> Vec<PairEvent> {
        out.iter()
            .filter(|e| e.kind == OutputKind::Pairs)
            .map(|e| serde_json::from_slice(&e.value).expect("pair"))
            .collect()
    };
    let p = pairs(&out);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(
        (p[0].a.as_str(), p[0].b.as_str()),
        ("http://a.example/p", "http://mirror.example/p")
    );
    assert_eq!(p[0].state, PairState::Detected);
    assert_ne!(p[0].level, PairLevel::Exact, "the bodies differ");
    assert!(p[0].jaccard.expect("estimate") > 0.8, "{p:?}");
    assert!(!p[0].same_site);
    out.clear();
    topo.process(
        line("http://mirror.example/p", 4, 404, "").as_bytes(),
        &src,
        &mut out,
    );
    let p = pairs(&out);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].state, PairState::Retracted);
}

/// Titles through the whole topology: a page and a copy with one word changed (Jaccard about
/// 0.95), on two sites under different names, pair when their titles agree (the renamed
/// threshold, 0.9), not when the titles differ too (0.98), and pair again with titles turned
/// off.
#[test]
fn different_titles_under_different_names_need_near_identical_text() {
    let words = |changed: bool| -> String {
        (0..300)
            .map(|i| match (changed, i) {
                (true, 150) => "altered ".to_owned(),
                _ => format!("word{} ", i * 7919 % 1000),
            })
            .collect()
    };
    let page = |title: &str, changed: bool| {
        format!(
            "<html><head><title>{title}</title></head><body><p>{}</p></body></html>",
            words(changed)
        )
    };
    let run = |titles: bool, title_b: &str| -> Vec<PairEvent> {
        let mut cfg = neardup_topology::Config::default();
        cfg.near.titles = titles;
        let mut topo = Topology::new(cfg);
        let src = neardup_schemas::Source::File {
            file: "t".into(),
            line: 1,
        };
        let mut out = Vec::new();
        for (url, body, t) in [
            (
                "http://a.example/docs/wxDC.html",
                page("wxDC Class Members", false),
                1,
            ),
            (
                "http://b.example/ref/wxPrinterDC.html",
                page(title_b, true),
                2,
            ),
        ] {
            let line = format!(
                r#"{{"url":"{url}","fetched_at":"2026-11-02T10:00:0{t}Z","status":200,"body":"{body}"}}"#
            );
            topo.process(line.as_bytes(), &src, &mut out);
        }
        out.iter()
            .filter(|e| e.kind == OutputKind::Pairs)
            .map(|e| serde_json::from_slice(&e.value).expect("pair"))
            .collect()
    };
    let same_title = run(true, "wxDC Class Members");
    assert_eq!(same_title.len(), 1, "{same_title:?}");
    let j = same_title[0].jaccard.expect("estimate");
    assert!(
        (0.9..0.98).contains(&j),
        "the copy must sit between the thresholds: {j}"
    );
    assert!(run(true, "wxPrinterDC Class Members").is_empty());
    assert_eq!(run(false, "wxPrinterDC Class Members").len(), 1);
}
