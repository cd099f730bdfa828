#!/usr/bin/env bash
# Passes only if the grader defines none of the functions of the lab-owned translation units: every
# global function (nm type T) defined in a lab's solution object must be absent from tpsp-check, so
# the expected tensors cannot come from a lab file. Usage: grader_links_no_lab_code.sh GRADER OBJ...
set -euo pipefail
grader=$1
shift
lab_symbols=$(nm --defined-only -P "$@" 2>/dev/null | awk '$2 == "T" {print $1}' | sort -u)
[ -n "$lab_symbols" ] || { echo "no lab symbols found in: $*"; exit 1; }
grader_symbols=$(nm --defined-only -P "$grader" | awk '$2 == "T" || $2 == "t" {print $1}' | sort -u)
shared=$(comm -12 <(printf '%s\n' "$lab_symbols") <(printf '%s\n' "$grader_symbols"))
if [ -n "$shared" ]; then
  echo "the grader links lab-owned code:"
  printf '%s\n' "$shared" | c++filt | head -20
  exit 1
fi
echo "grader: none of the $(printf '%s\n' "$lab_symbols" | wc -l) lab-owned functions is linked"
