#!/usr/bin/env -S /usr/bin/python3 -B
"""The synthetic class that ./grade is tested on (issue 13).

make_class.py OUT [--size small|full] [--repo ROOT] [--bounded]

writes OUT/SUBMISSIONS/<name>/<lab dir basename>/<file> for every submission (the layout of
/work/handoff/grade_spec.md: a learner's labs/ tree) and OUT/expected.json:

  {name: {"lab00": VERDICT, ..., "lab04": VERDICT, "why": str,
          ["scenarios": {"labNN/scenario": "fail"}], ["must_not_print_seed": true]}}

VERDICT, per (submission, lab) task (README.md beside this file says how each is read from RESULTS/):
  "pass"        every run passed
  "fail"        some run failed (no run stopped at a TODO of this lab)
  "todo"        no run failed, some stopped at a TODO of this lab (a skeleton)
  "build_error" the lab's files did not compile, or ./grade refused to build them
  "contained"   the task hit a limit (processes, memory, disk, time): reported failed with a reason,
                and the rest of the class is still graded

Every submission holds a file for every lab-owned file of labs/labs.json: the engine's solution
unless the submission is about that lab. Mutants are applied like checkers/CMakeLists.txt does (each
`from` must occur exactly once). Attack and fault sources are in sources/ (ATTACKS.md says what each
does); @REPO_ROOT@ in them becomes the repository this script was run from (--repo to override).
--bounded shrinks the faults (forks, bytes) to sizes that a machine without a sandbox survives.
Python 3 standard library only.
"""
import argparse
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = HERE / "sources"
DEFAULT_REPO = HERE.parents[2]

# The faults' sizes: as the issue states them, and --bounded (for a run without a sandbox).
FAULT_SIZES = {
    False: {"FORK_LIMIT": 2000, "DISK_BYTES": 2 << 30, "MEM_BYTES": 8 << 30},
    True: {"FORK_LIMIT": 200, "DISK_BYTES": 16 << 20, "MEM_BYTES": 64 << 20},
}

# Mutants of the full class, spread over the labs (checkers/mutants/<lab>/<name>.json).
MUTANTS_FULL = [
    ("lab00", "ar_calls_pg_all_reduce"), ("lab00", "rs_own_chunk_not_added"),
    ("lab00", "ag_chunk_order_off_by_one"),
    ("lab01", "g_missing"), ("lab01", "column_dx_not_reduced"), ("lab01", "gather_shards_reversed"),
    ("lab02", "ce_max_not_all_reduced"), ("lab02", "emb_foreign_ids_not_masked"),
    ("lab02", "rng_fork_not_restoring"), ("lab02", "layer_global_heads"),
    ("lab03", "rs_all_reduce_then_slice"), ("lab03", "sp_grads_not_reduced"),
    ("lab03", "scatter_forward_wrong_chunk"), ("lab03", "sp_row_dbias_from_gathered_dy"),
    ("lab04", "ring_runs_backwards"), ("lab04", "column_forward_calls_all_gather"),
    ("lab05", "fc1_contiguous_split"), ("lab05", "heads_group_by_modulo"),
    ("lab06", "counts_assumed_equal"),
]
MUTANTS_SMALL = [("lab01", "g_missing")]

LAB01_MAPPINGS = "engine/tensor_parallel/mappings_tp.cpp"
LAB01_LAYERS = "engine/tensor_parallel/layers.cpp"


class ClassError(Exception):
    """A mutant or attack edit that does not apply (its `from` not found exactly once)."""


def load_labs(repo):
    """labs/labs.json's labs: [{"id", "dir", "files": [engine file, ...]}, ...]."""
    with open(repo / "labs" / "labs.json") as f:
        return json.load(f)["labs"]


def apply_edits(files, edits, where):
    """Applies [{"file", "from", "to"}] to {engine file: text} as checkers/CMakeLists.txt does:
    each `from` must occur exactly once in its file. Raises ClassError naming `where` otherwise."""
    out = dict(files)
    for i, e in enumerate(edits):
        if e["file"] not in out:
            raise ClassError(f"{where}: {e['file']} is not a file of the lab")
        n = out[e["file"]].count(e["from"])
        if n != 1:
            raise ClassError(f"{where}: edit {i} must match exactly once in {e['file']} (found {n}): {e['from']!r}")
        out[e["file"]] = out[e["file"]].replace(e["from"], e["to"])
    return out


def source(name, params):
    """sources/<name> with every @KEY@ replaced by params[KEY]."""
    text = (SOURCES / name).read_text()
    for k, v in params.items():
        text = text.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise ClassError(f"{name}: placeholders left unfilled: {sorted(set(left))}")
    return text


# Which other labs' code each lab's scenarios run (their "needs labNN" when that code is unfinished):
# lab01's gpt_step (SP off only: lab02's model), lab02's transformer layer and GPT step, lab03's SP
# layer and GPT step (lab02's layer, embedding and cross entropy; under SP the linear layers run
# lab03's own layers_sp.cpp, so no lab01 code), lab04's overlap layers (the mappings of lab01 and
# lab03), lab05's Llama layer (lab01's linear layers, lab03's SP paths and gradient sum).
RUNS_CODE_OF = {"lab00": set(), "lab01": {"lab02"}, "lab02": {"lab01", "lab03"},
                "lab03": {"lab02"}, "lab04": {"lab01", "lab03"}, "lab05": {"lab01", "lab03"},
                "lab06": set()}


class Builder:
    """Collects the submissions: {name: {engine file: text}} (every lab-owned file) and expected."""

    def __init__(self, repo, params):
        self.repo = repo
        self.params = params
        self.labs = load_labs(repo)
        self.solution = {f: (repo / f).read_text() for lab in self.labs for f in lab["files"]}
        self.lab_of = {f: lab["id"] for lab in self.labs for f in lab["files"]}
        self.subs = {}
        self.expected = {}

    def skeleton(self, lab_id):
        lab = next(l for l in self.labs if l["id"] == lab_id)
        return {f: (self.repo / lab["dir"] / pathlib.Path(f).name).read_text() for f in lab["files"]}

    def add(self, name, files, verdicts, why, **extra):
        """A submission: the solution everywhere except `files` ({engine file: text}); `verdicts`
        ({lab: verdict}) overrides "pass" for the labs it names."""
        assert name not in self.subs, name
        content = dict(self.solution)
        content.update(files)
        self.subs[name] = content
        exp = {lab["id"]: verdicts.get(lab["id"], "pass") for lab in self.labs}
        exp["why"] = why
        exp.update(extra)
        self.expected[name] = exp

    def mutant(self, lab, name):
        spec = json.loads((self.repo / "checkers" / "mutants" / lab / f"{name}.json").read_text())
        lab_files = {f: self.solution[f] for f in self.solution if self.lab_of[f] == lab}
        edited = apply_edits(lab_files, spec["edits"], f"mutant {lab}/{name}")
        # A submission runs its own code for every lab (cumulative, as a learner copy): a lab whose
        # scenarios reach the mutated lab's code may fail too, depending on the path the bug is on.
        verdicts = {other: ["pass", "fail"] for other, needs in RUNS_CODE_OF.items() if lab in needs}
        self.add(f"mutant-{lab}-{name.replace('_', '-')}", edited, {**verdicts, lab: "fail"},
                 f"mutant {lab}/{name}: {spec['description']}")

    def write(self, out):
        subs = out / "SUBMISSIONS"
        for name, files in self.subs.items():
            for f, text in files.items():
                lab = next(l for l in self.labs if l["id"] == self.lab_of[f])
                path = subs / name / pathlib.Path(lab["dir"]).name / pathlib.Path(f).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        (out / "expected.json").write_text(json.dumps(self.expected, indent=1, sort_keys=True) + "\n")


def with_appended(b, file, snippet):
    return {file: b.solution[file] + source(snippet, b.params)}


def add_solution_and_skeleton(b):
    b.add("solution", {}, {}, "the engine's solution of every lab")
    skel = {}
    for lab in b.labs:
        skel.update(b.skeleton(lab["id"]))
    b.add("skeleton", skel, {lab["id"]: "todo" for lab in b.labs}, "the committed skeletons (labs/<dir>/): every lab not started")


def add_build_error(b):
    f = "engine/tensor_parallel/mappings_sp.cpp"
    b.add("does-not-compile", with_appended(b, f, "build_error.cpp.in"), {"lab03": "build_error"},
          "lab03's mappings_sp.cpp has a syntax error (an unfinished return); the other labs are the solution")


def attack_include_solution(b):
    files = {f: source("a_include_solution.cpp.in", dict(b.params, ENGINE_FILE=f, FILE=pathlib.Path(f).name))
             for f in (LAB01_MAPPINGS, LAB01_LAYERS)}
    b.add("attack-include-solution", files, {"lab01": "build_error"},
          "(a) lab01's files #include the engine's solution .cpp by absolute path: the solution must be out of reach of the build")


def attack_exec_solution(b):
    g_missing = json.loads((b.repo / "checkers/mutants/lab01/g_missing.json").read_text())["edits"]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, g_missing, "attack (b)")
    files[LAB01_MAPPINGS] += source("b_exec_solution.cpp.in", b.params)
    b.add("attack-exec-solution", files, {"lab01": "build_error"},
          "(b) a static initializer execv's the engine's solution rank program (tpsp-lab-ranks) with the same arguments; "
          "its own g has no all-reduce (mutant g_missing), so it fails when the solution is out of reach",
          without_symbol_rule={"lab01": "fail"})


def attack_forged_all_reduce(b):
    body = source("c_forged_all_reduce.cpp.in", b.params)
    edits = [{"file": LAB01_MAPPINGS, "from": '#include "engine/tensor_parallel/mappings.h"\n',
              "to": '#include "engine/ops/elementwise.h"\n#include "engine/tensor_parallel/mappings.h"\n'},
             {"file": LAB01_MAPPINGS, "from": "  return _reduce(x, tp, label);\n", "to": body}]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, edits, "attack (c)")
    b.add("attack-forged-all-reduce", files, {"lab01": "build_error"},
          "(c) g's forward is an all_gather + local sum (tp x the bytes) run with the recorder off, and a forged "
          "all_reduce CommRecord is appended: the numbers are right, the communication is not the one recorded",
          without_symbol_rule={"lab01": "fail"})


# The recorder's private fields opened to the lab file (attacks h, i, m): no forbidden symbol needed.
PRIVATE_PUBLIC = {"file": LAB01_MAPPINGS, "from": '#include "engine/tensor_parallel/mappings.h"\n',
                  "to": "#include <mutex>\n#include <string>\n#include <vector>\n#include <map>\n#include <chrono>\n"
                        "#include <memory>\n#include <nlohmann/json.hpp>\n#define private public\n"
                        "#include \"engine/trace/recorder.h\"\n#undef private\n#include \"engine/ops/elementwise.h\"\n"
                        "#include \"engine/tensor_parallel/mappings.h\"\n"}


def attack_private_public(b):
    body = source("h_private_public.cpp.in", b.params)
    edits = [PRIVATE_PUBLIC, {"file": LAB01_MAPPINGS, "from": "  return _reduce(x, tp, label);\n", "to": body}]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, edits, "attack (h)")
    # Refused at build since the rule lists every Recorder member (it calls Recorder::now); built without the
    # rule, the witness relay still fails it.
    b.add("attack-private-public", files, {"lab01": "build_error"},
          "(h) attack (c) with no forbidden symbol: the recorder's private fields written through `#define private "
          "public`; only the grader's witness relay, which carries every byte, sees the all_gather",
          without_symbol_rule={"lab01": "fail"})


def attack_witness_fields(b):
    body = source("i_witness_byte_source.cpp.in", b.params)
    edits = [PRIVATE_PUBLIC, {"file": LAB01_MAPPINGS, "from": "  return _reduce(x, tp, label);\n", "to": body}]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, edits, "attack (i)")
    # Refused at build since the symbol rule is an allow-list; without the rule, the witness judge fails it.
    b.add("attack-witness-fields", files, {"lab01": "build_error"},
          "(i) g's all_gather + local sum really carried and recorded, but its issue time set before the first phase "
          "(filed under 'setup', which the pattern skips) and a real 1-float all_reduce recorded with the whole "
          "tensor's bytes: the judge compares phases and checks tensor_bytes against the shape",
          without_symbol_rule={"lab01": "fail"})


def attack_group_of_one(b):
    block = source("m_size_one_tp.cpp.in", b.params)
    edits = [PRIVATE_PUBLIC,
             {"file": LAB01_MAPPINGS, "from": "Tensor CopyToModelParallelRegion::forward(",
              "to": block + "\nTensor CopyToModelParallelRegion::forward("},
             {"file": LAB01_MAPPINGS, "from": "  return _reduce(dy, tp, label);\n",
              "to": "  return m_cheat_sum(dy, tp, label);\n"},
             {"file": LAB01_MAPPINGS, "from": "  return _reduce(x, tp, label);\n",
              "to": "  return m_cheat_sum(x, tp, label);\n"}]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, edits, "attack (m)")
    # every lab01 run goes through f or g, so none passes: check_verdicts reads that as "contained"
    # Refused at build (Recorder::now, see h); without the rule, the witness judge fails it.
    b.add("attack-group-of-one", files, {"lab01": "build_error"},
          "(m) nothing crosses the tp group: the sum goes through a subgroup 'side', the tp all_reduce is forged, and "
          "groups of ONE rank named 'tp' are made so that a judge keying sizes by name skips every tp call",
          without_symbol_rule={"lab01": ["fail", "contained"]})


def attack_forge_f_g(b):
    files = b.skeleton("lab01")
    files[LAB01_MAPPINGS] += source("d_forge_f_g.cpp.in", b.params)
    b.add("attack-forge-results", files, {"lab01": "build_error"},
          "(d) lab01 is the skeleton, but a static initializer computes lab01/f_g's answers with the checker's input "
          "generator linked into the rank program and the seed from its arguments, writes the dumps and a "
          "result.json with the expected calls, and exits before main(): f_g must not pass",
          scenarios={"lab01/f_g": "fail"})


def attack_read_tp1_dumps(b):
    spec = json.loads((b.repo / "checkers/mutants/lab01/row_bias_before_reduce.json").read_text())
    files = apply_edits({LAB01_LAYERS: b.solution[LAB01_LAYERS]}, spec["edits"], "attack (e)")
    files[LAB01_LAYERS] += source("e_read_tp1_dumps.cpp.in", b.params)
    b.add("attack-read-tp1-dumps", files, {"lab01": "build_error"},
          "(e) RowParallelLinear adds its bias before the reduction (right at tp = 1 only); at exit every tp > 1 "
          "dump is replaced by the tp = 1 run's dump of the same scenario, found in the checker's scratch "
          "directories and sliced to the rank's part",
          without_symbol_rule={"lab01": "fail"})


def attack_claim_placement(b):
    edits = [{"file": LAB01_LAYERS, "from": "  if (opt_.gather_output)\n    y = gather_from",
              "to": "  y = gather_from"}]
    files = apply_edits({LAB01_LAYERS: b.solution[LAB01_LAYERS]}, edits, "attack (f)")
    files[LAB01_LAYERS] += source("f_claim_placement.cpp.in", b.params)
    b.add("attack-claim-placement", files, {"lab01": "build_error"},
          "(f) ColumnParallelLinear always all-gathers Y (the whole [s, b, out] on every rank instead of its "
          "shard); at exit each rank's result.json declares every output replicated (placement / split_dim keys)",
          without_symbol_rule={"lab01": "fail"})


def attack_leak_seed(b):
    edits = [{"file": LAB01_MAPPINGS, "from": "namespace tpsp::tensor_parallel {\n\n",
              "to": "namespace tpsp::tensor_parallel {\n\n[[noreturn]] void leak_through_the_report();\n\n"},
             {"file": LAB01_MAPPINGS,
              "from": "  // BEGIN SOLUTION\n  return x;\n  // END SOLUTION\n}\nTensor CopyToModelParallelRegion::backward",
              "to": "  // BEGIN SOLUTION\n  leak_through_the_report();\n  // END SOLUTION\n}\n"
                    "Tensor CopyToModelParallelRegion::backward"}]
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, edits, "attack (g)")
    files[LAB01_MAPPINGS] += source("g_leak_seed.cpp.in", b.params)
    b.add("attack-leak-seed", files, {"lab01": "build_error"},
          "(g) a static initializer looks for the grading seed in its arguments, its environment and its parent's "
          "arguments, prints what it finds, and f's forward throws it into the report: the grading seed must not "
          "appear in RESULTS/attack-leak-seed/ (or the task's logs)",
          must_not_print_seed=True,
          without_symbol_rule={"lab01": "fail"})


def attack_outside_the_lab_functions(b):
    """The issue's three attacks (t, u, v) on grading trust, each on top of lab01's g_missing so that only
    the attack could make it pass: code before main() reading argv, the steady clock replaced, result.json
    rewritten at exit through a glibc alias. The symbol rule refuses each at build; built without it they
    fail (the attack bodies here only reach the point the rule refuses)."""
    g_missing = json.loads((b.repo / "checkers/mutants/lab01/g_missing.json").read_text())["edits"]
    for name, snippet, why in [
        ("attack-constructor-reads-argv", "t_constructor_reads_argv.cpp.in",
         "(t) a constructor receives argv before main() and keeps the grading seed (with which every rank can "
         "rebuild every rank's inputs): refused at build, code outside the lab's functions"),
        ("attack-clock-replaced", "u_clock_replaced.cpp.in",
         "(u) the lab object defines std::chrono::steady_clock::now(), the clock of the recorder and of every "
         "compute span: refused at build, it replaces a library's function"),
        ("attack-exit-rewrites-result", "v_exit_rewrites_result.cpp.in",
         "(v) a constructor records --out and an atexit handler reopens result.json through __open: refused at "
         "build (a constructor, atexit, and a function outside the allow-list)"),
    ]:
        files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, g_missing, name)
        files[LAB01_MAPPINGS] += source(snippet, b.params)
        b.add(name, files, {"lab01": "build_error"}, why, without_symbol_rule={"lab01": "fail"})


def attack_rebuild_inputs(b):
    """(w) The issue's attack 1 whole: g's forward reads the rank program's command line, rebuilds every
    rank's partial from the seed it finds there with the engine's own generator, returns their sum and makes
    an honest all-reduce of zeros for the witness (checkers/mutants/lab01/g_rebuilds_partials_from_the_seed;
    its control, ctest checkers/private_inputs_control_seed_holding_ranks, passes f_g where the ranks hold
    the seed). Refused at build (it reads a file); without the rule the ranks hold no seed of the inputs, only
    the models', and f_g fails."""
    spec = json.loads((b.repo / "checkers/mutants/lab01/g_rebuilds_partials_from_the_seed.json").read_text())
    files = apply_edits({LAB01_MAPPINGS: b.solution[LAB01_MAPPINGS]}, spec["edits"], "attack (w)")
    b.add("attack-rebuild-inputs", files, {"lab01": "build_error"},
          "(w) every rank's partial rebuilt from the seed on the command line, an all-reduce of zeros for the "
          "witness: refused at build (a file read); without the rule no rank holds the inputs' seed (the relay "
          "gives each rank its own part) and f_g fails",
          without_symbol_rule={"lab01": "fail", "scenarios": {"lab01/f_g": "fail"}})


FAULTS = {
    "fault-fork-bomb": ("lab01", LAB01_MAPPINGS, "fault_fork_bomb.cpp.in",
                        "a fork bomb in a static initializer of lab01 (@FORK_LIMIT@ forks across the ranks, then the solution)"),
    "fault-disk-fill": ("lab00", "engine/comm/ring_collectives.cpp", "fault_disk_fill.cpp.in",
                        "lab00's rank program writes @DISK_BYTES@ bytes of output per rank before main()"),
    "fault-memory-hog": ("lab03", "engine/model/finalize_grads.cpp", "fault_memory_hog.cpp.in",
                         "lab03's ranks allocate and touch @MEM_BYTES@ bytes each before main()"),
    "fault-hang": ("lab02", "engine/tensor_parallel/random.cpp", "fault_hang.cpp.in",
                   "lab02's rank program sleeps forever before main()"),
}


def add_fault(b, name):
    lab, f, snippet, why = FAULTS[name]
    for k, v in b.params.items():
        why = why.replace(f"@{k}@", str(v))
    # Before main(): every rank program of the submission runs it, so every lab's task is contained (a
    # submission is built into one rank program, its own code for every lab, as a learner copy is).
    # The output flood is contained by the launcher's cut (1 MiB per rank): its runs may then pass; what
    # must hold is that its results stay small.
    flood = name == "fault-disk-fill"
    verdict = ["pass", "fail", "contained"] if flood else "contained"
    extra = {"max_result_bytes": 64 << 20} if flood else {}
    # The symbol rule refuses a static initializer (code outside the lab's functions), so the fault's lab is
    # built from its skeleton and the others pass; the limits are what the fault tests, so it is graded
    # again without the rule (test_grade_class.sh's layers run), where every lab's runs meet it.
    b.add(name, with_appended(b, f, snippet), {lab: "build_error"},
          why + "; before main(), so every lab's runs meet it once the symbol rule is off; without a limit it runs "
          "to the end and the solution passes, which shows the missing limit",
          without_symbol_rule={other["id"]: verdict for other in b.labs}, **extra)


def build_class(repo, size, bounded):
    params = dict(FAULT_SIZES[bounded], REPO_ROOT=str(repo))
    b = Builder(repo, params)
    add_solution_and_skeleton(b)
    add_build_error(b)
    for lab, name in (MUTANTS_FULL if size == "full" else MUTANTS_SMALL):
        b.mutant(lab, name)
    attack_include_solution(b)
    attack_exec_solution(b)
    attack_forged_all_reduce(b)
    attack_private_public(b)
    attack_witness_fields(b)
    attack_group_of_one(b)
    attack_leak_seed(b)
    attack_forge_f_g(b)
    attack_read_tp1_dumps(b)
    attack_claim_placement(b)
    attack_outside_the_lab_functions(b)
    attack_rebuild_inputs(b)
    # small (CI): every attack, and the faults that end fast (the hang costs its task's time limit, the
    # output flood a few seconds per run)
    for name in FAULTS if size == "full" else ("fault-memory-hog", "fault-fork-bomb"):
        add_fault(b, name)
    return b


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="directory to write SUBMISSIONS/ and expected.json into (must not hold SUBMISSIONS/)")
    p.add_argument("--size", choices=["small", "full"], default="full",
                   help="small: one submission per category (CI); full: the 30-submission class")
    p.add_argument("--repo", default=str(DEFAULT_REPO), help="the tpsp checkout (default: the one holding this script)")
    p.add_argument("--bounded", action="store_true",
                   help="fault sizes a machine without a sandbox survives (200 forks, 16 MiB file, 64 MiB memory)")
    a = p.parse_args(argv)
    repo = pathlib.Path(a.repo).resolve()
    out = pathlib.Path(a.out)
    if (out / "SUBMISSIONS").exists():
        print(f"make_class.py: {out / 'SUBMISSIONS'} exists; give an empty or new directory", file=sys.stderr)
        return 2
    try:
        b = build_class(repo, a.size, a.bounded)
    except (ClassError, OSError, KeyError) as e:
        print(f"make_class.py: {e}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    b.write(out)
    print(f"make_class.py: {len(b.subs)} submissions in {out / 'SUBMISSIONS'}, verdicts in {out / 'expected.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
