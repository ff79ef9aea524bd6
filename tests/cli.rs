//! The `neardup replay`, `neardup demo`, `neardup eval` and (without a broker) `neardup topics`
//! commands, run as a user runs them.

use neardup::replay::replay_records;
use neardup::sample::{sample_crawl, SampleOptions};
use neardup_schemas::{
    DeadLetterEvent, DeadLetterReason, OutputKind, PairEvent, PairState, Source,
};
use neardup_topology::Config;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "net.rs"]
mod net;
#[path = "scratch.rs"]
mod scratch;
use net::free_port;
use scratch::Scratch;

fn neardup(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .output()
        .expect("run neardup");
    assert!(
        out.status.success(),
        "neardup {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn lines(dir: &Path, kind: OutputKind) -> Vec<Vec<u8>> {
    let text = std::fs::read(dir.join(format!("{}.jsonl", kind.short_name()))).unwrap();
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[test]
fn replay_of_a_gzip_file_matches_the_topology_and_is_deterministic() {
    let dir = Scratch::new("replay");
    let sample = sample_crawl(&SampleOptions::default());
    let input = dir.join("events.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&input).unwrap(),
        flate2::Compression::fast(),
    );
    for r in &sample.records {
        gz.write_all(r).unwrap();
        gz.write_all(b"\n").unwrap();
    }
    gz.finish().unwrap();
    let file = input.display().to_string();

    let (out1, out2) = (dir.join("out1"), dir.join("out2"));
    let printed = neardup(&["replay", "--input", &file, "--out", out1.to_str().unwrap()]);
    neardup(&["replay", "--input", &file, "--out", out2.to_str().unwrap()]);
    let summary = String::from_utf8(printed.stdout).unwrap();
    assert!(
        summary.contains(&format!("input records   {:>10}", sample.records.len())),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("dead letters    {:>10}", sample.bad_records.len())),
        "{summary}"
    );
    // The thresholds the pairs were judged by, as the run logs them at start.
    assert!(
        summary.contains(&format!("  {}\n", Config::default().near.describe())),
        "{summary}"
    );

    let want = replay_records(&sample.records, Config::default(), |i| Source::File {
        file: file.clone(),
        line: i as u64 + 1,
    });
    for kind in OutputKind::ALL {
        let expected: Vec<Vec<u8>> = want
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.value.clone())
            .collect();
        assert_eq!(lines(&out1, kind), expected, "{kind:?}");
        assert_eq!(
            lines(&out1, kind),
            lines(&out2, kind),
            "{kind:?} is not deterministic"
        );
    }
    for state in [
        "cluster-map.jsonl",
        "evolution.json",
        "report.json",
        "report.html",
    ] {
        assert_eq!(
            std::fs::read(out1.join(state)).unwrap(),
            std::fs::read(out2.join(state)).unwrap(),
            "{state} is not deterministic"
        );
    }
    // A pipe reads as the file does: the standard input (`-`), and a process substitution,
    // whose first bytes (the gzip magic) must be read once, not looked at and then read again.
    for (name, via) in [
        ("stdin", format!("--input - < {file}")),
        ("substituted", format!("--input <(cat {file})")),
    ] {
        let out = dir.join(name);
        let run = Command::new("bash")
            .arg("-c")
            .arg(format!("exec \"$0\" replay {via} --out {}", out.display()))
            .arg(env!("CARGO_BIN_EXE_neardup"))
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        for kind in OutputKind::ALL {
            match kind {
                // Their sources name the pipe instead of the file.
                OutputKind::DeadLetter => {
                    assert_eq!(lines(&out, kind).len(), sample.bad_records.len(), "{name}")
                }
                _ => assert_eq!(lines(&out, kind), lines(&out1, kind), "{name}: {kind:?}"),
            }
        }
    }
    check_cluster_map(&out1);
    // Evolution: one entry per crawl round of the input, in order.
    let evolution: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out1.join("evolution.json")).unwrap()).unwrap();
    let mut rounds: Vec<String> = vec![];
    for r in &sample.records {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(r) else {
            continue;
        };
        if let Some(id) = v.get("crawl_id").and_then(|c| c.as_str()) {
            if rounds.last().map(String::as_str) != Some(id) && v.get("url").is_some() {
                rounds.push(id.to_owned());
            }
        }
    }
    let got: Vec<&str> = evolution["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["crawl_id"].as_str().unwrap())
        .collect();
    assert_eq!(got, rounds, "evolution.json rounds");
    check_report(&out1, &sample, rounds.len());
    for r in evolution["rounds"].as_array().unwrap() {
        let (pages, near) = (
            r["pages"].as_u64().unwrap(),
            r["near_duplicate_pages"].as_u64().unwrap(),
        );
        assert!(near > 0 && near <= pages, "{r}");
    }
    // Dead letters name the file and line of the bad record.
    for (line, (index, reason)) in lines(&out1, OutputKind::DeadLetter)
        .iter()
        .zip(&sample.bad_records)
    {
        let d: DeadLetterEvent = serde_json::from_slice(line).unwrap();
        assert_eq!(d.reason.as_str(), *reason);
        assert_eq!(
            d.source,
            Source::File {
                file: file.clone(),
                line: *index as u64 + 1
            }
        );
    }
}

/// Starts `command` with its log (standard error) to read, in the default text format, and
/// its standard output dropped.
fn spawn_logging(command: &mut Command) -> std::process::Child {
    command
        .env_remove("NEARDUP_LOG")
        .env_remove("NEARDUP_LOG_JSON")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `neardup run` with no broker answering at `--brokers` (a port nothing listens on): a run that
/// reads to the end (`--exit-at-end`) stops with an error that says what to check; a service run
/// keeps retrying, warning about each kind of error once per 30 s (it wrote about 40 lines a
/// second before: each consumer poll's error and each `AllBrokersDown` of both clients), and
/// SIGTERM still stops it cleanly, also when nobody reads its standard error any more.
#[test]
fn a_run_with_no_broker_says_what_to_check_without_flooding_the_log() {
    use std::time::{Duration, Instant};
    let port = free_port();
    let brokers = format!("127.0.0.1:{port}");
    let run = |extra: &[&str]| {
        spawn_logging(
            Command::new(env!("CARGO_BIN_EXE_neardup"))
                .args(["run", "--brokers", &brokers, "--input-topic", "pages"])
                .args(extra),
        )
    };
    let start = Instant::now();
    let mut to_end = run(&["--exit-at-end"]);
    let service = run(&[]);
    // And a replay of a topic range: it failed after its metadata timeout as it does now, but
    // left an output directory of empty files and about 20 lines a second of librdkafka errors.
    let scratch = Scratch::new("no-broker-replay");
    let out_dir = scratch.join("out");
    let replay = spawn_logging(
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["replay", "--topic", "pages", "--brokers", &brokers, "--out"])
            .arg(&out_dir),
    );
    // And a run whose standard error is closed after its first line, as by `2>&1 | head -1`: it
    // aborted (exit 134) at its next warning, since tracing reported the failed write with a
    // panicking `eprint!` inside a librdkafka callback.
    let mut deaf = run(&[]);
    {
        use std::io::BufRead;
        let mut first = String::new();
        std::io::BufReader::new(deaf.stderr.take().unwrap())
            .read_line(&mut first)
            .unwrap();
    }
    // The service runs: past their start-up checks (10 s without metadata), well into the loop.
    std::thread::sleep(Duration::from_secs(20));
    for pid in [service.id(), deaf.id()] {
        assert!(Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success());
    }
    let deaf = deaf.wait().unwrap();
    assert!(deaf.success(), "with its standard error closed: {deaf:?}");
    let service = service.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&service.stderr);
    assert!(
        service.status.success(),
        "SIGTERM must stop it cleanly: {:?}\n{log}",
        service.status
    );
    let warnings = log.lines().filter(|l| l.contains(" WARN ")).count();
    assert!(
        log.contains("no broker answers, retrying: check --brokers"),
        "{log}"
    );
    // Each kind once: the producer's and the consumer's global errors, the consumer's polls.
    assert!(
        warnings <= 10,
        "{warnings} warnings in 20 s, each kind of error should be logged once:\n{log}"
    );

    // (It used to wait for a broker forever.)
    while to_end.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = to_end.kill();
    let to_end = to_end.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&to_end.stderr);
    assert_eq!(to_end.status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!("no broker of {brokers} answered within 30 s"))
            && log.contains("check --brokers"),
        "{log}"
    );
    // One metadata timeout, not the output checks' too.
    assert!(
        start.elapsed() < Duration::from_secs(38),
        "{:?}",
        start.elapsed()
    );

    let replay = replay.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "cannot read the metadata of topic pages from {brokers}"
        )),
        "{log}"
    );
    assert!(log.lines().count() <= 10, "{log}");
    assert!(
        !out_dir.exists(),
        "a replay that read nothing wrote {out_dir:?}"
    );
}

/// `neardup run` (all-in-one, or `--scale-out`) under a memory limit too small for its page
/// budget says so at start, with the budget that would fit: run in a child of this process's cgroup (v1 memory controller) with a
/// 1 GiB limit. Where no such cgroup can be made (not root, cgroup v2 without delegation) the
/// test says so and checks nothing; the estimate itself is unit-tested in `sizing.rs`.
#[test]
fn a_run_whose_page_budget_does_not_fit_its_memory_limit_says_so() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(path) = own.lines().find_map(|l| {
        l.split_once(":memory:")
            .map(|(_, p)| p.trim_end_matches('/'))
    }) else {
        eprintln!("skipped: no cgroup v1 memory controller here");
        return;
    };
    let dir = format!(
        "/sys/fs/cgroup/memory{path}/neardup-test-{}",
        std::process::id()
    );
    if std::fs::create_dir(&dir).is_err()
        || std::fs::write(format!("{dir}/memory.limit_in_bytes"), "1073741824").is_err()
    {
        let _ = std::fs::remove_dir(&dir);
        eprintln!("skipped: cannot make a memory cgroup at {dir}");
        return;
    }
    let port = free_port();
    let run = |budget: &str, extra: &str| {
        spawn_logging(
            Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "echo $$ > {dir}/cgroup.procs && exec \"$0\" run --brokers 127.0.0.1:{port} \
                     --input-topic pages --max-window-pages {budget} {extra}"
                ))
                .arg(env!("CARGO_BIN_EXE_neardup"))
                .env_remove("NEARDUP_MAX_WINDOW_PAGES")
                .env_remove("NEARDUP_SIGN_CACHE"),
        )
    };
    // The first lines of each run's log, up to its "consuming" line (after the start-up checks)
    // or its warning.
    let first_lines = |mut child: std::process::Child| {
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let done = line.contains("consuming") || line.contains("may need about");
                let _ = tx.send(line);
                if done {
                    break;
                }
            }
        });
        let start = Instant::now();
        let mut lines = Vec::new();
        while start.elapsed() < Duration::from_secs(40) {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    let done = l.contains("consuming") || l.contains("may need about");
                    lines.push(l);
                    if done {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        lines.join("\n")
    };
    let default_budget = first_lines(run("4000000", ""));
    let fitting = first_lines(run("100000", ""));
    // A process running every stage may come to hold every stage's state: it warns as well.
    let scaled = first_lines(run("4000000", "--scale-out"));
    let _ = std::fs::remove_dir(&dir);
    assert!(
        scaled.contains("the page budget (--max-window-pages 4000000) may need about"),
        "{scaled}"
    );
    assert!(
        default_budget.contains("the page budget (--max-window-pages 4000000) may need about")
            && default_budget.contains("memory limit of 1.0 GiB")
            && default_budget.contains(&format!(
                "at most about {}",
                neardup::sizing::pages_within(1 << 30, 256 << 20, false)
            )),
        "{default_budget}"
    );
    assert!(fitting.contains("consuming"), "{fitting}");
    // The thresholds in effect, logged before the run starts consuming.
    assert!(
        fitting.contains(&Config::default().near.describe()),
        "{fitting}"
    );
    assert!(!fitting.contains("page budget"), "{fitting}");
}

/// `neardup topics --check-config` says, without a broker, which topics a configuration needs:
/// the split topology's internal ones with their partitions only when the configuration splits.
#[test]
fn topics_check_config_lists_what_a_configuration_needs_without_a_broker() {
    let plan = |extra: &[&str]| {
        let args = [
            &["topics", "--brokers", "127.0.0.1:1", "--check-config"][..],
            extra,
        ]
        .concat();
        String::from_utf8(neardup(&args).stdout).unwrap()
    };
    let all = plan(&["--output-prefix", "nd."]);
    assert!(
        all.contains("#   nd.pairs (output: pairs; any number of partitions)"),
        "{all}"
    );
    assert!(!all.contains("internal"), "{all}");
    assert!(!all.contains("nd.collections"), "{all}");
    let split = plan(&["--key-shards", "3", "--mirror-stage", "--collections"]);
    for line in [
        "#   neardup.internal.signed (sign -> index; as many partitions as the input topic)",
        "#   neardup.internal.steps (index -> shard (one partition per key shard); exactly 3 partitions)",
        "#   neardup.internal.answered (shard -> verify; exactly 1 partition)",
        "#   neardup.internal.indexed (verify -> cluster; exactly 1 partition)",
        "#   neardup.internal.clustered (cluster -> mirror; exactly 1 partition)",
        "#   neardup.collections (output: collections; any number of partitions)",
    ] {
        assert!(split.contains(line), "no {line:?} in\n{split}");
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "topics",
            "--brokers",
            "127.0.0.1:1",
            "--replication-factor",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--replication-factor 0"));
}

#[test]
fn replay_reports_a_missing_input_file_clearly_and_writes_nothing() {
    let dir = Scratch::new("missing-input");
    std::fs::write(dir.join("present.jsonl"), b"").unwrap();
    let never = dir.join("never");
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "replay",
            "--input",
            dir.join("present.jsonl").to_str().unwrap(),
            "--input",
            "/nonexistent/x.jsonl",
            "--out",
            never.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open input file /nonexistent/x.jsonl"),
        "{err}"
    );
    assert!(
        !never.exists(),
        "a failed replay created its output directory"
    );
}

#[test]
fn a_replay_without_round_figures_publishes_the_same_outputs() {
    let dir = Scratch::new("no-rounds");
    let sample = sample_crawl(&SampleOptions::default());
    let input = dir.join("events.jsonl");
    let mut text = Vec::new();
    for r in &sample.records {
        text.extend_from_slice(r);
        text.push(b'\n');
    }
    std::fs::write(&input, text).unwrap();
    let (with, without) = (dir.join("with"), dir.join("without"));
    let file = input.to_str().unwrap();
    neardup(&["replay", "--input", file, "--out", with.to_str().unwrap()]);
    let printed = neardup(&[
        "replay",
        "--input",
        file,
        "--out",
        without.to_str().unwrap(),
        "--no-round-figures",
    ]);
    for kind in OutputKind::ALL {
        assert_eq!(lines(&with, kind), lines(&without, kind), "{kind:?}");
    }
    let json = |dir: &Path, name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap()
    };
    // The sample has crawl rounds: figures for each, unless skipped.
    assert!(!json(&with, "evolution.json")["rounds"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(json(&with, "report.json")["round_figures"], true);
    assert_eq!(
        json(&without, "evolution.json")["rounds"],
        serde_json::json!([])
    );
    let report = json(&without, "report.json");
    assert_eq!(report["round_figures"], false);
    assert_eq!(report["rounds"], serde_json::json!([]));
    let html = std::fs::read_to_string(without.join("report.html")).unwrap();
    assert!(html.contains("<code>--no-round-figures</code>"), "{html}");
    let summary = String::from_utf8(printed.stdout).unwrap();
    assert!(
        !summary.contains("near-duplicate pages by round"),
        "{summary}"
    );
}

#[test]
fn demo_runs_on_the_embedded_cluster_and_finds_the_sample_duplicates() {
    let dir = Scratch::new("demo");
    let out = neardup(&["demo", "--out", dir.to_str().unwrap()]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let sample = sample_crawl(&SampleOptions::default());
    let detected: BTreeSet<(String, String)> = lines(&dir, OutputKind::Pairs)
        .iter()
        .map(|l| serde_json::from_slice::<PairEvent>(l).unwrap())
        .filter(|p| p.state == PairState::Detected)
        .map(|p| (p.a, p.b))
        .collect();
    let mut expected = 0;
    for (_, urls) in &sample.exact_groups {
        for (i, a) in urls.iter().enumerate() {
            for b in &urls[i + 1..] {
                expected += 1;
                assert!(
                    detected.contains(&(a.clone(), b.clone())),
                    "{a} ~ {b} missing:\n{stdout}"
                );
            }
        }
    }
    assert!(expected > 0);
    assert_eq!(
        lines(&dir, OutputKind::DeadLetter).len(),
        sample.bad_records.len()
    );
    assert_eq!(
        lines(&dir, OutputKind::Signatures).len(),
        sample.records.len() - sample.bad_records.len()
    );
    assert!(stdout.contains("of them found"), "{stdout}");
    // Levels and states are printed as the events name them, not as Rust's enum variants.
    assert!(stdout.contains("(very_similar, Jaccard ~"), "{stdout}");
    assert!(stdout.contains(": confirmed, "), "{stdout}");
    assert!(
        !stdout.contains("VerySimilar") && !stdout.contains("Confirmed"),
        "{stdout}"
    );
    // The files list each topic in partition and offset order, so a second run writes the same
    // bytes (before, records stood in the order the partitions arrived, which varies).
    let again = Scratch::new("demo-again");
    neardup(&["demo", "--out", again.to_str().unwrap()]);
    let mut files = 0;
    for entry in std::fs::read_dir(&*dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(again.join(name)).unwrap(),
            "{name:?} differs between two runs of the demo"
        );
        files += 1;
    }
    assert!(files >= 6, "{files} files");
}

#[test]
fn eval_scores_a_replay_directory_against_a_truth_as_json() {
    let dir = Scratch::new("eval");
    let truth = dir.join("truth.json");
    std::fs::write(
        &truth,
        r#"{"format": "neardup-bench.truth/v1", "generator": {"scale": "tiny"}, "rounds": [
          {"crawl_id": "week-01", "start": "2026-11-02T00:00:00Z",
           "near_duplicate_groups": [{"id": "nd:1", "kind": "mirror", "size": 3,
             "ref": "http://www.a.example/p",
             "urls": ["http://www.a.example/p", "http://b.example/p", "http://c.example/p"],
             "jaccard_to_ref": {"http://b.example/p": 0.75}}],
           "exact_duplicate_groups": [["http://www.a.example/p", "http://c.example/p"]],
           "hard_negative_pairs": [{"urls": ["http://shop.example/1", "http://shop.example/2"],
             "reason": "same_template_different_main_item", "jaccard": 0.8}],
           "hard_negative_groups": []},
          {"crawl_id": "week-02", "start": "2026-11-09T00:00:00Z",
           "near_duplicate_groups": [], "exact_duplicate_groups": [],
           "hard_negative_pairs": [], "hard_negative_groups": []}]}"#,
    )
    .unwrap();
    let ev = |state: &str, a: &str, b: &str, level: &str, round: &str| {
        format!(
            r#"{{"schema":"neardup.pairs/v1","event_id":"x","state":"{state}","a":"{a}","b":"{b}","level":"{level}","b_similarity":6,"c_similarity":384,"jaccard":0.9,"same_site":false,"at":"2026-11-02T10:15:00Z","crawl_id":"{round}"}}"#
        )
    };
    let (a, b, c) = (
        "http://www.a.example/p",
        "http://b.example/p",
        "http://c.example/p",
    );
    let (s1, s2) = ("http://shop.example/1", "http://shop.example/2");
    let stream = [
        ev("detected", a, c, "exact", "week-01"),
        ev("detected", a, b, "very_similar", "week-01"),
        ev("detected", b, c, "very_similar", "week-01"),
        ev("retracted", b, c, "very_similar", "week-01"),
        ev("detected", s1, s2, "very_similar", "week-01"),
        ev("retracted", a, b, "very_similar", "week-02"),
    ]
    .join("\n");
    let replay_out = dir.join("out");
    std::fs::create_dir_all(&replay_out).unwrap();
    std::fs::write(replay_out.join("pairs.jsonl"), stream + "\n").unwrap();

    let out = neardup(&[
        "eval",
        "--truth",
        truth.to_str().unwrap(),
        "--pairs",
        replay_out.to_str().unwrap(),
        "--json",
        "--label",
        "tiny",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["label"], "tiny");
    assert_eq!(v["pair_events"]["lines"], 6);
    let w1 = &v["rounds"][0];
    assert_eq!(w1["crawl_id"], "week-01");
    assert_eq!(w1["predicted"], 3);
    assert_eq!(w1["truth"], 3);
    assert_eq!(w1["true_positives"], 2);
    assert!((w1["precision"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert!((w1["recall"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(w1["same_site"]["predicted"], 1);
    assert_eq!(w1["different_site"]["true_positives"], 2);
    assert_eq!(w1["recall_by_similarity"][1]["bucket"], "0.7-0.8");
    assert_eq!(w1["recall_by_similarity"][1]["truth"], 2);
    assert_eq!(w1["recall_by_similarity"][1]["found"], 1);
    assert_eq!(w1["exact"]["found_as_exact"], 1);
    assert_eq!(w1["hard_negative_pairs"]["reported"], 1);
    assert_eq!(w1["hard_negative_pairs"]["fraction"], 1.0);
    assert_eq!(
        w1["hard_negative_pairs"]["by_reason"]["same_template_different_main_item"]["listed"],
        1
    );
    assert_eq!(w1["hard_negative_group_pairs"]["reported"], 0);
    assert_eq!(w1["by_level"]["very_similar"]["predicted"], 2);
    assert_eq!(w1["unlabelled_false_positives"], 0);
    assert_eq!(w1["examples"][0]["kind"], "hard_negative_pair");
    // week-02: a~b retracted, empty truth.
    let w2 = &v["rounds"][1];
    assert_eq!(w2["predicted"], 2);
    assert_eq!(w2["precision"], 0.0);
    assert_eq!(w2["recall"], 1.0);
    assert_eq!(v["overall"]["predicted"], 5);
    assert_eq!(v["overall"]["true_positives"], 2);
    assert_eq!(v["min_precision"], 0.0);
    assert!((v["min_recall"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);

    // Two runs side by side (here: the stream, and an empty one).
    let empty = dir.join("empty-pairs.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = neardup(&[
        "eval",
        "--truth",
        truth.to_str().unwrap(),
        "--pairs",
        replay_out.to_str().unwrap(),
        empty.to_str().unwrap(),
        "--label",
        "tiny",
        "none",
        "--json",
    ]);
    let both: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        both["runs"][0], v,
        "a run scores the same alone and side by side"
    );
    let rows = both["comparison"].as_array().unwrap();
    assert_eq!(
        (rows[0]["label"].as_str(), rows[1]["label"].as_str()),
        (Some("tiny"), Some("none"))
    );
    assert_eq!(rows[0]["precision"], v["overall"]["precision"]);
    assert_eq!(
        rows[0]["same_site_precision"],
        v["overall"]["same_site"]["precision"]
    );
    assert_eq!(rows[1]["recall"], 0.0);

    // The tables name every round; without --truth or --labels the command says what it needs.
    let text = neardup(&[
        "eval",
        "--truth",
        truth.to_str().unwrap(),
        "--pairs",
        replay_out.to_str().unwrap(),
    ]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("week-02") && text.contains("overall"),
        "{text}"
    );
    let err = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["eval", "--pairs", replay_out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!err.status.success());
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(err.contains("--truth") && err.contains("--labels"), "{err}");
}

/// The cluster map of a replay: sorted by URL, a row per clustered URL and level, and each
/// cluster's rows agree on its size and canonical, which is one of its members.
fn check_cluster_map(out: &Path) {
    let text = std::fs::read_to_string(out.join("cluster-map.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !rows.is_empty(),
        "the sample crawl has near-duplicates: the map is empty"
    );
    let urls: Vec<&str> = rows.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert!(
        urls.windows(2).all(|w| w[0] <= w[1]),
        "rows not sorted by URL"
    );
    let mut by_cluster: std::collections::BTreeMap<&str, Vec<&serde_json::Value>> =
        Default::default();
    let mut seen = BTreeSet::new();
    for r in &rows {
        let level = r["level"].as_str().unwrap();
        assert!(
            matches!(level, "very_similar" | "virtually_identical"),
            "{r}"
        );
        assert!(
            seen.insert((r["url"].as_str().unwrap(), level)),
            "two rows for {r}"
        );
        by_cluster
            .entry(r["cluster_id"].as_str().unwrap())
            .or_default()
            .push(r);
    }
    assert!(seen.iter().any(|(_, l)| *l == "very_similar"));
    for (id, members) in by_cluster {
        let size = members[0]["size"].as_u64().unwrap();
        let canonical = members[0]["canonical"].as_str().unwrap();
        assert_eq!(members.len() as u64, size, "cluster {id}: rows != size");
        assert!(size >= 2, "cluster {id} of one page");
        for m in &members {
            assert_eq!(m["size"].as_u64().unwrap(), size, "cluster {id}");
            assert_eq!(m["canonical"].as_str().unwrap(), canonical, "cluster {id}");
        }
        assert!(
            members
                .iter()
                .any(|m| m["url"].as_str().unwrap() == canonical),
            "cluster {id}: canonical {canonical} is not a member"
        );
    }
}

/// The replay report: its figures agree with the input, and a real browser draws its charts.
fn check_report(out: &Path, sample: &neardup::sample::SampleCrawl, rounds: usize) {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "neardup.report/v1");
    assert_eq!(doc["totals"]["records"], sample.records.len() as u64);
    let dead: u64 = doc["totals"]["dead_letters"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(dead, sample.bad_records.len() as u64);
    let report_rounds = doc["rounds"].as_array().unwrap();
    assert_eq!(report_rounds.len(), rounds);
    for r in report_rounds {
        let g = &r["link_graph"];
        let part = |k: &str| g[k].as_u64().unwrap();
        assert_eq!(
            part("connected_pages") + part("disconnected_pages"),
            r["pages"].as_u64().unwrap(),
            "{r}"
        );
        assert!(
            part("connected_duplicates") + part("disconnected_duplicates") <= part("duplicates"),
            "{r}"
        );
        assert!(
            part("entry_pages") >= 1 && part("entry_pages") <= part("connected_pages"),
            "{r}"
        );
        let sizes: Vec<u64> = r["largest_clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["size"].as_u64().unwrap())
            .collect();
        assert!(
            !sizes.is_empty() && sizes.windows(2).all(|w| w[0] >= w[1]),
            "{sizes:?}"
        );
    }
    assert!(report_rounds[1]["change_buckets"]
        .as_object()
        .is_some_and(|m| !m.is_empty()));

    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // Self-contained: nothing is fetched (no external script, style sheet, image or font).
    for fetch in ["<script src", "<link", "src=\"http", "url(http", "@import"] {
        assert!(
            !html.contains(fetch),
            "report.html fetches something: {fetch}"
        );
    }
    let charts = html.matches("<svg class=\"chart\"").count();
    assert!(charts >= 6, "{charts} charts");
    let dom = browser_dom(&out.join("report.html"));
    assert!(
        dom.contains(&format!("data-drawn=\"{charts}/{charts}\"")),
        "the browser did not draw every chart: {}",
        dom.split_once("data-drawn")
            .map_or("no data-drawn mark", |x| &x.1[..12.min(x.1.len())])
    );
}

/// The DOM after a headless Chromium loaded `page` (`NEARDUP_CHROMIUM` or `chromium` on PATH;
/// tests/run-all.sh installs Debian's).
fn browser_dom(page: &Path) -> String {
    let browser = std::env::var("NEARDUP_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let out = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot start {browser} ({e}): install Chromium (tests/run-all.sh does) or set NEARDUP_CHROMIUM")
        });
    assert!(
        out.status.success(),
        "{browser} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One WARC record, gzip-compressed on its own (the `.warc.gz` convention); returns its
/// record ID.
fn warc_record(
    out: &mut Vec<u8>,
    kind: &str,
    uri: Option<&str>,
    extra: &[(&str, &str)],
    block: &[u8],
) -> String {
    let id = format!("<urn:uuid:{}>", out.len());
    let mut rec = format!("WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {id}\r\n");
    if let Some(u) = uri {
        rec += &format!("WARC-Target-URI: {u}\r\n");
    }
    for (k, v) in extra {
        rec += &format!("{k}: {v}\r\n");
    }
    rec += &format!("Content-Length: {}\r\n\r\n", block.len());
    let mut bytes = rec.into_bytes();
    bytes.extend_from_slice(block);
    bytes.extend_from_slice(b"\r\n\r\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).unwrap();
    out.extend(gz.finish().unwrap());
    id
}

#[test]
fn replay_of_a_warc_archive_matches_the_same_pages_as_events() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = Scratch::new("warc");
    let sample = sample_crawl(&SampleOptions::default());
    let bad: BTreeSet<usize> = sample.bad_records.iter().map(|(i, _)| *i).collect();
    let mut warc = vec![];
    let mut events = String::new();
    warc_record(
        &mut warc,
        "warcinfo",
        None,
        &[("Content-Type", "application/warc-fields")],
        b"software: test\r\n",
    );
    let (mut responses, mut n, mut last_at) = (0, 0, String::new());
    // The first two 200 responses: URL, record ID, payload digest, content type and body.
    let mut captured: Vec<(String, String, String, serde_json::Value, Vec<u8>)> = vec![];
    for (i, r) in sample.records.iter().enumerate() {
        if bad.contains(&i) {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(r).unwrap();
        let (url, at, status) = (
            v["url"].as_str().unwrap(),
            v["fetched_at"].as_str().unwrap(),
            v["status"].as_u64().unwrap(),
        );
        let body: Vec<u8> = match (v.get("body"), v.get("body_base64")) {
            (Some(t), _) => t.as_str().unwrap().as_bytes().to_vec(),
            (_, Some(b)) => b64.decode(b.as_str().unwrap()).unwrap(),
            _ => vec![],
        };
        last_at = at.to_owned();
        // The page event the archive stands for: no crawl round, the body as bytes.
        let mut e = serde_json::json!({"url": url, "fetched_at": at, "status": status});
        let mut head = format!("HTTP/1.1 {status} X\r\n");
        if let Some(ct) = v.get("content_type").and_then(|c| c.as_str()) {
            e["content_type"] = ct.into();
            head += &format!("Content-Type: {ct}\r\n");
        }
        let mut extra = vec![("WARC-Date", at.to_owned())];
        if let Some(ip) = v.get("ip").and_then(|c| c.as_str()) {
            e["ip"] = ip.into();
            extra.push(("WARC-IP-Address", ip.to_owned()));
        }
        if (200..300).contains(&status) {
            e["body_base64"] = b64.encode(&body).into();
        }
        events += &(e.to_string() + "\n");
        // Vary the HTTP framing: chunked, gzip-encoded, plain.
        let payload = match n % 3 {
            0 => {
                head += "Transfer-Encoding: chunked\r\n";
                let mut p = vec![];
                for c in body.chunks(100) {
                    p.extend(format!("{:x}\r\n", c.len()).bytes());
                    p.extend(c);
                    p.extend(b"\r\n");
                }
                p.extend(b"0\r\n\r\n");
                p
            }
            1 => {
                head += "Content-Encoding: gzip\r\n";
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&body).unwrap();
                gz.finish().unwrap()
            }
            _ => body.clone(),
        };
        n += 1;
        let mut block = (head + "\r\n").into_bytes();
        block.extend(payload);
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
        warc_record(
            &mut warc,
            "request",
            Some(url),
            &extra,
            b"GET / HTTP/1.1\r\n\r\n",
        );
        let mut fields = extra.clone();
        fields.push(("Content-Type", "application/http; msgtype=response"));
        let digest = format!("sha1:T{n}");
        fields.push(("WARC-Payload-Digest", &digest));
        let id = warc_record(
            &mut warc,
            "response",
            Some(&format!("<{url}>")),
            &fields,
            &block,
        );
        if status == 200 && captured.len() < 2 {
            let ct = v["content_type"].clone();
            captured.push((url.to_owned(), id, digest.clone(), ct, body.clone()));
        }
        responses += 1;
    }
    // A crawler's revisit of a page it captured before replays as a 304 of that page; one of
    // another URL's capture is skipped.
    let v: serde_json::Value = serde_json::from_slice(&sample.records[0]).unwrap();
    let first = v["url"].as_str().unwrap().to_owned();
    let revisit_fields = [
        ("WARC-Date", last_at.as_str()),
        (
            "WARC-Profile",
            "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
        ),
    ];
    warc_record(
        &mut warc,
        "revisit",
        Some(&first),
        &revisit_fields,
        b"HTTP/1.1 304 Not Modified\r\n\r\n",
    );
    events += &(serde_json::json!({"url": first, "fetched_at": last_at, "status": 304})
        .to_string()
        + "\n");
    warc_record(
        &mut warc,
        "revisit",
        Some("http://x.example/"),
        &[
            ("WARC-Date", last_at.as_str()),
            ("WARC-Refers-To-Target-URI", &first),
        ],
        b"HTTP/1.1 200 OK\r\n\r\n",
    );
    // Revisits of other URLs' captures, found by payload digest and by record ID (an archive
    // deduplicated across URLs), replay as fetches of those bodies: exact copies.
    let copies = [
        "http://copy.example/by-digest.html",
        "http://copy.example/by-id.html",
    ];
    for (k, ((url, id, digest, ct, body), copy)) in captured.iter().zip(copies).enumerate() {
        let mut fields = vec![
            ("WARC-Date", last_at.as_str()),
            ("WARC-Refers-To-Target-URI", url.as_str()),
            (
                "WARC-Profile",
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
            ),
        ];
        match k {
            0 => fields.push(("WARC-Payload-Digest", digest)),
            _ => fields.push(("WARC-Refers-To", id)),
        }
        warc_record(
            &mut warc,
            "revisit",
            Some(copy),
            &fields,
            b"HTTP/1.1 200 OK\r\n\r\n",
        );
        let mut e = serde_json::json!({"url": copy, "fetched_at": last_at, "status": 200});
        if !ct.is_null() {
            e["content_type"] = ct.clone();
        }
        e["body_base64"] = b64.encode(body).into();
        events += &(e.to_string() + "\n");
    }
    // A page archived as a resource (no HTTP exchange): a 200 fetch of the block.
    let resource_body = "<html><title>Notes</title><p>A page archived as a resource record, \
        with its own words in it.</p></html>";
    warc_record(
        &mut warc,
        "resource",
        Some("http://files.example/notes.html"),
        &[
            ("WARC-Date", last_at.as_str()),
            ("Content-Type", "text/html; charset=utf-8"),
        ],
        resource_body.as_bytes(),
    );
    events += &(serde_json::json!({"url": "http://files.example/notes.html",
        "fetched_at": last_at, "status": 200, "content_type": "text/html; charset=utf-8",
        "body_base64": b64.encode(resource_body)})
    .to_string()
        + "\n");
    // A crawler's DNS lookup, archived as a response: not a page, skipped (counted).
    warc_record(
        &mut warc,
        "response",
        Some("dns:www.docs.example"),
        &[("Content-Type", "text/dns")],
        b"20261109000000\nwww.docs.example.\t300\tIN\tA\t192.0.2.10\n",
    );
    warc_record(
        &mut warc,
        "response",
        Some("http://x.example/broken"),
        &[],
        b"no HTTP here",
    );
    // warcinfo, request + response per page, four revisits, a resource, a DNS lookup, broken
    let records = 2 * responses + 8;
    let (summary, from_warc) = replay_file(&dir, "crawl.warc.gz", &warc);
    let (_, from_events) = replay_file(&dir, "events.jsonl", events.as_bytes());
    assert!(
        summary.contains(&format!("WARC records: {records}, responses replayed {}, resources replayed 1, conversions (extracted text) replayed 0, conversions of a page read before them skipped 0, revisits replayed as 304 1, revisits of other URLs replayed with their capture's body 2, revisits of other URLs skipped (capture not read before them, or no longer in --revisit-cache) 1, records too large to hold (dead letters) 0, records of other schemes than http(s) skipped 1, other records skipped {}", responses + 1, responses + 1)),
        "{summary}"
    );
    for kind in OutputKind::ALL {
        if kind != OutputKind::DeadLetter {
            let got = lines(&from_warc, kind);
            assert_eq!(got, lines(&from_events, kind), "{kind:?}");
            if kind == OutputKind::Pairs {
                assert!(!got.is_empty(), "the sample has pairs");
            }
            if kind == OutputKind::Signatures {
                // Each copy is signed as the body it refers to: the checksum of that capture.
                let checksums = |url: &str| -> Vec<String> {
                    got.iter()
                        .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap())
                        .filter(|v| v["url"] == url && v["content"].is_object())
                        .map(|v| v["content"]["checksum"].as_str().unwrap().to_owned())
                        .collect()
                };
                for ((url, ..), copy) in captured.iter().zip(copies) {
                    let copied = checksums(copy);
                    assert_eq!(copied.len(), 1, "{copy}");
                    assert_eq!(copied[0], checksums(url)[0], "{copy} copies {url}");
                }
            }
        }
    }
    // report.json says what the archive held.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(from_warc.join("report.json")).unwrap()).unwrap();
    let warc_counts = &report["source"]["warc"];
    assert_eq!(warc_counts["records"], records);
    assert_eq!(warc_counts["revisits_of_others"], 2);
    assert_eq!(warc_counts["resources"], 1);
    assert_eq!(warc_counts["not_http"], 1);
    // The unparseable response is a dead letter naming its record, not lost.
    let dead = lines(&from_warc, OutputKind::DeadLetter);
    assert_eq!(dead.len(), 1);
    let d: DeadLetterEvent = serde_json::from_slice(&dead[0]).unwrap();
    assert_eq!(
        d.source,
        Source::File {
            file: dir.join("crawl.warc.gz").display().to_string(),
            line: records
        }
    );

    // Damage is bad input, not the end of the replay: each damaged stretch is a dead letter
    // (`damaged_input`), and every record around it is read as it would be without it.
    let members = gzip_members(&warc);
    let damaged_letters = |out: &Path| -> Vec<DeadLetterEvent> {
        lines(out, OutputKind::DeadLetter)
            .iter()
            .map(|l| serde_json::from_slice::<DeadLetterEvent>(l).unwrap())
            .filter(|d| d.reason == DeadLetterReason::DamagedInput)
            .collect()
    };
    // Cut off inside its last record (a download cut short): the records before it give what
    // an archive of them alone gives.
    let cut_name = "cut.warc.gz";
    let (printed, cut_out) = replay_printing(&dir, cut_name, &warc[..warc.len() - 30]);
    let stderr = String::from_utf8_lossy(&printed.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains(cut_name) && stderr.contains("byte"),
        "{stderr}"
    );
    let (_, before_cut) = replay_file(
        &dir,
        "before-cut.warc",
        &members[..members.len() - 1].concat(),
    );
    for kind in OutputKind::ALL {
        if kind != OutputKind::DeadLetter {
            assert_eq!(lines(&cut_out, kind), lines(&before_cut, kind), "{kind:?}");
        }
    }
    let cut = damaged_letters(&cut_out);
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert!(
        cut[0].detail.contains("cannot be read past byte"),
        "{}",
        cut[0].detail
    );
    assert_eq!(
        cut[0].source,
        Source::File {
            file: dir.join(cut_name).display().to_string(),
            line: records
        }
    );
    // Bytes where a record should start, in a plain archive: skipped to the next record.
    let garbage = b"<html>a stray page where a record should start</html>\r\n".repeat(3);
    let mut spliced = members[..2].concat();
    spliced.extend_from_slice(&garbage);
    spliced.extend(members[2..].concat());
    let (_, from_spliced) = replay_file(&dir, "spliced.warc", &spliced);
    let (_, from_plain) = replay_file(&dir, "plain.warc", &members.concat());
    for kind in OutputKind::ALL {
        if kind != OutputKind::DeadLetter {
            assert_eq!(
                lines(&from_spliced, kind),
                lines(&from_plain, kind),
                "{kind:?}"
            );
        }
    }
    let spliced = damaged_letters(&from_spliced);
    assert_eq!(spliced.len(), 1, "{spliced:?}");
    assert_eq!(spliced[0].payload.as_bytes(), &garbage[..]);
    assert!(
        spliced[0].detail.contains("expected a WARC record"),
        "{}",
        spliced[0].detail
    );
    assert_eq!(damaged_letters(&from_plain).len(), 0);
    // A member of a `.warc.gz` that does not decompress (here its header: another compression
    // method): passed over, and every record after it read.
    let k = members.len() / 2;
    let mut damaged_member = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(m).unwrap();
        let mut bytes = gz.finish().unwrap();
        if i == k {
            bytes[2] = 9;
        }
        damaged_member.extend(bytes);
    }
    let (_, from_damaged_member) = replay_file(&dir, "member.warc.gz", &damaged_member);
    let mut without = members.clone();
    without.remove(k);
    let (_, from_without) = replay_file(&dir, "without.warc", &without.concat());
    for kind in OutputKind::ALL {
        if kind != OutputKind::DeadLetter {
            let got = lines(&from_damaged_member, kind);
            assert_eq!(got, lines(&from_without, kind), "{kind:?}");
        }
    }
    let skipped = damaged_letters(&from_damaged_member);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].detail.contains("does not decompress"),
        "{}",
        skipped[0].detail
    );

    // The same archive as `.warc.zst` (the IIPC's WARC-zstd form: a skippable frame holding a
    // dictionary, raw or itself compressed, then a frame per record compressed with it), and
    // the events as one zstd stream, replay as the gzip forms do.
    let records = gzip_members(&warc);
    let dictionary = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/html.zstd-dict"),
    )
    .unwrap();
    let packed = zstd::bulk::compress(&dictionary, 3).unwrap();
    let mut compressor = zstd::bulk::Compressor::with_dictionary(3, &dictionary).unwrap();
    let framed: Vec<u8> = records
        .iter()
        .flat_map(|r| compressor.compress(r).unwrap())
        .collect();
    let zstd_warc = |dictionary_frame: &[u8]| {
        let mut file = vec![0x5d, 0x2a, 0x4d, 0x18];
        file.extend((dictionary_frame.len() as u32).to_le_bytes());
        file.extend(dictionary_frame);
        file.extend(&framed);
        file
    };
    let events_zst = zstd::encode_all(events.as_bytes(), 3).unwrap();
    for (file, bytes, like) in [
        ("crawl.warc.zst", zstd_warc(&dictionary), &from_warc),
        ("packed.warc.zst", zstd_warc(&packed), &from_warc),
        ("events.jsonl.zst", events_zst, &from_events),
    ] {
        let (_, out) = replay_file(&dir, file, &bytes);
        for kind in OutputKind::ALL {
            let (got, want) = (lines(&out, kind), lines(like, kind));
            match kind {
                // The same records, but the source names this file.
                OutputKind::DeadLetter => assert_eq!(got.len(), want.len(), "{file}"),
                _ => assert_eq!(got, want, "{file}: {kind:?}"),
            }
        }
    }
    // Records compressed with a dictionary the file does not hold: an error naming the file.
    let err = replay_refused(&dir, "undictionaried.warc.zst", &framed);
    assert!(err.contains("undictionaried.warc.zst"), "{err}");
}

/// A WET file (Common Crawl's extracted text: `conversion` records only) replays each record
/// as a fetch of its text, so near-duplicate texts pair; in a file that also holds the
/// response a conversion was made from, the response is the page and the conversion skipped.
#[test]
fn replay_of_a_wet_file_reads_its_conversions_as_pages() {
    let dir = Scratch::new("wet");
    // A text of 300 words, a copy with two words changed, and an unrelated text.
    let words = |seed: u64| -> Vec<String> {
        let mut x = seed;
        (0..300)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("w{}", (x >> 33) % 5000)
            })
            .collect()
    };
    let text = words(1);
    let mut copy = text.clone();
    copy[100] = "changed".into();
    copy[200] = "also".into();
    let texts = [
        ("http://a.example/doc.html", text.join(" ")),
        ("http://b.example/mirror/doc.html", copy.join(" ")),
        ("http://c.example/other.html", words(2).join(" ")),
    ];
    let mut wet = vec![];
    warc_record(
        &mut wet,
        "warcinfo",
        None,
        &[("Content-Type", "application/warc-fields")],
        b"software: test\r\n",
    );
    for (i, (url, body)) in texts.iter().enumerate() {
        let date = format!("2026-11-0{}T00:00:00Z", i + 1);
        warc_record(
            &mut wet,
            "conversion",
            Some(url),
            &[
                ("WARC-Date", &date),
                ("WARC-Refers-To", &format!("<urn:uuid:elsewhere-{i}>")),
                ("Content-Type", "text/plain"),
            ],
            body.as_bytes(),
        );
    }
    let (summary, out) = replay_file(&dir, "crawl.warc.wet.gz", &wet);
    assert!(
        summary.contains("conversions (extracted text) replayed 3, conversions of a page read before them skipped 0"),
        "{summary}"
    );
    let pairs: Vec<PairEvent> = lines(&out, OutputKind::Pairs)
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let found: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|p| p.state == PairState::Detected)
        .map(|p| (p.a.as_str(), p.b.as_str()))
        .collect();
    assert_eq!(found, [(texts[0].0, texts[1].0)], "{pairs:?}");

    // A response and the conversion made of it, in one file: one page, the response's.
    let mut warc = vec![];
    let mut block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>".to_vec();
    block.extend(texts[0].1.as_bytes());
    let id = warc_record(
        &mut warc,
        "response",
        Some(texts[0].0),
        &[("WARC-Date", "2026-11-01T00:00:00Z")],
        &block,
    );
    warc_record(
        &mut warc,
        "conversion",
        Some(texts[0].0),
        &[
            ("WARC-Date", "2026-11-01T00:00:00Z"),
            ("WARC-Refers-To", &id),
            ("Content-Type", "text/plain"),
        ],
        texts[0].1.as_bytes(),
    );
    let (summary, out) = replay_file(&dir, "both.warc.gz", &warc);
    assert!(
        summary.contains("responses replayed 1, resources replayed 0, conversions (extracted text) replayed 0, conversions of a page read before them skipped 1"),
        "{summary}"
    );
    let signatures = lines(&out, OutputKind::Signatures);
    assert_eq!(signatures.len(), 1);
    let v: serde_json::Value = serde_json::from_slice(&signatures[0]).unwrap();
    // The response's body (with its `<p>`), not the conversion's text.
    assert_eq!(v["content"]["body_bytes"], texts[0].1.len() + 3);
}

/// Writes `bytes` to the file `name` in `dir` and replays it into `dir/name-out`: the printed
/// summary and that directory.
fn replay_file(dir: &Path, name: &str, bytes: &[u8]) -> (String, PathBuf) {
    let (printed, out) = replay_printing(dir, name, bytes);
    (String::from_utf8(printed.stdout).unwrap(), out)
}

/// [`replay_file`], with all the replay printed (stdout and stderr).
fn replay_printing(dir: &Path, name: &str, bytes: &[u8]) -> (std::process::Output, PathBuf) {
    std::fs::write(dir.join(name), bytes).unwrap();
    let out = dir.join(format!("{name}-out"));
    let printed = neardup(&[
        "replay",
        "--input",
        dir.join(name).to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    (printed, out)
}

/// Writes `bytes` to the file `name` in `dir`, whose replay must fail: what it printed to stderr.
fn replay_refused(dir: &Path, name: &str, bytes: &[u8]) -> String {
    std::fs::write(dir.join(name), bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "replay",
            "--input",
            dir.join(name).to_str().unwrap(),
            "--out",
        ])
        .arg(dir.join(format!("{name}-out")))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{name} was replayed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The members of a file of gzip members, each decompressed.
fn gzip_members(mut file: &[u8]) -> Vec<Vec<u8>> {
    let mut members = vec![];
    while !file.is_empty() {
        let mut gz = flate2::bufread::GzDecoder::new(file);
        let mut member = vec![];
        std::io::Read::read_to_end(&mut gz, &mut member).unwrap();
        members.push(member);
        file = gz.into_inner();
    }
    members
}

#[test]
fn a_warc_record_too_large_for_any_page_is_a_dead_letter_and_not_held() {
    let dir = Scratch::new("warc-large");
    let mut warc = vec![];
    let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>a small page of words</p>";
    let date = [("WARC-Date", "2026-11-09T00:00:00Z")];
    warc_record(
        &mut warc,
        "response",
        Some("http://a.example/"),
        &date,
        page,
    );
    // 3 MiB of video under a 1 MiB body limit: read past, its start kept for the dead letter.
    let mut video = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n\r\n".to_vec();
    video.resize(3 << 20, 7);
    warc_record(
        &mut warc,
        "response",
        Some("http://a.example/v.mp4"),
        &date,
        &video,
    );
    warc_record(
        &mut warc,
        "response",
        Some("http://b.example/"),
        &date,
        page,
    );
    std::fs::write(dir.join("crawl.warc.gz"), &warc).unwrap();
    let out = dir.join("out");
    let printed = neardup(&[
        "replay",
        "--input",
        dir.join("crawl.warc.gz").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-body-bytes",
        "1MiB",
    ]);
    let summary = String::from_utf8(printed.stdout).unwrap();
    assert!(
        summary.contains("responses replayed 2,")
            && summary.contains("records too large to hold (dead letters) 1,"),
        "{summary}"
    );
    let dead = lines(&out, OutputKind::DeadLetter);
    assert_eq!(dead.len(), 1);
    let d: DeadLetterEvent = serde_json::from_slice(&dead[0]).unwrap();
    assert_eq!(d.reason, neardup_schemas::DeadLetterReason::BodyTooLarge);
    assert_eq!(
        d.source,
        Source::File {
            file: dir.join("crawl.warc.gz").display().to_string(),
            line: 2
        }
    );
    // The records around it are pages, and exact copies of each other.
    assert_eq!(lines(&out, OutputKind::Signatures).len(), 2);
    let pairs = lines(&out, OutputKind::Pairs);
    for p in &pairs {
        eprintln!("PAIR {}", String::from_utf8_lossy(p));
    }
    assert_eq!(pairs.len(), 1);
    let p: PairEvent = serde_json::from_slice(&pairs[0]).unwrap();
    assert_eq!(
        (p.a.as_str(), p.b.as_str()),
        ("http://a.example/", "http://b.example/")
    );
}

/// Asserts that a `neardup` run exited 0, showing its stderr when it did not.
fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "neardup failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `neardup ARGS` with `env` set and every other NEARDUP_* variable of this process removed.
fn neardup_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    for (k, _) in std::env::vars() {
        if k.starts_with("NEARDUP_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args).envs(env.iter().copied()).output().unwrap()
}

#[test]
fn configuration_layers_file_under_environment_under_flags() {
    let dir = Scratch::new("config");
    let file = dir.join("neardup.toml");
    std::fs::write(
        &file,
        "brokers = \"file:9092\"\ngroup = \"from-file\"\ninput_topic = \"file.pages\"\n\
         commit_interval = \"250ms\"\n[topology]\nwindow = \"7d\"\npolicy = \"combined\"\n\
         max_body_bytes = \"1MiB\"\n[kafka]\nsecurity.protocol = \"SASL_SSL\"\n\
         sasl.mechanism = \"SCRAM-SHA-512\"\n\"client.id\" = \"from-file\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = neardup_env(
        &[
            "run",
            "--config",
            f,
            "--check-config",
            "--policy",
            "b",
            "-X",
            "client.id=from-flag",
        ],
        &[
            ("NEARDUP_GROUP", "from-env"),
            ("NEARDUP_POLICY", "c"),
            ("NEARDUP_KAFKA_SASL_USERNAME", "neardup"),
            ("NEARDUP_KAFKA_SASL_PASSWORD", "s3cret"),
        ],
    );
    succeeded(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("s3cret"), "a secret was printed:\n{text}");
    let eff: toml::Table = toml::from_str(&text).unwrap();
    let top = |k: &str| eff[k].as_str().unwrap().to_owned();
    let topo = eff["topology"].as_table().unwrap();
    let kafka = eff["kafka"].as_table().unwrap();
    // File over default; environment over file; flag over environment.
    assert_eq!(top("brokers"), "file:9092");
    assert_eq!(top("input_topic"), "file.pages");
    assert_eq!(top("commit_interval"), "250ms");
    assert_eq!(top("output_prefix"), "neardup.");
    assert_eq!(top("group"), "from-env");
    assert_eq!(topo["policy"].as_str(), Some("b"));
    assert_eq!(topo["window"].as_str(), Some("7d"));
    assert_eq!(topo["max_body_bytes"].as_integer(), Some(1 << 20));
    assert_eq!(topo["min_jaccard"].as_float(), Some(0.7));
    // TLS and SCRAM need librdkafka built with OpenSSL: --check-config creates the clients, so
    // it would fail here with "No provider for SASL mechanism SCRAM-SHA-512" otherwise.
    assert_eq!(kafka["security.protocol"].as_str(), Some("SASL_SSL"));
    assert_eq!(kafka["sasl.mechanism"].as_str(), Some("SCRAM-SHA-512"));
    assert_eq!(kafka["sasl.username"].as_str(), Some("neardup"));
    assert_eq!(kafka["sasl.password"].as_str(), Some("<redacted>"));
    assert_eq!(kafka["client.id"].as_str(), Some("from-flag"));

    // The printed configuration is itself a valid file.
    std::fs::write(dir.join("effective.toml"), text.replace("<redacted>", "x")).unwrap();
    let again = neardup_env(
        &[
            "run",
            "--config",
            dir.join("effective.toml").to_str().unwrap(),
            "--check-config",
        ],
        &[],
    );
    succeeded(&again);
}

#[test]
fn configuration_errors_name_the_setting() {
    let dir = Scratch::new("config-errors");
    let cases: [(&str, &[&str], &[&str]); 8] = [
        (
            "brokers = \"k:1\"\n[topology]\nwindw = \"7d\"\n",
            &[],
            &["windw", "line 3"],
        ),
        (
            "brokers = \"k:1\"\n[topology]\nwindow = \"7w\"\n",
            &[],
            &["window", "unknown duration unit"],
        ),
        (
            "brokers = \"k:1\"\n[topology]\npolicy = \"fuzzy\"\n",
            &[],
            &["policy", "unknown pair policy"],
        ),
        (
            "brokers = \"k:1\"\n[topology]\nmin_jaccard = 1.5\n",
            &[],
            &["min_jaccard", "between 0 and 1"],
        ),
        (
            "group = \"g\"\n",
            &[],
            &["no Kafka brokers", "NEARDUP_BROKERS"],
        ),
        (
            "brokers = \"k:1\"\n[kafka]\n\"no.such.property\" = \"1\"\n",
            &[],
            &["no.such.property"],
        ),
        (
            "brokers = \"k:1\"\n[topology]\nmax_output_bytes = \"100KiB\"\n",
            &[],
            &["max_output_bytes", "dead letter"],
        ),
        (
            "brokers = \"k:1\"\n[kafka]\n\"message.max.bytes\" = \"600000\"\n",
            &[],
            &["message.max.bytes", "max_output_bytes"],
        ),
    ];
    for (i, (text, extra, wanted)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let mut args = vec!["run", "--config", file.to_str().unwrap(), "--check-config"];
        args.extend_from_slice(extra);
        let out = neardup_env(&args, &[]);
        assert!(!out.status.success(), "{text:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        for w in *wanted {
            assert!(
                err.contains(w),
                "{text:?}: the error does not say {w:?}:\n{err}"
            );
        }
    }
    // replay reads [topology] from the same file, with the same checks.
    let out = neardup_env(
        &[
            "replay",
            "--config",
            dir.join("bad0.toml").to_str().unwrap(),
            "--input",
            "x",
            "--out",
            "y",
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("windw"));
}

#[test]
fn each_split_stage_is_checked_by_the_configuration_check() {
    // The mirror stage runs only where the cluster stage leaves mirrors and collections to it
    // (`--mirror-stage`, given to every stage): without it, both the check and `run` refuse it,
    // naming the flag, instead of quietly running a stage that gets no input.
    for check in [true, false] {
        let mut args = vec!["run", "--brokers", "k:1", "--stage", "mirror"];
        if check {
            args.push("--check-config");
        }
        let out = neardup_env(&args, &[]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--stage mirror") && err.contains("--mirror-stage"),
            "{err}"
        );
    }
    // The configuration check of one stage, with `env`.
    let check_stage = |stage: &str, env: &[(&str, &str)]| {
        neardup_env(
            &[
                "run",
                "--brokers",
                "k:1",
                "--stage",
                stage,
                "--check-config",
            ],
            env,
        )
    };
    // sign, index and cluster pass the check without a warning, and with --mirror-stage so
    // does mirror, the configuration printed carrying it.
    for stage in ["sign", "index", "cluster"] {
        let check = check_stage(stage, &[]);
        succeeded(&check);
        assert!(!String::from_utf8_lossy(&check.stderr).contains("warning"));
    }
    let check = check_stage("mirror", &[("NEARDUP_MIRROR_STAGE", "true")]);
    succeeded(&check);
    assert!(String::from_utf8_lossy(&check.stdout).contains("mirror_stage = true"));
    // A part that feeds back into the index cannot run split: the check names it.
    let check = neardup_env(
        &[
            "run",
            "--brokers",
            "k:1",
            "--stage",
            "cluster",
            "--hm-veto",
            "0.2",
            "--check-config",
        ],
        &[],
    );
    assert!(!check.status.success());
    let err = String::from_utf8_lossy(&check.stderr);
    assert!(
        err.contains("hm_veto") && err.contains("--stage all"),
        "{err}"
    );
    let bad = neardup_env(&["run", "--brokers", "k:1", "--stage", "shards"], &[]);
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("possible values: all, sign, index, shard, verify, cluster, mirror"));
    // The shard and verify stages need the number of key shards; the check says so, and with it
    // they pass and the printed configuration carries it.
    for stage in ["shard", "verify"] {
        let check = check_stage(stage, &[]);
        assert!(
            !check.status.success(),
            "--stage {stage} without key shards"
        );
        let err = String::from_utf8_lossy(&check.stderr);
        assert!(err.contains("--key-shards"), "{err}");
        let check = check_stage(stage, &[("NEARDUP_KEY_SHARDS", "2")]);
        succeeded(&check);
        assert!(String::from_utf8_lossy(&check.stdout).contains("key_shards = 2"));
    }
}
