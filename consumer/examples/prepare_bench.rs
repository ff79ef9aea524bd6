//! What preparing a record (decoding it and signing its page) costs on one thread, with the
//! sign cache as `neardup run` keeps it, split by what the record needed:
//!
//! ```sh
//! cargo run --release -p neardup --example prepare_bench -- EVENTS.jsonl [--reps N] \
//!     [--sign-cache SIZE]
//! ```
//!
//! Every pass starts from an empty cache (`--sign-cache`, 256MiB as in `neardup run`; `0`
//! turns it off) and prepares the file's records in order on this thread, with mimalloc as the
//! allocator, as `neardup run`'s preparing threads do: a page whose URL came before with the
//! same body takes its signatures from the cache ("from the cache"), any other page is decoded
//! and signed ("signed"), and a record without a page to sign (no content, or a dead letter) is
//! the rest. Each record's CPU time is the thread's (user + system). Prints, for `--reps`
//! passes (3 by default), the median pass's count and CPU time per record of each kind, and the
//! whole pass's: what the records cost neardup before the index, the clusters and the Kafka
//! clients add theirs.

#[path = "../../topology/benches/common/events.rs"]
mod events_file;

use cpu_time::ThreadTime;
use neardup::duration::parse_size;
use neardup_topology::sign_cache::SignCache;
use neardup_topology::{Config, Preparer};
use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: prepare_bench EVENTS.jsonl [--reps N] [--sign-cache SIZE]";

/// One pass's records of a kind: how many, and their CPU time.
#[derive(Clone, Copy, Default)]
struct Kind {
    records: u64,
    cpu: Duration,
}

impl Kind {
    fn add(&mut self, cpu: Duration) {
        self.records += 1;
        self.cpu += cpu;
    }

    fn describe(&self, name: &str) -> String {
        let each = if self.records == 0 {
            0.0
        } else {
            self.cpu.as_secs_f64() * 1e6 / self.records as f64
        };
        format!(
            "{name:>16}: {:>7} records, {each:>6.1} µs each, {:>6.2} s",
            self.records,
            self.cpu.as_secs_f64()
        )
    }
}

fn fail(what: &str) -> ! {
    eprintln!("prepare_bench: {what}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut path, mut reps, mut cache_bytes) = (None, 3usize, 256usize << 20);
    let mut i = 0;
    while i < args.len() {
        let value = || {
            args.get(i + 1)
                .unwrap_or_else(|| fail(&format!("{} needs a value", args[i])))
        };
        match args[i].as_str() {
            "--reps" => {
                reps = value()
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .unwrap_or_else(|| fail("--reps takes a number of 1 or more"));
                i += 1;
            }
            "--sign-cache" => {
                cache_bytes = parse_size(value()).unwrap_or_else(|e| fail(&e));
                i += 1;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            a if a.starts_with('-') => fail(&format!("unknown option {a}")),
            a => path = Some(a.to_owned()),
        }
        i += 1;
    }
    let path = path.unwrap_or_else(|| fail("EVENTS.jsonl is required"));
    let file =
        events_file::open(&path).unwrap_or_else(|e| fail(&format!("cannot open {path}: {e}")));
    let lines: Vec<Vec<u8>> = file
        .split(b'\n')
        .map(|l| l.unwrap_or_else(|e| fail(&format!("{path}: {e}"))))
        .filter(|l| !l.is_empty())
        .collect();
    let cfg = Config::default();

    // (from the cache, signed, the rest, the whole pass)
    let mut passes: Vec<[Kind; 4]> = Vec::with_capacity(reps);
    for _ in 0..reps {
        let cache = Arc::new(SignCache::new(cache_bytes, cfg.window_ms));
        let mut preparer = Preparer::with_cache(&cfg, Arc::clone(&cache));
        let mut kinds = [Kind::default(); 4];
        for line in &lines {
            let (hits, misses) = {
                let s = cache.stats();
                (s.hits, s.misses)
            };
            let start = ThreadTime::now();
            let prepared = preparer.prepare(line);
            drop(std::hint::black_box(prepared));
            let cpu = start.elapsed();
            let s = cache.stats();
            let kind = if s.hits > hits {
                0
            } else if s.misses > misses {
                1
            } else {
                2
            };
            kinds[kind].add(cpu);
            kinds[3].add(cpu);
        }
        passes.push(kinds);
    }
    passes.sort_by_key(|k| k[3].cpu);
    let median = passes[passes.len() / 2];
    println!(
        "{} records of {path}, one thread, the sign cache {} (the median of {reps} passes by CPU time):",
        lines.len(),
        if cache_bytes == 0 {
            "off".to_owned()
        } else {
            format!("{} MiB", cache_bytes >> 20)
        }
    );
    for (kind, name) in median
        .iter()
        .zip(["from the cache", "signed", "the rest", "all"])
    {
        println!("{}", kind.describe(name));
    }
}
