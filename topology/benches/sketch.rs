//! Speed of Alg. B (min-hash sketch) and Alg. C (simhash) on realistic text documents, next to
//! the floor "tokenize + hash every shingle".
//!
//! Documents are built from a word list with Zipf-distributed word frequencies, capitals and
//! punctuation: 1,591 words and about 10.9 KB each, the size of the peer benchmark's documents
//! (shared/bench/peers: 10.8 KB, 1,591 words per document). Every measurement reports documents
//! per second (criterion's `elem/s`).
//!
//! ```text
//! cargo bench -p neardup-topology --bench sketch            # full run
//! cargo bench -p neardup-topology --bench sketch -- --quick # a few seconds per benchmark
//! ```
//!
//! With `SKETCH_BENCH_CORPUS=PATH` the documents are instead the first 2,000 `text` fields of
//! a JSON-lines corpus, such as the `corpus.jsonl` that shared/bench/peers/run.sh writes.

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use neardup_topology::sketch::minhash::{term_fingerprint, BSketch, MinHasher, Profile};
use neardup_topology::sketch::simhash::SimHasher;
use neardup_topology::text::for_each_term;
use std::hint::black_box;

/// Generated documents (one benchmark iteration signs them all).
const DOCS: usize = 32;
/// Words per document.
const WORDS: usize = 1_591;

/// Common English words, most frequent first; the Zipf ranks continue with generated words.
const COMMON: &str = "the of and to a in is that for it as was with be by on not he this are or \
    his from at which but have an they you were her she there one all we their been has when who \
    will more no if out so said what up its about into than them can only other new some could \
    time these two may then do first any my now such like our over man me even most made after \
    also did many before must through back years where much your way well down should because \
    each just those people how too little state good very make world still own see men work long \
    get here between both life being under never day same another know while last might us great \
    old year off come since against go came right used take three states himself few house use \
    during without again place american around however home small found thought went say part \
    once general high upon school every does got united left number course war until always away \
    something fact though water less public put think almost hand enough far took head yet \
    government system better set told nothing night end why called didn eyes find going look \
    asked later knew point next program city business give group toward young days let room \
    president side social given present several order national possible rather second face per \
    among form important often things looked early white case john become large big need four \
    within felt along children saw best church ever least power development light thing seemed \
    family interest want members mind country area others done turned although open god service \
    certain kind problem began different door thus help sense means whole matter perhaps itself \
    york times law human line above name example action company hands local show whether five \
    history gave today either act feet across taken past quite anything seen having death week \
    experience body word half really field am car words already themselves information tell \
    together college shall money period held keep sure probably free seems political real behind \
    cannot miss question air office making brought whose special heard major problems ago became \
    federal moment study available known result street economic boy position reason change south \
    board individual job areas society west close turn love community true court force full";

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "ta", "ve", "si", "do", "pa", "re", "to", "li", "an", "er", "in",
    "on", "st", "th", "ch", "al", "en", "or", "us",
];

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A vocabulary of `size` words: the common words, then generated ones of 2–5 syllables.
fn vocabulary(size: usize, rng: &mut Rng) -> Vec<String> {
    let mut v: Vec<String> = COMMON.split_whitespace().map(str::to_owned).collect();
    while v.len() < size {
        let n = 2 + (rng.next_u64() % 4) as usize;
        let w: String = (0..n)
            .map(|_| SYLLABLES[(rng.next_u64() % SYLLABLES.len() as u64) as usize])
            .collect();
        v.push(w);
    }
    v
}

/// One document of `WORDS` words: Zipf(1) over the vocabulary, sentences of 8–25 words with a
/// capital letter and a period, some commas, a paragraph break now and then.
fn document(vocab: &[String], cdf: &[f64], rng: &mut Rng) -> String {
    let mut s = String::with_capacity(WORDS * 7);
    let mut left_in_sentence = 0;
    for i in 0..WORDS {
        let u = rng.unit() * cdf[cdf.len() - 1];
        let w = &vocab[cdf.partition_point(|&c| c < u).min(vocab.len() - 1)];
        if left_in_sentence == 0 {
            if i > 0 {
                s.push_str(if rng.unit() < 0.1 { ".\n\n" } else { ". " });
            }
            left_in_sentence = 8 + (rng.next_u64() % 18) as usize;
            let mut c = w.chars();
            if let Some(first) = c.next() {
                s.extend(first.to_uppercase());
                s.push_str(c.as_str());
            }
        } else {
            s.push_str(if rng.unit() < 0.06 { ", " } else { " " });
            s.push_str(w);
        }
        left_in_sentence -= 1;
    }
    s.push('.');
    s
}

fn corpus() -> Vec<String> {
    if let Ok(path) = std::env::var("SKETCH_BENCH_CORPUS") {
        let text = std::fs::read_to_string(&path).expect("SKETCH_BENCH_CORPUS is readable");
        return text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_owned))
            .take(2_000)
            .collect();
    }
    let mut rng = Rng(20_261_121);
    let vocab = vocabulary(20_000, &mut rng);
    let mut acc = 0.0;
    let cdf: Vec<f64> = (0..vocab.len())
        .map(|r| {
            acc += 1.0 / (r as f64 + 25.0);
            acc
        })
        .collect();
    (0..DOCS)
        .map(|_| document(&vocab, &cdf, &mut rng))
        .collect()
}

/// Term fingerprints of a text into `out` (cleared first).
fn term_fps(text: &str, buf: &mut String, out: &mut Vec<u64>) {
    out.clear();
    for_each_term(text, buf, |t| out.push(term_fingerprint(t)));
}

fn bench(c: &mut Criterion) {
    let docs = corpus();
    let n_docs = docs.len();
    let bytes: usize = docs.iter().map(String::len).sum();
    let mut buf = String::new();
    let fps: Vec<Vec<u64>> = docs
        .iter()
        .map(|d| {
            let mut v = Vec::new();
            term_fps(d, &mut buf, &mut v);
            v
        })
        .collect();
    let terms: usize = fps.iter().map(Vec::len).sum();
    let distinct: usize = fps
        .iter()
        .map(|f| f.iter().collect::<std::collections::HashSet<_>>().len())
        .sum();
    eprintln!(
        "corpus: {n_docs} documents; per document {:.1} KB, {} terms, {} distinct terms",
        bytes as f64 / n_docs as f64 / 1000.0,
        terms / n_docs,
        distinct / n_docs
    );

    let mut g = c.benchmark_group("sketch");
    g.throughput(Throughput::Elements(n_docs as u64));
    let mut fp_buf = Vec::new();
    let mut henzinger = MinHasher::new(Profile::HENZINGER);
    let mut fmn = MinHasher::new(Profile::FMN);
    let mut simhasher = SimHasher::new();
    let mut sketch = BSketch::default();

    g.bench_function("text/tokenize only", |b| {
        b.iter(|| {
            let mut terms = 0usize;
            for d in &docs {
                for_each_term(d, &mut buf, |t| terms += t.len());
            }
            black_box(terms)
        })
    });
    g.bench_function("text/tokenize+term_fps", |b| {
        b.iter(|| {
            for d in &docs {
                term_fps(d, &mut buf, &mut fp_buf);
                black_box(&fp_buf);
            }
        })
    });
    g.bench_function("text/floor: tokenize+hash every shingle", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for d in &docs {
                term_fps(d, &mut buf, &mut fp_buf);
                henzinger.for_each_shingle_fp(&fp_buf, |h| acc ^= h);
            }
            black_box(acc)
        })
    });
    g.bench_function("text/full: tokenize+alg B+alg C", |b| {
        b.iter(|| {
            for d in &docs {
                term_fps(d, &mut buf, &mut fp_buf);
                henzinger.sketch(&fp_buf, &mut sketch);
                black_box(&sketch);
                black_box(simhasher.simhash(&fp_buf));
            }
        })
    });
    g.bench_function("fps/shingle fingerprints only", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for f in &fps {
                henzinger.for_each_shingle_fp(f, |h| acc ^= h);
            }
            black_box(acc)
        })
    });
    g.bench_function("fps/alg B henzinger", |b| {
        b.iter(|| {
            for f in &fps {
                henzinger.sketch(f, &mut sketch);
                black_box(&sketch);
            }
        })
    });
    g.bench_function("fps/alg B fmn", |b| {
        b.iter(|| {
            for f in &fps {
                fmn.sketch(f, &mut sketch);
                black_box(&sketch);
            }
        })
    });
    g.bench_function("fps/alg C simhash", |b| {
        b.iter(|| {
            for f in &fps {
                black_box(simhasher.simhash(f));
            }
        })
    });
    g.bench_function("fps/alg B+alg C", |b| {
        b.iter(|| {
            for f in &fps {
                henzinger.sketch(f, &mut sketch);
                black_box(&sketch);
                black_box(simhasher.simhash(f));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
