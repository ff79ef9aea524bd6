#!/usr/bin/env bash
# What the mirror and collection stages cost: replays one events file with all of neardup's
# stages, without the mirror stage, and with collections on, interleaved REPS times (so a noisy
# machine slows every configuration alike), and prints each configuration's median wall time and
# its ratio to the run without mirrors.
#
# usage: tests/tools/stage_cost.sh EVENTS.jsonl [REPS]   (default 3; builds the release binary)
set -euo pipefail
EVENTS=${1:?usage: $0 EVENTS.jsonl [REPS]}
REPS=${2:-3}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cargo build --release -p neardup --quiet --manifest-path "$ROOT/Cargo.toml"
BIN="$ROOT/target/release/neardup"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
declare -A CONFIGS=(
  [no-mirrors]="--mirrors false"
  [default]=""
  [collections]="--collections"
)
ORDER=(no-mirrors default collections)
declare -A TIMES
for rep in $(seq 1 "$REPS"); do
  for name in "${ORDER[@]}"; do
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    NEARDUP_LOG=warn "$BIN" replay --input "$EVENTS" --out "$OUT/$name" ${CONFIGS[$name]} >/dev/null 2>&1
    end=$(date +%s.%N)
    TIMES[$name]="${TIMES[$name]:-} $(echo "$end - $start" | bc)"
    echo "rep $rep $name: $(echo "$end - $start" | bc) s" >&2
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(echo "${TIMES[no-mirrors]}" | median)
printf '%-12s %10s %8s  %s\n' config "median s" "ratio" "mirror/collection events"
for name in "${ORDER[@]}"; do
  m=$(echo "${TIMES[$name]}" | median)
  events=$(( $(wc -l < "$OUT/$name/mirrors.jsonl") + $(wc -l < "$OUT/$name/collections.jsonl") ))
  printf '%-12s %10.2f %8.3f  %s\n' "$name" "$m" "$(echo "$m / $base" | bc -l)" "$events"
done
