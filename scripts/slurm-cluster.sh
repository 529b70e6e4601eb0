#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, from Debian's packages, for testing the
# workflow's SLURM profile against a real scheduler (no systemd needed).
#
#   scripts/slurm-cluster.sh up      install packages if missing, write the config, start
#                                    munged, slurmctld and slurmd, wait until the node is idle
#   scripts/slurm-cluster.sh down    stop the daemons this script started (by PID file)
#   scripts/slurm-cluster.sh status  daemons, PIDs and `sinfo`
#
# Needs root on Debian/Ubuntu. `up` exits 3 when the packages cannot be installed (no package
# source reachable, say): the cluster cannot exist here, which tests skip on; any other failure
# exits 1. State (PID files, logs, spool) lives in $POSBENCH_SLURM_STATE
# (default /tmp/posbench-slurm). The config is written there and linked from
# /etc/slurm/slurm.conf, because the plugin's in-job `srun` runs with every SLURM_* variable
# (SLURM_CONF included) removed and so only finds the default path.
set -euo pipefail

STATE_DIR=${POSBENCH_SLURM_STATE:-/tmp/posbench-slurm}
PID_DIR=$STATE_DIR/pids
LOG_DIR=$STATE_DIR/logs
SYSTEM_CONF=/etc/slurm/slurm.conf
OUR_CONF=$STATE_DIR/slurm.conf
PARTITION=debug
PACKAGES=(slurmctld slurmd slurm-client munge)
DAEMONS=(munged slurmctld slurmd)     # start order; stopped in reverse
IDLE_TIMEOUT_S=60
PACKAGES_UNAVAILABLE=3  # exit status of `up` when apt-get cannot install the packages

die() { echo "slurm-cluster: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

install_missing_packages() {
    local missing=()
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    [[ ${#missing[@]} -eq 0 ]] && return
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq \
           && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
        echo "slurm-cluster: could not install ${missing[*]} with apt-get" >&2
        exit "$PACKAGES_UNAVAILABLE"
    fi
}

# Memory slurmd sees on this machine (MiB), less 1 GiB for the OS and the daemons.
schedulable_memory_mb() {
    local real
    real=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    [[ -n $real ]] || die "could not read RealMemory from 'slurmd -C'"
    echo $(( real > 2048 ? real - 1024 : real / 2 ))
}

write_config() {
    local host
    host=$(hostname -s)
    mkdir -p "$STATE_DIR/spool/ctld" "$STATE_DIR/spool/d" "$PID_DIR" "$LOG_DIR" /etc/slurm
    # OverMemoryKill: without cgroups (task/none) the per-job memory limit is enforced by
    # polling each step's RSS every second and killing a step over its --mem.
    # proctrack/pgid: a job's processes are its steps' process groups, so a cancelled job's
    # SIGKILL reaches a process whose parent has already exited. proctrack/linuxproc follows
    # parent links instead, and lost the job-level snakemake of a cancelled job that way: it
    # ignored SIGTERM while shutting down and stayed behind, idle, after the job had ended.
    cat >"$OUR_CONF" <<EOF
# Written by posbench scripts/slurm-cluster.sh; a throwaway single-node test cluster.
ClusterName=posbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/spool/ctld
SlurmdSpoolDir=$STATE_DIR/spool/d
SlurmctldPidFile=$STATE_DIR/spool/slurmctld.pid
SlurmdPidFile=$STATE_DIR/spool/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(schedulable_memory_mb) State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    if [[ -e $SYSTEM_CONF && ! -L $SYSTEM_CONF ]]; then
        grep -q "posbench scripts/slurm-cluster.sh" "$SYSTEM_CONF" \
            || die "$SYSTEM_CONF exists and was not written by this script; not overwriting it"
    fi
    ln -sfn "$OUR_CONF" "$SYSTEM_CONF"
}

prepare_munge() {
    [[ -s /etc/munge/munge.key ]] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
}

pid_file() { echo "$PID_DIR/$1.pid"; }

# The PID in the daemon's PID file, if that process is alive and still that daemon.
running_pid() {
    local file pid
    file=$(pid_file "$1")
    [[ -r $file ]] || return 1
    pid=$(<"$file")
    [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]] || return 1
    echo "$pid"
}

# Foreground mode and setsid: $! is the daemon itself, detached from this shell's session.
start_daemon() {
    local name=$1; shift
    running_pid "$name" >/dev/null && return
    setsid "$@" >"$LOG_DIR/$name.out" 2>&1 </dev/null &
    echo $! >"$(pid_file "$name")"
    sleep 0.5
    running_pid "$name" >/dev/null \
        || die "$name did not start; see $LOG_DIR/$name.out and $LOG_DIR/$name.log"
}

wait_until_idle() {
    local host state deadline=$((SECONDS + IDLE_TIMEOUT_S))
    host=$(hostname -s)
    while (( SECONDS < deadline )); do
        state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
        [[ $state == idle ]] && return
        sleep 0.5
    done
    die "node $host not idle after ${IDLE_TIMEOUT_S}s (state: '${state:-none}'); see $LOG_DIR"
}

cmd_up() {
    [[ $(id -u) -eq 0 ]] || die "must run as root"
    command -v apt-get >/dev/null || die "needs apt-get (Debian/Ubuntu)"
    local start packages_done
    start=$(now)
    install_missing_packages
    packages_done=$(elapsed "$start")
    write_config
    prepare_munge
    local daemons_start
    daemons_start=$(now)
    start_daemon munged setpriv --reuid=munge --regid=munge --init-groups munged --foreground
    # -c: start from a clean state, so no job or node state leaks in from an earlier run.
    start_daemon slurmctld slurmctld -D -c
    start_daemon slurmd slurmd -D
    wait_until_idle
    echo "slurm-cluster: up in $(elapsed "$start") s" \
         "(packages ${packages_done} s, daemons to idle node $(elapsed "$daemons_start") s)"
}

stop_daemon() {
    local name=$1 pid
    if pid=$(running_pid "$name"); then
        kill -TERM "$pid"
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        echo "stopped $name (pid $pid)"
    fi
    rm -f "$(pid_file "$name")"
}

cmd_down() {
    local i
    for (( i=${#DAEMONS[@]} - 1; i >= 0; i-- )); do
        stop_daemon "${DAEMONS[i]}"
    done
}

cmd_status() {
    local name pid all_up=0
    for name in "${DAEMONS[@]}"; do
        if pid=$(running_pid "$name"); then
            echo "$name: running (pid $pid)"
        else
            echo "$name: stopped"; all_up=1
        fi
    done
    (( all_up == 0 )) && sinfo
    return $all_up
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) die "usage: $0 up|down|status (got '${1:-}')" ;;
esac
