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


class BuildFailed(Exception):
    """The submission does not build; the message is what the student reads (compiler errors)."""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (COMPILE_MEMORY, COMPILE_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (COMPILE_SECONDS, COMPILE_SECONDS))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
    os.setgroups([])
    os.setgid(COMPILE_UID)
    os.setuid(COMPILE_UID)


def _sources(kit: dict) -> list[tuple[str, Path]]:
    """[(object stem, source path)] for every lab file: the submission's, else the skeleton."""
    out = []
    for lab in kit["registry"]["labs"]:
        lab_dir = Path(lab["dir"]).name
        for f in lab["files"]:
            base = Path(f).name
            own = SRC / lab_dir / base
            out.append((f"{lab_dir}__{Path(base).stem}", own if own.is_file() else KIT / "skeletons" / lab_dir / base))
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


def _stamp(kit_text: str, sources: list[tuple[str, Path]]) -> str:
    h = hashlib.sha256(kit_text.encode())
    for stem, src in sources:
        h.update(stem.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def build(log: Path) -> bool:
    """Builds PROGRAM unless an identical build is there (same kit, same sources); returns True when it
    was already built. Concurrent tasks of one submission wait for each other (a lock in the tree).
    Raises BuildFailed with the compiler's errors (the last 60 lines) or the rule broken.
    """
    kit_text = (KIT / "kit.json").read_text()
    kit = json.loads(kit_text)
    sources = _sources(kit)
    stamp = _stamp(kit_text, sources)
    with open(BUILD / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if PROGRAM.is_file() and (BUILD / "stamp").is_file() and (BUILD / "stamp").read_text() == stamp:
            return True
        obj_dir = BUILD / "obj"
        shutil.rmtree(obj_dir, ignore_errors=True)
        PROGRAM.unlink(missing_ok=True)
        obj_dir.mkdir()
        os.chown(obj_dir, COMPILE_UID, COMPILE_UID)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp"}
        launcher = []
        if shutil.which("ccache") and Path("/grade/ccache").is_dir():
            launcher = ["ccache"]
            env.update(CCACHE_DIR="/grade/ccache", CCACHE_UMASK="022", CCACHE_NOHASHDIR="1")
        with open(log, "w") as out:
            objects = []
            for stem, src in sources:
                obj, dep = obj_dir / f"{stem}.o", obj_dir / f"{stem}.d"
                cmd = [*launcher, kit["cxx"], *kit["cxxflags"], "-I", str(KIT / "include"), "-MD", "-MF", str(dep),
                       "-c", str(src), "-o", str(obj)]
                out.write(f"$ compile {src}\n")
                out.flush()
                try:
                    r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=obj_dir,
                                       preexec_fn=_limits, timeout=COMPILE_SECONDS)
                except subprocess.TimeoutExpired:
                    raise BuildFailed(f"compiling {src.name} took over {COMPILE_SECONDS} s") from None
                if r.returncode != 0:
                    raise BuildFailed(f"{src.relative_to(src.parents[1])} does not compile:\n" + _tail(log))
                _check_deps(dep, src)
                objects.append(str(obj))
            link = [kit["cxx"], *kit["ldflags"], "-o", str(obj_dir / "tpsp-lab-ranks"), *objects, "-Wl,--whole-archive",
                    str(KIT / "lib/libtpsp_grade_kit.a"), "-Wl,--no-whole-archive", *kit["libs"]]
            out.write("$ link tpsp-lab-ranks\n")
            out.flush()
            r = subprocess.run(link, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=obj_dir, preexec_fn=_limits,
                               timeout=COMPILE_SECONDS)
            if r.returncode != 0:
                raise BuildFailed("the submission does not link (a missing or doubly defined function):\n" + _tail(log))
        # The program is root's from here on: the ranks (other uids) can run it, not change it.
        shutil.copyfile(obj_dir / "tpsp-lab-ranks", PROGRAM)
        os.chmod(PROGRAM, 0o755)
        shutil.rmtree(obj_dir, ignore_errors=True)
        (BUILD / "stamp").write_text(stamp)
        return False


def _tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in text[-lines:] if not line.startswith("$ "))
