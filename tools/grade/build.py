"""One submission built against the grading kit, in its own build tree (./grade, issue 13).

Runs inside the task's sandbox (sandbox.py): the kit at /grade/kit, the submission's lab files at
/grade/src, the tree at /grade/build. Every lab file of the registry is compiled (the submission's,
or the kit's skeleton where it has none) with the kit's flags, as an unprivileged user, and linked
with the kit's archive into /grade/build/tpsp-lab-ranks: the submission's own code for every lab, as in
a learner copy — no lab's solution is in the kit — except the labs whose solutions the instructor
released (./grade --solutions-of): the task's /grade/released holds those other than the graded lab, and
they are compiled from there instead (in a build tree of that set's own: cli.build_tree). Each object's dependency list (-MD) may only name
the submission's files, the kit's headers and the system's headers.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
from pathlib import Path

import symbols

SYSTEM_HEADERS = ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/")


def use_root(root: Path) -> None:
    """The task's folders under `root` (/grade inside the sandbox; another folder where there is no
    sandbox: the Gradescope autograder in a container without namespaces, autograder.py)."""
    global ROOT, KIT, SRC, BUILD, RELEASED, CCACHE, ALLOWED_DEPS, TRUSTED, PUBLIC_SOURCES
    ROOT = root
    KIT, SRC, BUILD, RELEASED, CCACHE = (root / d for d in ("kit", "src", "build", "released", "ccache"))
    ALLOWED_DEPS = (f"{SRC}/", f"{KIT}/include/", f"{KIT}/skeletons/", f"{RELEASED}/", *SYSTEM_HEADERS)
    TRUSTED = (KIT, RELEASED)  # compiled without the symbol rule: the kit's skeletons, the released solutions
    PUBLIC_SOURCES = (f"{SRC}/", f"{KIT}/", *SYSTEM_HEADERS)


use_root(Path("/grade"))


def program() -> Path:
    """The rank program of the build. ./grade gives each set of released labs its own build tree
    (cli.build_tree): a task never sees a program that links a solution it may not read, and tasks of one
    submission that link different solutions never replace each other's program."""
    return BUILD / "tpsp-lab-ranks"
COMPILE_UID = 65534          # nobody: the compiler reads only what anybody may read
COMPILE_SECONDS = 300        # per file (wall and CPU)
COMPILE_MEMORY = 4 << 30     # RLIMIT_AS of the compiler, bytes


class KitBroken(Exception):
    """A skeleton of the kit does not compile here: the grading machine is at fault (a umask that hides
    the kit, a changed compiler), so no student may be scored for it."""


class BuildFailed(Exception):
    """The submission does not build; the message is what the student reads (compiler errors)."""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (COMPILE_MEMORY, COMPILE_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (COMPILE_SECONDS, COMPILE_SECONDS))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
    os.setgroups([])
    os.setgid(COMPILE_UID)
    os.setuid(COMPILE_UID)


def _sources(kit: dict, released: list[str]) -> dict[str, list[tuple[str, Path, Path]]]:
    """{lab: [(object stem, the source, the skeleton)]} for every lab file: the released solution for a lab
    in `released`, else the submission's file, or the skeleton where it has none."""
    out = {}
    for lab in kit["registry"]["labs"]:
        lab_dir = Path(lab["dir"]).name
        out[lab["id"]] = []
        for f in lab["files"]:
            base = Path(f).name
            own, skeleton = SRC / lab_dir / base, KIT / "skeletons" / lab_dir / base
            if lab["id"] in released:
                own = RELEASED / lab_dir / base
                if not own.is_file():
                    raise KitBroken(f"the released solution {own} is missing")
            out[lab["id"]].append((f"{lab_dir}__{Path(base).stem}", own if own.is_file() else skeleton, skeleton))
    return out


def _check_deps(dep_file: Path, source: Path) -> None:
    """Raises BuildFailed when the compiler read a file outside the submission, the kit's headers and
    the system's headers (e.g. an #include of the engine's own .cpp by absolute path)."""
    text = dep_file.read_text().replace("\\\n", " ")
    paths = text.split(":", 1)[1].split() if ":" in text else []
    for p in paths:
        resolved = os.path.normpath(p if p.startswith("/") else str(BUILD / p))
        if not resolved.startswith(ALLOWED_DEPS):
            raise BuildFailed(f"{source.relative_to(source.parents[1])} reads {p}: a lab file may include "
                              "only the engine's headers, the standard library and the submission's own files")


DIAGNOSTIC = re.compile(r"^(?:In file included from |\s+from )?(/[^:\s]+|[^/\s][^:\s]*):")
EXCERPT = re.compile(r"^\s*(\d+\s*)?\|")


def own_diagnostics(lines: list[str]) -> list[str]:
    """The compiler's messages with each one located in a file other than the submission's, the kit's or
    the system's headers left out, with the source lines it quotes: an #include of a host file must not
    print that file into the student's report (the build runs where such files may be readable)."""
    out, keep = [], True
    for line in lines:
        if EXCERPT.match(line):
            if keep:
                out.append(line)
            continue
        m = DIAGNOSTIC.match(line)
        if m:
            path = os.path.normpath(m.group(1) if m.group(1).startswith("/") else str(BUILD / "obj" / m.group(1)))
            keep = path.startswith(PUBLIC_SOURCES)
            out.append(line if keep else "(a message about a file outside the submission, left out)")
        else:
            out.append(line)
    return [line for i, line in enumerate(out) if i == 0 or line != out[i - 1]]


def link_context(kit: dict) -> symbols.LinkContext:
    """The libraries the program links (the kit's and the compiler's runtime) and what the kit defines:
    a lab object may define neither a library's symbol that the kit lacks, nor anything its skeleton
    does not define (symbols.py)."""
    libs = [Path(lib) for lib in kit["libs"] if ".so" in Path(lib).name]
    for runtime in ("libstdc++.so.6", "libm.so.6", "libc.so.6", "libgcc_s.so.1"):
        found = subprocess.run([kit["cxx"], f"-print-file-name={runtime}"], capture_output=True,
                               text=True).stdout.strip()
        if found and Path(found).is_file():
            libs.append(Path(found))
    kit_symbols = {name for name, _ in symbols.defined_globals(KIT / "lib/libtpsp_grade_kit.a")}
    return symbols.LinkContext(library_symbols=symbols.library_exports(libs), kit_symbols=kit_symbols)


def _stamp(kit_text: str, sources: dict[str, list[tuple[str, Path, Path]]]) -> str:
    h = hashlib.sha256(kit_text.encode())
    for files in sources.values():
        for stem, src, _ in files:
            h.update(stem.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


class _Compiler:
    """Compiles one file at a time into OBJ, as COMPILE_UID, into the build log."""

    def __init__(self, kit: dict, obj_dir: Path, out, symbol_rule: bool):
        self.kit, self.obj_dir, self.out, self.symbol_rule = kit, obj_dir, out, symbol_rule
        self.context = link_context(kit) if symbol_rule else None
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp"}
        self.launcher = []
        if shutil.which("ccache") and CCACHE.is_dir():
            self.launcher = ["ccache"]
            self.env.update(CCACHE_DIR=str(CCACHE), CCACHE_UMASK="022", CCACHE_NOHASHDIR="1")

    def run(self, cmd: list[str]) -> int:
        self.out.flush()
        try:
            return subprocess.run(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=self.env, cwd=self.obj_dir,
                                  preexec_fn=_limits, timeout=COMPILE_SECONDS).returncode
        except subprocess.TimeoutExpired:
            self.out.write(f"(stopped after {COMPILE_SECONDS} s)\n")
            return -1

    def compile(self, stem: str, src: Path, skeleton: Path | None = None) -> str:
        """Compiles `src` to OBJ/<stem>.o; returns "" or why it may not be used (errors, a forbidden read,
        the symbol rule against `skeleton`'s definitions)."""
        obj, dep = self.obj_dir / f"{stem}.o", self.obj_dir / f"{stem}.d"
        mark = self.out.tell()
        self.out.write(f"$ compile {src}\n")
        cmd = [*self.launcher, self.kit["cxx"], *self.kit["cxxflags"], "-I", str(KIT / "include"), "-MD", "-MF",
               str(dep), "-c", str(src), "-o", str(obj)]
        if self.run(cmd) != 0:
            self.out.flush()
            with open(self.out.name, errors="replace") as log:
                log.seek(mark)
                errors = own_diagnostics([line for line in log.read().splitlines()[1:] if line.strip()])
            return f"{src.relative_to(src.parents[1])} does not compile:\n" + "\n".join(errors[-60:])
        try:
            _check_deps(dep, src)
        except BuildFailed as e:
            return str(e)
        if any(src.is_relative_to(t) for t in TRUSTED) or not self.symbol_rule:
            return ""
        preprocessed = subprocess.run([self.kit["cxx"], *self.kit["cxxflags"], "-I", str(KIT / "include"), "-E",
                                       str(src)], capture_output=True, text=True, env=self.env, preexec_fn=_limits,
                                      timeout=COMPILE_SECONDS).stdout
        own = [p for p in SRC.rglob("*") if p.is_file() and p.suffix in (".cpp", ".h", ".hpp", ".cc", ".inc")]
        if found := symbols.source_refusals(preprocessed, (str(SRC) + "/",), [p.read_text(errors="replace")
                                                                               for p in own]):
            return (f"{src.relative_to(src.parents[1])} may not be used: it holds\n  " + "\n  ".join(found) +
                    "\n(each can replace a library's function or run code outside the lab's: docs/grading.md)")
        if why := self.compile(f"skeleton__{stem}", skeleton):
            raise KitBroken(f"the skeleton {skeleton.name} does not compile with this kit: {why}")
        self.context.exports = {n for n, kind in symbols.defined_globals(self.obj_dir / f"skeleton__{stem}.o")
                                if kind in symbols.STRONG}
        return symbols.check_object(obj, src, self.context)


def build(log: Path, symbol_rule: bool = True, released: list[str] | None = None) -> tuple[bool, dict[str, str]]:
    """Builds program() unless an identical build is there (same kit, same sources). Returns
    (whether it was already built, {lab: why its files could not be used}). `released`: the labs taken
    from /grade/released (./grade --solutions-of; never the graded lab). A lab whose file does not compile (or
    reads a forbidden file) is built from its skeletons instead, so the other labs are still graded.
    Concurrent tasks of one submission wait for each other (a lock in the tree).
    Raises BuildFailed when the program does not link. `symbol_rule` False (tests of the sandbox's
    other layers only) skips symbols.check_object.
    """
    kit_text = (KIT / "kit.json").read_text()
    kit = json.loads(kit_text)
    released = released or []
    sources = _sources(kit, released)
    stamp = _stamp(kit_text + ("" if symbol_rule else "|no symbol rule"), sources)
    prog = program()
    with open(BUILD / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = BUILD / "build.json"
        if prog.is_file() and done.is_file() and json.loads(done.read_text()).get("stamp") == stamp:
            return True, json.loads(done.read_text())["broken"]
        obj_dir = BUILD / "obj"
        shutil.rmtree(obj_dir, ignore_errors=True)
        prog.unlink(missing_ok=True)
        done.unlink(missing_ok=True)
        obj_dir.mkdir()
        os.chown(obj_dir, COMPILE_UID, COMPILE_UID)
        broken: dict[str, str] = {}
        objects = []
        with open(log, "w+") as out:
            cc = _Compiler(kit, obj_dir, out, symbol_rule)
            for lab, files in sources.items():
                why = ""
                for stem, src, skeleton in files:
                    why = why or cc.compile(stem, src, skeleton)
                if why:  # the lab's skeletons instead: its runs say "not implemented", the others are graded
                    broken[lab] = why
                    for stem, _, skeleton in files:
                        if why_not := cc.compile(stem, skeleton):
                            raise KitBroken(f"the skeleton of {lab} does not compile with this kit: {why_not}")
                objects += [str(obj_dir / f"{stem}.o") for stem, _, _ in files]
            out.write("$ link tpsp-lab-ranks\n")
            # The kit first: where a lab object and the kit both hold an inline function or a template
            # instance, the kit's copy is the one the program keeps (symbols.py).
            link = [kit["cxx"], *kit["ldflags"], "-o", str(obj_dir / "tpsp-lab-ranks"), "-Wl,--whole-archive",
                    str(KIT / "lib/libtpsp_grade_kit.a"), "-Wl,--no-whole-archive", *objects, *kit["libs"]]
            if cc.run(link) != 0:
                raise BuildFailed("the submission does not link (a missing or doubly defined function):\n"
                                  + _tail(log))
        # The program is root's from here on: the ranks (other uids) can run it, not change it.
        shutil.copyfile(obj_dir / "tpsp-lab-ranks", prog)
        os.chmod(prog, 0o755)
        shutil.rmtree(obj_dir, ignore_errors=True)
        done.write_text(json.dumps({"stamp": stamp, "broken": broken}))
        return False, broken


def _tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in text[-lines:] if not line.startswith("$ "))
