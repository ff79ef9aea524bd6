#!/usr/bin/env bash
# What the mirror and collection stages cost: replays one events file with all of neardup's
# stages, without the mirror stage, and with collections on, interleaved REPS times (so a noisy
# machine slows every configuration alike), and prints each configuration's median wall time and
# its ratio to the run without mirrors, in wall time and in CPU time (user + system, which the
# other load of a shared machine disturbs less than wall time).
#
# With STAGE_COST_CALLGRIND=1 it runs each configuration once under valgrind's callgrind instead
# and prints instructions executed: repeatable to the instruction whatever else the machine does
# (about 20x slower: use a small stream, e.g. target/bench/small-r1-s1/events.jsonl).
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
events_of() { echo $(( $(wc -l < "$OUT/$1/mirrors.jsonl") + $(wc -l < "$OUT/$1/collections.jsonl") )); }
if [ "${STAGE_COST_CALLGRIND:-0}" = 1 ]; then
  declare -A INSNS
  for name in "${ORDER[@]}"; do
    # shellcheck disable=SC2086
    NEARDUP_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$name" \
        "$BIN" replay --input "$EVENTS" --out "$OUT/$name" ${CONFIGS[$name]} >/dev/null 2>"$OUT/cg.err"
    INSNS[$name]=$(sed -n 's/.*Collected : *//p' "$OUT/cg.err")
  done
  printf '%-12s %16s %7s  %s\n' config instructions ratio "mirror+collection events"
  for name in "${ORDER[@]}"; do
    printf '%-12s %16s %7.4f  %s\n' "$name" "${INSNS[$name]}" \
        "$(echo "${INSNS[$name]} / ${INSNS[no-mirrors]}" | bc -l)" "$(events_of "$name")"
  done
  exit 0
fi
declare -A WALL CPU
for rep in $(seq 1 "$REPS"); do
  for name in "${ORDER[@]}"; do
    # shellcheck disable=SC2086
    NEARDUP_LOG=warn /usr/bin/time -o "$OUT/time" -f "%e %U %S" \
        "$BIN" replay --input "$EVENTS" --out "$OUT/$name" ${CONFIGS[$name]} >/dev/null 2>&1
    read -r wall user sys < "$OUT/time"
    cpu=$(echo "$user + $sys" | bc)
    WALL[$name]="${WALL[$name]:-} $wall"
    CPU[$name]="${CPU[$name]:-} $cpu"
    echo "rep $rep $name: wall $wall s, cpu $cpu s" >&2
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
wall0=$(echo "${WALL[no-mirrors]}" | median)
cpu0=$(echo "${CPU[no-mirrors]}" | median)
printf '%-12s %8s %6s %8s %6s  %s\n' config "wall s" ratio "cpu s" ratio "mirror+collection events"
for name in "${ORDER[@]}"; do
  w=$(echo "${WALL[$name]}" | median)
  c=$(echo "${CPU[$name]}" | median)
  events=$(events_of "$name")
  printf '%-12s %8.2f %6.3f %8.2f %6.3f  %s\n' "$name" "$w" "$(echo "$w / $wall0" | bc -l)" \
      "$c" "$(echo "$c / $cpu0" | bc -l)" "$events"
done
