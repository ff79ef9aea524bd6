#!/usr/bin/env bash
# How long a leased all-in-one stage takes to fail over, with the standby's checkpoint directory
# of its own (as with a volume per pod) and shared with the holder's (one ReadWriteMany claim),
# alternating REPS times on one input topic.
#
# Each run starts a holder and, once it holds the lease, a standby (`--exit-at-end`); both
# checkpoint every INTERVAL. KILL_AFTER seconds after the holder got its partitions it is
# SIGKILLed. From the standby's log: when it took the lease and got the partitions (seconds
# after the kill), how many records it re-read to rebuild the state and how long that took, and
# when it finished the stream.
#
# usage: tests/tools/failover.sh BROKERS TOPIC [REPS] [KILL_AFTER] [INTERVAL]
#   TOPIC: an input topic already loaded, e.g. by
#     target/release/examples/e2e_bench --brokers BROKERS --events EVENTS.jsonl --bare-only
#   (defaults: 1 run of each, the holder killed 6 s in, checkpoints every 2s; builds the release
#   binary)
set -euo pipefail
BROKERS=${1:?usage: $0 BROKERS TOPIC [REPS] [KILL_AFTER] [INTERVAL]}
TOPIC=${2:?usage: $0 BROKERS TOPIC [REPS] [KILL_AFTER] [INTERVAL]}
REPS=${3:-1}
KILL_AFTER=${4:-6}
INTERVAL=${5:-2s}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cargo build --release -p neardup --quiet --manifest-path "$ROOT/Cargo.toml"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/neardup"
WORK=$(mktemp -d)
PIDS=()
trap 'kill -9 "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT

# The epoch seconds of the first line of log $1 that contains $2 (empty if none; never fails,
# so that `set -e` lets a missing line through).
at() {
  local stamp
  stamp=$(grep -m1 -F -- "$2" "$1" | cut -d' ' -f1) || true
  if [ -n "$stamp" ]; then date -d "$stamp" +%s.%N; fi
}
since() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f s", b - a }' || echo "-"; }

one() {
  local how=$1 run=$2
  local id="failover-$how-$run-$$"
  local dir="$WORK/$id"
  mkdir -p "$dir"
  local common=(--brokers "$BROKERS" --input-topic "$TOPIC" --group "$id.group" --output-prefix "$id.out.")
  "$BIN" topics --create --lease "${common[@]}" >/dev/null
  local own_a="$dir/a" own_b="$dir/b"
  [ "$how" = shared ] && own_b="$dir/a"
  "$BIN" run "${common[@]}" --lease --checkpoint-dir "$own_a" --checkpoint-interval "$INTERVAL" \
    2>"$dir/a.log" &
  local a=$!
  PIDS+=("$a")
  until grep -q "lease taken" "$dir/a.log"; do sleep 0.1; done
  "$BIN" run "${common[@]}" --lease --checkpoint-dir "$own_b" --checkpoint-interval "$INTERVAL" \
    --exit-at-end 2>"$dir/b.log" &
  local b=$!
  PIDS+=("$b")
  until grep -q "partitions assigned" "$dir/a.log"; do sleep 0.1; done
  sleep "$KILL_AFTER"
  kill -9 "$a"
  local killed
  killed=$(date +%s.%N)
  wait "$a" 2>/dev/null || true
  wait "$b"
  local log="$dir/b.log"
  local records
  records=$(grep -F 'state restored partitions' "$log" | grep -o 'records=[0-9]*' | tail -1 | cut -d= -f2 || true)
  local taken assigned restored ended
  taken=$(at "$log" "lease taken")
  assigned=$(at "$log" "partitions assigned")
  restored=$(at "$log" "state restored partitions")
  ended=$(date -r "$log" +%s.%N)
  local rebuilt=-
  [ -n "$restored" ] && [ -n "$assigned" ] && rebuilt=$(since "$assigned" "$restored")
  printf "%-7s run %d: lease taken %s after the kill, partitions %s; re-read %s records in %s; done %s after the kill\n" \
    "$how" "$run" "$(since "$killed" "$taken")" "$(since "$killed" "$assigned")" "${records:-0}" \
    "$rebuilt" "$(since "$killed" "$ended")"
}

for run in $(seq 1 "$REPS"); do
  one own "$run"
  one shared "$run"
done
