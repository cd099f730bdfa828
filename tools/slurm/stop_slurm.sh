#!/usr/bin/env bash
# tools/slurm/stop_slurm.sh DIR — stop the private one-node Slurm cluster that start_slurm.sh started
# in DIR, and everything it runs.
#
# Usage:   tools/slurm/stop_slurm.sh DIR        (as root, like start_slurm.sh)
# Order:   cancel every job (while slurmctld still answers, so slurmstepd ends the tasks itself), then
#          slurmd, then any slurmstepd of this cluster that outlived it (a crash, a failed cancel) with
#          its job's processes, then slurmctld, then munged.
# Which processes: the daemons of DIR are found by their pid files under DIR and by their command line
#          naming DIR's slurm.conf or munge socket, and checked against the binary (/proc/PID/exe);
#          a slurmstepd belongs to DIR when it holds DIR/log/slurmd.log open (it overwrites its command
#          line and environment). Nothing is killed by name: other clusters, a packaged slurmd and the
#          caller's own srun/sbatch clients are left alone. Works after a failed or partial start too,
#          and is a no-op when nothing runs. DIR and its logs are kept (remove DIR yourself).
# Exit:    0 nothing of DIR runs any more
#          1 usage error
#          3 a process of DIR still runs after SIGKILL (named on stderr)
set -uo pipefail

[[ $# == 1 && "$1" != -* ]] || {
  sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 1
}
[[ -d "$1" ]] || exit 0 # nothing was ever started there
D=$(cd "$1" && pwd -P)
# shellcheck source=tools/slurm/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
slurm_layout "$D"
export SLURM_CONF=$CONF
log() { echo "stop_slurm: $*" >&2; }

# pids_of BINARY PIDFILE NEEDLE: the processes running BINARY that PIDFILE names or whose command line
# holds the argument NEEDLE (a daemon killed before it wrote its pid file is found that way).
pids_of() {
  local exe=$1 pidfile=$2 needle=$3 p x
  p=$(pid_of "$pidfile" "$exe") && echo "$p"
  for x in /proc/[0-9]*; do
    [[ "$x/exe" -ef "$exe" ]] || continue
    tr '\0' '\n' <"$x/cmdline" 2>/dev/null | grep -qxF -e "$needle" -e "-f$needle" &&
      running "${x#/proc/}" && echo "${x#/proc/}"
  done | sort -u
}

# 1. jobs, while the controller answers.
if [[ -n "$(pids_of /usr/sbin/slurmctld "$CTLD_PID" "$CONF")" ]]; then
  jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [[ -n "${jobs// /}" ]]; then
    log "cancelling jobs $jobs"
    # shellcheck disable=SC2086  # one argument per job id
    timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 100); do [[ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ]] && break; sleep 0.1; done
  fi
fi

failed=()
# stop_all NAME BINARY PIDFILE NEEDLE
stop_all() {
  local p
  for p in $(pids_of "$2" "$3" "$4"); do stop_pid "$1" "$p" || failed+=("$1 pid $p"); done
}

# 2. slurmd.
stop_all slurmd /usr/sbin/slurmd "$SLURMD_PID" "$CONF"

# 3. leftover slurmstepd of this cluster, with its session and every descendant (its job's tasks).
#    slurmstepd ignores SIGTERM, so SIGKILL.
declare -A ppid_of sid_of
for x in /proc/[0-9]*; do
  { s=$(<"$x/stat"); } 2>/dev/null || continue
  s=${s##*) }
  read -r _ pp _ sid _ <<<"$s"
  ppid_of[${x#/proc/}]=$pp sid_of[${x#/proc/}]=$sid
done
victims=()
for x in /proc/[0-9]*; do
  [[ "$x/exe" -ef /usr/sbin/slurmstepd ]] || continue
  find "$x/fd" -maxdepth 1 -lname "$D/log/slurmd.log" 2>/dev/null | grep -q . || continue
  stepd=${x#/proc/}
  log "leftover slurmstepd $stepd ($(tr '\0' ' ' <"$x/cmdline" 2>/dev/null))"
  for q in "${!sid_of[@]}"; do [[ ${sid_of[$q]} == "${sid_of[$stepd]}" ]] && victims+=("$q"); done
  victims+=("$stepd")
done
if ((${#victims[@]})); then
  declare -A in_set
  for v in "${victims[@]}"; do in_set[$v]=1; done
  grew=1
  while ((grew)); do # descendants that left the session
    grew=0
    for q in "${!ppid_of[@]}"; do
      [[ -z "${in_set[$q]:-}" && -n "${in_set[${ppid_of[$q]}]:-}" ]] && in_set[$q]=1 && grew=1
    done
  done
  for v in "${!in_set[@]}"; do
    [[ $v == "$$" || $v == "$BASHPID" ]] && continue
    kill -KILL "$v" 2>/dev/null
  done
  for v in "${!in_set[@]}"; do
    for _ in $(seq 20); do running "$v" || break; sleep 0.1; done
    running "$v" && failed+=("job process $v")
  done
fi

# 4. slurmctld, then munged.
stop_all slurmctld /usr/sbin/slurmctld "$CTLD_PID" "$CONF"
stop_all munged /usr/sbin/munged "$MUNGED_PID" "--socket=$SOCK"

if ((${#failed[@]})); then
  log "still running after SIGKILL: ${failed[*]}"
  exit 3
fi
exit 0
