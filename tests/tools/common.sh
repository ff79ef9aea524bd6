# shellcheck shell=bash
# What the benchmark scripts of tests/tools (figures.sh, latency-runs.sh) share: paths, usage, the
# default events file and reading e2e_bench's output; sourced, not run.
# Sets ROOT (the checkout) and CALLER (the directory the script was called from); the script then
# runs from ROOT.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CALLER=$PWD

# A path as given from the caller's directory.
from_caller() { case "$1" in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }

# The usage lines of the calling script's header: from `# usage:` to the first bare `#`.
usage_text() { awk '/^# usage:/ {u = 1} u && /^#$/ {exit} u {sub(/^# ?/, ""); print}' "$0"; }
usage() { usage_text >&2; exit 2; }

# The events file given, or, given none, the benchmark's medium crawl (four rounds, seed 1), made
# once into target/bench by bench-crawl.sh. Run from ROOT.
events_file() {
  local events=$1 me
  me=$(basename "$0")
  if [ -z "$events" ]; then
    events=$(tests/tools/bench-crawl.sh medium 4 1) \
      || { echo "$me: no events file given and the medium crawl cannot be made (pass EVENTS.jsonl)" >&2; return 2; }
    events="$events/events.jsonl"
  fi
  [ -f "$events" ] || { echo "$me: $events not found" >&2; return 2; }
  echo "$events"
}

# `field FILE PATTERN AWK` runs the awk program AWK on the first line of FILE matching PATTERN,
# with before(WORD) and after(WORD): the field before or after the first field WORD.
LIB='function before(w,  i) { for (i = 2; i <= NF; i++) if ($i == w) return $(i - 1); return "" }
     function after(w,  i) { for (i = 1; i < NF; i++) if ($i == w) return $(i + 1); return "" }'
field() { grep -m1 -- "$2" "$1" | awk "$LIB $3" || true; }

# `latency FILE`: LAT, an e2e_bench output's latency figures to the pair event's receipt by a
# consumer of the pairs topic ("median ..., p99 ..., max ... (at R records/s)"), P99, its p99
# in ms, and OWN, the same to the pair event's own produce time (its broker timestamp).
latency() {
  local line='^latency, page event produced'
  LAT=$(field "$1" "$line" '{r = after("at"); sub(/.*events, /, ""); print $0 " (at " r " records/s)"}')
  P99=$(field "$1" "$line" '{print after("p99")}')
  OWN=$(field "$1" "own produce time" '{sub(/.*events, /, ""); print}')
}
