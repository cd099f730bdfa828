#!/usr/bin/env bash
# Writes a learner copy of the repository to DEST: every tracked file except the project's own tests,
# the checker's mutants and the lab-owned engine files (the solutions). In the copy each lab's code
# lives once, in labs/labNN_*/ (the skeletons: tools/strip_solutions.py), and the build takes every
# lab from there (cmake/labs.cmake, TPSP_LEARNER_COPY). The README keeps what the copy holds: blocks
# between "<!-- full-repo -->" and "<!-- /full-repo -->" are dropped, "<!-- learner-copy" blocks are
# shown. With --with-solutions-lib LIB the copy also holds LIB (make solutions-lib) as
# solutions/libtpsp_lab_solutions.a: its build then takes every lab a learner is not checking from it.
# Refuses to write into an existing DEST (it may hold someone's work).
set -euo pipefail
dest=${1:?usage: make_release.sh DEST [--with-solutions-lib LIB]}
lib=""
if [ "${2:-}" = "--with-solutions-lib" ]; then
  lib=${3:?--with-solutions-lib needs the archive (make solutions-lib writes out/solutions/libtpsp_lab_solutions.a)}
  [ -f "$lib" ] || { echo "make_release: $lib does not exist (make solutions-lib)" >&2; exit 1; }
  lib=$(realpath "$lib")
fi
top=$(git rev-parse --show-toplevel)
cd "$top"
if [ -e "$dest" ]; then
  echo "make_release: $dest already exists; choose another RELEASE_DIR or remove it yourself" >&2
  exit 1
fi
lab_files=$(/usr/bin/python3 tools/strip_solutions.py --lab-files)
mkdir -p "$dest"
{
  git ls-files -z | grep -zvE '^(tests/|checkers/mutants/)'
} | grep -zvxF -f <(awk '{print $2}' <<<"$lab_files") | xargs -0 cp --parents -t "$dest"
while read -r _ engine skeleton; do
  /usr/bin/python3 tools/strip_solutions.py "$engine" > "$dest/$skeleton"
done <<<"$lab_files"
# The TODOs' contracts, which ./check quotes (the copy has no engine lab file to read them from).
/usr/bin/python3 tools/strip_solutions.py --contracts "$dest/checkers/lab_todos.json"
/usr/bin/python3 - "$dest/README.md" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r"<!-- full-repo -->.*?<!-- /full-repo -->\n?", "", s, flags=re.S)
s = re.sub(r"<!-- learner-copy\n(.*?)-->\n?", r"\1", s, flags=re.S)
open(p, "w").write(s)
PY
echo "learner copy of tpsp: the lab solutions are stripped; each lab's code is in labs/ (see README.md)" > "$dest/RELEASE"
if [ -n "$lib" ]; then
  mkdir -p "$dest/solutions"
  cp "$lib" "$dest/solutions/libtpsp_lab_solutions.a"
  manifest=$(dirname "$lib")/released.json
  if [ -f "$manifest" ]; then
    cp "$manifest" "$dest/solutions/released.json"
  fi
  cat > "$dest/solutions/README.md" <<'TXT'
# Prebuilt solutions

`libtpsp_lab_solutions.a` holds the solutions of the labs your instructor has released, compiled by
them; `released.json` names those labs (without it, the archive holds every lab). With it, the build of
a lab takes the *other* released labs from it and every unreleased lab from your files in `labs/`, so
each lab needs only your own code of that lab once the labs before it are released. `./check --solution`
runs the released labs' solutions (and refuses the others), and `make demo` trains with the released
solutions and your code for the rest. Your instructor may hand you a newer folder as more labs are
released: replace this one with it (your files in `labs/` are never touched). It links only with the
same compiler and libraries it was built with (your course's machine image). Delete this folder to run
your own code for every lab.
TXT
fi
if grep -rlE '^[[:space:]]*// (BEGIN|END) SOLUTION[[:space:]]*$' "$dest" --include='*.cpp' --include='*.h'; then
  echo "make_release: a solution block survived in the files above" >&2
  exit 1
fi
echo "learner copy written to $dest"
