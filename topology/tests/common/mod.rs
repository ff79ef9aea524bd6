//! Helpers shared by the topology's integration tests.
#![allow(dead_code)]

/// Deterministic prose: `words` pseudo-words drawn from a 4,096-word vocabulary by `seed`.
pub fn prose(seed: u64, words: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "bi", "da", "fu", "go", "ha", "ji", "ko",
        "pe",
    ];
    (0..words)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
            (0..3)
                .map(|i| syllables[((r >> (4 * i)) & 15) as usize])
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Processes `lines` in order, as lines 1, 2, ... of a file named `file`, their outputs to
/// `out`.
pub fn feed(
    topo: &mut neardup_topology::Topology,
    lines: &[Vec<u8>],
    file: &str,
    out: &mut Vec<neardup_topology::Emit>,
) {
    for (i, line) in lines.iter().enumerate() {
        let source = neardup_schemas::Source::File {
            file: file.into(),
            line: i as u64 + 1,
        };
        topo.process(line, &source, out);
    }
}

/// One page event (JSON line) fetched on day `day` of November 2026 at `second` past midnight.
pub fn record(url: &str, day: u32, second: usize, status: u16, ip: &str, body: &str) -> Vec<u8> {
    serde_json::json!({
        "url": url,
        "fetched_at": format!("2026-11-{:02}T{:02}:{:02}:{:02}Z", 2 + day, second / 3600, second / 60 % 60, second % 60),
        "status": status,
        "content_type": "text/html; charset=utf-8",
        "ip": ip,
        "crawl_id": format!("week-{:02}", day / 7 + 1),
        "body": body,
    })
    .to_string()
    .into_bytes()
}

/// Every stateful part of the topology switched on (windows, both cluster levels, hints with
/// in-link ranking, mirrors, collections, the Hyperlink Map veto, evolution).
pub fn everything_on() -> neardup_topology::Config {
    neardup_topology::Config {
        collections: true,
        track_evolution: true,
        hm_veto: Some(neardup_topology::replicas::HmVeto::new(0.2)),
        canonical: "inlinks,earliest"
            .parse::<neardup_topology::clusters::CanonicalPolicy>()
            .expect("policy"),
        ..neardup_topology::Config::default()
    }
}

/// Three weekly rounds of two sites' manuals, each mirrored on another host, with near-duplicate
/// editions, links between pages, changes, 404s, garbage and finally a jump past the window.
pub fn mixed_stream() -> Vec<Vec<u8>> {
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
                // A page vanishes, one redirects, one is revalidated (304: unchanged, no body)
                // and one is down for a moment (503, with an error page that is not content).
                let status = match (round, h, i) {
                    (2, 3, 7) => 404,
                    (2, 0, 8) => 301,
                    (2, 1, 2) | (1, 0, 4) => 304,
                    (2, 2, 6) => 503,
                    _ => 200,
                };
                let body = match status {
                    200 => template(site, i, &text, &links),
                    503 => "<p>Service unavailable</p>".to_owned(),
                    _ => String::new(),
                };
                lines.push(record(&url, day, second, status, ip, &body));
                second += 7;
                if (h, i) == (0, 4) && round < 2 {
                    // An exact copy elsewhere, revalidated with its original in round 1: the
                    // 304s keep the pair in the window until round 2 fetches the original.
                    let (status, body) = if round == 0 { (200, &*body) } else { (304, "") };
                    let copy = "http://copies.example/alpha/p4.html";
                    lines.push(record(copy, day, second, status, "192.0.2.50", body));
                    second += 7;
                }
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
    // A jump that far is a leap (the clock module): it moves the windows only on the 16th
    // record in a row that makes it.
    for i in 0..20usize {
        let url = format!("http://late.example/p{i}.html");
        let body = format!("<p>{}</p>", prose(5 + (i / 2) as u64, 150));
        lines.push(record(&url, 40, i, 200, "192.0.2.99", &body));
    }
    lines
}

/// The three URLs of [`revalidated_stream`].
pub const REVALIDATED: (&str, &str, &str) = (
    "http://a.example/p.html",
    "http://b.example/p.html",
    "http://c.example/p.html",
);

/// Three pages fetched on day 0: a and c the same, b the same too or, `edited`, with one more
/// line. Then b is revalidated every day (304) and c's server fails every day (503), until day
/// 14, when the window (14 days) has passed a's and c's fetches (record 29, b's 304 at
/// 00:00:30, moves the clock there). On day 15 a is fetched again (record 31).
pub fn revalidated_stream(edited: bool) -> Vec<Vec<u8>> {
    let text = prose(43, 300);
    let body = format!("<p>{text}</p>");
    let b_body = if edited {
        format!("<p>{text} and a last line</p>")
    } else {
        body.clone()
    };
    let (a, b, c) = REVALIDATED;
    let ip = "192.0.2.1";
    let mut records = vec![
        record(a, 0, 10, 200, ip, &body),
        record(b, 0, 20, 200, ip, &b_body),
        record(c, 0, 25, 200, ip, &body),
    ];
    for day in 1..=14 {
        records.push(record(b, day, 30, 304, ip, ""));
        records.push(record(c, day, 40, 503, ip, ""));
    }
    records.push(record(a, 15, 50, 200, ip, &body));
    records
}

/// `pages` distinct pages, each fetched on two hosts with the same body (an exact pair) and
/// linking to three others, all on the first day, ten seconds apart.
pub fn exact_copies_stream(pages: usize) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for i in 0..pages {
        let links: String = (1..=3)
            .map(|k| format!("<a href=\"/p{}.html\">more</a>", (i + k) % pages))
            .collect();
        let body = format!(
            "<html><head><title>Page {i}</title></head><body>{links}<p>{}</p></body></html>",
            prose(5_000 + i as u64, 200)
        );
        for (h, host) in ["http://one.example", "http://two.example"]
            .iter()
            .enumerate()
        {
            let url = format!("{host}/p{i}.html");
            lines.push(record(&url, 0, 10 * (2 * i + h), 200, "192.0.2.9", &body));
        }
    }
    lines
}

/// The small benchmark crawl's directory (`NEARDUP_BENCH_SMALL`, made by `make_crawl.py --scale
/// small --rounds 1`; `tests/run-all.sh` sets it). None, with a line saying so, when
/// `NEARDUP_SKIP_BENCH` is set instead; a failure saying how to make it when neither is.
pub fn small_crawl() -> Option<std::path::PathBuf> {
    let Some(dir) = std::env::var_os("NEARDUP_BENCH_SMALL") else {
        if std::env::var_os("NEARDUP_SKIP_BENCH").is_some() {
            eprintln!("skipped: NEARDUP_SKIP_BENCH is set");
            return None;
        }
        panic!(
            "NEARDUP_BENCH_SMALL is not set: generate the small crawl with \
             python3 ../shared/bench/make_crawl.py --scale small --rounds 1 --out DIR \
             and set NEARDUP_BENCH_SMALL=DIR (tests/run-all.sh does both)"
        );
    };
    Some(dir.into())
}
