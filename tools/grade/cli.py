"""./grade: grade a class, each submission built and run in its own sandbox (docs/grading.md).

  ./grade SUBMISSIONS/ --labs lab01,lab03 --out RESULTS/ [--jobs N | --slurm] [--seed-file F] [--weights W]
          [--solutions-of lab00,lab01]
  ./grade --run-task RESULTS/.tasks/tasks.json I        (what each local worker or Slurm array task runs)

The engine is built once into the grading kit (make grade-kit). One task per (submission, lab): the
submission is built from its own files against the kit (build.py, once per submission) and the lab is
graded by the kit's tpsp-check with confined ranks (task.py, sandbox.py). Results: RESULTS/<name>/
(<lab>.json, <lab>.status.json, <lab>.log, build.log, results.json) and the class's class.csv,
scores.png, scenarios.png (report.py). Exit status: 0 every task ended with a verdict, 2 bad usage,
3 a task could not be run at all (sandbox, Slurm).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sandbox
import submissions

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TASK_SCRIPT = HERE / "task.py"
LIMITS = {"rank_memory_mib": 4096, "rank_cpu_s": 120, "rank_file_mib": 64, "rank_procs": 256}
BUILD_ALLOWANCE_S = 600  # on top of a task's grading time: the submission's build


def fail(message: str, code: int = 2) -> None:
    print(f"./grade: {message}", file=sys.stderr)
    sys.exit(code)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="./grade", description=__doc__.split("\n\n")[0])
    p.add_argument("submissions", nargs="?", type=Path, help="folder of submissions (a folder or archive each)")
    p.add_argument("--labs", help="labs to grade, comma-separated (e.g. lab01,lab03), or 'all'")
    p.add_argument("--out", type=Path, help="results folder (created; earlier results of a submission are replaced)")
    p.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1), help="tasks at once (local)")
    p.add_argument("--slurm", action="store_true", help="one Slurm array task per (submission, lab)")
    p.add_argument("--partition", help="Slurm partition (default: the cluster's)")
    p.add_argument("--seed-file", type=Path, help="file holding the grading seed (else $TPSP_GRADE_SEED, "
                   "else one is drawn and kept in RESULTS/.grading-seed)")
    p.add_argument("--tp", help="TP sizes to run (tpsp-check --tp), e.g. 1,2")
    p.add_argument("--no-dp", action="store_true", help="skip the dp=2 x tp=2 runs")
    p.add_argument("--task-timeout", type=float, default=600, help="seconds a lab's grading may take")
    p.add_argument("--ccache", type=Path, help="compiler cache shared by the class's builds (default: OUT/.ccache)")
    p.add_argument("--kit", type=Path, help="a built grading kit (default: make grade-kit in $BUILD or build/)")
    p.add_argument("--solutions-of", metavar="LABS",
                   help="labs whose solutions are released (comma-separated, e.g. lab00,lab01): a lab's task "
                        "takes the OTHER released labs from the repository's solutions, so each lab is graded "
                        "on its own code with the released labs beneath it")
    p.add_argument("--released-dir", type=Path, metavar="DIR",
                   help="with --solutions-of: take the released solutions from DIR/<lab dir>/<file> instead of this "
                        "repository (make autograder ships them so)")
    p.add_argument("--weights", type=Path, help="JSON file of points per lab and weights per scenario "
                   "(docs/grading.md, Weights; default: one point per scenario)")
    p.add_argument("--run-task", nargs=2, metavar=("TASKS", "INDEX"), help=argparse.SUPPRESS)
    # Tests only: builds without the forbidden-symbol rule, to show what the sandbox's other layers hold.
    p.add_argument("--allow-any-symbol", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def build_kit() -> Path:
    """Builds the grading kit in $BUILD (default build/) and returns its folder; exits 2 on failure."""
    build = Path(os.environ.get("BUILD", REPO / "build"))
    steps = []
    if not (build / "CMakeCache.txt").is_file():
        print(f"./grade: configuring {build} (the first build takes several minutes)", file=sys.stderr)
        steps.append(["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    steps.append(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target", "grade-kit"])
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail("building the grading kit failed:\n" + (r.stdout + r.stderr)[-4000:])
    return build / "grade-kit"


def grading_secret(args: argparse.Namespace, out: Path) -> str:
    """The instructor's grading seed: --seed-file, $TPSP_GRADE_SEED (removed from this process's
    environment), or drawn now and kept in OUT/.grading-seed (mode 0600)."""
    env = os.environ.pop("TPSP_GRADE_SEED", "")
    if args.seed_file:
        try:
            secret = args.seed_file.read_text().strip()
        except OSError as e:
            fail(f"--seed-file {args.seed_file}: {e.strerror}")
        if not secret:
            fail(f"--seed-file {args.seed_file} is empty")
        return secret
    if env:
        return env
    kept = out / ".grading-seed"
    if not kept.is_file():
        kept.write_text(secrets.token_hex(16) + "\n")
        kept.chmod(0o600)
        print(f"./grade: drew a grading seed, kept in {kept} (reuse it with --seed-file to regrade)")
    return kept.read_text().strip()


def task_seed(secret: str, name: str, lab: str, digest: str) -> int:
    """The seed a task's runs see: a hash of the grading seed, the submission, the lab and the
    submission's files. It reveals nothing of the grading seed, differs between students, and changes
    with any change to the files (so outputs cannot be computed for one seed and handed in)."""
    h = hashlib.blake2b(f"{secret}|{name}|{lab}|{digest}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") % (1 << 63)


def graded_labs(args: argparse.Namespace, kit: Path) -> list[str]:
    """The labs --labs names (all the kit's for 'all' or none); exits 2 naming an unknown one."""
    known = [lab["id"] for lab in json.loads((kit / "kit.json").read_text())["registry"]["labs"]]
    labs = known if args.labs in (None, "all") else [x for x in args.labs.split(",") if x]
    for lab in labs:
        if lab not in known:
            fail(f"unknown lab '{lab}' (known: {', '.join(known)})")
    return labs


def released_labs(args: argparse.Namespace, kit: Path) -> list[str]:
    """The labs --solutions-of names, checked: known to the kit, and their solutions in this repository
    (a learner copy has none) or --released-dir; exits 2 naming the rule otherwise."""
    if not args.solutions_of:
        if args.released_dir is not None:
            fail("--released-dir goes with --solutions-of (which labs it releases)")
        return []
    registry = json.loads((kit / "kit.json").read_text())["registry"]
    known = {lab["id"]: lab for lab in registry["labs"]}
    labs = [x for x in args.solutions_of.split(",") if x]
    for lab in labs:
        if lab not in known:
            fail(f"--solutions-of: unknown lab '{lab}' (known: {', '.join(known)})")
        if labs.count(lab) > 1:
            fail(f"--solutions-of names {lab} twice")
    if args.released_dir is None and (REPO / "RELEASE").exists():
        fail("--solutions-of takes the released labs' solutions from the full repository; this is a learner "
             "copy, which has none (give them with --released-dir)")
    for lab in labs:
        for f in known[lab]["files"]:
            path = solution_file(args, known[lab], f)
            if not path.is_file():
                fail(f"--solutions-of {lab}: its solution {path} is missing")
            if "TPSP_LAB_TODO(" in path.read_text(errors="replace"):
                fail(f"--solutions-of {lab}: {path} still has a TODO (a skeleton, not the solution)")
    return labs


def solution_file(args: argparse.Namespace, lab: dict, f: str) -> Path:
    """Where the released solution of lab file `f` (engine/…) is: --released-dir, or this repository."""
    if args.released_dir is not None:
        return args.released_dir / Path(lab["dir"]).name / Path(f).name
    return REPO / f


def stage_released(args: argparse.Namespace, kit: Path, out: Path, released: list[str], graded: str) -> Path:
    """OUT/.released/<graded lab>/<lab dir>/*.cpp: the solutions of the released labs other than the graded
    one, copied from the repository (read-only inside the task's sandbox as /grade/released). A task sees
    only the solutions it links: never the graded lab's own, never an unreleased lab's."""
    registry = json.loads((kit / "kit.json").read_text())["registry"]
    folder = out / ".released" / graded
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for lab in registry["labs"]:
        if lab["id"] in released and lab["id"] != graded:
            (folder / Path(lab["dir"]).name).mkdir()
            for f in lab["files"]:
                shutil.copyfile(solution_file(args, lab, f), folder / Path(lab["dir"]).name / Path(f).name)
    for p in [folder, *folder.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return folder


def build_tree(out: Path, name: str, released: list[str]) -> Path:
    """OUT/.build/<submission>/<own | with-lab00-lab01>: a submission's build tree for one set of released
    labs. Each task is shown only its own set's tree, so a lab01 task never reaches the program a lab02
    task linked with lab01's solution."""
    tree = out / ".build" / name / ("own" if not released else "with-" + "-".join(sorted(released)))
    tree.mkdir(parents=True, exist_ok=True)
    for d in (tree.parent, tree):
        os.chmod(d, 0o755)  # also when an earlier run left it otherwise
    return tree


def plan(args: argparse.Namespace, kit: Path, out: Path) -> tuple[list[dict], list[str], list[str]]:
    """Collects the submissions and writes one spec per task under OUT/.tasks; returns (specs, labs, names)."""
    registry = json.loads((kit / "kit.json").read_text())["registry"]
    labs = graded_labs(args, kit)
    released = released_labs(args, kit)
    staged = {lab: stage_released(args, kit, out, released, lab) for lab in labs} if released else {}
    secret = grading_secret(args, out)
    for d in (".src", ".build", ".tasks", ".roots"):
        (out / d).mkdir(exist_ok=True)
    ccache = args.ccache or out / ".ccache"
    if shutil.which("ccache"):
        ccache.mkdir(parents=True, exist_ok=True)
        os.chown(ccache, 65534, 65534)
    check_args = (["--tp", args.tp] if args.tp else []) + (["--no-dp"] if args.no_dp else [])
    specs, names = [], []
    # Each launch's ranks get a uid of their own: tasks i * 100000 apart, from a base drawn per ./grade
    # run so that two runs on one node (two classes, two Slurm arrays) are unlikely to share one.
    try:
        entries = submissions.discover(args.submissions)
    except submissions.SubmissionError as e:
        fail(str(e))
    span = (len(entries) * len(labs) + 1) * 100_000
    uid_base = 100_000_000 + secrets.randbelow((4_000_000_000 - 100_000_000 - span) // 100_000) * 100_000
    for entry in entries:
        try:
            sub = submissions.collect(entry, registry, out / ".src")
        except Exception as e:  # one submission that cannot be taken never stops the class
            print(f"./grade: {entry.name}: {e}: not graded", file=sys.stderr)
            continue
        names.append(sub.name)
        (out / sub.name).mkdir(exist_ok=True)
        os.chmod(out / sub.name, 0o700)
        for lab in labs:
            i = len(specs)
            tree = build_tree(out, sub.name, [x for x in released if x != lab])
            binds = {"/grade/kit": [str(kit.resolve()), False], "/grade/src": [str(sub.sources.resolve()), False],
                     "/grade/build": [str(tree.resolve()), True],
                     "/grade/out": [str((out / sub.name).resolve()), True]}
            if ccache.is_dir():
                binds["/grade/ccache"] = [str(ccache.resolve()), True]
            if released:
                binds["/grade/released"] = [str(staged[lab].resolve()), False]
            root = out / ".roots" / str(i)
            root.mkdir(exist_ok=True)
            specs.append({"submission": sub.name, "lab": lab, "seed": task_seed(secret, sub.name, lab, sub.digest),
                          "confine_uid": uid_base + i * 100_000, "new_root": str(root.resolve()),
                          "binds": binds, "check_args": check_args, "symbol_rule": not args.allow_any_symbol,
                          "released": [x for x in released if x != lab],
                          "limits": {**LIMITS, "grade_seconds": args.task_timeout}})
    for i, spec in enumerate(specs):
        path = out / ".tasks" / f"{i}.json"
        path.write_text(json.dumps(spec, indent=1))
        path.chmod(0o600)
    (out / ".tasks" / "tasks.json").write_text(json.dumps([str((out / ".tasks" / f"{i}.json").resolve())
                                                           for i in range(len(specs))]))
    return specs, labs, names


def run_task(spec_path: Path) -> int:
    """Runs one task in its sandbox (unshare + task.py) within its time limit; writes its status when the
    task could not (the sandbox failed, or the whole task was killed at its limit). Returns 0, or 3."""
    spec = json.loads(spec_path.read_text())
    status = Path(spec["binds"]["/grade/out"][0]) / f"{spec['lab']}.status.json"
    status.unlink(missing_ok=True)
    limit = spec["limits"]["grade_seconds"] + BUILD_ALLOWANCE_S
    cmd = [*sandbox.UNSHARE, "/usr/bin/python3", "-B", "-E", "-s", str(TASK_SCRIPT), str(spec_path)]
    proc = subprocess.Popen(cmd, env=sandbox.clean_environment() | {"PYTHONDONTWRITEBYTECODE": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=limit)
        message = f"the sandbox failed (exit {proc.returncode}): {output.strip()[-2000:]}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        message = f"the task was stopped after {limit:.0f} s (build + grading wall-time limit)"
    if status.is_file():
        return 0
    status.write_text(json.dumps({"submission": spec["submission"], "lab": spec["lab"], "stage": "sandbox",
                                  "ok": False, "message": message, "seconds": limit,
                                  "limits": spec["limits"]}, indent=1, sort_keys=True) + "\n")
    return 3 if proc.returncode not in (None, -signal.SIGKILL) and "stopped after" not in message else 0


def summary_line(spec: dict, status: dict) -> str:
    """The terminal line of one task, from its status (task.py) and its tpsp-check JSON."""
    out = Path(spec["binds"]["/grade/out"][0])
    head = f"{spec['submission']} {spec['lab']}:"
    if not status["ok"]:
        lines = [line for line in status["message"].splitlines() if line.strip()]
        return f"{head} not graded at stage {status['stage']}: " + " | ".join(lines[:2])[:300]
    result = json.loads((out / f"{spec['lab']}.json").read_text())
    return (f"{head} {result['passed']} passed, {result['failed']} failed, {result['not_implemented']} not "
            f"implemented, {result['needs_other_lab']} need another lab's code")


def check_weights(path: Path | None, labs: list[str], kit: Path):
    """The weights file's content checked against the kit's scenarios (report.points_of), or None without
    a file; exits 2 naming the rule when it breaks one."""
    if path is None:
        return None
    import report
    try:
        weights = report.load_weights(path)
        scenarios = report.scenarios_from_check(str(kit / "bin/tpsp-check"))
        report.points_of(weights, labs, scenarios, known=set(scenarios))
    except (ValueError, OSError) as e:
        fail(f"--weights {path}: {e}")
    return weights


def main(argv: list[str]) -> int:
    args = parse(argv)
    os.umask(0o022)  # the kit, builds and sandbox roots must be readable by the compiler's and ranks' uids
    if args.run_task:
        tasks = json.loads(Path(args.run_task[0]).read_text())
        return run_task(Path(tasks[int(args.run_task[1])]))
    if args.submissions is None or args.out is None:
        fail("usage: ./grade SUBMISSIONS/ --labs lab01,lab03 --out RESULTS/ (./grade --help)")
    if not args.submissions.is_dir():
        fail(f"{args.submissions} is not a folder of submissions")
    if os.geteuid() != 0:
        fail("grading needs root: each submission is built and run in its own mount, PID and network "
             "namespaces, its ranks as other users (run it with sudo, or on a node where you are root)")
    if args.jobs < 1:
        fail(f"--jobs {args.jobs} must be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    kit = args.kit or build_kit()
    if not (kit / "kit.json").is_file():
        fail(f"{kit} is not a grading kit (make grade-kit builds one)")
    weights = check_weights(args.weights, graded_labs(args, kit), kit)  # fails now, not after the grading
    released_labs(args, kit)
    specs, labs, names = plan(args, kit, args.out)
    tasks_file = args.out / ".tasks" / "tasks.json"
    if args.slurm:
        import slurm
        code = slurm.run_array([str(REPO / "grade"), "--run-task", str(tasks_file.resolve())],
                               len(specs), str(args.out.resolve()), str((args.out / ".slurm").resolve()),
                               time_limit_s=int(args.task_timeout + BUILD_ALLOWANCE_S), partition=args.partition)
        codes = [code]
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            paths = json.loads(tasks_file.read_text())
            codes = list(pool.map(lambda p: run_task(Path(p)), paths))
    missing, broken = False, []
    for spec in specs:
        try:
            status = json.loads((Path(spec["binds"]["/grade/out"][0]) / f"{spec['lab']}.status.json").read_text())
            if status["stage"] == "infrastructure":
                broken.append(f"{spec['submission']} {spec['lab']}")
            print(summary_line(spec, status))
        except (OSError, ValueError, KeyError) as e:
            print(f"{spec['submission']} {spec['lab']}: no result ({e})")
            missing = True
    try:
        import report
    except ImportError:
        report = None
    # The class's files cover every submission graded into OUT so far (a regrade of one keeps the others).
    names = sorted({*names, *(p.parent.name for p in args.out.glob("*/*.status.json")
                              if not p.parent.name.startswith("."))})
    if report is not None:  # the scenario list from the kit's grader: every submission has the same tests
        summary = report.write_reports(args.out, labs, names,
                                       scenarios=report.scenarios_from_check(str(kit / "bin/tpsp-check")),
                                       weights=weights)
        for note in summary.get("notes", []):
            print(f"./grade: {note}")
        print(f"./grade: {len(names)} submission{'s' if len(names) != 1 else ''} in {summary['csv']}"
              + "".join(f", {p}" for p in summary.get("plots", [])))
    shutil.rmtree(args.out / ".roots", ignore_errors=True)
    if broken:
        print(f"./grade: the grading machine failed in {len(broken)} task(s) (e.g. {broken[0]}): their "
              "results are not the students'; see their <lab>.status.json, fix the machine, grade again",
              file=sys.stderr)
    return 3 if missing or broken or any(c == 3 for c in codes) else 0

