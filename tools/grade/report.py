#!/usr/bin/python3
"""The reports of a graded class: one Gradescope results.json per submission, RESULTS/class.csv and
the two figures (RESULTS/scores.png, RESULTS/scenarios.png).

Input (written by ./grade, layout in docs/grading.md and the grade driver's spec):
  RESULTS/<name>/<lab>.json         tpsp-check --json of that (submission, lab) task, absent when the
                                    task stopped before grading (build failed, a limit was hit)
  RESULTS/<name>/<lab>.status.json  the driver's record of the task: {"submission", "lab",
                                    "stage": "build"|"grade"|"done", "ok", "message", "seconds", "limits"}

Scoring rule: one Gradescope test per (lab, scenario), worth 1 point. A scenario runs in several
layouts (tp = 1 … 4, SP off and on, dp = 2 × tp = 2); it scores its point only when every one of its
runs passed, and 0 otherwise. Not proportional, because the layouts are not independent evidence of
partial correctness: the tp = 1 runs (and often the SP-off or dp = 1 ones) pass with a missing or
doubled collective — an all-reduce over one rank is the identity — so proportional credit would pay
most of a scenario's point to code that is wrong the moment it is split (the g_missing mutant of
lab01 passes 29 of its 53 runs). A TP implementation is correct when it is correct in every layout.
The test's output still says which layouts passed and, for the failed ones, the checker's problems.

Weights (optional, a JSON file the instructor edits; docs/grading.md "Weights"): per lab, "points" (the
lab's total, shared by its scenarios in proportion to their weights) and "scenarios" ({name: weight},
default 1 each, the name without the "labNN/" prefix). Without "points" a scenario is worth its weight;
without a file every scenario is worth 1 point, as above. The all-or-nothing rule is the same.

A task that was not graded (build failed, limit hit, no readable JSON, no status) gives every
scenario of its lab 0 points with the reason in the test's output; it is never left out, so every
submission has the same tests and the same maximum.

Usage: report.py RESULTS [--labs lab01,lab03] [--names alice,bob] [--scenarios LIST.txt | --check TPSP_CHECK]
                 [--weights WEIGHTS.json]
(/usr/bin/python3; the figures need matplotlib and are skipped with a note without it).
"""
import argparse
import csv
import importlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
LAB_RE = re.compile(r"lab[0-9]{2}")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Per-run verdicts, each scenario's cell in the heat map, worst first.
FAIL, TODO, NOT_GRADED, PASS = "fail", "not implemented", "not graded", "pass"
CELL_ORDER = (PASS, FAIL, TODO, NOT_GRADED)

# Task states (the CSV's status column); "ok" means the task was graded, whatever its scores.
OK, BUILD_FAILED, NOT_BUILT, LIMIT_HIT, GRADE_FAILED, NO_RESULT, NOT_RUN = (
    "ok", "build failed", "not built", "limit hit", "grading stopped", "no result", "not run")

# Truncation of a test's output (characters): one problem paragraph, the whole output.
PROBLEM_CHARS = 700
OUTPUT_CHARS = 4000
FAILED_LAYOUTS_SHOWN = 4
# Every test is shown to the learner at once: the same problems ./check prints on their own machine.
VISIBILITY = "visible"


def truncate(text, limit):
    """`text` cut to at most `limit` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 40].rstrip() + f" … [{len(text) - (limit - 40)} more characters cut]"


def plural(n, noun):
    """"1 layout", "3 layouts"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def check_name(name):
    """Raises ValueError unless `name` is a submission name ([A-Za-z0-9._-]+, not '.' or '..')."""
    if not NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"submission name {name!r} does not match [A-Za-z0-9._-]+ (or is . or ..)")


def check_lab(lab):
    """Raises ValueError unless `lab` looks like a lab id (labNN)."""
    if not LAB_RE.fullmatch(lab):
        raise ValueError(f"lab {lab!r} is not a lab id like lab01")


def read_json(path):
    """(object, error): the parsed JSON object at `path`, or None and a one-line reason."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, "absent"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"unreadable ({e})"
    if not isinstance(data, dict):
        return None, f"not a JSON object (a {type(data).__name__})"
    return data, ""


def valid_run(run):
    """True when `run` has the fields of one entry of tpsp-check's "results" (docs/grading.md)."""
    return (isinstance(run, dict) and isinstance(run.get("scenario"), str)
            and isinstance(run.get("passed"), bool) and isinstance(run.get("tp"), int)
            and isinstance(run.get("problems", []), list))


def limit_hit(message):
    """True when the driver's message says a limit stopped the task (time, memory, processes ...)."""
    return re.search(r"limit|timed? ?out|time budget|killed|memory|signal", message, re.I) is not None


def load_task(results_dir, name, lab):
    """The state of one (submission, lab) task, from its status and its tpsp-check JSON.

    Returns {"state": one of OK … NOT_RUN, "message": the reason when not OK (else the driver's
    note, if any), "runs": [this lab's run objects] (empty unless OK), "seconds": float}. NOT_BUILT:
    tpsp-check ran but the lab's rank program was missing (no entries, one failure: docs/grading.md).
    """
    base = os.path.join(results_dir, name, lab)
    status, status_err = read_json(base + ".status.json")
    report, report_err = read_json(base + ".json")
    task = {"state": OK, "message": "", "runs": [], "seconds": 0.0}
    if status is not None:
        seconds = status.get("seconds", 0.0)
        ok_number = isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0
        task["seconds"] = float(seconds) if ok_number else 0.0
        stage, ok = status.get("stage"), status.get("ok") is True
        message = str(status.get("message", "")).strip()
        if stage == "build" and not ok:
            return dict(task, state=BUILD_FAILED, message="the build failed:\n" + message)
        if stage != "done" and not ok:
            state = LIMIT_HIT if limit_hit(message) else GRADE_FAILED
            return dict(task, state=state, message=f"grading stopped ({stage} stage): {message}")
        if not ok and message:
            task["message"] = "the driver noted: " + message
        elif message:  # a graded task's note: the command that reruns the student's inputs
            task["message"] = message
    elif report is None and status_err == "absent":
        return dict(task, state=NOT_RUN, message=f"no status and no results for {lab}: the task did not run")
    else:
        task["message"] = f"the driver's {lab}.status.json is {status_err}"
    if report is None:
        return dict(task, state=NO_RESULT, message=f"tpsp-check's JSON {lab}.json is {report_err}"
                    + (f"; {task['message']}" if task["message"] else ""))
    runs = report.get("results")
    if not isinstance(runs, list) or not all(valid_run(r) for r in runs):
        return dict(task, state=NO_RESULT, message=f"{lab}.json has no valid \"results\" list")
    task["runs"] = [r for r in runs if r["scenario"].split("/")[0] == lab]
    if not task["runs"] and report.get("failed"):
        return dict(task, state=NOT_BUILT, message=f"{lab}'s rank program was not built, so none of its "
                    "scenarios ran (the compiler's messages are in build.log)")
    return task


def layout(run):
    """A run's layout as the checker names it: "tp=2", "dp=2 tp=2", "tp=4 sp"."""
    dp = run.get("dp", 1)
    return ("" if dp == 1 else f"dp={dp} ") + f"tp={run['tp']}" + (" sp" if run.get("sp") else "")


def run_verdict(run):
    """PASS, FAIL, TODO (stopped at this lab's TPSP_LAB_TODO) or NOT_GRADED (needs another lab)."""
    if run["passed"]:
        return PASS
    if run.get("needs_other_lab"):
        return NOT_GRADED
    return TODO if run.get("todo") else FAIL


def other_lab(run):
    """The lab a needs_other_lab run reached ("needs lab02 … (file:line), not implemented ...")."""
    for problem in run.get("problems", []):
        m = re.match(r"needs (lab[0-9]{2})", str(problem))
        if m:
            return m.group(1)
    return "another lab"


def score_scenario(scenario, runs):
    """One scenario of a graded task: (score 0 or 1, cell verdict, output text). See the module doc."""
    if not runs:
        return 0, NOT_GRADED, f"{scenario} did not run: tpsp-check has no result for it."
    verdicts = [run_verdict(r) for r in runs]
    passed = [layout(r) for r, v in zip(runs, verdicts) if v == PASS]
    if len(passed) == len(runs):
        return 1, PASS, f"passed in {plural(len(runs), 'layout')}: {', '.join(passed)}"
    lines = [f"{len(passed)} of {len(runs)} layouts passed; the scenario scores only when all pass."]
    if passed:
        lines.append("passed: " + ", ".join(passed))
    todo = [r for r, v in zip(runs, verdicts) if v == TODO]
    needs = [r for r, v in zip(runs, verdicts) if v == NOT_GRADED]
    failed = [r for r, v in zip(runs, verdicts) if v == FAIL]
    if todo:
        first = str((todo[0].get("problems") or ["(no message)"])[0])
        lines.append(f"not implemented yet in {plural(len(todo), 'layout')}: {truncate(first, PROBLEM_CHARS)}")
    for lab in sorted({other_lab(r) for r in needs}):
        n = sum(other_lab(r) == lab for r in needs)
        lines.append(f"needs {lab}'s code, not implemented in this submission ({plural(n, 'layout')} not graded)")
    for r in failed[:FAILED_LAYOUTS_SHOWN]:
        problems = [truncate(str(p), PROBLEM_CHARS) for p in r.get("problems", [])] or ["(no problem text)"]
        lines.append(f"FAIL {layout(r)}:\n  " + "\n  ".join(problems))
    if len(failed) > FAILED_LAYOUTS_SHOWN:
        rest = failed[FAILED_LAYOUTS_SHOWN:]
        lines.append(f"… and {len(rest)} more failed layouts: " + ", ".join(layout(r) for r in rest))
    verdict = FAIL if failed else TODO if todo else NOT_GRADED
    return 0, verdict, truncate("\n".join(lines), OUTPUT_CHARS)


# Points are kept in units of 1/10000 (what the reports print): each lab's shares add up to its points
# exactly, and no share is too small to print.
POINT_UNITS = 10_000
MAX_POINTS = 1e9


def points_of(weights, labs, scenarios, known=None):
    """{(lab, scenario id): points} from a weights dict (the JSON file's content; None: 1 point each).

    weights: {lab: {"points": P, "scenarios": {name: w}}}, both keys optional; a scenario's name with or
    without its "labNN/" prefix. A scenario's points are w (default 1), or with P the share P·w/Σw of its
    lab, rounded to 1/10000 so that the shares add up to P exactly (largest remainders). A lab the file
    names but that is not graded now is skipped (the file serves the whole course); `known` (the
    grader's labs, optional) refuses a lab it does not know. Raises ValueError naming the rule and the
    value: not an object, a lab that is not labNN or not known, a key other than points/scenarios,
    scenarios that is not an object, a scenario the lab does not have or named twice, a weight or points
    that is not a positive number up to 1e9, a share below 0.0001 points."""
    out = {(lab, sc): 1.0 for lab in labs for sc in (scenarios[lab] or [lab])}
    if weights is None:
        return out
    if not isinstance(weights, dict):
        raise ValueError("weights: the file must hold a JSON object {lab: {\"points\": P, \"scenarios\": {...}}}")
    for lab, spec in weights.items():
        if not LAB_RE.fullmatch(lab) or (known is not None and lab not in known):
            raise ValueError(f"weights: {lab!r} is not a lab of this grader"
                             + (f" ({', '.join(sorted(known))})" if known is not None else " (labNN)"))
        if not isinstance(spec, dict) or set(spec) - {"points", "scenarios"}:
            raise ValueError(f"weights: {lab} must be an object with \"points\" and/or \"scenarios\", got {spec!r}")
        if "scenarios" in spec and not isinstance(spec["scenarios"], dict):
            raise ValueError(f"weights: {lab} \"scenarios\" must be an object {{name: weight}}, got {spec['scenarios']!r}")
        if lab not in labs:
            continue
        ids = scenarios[lab] or []
        w = {sc: 1.0 for sc in ids}
        named = set()
        for name, value in spec.get("scenarios", {}).items():
            sc = name if name.startswith(lab + "/") else f"{lab}/{name}"
            if sc not in w:
                raise ValueError(f"weights: {lab} has no scenario {name!r} ("
                                 + (f"it has {', '.join(x.split('/', 1)[-1] for x in ids)})" if ids else
                                    f"no scenario of {lab} is known: give the grader, --check build/bin/tpsp-check)"))
            if sc in named:
                raise ValueError(f"weights: {lab} names scenario {sc.split('/', 1)[-1]!r} twice")
            named.add(sc)
            w[sc] = positive(value, f"weights: {lab} scenario {name}")
        total = positive(spec["points"], f"weights: {lab} points") if "points" in spec else None
        for sc, units in shares(w, total, lab).items():
            out[(lab, sc)] = units / POINT_UNITS
    if sum(out.values()) > MAX_POINTS:
        raise ValueError(f"weights: the course's points add up to {sum(out.values()):g}, more than {MAX_POINTS:g}")
    return out


def shares(w, total, lab):
    """{scenario: points in 1/POINT_UNITS} of one lab: each weight itself (total None), or the lab's
    `total` shared in proportion to the weights, the units left by rounding down given to the largest
    remainders so that they add up to the total. ValueError for a share below one unit."""
    if total is None:
        exact = dict(w)
    else:
        norm = sum(w.values())
        exact = {sc: total * (x / norm) for sc, x in w.items()}
    units = {sc: math.floor(x * POINT_UNITS) for sc, x in exact.items()}
    if total is not None:
        left = round(total * POINT_UNITS) - sum(units.values())
        for sc in sorted(exact, key=lambda k: exact[k] * POINT_UNITS - units[k], reverse=True)[:max(left, 0)]:
            units[sc] += 1
    for sc, u in units.items():
        if u < 1:
            raise ValueError(f"weights: {lab} scenario {sc.split('/', 1)[-1]!r} would be worth "
                             f"{exact[sc]:.3g} points, less than the 0.0001 the reports can show")
    return units


def positive(value, what):
    """`value` as a float when it is a positive number up to MAX_POINTS; ValueError naming `what` otherwise."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok:
        try:
            ok = math.isfinite(float(value)) and 0 < float(value) <= MAX_POINTS
        except OverflowError:  # a JSON integer too big for a float
            ok = False
    if not ok:
        raise ValueError(f"{what} must be a positive number up to {MAX_POINTS:g}, got {str(value)[:40]}")
    return float(value)


def load_weights(path):
    """The weights file's JSON (see points_of), or None for no file; ValueError when it is unreadable,
    not an object, or repeats a key."""
    if path is None:
        return None

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup is not None:
            raise ValueError(f"weights: {path} names {dup!r} twice in one object")
        return dict(pairs)

    try:
        with open(path, encoding="utf-8") as f:
            weights = json.load(f, object_pairs_hook=no_duplicates)
    except (OSError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"weights: cannot read {path}: {str(e)[:200]}") from e
    if not isinstance(weights, dict):
        raise ValueError(f"weights: {path} must hold a JSON object {{lab: {{\"points\": P, \"scenarios\": {{...}}}}}}")
    return weights


def points_str(x):
    """Points as the reports print them: 25, or 4.5455 (at most 4 decimals)."""
    x = round(float(x), 4)  # shares of a lab's points carry float noise (30.000000000000007)
    return str(int(x)) if x.is_integer() else f"{x:.4f}".rstrip("0")


def scenario_lists(results_dir, labs, names, given=None):
    """{lab: [scenario id, ...]}: `given` where it names the lab, else every scenario that any
    submission's JSON holds for that lab, in the order tpsp-check ran them (the first JSON that has
    it first). A lab that no submission built has an empty list."""
    out = {}
    for lab in labs:
        if given and given.get(lab):
            out[lab] = list(given[lab])
            continue
        seen = []
        for name in names:
            report, _ = read_json(os.path.join(results_dir, name, lab + ".json"))
            for run in (report or {}).get("results", []) if isinstance(report, dict) else []:
                sc = run.get("scenario") if isinstance(run, dict) else None
                if isinstance(sc, str) and sc.split("/")[0] == lab and sc not in seen:
                    seen.append(sc)
        out[lab] = seen
    return out


def grade_submission(results_dir, name, labs, scenarios, points=None):
    """One submission's Gradescope results (dict) and its grid: {(lab, scenario): cell verdict},
    plus per-lab scores and task states. Tests are numbered "lab.scenario" in lab order; each is worth
    points[(lab, scenario)] (points_of; None: 1 each)."""
    points = points or points_of(None, labs, scenarios)
    weighted = any(v != 1.0 for v in points.values())
    tests, cells, lab_scores, states, seconds, summary = [], {}, {}, {}, 0.0, []
    passed_count = 0
    for li, lab in enumerate(labs, start=1):
        task = load_task(results_dir, name, lab)
        states[lab], seconds = task["state"], seconds + task["seconds"]
        ids = scenarios[lab] or [lab]  # a lab nobody built still gets a test, worth 1, scored 0
        lab_score, lab_max, lab_passed = 0.0, 0.0, 0
        for si, scenario in enumerate(ids, start=1):
            if task["state"] != OK:
                score, cell, text = 0, NOT_GRADED, f"{lab} was not graded ({task['state']}): {task['message']}"
            elif scenario == lab:
                score, cell, text = 0, NOT_GRADED, f"no submission has results for {lab}'s scenarios"
            else:
                runs = [r for r in task["runs"] if r["scenario"] == scenario]
                score, cell, text = score_scenario(scenario, runs)
            worth = points[(lab, scenario)]
            lab_score, lab_max, lab_passed = lab_score + score * worth, lab_max + worth, lab_passed + score
            cells[(lab, scenario)] = cell
            tests.append({"name": scenario, "number": f"{li}.{si}", "score": float(score * worth),
                          "max_score": float(worth), "status": "passed" if score else "failed",
                          "visibility": VISIBILITY, "output": truncate(text, OUTPUT_CHARS), "output_format": "text"})
        lab_scores[lab] = round(lab_score, 4) if weighted else int(lab_score)
        passed_count += lab_passed
        line = (f"{lab}: {points_str(lab_score)}/{points_str(lab_max)} points ({lab_passed} of {len(ids)} scenarios)"
                if weighted else f"{lab}: {lab_passed}/{len(ids)} scenarios")
        if task["state"] != OK:
            line += f" — not graded ({task['state']}): " + truncate(task["message"], 600)
        elif task["message"]:
            line += " — " + task["message"]
        summary.append(line)
    total = round(sum(t["score"] for t in tests), 4)  # shares are k/10000: the sum's float noise goes
    max_total = round(sum(t["max_score"] for t in tests), 4)
    head = (f"{points_str(total)}/{points_str(max_total)} points: {passed_count} of {len(tests)} scenarios passed "
            "in every layout (weighted by the course's weights file).\n" if weighted
            else f"{points_str(total)}/{points_str(max_total)} scenarios passed in every layout.\n")
    results = {"score": float(total), "execution_time": int(round(seconds)), "output": head + "\n".join(summary),
               "output_format": "text", "tests": tests,
               "extra_data": {"max_score": float(max_total), "labs": lab_scores, "states": states}}
    return results, cells, lab_scores, states


def write_atomic(path, write):
    """Calls write(file) on a temporary file beside `path`, then renames it to `path` (a reader never
    sees half a file; a failed write leaves the previous one)."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def status_cell(states):
    """The CSV's status: "ok" when every lab was graded, else "lab01 build failed; lab03 limit hit"."""
    bad = [f"{lab} {state}" for lab, state in states.items() if state != OK]
    return "; ".join(bad) if bad else OK


def write_reports(results_dir, labs, names, scenarios=None, weights=None):
    """Writes RESULTS/<name>/results.json for each of `names`, RESULTS/class.csv and the figures.

    results_dir: the RESULTS folder; labs: lab ids in the order to report ("lab01", ...); names:
    submission names (folders of RESULTS; one that is absent is reported as not run); scenarios:
    optional {lab: [scenario id]} (e.g. from `tpsp-check --list`), else taken from the results; weights:
    the weights file's content (points_of), None for 1 point per scenario.
    Returns {"max_score", "scores": {name: total}, "labs": {name: {lab: score}}, "status": {name:
    status cell}, "scenarios": {lab: [...]}, "csv": path, "plots": [paths], "notes": [str]}.
    Raises ValueError for a name or lab of the wrong form, no labs, or weights that break a rule.
    """
    if not labs:
        raise ValueError("no labs to report (give e.g. labs=['lab01'])")
    for lab in labs:
        check_lab(lab)
    for name in names:
        check_name(name)
    scenarios = scenario_lists(results_dir, labs, names, scenarios)
    points = points_of(weights, labs, scenarios)
    max_score = round(sum(points.values()), 4)
    summary = {"max_score": int(max_score) if max_score.is_integer() else max_score, "scores": {}, "labs": {},
               "status": {}, "scenarios": scenarios, "csv": os.path.join(results_dir, "class.csv"),
               "plots": [], "notes": []}
    grid = {}
    for name in names:
        results, cells, lab_scores, states = grade_submission(results_dir, name, labs, scenarios, points)
        os.makedirs(os.path.join(results_dir, name), exist_ok=True)
        write_atomic(os.path.join(results_dir, name, "results.json"),
                     lambda f, r=results: (json.dump(r, f, indent=1, ensure_ascii=False, allow_nan=False), f.write("\n")))
        score = round(results["score"], 4)
        summary["scores"][name] = int(score) if score.is_integer() else score
        summary["labs"][name] = lab_scores
        summary["status"][name], grid[name] = status_cell(states), cells
    write_atomic(summary["csv"], lambda f: write_csv(f, labs, names, summary))
    plots = load_plots()
    if isinstance(plots, str):
        summary["notes"].append(plots)
    else:
        rows = [(lab, sc) for lab in labs for sc in (scenarios[lab] or [lab])]
        summary["plots"] = [plots.score_histogram(os.path.join(results_dir, "scores.png"),
                                                  summary["scores"], summary["max_score"]),
                            plots.scenario_heatmap(os.path.join(results_dir, "scenarios.png"), rows, names,
                                                   grid, CELL_ORDER)]
    return summary


def load_plots():
    """tools/grade/plots.py as a module, or a one-line note saying why the figures are skipped
    (matplotlib is imported there, so CSV and JSON are written without it)."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as e:
        return f"plots skipped: {sys.executable} has no matplotlib ({e})"
    spec = importlib.util.spec_from_file_location(
        "tpsp_grade_plots", os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_csv(f, labs, names, summary):
    """class.csv: name, score, max_score, one score column per lab, status; one row per submission."""
    w = csv.writer(f)
    w.writerow(["name", "score", "max_score", *labs, "status"])
    for name in names:
        w.writerow([name, points_str(summary["scores"][name]), points_str(summary["max_score"]),
                    *(points_str(summary["labs"][name][lab]) for lab in labs), summary["status"][name]])


def parse_scenario_list(text):
    """{lab: [scenario id]} from `tpsp-check --list` output ("lab01 mlp   <summary>" lines) or from
    scenario ids one a line ("lab01/mlp"); other lines are skipped."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(lab[0-9]{2})(?:/| +)([A-Za-z0-9_]+)(\s|$)", line)
        if m and f"{m.group(1)}/{m.group(2)}" not in out.setdefault(m.group(1), []):
            out[m.group(1)].append(f"{m.group(1)}/{m.group(2)}")
    return out


def scenarios_from_check(tpsp_check):
    """{lab: [scenario id]} that the grader `tpsp_check` (build/bin/tpsp-check) lists; raises OSError
    when it cannot be run or exits non-zero."""
    run = subprocess.run([tpsp_check, "--list"], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise OSError(f"{tpsp_check} --list exited {run.returncode}: {run.stderr.strip()}")
    return parse_scenario_list(run.stdout)


def main(argv=None):
    """The command line: re-writes the reports of an existing RESULTS folder. Exit 0, or 2 on bad input."""
    p = argparse.ArgumentParser(description="Write results.json per submission, class.csv and the figures.")
    p.add_argument("results", help="the RESULTS folder ./grade wrote")
    p.add_argument("--labs", help="comma-separated labs (default: every lab with a file in RESULTS)")
    p.add_argument("--names", help="comma-separated submissions (default: every folder of RESULTS)")
    p.add_argument("--scenarios", help="a file of tpsp-check --list output (default: the scenarios in RESULTS)")
    p.add_argument("--check", help="the grader (build/bin/tpsp-check) whose --list gives the scenarios")
    p.add_argument("--weights", help="a JSON file of points per lab and weights per scenario (docs/grading.md)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.results):
        p.error(f"{a.results} is not a folder")
    names = a.names.split(",") if a.names else sorted(
        d for d in os.listdir(a.results) if os.path.isdir(os.path.join(a.results, d)) and NAME_RE.fullmatch(d)
        and not d.startswith("."))
    labs = a.labs.split(",") if a.labs else sorted(
        {m.group(1) for n in names for f in os.listdir(os.path.join(a.results, n))
         for m in [re.fullmatch(r"(lab[0-9]{2})(\.status)?\.json", f)] if m})
    try:
        given = None
        if a.scenarios:
            with open(a.scenarios, encoding="utf-8") as f:
                given = parse_scenario_list(f.read())
        elif a.check:
            given = scenarios_from_check(a.check)
        summary = write_reports(a.results, labs, names, given, load_weights(a.weights))
    except (ValueError, OSError) as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 2
    print(f"{len(names)} submissions, {len(labs)} labs ({', '.join(labs)}), max score {summary['max_score']}; "
          f"wrote {summary['csv']}" + "".join(f", {p}" for p in summary["plots"]))
    for note in summary["notes"]:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
