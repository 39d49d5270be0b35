#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for tests and for trying hydra/launcher=slurm.
#
#   bash scripts/slurm_local.sh up       # install (Debian packages) if needed, start, wait for the node
#   bash scripts/slurm_local.sh status   # daemons, node state, queue
#   bash scripts/slurm_local.sh down     # stop every daemon this script started, remove the namespace
#   bash scripts/in_slurm_ns.sh sinfo    # run any command against the cluster (sbatch, a sweep, ...)
#   T2EXP_SLURM_CPUS=4 bash scripts/slurm_local.sh up   # the node declares 4 CPUs (more tasks at once than cores)
#
# Needs root (apt, ip netns, daemons). Every daemon runs inside the network namespace $NS that holds
# only a loopback interface, so nothing listens on the machine's real interfaces (slurmdbd 22.05
# binds 0.0.0.0 and cannot be told otherwise) and the ports cannot clash with other services.
# The namespace is entered with nsenter --net (`ip netns exec` remounts /sys, and slurmd then fails).
# Accounting runs through slurmdbd + a private MariaDB: without it submitit cannot learn the state of
# a job that died without writing a result, and a sweep with a crashed cell waits forever.
# All state (configs, spool, logs, database) lives under $BASE; `up` is idempotent.
set -euo pipefail

NS=${T2EXP_SLURM_NS:-t2slurm}
BASE=${T2EXP_SLURM_DIR:-/var/lib/t2exp-slurm}
WAIT_S=${T2EXP_SLURM_WAIT_S:-60}     # upper bound for each readiness wait
CPUS=${T2EXP_SLURM_CPUS:-}           # CPUs the node declares (default: nproc); more than nproc lets
                                     # more tasks run at once than there are cores (benchmarks/shards.py)
PARTITION=debug
ETC=$BASE/etc
RUN=$BASE/run
LOG=$BASE/log
DB_SOCK=$RUN/mysqld.sock
HOST=$(hostname -s)
NSENTER=(nsenter "--net=/run/netns/$NS" --)
export SLURM_CONF=$ETC/slurm.conf

say() { printf 'slurm_local: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
in_ns() { "${NSENTER[@]}" "$@"; }

# ---- processes ---------------------------------------------------------------------------------
# A pid is alive when /proc/PID exists and is not a zombie (a minimal init may never reap them).
alive() {
    local pid=$1 state
    [[ -n $pid && -r /proc/$pid/stat ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]]
}
pid_of() { [[ -s $1 ]] && tr -dc '0-9' <"$1" || true; }
running() { alive "$(pid_of "$1")"; }

# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.5 s until it succeeds or time runs out
wait_for() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            say "timed out after ${limit}s waiting for $what"
            return 1
        fi
        sleep 0.5
    done
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE: SIGTERM, bounded wait, then SIGKILL
    local name=$1 pid
    pid=$(pid_of "$2")
    if alive "$pid"; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do alive "$pid" || break; sleep 0.25; done
        if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
    fi
    rm -f "$2"
}

show_logs() {
    local f
    for f in "$LOG"/*.log; do
        [[ -s $f ]] || continue
        say "--- last lines of $f"
        tail -n 15 "$f" >&2 || true
    done
}

# ---- installation ------------------------------------------------------------------------------
install_packages() {
    local need=0 c
    for c in slurmctld slurmd slurmdbd sinfo sacctmgr munged mariadbd mariadb-install-db ip nsenter; do
        command -v "$c" >/dev/null 2>&1 || need=1
    done
    ((need)) || return 0
    command -v apt-get >/dev/null 2>&1 || die "Slurm is not installed and apt-get is unavailable"
    say "installing slurm-wlm munge slurmdbd mariadb-server (apt)"
    # Keep package scripts from starting system-wide services while installing (no-op if a
    # policy already exists, as in most containers).
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
    fi
    local rc=0 apt=(apt-get -o DPkg::Lock::Timeout=300)   # wait for another apt (CI installs chromium beside it)
    {
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq slurm-wlm munge slurmdbd mariadb-server iproute2 util-linux
    } >"${TMPDIR:-/tmp}/t2exp-slurm-apt.log" 2>&1 || rc=$?
    ((own_policy)) && rm -f "$policy"
    ((rc == 0)) || { tail -n 20 "${TMPDIR:-/tmp}/t2exp-slurm-apt.log" >&2; die "apt-get failed (rc=$rc)"; }
}

# ---- configuration -----------------------------------------------------------------------------
write_configs() {
    mkdir -p "$ETC" "$RUN" "$LOG" "$BASE/spool/ctld" "$BASE/spool/d"
    local cpus mem_mb overrides=""
    cpus=${CPUS:-$(nproc)}
    [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "T2EXP_SLURM_CPUS=$cpus is not a positive whole number"
    # slurmd drains a node that declares more CPUs than it has, unless told to trust the config
    if ((cpus > $(nproc))); then overrides=$'\nSlurmdParameters=config_overrides'; fi
    mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
    cat >"$ETC/slurm.conf.new" <<EOF
# written by scripts/slurm_local.sh: single node, loopback only (inside netns $NS)
ClusterName=local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$BASE/spool/ctld
SlurmdSpoolDir=$BASE/spool/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny$overrides
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    # keep the file (and its mtime) when nothing changed, so running daemons are not confused
    if cmp -s "$ETC/slurm.conf.new" "$ETC/slurm.conf"; then rm -f "$ETC/slurm.conf.new"; else mv "$ETC/slurm.conf.new" "$ETC/slurm.conf"; fi
    (
        umask 077
        cat >"$ETC/slurmdbd.conf" <<EOF
# written by scripts/slurm_local.sh (slurmdbd refuses a config readable by others)
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
EOF
    )
    chmod 600 "$ETC/slurmdbd.conf"
}

# ---- daemons -----------------------------------------------------------------------------------
ensure_netns() {
    [[ -e /run/netns/$NS ]] || ip netns add "$NS"
    ip -n "$NS" link set lo up
    # Slurm resolves with AI_ADDRCONFIG: it needs a non-127.0.0.1 address configured to find one
    local addrs
    addrs=$(ip -n "$NS" -o addr show dev lo)
    [[ $addrs == *" 127.0.0.2/8 "* ]] || ip -n "$NS" addr add 127.0.0.2/8 dev lo
}

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
    munge_ok && return 0     # a munged already answers (ours or the system's): reuse it
    [[ -s /etc/munge/munge.key ]] || {
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge: /etc/munge/munge.key
        chmod 600 /etc/munge/munge.key
    }
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge: /run/munge /var/lib/munge /var/log/munge
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    echo "$(pid_of /run/munge/munged.pid)" >"$RUN/munged.started-by-us"
    wait_for "$WAIT_S" munged munge_ok
}

db() { mariadb --socket="$DB_SOCK" -u root "$@"; }

ensure_mariadb() {
    local datadir=$BASE/mysql
    if ! running "$RUN/mysqld.pid"; then
        if [[ ! -d $datadir/mysql ]]; then
            say "initialising a private MariaDB in $datadir"
            mkdir -p "$datadir"
            chown mysql: "$datadir"
            mariadb-install-db --user=mysql --datadir="$datadir" --auth-root-authentication-method=socket \
                --skip-test-db >"$LOG/mariadb-install.log" 2>&1 || { tail -n 20 "$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
        fi
        chown mysql: "$RUN"
        chmod 755 "$RUN"
        touch "$LOG/mariadb.log"
        chown mysql: "$LOG/mariadb.log"
        say "starting mariadbd (127.0.0.1:3306 inside netns $NS)"
        # mariadbd does not daemonize: detach it from this shell
        setsid "${NSENTER[@]}" /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$datadir" \
            --socket="$DB_SOCK" --pid-file="$RUN/mysqld.pid" --bind-address=127.0.0.1 --port=3306 \
            --log-error="$LOG/mariadb.log" --skip-name-resolve </dev/null >/dev/null 2>&1 &
    fi
    wait_for "$WAIT_S" "MariaDB to accept connections" db -e 'SELECT 1' || { show_logs; die "MariaDB did not start"; }
    db -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
           CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
           CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

cluster_registered() {
    local clusters
    clusters=$(in_ns sacctmgr -n -P list cluster format=cluster 2>/dev/null) || return 1
    [[ $'\n'$clusters$'\n' == *$'\nlocal\n'* ]]
}

ensure_slurmdbd() {
    if ! running "$RUN/slurmdbd.pid"; then
        say "starting slurmdbd"
        # slurmdbd has no -f: it reads slurmdbd.conf from the directory of $SLURM_CONF
        in_ns /usr/sbin/slurmdbd 2>>"$LOG/slurmdbd.stderr" || true
    fi
    wait_for "$WAIT_S" slurmdbd in_ns sacctmgr -n list cluster || { show_logs; die "slurmdbd did not start"; }
    cluster_registered || in_ns sacctmgr -i add cluster local >/dev/null
}

ensure_slurmctld() {
    if ! running "$RUN/slurmctld.pid"; then
        say "starting slurmctld"
        in_ns /usr/sbin/slurmctld -f "$SLURM_CONF" 2>>"$LOG/slurmctld.stderr" || true
    fi
    wait_for "$WAIT_S" slurmctld in_ns scontrol ping || { show_logs; die "slurmctld did not start"; }
}

ensure_slurmd() {
    if ! running "$RUN/slurmd.pid"; then
        say "starting slurmd"
        in_ns /usr/sbin/slurmd -f "$SLURM_CONF" 2>>"$LOG/slurmd.stderr" || true
    fi
}

node_state() { in_ns sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n 1; }
node_ready() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

wait_node() {
    if ! wait_for "$WAIT_S" "node $HOST to be idle" node_ready; then
        local st
        st=$(node_state)
        if [[ $st =~ ^(drain|drained|down|fail) ]]; then   # e.g. left down by a previous incarnation
            say "node is $st; resuming it"
            in_ns scontrol update nodename="$HOST" state=resume || true
            wait_for "$WAIT_S" "node $HOST to be idle" node_ready && return 0
        fi
        show_logs
        die "node $HOST is '${st:-unknown}', not idle"
    fi
}

# ---- commands ----------------------------------------------------------------------------------
cmd_up() {
    local t0=$SECONDS
    [[ $(id -u) == 0 ]] || die "run as root (apt, ip netns and the daemons need it)"
    install_packages
    write_configs
    ensure_netns
    ensure_munge
    ensure_mariadb
    ensure_slurmdbd
    ensure_slurmctld
    ensure_slurmd
    wait_node
    say "up in $((SECONDS - t0))s: partition '$PARTITION', node $HOST $(node_state); use scripts/in_slurm_ns.sh CMD"
}

cmd_down() {
    [[ $(id -u) == 0 ]] || die "run as root"
    if [[ -e /run/netns/$NS ]] && running "$RUN/slurmctld.pid"; then
        # end running jobs first so no job step outlives its daemons
        in_ns scancel --state=RUNNING --full --quiet 2>/dev/null || true
        in_ns scancel --state=PENDING --quiet 2>/dev/null || true
    fi
    stop_pidfile slurmd "$RUN/slurmd.pid"
    stop_pidfile slurmctld "$RUN/slurmctld.pid"
    stop_pidfile slurmdbd "$RUN/slurmdbd.pid"
    stop_pidfile mariadbd "$RUN/mysqld.pid"
    if [[ -s $RUN/munged.started-by-us ]]; then
        # only a munged this script started, and only if it is still that process
        if [[ $(pid_of /run/munge/munged.pid) == "$(pid_of "$RUN/munged.started-by-us")" ]]; then
            stop_pidfile munged /run/munge/munged.pid
        fi
        rm -f "$RUN/munged.started-by-us"
    fi
    if [[ -e /run/netns/$NS ]]; then
        ip netns del "$NS" || say "could not delete netns $NS"
    fi
    say "down (state kept in $BASE)"
}

cmd_status() {
    local name file rc=0
    for name in munged mysqld slurmdbd slurmctld slurmd; do
        file=$RUN/$name.pid
        [[ $name == munged ]] && file=/run/munge/munged.pid
        if running "$file"; then echo "$name: running (pid $(pid_of "$file"))"; else echo "$name: stopped"; rc=3; fi
    done
    if [[ -e /run/netns/$NS ]]; then
        echo "netns $NS: present"
        in_ns sinfo 2>&1 || rc=3
        in_ns squeue 2>&1 || true
    else
        echo "netns $NS: absent"
        rc=3
    fi
    return $rc
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
