#!/usr/bin/env bash
# A private PostgreSQL server on this machine, for one MLflow tracking server shared by every node
# (docs/scale.md "One tracking server") and for tests/tracking/test_tracking_server.py.
#
#   bash scripts/pg_local.sh up       # install (Debian's postgresql) if needed, initdb, start, wait
#   bash scripts/pg_local.sh status   # running or not, and its URI
#   bash scripts/pg_local.sh down     # stop the server this script started
#   bash scripts/pg_local.sh uri DB   # the SQLAlchemy URI of database DB (created if missing)
#
# Everything lives under $T2EXP_PG_DIR (data, socket, log); the server listens on 127.0.0.1 only,
# port $T2EXP_PG_PORT, and trusts local connections (a throwaway test cluster: no password; give a
# real deployment its own auth). PostgreSQL will not run as root: as root the cluster belongs to
# the `postgres` user of Debian's package; as anyone else, to that user (binaries must be there).
set -euo pipefail

BASE=${T2EXP_PG_DIR:-/var/lib/t2exp-pg}
PORT=${T2EXP_PG_PORT:-55432}
WAIT_S=${T2EXP_PG_WAIT_S:-60}
DATA=$BASE/data
LOG=$BASE/postgres.log

say() { printf 'pg_local: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

pg_bin() {  # the directory of Debian's newest PostgreSQL binaries, or of those on PATH
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [[ -n $d ]]; then echo "$d"; elif command -v initdb >/dev/null; then dirname "$(command -v initdb)"; fi
}

install_pg() {
    [[ -n $(pg_bin) ]] && return 0
    [[ $(id -u) == 0 ]] || die "no PostgreSQL binaries and not root: apt-get install -y postgresql (Debian), then run this again"
    say "installing postgresql (apt)"
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)   # wait for another apt (the Slurm start-up) to end
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install postgresql >/dev/null 2>&1 ||
        { "${apt[@]}" update >/dev/null && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install postgresql >/dev/null; } ||
        die "apt-get install postgresql failed"
}

as_owner() {  # run a PostgreSQL binary as the cluster's owner
    if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running() { as_owner "$(pg_bin)/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

up() {
    install_pg
    local bin
    bin=$(pg_bin)
    mkdir -p "$BASE"
    [[ $(id -u) == 0 ]] && chown postgres: "$BASE"
    if [[ ! -f $DATA/PG_VERSION ]]; then
        as_owner "$bin/initdb" -D "$DATA" -A trust -U postgres -E UTF8 >/dev/null || die "initdb failed"
    fi
    if ! running; then
        as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$WAIT_S" \
            -o "-c listen_addresses=127.0.0.1 -p $PORT -k $BASE -c max_connections=200" start >/dev/null ||
            die "the server did not start; see $LOG"
    fi
    say "up: postgresql://postgres@127.0.0.1:$PORT (data $DATA)"
}

uri() {  # uri DB: create the database when missing, print its URI
    local db=${1:?a database name}
    as_owner "$(pg_bin)/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" |
        grep -q 1 || as_owner "$(pg_bin)/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$db"
    echo "postgresql://postgres@127.0.0.1:$PORT/$db"
}

case ${1:-} in
    up) up ;;
    down) if running; then as_owner "$(pg_bin)/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; fi; say "down" ;;
    status) if running; then say "running: postgresql://postgres@127.0.0.1:$PORT"; else say "stopped"; exit 3; fi ;;
    uri) uri "${2:-}" ;;
    *) echo "usage: $0 up|down|status|uri DB" >&2; exit 2 ;;
esac
