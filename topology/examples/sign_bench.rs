//! The signature figures users care about, measured on one core in one run:
//!
//! ```sh
//! cargo run --release -p neardup-topology --example sign_bench -- FILE [--reps N] [--limit N]
//! ```
//!
//! FILE is JSON lines, either the peer benchmark's text corpus (`{"id", "text"}` per line, made by
//! `bash ../shared/bench/peers/run.sh OUT`) or crawl page events (`make_crawl.py`'s
//! `events.jsonl[.gz]` is fine uncompressed). Every measurement runs `--reps` times (default 5),
//! alternating, and reports the median, so figures taken in the same run can be compared:
//!
//! - text corpus: the full Alg. B (84 min-values, 6 supershingles) + Alg. C (384-bit simhash)
//!   signature, against the floor "tokenize + hash every shingle";
//! - crawl events: every signature of a page (text, out-links, img terms, checksum, text hash,
//!   Alg. B, Alg. C, chunks, paragraphs, RP, change since the previous fetch), against the floor
//!   "extract the visible text + tokenize + hash every shingle" with the same tokenizer.
//!
//! It also counts heap allocations per page while signing, after a warm-up pass, through a
//! counting global allocator (`stats_alloc`, no unsafe code here).

#[path = "../benches/common/events.rs"]
mod events;

use cpu_time::ThreadTime;
use neardup_topology::charset::decode_body;
use neardup_topology::history::History;
use neardup_topology::signer::{Signer, SignerConfig};
use neardup_topology::sketch::minhash::{self, BSketch, MinHasher, Profile};
use neardup_topology::sketch::simhash::SimHasher;
use neardup_topology::text::{self, Extraction};
use neardup_topology::{decode, DecodeLimits};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::hint::black_box;
use std::io::BufRead;
use std::time::Instant;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One document: its URL (crawl events) and its HTML or text.
struct Doc {
    url: Option<url::Url>,
    body: String,
}

const USAGE: &str = "usage: sign_bench FILE [--reps N] [--limit N] [--breakdown]";

/// Says what is wrong with the command line, and how to use it, and exits 2.
fn usage_error(what: &str) -> ! {
    eprintln!("sign_bench: {what}\n{USAGE}");
    std::process::exit(2)
}

/// The number after flag `name`, or a usage error.
fn number(name: &str, value: Option<&String>) -> usize {
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| usage_error(&format!("{name} takes a number")))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut file, mut reps, mut limit) = (None, 5, usize::MAX);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--reps" => reps = number("--reps", args.get(i + 1)).max(1),
            "--limit" => limit = number("--limit", args.get(i + 1)),
            "--breakdown" => {
                i += 1;
                continue;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            a if a.starts_with('-') => usage_error(&format!("unknown flag {a}")),
            a if file.is_none() => {
                file = Some(a.to_owned());
                i += 1;
                continue;
            }
            a => usage_error(&format!("one FILE only, not also {a}")),
        }
        i += 2;
    }
    let Some(file) = file else {
        usage_error("FILE is missing");
    };
    let (docs, html) = load(&file, limit).unwrap_or_else(|e| usage_error(&format!("{file}: {e}")));
    let bytes: usize = docs.iter().map(|d| d.body.len()).sum();
    println!(
        "{} {} documents, {:.1} MB ({:.1} KB each), {} reps, one core",
        docs.len(),
        if html { "HTML page" } else { "text" },
        bytes as f64 / 1e6,
        bytes as f64 / docs.len().max(1) as f64 / 1e3,
        reps
    );

    let mut floor = Floor::default();
    let mut full = Full::new(html);
    // Warm-up: fills every reusable buffer, and is the pass allocations are not counted in.
    floor.run(&docs, html);
    full.run(&docs);
    let region = Region::new(GLOBAL);
    full.run(&docs);
    let allocs = region.change();

    // Wall time, and the CPU time of this (only) thread: on a shared machine the second leaves
    // out the time spent waiting for a core, so it is the steadier figure of "one core".
    let (mut t_floor, mut t_full) = (vec![], vec![]);
    let (mut c_floor, mut c_full) = (vec![], vec![]);
    for _ in 0..reps {
        let (t, c) = (Instant::now(), ThreadTime::now());
        black_box(floor.run(&docs, html));
        t_floor.push(t.elapsed().as_secs_f64());
        c_floor.push(c.elapsed().as_secs_f64());
        let (t, c) = (Instant::now(), ThreadTime::now());
        black_box(full.run(&docs));
        t_full.push(t.elapsed().as_secs_f64());
        c_full.push(c.elapsed().as_secs_f64());
    }
    let (f, s) = (median(&mut c_floor), median(&mut c_full));
    let (fw, sw) = (median(&mut t_floor), median(&mut t_full));
    let n = docs.len() as f64;
    let mb = bytes as f64 / 1e6;
    let floor_name = if html {
        "floor: visible text + tokenize + hash every shingle"
    } else {
        "floor: tokenize + hash every shingle"
    };
    let full_name = if html {
        "all signatures (items 1-6 of issue 3)"
    } else {
        "Alg. B + Alg. C signature"
    };
    println!("medians; per second of the thread's CPU time (and of wall time):");
    println!(
        "{floor_name:<55} {:>10.0} docs/s {:>8.1} MB/s   (wall: {:>6.0} docs/s)",
        n / f,
        mb / f,
        n / fw
    );
    println!(
        "{full_name:<55} {:>10.0} docs/s {:>8.1} MB/s   (wall: {:>6.0} docs/s)",
        n / s,
        mb / s,
        n / sw
    );
    println!(
        "ratio signatures / floor: {:.2} (wall: {:.2})",
        f / s,
        fw / sw
    );
    if html && args.iter().any(|a| a == "--breakdown") {
        breakdown(&docs);
    }
    println!(
        "heap allocations while signing, after warm-up: {:.3} per page ({} allocations, {} bytes, over {} pages)",
        allocs.allocations as f64 / n,
        allocs.allocations,
        allocs.bytes_allocated,
        docs.len()
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load(file: &str, limit: usize) -> std::io::Result<(Vec<Doc>, bool)> {
    let mut docs = vec![];
    let mut html = false;
    for line in events::open(file)?.split(b'\n') {
        if docs.len() >= limit {
            break;
        }
        let line = line?;
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(t) = v.get("text").and_then(|t| t.as_str()) {
            docs.push(Doc {
                url: None,
                body: t.to_owned(),
            });
            continue;
        }
        // A crawl event: decode it as neardup does and keep pages with content.
        let Ok(page) = decode(&line, &DecodeLimits::default()) else {
            continue;
        };
        let Some(body) = page.body.as_ref().filter(|_| page.has_content()) else {
            continue;
        };
        let Ok((text, _)) = decode_body(body.raw(), page.content_type.as_deref()) else {
            continue;
        };
        html = true;
        docs.push(Doc {
            url: url::Url::parse(&page.url).ok(),
            body: text.into_owned(),
        });
    }
    Ok((docs, html))
}

/// The floor: (visible text +) tokenize + hash every shingle, nothing kept.
#[derive(Default)]
struct Floor {
    ex: Extraction,
    term: String,
    fps: Vec<u64>,
    minhasher: Option<MinHasher>,
}

impl Floor {
    fn run(&mut self, docs: &[Doc], html: bool) -> u64 {
        let mh = self
            .minhasher
            .get_or_insert_with(|| MinHasher::new(Profile::HENZINGER));
        let mut acc = 0u64;
        for d in docs {
            let text = if html {
                text::extract(&d.body, None, &mut self.ex);
                &self.ex.text
            } else {
                &d.body
            };
            self.fps.clear();
            let fps = &mut self.fps;
            text::for_each_term(text, &mut self.term, |t| {
                fps.push(minhash::term_fingerprint(t))
            });
            mh.for_each_shingle_fp(&self.fps, |fp| acc ^= fp);
        }
        acc
    }
}

/// The full signature.
struct Full {
    html: bool,
    signer: Signer,
    history: History,
    term: String,
    fps: Vec<u64>,
    minhasher: MinHasher,
    simhasher: SimHasher,
    b: BSketch,
    clock: i64,
}

impl Full {
    fn new(html: bool) -> Self {
        Full {
            html,
            signer: Signer::new(SignerConfig::default()),
            history: History::new(i64::MAX),
            term: String::new(),
            fps: Vec::new(),
            minhasher: MinHasher::new(Profile::HENZINGER),
            simhasher: SimHasher::new(),
            b: BSketch::default(),
            clock: 0,
        }
    }

    fn run(&mut self, docs: &[Doc]) -> u64 {
        let mut acc = 0u64;
        for d in docs {
            self.clock += 1;
            if self.html {
                let checksum = xxhash_rust::xxh3::xxh3_128(d.body.as_bytes());
                let sig = self.signer.sign(&d.body, d.url.as_ref());
                acc ^= sig.b.supershingles[0] ^ sig.c.0[0];
                // The change since the previous fetch: every page is its own previous fetch
                // from the second pass on, as in a weekly recrawl.
                let url = d.url.as_ref().map_or("", |u| u.as_str());
                if let Some(c) =
                    self.history
                        .record(url, self.clock, checksum, sig.text_hash, &sig.b, |u| {
                            std::sync::Arc::from(u)
                        })
                {
                    acc ^= u64::from(c.agreeing_minvalues);
                }
            } else {
                self.fps.clear();
                let fps = &mut self.fps;
                text::for_each_term(&d.body, &mut self.term, |t| {
                    fps.push(minhash::term_fingerprint(t))
                });
                self.minhasher.sketch(&self.fps, &mut self.b);
                acc ^= self.b.supershingles[0] ^ self.simhasher.simhash(&self.fps).0[0];
            }
        }
        acc
    }
}

/// Where the time of the full HTML signature goes, component by component (cumulative), with
/// the heap allocations each step adds.
fn breakdown(docs: &[Doc]) {
    use neardup_topology::sketch::{chunks, paragraphs, rp};
    let mut ex = Extraction::default();
    let (mut term, mut chunk, mut fps) = (String::new(), Vec::new(), Vec::new());
    let mut bag = neardup_topology::sketch::bag::TermBag::new();
    let (mut out32, mut out64, mut outf) = (Vec::new(), Vec::new(), Vec::new());
    let mut mh = MinHasher::new(Profile::HENZINGER);
    let mut sh = SimHasher::new();
    let mut b = BSketch::default();
    let params = SignerConfig::default();
    let steps = [
        "extract (no URL)",
        "+ links and img terms",
        "+ terms hashed",
        "+ Alg. B",
        "+ Alg. C",
        "+ chunks (fused in the term pass)",
        "+ paragraphs",
        "+ RP",
    ];
    let mut prev = 0.0;
    for (level, name) in steps.iter().enumerate() {
        let region = Region::new(GLOBAL);
        let t = Instant::now();
        let mut acc = 0u64;
        for d in docs {
            text::extract(
                &d.body,
                if level >= 1 { d.url.as_ref() } else { None },
                &mut ex,
            );
            if level >= 2 {
                fps.clear();
                let f = &mut fps;
                let mut chunker = (level >= 5)
                    .then(|| chunks::Chunker::new(&params.chunks, &mut chunk, &mut out32));
                text::for_each_term_lines(&ex.text, &mut term, |t, nl| {
                    f.push(minhash::term_fingerprint(t));
                    if let Some(c) = chunker.as_mut() {
                        if nl {
                            c.end_line();
                        }
                        c.term(t);
                    }
                });
                if let Some(c) = chunker {
                    c.finish();
                }
            }
            if level >= 3 {
                mh.sketch(&fps, &mut b);
                acc ^= b.minvalues[0];
            }
            if level >= 4 {
                acc ^= sh.simhash(&fps).0[0];
            }
            if level >= 6 {
                paragraphs::paragraph_fingerprints(&ex.text, &mut out64);
            }
            if level >= 7 {
                bag.count(&fps);
                rp::rp_signature_of_bag(bag.entries().iter().copied(), &params.rp, &mut outf);
            }
        }
        black_box(acc);
        let us = t.elapsed().as_secs_f64() * 1e6 / docs.len() as f64;
        let allocs = region.change().allocations as f64 / docs.len() as f64;
        println!(
            "  {name:<34} {us:>7.1} us/page cumulative ({:+6.1}), {allocs:.2} allocations/page",
            us - prev
        );
        prev = us;
    }
}
