"""Tests of tools/grade/report.py on real tpsp-check output (tests/grade/fixtures/, see its README.md).

A temporary RESULTS/ holds a class of seven submissions, labs lab01 and lab02 (11 and 14 scenarios,
so 25 points; the counts come from tpsp-check --list, fixtures/check_list.txt):
  alice  both labs the engine's solution                     25 = 11 + 14
  bob    lab01 the g_missing mutant, lab02 the solution      19 = 5 + 14 (the mutant passes every layout
         only of the four column_linear* scenarios and row_linear_refuses_wrong_in: g sits after the
         row-parallel linear's product, and the refusals come before it)
  carol  both labs the committed skeletons                    1 = 0 + 1 (lab02's transformer_layer_checks_seq
         holds its check in the skeleton; every other run stops at a TODO)
  dave   lab01 build failed, lab02 the solution              14
  erin   lab01 the solution, lab02 stopped by the time limit 11
  frank  lab01 the solution, lab02's rank program not built  11
  gina   lab01 JSON truncated (unreadable), lab02 never ran   0
Run: /usr/bin/python3 -m unittest tests/grade/test_report.py (ctest grade/report).
"""
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(HERE, "fixtures")
REPORT = os.path.join(REPO, "tools", "grade", "report.py")
sys.path.insert(0, os.path.dirname(REPORT))
import report  # noqa: E402

LABS = ["lab01", "lab02"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
# the keys it documents, and the values its enumerations allow.
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
             "tags", "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}

# (fixture or None, status.json fields or None) per submission and lab.
DONE = {"stage": "done", "ok": True, "message": "", "seconds": 12.5}
CLASS = {
    "alice": {"lab01": ("lab01.solution.json", DONE), "lab02": ("lab02.solution.json", DONE)},
    "bob": {"lab01": ("lab01.g_missing.json", DONE), "lab02": ("lab02.solution.json", DONE)},
    "carol": {"lab01": ("lab01.skeleton.json", DONE), "lab02": ("lab02.skeleton.json", DONE)},
    "dave": {"lab01": (None, {"stage": "build", "ok": False, "seconds": 3.0,
                              "message": "layers.cpp:41:5: error: 'Tensro' was not declared in this scope"}),
             "lab02": ("lab02.solution.json", DONE)},
    "erin": {"lab01": ("lab01.solution.json", DONE),
             "lab02": (None, {"stage": "grade", "ok": False, "seconds": 600.0,
                              "message": "time limit of 600 s hit: tpsp-check killed"})},
    "frank": {"lab01": ("lab01.solution.json", DONE), "lab02": ("lab02.not_built.json", DONE)},
    "gina": {"lab01": ("TRUNCATED", DONE), "lab02": (None, None)},
}
NAMES = list(CLASS)
WANT_SCORES = {"alice": 25, "bob": 19, "carol": 1, "dave": 14, "erin": 11, "frank": 11, "gina": 0}
WANT_CSV = [
    ["name", "score", "max_score", "lab01", "lab02", "status"],
    ["alice", "25", "25", "11", "14", "ok"],
    ["bob", "19", "25", "5", "14", "ok"],
    ["carol", "1", "25", "0", "1", "ok"],
    ["dave", "14", "25", "0", "14", "lab01 build failed"],
    ["erin", "11", "25", "11", "0", "lab02 limit hit"],
    ["frank", "11", "25", "11", "0", "lab02 not built"],
    ["gina", "0", "25", "0", "0", "lab01 no result; lab02 not run"],
]
BOB_PASSED = ["lab01/column_linear", "lab01/column_linear_gather_output", "lab01/column_linear_skip_bias_add",
              "lab01/column_linear_frozen_weight", "lab01/row_linear_refuses_wrong_in"] + [s for s in report.parse_scenario_list(
                  open(os.path.join(FIXTURES, "check_list.txt"), encoding="utf-8").read())["lab02"]]


def make_results(root):
    """Writes the class above as root/<name>/<lab>.json and <lab>.status.json; returns root."""
    for name, labs in CLASS.items():
        os.makedirs(os.path.join(root, name))
        for lab, (fixture, status) in labs.items():
            base = os.path.join(root, name, lab)
            if fixture == "TRUNCATED":
                with open(os.path.join(FIXTURES, "lab01.solution.json"), encoding="utf-8") as f:
                    text = f.read()
                with open(base + ".json", "w", encoding="utf-8") as f:
                    f.write(text[: len(text) // 2])
            elif fixture:
                shutil.copy(os.path.join(FIXTURES, fixture), base + ".json")
            if status:
                with open(base + ".status.json", "w", encoding="utf-8") as f:
                    json.dump(dict(status, submission=name, lab=lab, limits={"seconds": 600}), f)
    return root


def check_gradescope_shape(test, results):
    """Asserts `results` is a Gradescope results.json: documented keys only, their types and values."""
    test.assertLessEqual(set(results), TOP_KEYS)
    test.assertIsInstance(results["score"], float)
    test.assertIsInstance(results["execution_time"], int)
    test.assertIsInstance(results["output"], str)
    test.assertIn(results.get("output_format", "text"), FORMATS)
    test.assertIsInstance(results["tests"], list)
    for t in results["tests"]:
        test.assertLessEqual(set(t), TEST_KEYS)
        for key, kind in [("name", str), ("number", str), ("output", str), ("score", float), ("max_score", float)]:
            test.assertIsInstance(t[key], kind, f"{key} of {t}")
        test.assertIn(t["visibility"], VISIBILITY)
        test.assertIn(t["output_format"], FORMATS)
        test.assertEqual(t["status"], "passed" if t["score"] == t["max_score"] else "failed")
        test.assertTrue(0 <= t["score"] <= t["max_score"])
        test.assertLessEqual(len(t["output"]), report.OUTPUT_CHARS)
    # Equal up to the reports' rounding (shares of a lab's points are multiples of 1/10000).
    test.assertAlmostEqual(results["score"], sum(t["score"] for t in results["tests"]), places=6)


class ClassReport(unittest.TestCase):
    """write_reports on the seven-submission class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tpsp-report-test-")
        cls.results = make_results(os.path.join(cls.tmp, "RESULTS"))
        cls.summary = report.write_reports(cls.results, LABS, NAMES)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def results_json(self, name):
        with open(os.path.join(self.results, name, "results.json"), encoding="utf-8") as f:
            return json.load(f)

    def test_scores_and_summary(self):
        self.assertEqual(self.summary["scores"], WANT_SCORES)
        self.assertEqual(self.summary["max_score"], 25)
        self.assertEqual({lab: len(s) for lab, s in self.summary["scenarios"].items()}, {"lab01": 11, "lab02": 14})

    def test_scenarios_match_tpsp_check_list(self):
        with open(os.path.join(FIXTURES, "check_list.txt"), encoding="utf-8") as f:
            listed = report.parse_scenario_list(f.read())
        for lab in LABS:
            self.assertEqual(self.summary["scenarios"][lab], listed[lab])

    def test_class_csv_cells(self):
        with open(self.summary["csv"], encoding="utf-8", newline="") as f:
            self.assertEqual(list(csv.reader(f)), WANT_CSV)

    def test_every_results_json_has_gradescope_shape_and_all_tests(self):
        for name in NAMES:
            r = self.results_json(name)
            check_gradescope_shape(self, r)
            self.assertEqual(len(r["tests"]), 25, name)
            self.assertEqual(r["score"], WANT_SCORES[name])

    def test_mutant_scores_only_scenarios_passed_in_every_layout(self):
        r = self.results_json("bob")
        self.assertEqual(sorted(t["name"] for t in r["tests"] if t["score"] == 1.0), sorted(BOB_PASSED))
        mlp = next(t for t in r["tests"] if t["name"] == "lab01/mlp")
        self.assertIn("1 of 3 layouts passed", mlp["output"])  # lab01's MLP runs without SP only
        self.assertIn("passed: tp=1\n", mlp["output"])  # g_missing is right where g is the identity
        self.assertIn("FAIL tp=2:", mlp["output"])
        self.assertIn("FAIL dp=2 tp=2:", mlp["output"])
        self.assertIn("one rank's partial sum", mlp["output"])  # g_missing's expected signature

    def test_skeleton_says_not_implemented(self):
        r = self.results_json("carol")
        f_g = next(t for t in r["tests"] if t["name"] == "lab01/f_g")
        self.assertIn("not implemented yet in 3 layouts: not implemented yet: lab01 f forward", f_g["output"])
        seq = next(t for t in r["tests"] if t["name"] == "lab02/transformer_layer_checks_seq")
        self.assertEqual(seq["score"], 1.0)

    def test_build_failure_and_limit_are_zero_with_reason(self):
        for name, lab, words in [("dave", "lab01", ["build failed", "'Tensro' was not declared"]),
                                 ("erin", "lab02", ["limit hit", "time limit of 600 s hit"]),
                                 ("frank", "lab02", ["not built", "rank program was not built"]),
                                 ("gina", "lab01", ["no result", "lab01.json is unreadable"]),
                                 ("gina", "lab02", ["not run", "the task did not run"])]:
            r = self.results_json(name)
            tests = [t for t in r["tests"] if t["name"].startswith(lab + "/")]
            self.assertEqual(len(tests), 11 if lab == "lab01" else 14)
            for t in tests:
                self.assertEqual(t["score"], 0.0)
                for w in words:
                    self.assertIn(w, t["output"], f"{name} {lab}")
            self.assertIn(f"{lab}: 0/{len(tests)} scenarios — not graded ({words[0]})", r["output"])

    def test_execution_time_adds_the_tasks_seconds(self):
        self.assertEqual(self.results_json("alice")["execution_time"], 25)  # 12.5 + 12.5
        self.assertEqual(self.results_json("erin")["execution_time"], 612)  # 12.5 + 600

    def test_figures_are_png(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("no matplotlib in this python")
        for png in ["scores.png", "scenarios.png"]:
            path = os.path.join(self.results, png)
            self.assertIn(path, self.summary["plots"])
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual(data[:8], PNG_MAGIC)
            self.assertGreater(len(data), 10000, png)


class Pieces(unittest.TestCase):
    """The scoring of one scenario and the argument checks."""

    def run_of(self, tp, passed, problems=(), **kw):
        return dict({"scenario": "lab01/mlp", "tp": tp, "dp": 1, "sp": False, "passed": passed, "todo": False,
                     "needs_other_lab": False, "problems": list(problems)}, **kw)

    def test_all_or_nothing(self):
        self.assertEqual(report.score_scenario("lab01/mlp", [self.run_of(1, True), self.run_of(2, True)])[:2],
                         (1, report.PASS))
        score, cell, text = report.score_scenario("lab01/mlp", [self.run_of(1, True), self.run_of(2, False, ["x"])])
        self.assertEqual((score, cell), (0, report.FAIL))
        self.assertEqual(text, "1 of 2 layouts passed; the scenario scores only when all pass.\n"
                               "passed: tp=1\nFAIL tp=2:\n  x")
        self.assertEqual(report.score_scenario("lab01/mlp", [])[:2], (0, report.NOT_GRADED))

    def test_many_failed_layouts_are_listed_after_four(self):
        runs = [self.run_of(tp, False, ["p" * 5000], sp=sp) for tp in (1, 2, 3) for sp in (False, True)]
        _, _, text = report.score_scenario("lab01/mlp", runs)
        self.assertIn("… and 2 more failed layouts: tp=3, tp=3 sp", text)
        self.assertLessEqual(len(text), report.OUTPUT_CHARS)
        self.assertIn("more characters cut]", text)

    def test_needs_other_lab_names_it(self):
        # The problem text tpsp-check writes (checkers/grader/grade.cpp) for a run that reached another lab.
        run = self.run_of(2, False, ["needs lab02 TransformerLayer forward (labs/lab02_transformer_block/"
                                     "transformer_layer.cpp:87), not implemented in your copy yet"],
                          needs_other_lab=True)
        score, cell, text = report.score_scenario("lab01/mlp", [run])
        self.assertEqual((score, cell), (0, report.NOT_GRADED))
        self.assertIn("needs lab02's code, not implemented in this submission (1 layout not graded)", text)

    def test_a_task_graded_with_a_driver_note_or_no_status_keeps_its_score(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "ann"))
            for lab in LABS:
                shutil.copy(os.path.join(FIXTURES, f"{lab}.solution.json"), os.path.join(root, "ann", lab + ".json"))
            with open(os.path.join(root, "ann", "lab01.status.json"), "w", encoding="utf-8") as f:
                json.dump({"stage": "done", "ok": False, "message": "tpsp-check exited 1", "seconds": float("nan")}, f)
            task = report.load_task(root, "ann", "lab01")
            self.assertEqual((task["state"], task["message"], task["seconds"]),
                             (report.OK, "the driver noted: tpsp-check exited 1", 0.0))
            self.assertEqual(len(task["runs"]), 32)
            task = report.load_task(root, "ann", "lab02")
            self.assertEqual((task["state"], task["message"]), (report.OK, "the driver's lab02.status.json is absent"))

    def test_bad_names_and_labs_are_refused(self):
        for bad in ["../x", "a b", "..", ""]:
            with self.assertRaisesRegex(ValueError, "does not match"):
                report.write_reports("/nonexistent", ["lab01"], [bad])
        with self.assertRaisesRegex(ValueError, "'lab1' is not a lab id"):
            report.write_reports("/nonexistent", ["lab1"], ["alice"])
        with self.assertRaisesRegex(ValueError, "no labs"):
            report.write_reports("/nonexistent", [], ["alice"])


# The weights of the Weights tests: lab01's 22 points shared by its 11 scenarios (2 each); lab02 one point
# per scenario but gpt_step 3 (16 in all).
WEIGHTS = {"lab01": {"points": 22}, "lab02": {"scenarios": {"gpt_step": 3}}}
WANT_WEIGHTED_CSV = [
    ["name", "score", "max_score", "lab01", "lab02", "status"],
    ["alice", "38", "38", "22", "16", "ok"],
    ["bob", "26", "38", "10", "16", "ok"],
    ["carol", "1", "38", "0", "1", "ok"],
    ["dave", "16", "38", "0", "16", "lab01 build failed"],
    ["erin", "22", "38", "22", "0", "lab02 limit hit"],
    ["frank", "22", "38", "22", "0", "lab02 not built"],
    ["gina", "0", "38", "0", "0", "lab01 no result; lab02 not run"],
]


class Weights(unittest.TestCase):
    """A weights file changes each scenario's points as docs/grading.md says; bad files are refused."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tpsp-report-weights-")
        self.results = make_results(os.path.join(self.tmp, "RESULTS"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_lab_points_and_scenario_weights(self):
        summary = report.write_reports(self.results, LABS, NAMES, weights=WEIGHTS)
        self.assertEqual(summary["max_score"], 38)
        with open(os.path.join(self.results, "class.csv"), encoding="utf-8", newline="") as f:
            self.assertEqual(list(csv.reader(f)), WANT_WEIGHTED_CSV)
        with open(os.path.join(self.results, "bob", "results.json"), encoding="utf-8") as f:
            bob = json.load(f)
        check_gradescope_shape(self, bob)
        worth = {t["name"]: t["max_score"] for t in bob["tests"]}
        self.assertEqual(worth["lab01/column_linear"], 2.0)
        self.assertEqual(worth["lab02/gpt_step"], 3.0)
        self.assertEqual(worth["lab02/vocab_embedding"], 1.0)
        self.assertEqual(bob["score"], 26.0)
        self.assertTrue(bob["output"].startswith("26/38 points: 19 of 25 scenarios passed in every layout"))
        self.assertIn("lab01: 10/22 points (5 of 11 scenarios)", bob["output"])

    def test_fractional_points(self):
        summary = report.write_reports(self.results, LABS, NAMES, weights={"lab01": {"points": 10}})
        self.assertAlmostEqual(summary["scores"]["bob"], 5 * 10 / 11 + 14, places=4)  # rounded to 4 decimals
        with open(os.path.join(self.results, "class.csv"), encoding="utf-8", newline="") as f:
            rows = {r[0]: r for r in csv.reader(f)}
        self.assertEqual(rows["bob"][1:4], ["18.5455", "24", "4.5455"])
        self.assertEqual(rows["alice"][1:4], ["24", "24", "10"])  # the shares add up to the lab's points
        for name in ("alice", "erin"):
            with open(os.path.join(self.results, name, "results.json"), encoding="utf-8") as f:
                r = json.load(f)
            check_gradescope_shape(self, r)
            self.assertEqual(r["extra_data"]["labs"]["lab01"], 10.0)  # exactly, no float noise
            self.assertEqual(r["extra_data"]["max_score"], 24.0)
            for t in r["tests"]:  # every share is a multiple of 1/10000
                self.assertEqual(round(t["max_score"] * 10000), t["max_score"] * 10000)

    def test_labs_not_graded_now_are_skipped(self):
        summary = report.write_reports(self.results, LABS, NAMES, weights={"lab05": {"points": 40}})
        self.assertEqual(summary["max_score"], 25)

    def test_bad_weights_name_the_rule(self):
        for weights, want in [
            ({"lab3": {"points": 5}}, "'lab3' is not a lab of this grader (labNN)"),
            ({"lab02": {"scenarios": {"gpt_stepp": 2}}}, "lab02 has no scenario 'gpt_stepp'"),
            ({"lab02": {"scenarios": {"gpt_step": -1}}}, "lab02 scenario gpt_step must be a positive number up to 1e+09, got -1"),
            ({"lab01": {"points": True}}, "lab01 points must be a positive number up to 1e+09, got True"),
            ({"lab01": {"points": 1e308}}, "lab01 points must be a positive number up to 1e+09"),
            ({"lab01": {"points": 10 ** 400}}, "lab01 points must be a positive number up to 1e+09"),
            ({"lab01": {"pts": 5}}, "lab01 must be an object with \"points\" and/or \"scenarios\""),
            ({"lab01": {"scenarios": [["mlp", 2]]}}, "lab01 \"scenarios\" must be an object"),
            ({"lab01": {"scenarios": None}}, "lab01 \"scenarios\" must be an object"),
            ({"lab01": {"scenarios": {"mlp": 2, "lab01/mlp": 7}}}, "lab01 names scenario 'mlp' twice"),
            ({"lab01": {"points": 1, "scenarios": {"f_g": 1e-9}}}, "lab01 scenario 'f_g' would be worth"),
            ([1, 2], "the file must hold a JSON object"),
        ]:
            with self.subTest(want=want), self.assertRaises(ValueError) as e:
                report.write_reports(self.results, LABS, NAMES, weights=weights)
            self.assertIn(want, str(e.exception))

    def test_bad_files(self):
        for text, want in [("null", "must hold a JSON object"), ('{"lab01": {"points": 2, "points": 1}}',
                                                                   "names 'points' twice in one object"),
                           ("[" * 100000, "cannot read"), ("{not json", "cannot read")]:
            path = os.path.join(self.tmp, "w.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            with self.subTest(want=want), self.assertRaises(ValueError) as e:
                report.load_weights(path)
            self.assertIn(want, str(e.exception))

    def test_cli_weights_file(self):
        path = os.path.join(self.tmp, "weights.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(WEIGHTS, f)
        run = subprocess.run([sys.executable, "-B", REPORT, self.results, "--labs", "lab01,lab02", "--weights", path],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("max score 38", run.stdout)
        with open(path, "w", encoding="utf-8") as f:
            f.write("{not json")
        run = subprocess.run([sys.executable, "-B", REPORT, self.results, "--labs", "lab01,lab02", "--weights", path],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 2)
        self.assertIn("weights: cannot read", run.stderr)


class CommandLine(unittest.TestCase):
    """report.py RESULTS --labs ...: the same files; without matplotlib a note and no figures."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tpsp-report-cli-")
        self.results = make_results(os.path.join(self.tmp, "RESULTS"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_report(self, *args, env=None):
        return subprocess.run([sys.executable, "-B", REPORT, self.results, *args], capture_output=True,
                              text=True, env=env, timeout=300)

    def test_cli_writes_the_csv(self):
        run = self.run_report("--labs", "lab01,lab02", "--scenarios", os.path.join(FIXTURES, "check_list.txt"))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("7 submissions, 2 labs (lab01, lab02), max score 25", run.stdout)
        with open(os.path.join(self.results, "class.csv"), encoding="utf-8", newline="") as f:
            self.assertEqual(list(csv.reader(f)), WANT_CSV)

    def test_without_matplotlib_plots_are_skipped_with_a_note(self):
        blocker = os.path.join(self.tmp, "block")
        os.makedirs(blocker)
        with open(os.path.join(blocker, "matplotlib.py"), "w", encoding="utf-8") as f:
            f.write("raise ImportError('matplotlib blocked by the test')\n")
        env = dict(os.environ, PYTHONPATH=blocker)
        run = self.run_report("--labs", "lab01,lab02", env=env)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("plots skipped:", run.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.results, "class.csv")))
        self.assertFalse(os.path.exists(os.path.join(self.results, "scores.png")))

    def test_bad_lab_is_a_usage_error(self):
        run = self.run_report("--labs", "lab1")
        self.assertEqual(run.returncode, 2)
        self.assertIn("'lab1' is not a lab id", run.stderr)


if __name__ == "__main__":
    unittest.main()
