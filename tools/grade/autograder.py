"""The Gradescope autograder's run (run_autograder, written by `make autograder`): grades
ROOT/submission for one lab and writes ROOT/results/results.json (ROOT is /autograder on Gradescope).

  autograder.py [--root /autograder]

ROOT/source holds what `make autograder LAB=labNN RELEASED=...` zipped: autograder.json ({"lab",
"released", and optionally "weights", "tp" (the TP sizes to run, e.g. "1,2"; default every size) and
"no_dp" (true: skip the dp = 2 × tp = 2 runs)}), tpsp/ (a learner copy: no lab's solution) whose grading kit setup.sh built in
tpsp/build/grade-kit, and released/<lab dir>/*.cpp (the released labs' solutions, linked beneath the
graded lab). The submission's files may sit at its top (Gradescope's upload of single files), in
<lab dir>/ folders, under labs/, or in an archive.

Where the container allows namespaces (unshare works), the submission is graded by ./grade as on a
course's machine, in its sandbox. Where it does not (Gradescope's default containers), it uses what it
can: the build as another user with the symbol rule and the include check, the ranks as uids of their
own under rlimits, through the witness relay, a grading seed drawn here and never shown; the results
say which defences were off (the mount, PID and network namespaces: the ranks share /tmp, /dev/shm and
the network, and the build sees the container's file system). The environment variables
TPSP_AUTOGRADER_KIT (a built kit instead of tpsp/build/grade-kit), TPSP_AUTOGRADER_NO_NAMESPACES=1
(behave as in a container without them) and TPSP_AUTOGRADER_CCACHE (a compiler cache) are for the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import build
import cli
import report
import submissions
import task

NO_NAMESPACES = ("this container allows no namespaces, so these defences were off: the ranks shared /tmp, "
                 "/dev/shm and the network, and the build could read the container's files (the build still "
                 "ran as another user, with the symbol rule and the include check; the ranks still ran as "
                 "uids of their own, under limits, through the witness relay, on a hidden seed)")


def namespaces_work() -> bool:
    if os.environ.get("TPSP_AUTOGRADER_NO_NAMESPACES") == "1":
        return False
    r = subprocess.run([*cli.sandbox.UNSHARE, "true"], capture_output=True)
    return r.returncode == 0 and os.geteuid() == 0


def fail_results(results: Path, message: str) -> None:
    """results.json when nothing could be graded: the student reads why, scored 0."""
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({"score": 0, "output": message, "tests": []}, indent=1) + "\n")


def grade_with_sandbox(config: dict, kit: Path, subs: Path, work: Path, source: Path) -> Path:
    """./grade as on a course's machine; returns the submission's results folder."""
    seed = work / "seed"
    seed.write_text(secrets.token_hex(16) + "\n")
    seed.chmod(0o600)
    cmd = [str(source / "tpsp/grade"), str(subs), "--labs", config["lab"], "--out", str(work / "out"), "--kit",
           str(kit), "--jobs", "1", "--seed-file", str(seed)]
    if os.environ.get("TPSP_AUTOGRADER_CCACHE"):
        cmd += ["--ccache", os.environ["TPSP_AUTOGRADER_CCACHE"]]
    if config.get("released"):
        cmd += ["--solutions-of", ",".join(config["released"]), "--released-dir", str(source / "released")]
    if config.get("weights"):
        (work / "weights.json").write_text(json.dumps(config["weights"]))
        cmd += ["--weights", str(work / "weights.json")]
    cmd += (["--tp", config["tp"]] if config.get("tp") else []) + (["--no-dp"] if config.get("no_dp") else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    return work / "out" / "submission"


def grade_without_sandbox(config: dict, kit: Path, subs: Path, work: Path, source: Path) -> Path:
    """The task of ./grade without its sandbox (task.grade with the folders under WORK/grade)."""
    registry = json.loads((kit / "kit.json").read_text())["registry"]
    lab, released = config["lab"], [x for x in config.get("released", []) if x != config["lab"]]
    sub = submissions.collect(subs / "submission", registry, work / "staging")
    root = work / "grade"
    for d in ("build", "scratch", "released"):
        (root / d).mkdir(parents=True)
    out = work / "out" / sub.name
    out.mkdir(parents=True)
    os.chmod(work / "out", 0o700)
    # A copy (26 MB): the compiler runs as nobody, who may not reach the kit where it was built.
    shutil.copytree(kit, root / "kit", symlinks=True)
    (root / "src").symlink_to(sub.sources.resolve())
    (root / "out").symlink_to(out)
    if os.environ.get("TPSP_AUTOGRADER_CCACHE"):  # the tests' compiler cache (task.grade unlinks it before any run)
        (root / "ccache").symlink_to(Path(os.environ["TPSP_AUTOGRADER_CCACHE"]).resolve())
    for entry in registry["labs"]:
        if entry["id"] in released:
            shutil.copytree(source / "released" / Path(entry["dir"]).name, root / "released" / Path(entry["dir"]).name)
    os.chmod(root / "scratch", 0o711)
    for p in (work, root, root / "build", root / "released", *(root / "released").rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)
    build.use_root(root)
    secret = secrets.token_hex(16)
    spec = {"submission": sub.name, "lab": lab, "seed": cli.task_seed(secret, sub.name, lab, sub.digest),
            "confine_uid": 100_000_000 + secrets.randbelow(30_000) * 100_000, "released": released,
            "check_args": ["--confine-without-namespaces", *(["--tp", config["tp"]] if config.get("tp") else []),
                           *(["--no-dp"] if config.get("no_dp") else [])], "symbol_rule": True,
            "limits": {**cli.LIMITS, "grade_seconds": config.get("grade_seconds", 1200)}}
    task.grade(spec, time.monotonic())
    scenarios = report.scenarios_from_check(str(kit / "bin/tpsp-check"))
    report.write_reports(work / "out", [lab], [sub.name], scenarios=scenarios, weights=config.get("weights"))
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="run_autograder", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path("/autograder"))
    args = p.parse_args(argv)
    os.umask(0o022)
    source, results = args.root / "source", args.root / "results" / "results.json"
    config = json.loads((source / "autograder.json").read_text())
    kit = Path(os.environ.get("TPSP_AUTOGRADER_KIT", source / "tpsp/build/grade-kit"))
    if not (kit / "kit.json").is_file():
        fail_results(results, f"the autograder is broken, not your submission: no grading kit at {kit} (setup.sh "
                              "builds it); tell your instructor")
        return 1
    # One fixed folder: the compiler then sees the same paths at every run (a compiler cache can hit).
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "tpsp-autograder"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        subs = work / "subs"
        subs.mkdir()
        try:  # links are kept as links: submissions.collect never follows one
            shutil.copytree(args.root / "submission", subs / "submission", symlinks=True)
        except OSError as e:
            fail_results(results, f"your submission could not be read: {e}")
            return 0
        sandboxed = namespaces_work()
        graded = (grade_with_sandbox if sandboxed else grade_without_sandbox)(config, kit, subs, work, source)
        if not (graded / "results.json").is_file():
            fail_results(results, "the autograder could not grade this submission: "
                                  + (graded / f"{config['lab']}.status.json").read_text(errors="replace")[-2000:]
                         if (graded / f"{config['lab']}.status.json").is_file() else "no results")
            return 1
        out = json.loads((graded / "results.json").read_text())
        released = ", ".join(config.get("released", [])) or "none"
        out["output"] = (out.get("output", "") + f"\n\nGraded: {config['lab']} with your files of it; the released "
                         f"solutions beneath it: {released}.") + ("" if sandboxed else f"\n{NO_NAMESPACES}.")
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(out, indent=1) + "\n")
        print(f"autograder: {out.get('score')} points; {'sandboxed' if sandboxed else 'without namespaces'}")
        return 0
    except submissions.SubmissionError as e:
        fail_results(results, f"your submission could not be taken: {e}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
