//! Golden signature events: fixed pages (`tests/golden/pages.jsonl`: UTF-8 HTML with links,
//! images, entities, script, style, comments and `pre`; a Latin-1 `body_base64` page; a second
//! fetch of the first page with changed text; a page in Japanese and Chinese; one in Thai with
//! Khmer, Lao and Myanmar; a `text/plain` file with markup-like characters) must give exactly the checked-in events
//! (`tests/golden/signatures.jsonl`). Any change to any signature, hash, seed or parameter
//! fingerprint fails here: make it deliberately, bump what it versions (`TOKENIZER_VERSION`,
//! an `ALGORITHM_VERSION`, the params prefix) and regenerate the file with
//! `NEARDUP_BLESS=1 cargo test -p neardup-topology --test golden_signatures`.

use neardup_schemas::{OutputKind, Source};
use neardup_topology::{Config, Topology};

#[test]
fn signature_events_of_fixed_pages_are_pinned() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let input = std::fs::read_to_string(format!("{dir}/pages.jsonl")).unwrap();
    let mut topo = Topology::new(Config::default());
    let mut got = String::new();
    for (i, line) in input.lines().enumerate() {
        let mut out = vec![];
        let src = Source::File {
            file: "pages.jsonl".into(),
            line: i as u64 + 1,
        };
        topo.process(line.as_bytes(), &src, &mut out);
        for e in out.iter().filter(|e| e.kind == OutputKind::Signatures) {
            got.push_str(std::str::from_utf8(&e.value).unwrap());
            got.push('\n');
        }
    }
    let golden = format!("{dir}/signatures.jsonl");
    if std::env::var_os("NEARDUP_BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "signature event {i} differs from the golden file");
    }
    assert_eq!(got.lines().count(), want.lines().count());
    assert_eq!(got.lines().count(), 6);
}
