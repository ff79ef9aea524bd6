//! Mirror status follows a mirror's life over crawl rounds, through the whole topology (pages ->
//! pairs -> clusters -> mirrors): a mirror is confirmed while it serves the primary's pages, is
//! retracted when it goes down or lags behind the primary's revisions (never left confirmed
//! falsely), and is confirmed again once it is back or has caught up.

use neardup_schemas::{MirrorEvent, MirrorState, OutputKind, PairLevel, Source};
use neardup_topology::{Config, Topology};

mod common;
use common::{prose, record};

const PAGES: usize = 14;
const PRIMARY: &str = "http://docs.example/manual";
const MIRROR: &str = "http://mirror.example/pub/manual";

/// Page `i` of the manual at `revision`: a new revision replaces all its prose.
fn page(i: usize, revision: u64) -> String {
    format!(
        "<html><head><title>Manual page {i}</title></head><body><h1>Page {i}</h1><p>{}</p></body></html>",
        prose(1000 * revision + i as u64, 220)
    )
}

/// What the mirror serves in a round.
#[derive(Clone, Copy)]
enum Mirror {
    /// Every page, at the given revisions.
    Serves,
    /// Down: the first `n` pages fail (status 0).
    Down(usize),
    /// Lagging: serves revision `rev - 1` of the first `n` pages (the primary's previous text).
    Lags(usize),
}

/// One crawl round on day `day`: the primary at revision `rev`, the mirror as `mirror` says.
fn round(day: u32, rev: u64, mirror: Mirror) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for i in 0..PAGES {
        let url = format!("{PRIMARY}/p{i}.html");
        lines.push(record(&url, day, 2 * i, 200, "192.0.2.10", &page(i, rev)));
        let url = format!("{MIRROR}/p{i}.html");
        let second = 2 * i + 1;
        lines.push(match mirror {
            Mirror::Down(n) if i < n => record(&url, day, second, 0, "198.51.100.7", ""),
            Mirror::Lags(n) if i < n => {
                record(&url, day, second, 200, "198.51.100.7", &page(i, rev - 1))
            }
            _ => record(&url, day, second, 200, "198.51.100.7", &page(i, rev)),
        });
    }
    lines
}

/// The mirror states the topology emits for the pair while it processes `lines`.
fn states(topo: &mut Topology, lines: &[Vec<u8>]) -> Vec<(MirrorState, u64)> {
    let mut states = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let mut out = Vec::new();
        let src = Source::File {
            file: "mirror_evolution.jsonl".into(),
            line: n as u64 + 1,
        };
        topo.process(line, &src, &mut out);
        for e in out.iter().filter(|e| e.kind == OutputKind::Mirrors) {
            let m: MirrorEvent = serde_json::from_slice(&e.value).unwrap();
            assert_eq!(
                m.hosts,
                ["docs.example", "mirror.example"].map(String::from),
                "{m:?}"
            );
            if m.state == MirrorState::Confirmed {
                assert_eq!(
                    m.prefixes,
                    vec![["/", "/pub/"].map(String::from)],
                    "confirmed with the corresponding path prefixes (the paths minus their common suffix)"
                );
            }
            states.push((m.state, m.shared_pages));
        }
    }
    states
}

#[test]
fn mirror_status_follows_the_mirror_going_down_lagging_and_catching_up() {
    let mut topo = Topology::new(Config::default());
    let confirmed_by = |s: &[(MirrorState, u64)]| s.last().map(|x| x.0);

    // Round 1: the mirror serves all 14 pages: confirmed once the 10th shared page arrives.
    let s = states(&mut topo, &round(0, 1, Mirror::Serves));
    assert_eq!(s, vec![(MirrorState::Confirmed, 10)], "round 1");

    // Round 2: 6 of its pages fail: 8 shared pages are below the evidence, retracted.
    let s = states(&mut topo, &round(7, 1, Mirror::Down(6)));
    assert_eq!(
        confirmed_by(&s),
        Some(MirrorState::Retracted),
        "round 2: {s:?}"
    );
    assert!(
        !s.iter().any(|x| x.0 == MirrorState::Confirmed),
        "round 2: {s:?}"
    );

    // Round 3: back up: confirmed again.
    let s = states(&mut topo, &round(14, 1, Mirror::Serves));
    assert_eq!(
        confirmed_by(&s),
        Some(MirrorState::Confirmed),
        "round 3: {s:?}"
    );

    // Round 4: the primary publishes a new revision of every page; the mirror syncs only 8 and
    // keeps serving the old text of 6: their pairs break, the pair is retracted.
    let s = states(&mut topo, &round(21, 2, Mirror::Lags(6)));
    assert!(s.contains(&(MirrorState::Retracted, 9)), "round 4: {s:?}");
    assert_eq!(
        confirmed_by(&s),
        Some(MirrorState::Retracted),
        "round 4: {s:?}"
    );

    // Round 5: the mirror has caught up: confirmed again.
    let s = states(&mut topo, &round(28, 2, Mirror::Serves));
    assert_eq!(
        confirmed_by(&s),
        Some(MirrorState::Confirmed),
        "round 5: {s:?}"
    );
}

#[test]
fn the_mirror_stage_can_be_turned_off() {
    let mut topo = Topology::new(Config {
        mirrors: false,
        ..Config::default()
    });
    let s = states(&mut topo, &round(0, 1, Mirror::Serves));
    assert!(s.is_empty(), "{s:?}");
    // ... while the clusters it would read from still form.
    let similar = topo
        .clusters(PairLevel::VerySimilar)
        .expect("very_similar clusters");
    assert_eq!(
        similar.stats().clusters,
        PAGES as u64,
        "one cluster per page and its copy"
    );
}

/// A crawl through thousands of other hosts first: their addresses are forgotten once they are
/// a window old (the mirror stage held every host ever fetched before), and the pair's states
/// are those of a crawl of the two hosts alone.
#[test]
fn hosts_out_of_the_window_are_forgotten_and_the_mirror_states_stay() {
    let rounds = [
        round(16, 1, Mirror::Serves),
        round(23, 1, Mirror::Down(6)),
        round(28, 1, Mirror::Serves),
    ];
    let mut alone = Topology::new(Config::default());
    let expected: Vec<_> = rounds.iter().map(|r| states(&mut alone, r)).collect();

    let mut topo = Topology::new(Config::default());
    let filler = |day: u32, from: usize| -> Vec<Vec<u8>> {
        (from..from + 5000)
            .map(|h| {
                let url = format!("http://host{h}.example/");
                let body = format!("<p>filler page {h}</p>");
                record(&url, day, h % 5000, 200, "203.0.113.5", &body)
            })
            .collect()
    };
    states(&mut topo, &filler(0, 0));
    assert_eq!(topo.mirrors().addresses_held(), 5000);
    // The second 5,000 hosts come a fortnight later, when the first are out of the window.
    states(&mut topo, &filler(15, 5000));
    assert!(
        topo.mirrors().addresses_held() <= 5000,
        "{} addresses held",
        topo.mirrors().addresses_held()
    );
    let got: Vec<_> = rounds.iter().map(|r| states(&mut topo, r)).collect();
    assert_eq!(got, expected);
    assert!(!expected[0].is_empty());
}
