#!/usr/bin/env bash
# Passes only if the rank program and the grader know the same scenario ids (each scenario has a
# rank function and an expected side). Usage: same_scenarios.sh RANK_PROGRAM GRADER
set -euo pipefail
diff <("$1" --list | sort) <("$2" --list | awk '{print $1 "/" $2}' | sort) && echo "same scenarios on both sides"
