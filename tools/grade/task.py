"""One grading task, (submission, lab), run inside its sandbox: ``task.py SPEC.json`` (./grade, issue 13).

Started by ./grade as ``unshare ... python3 task.py SPEC`` (sandbox.UNSHARE) locally or from a Slurm
array task. It enters the sandbox, builds the submission (build.py; shared by the submission's tasks),
grades the lab with the kit's tpsp-check under --confine-uid, and writes /grade/out/<lab>.status.json:
{"submission", "lab", "stage": "build" | "grade" | "infrastructure" | "done", "ok", "message",
"seconds", "limits"} ("infrastructure": the grading machine failed, not the submission).
The spec (written by the driver outside the sandbox, never visible inside) holds the per-task seed
derived from the instructor's grading seed; the grading seed itself never reaches this process.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import build
import sandbox


def write_status(lab: str, name: str, stage: str, ok: bool, message: str, t0: float, limits: dict) -> None:
    """Writes /grade/out/<lab>.status.json (the driver's and report.py's record of the task)."""
    status = {"submission": name, "lab": lab, "stage": stage, "ok": ok, "message": message[-4000:],
              "seconds": round(time.monotonic() - t0, 3), "limits": limits}
    (build.ROOT / "out" / f"{lab}.status.json").write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")


def grade(spec: dict, t0: float) -> None:
    """Builds, then runs tpsp-check for the task's lab; records the outcome in the status file."""
    lab, name, limits = spec["lab"], spec["submission"], spec["limits"]
    try:
        cached, broken = build.build(build.ROOT / "out/build.log", spec.get("symbol_rule", True),
                                     spec.get("released", []))
    except build.BuildFailed as e:
        write_status(lab, name, "build", False, str(e), t0, limits)
        return
    except build.KitBroken as e:  # the grading machine's fault, not the student's: ./grade exits 3
        write_status(lab, name, "infrastructure", False, f"the grading machine failed, not the submission: {e}",
                     t0, limits)
        return
    # The compiler cache holds the class's objects: gone before any learner code runs.
    if build.CCACHE.is_symlink():  # no sandbox (autograder.py): the link goes
        build.CCACHE.unlink()
    elif build.CCACHE.is_dir():
        subprocess.run(["umount", "-l", str(build.CCACHE)], capture_output=True)
    if lab in broken:
        write_status(lab, name, "build", False, broken[lab], t0, limits)
        return
    out_json = build.ROOT / "out" / f"{lab}.json"
    out_json.unlink(missing_ok=True)
    cmd = [str(build.KIT / "bin/tpsp-check"), lab, "--binary", str(build.program()), "--seed", str(spec["seed"]),
           "--json", str(out_json), "--confine-uid", str(spec["confine_uid"]),
           "--rank-memory-mib", str(limits["rank_memory_mib"]), "--rank-cpu-s", str(limits["rank_cpu_s"]),
           "--rank-file-mib", str(limits["rank_file_mib"]), "--rank-procs", str(limits["rank_procs"]),
           *spec.get("check_args", [])]
    log = build.ROOT / "out" / f"{lab}.log"
    with open(log, "w") as out:
        try:
            scratch = str(build.ROOT / "scratch")
            env = sandbox.clean_environment() | {"HOME": scratch, "TMPDIR": scratch}
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                               cwd=str(build.ROOT / "scratch"), timeout=limits["grade_seconds"])
            code = r.returncode
        except subprocess.TimeoutExpired:
            code = None
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    if code is None:
        write_status(lab, name, "grade", False,
                     f"grading {lab} was stopped after {limits['grade_seconds']} s (the task's wall-time limit)",
                     t0, limits)
    elif code in (0, 1) and out_json.is_file():
        rerun = " ".join(["./check", lab, "--seed", str(spec["seed"]), *spec.get("check_args", [])])
        where = "in your copy of the labs" + (f", with your instructor's solutions of {', '.join(spec['released'])} "
                                              "in solutions/" if spec.get("released") else "")
        write_status(lab, name, "done", True, f"your runs' inputs: {rerun} ({where})", t0, limits)
    else:
        write_status(lab, name, "grade", False, f"tpsp-check exited {code}:\n{tail}", t0, limits)


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    t0 = time.monotonic()
    try:
        sandbox.enter(spec["new_root"], {k: (v[0], v[1]) for k, v in spec["binds"].items()})
    except sandbox.SandboxError as e:
        print(f"./grade: {e}", file=sys.stderr)
        return 3
    grade(spec, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
