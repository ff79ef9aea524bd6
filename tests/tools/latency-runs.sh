#!/usr/bin/env bash
# Issue 7's latency figure, measured several times instead of once: page event produced -> pair
# event received by a consumer of the pairs topic, each run by `e2e_bench --latency-only` on a
# freshly restarted test broker (tansu slows as it holds more), fed at RATE records/s, from a
# cold start or, with --warm N, after N records fed untimed (the medium crawl's first round is
# 21,366). Prints each run's median, p99 and max, then over the runs the median p99, the range
# and how many runs had their p99 under 100 ms. On a shared two-core machine one run's p99 can
# land anywhere from under the bar to seconds over it in the same hour (README, "Latency on this
# machine"); the spread of several runs says what one run cannot.
#
# usage: tests/tools/latency-runs.sh --rate R [--runs N] [--warm RECORDS] [--out DIR]
#                                    [EVENTS.jsonl] [-- NEARDUP_RUN_ARGS...]
#
#   --rate R      records per second fed to neardup (figures.sh's latency runs use half the
#                 throughput run's rate; it prints the rate it used)
#   --runs N      runs (default 5)
#   --warm N      records fed untimed first, as figures.sh's steady-state run does
#   --out DIR     where each run's e2e_bench output goes (default target/latency/<date-time>)
#   EVENTS.jsonl  a make_crawl.py events file (default: the medium crawl of four rounds, seed 1,
#                 in target/bench/medium-r4-s1, made by tests/tools/bench-crawl.sh)
#   after --       arguments for `neardup run` (e.g. -X fetch.wait.max.ms=10)
#
# It restarts the test broker (tests/kafka-test-broker.sh) before every run, dropping what it
# holds, and stops it at the end unless it was running before.
set -euo pipefail
# shellcheck source=tests/tools/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

RATE="" RUNS=5 WARM="" OUT="" EVENTS=""
PASSED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=${2:?--rate needs records per second}; shift 2 ;;
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    --warm) WARM=${2:?--warm needs a number of records}; shift 2 ;;
    --out) OUT=$(from_caller "${2:?--out needs a directory}"); shift 2 ;;
    --) shift; PASSED=("$@"); break ;;
    -h|--help) usage_text; exit 0 ;;
    -*) echo "latency-runs.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$EVENTS" ] || { echo "latency-runs.sh: one events file only" >&2; usage; }
       EVENTS=$(from_caller "$1"); shift ;;
  esac
done
[ -n "$RATE" ] || { echo "latency-runs.sh: --rate is required" >&2; usage; }
case "$RUNS" in ''|*[!0-9]*|0) echo "latency-runs.sh: --runs takes a number of 1 or more, not $RUNS" >&2; exit 2 ;; esac
case "$WARM" in *[!0-9]*) echo "latency-runs.sh: --warm takes a number of records, not $WARM" >&2; exit 2 ;; esac

EVENTS=$(events_file "$EVENTS") || exit 2
OUT=${OUT:-$ROOT/target/latency/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

echo "== building the release binaries (once)"
cargo build --release --locked --quiet -p neardup --example e2e_bench --bin neardup
BENCH_BIN="$ROOT/target/release/examples/e2e_bench"

was_running=0
tests/kafka-test-broker.sh status >/dev/null 2>&1 && was_running=1
[ "$was_running" = 1 ] || trap 'tests/kafka-test-broker.sh stop >/dev/null 2>&1 || true' EXIT

ARGS=(--events "$EVENTS" --latency-only --latency-rate "$RATE")
[ -z "$WARM" ] || ARGS+=(--latency-warm "$WARM")
[ ${#PASSED[@]} = 0 ] || ARGS+=(-- "${PASSED[@]}")
echo "== $RUNS run(s) at $RATE records/s${WARM:+, after $WARM records untimed}, each on a restarted broker; outputs in $OUT"
P99S=()
for i in $(seq 1 "$RUNS"); do
  tests/kafka-test-broker.sh stop >/dev/null 2>&1 || true
  BROKERS=$(tests/kafka-test-broker.sh start 2>"$OUT/broker-$i.log") \
    || { echo "run $i: the test broker did not start, see $OUT/broker-$i.log" >&2; exit 1; }
  "$BENCH_BIN" --brokers "$BROKERS" "${ARGS[@]}" > "$OUT/run-$i.txt" 2>&1 \
    || { echo "run $i: e2e_bench failed, see $OUT/run-$i.txt" >&2; exit 1; }
  latency "$OUT/run-$i.txt"
  [ -n "$P99" ] || { echo "run $i: no latency figure in $OUT/run-$i.txt" >&2; exit 1; }
  echo "run $i ($(date -u +%H:%M) UTC): $LAT"
  P99S+=("$P99")
done
printf '%s\n' "${P99S[@]}" | sort -n | awk -v runs="$RUNS" '
  { v[NR] = $1; if ($1 < 100) met++ }
  END {
    med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "p99 over %d runs: median %s ms, from %d to %d ms; under 100 ms in %d of %d\n",
      runs, med, v[1], v[NR], met + 0, runs
  }'
