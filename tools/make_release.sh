#!/usr/bin/env bash
# Writes a learner copy of the repository to DEST: every tracked file, except the project's own
# tests and the checker's mutants, with each lab-owned engine file replaced by its skeleton
# (tools/strip_solutions.py). The copy builds, its checks fail cleanly with "not implemented yet",
# and it holds no solution body. Refuses to write into an existing DEST (it may hold someone's work).
set -euo pipefail
dest=${1:?usage: make_release.sh DEST}
top=$(git rev-parse --show-toplevel)
cd "$top"
if [ -e "$dest" ]; then
  echo "make_release: $dest already exists; choose another RELEASE_DIR or remove it yourself" >&2
  exit 1
fi
mkdir -p "$dest"
git ls-files -z | grep -zvE '^(tests/|checkers/mutants/)' | xargs -0 cp --parents -t "$dest"
/usr/bin/python3 tools/strip_solutions.py --lab-files | while read -r lab engine skeleton; do
  /usr/bin/python3 tools/strip_solutions.py "$engine" > "$dest/$engine"
  cp "$dest/$engine" "$dest/$skeleton"
done
echo "learner copy of tpsp: the lab solutions are stripped (see labs/*/README.md)" > "$dest/RELEASE"
if grep -rlE '^[[:space:]]*// (BEGIN|END) SOLUTION[[:space:]]*$' "$dest" --include='*.cpp' --include='*.h'; then
  echo "make_release: a solution block survived in the files above" >&2
  exit 1
fi
echo "learner copy written to $dest"
