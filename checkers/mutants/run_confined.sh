#!/usr/bin/env bash
# Runs tpsp-check on a rank program under --confine-uid (./grade's confinement) from a copy outside /tmp:
# a confined rank has a private /tmp, so a build tree under /tmp (a CI clone) is not there for it to run.
# Usage: run_confined.sh TPSP_CHECK RANK_PROGRAM [tpsp-check arguments...]; prints tpsp-check's output and
# exits with its status. Needs root, as ./grade does.
set -u
check=$1 program=$2
shift 2
dir=$(mktemp -d /var/tmp/tpsp-confined.XXXXXX) || exit 2
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
cp "$program" "$dir/" || exit 2
"$check" --binary "$dir/$(basename "$program")" "$@"
