#!/usr/bin/env bash
# tests/grade/test_slurm_array.sh — tools/grade/slurm.py run_array() on a real one-node Slurm cluster.
#
# Starts a private cluster in a temporary DIR (tools/slurm/start_slurm.sh; stopped by a trap), runs a
# 5-task array whose task i writes out-i holding "task i" and whose task 3 exits 3, then checks: every
# file with its exact content, each task's log and recorded exit status, run_array's return value 3
# (the failed task reported), a refused submission raised as SlurmError with sbatch's message, and a
# missing sbatch raised as SlurmError. Prints the timings. Run from the repository root (ctest does).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/grade/slurm_env.sh

D=$(mktemp -d /tmp/tpsp-slurm-test.XXXXXX)
W=$(mktemp -d /tmp/tpsp-slurm-work.XXXXXX)
trap 'tools/slurm/stop_slurm.sh "$D"; rm -rf "$D" "$W"' EXIT

t0=$(now_s)
eval "$(tools/slurm/start_slurm.sh "$D")"
echo "start_slurm.sh: $(since "$t0") s"
[[ "$SLURM_CONF" == "$D/slurm.conf" ]] || { echo "FAIL: start printed SLURM_CONF=$SLURM_CONF, not $D/slurm.conf"; exit 1; }

t0=$(now_s)
/usr/bin/python3 -B - "$W" <<'PY'
import os, sys
sys.path.insert(0, "tools/grade")
import slurm

work = sys.argv[1]
logs = os.path.join(work, "logs")
task = ("import sys; i = int(sys.argv[1]); open(f'out-{i}', 'w').write(f'task {i}'); "
        "print(f'stdout of {i}'); sys.exit(3 if i == 3 else 0)")
rc = slurm.run_array(["/usr/bin/python3", "-c", task], 5, work, logs, cpus_per_task=1, time_limit_s=120)
errors = []
if rc != 3:
    errors.append(f"run_array returned {rc}, expected 3 (task 3 exits 3)")
for i in range(5):
    path = os.path.join(work, f"out-{i}")
    got = open(path).read() if os.path.exists(path) else None
    if got != f"task {i}":
        errors.append(f"{path}: {got!r}, expected 'task {i}'")
    out, _ = slurm.task_log_files(logs, i)
    got = open(out).read() if os.path.exists(out) else None
    if got != f"stdout of {i}\n":
        errors.append(f"{out}: {got!r}, expected 'stdout of {i}\\n'")
    ex = slurm.task_exit_file(logs, i)
    got = open(ex).read().strip() if os.path.exists(ex) else None
    if got != ("3" if i == 3 else "0"):
        errors.append(f"{ex}: {got!r}")

# A request the cluster cannot meet is refused by sbatch (EnforcePartLimits=ALL): SlurmError with its words.
try:
    slurm.run_array(["true"], 2, work, os.path.join(work, "logs2"), cpus_per_task=4096)
    errors.append("cpus_per_task=4096 was not refused")
except slurm.SlurmError as e:
    if "More processors requested than permitted" not in str(e):
        errors.append(f"SlurmError without sbatch's message: {e}")
# No sbatch on PATH.
path = os.environ["PATH"]
os.environ["PATH"] = "/nonexistent"
try:
    slurm.run_array(["true"], 1, work, os.path.join(work, "logs3"))
    errors.append("a missing sbatch was not reported")
except slurm.SlurmError as e:
    if "sbatch is not on PATH" not in str(e):
        errors.append(f"missing sbatch: unexpected message {e}")
os.environ["PATH"] = path
# Bad input names the rule and the value.
try:
    slurm.run_array(["true"], 0, work, os.path.join(work, "logs4"))
    errors.append("n_tasks=0 was accepted")
except ValueError as e:
    if "n_tasks=0" not in str(e):
        errors.append(f"n_tasks=0: unexpected message {e}")
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
PY
echo "run_array (5 tasks, one failing) + refusal checks: $(since "$t0") s"

t0=$(now_s)
tools/slurm/stop_slurm.sh "$D"
echo "stop_slurm.sh: $(since "$t0") s"
echo PASS
