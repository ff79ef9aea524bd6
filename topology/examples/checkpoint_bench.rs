//! What a checkpoint costs on a real stream: its size per windowed page, the time to write and
//! to restore it, against the time to rebuild the same state by re-reading the input (what a
//! restart without a checkpoint does), all measured in the same run.
//!
//! ```text
//! cargo run --release -p neardup-topology --example checkpoint_bench -- EVENTS.jsonl [--reps R] [--no-collections] [--parts]
//! ```
//!
//! The whole file is processed (default configuration, collections on unless
//! `--no-collections`), then the state is checkpointed and restored R times (default 5); medians
//! are printed. Times are of the copy of the state input waits for, the serialization and the
//! parsing, without the disk: the consumer adds one file write and read; and, for comparison,
//! of serializing the running state in place, which input waited for until the twenty-fifth
//! session. It also prints the live heap the state holds (every window, pair store, cluster
//! level, history and index of the topology, URLs included), counted by a global
//! allocator that counts bytes asked for and given back (`stats_alloc`): what a deployment's
//! memory grows by per windowed page, before the allocator's own overhead; and the live heap of
//! the state restored from the checkpoint, which is what a restarted process holds. `--parts`
//! drops the parts of both states one at a time and prints what each held.

#[path = "../benches/common/events.rs"]
mod events;

use neardup_schemas::Source;
use neardup_topology::{checkpoint, Config, Topology};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::time::Instant;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = |what: &str| -> ! {
        eprintln!("checkpoint_bench: {what}\nusage: checkpoint_bench EVENTS.jsonl [--reps R] [--no-collections] [--parts]");
        std::process::exit(2)
    };
    let Some(path) = args.first().filter(|a| !a.starts_with('-')) else {
        usage("no events file")
    };
    let reps: usize = match args.iter().position(|a| a == "--reps") {
        Some(i) => args
            .get(i + 1)
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| usage("--reps takes a number")),
        None => 5,
    };
    let file = events::open(path).unwrap_or_else(|e| usage(&format!("cannot open {path}: {e}")));
    let lines: Vec<Vec<u8>> = file
        .split(b'\n')
        .map(|l| l.expect("read"))
        .filter(|l| !l.is_empty())
        .collect();
    let cfg = Config {
        collections: !args.iter().any(|a| a == "--no-collections"),
        ..Config::default()
    };
    let t0 = Instant::now();
    let mut out = Vec::with_capacity(1024);
    let region = Region::new(GLOBAL);
    let mut topo = Topology::new(cfg.clone());
    for (i, line) in lines.iter().enumerate() {
        let src = Source::File {
            file: path.clone(),
            line: i as u64 + 1,
        };
        topo.process(line, &src, &mut out);
        out.clear();
    }
    let rebuild = t0.elapsed().as_secs_f64();
    out.shrink_to(1024);
    let heap = region.change();
    let heap = heap.bytes_allocated as i64 - heap.bytes_deallocated as i64;
    let pages = topo.near_stats().pages;
    let offsets = BTreeMap::from([(0, lines.len() as i64)]);

    let (mut copies, mut writes, mut restores) = (vec![], vec![], vec![]);
    let mut in_place = vec![];
    let mut size = 0;
    let mut copy_heap = 0i64;
    let mut restored_heap = 0i64;
    let mut last_restored = None;
    for _ in 0..reps {
        // What input waits for (`neardup run`), then what the writing thread does.
        let region = Region::new(GLOBAL);
        let t = Instant::now();
        let snapshot = checkpoint::snapshot(&topo, "bench", &offsets);
        copies.push(t.elapsed().as_secs_f64());
        let change = region.change();
        copy_heap = change.bytes_allocated as i64 - change.bytes_deallocated as i64;
        let t = Instant::now();
        let mut bytes = std::io::Cursor::new(Vec::with_capacity(size));
        snapshot.write_to(&mut bytes).expect("written");
        writes.push(t.elapsed().as_secs_f64());
        drop(snapshot);
        let bytes = bytes.into_inner();
        size = bytes.len();
        let t = Instant::now();
        let again = checkpoint::write(&topo, "bench", &offsets);
        in_place.push(t.elapsed().as_secs_f64());
        assert!(again == bytes, "the snapshot's checkpoint differs");
        drop(again);
        let region = Region::new(GLOBAL);
        let t = Instant::now();
        let (restored, _) = checkpoint::restore(cfg.clone(), "bench", &bytes).expect("restores");
        restores.push(t.elapsed().as_secs_f64());
        let change = region.change();
        restored_heap = change.bytes_allocated as i64 - change.bytes_deallocated as i64;
        assert_eq!(restored.near_stats().pages, pages);
        last_restored = Some(restored);
    }
    let (c, w, r) = (median(copies), median(writes), median(restores));
    println!("records                 {}", lines.len());
    println!(
        "windowed pages          {pages} (collections {})",
        if cfg.collections { "on" } else { "off" }
    );
    println!(
        "live heap of the state  {:.1} MiB, {:.0} bytes per windowed page",
        heap as f64 / (1 << 20) as f64,
        heap as f64 / pages.max(1) as f64
    );
    println!(
        "  restored from a checkpoint: {:.1} MiB, {:.0} bytes per windowed page",
        restored_heap as f64 / (1 << 20) as f64,
        restored_heap as f64 / pages.max(1) as f64
    );
    println!(
        "checkpoint size         {:.1} MiB, {:.0} bytes per windowed page",
        size as f64 / (1 << 20) as f64,
        size as f64 / pages.max(1) as f64
    );
    println!(
        "copy (median of {reps})      {c:.3} s, {:.1} MiB (input waits for this)",
        copy_heap as f64 / (1 << 20) as f64
    );
    println!("write (median of {reps})     {w:.3} s (serialization, on the writing thread)");
    println!(
        "  serialized in place:   {:.3} s (what input waited for before)",
        median(in_place)
    );
    println!("restore (median of {reps})   {:.3} s", r);
    println!("rebuild by re-reading    {rebuild:.3} s (once)");
    println!(
        "restore / rebuild        {:.4} (the share of a full re-read a restart from a checkpoint costs)",
        r / rebuild
    );
    if args.iter().any(|a| a == "--parts") {
        parts("the state built by reading", topo);
        if let Some(restored) = last_restored {
            parts("the state restored from its checkpoint", restored);
        }
    }
}

/// Drops the parts of `topo` one at a time, printing the live heap each held (and first the
/// sketch index's own accounting of its parts).
fn parts(what: &str, mut topo: Topology) {
    println!("{what}, part by part:");
    let pages = topo.near_stats().pages;
    for (name, bytes) in topo.near_memory_parts() {
        println!(
            "    index: {name:<33} {:>6.0} B/page",
            bytes as f64 / pages.max(1) as f64
        );
    }
    {
        let mut last = GLOBAL.stats();
        topo.release_parts(|name| {
            let now = GLOBAL.stats();
            let freed = (now.bytes_deallocated - last.bytes_deallocated) as i64
                - (now.bytes_allocated - last.bytes_allocated) as i64;
            last = now;
            println!(
                "  {name:<40} {:>7.1} MiB {:>6.0} B/page",
                freed as f64 / (1 << 20) as f64,
                freed as f64 / pages.max(1) as f64
            );
        });
    }
}
