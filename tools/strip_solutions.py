#!/usr/bin/python3
"""Strips lab solutions from engine files, leaving the learner's skeleton.

Every solution body in a lab-owned engine file is written as

    // TODO(lab01 f backward): <what the body must compute and communicate>
    // BEGIN SOLUTION
    <solution>
    // END SOLUTION

and becomes, in the skeleton,

    // TODO(lab01 f backward): <what the body must compute and communicate>
    TPSP_LAB_TODO("lab01 f backward");

The contract is written once, in the TODO comment. The checker quotes it from lab_todos.json (made by
--contracts from the engine files in the build, shipped in a learner copy), never from the learner's
editable file.

Usage:
  strip_solutions.py FILE            print the skeleton of FILE
  strip_solutions.py --check FILE SKELETON
                                     exit 1 (with a diff) unless SKELETON is FILE stripped
  strip_solutions.py --lab-files     print "lab engine_file skeleton_file" for every lab file
  strip_solutions.py --contracts OUT [FILE...]
                                     write {"labNN what": "the TODO's text"} of FILEs (default: every lab
                                     engine file of the registry) to OUT as JSON
  strip_solutions.py --update-skeletons
                                     (maintainers) rewrite labs/*/ skeletons from the engine files;
                                     refuses to touch a skeleton that is not a pristine copy of the
                                     committed one (it may hold a learner's work)
The lab registry (which engine file belongs to which lab, and where its skeleton lives) is
labs/labs.json; `--update-skeletons` rewrites the pristine skeletons after an engine change and
`make release` writes a learner copy of the whole tree.
"""
import difflib
import re
import sys

TODO_RE = re.compile(r"^(\s*)// TODO\((lab\d\d [^)]*)\):\s*(.*)$")
BEGIN_RE = re.compile(r"^\s*// BEGIN SOLUTION\s*$")
END_RE = re.compile(r"^\s*// END SOLUTION\s*$")


def strip(text: str, path: str = "<input>") -> str:
    """Returns text with every BEGIN/END SOLUTION block replaced by a TPSP_LAB_TODO call.

    Raises ValueError (naming the file and line) for a block without a TODO comment right above
    it, an unterminated block, or a nested BEGIN.
    """
    out, todo, i = [], None, 0
    lines = text.splitlines(keepends=True)
    while i < len(lines):
        line = lines[i]
        m = TODO_RE.match(line)
        if m:
            indent, what, first = m.groups()
            words = [first]
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("//") and not BEGIN_RE.match(lines[j]):
                words.append(lines[j].strip()[2:].strip())
                j += 1
            todo = (indent, what, " ".join(words))
            out.extend(lines[i:j])
            i = j
            continue
        if BEGIN_RE.match(line):
            if todo is None:
                raise ValueError(f"{path}:{i + 1}: BEGIN SOLUTION without a TODO(labNN ...) comment above it")
            j = i + 1
            while j < len(lines) and not END_RE.match(lines[j]):
                if BEGIN_RE.match(lines[j]):
                    raise ValueError(f"{path}:{j + 1}: nested BEGIN SOLUTION")
                j += 1
            if j == len(lines):
                raise ValueError(f"{path}:{i + 1}: BEGIN SOLUTION is never ended")
            indent, what, _ = todo
            out.append(f'{indent}TPSP_LAB_TODO("{what}");\n')
            todo = None
            i = j + 1
            continue
        if line.strip() and not line.strip().startswith("//"):
            todo = None
        out.append(line)
        i += 1
    return "".join(out)


def contracts(text: str, path: str = "<input>") -> dict:
    """{"labNN what": sentence} of every TODO comment right above a solution block of text."""
    out, todo = {}, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = TODO_RE.match(lines[i])
        if m:
            _, what, first = m.groups()
            words = [first]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("//") and not BEGIN_RE.match(lines[i]):
                words.append(lines[i].strip()[2:].strip())
                i += 1
            todo = (what, " ".join(words).rstrip("."))
            continue
        if BEGIN_RE.match(lines[i]) and todo is not None:
            if todo[0] in out:
                raise ValueError(f"{path}:{i + 1}: a second TODO named '{todo[0]}'")
            out[todo[0]] = todo[1]
            todo = None
        i += 1
    return out


def write_contracts(out_path, files):
    import json
    table = {}
    for f in files:
        with open(f) as src:
            table.update(contracts(src.read(), f))
    with open(out_path, "w") as dst:
        json.dump(table, dst, indent=1, ensure_ascii=False, sort_keys=True)
        dst.write("\n")
    return 0


def lab_files(root="."):
    """(lab, engine file, skeleton path) for every file of the lab registry labs/labs.json."""
    import json
    import os
    registry = json.load(open(os.path.join(root, "labs", "labs.json")))
    out = []
    for lab in registry["labs"]:
        for f in lab["files"]:
            if os.path.exists(os.path.join(root, f)):
                out.append((lab["id"], f, os.path.join(lab["dir"], os.path.basename(f))))
    return out


def update_skeletons():
    import os
    import subprocess
    for lab, engine, skel in lab_files():
        if os.path.exists(skel):
            # Only a pristine skeleton (the strip of the committed engine file) may be replaced:
            # anything else may be a learner's work, committed or not.
            head = subprocess.run(["git", "show", "HEAD:" + engine], capture_output=True, text=True)
            with open(skel) as f:
                if head.returncode != 0 or f.read() != strip(head.stdout, engine):
                    print(f"refusing to overwrite {skel}: it is not the pristine skeleton of {engine}")
                    continue
        os.makedirs(os.path.dirname(skel), exist_ok=True)
        with open(engine) as f:
            new = strip(f.read(), engine)
        with open(skel, "w") as f:
            f.write(new)
        print(f"{skel} <- strip({engine})")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--lab-files":
        for row in lab_files():
            print(" ".join(row))
        return 0
    if len(argv) == 2 and argv[1] == "--update-skeletons":
        return update_skeletons()
    if len(argv) >= 3 and argv[1] == "--contracts":
        return write_contracts(argv[2], argv[3:] or [engine for _, engine, _ in lab_files()])
    if len(argv) == 2:
        with open(argv[1]) as f:
            sys.stdout.write(strip(f.read(), argv[1]))
        return 0
    if len(argv) == 4 and argv[1] == "--check":
        with open(argv[2]) as f:
            want = strip(f.read(), argv[2])
        with open(argv[3]) as f:
            got = f.read()
        if got == want:
            return 0
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   f"strip({argv[2]})", argv[3]))
        return 1
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
