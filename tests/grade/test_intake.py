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
import symbols  # noqa: E402
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

    def test_bare_files_at_the_top_are_taken_but_never_through_a_link(self):
        # Gradescope's upload of single files leaves them bare; a lab folder's copy wins over a bare one.
        (self.subs / "bob").mkdir()
        (self.subs / "bob/layers.cpp").write_text("// bob")
        (self.subs / "bob/mappings_tp.cpp").symlink_to(REPO / "engine/tensor_parallel/mappings_tp.cpp")
        sub = self.collect("bob")
        self.assertEqual(sub.files, [LAYERS])
        self.assertEqual((sub.sources / LAYERS).read_text(), "// bob")
        (self.subs / "bob/lab01_tp_layers").mkdir()
        (self.subs / "bob/lab01_tp_layers/layers.cpp").write_text("// bob's folder")
        self.assertEqual((self.collect("bob").sources / LAYERS).read_text(), "// bob's folder")

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


class CompileErrorTest(unittest.TestCase):
    """A compile error shows the student only the submission's own files (and public headers): an #include
    of a host file readable in the build's root must not print that file into build.log's excerpt."""

    def test_a_host_file_quoted_by_the_compiler_is_left_out(self):
        lines = ["/grade/src/lab01_tp_layers/layers.cpp:3:10: error: 'foo' was not declared",
                 "    3 |   foo();", "      |   ^~~",
                 "In file included from /grade/src/lab01_tp_layers/layers.cpp:1:",
                 "/etc/passwd:1:5: error: expected unqualified-id before ':' token",
                 "    1 | root:x:0:0:root:/root:/bin/bash", "      |     ^",
                 "/usr/include/c++/12/vector:66: note: in a system header", "compilation terminated."]
        out = build.own_diagnostics(lines)
        self.assertNotIn("root:x:0:0", "\n".join(out))
        self.assertNotIn("/etc/passwd", "\n".join(out))
        self.assertIn("    3 |   foo();", out)
        self.assertIn("/usr/include/c++/12/vector:66: note: in a system header", out)
        self.assertIn("(a message about a file outside the submission, left out)", out)


def runtime_libraries():
    """The C and C++ runtime libraries a rank program links, as the grader finds them."""
    libs = []
    for name in ("libstdc++.so.6", "libm.so.6", "libc.so.6", "libgcc_s.so.1"):
        path = subprocess.run(["c++", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if Path(path).is_file():
            libs.append(Path(path))
    return libs


class SymbolRuleTest(unittest.TestCase):
    """symbols.check_object on small objects: what a dishonest lab file needs is refused by name. The
    object stands for lab01's layers.cpp, whose skeleton defines `twice(int)` (its only export here)."""

    LIBRARIES = symbols.library_exports(runtime_libraries())
    # The kit holds the engine's own instances of the standard library's inline members (std::string's,
    # for one): a stand-in object that uses strings as the engine does gives the test the same ones.
    KIT_STAND_IN = ("#include <stdexcept>\n#include <string>\n#include <vector>\n"
                    "std::string kit_stand_in(const char* s, std::vector<float>& v) { std::string a(s); v.push_back(1);"
                    " if (a.empty()) throw std::runtime_error(a); static std::string last; last = a;"
                    " return a + std::to_string(v.size()) + last; }\n")

    @classmethod
    def setUpClass(cls):
        tmp = Path(tempfile.mkdtemp())
        try:
            (tmp / "kit.cpp").write_text(cls.KIT_STAND_IN)
            subprocess.run(["c++", "-std=c++20", "-O1", "-c", "kit.cpp", "-o", "kit.o"], cwd=tmp, check=True)
            cls.KIT = {name for name, _ in symbols.defined_globals(tmp / "kit.o")}
        finally:
            shutil.rmtree(tmp)

    def obj(self, code):
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        (tmp / "f.cpp").write_text(code)
        subprocess.run(["c++", "-std=c++20", "-O1", "-I", str(REPO), "-c", "f.cpp", "-o", "f.o"], cwd=tmp, check=True)
        ctx = symbols.LinkContext(exports={"_Z5twicei"}, library_symbols=self.LIBRARIES, kit_symbols=self.KIT)
        return symbols.check_object(tmp / "f.o", Path("/grade/src/lab01_tp_layers/layers.cpp"), ctx)

    def test_a_plain_computation_passes(self):
        ok = ("#include <cmath>\n#include <stdexcept>\n#include <string>\n#include <vector>\n#include <cstdio>\n"
              "static float helper(float x) { return std::sqrt(x) + std::tanh(x); }\n"
              "namespace { std::vector<float> squares(int n) { std::vector<float> v; for (int i = 0; i < n; ++i)"
              " v.push_back(helper(float(i))); return v; } }\n"
              "static std::string& label() { static std::string s(40, 'x'); return s; }  // a destructor at exit\n"
              "int twice(int x) { auto v = squares(x); std::string s = std::to_string(v.size());"
              " if (x < 0) { std::fprintf(stderr, \"%s\\n\", s.c_str()); throw std::runtime_error(s); }"
              " return 2 * x + int(s.size() + label().size()); }\n")
        self.assertEqual(self.obj(ok), "")

    def test_each_route_out_is_refused(self):
        cases = {
            "writes the communication record": '#include "engine/trace/recorder.h"\n'
                                               "void f(tpsp::trace::Recorder& r) { r.set_enabled(false); }\n",
            "opens files": "#include <fstream>\nstatic int f() { std::ifstream in(\"/x\"); return in.good(); }\n"
                           "int twice(int x) { return f() + x; }\n",
            "reads files through the engine's data loader":
                '#include "engine/train/data.h"\n'
                'long f() { tpsp::train::ByteDataset d("/proc/self/cmdline"); return long(d.size()); }\n',
            "starts or controls processes": "#include <unistd.h>\nint twice(int) { return fork(); }\n",
            "reaches outside": "#include <cstdlib>\nconst char* f() { return std::getenv(\"X\"); }\n",
            "makes raw system calls": "long f() { long r; asm volatile(\"syscall\" : \"=a\"(r) : \"a\"(39)); return r; }\n",
            "opens a transport of its own": '#include "engine/comm/tcp_store.h"\n'
                                            "void f() { tpsp::comm::TcpStoreServer s(0); }\n",
        }
        for why, code in cases.items():
            self.assertIn(why, self.obj(code), why)

    def test_code_outside_the_labs_functions_is_refused(self):
        # issue attacks: a constructor that reads argv (the seed), an exit handler that rewrites result.json
        cases = {
            "__attribute__((constructor))": "static volatile int argc_seen;\n__attribute__((constructor)) static void "
                                            "c(int argc, char**, char**) { argc_seen = argc; }\n"
                                            "int twice(int x) { return 2 * x + argc_seen; }\n",
            "a global with a constructor": "#include <string>\nstatic std::string g = std::string(40, 'x');\n"
                                           "int twice(int x) { return x + int(g.size()); }\n",
        }
        for what, code in cases.items():
            why = self.obj(code)
            self.assertIn("runs code before main() or at exit", why, what)
        self.assertIn("registers code to run at exit", self.obj("#include <cstdlib>\nstatic void h() {}\n"
                                                                "int twice(int x) { std::atexit(h); return x; }\n"))

    def test_a_replaced_library_function_is_refused(self):
        # issue attack 2: the recorder's clock replaced (a strong and a weak definition), and libc's clock
        cases = {
            "steady_clock::now strong": "#include <chrono>\nnamespace std::chrono { inline namespace _V2 {\n"
                                        "steady_clock::time_point steady_clock::now() noexcept { return {}; } } }\n",
            "clock_gettime weak": "#include <ctime>\nextern \"C\" __attribute__((weak)) int clock_gettime(clockid_t,"
                                  " timespec*) noexcept { return 0; }\n",
            "operator new": "#include <cstdlib>\n#include <new>\nvoid* operator new(std::size_t n) { return std::malloc(n); }\n",
        }
        for what, code in cases.items():
            self.assertIn("replaces a function of a library", self.obj(code), what)

    def test_an_explicit_specialization_in_the_submission_is_found(self):
        # the one way to give a library's template instance a body of the file's own (then defined weak
        # beside libstdc++'s copy); in a system header it is the library's own business
        text = ('# 1 "/grade/src/lab01_tp_layers/layers.cpp"\nint a;\n# 1 "/usr/include/c++/12/string" 1\n'
                'template<> struct hash<int>;\n# 3 "/grade/src/lab01_tp_layers/layers.cpp" 2\nint b;\n'
                "template <> void std::__cxx11::basic_string<char>::_M_dispose() {}\n")
        self.assertEqual(symbols.explicit_specializations(text, ("/grade/src/",)), ["lab01_tp_layers/layers.cpp:4"])
        self.assertEqual(symbols.explicit_specializations("int a;\n", ("/grade/src/",)), [])

    def source(self, code):
        """symbols.source_refusals on `code` as the submission's own file, preprocessed as build.py does."""
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        (tmp / "f.cpp").write_text(code)
        pre = subprocess.run(["c++", "-std=c++20", "-I", str(REPO), "-E", "f.cpp"], cwd=tmp, capture_output=True,
                             text=True, check=True).stdout
        return "\n".join(symbols.source_refusals(pre, ("f.cpp", str(tmp) + "/"), [code]))

    # An attack round on the allow-list (each passed the first version of the rule, with its effect shown
    # in a rank program: result.json rewritten from inside libstdc++, code before main() with argv, a
    # system call hidden from objdump, an ifunc resolver before main(), exit code).
    ATTACKS = {
        "A: asm label, weak": 'extern "C" int lab_put(int) asm("putchar") __attribute__((weak));\n'
                              'int lab_put(int c) { return c; }\nint twice(int x) { return 2 * x + lab_put(0); }\n',
        "B: a call in .init": 'static void hook() asm("lab_hook_local") __attribute__((used));\nstatic void hook() {}\n'
                              'asm(".pushsection .init,\\"ax\\",@progbits\\n\\tcall lab_hook_local\\n\\t.popsection");\n'
                              "int twice(int x) { return 2 * x; }\n",
        "E: an ifunc": "static int impl() { return 1; }\nextern \"C\" void* lab_resolver() { return (void*)impl; }\n"
                       'static int lab_ifn() __attribute__((ifunc("lab_resolver")));\n'
                       "int twice(int x) { return 2 * x + lab_ifn(); }\n",
        "J2: weak __tls_get_addr": 'extern "C" __attribute__((weak)) void* __tls_get_addr(void*) { return nullptr; }\n'
                                   "int twice(int x) { return 2 * x; }\n",
    }

    def test_the_attack_round_on_the_allow_list_is_refused_in_the_object(self):
        want = {"A: asm label, weak": "weak symbol outside a COMDAT group", "B: a call in .init": "runs code before main()",
                "E: an ifunc": "indirect function", "J2: weak __tls_get_addr": "weak symbol outside a COMDAT group"}
        for name, code in self.ATTACKS.items():
            self.assertIn(want[name], self.obj(code), name)

    def test_every_spelling_of_a_binding_attribute_is_refused_in_the_source(self):
        # A reviewer's finding (2026-12-07): these passed the source check (the object check still caught the
        # constructor's .init_array).
        for code in ['[[using gnu: used]] static int kept = 1;\nint twice(int x) { return 2 * x + kept; }\n',
                     '__attribute((visibility("hidden"))) int twice(int x) { return 2 * x; }\n',
                     '[[using gnu: constructor]] static void early() {}\nint twice(int x) { return 2 * x; }\n',
                     '[[using gnu: section(".text.mine")]] int twice(int x) { return 2 * x; }\n',
                     '[[__gnu__::used]] static int kept = 1;\nint twice(int x) { return 2 * x + kept; }\n']:
            self.assertIn("an attribute that places or binds code", self.source(code), code)
        # Attributes that bind nothing stay allowed.
        self.assertEqual(self.source("[[nodiscard]] int twice(int x) { return 2 * x; }\n"), "")
        self.assertEqual(self.source("[[gnu::always_inline]] inline int twice(int x) { return 2 * x; }\n"), "")

    def test_the_attack_round_on_the_allow_list_is_refused_in_the_source(self):
        for name, code in self.ATTACKS.items():
            self.assertRegex(self.source(code), "inline assembly|an attribute that places or binds code", name)
        # F2: a libstdc++ template compiled under a redefined library macro, through an explicit instantiation
        f2 = ("#include <bits/exception_defines.h>\nstatic void spy() {}\n#undef __try\n#define __try spy(); try\n"
              "#include <ostream>\ntemplate std::ostream& std::__ostream_insert(std::ostream&, const char*, std::streamsize);\n")
        why = self.source(f2)
        self.assertIn("explicit instantiation", why)
        self.assertIn("reserved name __try", why)
        # C: a syscall hidden from objdump's linear sweep by a jump into an instruction
        c = ('long f(long n) { long r; asm volatile("jmp 1f+1\\n\\t1: .byte 0xb9,0x0f,0x05,0xeb,0x00" : "=a"(r) : "a"(n) '
             ': "rcx", "r11", "memory"); return r; }\n')
        self.assertIn("inline assembly", self.source(c))
        # an honest file: dependent templates and specializations of its own are no explicit instantiation
        ok = ("#include <vector>\ntemplate <class T> T first(const std::vector<T>& v) { return v.front(); }\n"
              "int twice(int x) { std::vector<int> v{x}; return 2 * first(v); }\n")
        self.assertEqual(self.source(ok), "")

    def test_the_second_round_on_the_allow_list_is_refused(self):
        # P1: a forged line marker made the rest of the file a system header's (asm allowed again)
        p1 = '#line 1 "/usr/include/c++/12/bits/stl_helpers.h"\nlong f(long n) { long r; asm volatile("" : "=a"(r) : "a"(n)); return r; }\n'
        self.assertIn("a line directive", self.source(p1))
        self.assertIn("a line directive", self.source('# 1 "/usr/include/x.h" 3\nint twice(int x) { return x; }\n'))
        # P2: the submission's own file reached through the kit's include folder with ..
        pre = ('# 1 "/grade/src/lab01_tp_layers/layers.cpp"\nint a;\n'
               '# 1 "/grade/kit/include/../../src/lab01_tp_layers/mappings_tp.cpp" 1\nasm("nop");\n')
        self.assertIn("inline assembly", "\n".join(symbols.source_refusals(pre, ("/grade/src/",), [])))
        # P3: an inline explicit specialization of a libstdc++ template, `template` and `<>` on two lines;
        # in the object, the instance libstdc++ exports (the kit lacks it) is refused too
        p3 = ("#include <iosfwd>\nnamespace std {\ntemplate <class C, class T> basic_ostream<C, T>& "
              "__ostream_insert(basic_ostream<C, T>&, const C*, streamsize);\ntemplate\n<> inline ostream& "
              "__ostream_insert<char, char_traits<char>>(ostream& o, const char* s, streamsize n);\n}\n#include <ostream>\n"
              "namespace std {\ntemplate\n<> inline ostream& __ostream_insert<char, char_traits<char>>(ostream& o, "
              "const char* s, streamsize n) { o.rdbuf()->sputn(s, n); return o; }\n}\n"
              "int twice(int x) { static auto* volatile keep = &std::__ostream_insert<char, std::char_traits<char>>;"
              " return x + (keep != nullptr); }\n")
        self.assertIn("explicit specialization", self.source(p3))
        self.assertIn("replaces a function of a library", self.obj(p3))
        # P4: reserved macros behind a comment, a digraph or a line continuation
        for spelled in ("#undef/**/__try\n", "%:define __try try\n", "#\\\ndefine __try try\n"):
            self.assertIn("reserved name __try", self.source(spelled + "int twice(int x) { return x; }\n"), spelled)
        # P5: code that runs after the lab's call returned, on a thread of its own
        p5 = "#include <thread>\nint twice(int x) { std::thread([] {}).detach(); return x; }\n"
        self.assertIn("runs code outside the lab's calls", self.obj(p5))

    def test_a_helper_with_external_linkage_is_named(self):
        why = self.obj("int helper(int x) { return x + 1; }\nint twice(int x) { return 2 * helper(x); }\n")
        self.assertIn("defines with external linkage what is not one of its lab's functions", why)
        self.assertIn("helper(int)", why)

    def test_unlisted_functions_and_glibc_aliases_are_refused(self):
        # issue attack 3 wrote result.json through __open; getdents64 lists folders; __libc_system ran a shell
        for name, decl in {"__open": "int __open(const char*, int, ...);",
                           "getdents64": "long getdents64(int, void*, unsigned long);",
                           "__libc_system": "int __libc_system(const char*);",
                           "sched_yield": "int sched_yield();"}.items():
            call = {"__open": '__open("/x", 0)', "getdents64": "int(getdents64(3, nullptr, 0))",
                    "__libc_system": '__libc_system("id")', "sched_yield": "sched_yield()"}[name]
            why = self.obj(f'extern "C" {decl}\nint twice(int x) {{ return x + {call}; }}\n')
            self.assertIn("calls what a lab's code may not use", why, name)
            self.assertIn(name, why, name)


if __name__ == "__main__":
    unittest.main()
