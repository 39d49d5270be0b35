#!/usr/bin/env bash
# Run CMD against the local Slurm cluster of scripts/slurm_local.sh: inside its network namespace
# (where slurmctld, slurmd and slurmdbd listen on loopback) with SLURM_CONF pointing at its config.
#   bash scripts/in_slurm_ns.sh sinfo
#   bash scripts/in_slurm_ns.sh python -m t2exp -m k=3,5 generator=none hydra/launcher=slurm
# The command keeps the caller's user, environment, working directory and filesystem; only the
# network is the namespace's (loopback only: no internet, no host services from inside it).
set -euo pipefail
NS=${T2EXP_SLURM_NS:-t2slurm}
BASE=${T2EXP_SLURM_DIR:-/var/lib/t2exp-slurm}
if (($# == 0)); then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi
if [[ ! -e /run/netns/$NS || ! -f $BASE/etc/slurm.conf ]]; then
    echo "in_slurm_ns: no local Slurm cluster (netns $NS / $BASE/etc/slurm.conf missing); start it with: bash scripts/slurm_local.sh up" >&2
    exit 3
fi
export SLURM_CONF=$BASE/etc/slurm.conf
exec nsenter "--net=/run/netns/$NS" -- "$@"
