//! Alg. B's Jaccard estimate against the exact shingle Jaccard the benchmark recorded for its
//! `jaccard_sample` pairs (real HTML from Debian documentation, `make_crawl.py`'s truth file).
//!
//! Needs `NEARDUP_BENCH_SMALL=DIR` (`python3 ../shared/bench/make_crawl.py --scale small --rounds 1
//! --out DIR`; `tests/run-all.sh` makes it). Prints the error distribution; asserts that the
//! estimate is unbiased and that our tokenizer reproduces the benchmark's shingle counts on the
//! pages without images (neardup adds `<img>` URL terms, seed 001 §2, which the benchmark's rules
//! leave out).

mod common;

use neardup_topology::charset::decode_body;
use neardup_topology::sketch::minhash::{self, BSketch, MinHasher, Profile};
use neardup_topology::text::{self, Extraction};
use neardup_topology::{decode, DecodeLimits};
use std::collections::{HashMap, HashSet};
use std::io::BufRead;

struct Page {
    sketch: BSketch,
    distinct_shingles: usize,
    has_images: bool,
}

#[test]
fn estimated_jaccard_matches_the_benchmark_exact_values() {
    let Some(dir) = common::small_crawl() else {
        return;
    };
    let truth: serde_json::Value =
        serde_json::from_reader(std::fs::File::open(dir.join("truth.json")).unwrap()).unwrap();
    let round = &truth["rounds"][0];
    let crawl_id = round["crawl_id"].as_str().unwrap().to_owned();
    let sample = round["jaccard_sample"].as_array().unwrap();
    let wanted: HashSet<&str> = sample
        .iter()
        .flat_map(|p| [p["a"].as_str().unwrap(), p["b"].as_str().unwrap()])
        .collect();

    // Sign every sampled page of the round.
    let mut pages: HashMap<String, Page> = HashMap::new();
    let mut mh = MinHasher::new(Profile::HENZINGER);
    let (mut ex, mut term) = (Extraction::default(), String::new());
    let events = std::fs::File::open(dir.join("events.jsonl")).unwrap();
    for line in std::io::BufReader::new(events).split(b'\n') {
        let line = line.unwrap();
        let Ok(page) = decode(&line, &DecodeLimits::default()) else {
            continue;
        };
        if page.crawl_id.as_deref() != Some(&crawl_id) || !wanted.contains(page.url.as_str()) {
            continue;
        }
        let Some(body) = page.body.as_ref() else {
            continue;
        };
        let (html, _) = decode_body(body.raw(), page.content_type.as_deref()).unwrap();
        let url = url::Url::parse(&page.url).unwrap();
        text::extract(&html, Some(&url), &mut ex);
        let mut fps = vec![];
        text::for_each_term(&ex.text, &mut term, |t| {
            fps.push(minhash::term_fingerprint(t))
        });
        let mut sketch = BSketch::default();
        mh.sketch(&fps, &mut sketch);
        let mut distinct = HashSet::new();
        mh.for_each_shingle_fp(&fps, |fp| {
            distinct.insert(fp);
        });
        pages.insert(
            page.url.clone(),
            Page {
                sketch,
                distinct_shingles: distinct.len(),
                has_images: ex.text.contains(text::IMG_TERM_MARK),
            },
        );
    }

    let (mut errors, mut counted, mut counts_agree, mut no_image_pages) = (vec![], 0, 0, 0);
    let mut all_errors = vec![];
    for p in sample {
        let (a, b) = (
            &pages[p["a"].as_str().unwrap()],
            &pages[p["b"].as_str().unwrap()],
        );
        let exact = p["jaccard"].as_f64().unwrap();
        all_errors.push(minhash::estimated_jaccard(&a.sketch, &b.sketch) - exact);
        if !a.has_images && !b.has_images {
            errors.push(minhash::estimated_jaccard(&a.sketch, &b.sketch) - exact);
        }
        for (page, n) in [(a, &p["shingles"][0]), (b, &p["shingles"][1])] {
            if !page.has_images {
                no_image_pages += 1;
                counted += 1;
                counts_agree += usize::from(page.distinct_shingles as u64 == n.as_u64().unwrap());
            }
        }
    }
    let n = errors.len() as f64;
    let mean = errors.iter().sum::<f64>() / n;
    let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let q = |f: f64| abs[((abs.len() - 1) as f64 * f) as usize];
    eprintln!(
        "jaccard_sample of {crawl_id}: {} pairs without images; estimate - exact: mean {mean:+.4}, \
         |error| median {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}; shingle counts equal on {counts_agree}/{counted} pages",
        errors.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );
    let all_mean = all_errors.iter().sum::<f64>() / all_errors.len() as f64;
    let all_mae = all_errors.iter().map(|e| e.abs()).sum::<f64>() / all_errors.len() as f64;
    eprintln!(
        "all {} pairs (image URL terms included on our side): mean error {all_mean:+.4}, mean |error| {all_mae:.4}",
        all_errors.len()
    );
    assert!(
        errors.len() > 1000,
        "too few pairs to judge: {}",
        errors.len()
    );
    assert!(
        mean.abs() < 0.01,
        "the estimate is biased: mean error {mean:+.4}"
    );
    // 84 min-values: the standard error is at most 0.5/sqrt(84) = 0.055.
    assert!(q(0.5) < 0.05, "median |error| {:.3}", q(0.5));
    assert!(
        counts_agree as f64 >= 0.99 * no_image_pages as f64,
        "our tokenizer disagrees with the benchmark's shingle counts on {} of {no_image_pages} pages",
        no_image_pages - counts_agree
    );
}
