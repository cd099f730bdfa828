#!/usr/bin/python3
"""Checks that each lab's HINTS.md and its TODOs name the same tasks, so the two cannot drift.

A lab's tasks are the TODOs of its files (labs/labs.json): `// TODO(labNN NAME): ...` comments of the
engine files (where they exist: not in a learner copy) and `TPSP_LAB_TODO("labNN NAME: ...")` calls of
the skeletons under labs/<lab dir>/. labs/<lab dir>/HINTS.md must have exactly one `## NAME` section
per task (headings inside ``` fences do not count, as in ./check --hint), each with some text, and no
section for a name that is no TODO.

Usage: check_hints.py [ROOT]   (ROOT: the repository, default .) — exit 0, or 1 with one line per
problem ("labs/lab01_tp_layers/HINTS.md: no section '## f forward' (the TODO at ...)").
"""
import json
import os
import re
import sys

TODO_COMMENT = re.compile(r"^\s*// TODO\((lab\d\d) ([^)]*)\):")
TODO_CALL = re.compile(r'TPSP_LAB_TODO\("(lab\d\d) ([^":]*):')


def todos(root, lab, dir_, files):
    """{name: "path:line"} of every TODO of the lab's engine files and skeletons."""
    out = {}
    paths = []
    for f in files:
        paths += [f, os.path.join(dir_, os.path.basename(f))]
    for rel in paths:
        p = os.path.join(root, rel)
        if not os.path.exists(p):
            continue
        for n, line in enumerate(open(p, encoding="utf-8"), 1):
            for m in (TODO_COMMENT.match(line), TODO_CALL.search(line)):
                if m and m.group(1) == lab:
                    out.setdefault(m.group(2).strip(), f"{rel}:{n}")
                elif m:
                    raise SystemExit(f"{rel}:{n}: a TODO of {m.group(1)} in a file of {lab}")
    return out


def sections(path):
    """[(name, line, text)] of the `## ` sections of a HINTS.md."""
    out, fenced = [], False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            out.append([line[3:].strip(), n, ""])
        elif out:
            out[-1][2] += line
    return out


def check(root):
    problems = []
    registry = json.load(open(os.path.join(root, "labs", "labs.json")))
    for lab in registry["labs"]:
        names = todos(root, lab["id"], lab["dir"], lab["files"])
        hints = os.path.join(lab["dir"], "HINTS.md")
        if not os.path.exists(os.path.join(root, hints)):
            problems.append(f"{hints}: missing ({lab['id']} has {len(names)} TODOs)")
            continue
        seen = {}
        for name, line, text in sections(os.path.join(root, hints)):
            if name in seen:
                problems.append(f"{hints}:{line}: '## {name}' again (first at line {seen[name]})")
            seen[name] = line
            if name not in names:
                problems.append(f"{hints}:{line}: '## {name}' names no TODO of {lab['id']} "
                                f"(its TODOs: {', '.join(sorted(names))})")
            if not text.strip():
                problems.append(f"{hints}:{line}: '## {name}' has no text")
        for name, where in sorted(names.items()):
            if name not in seen:
                problems.append(f"{hints}: no section '## {name}' (the TODO at {where})")
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else "."
    problems = check(root)
    for p in problems:
        print(p)
    if not problems:
        print("every TODO of every lab has its hint section, and every section names a TODO")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
