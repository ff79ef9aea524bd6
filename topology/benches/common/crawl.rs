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
pub fn inputs(cfg: &Config, path: &str) -> std::io::Result<Vec<Input>> {
    let mut preparer = Preparer::new(cfg);
    let mut inputs = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(path)?).split(b'\n') {
        let prepared = preparer.prepare(&line?);
        if let (Some((url, sketch)), Some(at)) = (prepared.index_input(), prepared.event_time_ms())
        {
            inputs.push((url.to_owned(), sketch.cloned(), at));
        }
    }
    Ok(inputs)
}

/// Feeds every input to `index` in order, the window moving with the event time; `after` sees
/// the index after each input, with the number of events it emitted.
pub fn feed(index: &mut NearIndex, inputs: &[Input], after: &mut dyn FnMut(&NearIndex, usize)) {
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
        after(index, out.drain().count());
    }
}
