//! The page budget (`near.max_pages`) bounds every part of the topology that keeps URLs of the
//! window, not only the sketch window: a page the budget evicts also leaves its exact-duplicate
//! group (retracting its exact pairs), the change history and the in-link counts.

use neardup_schemas::{OutputKind, PairLevel, PairState, Source};
use neardup_topology::{Emit, Topology};

mod common;
use common::{everything_on, exact_copies_stream};

const BUDGET: usize = 8;
const PAGES: usize = 30;

fn stream() -> Vec<Vec<u8>> {
    exact_copies_stream(PAGES)
}

fn src(line: u64) -> Source {
    Source::File {
        file: "budget.jsonl".into(),
        line,
    }
}

fn run(max_pages: usize) -> (Topology, Vec<Emit>, usize) {
    let mut cfg = everything_on();
    cfg.near.max_pages = max_pages;
    let mut topo = Topology::new(cfg);
    let mut out = Vec::new();
    let mut most = 0;
    for (i, line) in stream().iter().enumerate() {
        topo.process(line, &src(i as u64 + 1), &mut out);
        let kept = topo.kept_urls();
        assert!(kept.window <= max_pages, "{kept:?}");
        most = most.max(kept.exact).max(kept.history).max(kept.inlinks);
    }
    (topo, out, most)
}

fn exact_pairs(out: &[Emit], state: PairState) -> usize {
    out.iter()
        .filter(|e| e.kind == OutputKind::Pairs)
        .filter_map(|e| serde_json::from_slice::<serde_json::Value>(&e.value).ok())
        .filter(|v| v["level"] == serde_json::to_value(PairLevel::Exact).unwrap())
        .filter(|v| v["state"] == serde_json::to_value(state).unwrap())
        .count()
}

#[test]
fn the_page_budget_bounds_the_exact_groups_the_history_and_the_in_links() {
    let (topo, out, most) = run(BUDGET);
    let kept = topo.kept_urls();
    assert!(
        most <= BUDGET,
        "a part held {most} URLs over a budget of {BUDGET}"
    );
    assert_eq!(kept.window, BUDGET);
    assert_eq!(
        (kept.exact, kept.history, kept.inlinks),
        (BUDGET, BUDGET, BUDGET)
    );
    let evicted = topo.near_stats().evicted_by_budget as usize;
    assert_eq!(evicted, 2 * PAGES - BUDGET);
    assert_eq!(topo.exact_stats().evicted as usize, evicted);
    // Every exact pair was detected; those with a member evicted are retracted, and the
    // BUDGET / 2 newest stay.
    assert_eq!(exact_pairs(&out, PairState::Detected), PAGES);
    assert_eq!(exact_pairs(&out, PairState::Retracted), PAGES - BUDGET / 2);
}

#[test]
fn without_a_budget_every_url_of_the_window_is_kept() {
    // The contrast that shows the bound above is the budget's: the same stream, a budget over
    // its pages, keeps every URL in every part, and retracts nothing.
    let (topo, out, most) = run(10 * PAGES);
    let kept = topo.kept_urls();
    assert_eq!(most, 2 * PAGES);
    assert_eq!(
        (kept.window, kept.exact, kept.history, kept.inlinks),
        (2 * PAGES, 2 * PAGES, 2 * PAGES, 2 * PAGES)
    );
    assert_eq!(topo.near_stats().evicted_by_budget, 0);
    assert_eq!(exact_pairs(&out, PairState::Detected), PAGES);
    assert_eq!(exact_pairs(&out, PairState::Retracted), 0);
}

#[test]
fn a_page_evicted_by_the_budget_has_no_change_since_its_last_fetch() {
    // The history forgot it with the window: its next fetch is reported as a first one.
    let (mut topo, _, _) = run(BUDGET);
    let first = &stream()[0];
    let mut out = Vec::new();
    topo.process(first, &src(1_000), &mut out);
    let sig = out
        .iter()
        .find(|e| e.kind == OutputKind::Signatures)
        .expect("a signature event");
    let v: serde_json::Value = serde_json::from_slice(&sig.value).unwrap();
    assert!(v.get("change").is_none_or(|c| c.is_null()), "{v}");
    // A page still in the window has one.
    let last = stream().last().unwrap().clone();
    let mut out = Vec::new();
    topo.process(&last, &src(1_001), &mut out);
    let sig = out
        .iter()
        .find(|e| e.kind == OutputKind::Signatures)
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&sig.value).unwrap();
    assert!(v["change"].is_object(), "{v}");
}
