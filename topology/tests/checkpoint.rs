//! A topology restored from a checkpoint continues exactly as the one that wrote it: for every
//! split point, processing the first records, checkpointing, restoring into a fresh topology and
//! processing the rest gives the same output bytes, in the same order, as one uninterrupted run.
//! Every stateful part is switched on (exact and near windows, both cluster levels, hints with
//! in-link ranking, mirrors, collections, the Hyperlink Map veto, evolution, change history), and
//! the stream exercises what they keep: mirrored and near-duplicate pages over three crawl rounds,
//! refetches with changes, removals, malformed lines and a jump past the window.
//!
//! Also: a damaged, foreign or differently configured checkpoint is refused with an error that
//! names the cause.

use neardup_schemas::Source;
use neardup_topology::checkpoint::{self, CheckpointError};
use neardup_topology::clusters::CanonicalPolicy;
use neardup_topology::{replicas, Config, Emit, Topology};
use std::collections::BTreeMap;

mod common;
use common::{prose, record};

const TOPIC: &str = "crawl.pages";

fn config() -> Config {
    Config {
        collections: true,
        track_evolution: true,
        hm_veto: Some(replicas::HmVeto::new(0.2)),
        canonical: "inlinks,earliest"
            .parse::<CanonicalPolicy>()
            .expect("policy"),
        ..Config::default()
    }
}

/// Three weekly rounds of two sites' manuals, each mirrored on another host, with near-duplicate
/// editions, links between pages, changes, 404s, garbage and finally a jump past the window.
fn stream() -> Vec<Vec<u8>> {
    let hosts = [
        ("http://docs.alpha.example/manual", "192.0.2.1"),
        ("http://mirror.beta.example/pub/alpha", "198.51.100.2"),
        ("https://www.gamma.example/guide", "203.0.113.3"),
        ("http://gamma-mirror.example/guide", "203.0.113.4"),
    ];
    let template = |site: usize, i: usize, text: &str, links: &str| {
        format!(
            "<html><head><title>Site {site} page {i}</title></head><body><div class=nav>Home Search \
             About Contact {}</div>{links}<p>{text}</p><div>Footer of site {site}</div></body></html>",
            prose(900 + site as u64, 30)
        )
    };
    let mut lines = Vec::new();
    let mut second = 0;
    for round in 0..3u32 {
        let day = 7 * round;
        for (h, (host, ip)) in hosts.iter().enumerate() {
            let site = h / 2;
            for i in 0..12usize {
                // Page 3 changes every round; page 5 of the mirrors lags a revision.
                let rev = if i == 3 || (i == 5 && h % 2 == 1 && round > 0) {
                    u64::from(round.saturating_sub(u32::from(h % 2 == 1 && i == 5)))
                } else {
                    0
                };
                let mut text = prose(10_000 * site as u64 + 100 * i as u64 + rev, 180);
                if h % 2 == 1 && i % 4 == 0 {
                    // A near-duplicate edition: a few words differ.
                    text.push_str(&format!(" edition {}", prose(77 + i as u64, 6)));
                }
                let links: String = (0..3)
                    .map(|k| format!("<a href=\"{host}/p{}.html\">next</a>", (i + k + 1) % 12))
                    .collect();
                let url = format!("{host}/p{i}.html");
                let status = if round == 2 && h == 3 && i == 7 {
                    404
                } else {
                    200
                };
                let body = if status == 200 {
                    template(site, i, &text, &links)
                } else {
                    String::new()
                };
                lines.push(record(&url, day, second, status, ip, &body));
                second += 7;
                if i == 9 && h == 0 {
                    lines.push(b"{\"url\": not json".to_vec());
                    lines.push(record(
                        "ftp://bad.example/x",
                        day,
                        second,
                        200,
                        ip,
                        "<p>x</p>",
                    ));
                }
            }
        }
    }
    // Past the 14-day window of the first rounds: their pages leave, their pairs are retracted.
    for i in 0..6usize {
        let url = format!("http://late.example/p{i}.html");
        let body = format!("<p>{}</p>", prose(5 + (i / 2) as u64, 150));
        lines.push(record(&url, 40, i, 200, "192.0.2.99", &body));
    }
    lines
}

fn process(topo: &mut Topology, lines: &[Vec<u8>], first: usize, out: &mut Vec<Emit>) {
    for (n, line) in lines.iter().enumerate() {
        let src = Source::Kafka {
            topic: TOPIC.into(),
            partition: 0,
            offset: (first + n) as i64,
        };
        topo.process(line, &src, out);
    }
}

fn bytes(out: &[Emit]) -> Vec<(String, String, String)> {
    out.iter()
        .map(|e| {
            (
                format!("{:?}", e.kind),
                e.key.clone(),
                String::from_utf8_lossy(&e.value).into_owned(),
            )
        })
        .collect()
}

#[test]
fn a_restored_topology_continues_as_the_one_that_wrote_the_checkpoint() {
    let lines = stream();
    let mut whole = Topology::new(config());
    let mut expected = Vec::new();
    process(&mut whole, &lines, 0, &mut expected);
    let kinds: std::collections::BTreeSet<_> = expected.iter().map(|e| e.kind).collect();
    assert!(
        kinds.len() >= 6,
        "the stream must exercise most outputs: {kinds:?}"
    );

    for split in [
        1,
        lines.len() / 5,
        lines.len() / 2,
        2 * lines.len() / 3,
        lines.len() - 3,
    ] {
        let mut first = Topology::new(config());
        let mut out = Vec::new();
        process(&mut first, &lines[..split], 0, &mut out);
        let offsets = BTreeMap::from([(0, split as i64)]);
        let ck = checkpoint::write(&first, TOPIC, &offsets);
        drop(first);
        let (mut restored, header) = checkpoint::restore(config(), TOPIC, &ck).expect("restores");
        assert_eq!(header.offsets, offsets);
        assert_eq!(header.records, split as u64);
        // A restored topology checkpoints the same state again (the same size: maps with
        // per-process hash seeds list their entries in another order).
        let again = checkpoint::write(&restored, TOPIC, &offsets);
        assert_eq!(again.len(), ck.len(), "split {split}");
        process(&mut restored, &lines[split..], split, &mut out);
        assert_eq!(
            bytes(&out),
            bytes(&expected),
            "outputs differ when restored at {split}"
        );
        assert_eq!(restored.stats(), whole.stats());
    }
}

#[test]
fn a_checkpoint_that_does_not_fit_is_refused_with_its_cause() {
    let lines = stream();
    let mut topo = Topology::new(config());
    process(&mut topo, &lines[..40], 0, &mut Vec::new());
    let ck = checkpoint::write(&topo, TOPIC, &BTreeMap::from([(0, 40)]));

    let (header, start) = checkpoint::read_header(&ck).expect("header");
    assert_eq!(header.format, checkpoint::FORMAT);
    assert!(start < 1000 && header.body_bytes as usize == ck.len() - start);

    let other = Config {
        window_ms: 7 * 24 * 3600 * 1000,
        ..config()
    };
    let err = checkpoint::restore(other, TOPIC, &ck)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Parameters { .. }), "{err}");
    assert!(err.to_string().contains("remove the file"), "{err}");

    let err = checkpoint::restore(config(), "other.topic", &ck)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Topic { .. }), "{err}");

    let err = checkpoint::restore(config(), TOPIC, &ck[..ck.len() - 1])
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Damaged(_)), "{err}");

    let mut flipped = ck.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 1;
    let err = checkpoint::restore(config(), TOPIC, &flipped)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Damaged(_)), "{err}");

    let err = checkpoint::restore(config(), TOPIC, b"{\"url\":1}\n")
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::NotACheckpoint(_)), "{err}");

    let old = String::from_utf8_lossy(&ck[..start]).replace("\"format\":1", "\"format\":0");
    let mut older = old.into_bytes();
    older.extend_from_slice(&ck[start..]);
    let err = checkpoint::restore(config(), TOPIC, &older)
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::Version { .. }), "{err}");
}
