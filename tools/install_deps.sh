#!/usr/bin/env bash
# tools/install_deps.sh — make sure the packages tpsp builds against are installed (Debian 12).
#
# Run by `make build|build-asan|demo|test|labNN` before cmake, and by .ci/run. It asks dpkg (one
# dpkg-query call, the database `dpkg -s` reads) which packages are installed; when all are, it prints
# nothing and takes a few milliseconds. Missing required packages are installed with apt-get: directly
# as root, through sudo when `sudo -n true` works (no password prompt); otherwise the script prints the
# command a person must run and exits 2. Optional packages are installed only with --with-optional;
# without it their absence is a one-line note. They are python3-numpy, python3-matplotlib,
# python3-torch (only the demo's loss plot and tools/make_goldens.py use them) and Slurm with munge
# (slurmctld slurmd slurm-client munge: ./grade --slurm and its test tests/grade/test_slurm_array.sh,
# which runs a private one-node cluster, tools/slurm/start_slurm.sh). While Slurm or munge is being
# installed and /usr/sbin/policy-rc.d does not exist, the script puts a temporary one there that denies
# every service start (exit 101, as Debian's container images do), so the packages' postinst scripts
# start no packaged munged/slurmctld/slurmd (ports 6817/6818); it removes that file afterwards. And
# ccache: ./grade caches the compiles of a class's submissions with it (most files are alike).
#
# Flags:   --with-optional  also install the optional packages (CI does)
#          --dry-run        print the install command instead of running it
#          -h, --help       this text
# Env:     TPSP_SKIP_DEPS=1 skip every check (you manage dependencies yourself)
#          TPSP_DEPS_EXTRA  more required packages, space-separated (used to test the missing path)
# Exit:    0 everything required is present (or was installed, or --dry-run printed the command)
#          1 bad flag, or apt-get failed
#          2 something required is missing and this script cannot install it (no root, no sudo,
#            macOS, a Linux without dpkg): the message says what to run
set -euo pipefail

[[ "${TPSP_SKIP_DEPS:-0}" == 1 ]] && exit 0

required=(build-essential cmake make git libgloo-dev libopenblas-dev doctest-dev nlohmann-json3-dev
          libcli11-dev libfmt-dev)
optional=(python3-numpy python3-matplotlib python3-torch slurmctld slurmd slurm-client munge ccache)
# Packages whose postinst would start a daemon (invoke-rc.d / deb-systemd-invoke ... start).
daemons=(slurmctld slurmd munge)
# shellcheck disable=SC2206  # word splitting of the extra list is intended
[[ -n "${TPSP_DEPS_EXTRA:-}" ]] && required+=(${TPSP_DEPS_EXTRA})

with_optional=0 dry_run=0
for arg in "$@"; do
  case "$arg" in
    --with-optional) with_optional=1 ;;
    --dry-run) dry_run=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "install_deps.sh: unknown flag '$arg' (see --help)" >&2; exit 1 ;;
  esac
done
me="tools/install_deps.sh"

# macOS: untested — nobody has built tpsp on a Mac yet (tpsp-demo also reads /proc/self/exe, which
# macOS lacks). Homebrew has no formula for Gloo, so it must be built from source.
if [[ "$(uname -s)" == Darwin ]]; then
  formulae=(cmake openblas doctest nlohmann-json cli11 fmt)
  if command -v brew >/dev/null && brew list --versions "${formulae[@]}" >/dev/null 2>&1 &&
    { [[ -d /opt/homebrew/include/gloo ]] || [[ -d /usr/local/include/gloo ]]; }; then
    exit 0
  fi
  echo "$me: macOS is untested. Install the dependencies with Homebrew:" >&2
  echo "  brew install ${formulae[*]}" >&2
  echo "  and Gloo from source (no Homebrew formula): https://github.com/facebookincubator/gloo" >&2
  echo "  then rerun with TPSP_SKIP_DEPS=1 if this check still fails." >&2
  exit 2
fi

if ! command -v dpkg-query >/dev/null; then
  echo "$me: no dpkg here (tpsp is tested on Debian 12). Install your distribution's equivalents of:" >&2
  echo "  ${required[*]}  (optional: ${optional[*]})" >&2
  echo "  then rerun with TPSP_SKIP_DEPS=1 to skip this check." >&2
  exit 2
fi

# The packages of "$@" that dpkg does not list as installed (status "?i", e.g. "ii" or held "hi").
missing_of() {
  local installed
  installed=" $(dpkg-query -W -f='${Package}:${db:Status-Abbrev} ' "$@" 2>/dev/null || true) "
  local p
  for p in "$@"; do [[ "$installed" == *" ${p%%:*}:"?"i "* ]] || printf '%s\n' "$p"; done
}
mapfile -t missing < <(missing_of "${required[@]}")
mapfile -t missing_opt < <(missing_of "${optional[@]}")

if ((with_optional)); then
  missing+=("${missing_opt[@]}")
elif ((${#missing_opt[@]})); then
  echo "note: optional ${missing_opt[*]} not installed (loss plot, goldens generator, Slurm grading test); $me --with-optional installs them" >&2
fi
((${#missing[@]})) || exit 0

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [[ "$(id -u)" == 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo)
  install_cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
else
  echo "$me: missing Debian packages: ${missing[*]}" >&2
  echo "This script can install them only as root or with password-less sudo. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  echo "(or as root, without sudo), then rerun your command." >&2
  exit 2
fi

# A temporary policy-rc.d while a daemon package is installed (see the header); an existing one is the
# administrator's policy and stays as it is.
policy=/usr/sbin/policy-rc.d
policy_tag="# tpsp install_deps.sh: temporary, removed when apt-get returns"
block_starts=0
if [[ ! -e "$policy" ]]; then
  for p in "${missing[@]}"; do
    [[ " ${daemons[*]} " == *" $p "* ]] && block_starts=1
  done
fi
if ((block_starts)); then
  install_cmd="$install_cmd  (with a temporary $policy that exits 101, so no packaged daemon starts)"
fi

if ((dry_run)); then
  echo "$me: missing ${missing[*]}; would run: $install_cmd"
  exit 0
fi
remove_policy() {
  # Only our own file: another process may have put its own there meanwhile.
  if grep -qxF "$policy_tag" "$policy" 2>/dev/null; then "${sudo[@]}" rm -f "$policy"; fi
}
if ((block_starts)); then
  trap remove_policy EXIT
  printf '#!/bin/sh\n%s\nexit 101\n' "$policy_tag" | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
fi
echo "$me: installing missing packages: ${missing[*]}" >&2
if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
  echo "$me: apt-get failed; the command was: $install_cmd" >&2
  exit 1
fi
