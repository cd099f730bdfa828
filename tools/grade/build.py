"""One submission built against the grading kit, in its own build tree (./grade, issue 13).

Runs inside the task's sandbox (sandbox.py): the kit at /grade/kit, the submission's lab files at
/grade/src, the tree at /grade/build. Every lab file of the registry is compiled (the submission's,
or the kit's skeleton where it has none) with the kit's flags, as an unprivileged user, and linked
with the kit's archive into /grade/build/tpsp-lab-ranks: the submission's own code for every lab, as
in a learner copy — no lab's solution is in the kit. Each object's dependency list (-MD) may only name
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

KIT, SRC, BUILD = Path("/grade/kit"), Path("/grade/src"), Path("/grade/build")
PROGRAM = BUILD / "tpsp-lab-ranks"
ALLOWED_DEPS = ("/grade/src/", "/grade/kit/include/", "/grade/kit/skeletons/", "/usr/include/", "/usr/lib/gcc/",
                "/usr/local/include/")
COMPILE_UID = 65534          # nobody: the compiler reads only what anybody may read
COMPILE_SECONDS = 300        # per file (wall and CPU)
COMPILE_MEMORY = 4 << 30     # RLIMIT_AS of the compiler, bytes


# What a lab's code has no use for and a dishonest one needs: writing the grader's evidence itself (the
# communication record, compute spans, result files), reading other runs' files or the grading inputs,
# starting other programs, talking outside the process group. A lab file whose object names one of
# these (called, or instantiated) is not used; one that holds a system-call instruction neither.
FORBIDDEN_SYMBOLS = [
    # Every Recorder member: writing it forges the evidence, reading it lets a forgery match the real calls
    # (attack12: a device span placed inside a gather's issue-to-wait window); lab code never needs it.
    (re.compile(r"tpsp::trace::Recorder::"),
     "reads or writes the communication record (the grader's evidence of what was communicated)"),
    (re.compile(r"tpsp::trace::(install|installed|Span::Span)\b"),
     "writes compute spans (the grader's evidence of overlap)"),
    # A device's tables decide how storage is copied and how spans are timed (a fake clock forges them).
    (re.compile(r"tpsp::register_device_hooks\b|tpsp::device_hooks\b|tpsp::require_device_hooks\b|"
                r"tpsp::ops::register_device_ops\b|tpsp::ops::device_ops\b|tpsp::emulated::|tpsp::runtime::|"
                r"tpsp::cuda::register_backend\b"),
     "installs or reaches a device's storage, ops or clock (the run's device is the grader's choice)"),
    (re.compile(r"tpsp::checkers::|tpsp::io::|write_chrome_trace"),
     "calls the rank program's own code (the scenarios, the dumps, result files)"),
    # The training data loader opens any path it is given and returns its bytes (found by an attack,
    # 2026-12-02: ByteDataset on a sibling run's dump, whose path /proc/self/cmdline names).
    (re.compile(r"tpsp::train::"), "reads files through the engine's data loader (a lab's code reads only tensors)"),
    (re.compile(r"\bbasic_(o|i|)fstream\b|\bbasic_filebuf\b|\bstd::filesystem::|"
                r"^(fopen|fopen64|freopen|freopen64|fdopen|open|open64|openat|openat64|__open_2|__open64_2|"
                r"__openat_2|creat|creat64|opendir|fdopendir|readlink|readlinkat|unlink|unlinkat|rename|renameat|"
                r"renameat2|mkdir|mkdirat|chdir|fchdir|chroot|truncate|ftruncate|"
                # entries made or listed without opening a file: names are a channel too (attack o, r)
                r"symlink|symlinkat|link|linkat|mkfifo|mkfifoat|mknod|mknodat|glob|glob64|globfree|globfree64|"
                r"scandir|scandir64|scandirat|scandirat64|readdir|readdir64|nftw|nftw64|ftw|ftw64|"
                r"stat|stat64|lstat|lstat64|fstatat|fstatat64|statx|__xstat|__xstat64|__lxstat|__lxstat64|"
                r"__fxstatat|__fxstatat64|statfs|statfs64|statvfs|statvfs64|access|faccessat|euidaccess|eaccess|"
                r"chmod|fchmod|fchmodat|lchmod|chown|fchown|fchownat|lchown|utime|utimes|lutimes|futimes|"
                r"utimensat|futimens|setxattr|lsetxattr|fsetxattr|getxattr|lgetxattr|fgetxattr|listxattr|"
                r"llistxattr|flistxattr|removexattr|lremovexattr|fremovexattr|realpath|canonicalize_file_name)$"),
     "opens files or folders (a lab's code reads and writes only tensors)"),
    (re.compile(r"^(fork|_Fork|vfork|clone|clone3|execv|execve|execveat|execvp|execvpe|execl|execlp|execle|fexecve|"
                r"posix_spawn|posix_spawnp|system|popen|daemon|setsid|setpgid|ptrace|kill|tgkill|tkill|killpg|"
                r"signal|sigaction|prctl|unshare|setns|process_vm_readv|process_vm_writev|pidfd_open|dlopen|dlsym|"
                r"dlvsym|syscall|wordexp|wordfree)$"),
     "starts or controls processes, or makes raw system calls"),
    (re.compile(r"^(socket|socketpair|connect|bind|listen|accept|accept4|sendto|recvfrom|sendmsg|recvmsg|mmap|mmap64|"
                r"mprotect|shm_open|shmget|shmat|msgget|semget|mq_open|getenv|secure_getenv|environ|__environ|"
                r"setenv|unsetenv|putenv|clearenv|"
                r"program_invocation_name|program_invocation_short_name|__progname|__libc_argv|"
                r"sigqueue|sigtimedwait|sigwaitinfo|sigwait|sigprocmask|pthread_sigmask|pthread_kill|"
                r"sched_setaffinity|sched_getaffinity|setpriority|getpriority|prlimit|prlimit64|"
                r"setrlimit|getrlimit|ioprio_set|ioprio_get)$"),
     "reaches outside the process group's calls (sockets, shared memory, the environment)"),
]
SYSCALL_INSTRUCTION = re.compile(r"\s(syscall|sysenter|int\s+\$0x80)\b")


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


def _sources(kit: dict) -> dict[str, list[tuple[str, Path, Path]]]:
    """{lab: [(object stem, the submission's file or the skeleton, the skeleton)]} for every lab file."""
    out = {}
    for lab in kit["registry"]["labs"]:
        lab_dir = Path(lab["dir"]).name
        out[lab["id"]] = []
        for f in lab["files"]:
            base = Path(f).name
            own, skeleton = SRC / lab_dir / base, KIT / "skeletons" / lab_dir / base
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


def check_object(obj: Path, source: Path) -> str:
    """"" when the object of a submission's lab file names nothing of FORBIDDEN_SYMBOLS and holds no
    system-call instruction; else the rule broken, with the symbols (what the student reads)."""
    names = subprocess.run(["nm", "-C", "--format=posix", str(obj)], capture_output=True, text=True).stdout
    found = {}
    for line in names.splitlines():  # POSIX format: "<name> <type letter> [<value> [<size>]]"
        m = re.match(r"^(.*?) [A-Za-z?](?: +[0-9a-fA-F]*)*\s*$", line)
        bare = (m.group(1) if m else line).split("(")[0].split("@")[0]
        for pattern, why in FORBIDDEN_SYMBOLS:
            if pattern.search(bare):
                found.setdefault(why, set()).add(bare)
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True).stdout
    if SYSCALL_INSTRUCTION.search(code):
        found.setdefault("makes raw system calls", set()).add("a syscall instruction")
    if not found:
        return ""
    rel = source.relative_to(source.parents[1])
    lines = [f"  {why}: {', '.join(sorted(symbols)[:6])}" for why, symbols in found.items()]
    return f"{rel} may not be used: it\n" + "\n".join(lines) + (
        "\n(a lab's code computes with tensors and the process group's calls only: docs/grading.md)")


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
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp"}
        self.launcher = []
        if shutil.which("ccache") and Path("/grade/ccache").is_dir():
            self.launcher = ["ccache"]
            self.env.update(CCACHE_DIR="/grade/ccache", CCACHE_UMASK="022", CCACHE_NOHASHDIR="1")

    def run(self, cmd: list[str]) -> int:
        self.out.flush()
        try:
            return subprocess.run(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=self.env, cwd=self.obj_dir,
                                  preexec_fn=_limits, timeout=COMPILE_SECONDS).returncode
        except subprocess.TimeoutExpired:
            self.out.write(f"(stopped after {COMPILE_SECONDS} s)\n")
            return -1

    def compile(self, stem: str, src: Path) -> str:
        """Compiles `src` to OBJ/<stem>.o; returns "" or why it may not be used (errors, a forbidden read)."""
        obj, dep = self.obj_dir / f"{stem}.o", self.obj_dir / f"{stem}.d"
        mark = self.out.tell()
        self.out.write(f"$ compile {src}\n")
        cmd = [*self.launcher, self.kit["cxx"], *self.kit["cxxflags"], "-I", str(KIT / "include"), "-MD", "-MF",
               str(dep), "-c", str(src), "-o", str(obj)]
        if self.run(cmd) != 0:
            self.out.flush()
            with open(self.out.name, errors="replace") as log:
                log.seek(mark)
                errors = [line for line in log.read().splitlines()[1:] if line.strip()]
            return f"{src.relative_to(src.parents[1])} does not compile:\n" + "\n".join(errors[-60:])
        try:
            _check_deps(dep, src)
        except BuildFailed as e:
            return str(e)
        return "" if src.is_relative_to(KIT) or not self.symbol_rule else check_object(obj, src)


def build(log: Path, symbol_rule: bool = True) -> tuple[bool, dict[str, str]]:
    """Builds PROGRAM unless an identical build is there (same kit, same sources). Returns (whether it
    was already built, {lab: why its files could not be used}). A lab whose file does not compile (or
    reads a forbidden file) is built from its skeletons instead, so the other labs are still graded.
    Concurrent tasks of one submission wait for each other (a lock in the tree).
    Raises BuildFailed when the program does not link. `symbol_rule` False (tests of the sandbox's
    other layers only) skips check_object.
    """
    kit_text = (KIT / "kit.json").read_text()
    kit = json.loads(kit_text)
    sources = _sources(kit)
    stamp = _stamp(kit_text + ("" if symbol_rule else "|no symbol rule"), sources)
    with open(BUILD / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = BUILD / "build.json"
        if PROGRAM.is_file() and done.is_file() and json.loads(done.read_text()).get("stamp") == stamp:
            return True, json.loads(done.read_text())["broken"]
        obj_dir = BUILD / "obj"
        shutil.rmtree(obj_dir, ignore_errors=True)
        PROGRAM.unlink(missing_ok=True)
        done.unlink(missing_ok=True)
        obj_dir.mkdir()
        os.chown(obj_dir, COMPILE_UID, COMPILE_UID)
        broken: dict[str, str] = {}
        objects = []
        with open(log, "w+") as out:
            cc = _Compiler(kit, obj_dir, out, symbol_rule)
            for lab, files in sources.items():
                why = ""
                for stem, src, _ in files:
                    why = why or cc.compile(stem, src)
                if why:  # the lab's skeletons instead: its runs say "not implemented", the others are graded
                    broken[lab] = why
                    for stem, _, skeleton in files:
                        if why_not := cc.compile(stem, skeleton):
                            raise KitBroken(f"the skeleton of {lab} does not compile with this kit: {why_not}")
                objects += [str(obj_dir / f"{stem}.o") for stem, _, _ in files]
            out.write("$ link tpsp-lab-ranks\n")
            link = [kit["cxx"], *kit["ldflags"], "-o", str(obj_dir / "tpsp-lab-ranks"), *objects,
                    "-Wl,--whole-archive", str(KIT / "lib/libtpsp_grade_kit.a"), "-Wl,--no-whole-archive",
                    *kit["libs"]]
            if cc.run(link) != 0:
                raise BuildFailed("the submission does not link (a missing or doubly defined function):\n"
                                  + _tail(log))
        # The program is root's from here on: the ranks (other uids) can run it, not change it.
        shutil.copyfile(obj_dir / "tpsp-lab-ranks", PROGRAM)
        os.chmod(PROGRAM, 0o755)
        shutil.rmtree(obj_dir, ignore_errors=True)
        done.write_text(json.dumps({"stamp": stamp, "broken": broken}))
        return False, broken


def _tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in text[-lines:] if not line.startswith("$ "))
