//! How long decoding a crawl record takes, on one core: the median of 7 passes over the first
//! 20,000 records of a file, for each way of decoding.
//!
//! ```sh
//! cargo run --release -p neardup-topology --example decode_bench -- crawl/events.jsonl
//! ```
//!
//! - **envelope only**: every field checked but the body, whose JSON string is only searched
//!   for its end; what a page the sign cache knows costs.
//! - **full decode**: the envelope, then the body unescaped (or its base64 decoded); what a page
//!   the cache does not know costs.
//! - **generic decoder**: the whole record parsed into a JSON value (serde_json), the reference
//!   `decode` is tested against and what every record cost before the envelope.

#[path = "../benches/common/events.rs"]
mod events;

use neardup_topology::decode::bench;
use neardup_topology::{decode, DecodeLimits};
use std::io::BufRead;

/// One way of decoding a record: what it gives, reduced to a number the compiler cannot drop.
type Way<'a> = dyn Fn(&[u8]) -> usize + 'a;

fn main() {
    let Some(path) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) else {
        eprintln!("usage: decode_bench EVENTS.jsonl");
        std::process::exit(2);
    };
    let file = events::open(&path).unwrap_or_else(|e| {
        eprintln!("decode_bench: cannot open {path}: {e}");
        std::process::exit(2)
    });
    let lines: Vec<Vec<u8>> = file
        .split(b'\n')
        .take(20_000)
        .map(|l| l.expect("read a line"))
        .collect();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let limits = DecodeLimits::default();
    println!(
        "{} records, {:.1} KB each",
        lines.len(),
        bytes as f64 / lines.len() as f64 / 1e3
    );
    let body_len = |p: Result<neardup_schemas::PageEvent, _>| {
        p.ok().and_then(|p| p.body).map_or(0, |b| b.raw().len())
    };
    let ways: [(&str, &Way); 3] = [
        ("envelope only", &|l| {
            bench::envelope_only(l, &limits) as usize
        }),
        ("full decode", &|l| body_len(decode(l, &limits))),
        ("generic decoder", &|l| body_len(bench::generic(l, &limits))),
    ];
    for (name, way) in ways {
        let mut times = vec![];
        for _ in 0..7 {
            let t = std::time::Instant::now();
            let total: usize = lines.iter().map(|l| way(l)).sum();
            std::hint::black_box(total);
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        println!(
            "{name:>16}: {:5.1} us per record, {:5.0} MB/s",
            t * 1e6 / lines.len() as f64,
            bytes as f64 / t / 1e6,
        );
    }
}
