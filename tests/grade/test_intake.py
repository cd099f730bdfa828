"""The attacks on ./grade's intake and build rules, as tests (ctest grade/intake; /usr/bin/python3).

Each case is a way a submission tried to get more than its own files graded, or to stop the class
(an attacker's findings against tools/grade/submissions.py and build.py): every one must be refused or
contained. Run from tests/grade/ (ctest's working directory).
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools/grade"))
import build  # noqa: E402
import submissions  # noqa: E402

REGISTRY = json.loads((REPO / "labs/labs.json").read_text())
LAYERS = "lab01_tp_layers/layers.cpp"


class IntakeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.subs, self.staging = self.tmp / "S", self.tmp / "staging"
        self.subs.mkdir()
        self.staging.mkdir()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def collect(self, name):
        return submissions.collect(self.subs / name, REGISTRY, self.staging)

    def test_only_registry_files_are_taken_from_a_folder(self):
        (self.subs / "alice/labs/lab01_tp_layers").mkdir(parents=True)
        (self.subs / "alice/labs/lab01_tp_layers/layers.cpp").write_text("// alice")
        (self.subs / "alice/labs/lab01_tp_layers/notes.cpp").write_text("// not a lab file")
        sub = self.collect("alice")
        self.assertEqual(sub.files, [LAYERS])
        self.assertEqual((sub.sources / LAYERS).read_text(), "// alice")

    def test_a_symlinked_lab_folder_is_not_followed(self):
        # the attack: lab01_tp_layers -> the engine's solution folder (graded 18/18 before the fix)
        (self.subs / "mallory").mkdir()
        (self.subs / "mallory/lab01_tp_layers").symlink_to(REPO / "engine/tensor_parallel")
        self.assertEqual(self.collect("mallory").files, [])

    def test_a_symlinked_file_or_submission_is_refused(self):
        (self.subs / "eve/lab01_tp_layers").mkdir(parents=True)
        (self.subs / "eve/lab01_tp_layers/layers.cpp").symlink_to(REPO / "engine/tensor_parallel/layers.cpp")
        self.assertEqual(self.collect("eve").files, [])
        (self.subs / "trudy").symlink_to(self.subs / "eve")
        with self.assertRaisesRegex(submissions.SubmissionError, "symbolic link"):
            self.collect("trudy")

    def test_reserved_and_malformed_names_are_refused(self):
        for name in ("class.csv", "scores.png", "scenarios.png", "a b"):
            (self.subs / name).mkdir()
            with self.assertRaises(submissions.SubmissionError, msg=name):
                self.collect(name)

    def test_an_archive_bomb_of_other_files_is_skipped_unread(self):
        # 400 members of 1 MiB of zeros, none a lab file: filled the disk before the fix
        path = self.subs / "bomb.tar.gz"
        with tarfile.open(path, "w:gz") as t:
            zeros = b"\0" * (1 << 20)
            for i in range(400):
                info = tarfile.TarInfo(f"junk/{i}.bin")
                info.size = len(zeros)
                t.addfile(info, io.BytesIO(zeros))
            info = tarfile.TarInfo(f"top/{LAYERS}")
            info.size = 5
            t.addfile(info, io.BytesIO(b"// ok"))
        sub = self.collect("bomb.tar.gz")
        self.assertEqual(sub.files, [LAYERS])
        self.assertLess(sum(f.stat().st_size for f in self.tmp.rglob("*") if f.is_file()) - path.stat().st_size, 1 << 16)

    def test_too_many_entries_or_a_huge_lab_file_is_refused(self):
        path = self.subs / "many.zip"
        with zipfile.ZipFile(path, "w") as z:
            for i in range(submissions.MAX_MEMBERS + 1):
                z.writestr(f"x/{i}", b"")
        with self.assertRaisesRegex(submissions.SubmissionError, "entries"):
            self.collect("many.zip")
        path = self.subs / "huge.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(LAYERS, b"/" * (submissions.MAX_FILE_BYTES + 1))
        with self.assertRaisesRegex(submissions.SubmissionError, "over"):
            self.collect("huge.zip")

    def test_a_link_member_or_a_corrupt_archive_is_reported_not_raised_through(self):
        path = self.subs / "link.tar"
        with tarfile.open(path, "w") as t:
            info = tarfile.TarInfo(LAYERS)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
            t.addfile(info)
        with self.assertRaisesRegex(submissions.SubmissionError, "plain file"):
            self.collect("link.tar")
        good = self.subs / "ok.zip"
        with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(LAYERS, b"int x = 1;\n" * 200)
        data = bytearray(good.read_bytes())
        at = data.index(b"PK\x01\x02") // 2  # inside the deflated member
        data[at:at + 8] = b"\xff" * 8
        (self.subs / "corrupt.zip").write_bytes(bytes(data))
        with self.assertRaises(submissions.SubmissionError):
            self.collect("corrupt.zip")
        self.assertFalse(list(self.staging.glob(".unpack-*")), "the unpack folder is removed")


class SymbolRuleTest(unittest.TestCase):
    """build.check_object on small objects: what a dishonest lab file needs is refused by name."""

    def obj(self, code):
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        (tmp / "f.cpp").write_text(code)
        subprocess.run(["c++", "-std=c++20", "-O1", "-I", str(REPO), "-c", "f.cpp", "-o", "f.o"], cwd=tmp, check=True)
        return build.check_object(tmp / "f.o", Path("/grade/src/lab01_tp_layers/layers.cpp"))

    def test_a_plain_computation_passes(self):
        self.assertEqual(self.obj("int twice(int x) { return 2 * x; }\n"), "")

    def test_each_route_out_is_refused(self):
        cases = {
            "writes the communication record": '#include "engine/trace/recorder.h"\n'
                                               "void f(tpsp::trace::Recorder& r) { r.set_enabled(false); }\n",
            "opens files": "#include <fstream>\nint f() { std::ifstream in(\"/x\"); return in.good(); }\n",
            "reads files through the engine's data loader":
                '#include "engine/train/data.h"\n'
                'long f() { tpsp::train::ByteDataset d("/proc/self/cmdline"); return long(d.size()); }\n',
            "starts or controls processes": "#include <unistd.h>\nint f() { return fork(); }\n",
            "reaches outside": "#include <cstdlib>\nconst char* f() { return std::getenv(\"X\"); }\n",
            "makes raw system calls": "long f() { long r; asm volatile(\"syscall\" : \"=a\"(r) : \"a\"(39)); return r; }\n",
        }
        for why, code in cases.items():
            self.assertIn(why, self.obj(code), why)


if __name__ == "__main__":
    unittest.main()
