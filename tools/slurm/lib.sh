# shellcheck shell=bash
# tools/slurm/lib.sh — helpers shared by start_slurm.sh and stop_slurm.sh (sourced, not run).
#
# A daemon of a private cluster is known by its pid file under the cluster's DIR and the binary its
# /proc/PID/exe points to, never by its name: other clusters (or a packaged slurmd) may run the same
# binaries, and pids get reused.

# The layout of a cluster directory (absolute DIR): sets CONF, SOCK, KEY and the pid-file paths.
# shellcheck disable=SC2034  # used by the scripts that source this file
slurm_layout() {
  local d=$1
  CONF=$d/slurm.conf
  SOCK=$d/munge/munge.socket
  KEY=$d/munge/munge.key
  MUNGED_PID=$d/munge/munged.pid
  CTLD_PID=$d/run/slurmctld.pid
  SLURMD_PID=$d/run/slurmd.pid
}

# running PID: true while PID exists and is not a zombie. Daemons that fork to detach are reparented to
# PID 1, which may reap them late; `kill -0` succeeds on a zombie, so the state letter is read instead.
running() {
  local s
  { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
  s=${s##*) } # after the command name, which may hold spaces and parentheses
  [[ -n "$s" && "${s%% *}" != Z ]]
}

# pid_of PIDFILE BINARY: prints the pid in PIDFILE when that process runs BINARY (symlinks resolved:
# /usr/sbin/slurmd is an alternatives link to slurmd-wlm); fails otherwise.
pid_of() {
  local f=$1 exe=$2 p
  [[ -s "$f" ]] || return 1
  p=$(<"$f")
  [[ "$p" =~ ^[0-9]+$ ]] || return 1
  [[ "/proc/$p/exe" -ef "$exe" ]] || return 1
  running "$p" || return 1
  echo "$p"
}

# stop_pid NAME PID: SIGTERM, up to 10 s for it to go, then SIGKILL and up to 2 s more.
# Returns 1 when the process still runs after that.
stop_pid() {
  local name=$1 p=$2
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 100); do running "$p" || return 0; sleep 0.1; done
  echo "stop_slurm: $name ($p) ignored SIGTERM for 10 s: SIGKILL" >&2
  kill -KILL "$p" 2>/dev/null || return 0
  for _ in $(seq 20); do running "$p" || return 0; sleep 0.1; done
  return 1
}
