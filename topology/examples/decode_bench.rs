//! How long decoding a crawl record takes (every field checked, the body unescaped), on one
//! core: the median of 7 passes over the first 20,000 records of a file.
//!
//! ```sh
//! cargo run --release -p neardup-topology --example decode_bench -- crawl/events.jsonl
//! ```
//!
//! A page the sign cache knows skips the body's unescaping (its JSON text is only searched for
//! its end); this measures the whole of decoding, what a page fetched for the first time costs.

use neardup_topology::{decode, DecodeLimits};
use std::io::BufRead;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: decode_bench EVENTS.jsonl");
    let file = std::io::BufReader::new(std::fs::File::open(&path).expect("open the events file"));
    let lines: Vec<Vec<u8>> = file
        .split(b'\n')
        .take(20_000)
        .map(|l| l.expect("read a line"))
        .collect();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let limits = DecodeLimits::default();
    let mut times = vec![];
    for _ in 0..7 {
        let t = std::time::Instant::now();
        let mut body_bytes = 0usize;
        for l in &lines {
            if let Ok(p) = decode(l, &limits) {
                body_bytes += p.body.map_or(0, |b| b.raw().len());
            }
        }
        std::hint::black_box(body_bytes);
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let t = times[times.len() / 2];
    println!(
        "decode: {:.1} us per record, {:.0} MB/s ({} records, {:.1} KB each)",
        t * 1e6 / lines.len() as f64,
        bytes as f64 / t / 1e6,
        lines.len(),
        bytes as f64 / lines.len() as f64 / 1e3
    );
}
