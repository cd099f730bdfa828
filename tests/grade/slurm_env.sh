# shellcheck shell=bash
# tests/grade/slurm_env.sh — sourced by the Slurm tests: fails (exit 1) with the command to run when this
# machine cannot start a private cluster. Not a skip: CI installs Slurm (tools/install_deps.sh
# --with-optional), so a missing Slurm there is a broken CI, and a developer learns what to install.
if [[ "$(id -u)" != 0 ]]; then
  echo "FAIL: the Slurm tests start a private cluster (tools/slurm/start_slurm.sh), which needs root; run ctest as root" >&2
  exit 1
fi
for b in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch; do
  if [[ ! -x $b ]]; then
    echo "FAIL: $b is missing: Slurm is not installed. Run: tools/install_deps.sh --with-optional" >&2
    echo "  (or: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge)" >&2
    exit 1
  fi
done
# now_s: seconds since the epoch, with nanoseconds (for the timings the tests print).
now_s() { date +%s.%N; }
# since T0: seconds elapsed since T0, 2 decimals.
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.2f", b - a }'; }
