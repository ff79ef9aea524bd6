//! One record dated far ahead of the others (a fetcher whose clock is years off) must not move
//! the windows there: before, it evicted every page and retracted every pair, and made every
//! record after it stale. That holds for the very first record too. A real jump (a crawl
//! resuming after a pause longer than the window) still moves them, once `LEAP_RECORDS`
//! records in a row make it.

mod common;

use common::{feed, prose, record};
use neardup_schemas::OutputKind;
use neardup_topology::clock::LEAP_RECORDS;
use neardup_topology::{Config, Topology};
use serde_json::Value;

/// Pages of one manual on two mirrors, fetched on day `day` from second `start`.
fn mirrored(day: u32, start: usize, pages: usize) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for i in 0..pages {
        let body = format!("<p>{}</p>", prose(100 + i as u64, 200));
        for (h, host) in ["http://a.example", "http://b.example"].iter().enumerate() {
            let url = format!("{host}/manual/p{i}.html");
            lines.push(record(
                &url,
                day,
                start + 2 * i + h,
                200,
                "192.0.2.1",
                &body,
            ));
        }
    }
    lines
}

/// The pair events (`state a b`) and the topology after `lines`.
fn run(lines: &[Vec<u8>]) -> (Vec<String>, Topology) {
    let mut topo = Topology::new(Config::default());
    let mut out = Vec::new();
    feed(&mut topo, lines, "leaps.jsonl", &mut out);
    let pairs = out
        .iter()
        .filter(|e| e.kind == OutputKind::Pairs)
        .map(|e| {
            let p: Value = serde_json::from_slice(&e.value).unwrap();
            format!("{} {} {}", p["state"], p["a"], p["b"])
        })
        .collect();
    (pairs, topo)
}

#[test]
fn one_record_from_the_future_moves_no_window() {
    let mut lines = mirrored(0, 0, 10);
    let clean_second_half = mirrored(1, 0, 10);
    lines.extend(clean_second_half.iter().take(6).cloned());
    let (want, clean) = run(&[lines.clone(), clean_second_half[6..].to_vec()].concat());
    assert_eq!(
        want.len(),
        10,
        "the ten mirrored pages pair, nothing is retracted"
    );

    // The same stream with one page dated a century ahead in the middle.
    let mut future = String::from_utf8(record(
        "http://z.example/clock-off.html",
        0,
        0,
        200,
        "192.0.2.9",
        "<p>a fetcher whose clock is off</p>",
    ))
    .unwrap();
    future = future.replace("2026-11-02", "2126-11-02");
    lines.push(future.into_bytes());
    lines.extend(clean_second_half[6..].iter().cloned());
    let (got, topo) = run(&lines);
    assert_eq!(got, want, "the same pairs, none retracted");
    assert_eq!(topo.event_time_leaps(), 1);
    assert_eq!(topo.watermark_ms(), clean.watermark_ms());
    assert_eq!(
        topo.near_stats().stale,
        0,
        "the records after it are not stale"
    );
    assert_eq!(topo.near_stats().pages, clean.near_stats().pages + 1);
    // The page was filed at the newest trusted time, not at its own date: a fetch of its URL
    // dated as it should be replaces it, and is not ignored as older.
    let mut refetch = lines.clone();
    refetch.push(record(
        "http://z.example/clock-off.html",
        2,
        0,
        200,
        "192.0.2.9",
        "<p>the same page, fetched by a fetcher whose clock is right</p>",
    ));
    let (_, topo) = run(&refetch);
    assert_eq!(topo.near_stats().stale, 0);
    assert_eq!(topo.near_stats().pages, clean.near_stats().pages + 1);
    let filed = topo
        .near_index()
        .window()
        .find(|(u, _)| u.starts_with("http://z.example"))
        .map(|(_, at)| at);
    assert_eq!(
        filed,
        Some(neardup_topology::parse_time("2026-11-04T00:00:00Z").unwrap())
    );
}

#[test]
fn a_first_record_from_the_future_is_outvoted() {
    // Day 0 and, past the window, day 20: the old pages must leave on the new day's records.
    let mut clean = mirrored(0, 0, 10);
    clean.extend(mirrored(20, 0, 10));
    let (want, clean_topo) = run(&clean);
    assert!(want.iter().any(|p| p.starts_with("\"retracted\"")));

    let future = String::from_utf8(record(
        "http://z.example/clock-off.html",
        0,
        0,
        200,
        "192.0.2.9",
        "<p>the very first record, from a fetcher whose clock is off</p>",
    ))
    .unwrap()
    .replace("2026-11-02", "2126-11-02");
    let lines = [vec![future.into_bytes()], clean].concat();
    let (got, topo) = run(&lines);
    assert_eq!(got, want, "the same pairs, retracted when they should be");
    assert_eq!(topo.watermark_ms(), clean_topo.watermark_ms());
    assert_eq!(
        topo.near_stats().stale,
        0,
        "the records after it are not stale"
    );
}

#[test]
fn a_pause_longer_than_the_window_still_moves_it_once_enough_records_agree() {
    let mut lines = mirrored(0, 0, 10);
    // Twenty days later (the window is fourteen), other pages: the clock follows on the
    // LEAP_RECORDS-th of them, and the old pages leave the window, their pairs retracted.
    let later: Vec<Vec<u8>> = (0..LEAP_RECORDS as usize + 4)
        .map(|i| {
            let body = format!("<p>{}</p>", prose(900 + i as u64, 200));
            record(
                &format!("http://c.example/{i}.html"),
                20,
                i,
                200,
                "192.0.2.3",
                &body,
            )
        })
        .collect();
    let (before, _) = run(&[lines.clone(), later[..LEAP_RECORDS as usize - 1].to_vec()].concat());
    assert!(
        before.iter().all(|p| p.starts_with("\"detected\"")),
        "held: nothing leaves before the {LEAP_RECORDS}th record: {before:?}"
    );
    lines.extend(later);
    let (pairs, topo) = run(&lines);
    let retracted = pairs
        .iter()
        .filter(|p| p.starts_with("\"retracted\""))
        .count();
    assert_eq!(retracted, 10, "{pairs:?}");
    assert_eq!(topo.event_time_leaps(), u64::from(LEAP_RECORDS) - 1);
    // The records held back were filed at the old time, so they leave with the old pages: the
    // price of not trusting a leap's date (they come back when fetched again). The one that
    // completed the leap and those after it stay.
    assert_eq!(
        topo.near_stats().pages,
        5,
        "only the new pages from the LEAP_RECORDS-th on are in the window"
    );
}
