//! A real crawl's signatures fed to the index, shared by the index benchmark (`benches/index.rs`,
//! `NEARDUP_BENCH_EVENTS`) and the figures script (`examples/index_bench.rs --events`).

#![allow(dead_code)]

use neardup_topology::near::{Fetch, NearIndex, Sketch};
use neardup_topology::{Config, Emitter, Preparer};
use std::io::BufRead as _;

/// One record's input to the index: its URL, its sketch (none: no content), its event time.
pub type Input = (String, Option<Sketch>, i64);

/// Every record of the events file `path` (`make_crawl.py`'s `events.jsonl`), decoded and
/// signed as `neardup` does; records without an index input (dead letters) are left out.
/// A compressed file, or one without a page record, is an error.
pub fn inputs(cfg: &Config, path: &str) -> std::io::Result<Vec<Input>> {
    let file = super::events::open(path)?;
    let mut preparer = Preparer::new(cfg);
    let mut inputs = Vec::new();
    for line in file.split(b'\n') {
        let prepared = preparer.prepare(&line?);
        if let (Some((url, sketch)), Some(at)) = (prepared.index_input(), prepared.event_time_ms())
        {
            inputs.push((url.to_owned(), sketch.cloned(), at));
        }
    }
    if inputs.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it holds no page record (make_crawl.py's events.jsonl, one JSON object a line)",
        ));
    }
    Ok(inputs)
}

/// Feeds every input to `index` in order, the window moving with the event time; `after` sees
/// the index after each input, with the events it emitted (those it leaves are dropped).
pub fn feed(
    index: &mut NearIndex,
    inputs: &[Input],
    after: &mut dyn FnMut(&NearIndex, &mut Emitter),
) {
    let mut out = Emitter::new();
    let mut watermark = i64::MIN;
    for (url, sketch, at) in inputs {
        if *at > watermark {
            watermark = *at;
            index.advance(watermark, None, &mut out);
        }
        index.observe(
            &Fetch {
                url,
                sketch: sketch.as_ref(),
                fetched_at_ms: *at,
                crawl_id: None,
            },
            &mut out,
        );
        after(index, &mut out);
        out.drain();
    }
}

/// The crawl `k` times over, in one window: each input fed `k` times in a row, copy `c > 0` on
/// hosts of its own (`www.site.example` becomes `www.site-cC.example`, so each copy has sites
/// of its own) and with every part of its sketch XORed with masks of copy `c` (each min-value
/// byte, supershingle, simhash bit, the checksum, the text hash and the title). Within a copy,
/// pages agree where the crawl's pages agree; across copies, only by chance, as unrelated pages
/// do. So the window is `k` times as large, with the crawl's own near-duplicates, templates and
/// refetches, and `k` times its pair events.
pub fn copies(inputs: &[Input], k: u32) -> Vec<Input> {
    inputs
        .iter()
        .flat_map(|input| (0..k).map(move |c| copied(input, c)))
        .collect()
}

/// Copy `c` of a crawl's input (copy 0 is the input itself): its host renamed, its sketch
/// XORed with copy `c`'s masks.
fn copied((url, sketch, at): &Input, c: u32) -> Input {
    if c == 0 {
        return (url.clone(), sketch.clone(), *at);
    }
    // The host's last dot (or its end): `www.site.example` -> `www.site-cC.example`.
    let host = url.find("://").map_or(0, |s| s + 3);
    let host_end = url[host..]
        .find(['/', ':', '?', '#'])
        .map_or(url.len(), |e| host + e);
    let cut = url[host..host_end]
        .rfind('.')
        .map_or(host_end, |d| host + d);
    let url = format!("{}-c{c}{}", &url[..cut], &url[cut..]);
    // A splitmix64 sequence per copy gives its masks.
    let mut state = u64::from(c).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let sketch = sketch.as_ref().map(|s| {
        let mut s = s.clone();
        for m in s.mins.iter_mut() {
            *m ^= next() as u8;
        }
        for ss in s.ss.iter_mut() {
            *ss ^= next() as u16;
        }
        for w in s.simhash.iter_mut() {
            *w ^= next();
        }
        s.checksum ^= next();
        s.text ^= next();
        let title = s.title ^ next() as u32;
        if s.title != 0 && title != 0 {
            s.title = title;
        }
        s
    });
    (url, sketch, *at)
}
