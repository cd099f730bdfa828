"""The class to grade: one submission per student, as a folder or an archive (./grade, issue 13).

A submission holds lab files as a learner's labs/ holds them: ``<lab dir>/<file>.cpp`` where the lab
dir is the basename of the registry's ``dir`` (labs/labs.json), e.g. ``lab01_tp_layers/layers.cpp``,
at the top of the folder or archive, under ``labs/``, or under one top folder; or bare at the top
(``layers.cpp``, as Gradescope's upload of single files leaves them) when no lab folder holds it. Only the registry's
files are taken (anything else is ignored); a file it lacks is the committed skeleton's.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

NAME_RULE = re.compile(r"^[A-Za-z0-9._-]+$")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
MAX_FILE_BYTES = 1 << 20  # a lab file over 1 MiB is refused (the solutions are under 40 KiB)


class SubmissionError(Exception):
    """A submission that cannot be taken: a bad name, an unsafe or unreadable archive, a huge file."""


@dataclass
class Submission:
    """One student's lab files, copied to ``sources`` (``<lab dir>/<file>`` each).

    name: the folder's or archive's name without suffix ([A-Za-z0-9._-]+).
    files: the registry files found, as "<lab dir>/<file>" paths relative to ``sources``.
    digest: SHA-256 (hex) of those files' paths and bytes: the build's cache key and part of the
        per-submission seed, so a changed file gets other inputs.
    """

    name: str
    sources: Path
    files: list[str]
    digest: str


def lab_files(registry: dict) -> dict[str, list[str]]:
    """{lab id: ["<lab dir basename>/<file basename>", ...]} from the registry (labs/labs.json)."""
    return {
        lab["id"]: [f"{Path(lab['dir']).name}/{Path(f).name}" for f in lab["files"]]
        for lab in registry["labs"]
    }


def submission_name(entry: Path) -> str:
    """The submission's name: a folder's name, or an archive's without its suffix.

    Raises SubmissionError when it is not [A-Za-z0-9._-]+ (it names files and folders of RESULTS/).
    """
    name = entry.name
    for suffix in ARCHIVE_SUFFIXES:
        if entry.is_file() and name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if not NAME_RULE.match(name) or name in (".", ".."):
        raise SubmissionError(f"submission name '{entry.name}' is not [A-Za-z0-9._-]+")
    return name


RESERVED_NAMES = {"class.csv", "scores.png", "scenarios.png"}  # the class's own files in RESULTS/
MAX_MEMBERS = 10_000  # an archive with more entries is refused (an archive bomb)


def _bare(files: set[str]) -> dict[str, str]:
    """{file name: "<lab dir>/<file>"} for the registry's file names that only one lab has."""
    names = [Path(f).name for f in files]
    return {Path(f).name: f for f in files if names.count(Path(f).name) == 1}


def _wanted(member: str, files: set[str]) -> str | None:
    """The registry file ("<lab dir>/<file>") that archive member `member` is, at one of the accepted
    places (the top, labs/, one top folder, or its labs/; or bare at the top), or None."""
    parts = Path(member).parts
    if member.startswith("/") or ".." in parts:
        return None
    for rest in (parts, parts[1:] if parts[:1] == ("labs",) else (), parts[1:],
                 parts[2:] if parts[1:2] == ("labs",) else ()):
        if rest and "/".join(rest) in files:
            return "/".join(rest)
    return _bare(files).get(parts[0]) if len(parts) == 1 else None


def _unpack(archive: Path, files: set[str], into: Path) -> None:
    """Extracts from a tar or zip archive only the members that are registry files (`files`), each a
    plain file of at most MAX_FILE_BYTES; everything else is skipped unread. Raises SubmissionError for
    an archive of over MAX_MEMBERS entries or a lab file that is a link, a device or too large."""
    def put(rel: str, data: bytes) -> None:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            infos = z.infolist()
            if len(infos) > MAX_MEMBERS:
                raise SubmissionError(f"{archive.name}: over {MAX_MEMBERS} entries")
            for info in infos:
                rel = None if info.is_dir() else _wanted(info.filename, files)
                if rel is None:
                    continue
                if info.file_size > MAX_FILE_BYTES:
                    raise SubmissionError(f"{archive.name}: {info.filename} is over {MAX_FILE_BYTES} bytes")
                put(rel, z.read(info)[: MAX_FILE_BYTES + 1])
        return
    with tarfile.open(archive) as t:
        for count, member in enumerate(t, 1):
            if count > MAX_MEMBERS:
                raise SubmissionError(f"{archive.name}: over {MAX_MEMBERS} entries")
            rel = _wanted(member.name, files)
            if rel is None or member.isdir():
                continue
            if not member.isfile() or member.size > MAX_FILE_BYTES:
                raise SubmissionError(f"{archive.name}: {member.name} is not a plain file of at most "
                                      f"{MAX_FILE_BYTES} bytes")
            with t.extractfile(member) as src:
                put(rel, src.read(MAX_FILE_BYTES + 1))


def _no_links(path: Path, root: Path) -> bool:
    """True when no component of `path` below `root` (nor root itself) is a symbolic link."""
    p = path
    while True:
        if p.is_symlink():
            return False
        if p == root or p == p.parent:
            return True
        p = p.parent


def _find(root: Path, rel: str, bare: bool) -> Path | None:
    """`rel` ("<lab dir>/<file>") at the top of `root`, under labs/, or under one top folder, else (with
    `bare`: no other lab has a file of that name) the file name alone at the top; a path through a
    symbolic link (to the solution, to a classmate's folder) is never taken."""
    candidates = [root / rel, root / "labs" / rel]
    tops = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()] if root.is_dir() else []
    if len(tops) == 1:
        candidates += [tops[0] / rel, tops[0] / "labs" / rel]
    if bare:
        candidates.append(root / Path(rel).name)
    for c in candidates:
        if _no_links(c, root) and c.is_file():
            return c
    return None


def collect(entry: Path, registry: dict, staging: Path) -> Submission:
    """Copies the registry's files of submission `entry` (a folder or an archive) to staging/<name>.

    Raises SubmissionError for anything that cannot be taken: a bad or reserved name, a link, an
    unreadable, corrupt or oversized archive, a lab file over 1 MiB.
    """
    name = submission_name(entry)
    if name in RESERVED_NAMES:
        raise SubmissionError(f"submission name '{name}' is one of the class's own result files")
    if entry.is_symlink():
        raise SubmissionError(f"{entry.name} is a symbolic link")
    wanted = {f for files in lab_files(registry).values() for f in files}
    dest = staging / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    root = entry
    try:
        if entry.is_file():
            root = staging / f".unpack-{name}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            try:
                _unpack(entry, wanted, root)
            except SubmissionError:
                raise
            except Exception as e:  # a corrupt member, an unknown compression, a full disk …
                raise SubmissionError(f"{entry.name}: cannot read the archive: {type(e).__name__}: {e}") from e
        found, digest = [], hashlib.sha256()
        for rel in sorted(wanted):
            src = _find(root, rel, Path(rel).name in _bare(wanted))
            if src is None:
                continue
            if src.stat().st_size > MAX_FILE_BYTES:
                raise SubmissionError(f"{name}: {rel} is over {MAX_FILE_BYTES} bytes")
            data = src.read_bytes()
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
            found.append(rel)
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    finally:
        if root is not entry:
            shutil.rmtree(root, ignore_errors=True)
    os.chmod(dest, 0o755)
    return Submission(name, dest, found, digest.hexdigest())


def discover(folder: Path) -> list[Path]:
    """The submissions of a class folder: its sub-folders and archives, sorted by name (hidden ones
    skipped). Raises SubmissionError when there is none."""
    entries = sorted(p for p in folder.iterdir()
                     if not p.name.startswith(".") and (p.is_dir() or p.name.endswith(ARCHIVE_SUFFIXES)))
    # (a symbolic link among them is kept here and refused by collect(), so that it is reported)
    if not entries:
        raise SubmissionError(f"{folder} holds no submission (a folder or a .tar.gz/.tgz/.tar/.zip per student)")
    return entries
