#!/usr/bin/env bash
# tools/slurm/start_slurm.sh DIR — start a private one-node Slurm cluster (munged, slurmctld, slurmd on
# 127.0.0.1) without systemd, for tests, CI and trying ./grade --slurm on one machine.
#
# Usage:   eval "$(tools/slurm/start_slurm.sh DIR)"     then sbatch/srun/sinfo talk to that cluster;
#          tools/slurm/stop_slurm.sh DIR                stops it (also after a failed start).
#          Needs root and the Debian packages slurmctld slurmd slurm-client munge
#          (tools/install_deps.sh --with-optional installs them).
# Creates (DIR is created when missing, made mode 755, as munged requires of its socket's folders):
#          DIR/slurm.conf, DIR/env.sh (the export line below), DIR/munge/ (its own key, socket, log, pid:
#          the system munged and /etc/munge are not used), DIR/log/{slurmctld,slurmd,jobcomp}.log,
#          DIR/state/ (wiped on every start), DIR/spool/, DIR/run/{slurmctld,slurmd}.pid.
#          Nothing outside DIR is written; /etc/slurm is not read.
# Node:    NodeName=$(hostname -s), CPUs = nproc (TPSP_SLURM_CPUS overrides: that many one-CPU array
#          tasks run at once), RealMemory = MemTotal in MiB; partition "debug" (the default).
# Ports:   slurmctld and slurmd listen on two free TCP ports picked at random in 20000-29999 (no socket
#          of the machine uses them), so several clusters and a packaged slurmd (6817/6818) coexist; a
#          daemon that loses the race for its port is restarted on new ones (3 tries).
# Prints:  on stdout only "export SLURM_CONF=DIR/slurm.conf" once the node is idle in sinfo; progress
#          and errors go to stderr. Takes about 0.1-0.3 s; the controller schedules its first batch job
#          about 3 s after it starts.
# Env:     TPSP_SLURM_CPUS (see Node), TPSP_SLURM_WAIT_S (how long to wait for the idle node; 30).
# Exit:    0 the cluster runs (already running: the same line, nothing restarted)
#          1 usage error (DIR missing, or with characters other than A-Za-z0-9._/-)
#          2 not root, or Slurm/munge not installed: the message says what to run
#          3 a daemon did not start or the node did not become idle in time: the log tails are printed
#            and whatever was started is stopped again
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 1
}
[[ $# == 1 && "$1" != -* ]] || usage
[[ "$1" =~ ^[A-Za-z0-9._/-]+$ ]] || {
  echo "start_slurm: DIR '$1' has characters other than A-Za-z0-9._/- (slurm.conf cannot quote paths)" >&2
  exit 1
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/slurm/lib.sh
source "$here/lib.sh"
log() { echo "start_slurm: $*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
  log "must run as root (munged and slurmd run as root here; jobs may then run as any user)"
  exit 2
fi
for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch /usr/bin/sinfo; do
  [[ -x $b ]] && continue
  log "$b not found: Slurm and munge are not installed. Run (as root):"
  log "  tools/install_deps.sh --with-optional"
  log "  (or: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge)"
  exit 2
done

mkdir -p "$1"
D=$(cd "$1" && pwd -P)
slurm_layout "$D"
((${#SOCK} < 108)) || {
  log "DIR '$D' is too long: the munge socket path must be under 108 bytes"
  exit 1
}
export SLURM_CONF=$CONF
NODE=$(hostname -s)
WAIT_S=${TPSP_SLURM_WAIT_S:-30}

# Already running: leave it be.
if pid_of "$MUNGED_PID" /usr/sbin/munged >/dev/null && pid_of "$CTLD_PID" /usr/sbin/slurmctld >/dev/null &&
  pid_of "$SLURMD_PID" /usr/sbin/slurmd >/dev/null; then
  log "the cluster of $D already runs"
  echo "export SLURM_CONF=$CONF"
  exit 0
fi
"$here/stop_slurm.sh" "$D" || true # the remains of a partial start

fail() {
  log "ERROR: $*"
  local f
  for f in "$D/munge/munged.log" "$D/log/slurmctld.log" "$D/log/slurmd.log"; do
    [[ -s $f ]] && { echo "---- last lines of $f" >&2; tail -n 15 "$f" >&2; }
  done
  "$here/stop_slurm.sh" "$D" || true
  exit 3
}

mkdir -p "$D"/{munge,log,state,spool,run}
chmod 755 "$D" "$D/munge"

# --- munged with its own key and socket -------------------------------------------------------------
[[ -s $KEY ]] || mungekey --create --keyfile="$KEY"
chmod 600 "$KEY"
rm -f "$SOCK" "$SOCK.lock"
/usr/sbin/munged --socket="$SOCK" --key-file="$KEY" --log-file="$D/munge/munged.log" \
  --pid-file="$MUNGED_PID" --seed-file="$D/munge/munged.seed" || fail "munged did not start"
for _ in $(seq 50); do [[ -S $SOCK ]] && break; sleep 0.1; done
munge -S "$SOCK" -n 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 || fail "munge self-test failed"

# --- ports --------------------------------------------------------------------------------------------
# used_ports: every local TCP port of a socket on the machine (any state), one per line, decimal.
used_ports() {
  local _n local_addr _rest
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _n local_addr _rest; do
    if [[ "$local_addr" == *:* ]]; then echo $((16#${local_addr##*:})); fi
  done
}
pick_ports() {
  local used p
  used=" $(used_ports | tr '\n' ' ') "
  for _ in $(seq 100); do
    p=$((20000 + (RANDOM % 5000) * 2))
    [[ "$used" == *" $p "* || "$used" == *" $((p + 1)) "* ]] && continue
    CTLD_PORT=$p SLURMD_PORT=$((p + 1))
    return 0
  done
  fail "no two free TCP ports found in 20000-29999"
}

write_conf() {
  local cpus mem_mib
  cpus=${TPSP_SLURM_CPUS:-$(nproc)}
  [[ "$cpus" =~ ^[1-9][0-9]*$ ]] || fail "TPSP_SLURM_CPUS='$cpus' is not a positive integer"
  mem_mib=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
  cat >"$CONF" <<CONF
# written by tools/slurm/start_slurm.sh: a private one-node cluster, everything under $D
ClusterName=tpsp
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
MpiDefault=none
# no cgroup plugin: nothing of the machine's cgroups is touched
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# one line per finished job and array task, with its exit code (no slurmdbd)
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# the CPUs declared below count, whatever slurmd detects
SlurmdParameters=config_overrides
ReturnToService=2
# refuse impossible requests at submission instead of leaving them pending
EnforcePartLimits=ALL
# finished jobs stay known for a day: sbatch --wait reads every array task's exit code
MinJobAge=86400
MaxJobCount=100000
MaxArraySize=100001
KillWait=5
SchedulerParameters=batch_sched_delay=0
MailProg=/bin/true
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  echo "export SLURM_CONF=$CONF" >"$D/env.sh"
}

# start_daemons: slurmctld and slurmd (both detach and write their pid files), then wait for the idle
# node. Returns 1 when a daemon died on a port already taken (the caller picks new ports), fails
# the script on any other problem.
start_daemons() {
  rm -rf "${D:?}/state/"* "${D:?}/spool/"* "$CTLD_PID" "$SLURMD_PID"
  : >"$D/log/slurmctld.log"
  : >"$D/log/slurmd.log"
  /usr/sbin/slurmctld -f "$CONF" || fail "slurmctld did not start"
  /usr/sbin/slurmd -f "$CONF" -N "$NODE" || fail "slurmd did not start"
  local deadline=$((SECONDS + WAIT_S)) st=""
  while ((SECONDS < deadline)); do
    sleep 0.05
    if ! pid_of "$CTLD_PID" /usr/sbin/slurmctld >/dev/null || ! pid_of "$SLURMD_PID" /usr/sbin/slurmd >/dev/null; then
      sleep 0.2 # a pid file is written a moment after the fork
      if ! pid_of "$CTLD_PID" /usr/sbin/slurmctld >/dev/null || ! pid_of "$SLURMD_PID" /usr/sbin/slurmd >/dev/null; then
        grep -qiE "address already in use|unable to bind" "$D/log/slurmctld.log" "$D/log/slurmd.log" && return 1
        fail "slurmctld or slurmd exited"
      fi
    fi
    st=$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
    [[ "$st" == idle ]] && return 0
  done
  fail "node $NODE not idle after ${WAIT_S} s (sinfo state '${st:-none}')"
}

for try in 1 2 3; do
  pick_ports
  write_conf
  log "starting slurmctld (port $CTLD_PORT) and slurmd (port $SLURMD_PORT) in $D"
  if start_daemons; then
    log "ready: node $NODE idle; munged $(<"$MUNGED_PID"), slurmctld $(<"$CTLD_PID"), slurmd $(<"$SLURMD_PID")"
    echo "export SLURM_CONF=$CONF"
    exit 0
  fi
  log "a port was taken meanwhile (try $try of 3): new ports"
  "$here/stop_slurm.sh" "$D" || true
  # stop_slurm.sh also stopped munged: start it again
  /usr/sbin/munged --socket="$SOCK" --key-file="$KEY" --log-file="$D/munge/munged.log" \
    --pid-file="$MUNGED_PID" --seed-file="$D/munge/munged.seed" || fail "munged did not start"
done
fail "slurmctld/slurmd could not bind their ports 3 times"
