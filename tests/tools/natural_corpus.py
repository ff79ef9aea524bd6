#!/usr/bin/env python3
"""Quality on real HTML that no generator made: a crawl stream built from documentation trees
found on the machine, scored against exact Jaccard similarity.

The bench's `make_crawl.py` builds its near-duplicates by recipe (mirrors, edits, templates),
so a policy could come to fit its recipes. Here the near-duplicates are whatever the sources
hold: the same documentation generated twice (Rust's stable and nightly docs, one release
apart, side by side on one host as doc.rust-lang.org serves them), a partial mirror of one
tree on another host, template-heavy API pages (rustdoc, Qt, gtk-doc) whose pages share
sidebars and boilerplate but not their subject. No truth is constructed: every pair of pages
is similar by the exact Jaccard of its 8-word shingle sets, computed as `make_crawl.py`
computes `jaccard_to_ref` (its visible text, terms and shingles, imported from it).

    natural_corpus.py build --out DIR [--source NAME=DIR=URL_PREFIX ...] [--mirror ...]
        writes DIR/events.jsonl (one crawl round, the pages shuffled, one second apart) and
        DIR/pages.json (each URL's file)
    natural_corpus.py truth --out DIR
        writes DIR/truth-pairs.jsonl: every pair of pages with Jaccard >= 0.5 that a MinHash
        LSH over 128 min-values (32 bands of 4) proposes, each with its exact Jaccard (the
        banding finds a pair at 0.7 with probability 0.9998, at 0.5 with 0.87)
    natural_corpus.py score --out DIR --pairs REPLAY_OUT
        scores the pair events of `neardup replay --input DIR/events.jsonl --out REPLAY_OUT`:
        every reported pair's exact Jaccard, recall of the truth pairs by similarity band,
        same-site and different-site apart

Needs numpy for `truth` (tests/tools/natural_corpus.py truth runs in any venv with numpy).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
from array import array
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

# The bench's directory: make_crawl.py's, as tests/run-all.sh finds it.
BENCH = Path(os.environ.get("NEARDUP_MAKE_CRAWL",
                            Path(__file__).resolve().parents[3] / "shared" / "bench" / "make_crawl.py")).parent

RUST = Path.home() / ".rustup" / "toolchains"
RUST_TREES = ["std", "alloc", "book", "cargo", "reference", "rustc", "nomicon"]
DEFAULT_MIRROR = "https://doc.rust-lang.example/stable/std/=https://rust-mirror.example/1.95/std/=0.3"


def default_sources():
    """(name, directory, URL prefix) of every documentation tree this machine has."""
    out = []
    for channel in ["stable", "nightly"]:
        root = RUST / f"{channel}-x86_64-unknown-linux-gnu" / "share" / "doc" / "rust" / "html"
        for tree in RUST_TREES:
            if (root / tree).is_dir():
                out.append((f"rust-{channel}-{tree}", root / tree,
                            f"https://doc.rust-lang.example/{channel}/{tree}/"))
    for name, d, prefix in [("qt5", "/usr/share/qt5/doc", "https://doc.qt.example/qt-5/"),
                            ("gtk-doc", "/usr/share/gtk-doc/html", "https://developer.gnome.example/")]:
        if Path(d).is_dir():
            out.append((name, Path(d), prefix))
    return out


def html_files(d: Path):
    return sorted(p for p in d.rglob("*.html") if p.is_file())


def build(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = [tuple(s.split("=", 2)) for s in args.source] if args.source else default_sources()
    pages = {}  # url -> file
    for name, d, prefix in sources:
        files = html_files(Path(d))
        for f in files:
            pages[prefix + str(f.relative_to(d))] = str(f)
        print(f"{name}: {len(files)} pages from {d}", file=sys.stderr)
    # A partial mirror: a share of one source's pages on another host, byte for byte.
    mirrors = args.mirror if args.mirror is not None else [DEFAULT_MIRROR]
    for spec in (m for m in mirrors if m != "none"):
        src_prefix, mirror_prefix, fraction = spec.split("=")
        r = random.Random(f"mirror {spec}")
        chosen = [u for u in sorted(pages) if u.startswith(src_prefix) and r.random() < float(fraction)]
        for u in chosen:
            pages[mirror_prefix + u[len(src_prefix):]] = pages[u]
        print(f"mirror {mirror_prefix}: {len(chosen)} pages of {src_prefix}", file=sys.stderr)
    urls = sorted(pages)
    random.Random(args.seed).shuffle(urls)
    start = datetime(2026, 11, 2, tzinfo=timezone.utc)
    hosts = {}
    skipped = []
    with open(out / "events.jsonl", "w") as f:
        for i, u in enumerate(urls):
            body = Path(pages[u]).read_bytes()
            if len(body) > args.max_body:
                skipped.append(u)
                continue
            host = u.split("/")[2]
            ip = hosts.setdefault(host, f"198.51.100.{len(hosts) + 1}")
            ev = {"url": u, "fetched_at": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "status": 200, "ip": ip, "crawl_id": "week-01"}
            try:
                ev["content_type"] = "text/html; charset=utf-8"
                ev["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                ev["content_type"] = "text/html; charset=iso-8859-1"
                ev["body"] = body.decode("latin-1")
            f.write(json.dumps(ev, ensure_ascii=False) + "\n")
    left_out = set(skipped)
    kept = {u: pages[u] for u in urls if u not in left_out}
    (out / "pages.json").write_text(json.dumps(kept, indent=0, sort_keys=True))
    print(f"{len(kept)} events ({len(skipped)} over {args.max_body} bytes left out), "
          f"{len(hosts)} hosts -> {out / 'events.jsonl'}", file=sys.stderr)


# An instant redirect: a meta refresh with a delay of 0 and a URL. Such a page is a redirect,
# not a document (as a 3xx fetch is), so it is in no truth pair.
REFRESH = re.compile(r"""<meta\b[^>]*http-equiv\s*=\s*["']?refresh["']?[^>]*>""", re.I)
INSTANT = re.compile(r"""content\s*=\s*["']?\s*(0+(\.\d*)?|\.\d*)\s*[;,]\s*(url\s*=)?\s*["']?[^"'\s>]""", re.I)


def is_redirect(body: str) -> bool:
    return any(INSTANT.search(m.group(0)) for m in REFRESH.finditer(body))


def load_shingles(out: Path):
    sys.path.insert(0, str(BENCH))
    import make_crawl  # the bench's own visible text, terms and 8-word shingles

    events = [json.loads(l) for l in open(out / "events.jsonl")]
    sh = make_crawl.Shingler()
    urls, sets, digests = [], [], []
    redirects = 0
    for n, ev in enumerate(events):
        urls.append(ev["url"])
        if is_redirect(ev["body"]):
            redirects += 1
            sets.append(array("q"))
            digests.append(None)
            continue
        sets.append(sh.shingles(ev["body"]))
        digests.append(hashlib.sha256(ev["body"].encode()).hexdigest())
        if n % 2000 == 0:
            print(f"shingled {n}/{len(events)}", file=sys.stderr)
    print(f"{redirects} pages are instant meta-refresh redirects: in no truth pair", file=sys.stderr)
    return urls, sets, digests


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def truth(args):
    import numpy as np

    out = Path(args.out)
    urls, sets, digests = load_shingles(out)
    rng = np.random.default_rng(7)
    perms, bands = 128, 32
    rows = perms // bands
    mul = rng.integers(1, 2**63, size=perms, dtype=np.uint64) | np.uint64(1)
    add = rng.integers(0, 2**63, size=perms, dtype=np.uint64)
    buckets = defaultdict(list)
    for i, s in enumerate(sets):
        if len(s) == 0:
            continue  # no terms: such pages take part in exact pairs only
        x = np.frombuffer(s, dtype=np.int64).astype(np.uint64)
        with np.errstate(over="ignore"):
            mins = (x[:, None] * mul[None, :] + add[None, :]).min(axis=0)
        for band in range(bands):
            buckets[(band, mins[band * rows:(band + 1) * rows].tobytes())].append(i)
    candidates = set()
    for members in buckets.values():
        if len(members) > 1:
            for a in range(len(members)):
                for b in range(a + 1, len(members)):
                    candidates.add((members[a], members[b]))
    print(f"{len(candidates)} candidate pairs", file=sys.stderr)
    as_sets = [set(s) for s in sets]
    n = 0
    with open(out / "truth-pairs.jsonl", "w") as f:
        for a, b in sorted(candidates):
            j = jaccard(as_sets[a], as_sets[b])
            if j >= 0.5:
                f.write(json.dumps({"a": urls[a], "b": urls[b], "jaccard": round(j, 4),
                                    "exact": digests[a] == digests[b]}) + "\n")
                n += 1
    # Pages with identical bodies and no terms are exact pairs too.
    by_digest = defaultdict(list)
    for i, s in enumerate(sets):
        if len(s) == 0 and digests[i] is not None:
            by_digest[digests[i]].append(i)
    with open(out / "truth-pairs.jsonl", "a") as f:
        for members in by_digest.values():
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    f.write(json.dumps({"a": urls[members[x]], "b": urls[members[y]], "jaccard": 1.0,
                                        "exact": True}) + "\n")
                    n += 1
    print(f"{n} pairs with Jaccard >= 0.5 -> {out / 'truth-pairs.jsonl'}", file=sys.stderr)


def site(url: str) -> str:
    host = url.split("/")[2].split(":")[0]
    return ".".join(host.split(".")[-2:])


BANDS = [(1.0, 1.01, "1.0"), (0.95, 1.0, "0.95-1"), (0.9, 0.95, "0.9-0.95"), (0.8, 0.9, "0.8-0.9"),
         (0.7, 0.8, "0.7-0.8"), (0.5, 0.7, "0.5-0.7"), (0.0, 0.5, "< 0.5")]


def band_of(j: float) -> str:
    for lo, hi, name in BANDS:
        if lo <= j < hi:
            return name
    return "< 0.5"


def score(args):
    out = Path(args.out)
    truth_pairs = {}
    for l in open(out / "truth-pairs.jsonl"):
        t = json.loads(l)
        truth_pairs[frozenset((t["a"], t["b"]))] = t
    reported = {}
    for l in open(Path(args.pairs) / "pairs.jsonl"):
        e = json.loads(l)
        key = frozenset((e["a"], e["b"]))
        if e["state"] == "detected":
            reported[key] = e
        elif e["state"] == "retracted":
            reported.pop(key, None)
    # One pass over the pages: the shingles of reported pairs the truth file lacks (below 0.5,
    # or missed by its banding), to measure them; the titles of the truth pairs above 0.9, for
    # recall by how the pages name themselves.
    sys.path.insert(0, str(BENCH))
    import make_crawl

    missing = [k for k in reported if k not in truth_pairs]
    high = [k for k in truth_pairs if truth_pairs[k]["jaccard"] >= 0.9]
    need_sets = set().union(*missing) if missing else set()
    need_titles = set().union(*high) if high else set()
    sh = make_crawl.Shingler()
    sets, titles = {}, {}
    for l in open(out / "events.jsonl"):
        ev = json.loads(l)
        if ev["url"] in need_sets:
            sets[ev["url"]] = set(sh.shingles(ev["body"]))
        if ev["url"] in need_titles:
            titles[ev["url"]] = make_crawl.title_of(ev["body"])
    exact_j = {k: jaccard(*(sets[u] for u in sorted(k))) for k in missing}
    sim = {k: truth_pairs[k]["jaccard"] if k in truth_pairs else exact_j[k] for k in reported}

    def split(keys):
        same = [k for k in keys if len({site(u) for u in k}) == 1]
        other = [k for k in keys if len({site(u) for u in k}) > 1]
        return same, other

    print(f"reported pairs: {len(reported)}; truth pairs (Jaccard >= 0.5): {len(truth_pairs)}")
    print("\nreported pairs by exact Jaccard (all / same site / different sites), and by level:")
    rs, rd = split(list(reported))
    for _, _, name in BANDS:
        c = lambda ks: sum(1 for k in ks if band_of(sim[k]) == name)
        print(f"  {name:>9}: {c(reported):6} / {c(rs):6} / {c(rd):6}")
    print("  levels:", dict(Counter(e["level"] for e in reported.values())))
    for thr in [0.8, 0.7, 0.5]:
        ok = lambda ks: sum(1 for k in ks if sim[k] >= thr)
        fmt = lambda ks: f"{ok(ks) / len(ks):.4f} ({ok(ks)}/{len(ks)})" if ks else "-"
        print(f"precision, positive at Jaccard >= {thr}: {fmt(list(reported))}; same site {fmt(rs)}; "
              f"different sites {fmt(rd)}")
    print("\nrecall of the truth pairs by exact Jaccard (all / same site / different sites):")
    ts, td = split(list(truth_pairs))
    for lo, hi, name in BANDS[:-1]:
        def rec(ks):
            band = [k for k in ks if band_of(truth_pairs[k]["jaccard"]) == name]
            hit = sum(1 for k in band if k in reported)
            return f"{hit / len(band):.4f} ({hit}/{len(band)})" if band else "-"
        print(f"  {name:>9}: {rec(truth_pairs)}; {rec(ts)}; {rec(td)}")
    for thr in [0.8, 0.9]:
        band = [k for k in truth_pairs if truth_pairs[k]["jaccard"] >= thr]
        hit = sum(1 for k in band if k in reported)
        print(f"recall at Jaccard >= {thr}: {hit / max(1, len(band)):.4f} ({hit}/{len(band)})")
    # Recall above 0.9 by how the pages name themselves: their URLs' last path segments (an
    # index page or a directory names nothing) and their titles.
    def name(u):
        last = u.split("?")[0].split("#")[0].split("/", 3)[-1].rsplit("/", 1)[-1]
        return "" if last == "" or last.startswith("index.") else last

    def naming(k):
        a, b = sorted(k)
        same_name = name(a) == name(b) or not name(a) or not name(b)
        same_title = titles[a] == titles[b] or not titles[a] or not titles[b]
        return ("same name" if same_name else "different names") + (
            ", same title" if same_title else ", different titles")

    print("recall at Jaccard >= 0.9 by the pages' URL names and titles (all / same site / different sites):")
    for cat in sorted({naming(k) for k in high}):
        def rec(ks):
            band = [k for k in ks if naming(k) == cat]
            hit = sum(1 for k in band if k in reported)
            return f"{hit / len(band):.4f} ({hit}/{len(band)})" if band else "-"
        hs, hd = split(high)
        print(f"  {cat}: {rec(high)}; {rec(hs)}; {rec(hd)}")
    ex = [k for k in truth_pairs if truth_pairs[k]["exact"]]
    print(f"exact pairs (identical bodies): {sum(1 for k in ex if k in reported)}/{len(ex)} reported, "
          f"{sum(1 for k in ex if k in reported and reported[k]['level'] == 'exact')} as exact")
    worst = sorted(reported, key=lambda k: sim[k])[: args.show]
    if worst:
        print(f"\nthe {len(worst)} reported pairs of lowest Jaccard:")
        for k in worst:
            e = reported[k]
            print(f"  {sim[k]:.3f} {e['level']} b={e['b_similarity']} c={e['c_similarity']} "
                  f"est={e['jaccard']} {e['a']} {e['b']}")
    missed = sorted((k for k in truth_pairs if k not in reported), key=lambda k: -truth_pairs[k]["jaccard"])
    if missed[: args.show]:
        print(f"\nthe {min(args.show, len(missed))} missed truth pairs of highest Jaccard:")
        for k in missed[: args.show]:
            a, b = sorted(k)
            print(f"  {truth_pairs[k]['jaccard']:.3f} {a} {b}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--source", action="append", default=[],
                   help="NAME=DIR=URL_PREFIX (repeatable; default: the Rust, Qt and gtk-doc trees found)")
    b.add_argument("--mirror", action="append",
                   help="SOURCE_PREFIX=MIRROR_PREFIX=FRACTION: that share of the pages also on the mirror "
                        f"(repeatable; default: {DEFAULT_MIRROR}; 'none' for no mirror)")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--max-body", type=int, default=5 * 1024 * 1024,
                   help="leave out larger files (neardup's default --max-body-bytes)")
    t = sub.add_parser("truth")
    t.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("--out", required=True)
    s.add_argument("--pairs", required=True, help="the replay's output directory")
    s.add_argument("--show", type=int, default=15)
    args = p.parse_args()
    {"build": build, "truth": truth, "score": score}[args.cmd](args)


if __name__ == "__main__":
    main()
