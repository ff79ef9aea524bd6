#!/usr/bin/env bash
# The figures users care about, in one table, each beside the bar the issues set for it:
# signature speed (pages/s, MB/s, against a floor measured in the same run), the sketch index's
# speed and bytes per windowed page, pair quality against the crawl's ground truth, the replay
# rate and CPU time, and, against a broker, neardup run's rate against a bare read of the same
# topic (one assigned the partition, and one that joins a new consumer group as neardup does;
# neardup run --assign, reading alone without a group, against the first, in three rounds, with
# the CPU time neardup and the test broker took, which bounds that rate), its latency
# to a consumer's receipt of each pair event (from a cold start, after the throughput runs and
# again on a restarted broker, and in steady state once a first round has filled the window,
# beside a consumer that only passes each record on at the same rate: the broker's own delay)
# and its peak memory.
# Every figure comes from a benchmark of its own (sign_bench, index_bench, neardup replay +
# neardup eval, e2e_bench); their whole outputs are kept in OUT.
#
# usage: tests/tools/figures.sh [EVENTS.jsonl] [--reps N] [--out DIR]
#                               [--brokers HOST:PORT | --no-broker]
#
#   EVENTS.jsonl  a make_crawl.py events file, truth.json beside it (without one, pair quality
#                 is skipped); by default the medium crawl of four rounds, seed 1, made once
#                 into target/bench/medium-r4-s1 by tests/tools/bench-crawl.sh, with
#                 ../shared/bench/make_crawl.py (about 5 minutes; NEARDUP_MAKE_CRAWL names
#                 another copy of it)
#   --reps N      repetitions of the one-core benchmarks, medians reported (default 3)
#   --out DIR     where the benchmarks' outputs go (default target/figures/<date-time>)
#   --brokers     a Kafka broker for the end-to-end figures; by default the test broker
#                 (tests/kafka-test-broker.sh), started for the run and stopped after if it was
#                 not running (a running one is used as it is: tansu slows as it fills, so a
#                 fresh one gives the figures the README quotes); --no-broker skips them
#
# The machine is shared and noisy: compare figures of one run with each other (the ratios),
# not absolute rates across runs. On the medium crawl with a broker it takes about 11 minutes
# once built (the first release build takes several more).
set -euo pipefail
# shellcheck source=tests/tools/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
EVENTS="" REPS=3 OUT="" BROKERS="" NO_BROKER=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=${2:?--reps needs a number}; shift 2 ;;
    --out) OUT=$(from_caller "${2:?--out needs a directory}"); shift 2 ;;
    --brokers) BROKERS=${2:?--brokers needs HOST:PORT}; shift 2 ;;
    --no-broker) NO_BROKER=1; shift ;;
    -h|--help) usage_text; exit 0 ;;
    -*) echo "figures.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$EVENTS" ] || { echo "figures.sh: one events file only" >&2; usage; }
       EVENTS=$(from_caller "$1"); shift ;;
  esac
done
case "$REPS" in ''|*[!0-9]*|0) echo "figures.sh: --reps takes a number of 1 or more, not $REPS" >&2; exit 2 ;; esac

EVENTS=$(events_file "$EVENTS") || exit 2
TRUTH="$(dirname "$EVENTS")/truth.json"
OUT=${OUT:-$ROOT/target/figures/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

echo "== building the release binaries (once)"
cargo build --release --locked --quiet -p neardup-topology -p neardup \
  --example sign_bench --example index_bench --example e2e_bench --bin neardup
BIN="$ROOT/target/release"

# "met", "NOT met" or, without a value, "not measured": `verdict VALUE OP BAR` (OP one of >=
# <= <), numbers only.
verdict() {
  if [ -z "$1" ]; then echo "not measured"; return; fi
  awk -v v="$1" -v b="$3" -v op="$2" 'BEGIN {
    ok = (op == ">=" ? v >= b : op == "<=" ? v <= b : v < b); print (ok ? "met" : "NOT met") }'
}
ROWS=()
row() { ROWS+=("$1|$2|$3|$4"); }
# `bench NAME COMMAND...` runs one benchmark with its output into OUT/NAME.txt; one that fails is
# said to have failed, and its figures stay unmeasured, while the others go on.
bench() {
  local name=$1; shift
  "$@" >"$OUT/$name.txt" 2>&1 || echo "   $name failed (exit $?): see $OUT/$name.txt" >&2
}

echo "== signatures: sign_bench, one core, $REPS reps"
bench sign_bench "$BIN/examples/sign_bench" "$EVENTS" --reps "$REPS"
SIGN_RATE=$(field "$OUT/sign_bench.txt" "^all signatures" '{print before("docs/s")}')
SIGN_MBS=$(field "$OUT/sign_bench.txt" "^all signatures" '{print before("MB/s")}')
SIGN_RATIO=$(field "$OUT/sign_bench.txt" "^ratio signatures / floor" '{print after("floor:")}')
row "signatures, every one of a page (HTML)" "$SIGN_RATE pages/s, $SIGN_MBS MB/s" "-" "-"
row "  the same against the floor (visible text + shingle hashes)" "$SIGN_RATIO" ">= 0.5 (issue 3)" "$(verdict "$SIGN_RATIO" ">=" 0.5)"

echo "== sketch index: index_bench on the crawl's signatures, one core, $REPS reps"
bench index_bench "$BIN/examples/index_bench" --events "$EVENTS" --reps "$REPS"
INDEX_RATE=$(field "$OUT/index_bench.txt" "records/s over" '{print before("records/s")}')
INDEX_BYTES=$(field "$OUT/index_bench.txt" "index + signatures" '{print after("signatures")}')
INDEX_PAGES=$(field "$OUT/index_bench.txt" "^at the end: window" '{print after("window")}')
row "index: insert + lookup + verification" "$INDEX_RATE records/s" ">= 200000 (issue 4)" "$(verdict "$INDEX_RATE" ">=" 200000)"
row "index: memory per windowed page ($INDEX_PAGES pages)" "$INDEX_BYTES B" "<= 256 B (issue 4)" "$(verdict "$INDEX_BYTES" "<=" 256)"

echo "== replay and pair quality: neardup replay, neardup eval"
started=$(date +%s.%N)
# Its CPU time too (user + system, bash's `time`): what the stream costs neardup with no broker.
TIMEFORMAT='%U %S'
{ time bench replay "$BIN/neardup" replay --input "$EVENTS" --out "$OUT/replay"; } 2>"$OUT/replay.cpu"
unset TIMEFORMAT
head -n -1 "$OUT/replay.cpu" >&2 # what bench said, if the replay failed
REPLAY_SECS=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
REPLAY_CPU=$(tail -n1 "$OUT/replay.cpu" | awk '{printf "%.1f", $1 + $2}')
RECORDS=$(field "$OUT/replay.txt" "input records" '{print after("records")}')
REPLAY_RATE=$(awk -v n="$RECORDS" -v s="$REPLAY_SECS" 'BEGIN {if (s > 0 && n > 0) printf "%.0f", n / s}')
REPLAY_US=$(awk -v n="$RECORDS" -v c="$REPLAY_CPU" 'BEGIN {if (n > 0) printf "%.0f", 1e6 * c / n}')
row "neardup replay, the whole stream (wall time, all cores)" "$REPLAY_RATE records/s ($RECORDS in $REPLAY_SECS s)" "-" "-"
row "  its CPU time (user + system), no broker" "$REPLAY_CPU s, $REPLAY_US µs per record" "-" "-"
if [ -f "$TRUTH" ]; then
  bench eval "$BIN/neardup" eval --truth "$TRUTH" --pairs "$OUT/replay"
  MIN_P=$(field "$OUT/eval.txt" "^min precision" '{v = after("precision"); sub(",", "", v); print v}')
  MIN_R=$(field "$OUT/eval.txt" "^min precision" '{print after("recall")}')
  # The exact-duplicate table's overall line: truth, found.
  EXACT=$(awk '/^exact duplicates and levels/ {t = 1} t && /^overall/ {print $3 " of " $2; exit}' "$OUT/eval.txt")
  EXACT_ALL=$(awk '/^exact duplicates and levels/ {t = 1} t && /^overall/ {print ($2 == $3 ? 1 : 0); exit}' "$OUT/eval.txt")
  # The hard-negative table's overall line: the fraction reported.
  HARD=$(awk '/^hard negatives and unlabelled/ {t = 1} t && /^overall/ {print $4; exit}' "$OUT/eval.txt")
  row "pairs (default policy): lowest precision of a round" "$MIN_P" ">= 0.97 (issue 4)" "$(verdict "$MIN_P" ">=" 0.97)"
  row "pairs: lowest recall of a round" "$MIN_R" ">= 0.95 (issue 4)" "$(verdict "$MIN_R" ">=" 0.95)"
  row "pairs: hard negatives reported" "$HARD" "<= 0.01 (issue 4)" "$(verdict "$HARD" "<=" 0.01)"
  row "pairs: exact duplicates found" "$EXACT" "all (issue 4)" "$(verdict "$EXACT_ALL" ">=" 1)"
else
  echo "   (no $TRUTH: pair quality skipped)"
fi

STARTED_BROKER=0
BROKER_PID=()
if [ "$NO_BROKER" = 0 ]; then
  if [ -z "$BROKERS" ]; then
    if ! tests/kafka-test-broker.sh status >/dev/null 2>&1; then STARTED_BROKER=1; fi
    BROKERS=$(tests/kafka-test-broker.sh start)
    [ "$STARTED_BROKER" = 0 ] || trap 'tests/kafka-test-broker.sh stop' EXIT
    # The test broker runs here: e2e_bench reads its CPU time too.
    PIDFILE="${KAFKA_TEST_DIR:-$ROOT/.ci/kafka}/broker.pid"
    [ ! -f "$PIDFILE" ] || BROKER_PID=(--broker-pid "$(cat "$PIDFILE")")
  fi
  echo "== end to end against $BROKERS: e2e_bench (load, bare read, neardup run, live run at half its rate)"
  bench e2e_bench "$BIN/examples/e2e_bench" --brokers "$BROKERS" --events "$EVENTS" ${BROKER_PID[@]+"${BROKER_PID[@]}"}
  E="$OUT/e2e_bench.txt"
  BARE=$(field "$E" "^bare rdkafka consumer" '{print before("records/s")}')
  BARE_GROUP=$(field "$E" "^bare read in a new consumer group" '{print before("records/s")}')
  read -r RUN_RATE RUN_SHARE < <(field "$E" "start to exit)" '{print before("records/s"), before("%")}') || true
  RUN_GROUP_SHARE=$(field "$E" "against the bare read in a group" '{print before("%")}')
  read -r ALONE_RATE ALONE_SHARE < <(field "$E" "^neardup run --assign" '{print before("records/s"), before("%")}') || true
  BUDGET=$(field "$E" "^CPU budget of that round" '{sub(/^CPU budget of that round: /, ""); sub(/ of CPU time/, ""); sub(/, so the run takes at least/, ", so at least"); sub(/ with this CPU time.*/, ""); print}')
  read -r STEADY_RATE STEADY_SHARE < <(field "$E" "first output to last" '{print before("records/s"), before("%")}') || true
  latency "$E"
  PEAK=$(field "$E" "^peak resident memory" '{print before("MiB;") " MiB, " before("KiB") " KiB per windowed page"}')
  row "bare rdkafka read of the page topic" "$BARE records/s" "-" "-"
  row "neardup run, start to exit" "$RUN_RATE records/s = $RUN_SHARE % of the bare read" ">= 50 % (issue 7)" "$(verdict "$RUN_SHARE" ">=" 50)"
  row "  the same against a bare read that joins a new group as neardup does ($BARE_GROUP records/s)" "$RUN_GROUP_SHARE %" ">= 50 % (issue 7)" "$(verdict "$RUN_GROUP_SHARE" ">=" 50)"
  row "neardup run --assign (reading alone, no group join), start to exit: the median of three rounds, each against a bare read just before it" "$ALONE_RATE records/s = $ALONE_SHARE % of the bare read" ">= 50 % (issue 7)" "$(verdict "$ALONE_SHARE" ">=" 50)"
  row "  the CPU time of that median round, neardup's and the broker's, over every core: the least time the run could take" "${BUDGET:-not measured (a broker of this machine only)}" "-" "-"
  row "neardup run, first output to last" "$STEADY_RATE records/s = $STEADY_SHARE % of the bare read" ">= 50 % (issue 7)" "$(verdict "$STEADY_SHARE" ">=" 50)"
  row "page event -> pair event received by a consumer, at half the start-to-exit rate" "$LAT" "p99 < 100 ms (issue 7)" "$(verdict "$P99" "<" 100)"
  row "  the same to the pair event's own produce time (before neardup's producer sends it)" "${OWN:-not measured}" "-" "-"
  row "neardup run: peak resident memory" "$PEAK" "-" "-"
  # `fresh NAME ARGS...`: e2e_bench with ARGS into OUT/NAME.txt, on a broker restarted for it
  # when this script started it (tansu keeps every topic in memory and slows as it holds more:
  # the first e2e_bench's latency run comes after its load, bare reads and five runs).
  fresh() {
    local name=$1; shift
    if [ "$STARTED_BROKER" = 1 ]; then
      tests/kafka-test-broker.sh stop
      BROKERS=$(tests/kafka-test-broker.sh start)
    fi
    bench "$name" "$BIN/examples/e2e_bench" --brokers "$BROKERS" --events "$EVENTS" "$@"
  }
  # From a cold start again, at the same rate, on a restarted broker.
  COLD_HALF=$(awk -v r="$RUN_RATE" 'BEGIN {if (r > 0) printf "%.0f", r / 2}')
  if [ -n "$COLD_HALF" ]; then
    echo "== cold start on a restarted broker: e2e_bench --latency-only at $COLD_HALF records/s"
    fresh e2e_bench_cold --latency-only --latency-rate "$COLD_HALF"
    latency "$OUT/e2e_bench_cold.txt"
    row "the same on a restarted broker (holding nothing else)" "$LAT" "p99 < 100 ms (issue 7)" "$(verdict "$P99" "<" 100)"
    row "  the same to the pair event's own produce time" "${OWN:-not measured}" "-" "-"
  fi
  # In steady state: the crawl's first round fed untimed (the window filled, the sign cache
  # warm), then the later rounds at half the first-output-to-last rate, on a fresh broker when
  # this script started it.
  WARM=""
  if [ -f "$TRUTH" ]; then
    WARM=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1])).get("rounds", [])
print(r[0]["events"] if len(r) > 1 else "")' "$TRUTH" 2>/dev/null || true)
  fi
  HALF=$(awk -v r="$STEADY_RATE" 'BEGIN {if (r > 0) printf "%.0f", r / 2}')
  # `steady NAME MODE`: e2e_bench in MODE (--latency-only, or --echo-only for the consumer
  # that only passes each record on) into OUT/NAME.txt: the first round untimed, the rest at
  # HALF records/s, on a broker restarted for it when this script started it.
  steady() {
    fresh "$1" "$2" --latency-rate "$HALF" --latency-warm "$WARM"
  }
  if [ -n "$WARM" ] && [ -n "$HALF" ]; then
    echo "== steady state: e2e_bench --latency-only, the first round ($WARM records) untimed, the rest at $HALF records/s"
    steady e2e_bench_steady --latency-only
    latency "$OUT/e2e_bench_steady.txt"
    row "the same in steady state: later rounds, half the first-output-to-last rate" "$LAT" "p99 < 100 ms (issue 7)" "$(verdict "$P99" "<" 100)"
    row "  the same to the pair event's own produce time" "${OWN:-not measured}" "-" "-"
    # The floor under that figure: a consumer that only passes each record on, fed the same
    # records at the same rate after the same warm-up.
    echo "== the broker alone: e2e_bench --echo-only at the same rate, after the same warm-up"
    steady e2e_bench_echo --echo-only
    ECHO=$(field "$OUT/e2e_bench_echo.txt" "^echo baseline" '{sub(/.*records: /, ""); sub(/; after the first.*/, ""); print}')
    row "  the floor under the produce-time figure: a consumer that only passes each record on, the same records at the same rate, to its record's produce time" "${ECHO:-not measured}" "-" "-"
  fi
fi

echo
echo "figures of $(basename "$(dirname "$EVENTS")")/$(basename "$EVENTS"), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; outputs in $OUT"
printf '%s\n' "${ROWS[@]}" | awk -F'|' '
  { for (i = 1; i <= 4; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
  END {
    split("figure|measured|bar|", h, "|"); h[4] = "verdict"
    for (i = 1; i <= 4; i++) if (length(h[i]) > w[i]) w[i] = length(h[i])
    f = "%-" w[1] "s  %-" w[2] "s  %-" w[3] "s  %s\n"
    printf f, h[1], h[2], h[3], h[4]
    for (r = 1; r <= NR; r++) printf f, c[r, 1], c[r, 2], c[r, 3], c[r, 4]
  }' | tee "$OUT/figures.txt"
