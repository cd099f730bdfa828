#!/usr/bin/env -S /usr/bin/python3 -B
"""test_lab_by_lab.py KIT CCACHE — a course graded lab by lab, each at its deadline.

For each lab L of labs/labs.json in order: a submission holding only L's files (the engine's solution;
every other lab is the skeleton, as a student's copy is before they start that lab) is graded with
``./grade --labs L --solutions-of <the labs before L>``. Each must score full marks: every scenario's
points, no run failed, stopped at a TODO or needing another lab's code. So a lab's scenarios need only its
own code and earlier labs' (no forward dependency), and the released solutions are linked beneath it.

Also: what each task could see of the solutions (OUT/.released/L holds exactly the labs before L, never
L's own nor a later lab's), and a control: lab02's submission graded WITHOUT the released solutions
scores less than full (its runs need lab01, which it does not hold). Needs root (./grade does).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def labs() -> list[dict]:
    return json.loads((REPO / "labs/labs.json").read_text())["labs"]


def submission(root: Path, lab: dict) -> Path:
    """SUBMISSIONS folder with one submission, '<lab>-only', holding lab's solution files."""
    subs = root / f"SUBMISSIONS-{lab['id']}"
    dest = subs / f"{lab['id']}-only" / Path(lab["dir"]).name
    dest.mkdir(parents=True)
    for f in lab["files"]:
        shutil.copyfile(REPO / f, dest / Path(f).name)
    return subs


def grade(kit: str, ccache: str, subs: Path, out: Path, lab: str, released: list[str]) -> str:
    cmd = [str(REPO / "grade"), str(subs), "--labs", lab, "--out", str(out), "--kit", kit, "--ccache", ccache,
           "--tp", "1,2", "--seed-file", str(subs.parent / "seed")]
    if released:
        cmd += ["--solutions-of", ",".join(released)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"$ ./grade ... --labs {lab}" + (f" --solutions-of {','.join(released)}" if released else ""))
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        raise SystemExit(f"FAIL: ./grade exited {r.returncode}")
    return r.stdout


def score(out: Path, name: str) -> tuple[float, float]:
    res = json.loads((out / name / "results.json").read_text())
    return res["score"], sum(t["max_score"] for t in res["tests"])


def main() -> int:
    kit, ccache = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("FAIL: ./grade needs root (namespaces, other uids for the ranks); run ctest as root")
        return 1
    problems = []
    with tempfile.TemporaryDirectory(prefix="tpsp-lab-by-lab.") as tmp:
        root = Path(tmp)
        (root / "seed").write_text("lab-by-lab\n")
        order = labs()
        for i, lab in enumerate(order):
            released = [x["id"] for x in order[:i]]
            subs = submission(root, lab)
            out = root / f"RESULTS-{lab['id']}"
            text = grade(kit, ccache, subs, out, lab["id"], released)
            name = f"{lab['id']}-only"
            got, most = score(out, name)
            result = json.loads((out / name / f"{lab['id']}.json").read_text())
            if got != most or result["failed"] or result["not_implemented"] or result["needs_other_lab"]:
                problems.append(f"{lab['id']} at its deadline scored {got}/{most}: {text.strip().splitlines()[0]}")
            seen = sorted(p.name for p in (out / ".released" / lab["id"]).iterdir()) if released else []
            want = sorted(Path(x["dir"]).name for x in order[:i])
            if seen != want:
                problems.append(f"{lab['id']}'s task could see the solutions of {seen}, not exactly {want}")
            print(f"{lab['id']}: {got}/{most} points with the released solutions of {released or 'none'}")
        # The control: without the released solutions lab02's own code is not enough (it runs lab01's).
        lab02 = next(x for x in order if x["id"] == "lab02")
        out = root / "RESULTS-lab02-alone"
        grade(kit, ccache, root / "SUBMISSIONS-lab02", out, "lab02", [])
        got, most = score(out, "lab02-only")
        print(f"control: lab02 without released solutions {got}/{most}")
        if got >= most:
            problems.append("lab02 alone scored full marks without lab01's solution: the control proves nothing")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
