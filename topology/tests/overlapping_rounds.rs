//! Crawl rounds that overlap at their edges: events of a round that come after the next round
//! has begun are late. They end nothing: the figures by round keep one round per crawl id, in
//! order, and say how many of each round's events came late.

use neardup_topology::Topology;

mod common;
use common::{everything_on, feed, mixed_stream};

fn crawl_id(line: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v["crawl_id"].as_str().map(str::to_owned)
}

/// Runs `lines` through a topology with every part on; its rounds (crawl id, pages, late
/// events) and its late records.
fn run(lines: &[Vec<u8>]) -> (Vec<(String, u64, u64)>, u64) {
    let mut topo = Topology::new(everything_on());
    let mut out = Vec::new();
    feed(&mut topo, lines, "rounds.jsonl", &mut out);
    topo.finish(&mut out);
    let rounds = topo
        .finish_evolution()
        .iter()
        .map(|r| (r.crawl_id.clone(), r.pages, r.late_events))
        .collect();
    (rounds, topo.stats().late_records)
}

#[test]
fn late_events_of_an_ended_round_end_nothing_and_are_counted() {
    let lines = mixed_stream();
    let (rounds, late) = run(&lines);
    assert_eq!(late, 0);
    let ids: Vec<&str> = rounds.iter().map(|r| &*r.0).collect();
    assert!(ids.len() >= 3, "{rounds:?}");
    assert!(rounds.iter().all(|r| r.2 == 0), "{rounds:?}");

    // The last three pages of week-01 held back until after week-02's first two records, and
    // one more until after week-03's first.
    let first = |id: &str| {
        lines
            .iter()
            .position(|l| crawl_id(l).as_deref() == Some(id))
    };
    let (w2, w3) = (first("week-02").unwrap(), first("week-03").unwrap());
    let week1: Vec<usize> = (0..w2)
        .filter(|&i| crawl_id(&lines[i]).as_deref() == Some("week-01"))
        .collect();
    let held: Vec<usize> = week1[week1.len() - 4..].to_vec();
    let mut shuffled: Vec<Vec<u8>> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if held.contains(&i) {
            continue;
        }
        shuffled.push(line.clone());
        if i == w2 + 1 {
            shuffled.extend(held[..3].iter().map(|&h| lines[h].clone()));
        }
        if i == w3 {
            shuffled.push(lines[held[3]].clone());
        }
    }
    assert_eq!(shuffled.len(), lines.len());

    let (late_rounds, late) = run(&shuffled);
    assert_eq!(late, 4, "{late_rounds:?}");
    let late_ids: Vec<&str> = late_rounds.iter().map(|r| &*r.0).collect();
    assert_eq!(late_ids, ids, "one round per crawl id, in order");
    assert_eq!(late_rounds[0].2, 4, "{late_rounds:?}");
    assert!(late_rounds[1..].iter().all(|r| r.2 == 0), "{late_rounds:?}");
    // Week 1's figures leave its late pages out; the later rounds' figures do not change.
    assert_eq!(
        late_rounds[0].1 + 4,
        rounds[0].1,
        "{late_rounds:?} {rounds:?}"
    );
    assert_eq!(late_rounds[1..], rounds[1..]);
}

#[test]
fn rounds_interleaved_record_by_record_close_each_round_once() {
    // Every record of the stream alternating between two crawl ids: before, each change of
    // crawl id ended the round under way (and ran a collections epoch); now two rounds begin.
    let lines: Vec<Vec<u8>> = mixed_stream()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = match serde_json::from_slice(&l) {
                Ok(v) => v,
                Err(_) => return l,
            };
            v["crawl_id"] = format!("crawl-{}", i % 2).into();
            v.to_string().into_bytes()
        })
        .collect();
    let (rounds, late) = run(&lines);
    let ids: Vec<&str> = rounds.iter().map(|r| &*r.0).collect();
    assert_eq!(ids, ["crawl-0", "crawl-1"], "{rounds:?}");
    assert!(late > lines.len() as u64 / 3, "{late}");
    assert_eq!(rounds[0].2, late, "every late event is crawl-0's");
}
