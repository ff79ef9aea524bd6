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
