#!/usr/bin/env -S /usr/bin/python3 -B
"""check_verdicts.py EXPECTED.json RESULTS/ LABS SECRET — does ./grade's RESULTS/ give each (submission,
lab) of the synthetic class (tests/grade/class/make_class.py) the verdict expected.json names?

A task's verdict, read from RESULTS/<name>/<lab>.status.json and <lab>.json (tpsp-check --json):
  build_error  the status stopped at stage "build"
  contained    the status stopped at stage "grade" or "sandbox" (a limit), or no run passed and some failed
  fail         some run failed (and some passed)
  todo         no run failed, some stopped at a TODO of this lab
  pass         no run failed or stopped at a TODO, some passed (runs needing another lab's code are neither)
An expected verdict may be a list of acceptable ones (a lab that runs another lab's mutated code;
an output flood that the launcher cuts). Also: "max_result_bytes" bounds the size of RESULTS/<name>/; a
submission's "scenarios" ({"labNN/scenario": "fail"}) must have no passing run; with
"must_not_print_seed", SECRET (the grading seed) must appear in no file of RESULTS/<name>/; every
results.json is in Gradescope's shape. With a fifth argument --without-symbol-rule (RESULTS/ from
./grade --allow-any-symbol), only the submissions with "without_symbol_rule" verdicts are checked,
against those. Prints one line per mismatch; exit 1 when there is any.
"""
import json
import sys
from pathlib import Path


def verdict(out: Path, lab: str) -> str:
    status = json.loads((out / f"{lab}.status.json").read_text())
    if not status["ok"]:
        return "build_error" if status["stage"] == "build" else "contained"
    result = json.loads((out / f"{lab}.json").read_text())
    passed, failed, todo = result["passed"], result["failed"], result["not_implemented"]
    if failed and not passed:
        return "contained"
    if failed:
        return "fail"
    if todo:
        return "todo"
    return "pass" if passed else "no runs"


def main() -> int:
    expected = json.loads(Path(sys.argv[1]).read_text())
    results, labs, secret = Path(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
    if sys.argv[5:] == ["--without-symbol-rule"]:  # ./grade --allow-any-symbol: the sandbox's other layers
        expected = {name: {**exp, **exp["without_symbol_rule"]} for name, exp in expected.items()
                    if "without_symbol_rule" in exp}
    wrong = []
    for name, exp in expected.items():
        out = results / name
        for lab in labs:
            try:
                got = verdict(out, lab)
            except (OSError, ValueError, KeyError) as e:
                got = f"no result ({e})"
            if got not in (exp[lab] if isinstance(exp[lab], list) else [exp[lab]]):
                wrong.append(f"{name} {lab}: {got}, expected {exp[lab]} — {exp['why']}")
        for scenario in exp.get("scenarios", {}):
            lab = scenario.split("/")[0]
            if lab in labs and (out / f"{lab}.json").is_file():
                runs = json.loads((out / f"{lab}.json").read_text())["results"]
                if any(r["scenario"] == scenario and r["passed"] for r in runs):
                    wrong.append(f"{name}: a run of {scenario} passed — {exp['why']}")
        if "max_result_bytes" in exp:
            size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
            if size > exp["max_result_bytes"]:
                wrong.append(f"{name}: its results hold {size} bytes, over {exp['max_result_bytes']}")
        if exp.get("must_not_print_seed"):
            for f in out.rglob("*"):
                if f.is_file() and secret in f.read_text(errors="replace"):
                    wrong.append(f"{name}: the grading seed appears in {f}")
        report = out / "results.json"
        if report.is_file():
            r = json.loads(report.read_text())
            if not isinstance(r.get("tests"), list) or not all({"name", "score", "max_score"} <= set(t) for t in r["tests"]):
                wrong.append(f"{name}: results.json is not in Gradescope's shape")
        else:
            wrong.append(f"{name}: no results.json")
    for line in wrong:
        print("WRONG", line)
    print(f"{len(expected)} submissions x {len(labs)} labs: {len(wrong)} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
