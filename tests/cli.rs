//! The `neardup replay` and `neardup demo` commands, run as a user runs them.

use neardup::replay::replay_records;
use neardup::sample::{sample_crawl, SampleOptions};
use neardup_schemas::{DeadLetterEvent, OutputKind, PairEvent, PairState, Source};
use neardup_topology::Config;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::Command;

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
    let dir = tempdir("replay");
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

#[test]
fn replay_reports_a_missing_input_file_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "replay",
            "--input",
            "/nonexistent/x.jsonl",
            "--out",
            "/tmp/neardup-never",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open input file /nonexistent/x.jsonl"),
        "{err}"
    );
}

#[test]
fn demo_runs_on_the_embedded_cluster_and_finds_the_sample_duplicates() {
    let dir = tempdir("demo");
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
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("neardup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
