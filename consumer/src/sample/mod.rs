//! A small, deterministic sample crawl stream for `neardup demo` and the integration tests.
//!
//! The stream follows the input contract of `crawl.pages` (one JSON object per record, fields in
//! the order `url`, `fetched_at`, `status`, `content_type`, `ip`, `crawl_id`, `body` /
//! `body_base64`) and simulates a handful of hosts over weekly crawl rounds (`week-01`, ...,
//! round r starting 2026-11-02T00:00:00Z + 7 days × (r − 1)):
//!
//! - `www.docs.example` (`/manual/`): the primary copy of a documentation collection — HTML pages
//!   with a title, a style block, a script, a comment, a nav of relative and absolute links, 3–6
//!   paragraphs of prose (80–300 words) with entities (`&amp;`, `&lt;`, `&eacute;`, `&#233;`) and
//!   non-ASCII letters;
//! - `mirror1.example` (`/docs/`): an exact mirror (byte-identical pages); it syncs the file list
//!   every round but picks up modified files one round late;
//! - `mirror2.example` (`/pub/manual/`): a banner mirror that stopped syncing after round 1 — the
//!   round-1 pages with a one-line banner after `<body>`: near-duplicates, never byte-identical;
//! - `latin.example` (`/notes/`): three unique pages sent as `body_base64`, ISO-8859-1 bytes;
//! - `blog.example` (`/posts/`): unique background pages sharing one template.
//!
//! From round 2 on, each round one primary page changes by one sentence, one primary page vanishes
//! (404 on the primary and on `mirror1.example` that round and the next, then it is no longer
//! fetched), one `mirror1.example` page fails with status 0, a new page appears on the primary
//! and `mirror1.example`, and one blog post vanishes (410) while a new one appears.
//!
//! Malformed records are interleaved in the stream, each with exactly one defect and the
//! dead-letter reason neardup must give ([`SampleCrawl::bad_records`]); every reason except
//! `body_too_large` occurs at least once. [`SampleCrawl::exact_groups`] is computed from the bytes
//! generated, not assumed.
//!
//! Everything is synthetic and licence-clean: the prose is assembled from a word list and sentence
//! templates written for this module, driven by an inline splitmix64 generator, so the same
//! [`SampleOptions`] always give byte-identical records and no two pages share prose unless one is
//! a deliberate copy. All hosts are under `.example` and all addresses are TEST-NET addresses.

use std::collections::HashSet;

mod blog;
mod docs;
mod hosts;
mod malformed;
mod prose;
mod records;
mod rng;

use blog::*;
use docs::*;
use hosts::*;
use malformed::*;
use prose::*;
pub use records::record_key;
use records::*;
use rng::*;

/// A generated sample crawl: the records to publish and what a correct neardup must find in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleCrawl {
    /// The input records in stream order: each one JSON line (without the trailing newline), as bytes.
    pub records: Vec<Vec<u8>>,
    /// Groups of URLs whose bodies are byte-identical, per crawl round: (crawl_id, sorted urls), each group sorted, groups sorted.
    pub exact_groups: Vec<(String, Vec<String>)>,
    /// Indices into `records` of the malformed records, with the reason neardup must give (snake_case names below).
    pub bad_records: Vec<(usize, &'static str)>,
}

/// What to generate; the same options always give byte-identical records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleOptions {
    /// Seed of every random choice (page names, prose, stream order).
    pub seed: u64,
    /// Number of weekly crawl rounds (`week-01`, `week-02`, ...).
    pub rounds: u32,
    /// Pages of the primary documentation host in round 1 (the blog has four times as many).
    pub pages_per_host: usize,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions {
            seed: 7,
            rounds: 2,
            pages_per_host: 12,
        }
    }
}

/// Generates the sample crawl stream described in the module documentation.
pub fn sample_crawl(opts: &SampleOptions) -> SampleCrawl {
    let seed = opts.seed;
    let mut slugs = HashSet::new();
    let mut docs = initial_docs(seed, opts.pages_per_host, &mut slugs);
    let mut posts: Vec<PostState> = (0..opts.pages_per_host * 4)
        .map(|id| PostState::new(blog_post(seed, id, &mut slugs)))
        .collect();
    let latin = latin_pages(seed);

    // Good fetches of every round, in stream order, with their crawl id and time.
    let mut good: Vec<Timed> = Vec::new();
    for round in 1..=opts.rounds {
        let mut rng = Rng::new(sub_seed(seed, "round", u64::from(round)));
        let crawl_id = format!("week-{round:02}");
        let mut down_page = None;
        // Revisions as of the previous round: what mirror1 serves for pages it already had.
        let synced: Vec<u32> = docs.iter().map(|d| d.revision).collect();
        if round >= 2 {
            down_page = evolve_docs(&mut rng, seed, round, &mut docs, &mut slugs);
            evolve_blog(&mut rng, seed, round, &mut posts, &mut slugs);
        }

        let mut primary = Vec::new();
        let mut mirror1 = Vec::new();
        let mut mirror2 = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let key = format!("doc/{}", doc.page.id);
            // The banner mirror stopped syncing after round 1: it keeps serving what it had.
            if doc.born == 1 {
                let url = format!("http://{}{}{}", MIRROR2.name, MIRROR2.prefix, doc.page.path);
                let body = render_doc(&doc.page, 0).replacen(
                    "<body>\n",
                    &format!("<body>\n{BANNER}\n"),
                    1,
                );
                mirror2.push(Fetch::html(url, &MIRROR2, body, &key));
            }
            let gone = match doc.vanished_in {
                Some(v) if round >= v + 2 => continue,
                Some(_) => true,
                None => false,
            };
            let url_p = format!("http://{}{}{}", PRIMARY.name, PRIMARY.prefix, doc.page.path);
            let url_m = format!("http://{}{}{}", MIRROR1.name, MIRROR1.prefix, doc.page.path);
            if gone {
                primary.push(Fetch::missing(url_p, 404, &PRIMARY, &key));
                mirror1.push(Fetch::missing(url_m, 404, &MIRROR1, &key));
                continue;
            }
            primary.push(Fetch::html(
                url_p,
                &PRIMARY,
                render_doc(&doc.page, doc.revision),
                &key,
            ));
            if down_page == Some(i) {
                mirror1.push(Fetch::down(url_m, &key));
            } else {
                let rev = if doc.born == round {
                    doc.revision
                } else {
                    synced[i]
                };
                mirror1.push(Fetch::html(
                    url_m,
                    &MIRROR1,
                    render_doc(&doc.page, rev),
                    &key,
                ));
            }
        }
        let mut blog = Vec::new();
        for post in &posts {
            let url = format!("http://{}{}{}", BLOG.name, BLOG.prefix, post.page.path);
            let key = format!("post/{}", post.page.id);
            match post.vanished_in {
                Some(v) if round >= v + 2 => {}
                Some(_) => blog.push(Fetch::missing(url, 410, &BLOG, &key)),
                None => {
                    let mut fetch = Fetch::html(url, &BLOG, render_post(&post.page), &key);
                    // A few optional-field variants: sniff the charset, or no address recorded.
                    match post.page.id % 17 {
                        5 => fetch.content_type = None,
                        9 => fetch.content_type = Some("text/html"),
                        13 => fetch.ip = None,
                        _ => {}
                    }
                    blog.push(fetch);
                }
            }
        }
        let mut queues = vec![primary, mirror1, mirror2, latin.clone(), blog];
        for q in &mut queues {
            crawl_order(&mut rng, q);
        }
        let ordered = interleave(&mut rng, queues);
        let mut at = round_start(round);
        for (n, fetch) in ordered.into_iter().enumerate() {
            if n > 0 {
                at += 1 + rng.below(3) as i64;
            }
            good.push(Timed {
                crawl_id: crawl_id.clone(),
                fetched_at: rfc3339(at),
                fetch,
            });
        }
    }

    let exact_groups = exact_groups_of(&good);
    let (records, bad_records) = assemble(seed, &good);
    SampleCrawl {
        records,
        exact_groups,
        bad_records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};
    use std::collections::{BTreeMap, BTreeSet};

    const REASONS: [&str; 11] = [
        "not_json",
        "not_an_object",
        "missing_field",
        "wrong_type",
        "invalid_url",
        "invalid_timestamp",
        "status_out_of_range",
        "invalid_base64",
        "undecodable_body",
        "invalid_utf8",
        "conflicting_body",
    ];

    fn decode_base64(s: &str) -> Option<Vec<u8>> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        };
        let s = s.as_bytes();
        if !s.chunks_exact(4).remainder().is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for (i, quad) in s.chunks(4).enumerate() {
            let last = i + 1 == s.len() / 4;
            let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 || (pad > 0 && !last) {
                return None;
            }
            let mut n = 0u32;
            for &c in &quad[..4 - pad] {
                n = (n << 6) | u32::from(value(c)?);
            }
            n <<= 6 * pad as u32;
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        Some(out)
    }

    /// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` timestamp.
    fn parse_time(s: &str) -> Option<i64> {
        let b = s.as_bytes();
        let shape_ok = b.len() == 20
            && b.iter().enumerate().all(|(i, &c)| match i {
                4 | 7 => c == b'-',
                10 => c == b'T',
                13 | 16 => c == b':',
                19 => c == b'Z',
                _ => c.is_ascii_digit(),
            });
        if !shape_ok {
            return None;
        }
        let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 59 {
            return None;
        }
        Some(days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3_600 + mi * 60 + se)
    }

    fn host_of(url: &str) -> Option<&str> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))?;
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        (!host.is_empty() && !url.contains(char::is_whitespace)).then_some(host)
    }

    fn test_net(ip: &str) -> bool {
        ["192.0.2.", "198.51.100.", "203.0.113."].iter().any(|net| {
            ip.strip_prefix(net)
                .is_some_and(|last| last.parse::<u8>().is_ok_and(|n| n.to_string() == last))
        })
    }

    /// Every contract violation of one record, named by the dead-letter reason it maps to.
    fn defects(line: &[u8]) -> BTreeSet<&'static str> {
        let mut d = BTreeSet::new();
        let Ok(text) = std::str::from_utf8(line) else {
            d.insert("invalid_utf8");
            return d;
        };
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            d.insert("not_json");
            return d;
        };
        let Some(obj) = value.as_object() else {
            d.insert("not_an_object");
            return d;
        };
        for field in ["url", "fetched_at", "status"] {
            if !obj.contains_key(field) {
                d.insert("missing_field");
            }
        }
        for field in [
            "url",
            "fetched_at",
            "content_type",
            "ip",
            "crawl_id",
            "body",
            "body_base64",
        ] {
            if obj.get(field).is_some_and(|v| !v.is_string()) {
                d.insert("wrong_type");
            }
        }
        if obj.get("status").is_some_and(|v| !v.is_u64()) {
            d.insert("wrong_type");
        }
        if let Some(url) = obj.get("url").and_then(Value::as_str) {
            if host_of(url).is_none() {
                d.insert("invalid_url");
            }
        }
        if let Some(at) = obj.get("fetched_at").and_then(Value::as_str) {
            if parse_time(at).is_none() {
                d.insert("invalid_timestamp");
            }
        }
        if let Some(status) = obj.get("status").and_then(Value::as_u64) {
            if status != 0 && !(100..=599).contains(&status) {
                d.insert("status_out_of_range");
            }
        }
        if obj.contains_key("body") && obj.contains_key("body_base64") {
            d.insert("conflicting_body");
        }
        if let Some(b64) = obj.get("body_base64").and_then(Value::as_str) {
            match decode_base64(b64) {
                None => {
                    d.insert("invalid_base64");
                }
                Some(bytes) => {
                    let ct = obj
                        .get("content_type")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let utf8 = !ct.to_ascii_lowercase().contains("iso-8859-1");
                    if utf8 && std::str::from_utf8(&bytes).is_err() {
                        d.insert("undecodable_body");
                    }
                }
            }
        }
        d
    }

    fn good_objects(sample: &SampleCrawl) -> Vec<(usize, Map<String, Value>)> {
        let bad: HashSet<usize> = sample.bad_records.iter().map(|&(i, _)| i).collect();
        sample
            .records
            .iter()
            .enumerate()
            .filter(|(i, _)| !bad.contains(i))
            .map(|(i, r)| match serde_json::from_slice::<Value>(r) {
                Ok(Value::Object(obj)) => (i, obj),
                other => panic!("record {i} is not a JSON object: {other:?}"),
            })
            .collect()
    }

    fn raw_body(obj: &Map<String, Value>) -> Option<Vec<u8>> {
        if let Some(text) = obj.get("body").and_then(Value::as_str) {
            return Some(text.as_bytes().to_vec());
        }
        obj.get("body_base64")
            .and_then(Value::as_str)
            .map(|b| decode_base64(b).expect("valid base64"))
    }

    fn str_of<'a>(obj: &'a Map<String, Value>, field: &str) -> &'a str {
        obj.get(field)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{field} missing in {obj:?}"))
    }

    fn option_sets() -> Vec<SampleOptions> {
        vec![
            SampleOptions::default(),
            SampleOptions {
                seed: 1,
                rounds: 4,
                pages_per_host: 12,
            },
            SampleOptions {
                seed: 99,
                rounds: 3,
                pages_per_host: 3,
            },
            SampleOptions {
                seed: 5,
                rounds: 3,
                pages_per_host: 1,
            },
            SampleOptions {
                seed: 5,
                rounds: 1,
                pages_per_host: 0,
            },
            SampleOptions {
                seed: u64::MAX,
                rounds: 5,
                pages_per_host: 20,
            },
        ]
    }

    #[test]
    fn same_options_give_identical_records() {
        for opts in option_sets() {
            assert_eq!(sample_crawl(&opts), sample_crawl(&opts));
        }
        assert_ne!(
            sample_crawl(&SampleOptions::default()).records,
            sample_crawl(&SampleOptions {
                seed: 8,
                ..SampleOptions::default()
            })
            .records
        );
    }

    #[test]
    fn default_size_is_small() {
        let sample = sample_crawl(&SampleOptions::default());
        let n = sample.records.len();
        assert!((150..=250).contains(&n), "{n} records");
    }

    #[test]
    fn good_records_follow_the_contract() {
        let expected_keys = [
            "url",
            "fetched_at",
            "status",
            "content_type",
            "ip",
            "crawl_id",
            "body",
            "body_base64",
        ];
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            for (i, obj) in good_objects(&sample) {
                assert!(
                    defects(&sample.records[i]).is_empty(),
                    "record {i}: {:?}",
                    defects(&sample.records[i])
                );
                // Field order as in the contract, no unknown fields.
                assert!(
                    obj.keys().all(|k| expected_keys.contains(&k.as_str())),
                    "{obj:?}"
                );
                let line = std::str::from_utf8(&sample.records[i]).unwrap();
                let positions: Vec<usize> = expected_keys
                    .iter()
                    .filter(|k| obj.contains_key(**k))
                    .map(|k| line.find(&format!("\"{k}\":")).unwrap())
                    .collect();
                assert!(
                    positions.windows(2).all(|w| w[0] < w[1]),
                    "field order in {line:.160}"
                );

                let url = str_of(&obj, "url");
                assert!(host_of(url).unwrap().ends_with(".example"), "{url}");
                let crawl_id = str_of(&obj, "crawl_id");
                assert!(crawl_id.starts_with("week-"));
                let status = obj["status"].as_u64().unwrap();
                assert!([200, 404, 410, 0].contains(&status));
                let has_body = obj.contains_key("body") || obj.contains_key("body_base64");
                assert_eq!(has_body, status == 200, "{url} status {status}");
                if status == 0 {
                    assert!(!obj.contains_key("ip"));
                }
                if let Some(ip) = obj.get("ip") {
                    assert!(test_net(ip.as_str().unwrap()), "{ip}");
                }
                if obj.contains_key("body_base64") {
                    assert_eq!(str_of(&obj, "content_type"), LATIN1_HTML);
                    let bytes = raw_body(&obj).unwrap();
                    assert!(
                        bytes.contains(&0xE9) && bytes.contains(&0xFC),
                        "{url}: é and ü in Latin-1"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_records_have_exactly_their_one_defect() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            for &(i, reason) in &sample.bad_records {
                let found = defects(&sample.records[i]);
                assert_eq!(
                    found,
                    BTreeSet::from([reason]),
                    "record {i}: {:?}",
                    String::from_utf8_lossy(&sample.records[i])
                );
            }
            let seen: BTreeSet<&str> = sample.bad_records.iter().map(|&(_, r)| r).collect();
            assert_eq!(seen, REASONS.iter().copied().collect::<BTreeSet<_>>());
            let lines: HashSet<&[u8]> = sample
                .bad_records
                .iter()
                .map(|&(i, _)| sample.records[i].as_slice())
                .collect();
            assert!(
                lines.contains(&b"{}"[..])
                    && lines.contains(&b"[1,2]"[..])
                    && lines.contains(&b"null"[..])
            );
            // Interleaved: never the first record, never two in a row (with enough good records).
            if sample.records.len() > 3 * sample.bad_records.len() {
                assert!(sample.bad_records.windows(2).all(|w| w[1].0 > w[0].0 + 1));
                assert!(sample.bad_records[0].0 > 0);
            }
        }
    }

    #[test]
    fn fetch_times_increase_by_one_to_three_seconds() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            let mut prev: Option<(String, i64)> = None;
            for (_, obj) in good_objects(&sample) {
                let crawl_id = str_of(&obj, "crawl_id").to_string();
                let at = parse_time(str_of(&obj, "fetched_at")).unwrap();
                let round: i64 = crawl_id["week-".len()..].parse().unwrap();
                let start = round_start(round as u32);
                assert!((start..start + 86_400).contains(&at));
                match &prev {
                    Some((id, t)) if *id == crawl_id => {
                        assert!((1..=3).contains(&(at - t)), "{t} -> {at}")
                    }
                    Some((_, t)) => assert!(at > *t && at == start),
                    None => assert_eq!(at, start),
                }
                prev = Some((crawl_id, at));
            }
        }
    }

    #[test]
    fn exact_groups_match_an_independent_recomputation() {
        for opts in option_sets() {
            let sample = sample_crawl(&opts);
            let mut by_body: BTreeMap<(String, Vec<u8>), BTreeSet<String>> = BTreeMap::new();
            let mut rounds = BTreeSet::new();
            for (_, obj) in good_objects(&sample) {
                rounds.insert(str_of(&obj, "crawl_id").to_string());
                if obj["status"] == 200 {
                    let key = (
                        str_of(&obj, "crawl_id").to_string(),
                        raw_body(&obj).unwrap(),
                    );
                    assert!(by_body
                        .entry(key)
                        .or_default()
                        .insert(str_of(&obj, "url").to_string()));
                }
            }
            let mut expected: Vec<(String, Vec<String>)> = by_body
                .into_iter()
                .filter(|(_, urls)| urls.len() > 1)
                .map(|((id, _), urls)| (id, urls.into_iter().collect()))
                .collect();
            expected.sort();
            assert_eq!(sample.exact_groups, expected);
            if opts.pages_per_host > 0 {
                let with_groups: BTreeSet<String> = sample
                    .exact_groups
                    .iter()
                    .map(|(id, _)| id.clone())
                    .collect();
                assert_eq!(with_groups, rounds, "every round has exact groups");
            }
            // Only the primary and its exact mirror are ever byte-identical.
            for (_, urls) in &sample.exact_groups {
                let hosts: Vec<&str> = urls.iter().map(|u| host_of(u).unwrap()).collect();
                assert_eq!(hosts, ["mirror1.example", "www.docs.example"], "{urls:?}");
                let paths: BTreeSet<&str> = urls
                    .iter()
                    .map(|u| {
                        u.split_once("/manual/")
                            .or(u.split_once("/docs/"))
                            .unwrap()
                            .1
                    })
                    .collect();
                assert_eq!(paths.len(), 1, "{urls:?}");
            }
        }
    }

    #[test]
    fn copies_are_never_neighbours() {
        for opts in option_sets().into_iter().filter(|o| o.pages_per_host >= 3) {
            let sample = sample_crawl(&opts);
            let objs = good_objects(&sample);
            for w in objs.windows(2) {
                if let (Some(a), Some(b)) = (raw_body(&w[0].1), raw_body(&w[1].1)) {
                    assert!(
                        a != b,
                        "{opts:?}: {} next to {}",
                        str_of(&w[0].1, "url"),
                        str_of(&w[1].1, "url")
                    );
                }
            }
        }
    }

    #[test]
    fn later_rounds_change_vanish_fail_and_grow() {
        let sample = sample_crawl(&SampleOptions::default());
        let objs = good_objects(&sample);
        let round = |id: &str| -> BTreeMap<String, (u64, Option<Vec<u8>>)> {
            objs.iter()
                .filter(|(_, o)| str_of(o, "crawl_id") == id)
                .map(|(_, o)| {
                    (
                        str_of(o, "url").to_string(),
                        (o["status"].as_u64().unwrap(), raw_body(o)),
                    )
                })
                .collect()
        };
        let (r1, r2) = (round("week-01"), round("week-02"));
        let count = |r: &BTreeMap<String, (u64, Option<Vec<u8>>)>, host: &str, status: u64| {
            r.iter()
                .filter(|(u, (s, _))| host_of(u) == Some(host) && *s == status)
                .count()
        };
        assert_eq!(count(&r1, "www.docs.example", 200), 12);
        assert_eq!(count(&r1, "mirror1.example", 200), 12);
        assert_eq!(count(&r1, "mirror2.example", 200), 12);
        assert_eq!(count(&r1, "latin.example", 200), 3);
        assert_eq!(count(&r1, "blog.example", 200), 48);
        assert_eq!(count(&r2, "www.docs.example", 404), 1);
        assert_eq!(count(&r2, "mirror1.example", 404), 1);
        assert_eq!(count(&r2, "mirror1.example", 0), 1);
        assert_eq!(count(&r2, "blog.example", 410), 1);
        assert_eq!(count(&r2, "www.docs.example", 200), 12);
        // Exactly one primary page changed, by one sentence.
        let changed: Vec<&String> = r2
            .iter()
            .filter(|(u, (s, b))| {
                host_of(u) == Some("www.docs.example")
                    && *s == 200
                    && r1.get(*u).is_some_and(|old| &old.1 != b)
            })
            .map(|(u, _)| u)
            .collect();
        assert_eq!(changed.len(), 1);
        let old = String::from_utf8(r1[changed[0]].1.clone().unwrap()).unwrap();
        let new = String::from_utf8(r2[changed[0]].1.clone().unwrap()).unwrap();
        let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
            (old.lines().collect(), new.lines().collect());
        assert_eq!(old_lines.len(), new_lines.len());
        assert_eq!(
            old_lines
                .iter()
                .zip(&new_lines)
                .filter(|(a, b)| a != b)
                .count(),
            1
        );
        // mirror1 still serves the old bytes of the changed page.
        let mirror_url = changed[0].replace("www.docs.example/manual/", "mirror1.example/docs/");
        if r2[&mirror_url].0 == 200 {
            assert_eq!(r2[&mirror_url].1.as_deref(), Some(old.as_bytes()));
        }
        // A new page on the primary and mirror1, not on the banner mirror.
        let new_urls: Vec<&String> = r2.keys().filter(|u| !r1.contains_key(*u)).collect();
        let new_hosts: BTreeSet<&str> = new_urls.iter().map(|u| host_of(u).unwrap()).collect();
        assert_eq!(
            new_hosts,
            BTreeSet::from(["blog.example", "mirror1.example", "www.docs.example"])
        );
    }

    #[test]
    fn banner_mirror_is_near_but_not_exact() {
        let sample = sample_crawl(&SampleOptions::default());
        let objs = good_objects(&sample);
        let bodies: BTreeMap<(String, String), Vec<u8>> = objs
            .iter()
            .filter(|(_, o)| o["status"] == 200)
            .map(|(_, o)| {
                (
                    (
                        str_of(o, "crawl_id").to_string(),
                        str_of(o, "url").to_string(),
                    ),
                    raw_body(o).unwrap(),
                )
            })
            .collect();
        let mut checked = 0;
        for ((round, url), body) in &bodies {
            if host_of(url) != Some("mirror2.example") {
                continue;
            }
            let text = String::from_utf8(body.clone()).unwrap();
            assert!(text.contains("class=\"mirror-banner\""));
            let primary = url.replace("mirror2.example/pub/manual/", "www.docs.example/manual/");
            if let Some(p) = bodies.get(&(round.clone(), primary)) {
                assert_ne!(p, body);
            }
            let r1 = bodies[&(
                "week-01".to_string(),
                url.replace("mirror2.example/pub/manual/", "www.docs.example/manual/"),
            )]
                .clone();
            assert_eq!(
                text.replacen(&format!("{BANNER}\n"), "", 1).as_bytes(),
                &r1[..]
            );
            checked += 1;
        }
        assert_eq!(checked, 24);
    }

    #[test]
    fn doc_pages_have_the_promised_markup() {
        let sample = sample_crawl(&SampleOptions::default());
        for (_, obj) in good_objects(&sample) {
            let url = str_of(&obj, "url");
            if host_of(url) != Some("www.docs.example") || obj["status"] != 200 {
                continue;
            }
            let body = str_of(&obj, "body");
            for needle in [
                "<title>",
                "<style>",
                "<script>",
                "<!--",
                "<nav",
                "href=\"http://",
                "&amp;",
                "&lt;",
                "&eacute;",
                "&#233;",
            ] {
                assert!(body.contains(needle), "{url} lacks {needle}");
            }
            assert!(body.contains("<a href=\"") && body.matches("<p>").count() >= 3);
            let prose_text: String = body
                .split("<p>")
                .skip(1)
                .map(|p| p.split("</p>").next().unwrap())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(!prose_text.is_ascii(), "{url}: non-ASCII letters");
        }
    }

    #[test]
    fn prose_has_three_to_six_paragraphs_of_80_to_300_words() {
        let mut seen = HashSet::new();
        for seed in 0..500 {
            for revision in 0..3 {
                let paras = prose(seed, revision, &SPECIALS_UTF8);
                assert!((3..=6).contains(&paras.len()));
                let words: usize = paras
                    .iter()
                    .flatten()
                    .map(|s| s.split_whitespace().count())
                    .sum();
                assert!((80..=300).contains(&words), "seed {seed}: {words} words");
                assert!(
                    seen.insert(paras.concat().join(" ")),
                    "seed {seed} repeats prose"
                );
            }
            let latin = prose(seed, 0, &SPECIALS_LATIN1).concat().join(" ");
            latin1(&latin);
        }
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
            assert_eq!(decode_base64(encoded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_base64(&base64(&all)).unwrap(), all);
    }

    #[test]
    fn timestamps_format_as_rfc_3339() {
        assert_eq!(rfc3339(round_start(1)), "2026-11-02T00:00:00Z");
        assert_eq!(rfc3339(round_start(2) + 3_661), "2026-11-09T01:01:01Z");
        assert_eq!(rfc3339(round_start(9)), "2026-12-28T00:00:00Z");
        assert_eq!(rfc3339(round_start(10)), "2027-01-04T00:00:00Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
