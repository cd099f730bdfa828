#!/usr/bin/env bash
# tests/grade/test_slurm_stop.sh — tools/slurm/stop_slurm.sh DIR leaves nothing of DIR's cluster running,
# and nothing of another cluster stopped.
#
# Starts two private clusters A and B at once (their ports must not clash). In A, runs a batch job that
# sleeps; stops A with the job running: no munged/slurmctld/slurmd/slurmstepd of A and no job process may
# be left, while B still answers sinfo. Then in B, the crash case: a job runs, slurmd and slurmctld are
# killed with SIGKILL, and stop_slurm.sh must still end the orphaned slurmstepd and the job's process.
# The processes are looked up independently of stop_slurm.sh: every /proc entry whose binary is one of
# the daemons and whose command line names DIR, or whose open files include one under DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/grade/slurm_env.sh

A=$(mktemp -d /tmp/tpsp-slurm-a.XXXXXX)
B=$(mktemp -d /tmp/tpsp-slurm-b.XXXXXX)
trap 'tools/slurm/stop_slurm.sh "$A"; tools/slurm/stop_slurm.sh "$B"; rm -rf "$A" "$B"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# left_of DIR TAG: the live (not zombie) processes of DIR's cluster and those whose command line holds TAG.
left_of() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import os, sys
d, tag = sys.argv[1], sys.argv[2]
daemons = {"/usr/sbin/munged-wlm", "/usr/sbin/munged", "/usr/sbin/slurmctld-wlm", "/usr/sbin/slurmd-wlm",
           "/usr/sbin/slurmstepd-wlm"}
daemons = {os.path.realpath(p) for p in daemons | {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/slurmstepd"}}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            continue
        cmd = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
        exe = os.path.realpath(f"/proc/{pid}/exe")
        files = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        continue
    ours = exe in daemons and (d in cmd or any(f.startswith(d + "/") for f in files))
    if ours or tag in cmd:
        print(pid, exe, cmd)
PY
}
# running_job DIR TAG: waits up to 30 s until a process whose command line holds TAG runs.
running_job() {
  for _ in $(seq 300); do [[ "$(left_of "$1" "$2")" == *"$2"* ]] && return 0; sleep 0.1; done
  fail "the job ($2) of $1 did not start within 30 s"
}

t0=$(now_s)
eval "$(tools/slurm/start_slurm.sh "$A")"
conf_a=$SLURM_CONF
eval "$(tools/slurm/start_slurm.sh "$B")"
conf_b=$SLURM_CONF
echo "two clusters started: $(since "$t0") s"
[[ -n "$(left_of "$A" none-such-tag)" && -n "$(left_of "$B" none-such-tag)" ]] || fail "the process lookup finds no daemon"

# A: stop with a job running.
SLURM_CONF=$conf_a sbatch -Q --chdir="$A" --output=/dev/null --wrap "sleep 3071" >/dev/null
running_job "$A" "sleep 3071"
t0=$(now_s)
tools/slurm/stop_slurm.sh "$A"
echo "stop_slurm.sh with a job running: $(since "$t0") s"
left=$(left_of "$A" "sleep 3071")
[[ -z "$left" ]] || fail "left running after stop_slurm.sh $A:"$'\n'"$left"
SLURM_CONF=$conf_b timeout 20 sinfo -h -o %t | grep -qx idle || fail "cluster B stopped answering when A was stopped"

# B: the controller and slurmd crash while a job runs; stop must still clean up.
SLURM_CONF=$conf_b sbatch -Q --chdir="$B" --output=/dev/null --wrap "sleep 3072" >/dev/null
running_job "$B" "sleep 3072"
kill -KILL "$(<"$B/run/slurmd.pid")" "$(<"$B/run/slurmctld.pid")"
sleep 0.5
echo "after SIGKILL of slurmd and slurmctld, still running:"
left_of "$B" "sleep 3072"
t0=$(now_s)
tools/slurm/stop_slurm.sh "$B"
echo "stop_slurm.sh after SIGKILL of slurmd and slurmctld: $(since "$t0") s"
left=$(left_of "$B" "sleep 3072")
[[ -z "$left" ]] || fail "left running after stop_slurm.sh $B:"$'\n'"$left"
tools/slurm/stop_slurm.sh "$B" || fail "a second stop_slurm.sh is not a no-op"
echo PASS
