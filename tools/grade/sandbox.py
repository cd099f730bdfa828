"""The sandbox of one grading task (./grade, issue 13): what a submission's build and runs can reach.

A task runs as ``unshare --mount --net --ipc --uts --pid --fork --kill-child`` (needs root) around
task.py, which first calls :func:`enter`: a fresh root file system (a tmpfs) holding only

  /usr, /etc, /sys         the system, read-only (compiler, libraries, Python)
  /dev                     null, zero, full, random, urandom; a private /dev/shm
  /proc                    the task's own PID namespace
  /tmp, /grade/scratch     private tmpfs (size-limited)
  /grade/kit               the grading kit, read-only (headers, engine archive, grader; no solution)
  /grade/src               this submission's lab files, read-only
  /grade/build             this submission's build tree
  /grade/out               this submission's results folder
  /grade/ccache            the compiler cache shared by the class (optional)

then chroot()s into it. The repository, the other submissions, the solution's rank programs and
everything else on the machine are not there; the network namespace has no interface but a downed
loopback (the grader's launcher gives each launch its own, see checkers/grader/launch.h). Learner code
later runs only under tpsp-check --confine-uid: another uid per launch, rlimits, its own namespaces.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

UNSHARE = ["unshare", "--mount", "--net", "--ipc", "--uts", "--pid", "--fork", "--kill-child"]
DEVICES = ["null", "zero", "full", "random", "urandom"]


class SandboxError(Exception):
    """The sandbox could not be set up (not root, no mount namespaces, a missing path)."""


def _mount(*args: str) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SandboxError(f"mount {' '.join(args)}: {r.stderr.strip()}")


def _bind(src: str, dst: Path, writable: bool) -> None:
    if Path(src).is_dir():
        dst.mkdir(parents=True, exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.touch()
    _mount("--rbind", src, str(dst))
    if not writable:
        _mount("-o", "remount,bind,ro", str(dst))


def enter(new_root: str, binds: dict[str, tuple[str, bool]], tmp_mib: int = 512) -> None:
    """Builds the task's root file system at `new_root` (an empty folder) and chroot()s into it.

    binds: {path inside (e.g. "/grade/kit"): (path outside, writable)}.
    tmp_mib: size of each private tmpfs (/tmp, /grade/scratch, /dev/shm), MiB.
    Must run as root inside fresh mount and PID namespaces (:data:`UNSHARE`). Raises SandboxError.
    """
    if os.geteuid() != 0:
        raise SandboxError("the sandbox needs root (mount namespaces, chroot, other uids for the ranks)")
    _mount("--make-rprivate", "/")
    root = Path(new_root)
    _mount("-t", "tmpfs", "-o", "size=64m,mode=755", "tmpfs", str(root))
    for d in ("usr", "etc", "sys"):
        _bind(f"/{d}", root / d, writable=False)
    for link in ("bin", "lib", "lib64", "sbin"):
        host = Path(f"/{link}")
        if host.is_symlink():
            (root / link).symlink_to(os.readlink(host))
        elif host.is_dir():
            _bind(str(host), root / link, writable=False)
    (root / "dev").mkdir()
    for dev in DEVICES:
        _bind(f"/dev/{dev}", root / "dev" / dev, writable=True)
    for d in ("tmp", "dev/shm", "grade/scratch"):
        (root / d).mkdir(parents=True)
        _mount("-t", "tmpfs", "-o", f"size={tmp_mib}m,mode=1777,nosuid,nodev", "tmpfs", str(root / d))
    os.chmod(root / "grade/scratch", 0o711)
    (root / "proc").mkdir()
    # hidepid: a rank sees only its own launch's processes, not the task's command lines.
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec,hidepid=2", "proc", str(root / "proc"))
    for inside, (outside, writable) in binds.items():
        if not Path(outside).exists():
            raise SandboxError(f"{outside} (for {inside}) does not exist")
        _bind(outside, root / inside.lstrip("/"), writable)
    os.chroot(root)
    os.chdir("/")


def clean_environment() -> dict[str, str]:
    """The environment a task starts with: nothing of the instructor's (no grading seed, no tokens)."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/grade/scratch", "TMPDIR": "/grade/scratch",
            "OPENBLAS_NUM_THREADS": "1"}
