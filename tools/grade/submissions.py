"""The class to grade: one submission per student, as a folder or an archive (./grade, issue 13).

A submission holds lab files as a learner's labs/ holds them: ``<lab dir>/<file>.cpp`` where the lab
dir is the basename of the registry's ``dir`` (labs/labs.json), e.g. ``lab01_tp_layers/layers.cpp``,
at the top of the folder or archive, under ``labs/``, or under one top folder. Only the registry's
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


def _safe_member(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not name.startswith("/") and ".." not in parts


def _unpack(archive: Path, into: Path) -> None:
    """Extracts the regular files of a tar or zip archive into `into`; links, devices, absolute or
    '..' paths and files over MAX_FILE_BYTES are refused (SubmissionError naming the member)."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                if not _safe_member(info.filename) or info.file_size > MAX_FILE_BYTES:
                    raise SubmissionError(f"{archive.name}: member '{info.filename}' is unsafe or too large")
                target = into / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(info))
        return
    with tarfile.open(archive) as t:
        for member in t.getmembers():
            if member.isdir():
                continue
            if not member.isfile() or not _safe_member(member.name) or member.size > MAX_FILE_BYTES:
                raise SubmissionError(f"{archive.name}: member '{member.name}' is not a plain file of "
                                      f"at most {MAX_FILE_BYTES} bytes under the archive's top")
            target = into / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            with t.extractfile(member) as src:
                target.write_bytes(src.read())


def _find(root: Path, rel: str) -> Path | None:
    """`rel` ("<lab dir>/<file>") at the top of `root`, under labs/, or under one top folder."""
    candidates = [root / rel, root / "labs" / rel]
    tops = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    if len(tops) == 1:
        candidates += [tops[0] / rel, tops[0] / "labs" / rel]
    for c in candidates:
        if c.is_file() and not c.is_symlink():
            return c
    return None


def collect(entry: Path, registry: dict, staging: Path) -> Submission:
    """Copies the registry's files of submission `entry` (a folder or an archive) to staging/<name>.

    Raises SubmissionError (bad name, unsafe archive, a lab file over 1 MiB or a link).
    """
    name = submission_name(entry)
    dest = staging / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    root = entry
    if entry.is_file():
        root = staging / f".unpack-{name}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        try:
            _unpack(entry, root)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
            raise SubmissionError(f"{entry.name}: cannot read the archive: {e}") from e
    found, digest = [], hashlib.sha256()
    for rel in sorted({f for files in lab_files(registry).values() for f in files}):
        src = _find(root, rel)
        if src is None:
            continue
        if src.stat().st_size > MAX_FILE_BYTES:
            raise SubmissionError(f"{name}: {rel} is over {MAX_FILE_BYTES} bytes")
        data = src.read_bytes()
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
        found.append(rel)
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    if entry.is_file():
        shutil.rmtree(root, ignore_errors=True)
    os.chmod(dest, 0o755)
    return Submission(name, dest, found, digest.hexdigest())


def discover(folder: Path) -> list[Path]:
    """The submissions of a class folder: its sub-folders and archives, sorted by name (hidden ones
    skipped). Raises SubmissionError when there is none."""
    entries = sorted(p for p in folder.iterdir()
                     if not p.name.startswith(".") and (p.is_dir() or p.name.endswith(ARCHIVE_SUFFIXES)))
    if not entries:
        raise SubmissionError(f"{folder} holds no submission (a folder or a .tar.gz/.tgz/.tar/.zip per student)")
    return entries
