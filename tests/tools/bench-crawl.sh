#!/usr/bin/env bash
# Makes one of the benchmark's crawls, once: target/bench/SCALE-rROUNDS-sSEED under the checkout
# (events.jsonl, truth.json, bad-input.jsonl), with ../shared/bench/make_crawl.py
# (NEARDUP_MAKE_CRAWL names another copy), installing the Debian documentation packages it reads
# when they are missing. Prints the directory. Exits 3, saying so, when make_crawl.py is not
# there, so that the caller can skip what needs the crawl.
#
# usage: tests/tools/bench-crawl.sh SCALE ROUNDS SEED    (e.g. small 1 1, medium 4 1)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCALE=${1:?usage: $0 SCALE ROUNDS SEED} ROUNDS=${2:?usage: $0 SCALE ROUNDS SEED} SEED=${3:?usage: $0 SCALE ROUNDS SEED}
MAKE_CRAWL="${NEARDUP_MAKE_CRAWL:-$ROOT/../shared/bench/make_crawl.py}"
BENCH="$ROOT/target/bench/$SCALE-r$ROUNDS-s$SEED"
if [ ! -f "$BENCH/truth.json" ]; then
  if [ ! -f "$MAKE_CRAWL" ]; then
    echo "== $MAKE_CRAWL not found (set NEARDUP_MAKE_CRAWL to the benchmark's make_crawl.py)" >&2
    exit 3
  fi
  mkdir -p "$BENCH"
  generate() { python3 "$MAKE_CRAWL" --scale "$SCALE" --rounds "$ROUNDS" --seed "$SEED" --out "$BENCH" --quiet "$@" >&2; }
  echo "== generating the benchmark's $SCALE crawl (rounds: $ROUNDS, seed: $SEED) into $BENCH" >&2
  if ! generate --no-install; then
    echo "== installing the Debian documentation packages the benchmark reads" >&2
    apt-get update -qq >&2
    generate
  fi
fi
echo "$BENCH"
