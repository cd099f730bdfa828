#!/usr/bin/env -S /usr/bin/python3 -B
"""check_docs.py TPSP_CHECK — the counts the docs quote are the checker's, and the learner and instructor
docs carry no development notes.

1. Each lab's README says once, in this form,
       `./check labNN --solution --seed 5` (the engine's solution): `N passed, 0 failed`,
       `M passed, 0 failed` with `--no-dp`.
   and N and M are what TPSP_CHECK prints for the engine's solution (it is run here, about 5 s).
2. The whole suite's total, quoted in labs/README.md ("| all | `./check --all` | `T passed, 0 failed` |")
   and docs/grading.md ("(T runs, all pass"), is the sum.
3. No issue numbers ("issue 12") and no commit hashes in README.md, labs/ and the instructor docs
   (docs/grading.md, docs/tolerances.md, docs/lessons/): they mean nothing to a learner or a course.
Prints one line per mismatch, naming the file, what it says and what the checker printed; exit 1 if any.
(The learner-copy summaries of labs/README.md are checked by tools/test_release.sh, which builds a copy.)
"""
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANON = re.compile(r"`\./check (lab\d\d) --solution --seed 5` \(the engine's solution\): `(\d+) passed, 0 failed`,"
                   r"\s+`(\d+) passed, 0 failed` with `--no-dp`\.")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed", re.M)
LEARNER_DOCS = ["README.md", "labs", "docs/grading.md", "docs/tolerances.md", "docs/lessons"]
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+\b")
# A commit hash: 7 to 40 hex digits with at least one letter and one digit, as a word.
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def passed(check: str, args: list[str]) -> int:
    r = subprocess.run([check, *args, "--solution", "--seed", "5"], capture_output=True, text=True, cwd=REPO)
    found = SUMMARY.findall(r.stdout)
    if r.returncode != 0 or not found or found[-1][1] != "0":
        raise SystemExit(f"FAIL: {check} {' '.join(args)} --solution did not pass: {r.stdout[-500:]}{r.stderr[-500:]}")
    return int(found[-1][0])


def main() -> int:
    check = sys.argv[1]
    labs = json.loads((REPO / "labs/labs.json").read_text())["labs"]
    problems, total = [], 0
    for lab in labs:
        readme = REPO / lab["dir"] / "README.md"
        quotes = [m for m in CANON.finditer(readme.read_text()) if m.group(1) == lab["id"]]
        runs, no_dp = passed(check, [lab["id"]]), passed(check, [lab["id"], "--no-dp"])
        total += runs
        if len(quotes) != 1:
            problems.append(f"{readme.relative_to(REPO)}: {len(quotes)} sentences of the form "
                            f"\"`./check {lab['id']} --solution --seed 5` (the engine's solution): `N passed, 0 "
                            "failed`, `M passed, 0 failed` with `--no-dp`.\" (one expected)")
            continue
        said = (int(quotes[0].group(2)), int(quotes[0].group(3)))
        if said != (runs, no_dp):
            problems.append(f"{readme.relative_to(REPO)} says {said[0]} runs ({said[1]} with --no-dp); the checker "
                            f"ran {runs} ({no_dp})")
    quoted_totals = [("labs/README.md", re.compile(r"^\| all \| `\./check --all` \| `(\d+) passed, 0 failed` \|$", re.M)),
                     ("docs/grading.md", re.compile(r"\((\d+) runs, all pass"))]
    for path, pattern in quoted_totals:
        found = pattern.findall((REPO / path).read_text())
        if len(found) != 1 or int(found[0]) != total:
            problems.append(f"{path} quotes the whole suite as {found or 'nothing'}; the checker ran {total}")
    for root in LEARNER_DOCS:
        for doc in ([REPO / root] if (REPO / root).is_file() else sorted((REPO / root).rglob("*.md"))):
            for no, line in enumerate(doc.read_text().splitlines(), 1):
                for pattern, what in ((ISSUE, "an issue number"), (HASH, "a commit hash")):
                    if m := pattern.search(line):
                        problems.append(f"{doc.relative_to(REPO)}:{no}: {what} ('{m.group(0)}') in a learner or "
                                        "instructor doc")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"docs: every lab's quoted counts match the checker ({total} runs in all); no issue numbers or "
              "commit hashes in the learner and instructor docs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
