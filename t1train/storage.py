"""How t1train writes files so that a killed run loses nothing it had finished.

* :func:`write_text_atomic`: a whole file at once. It is written to a temp file in the same folder, flushed,
  fsynced and then ``os.replace``d over the target, so a reader sees the old file or the new one, never half.
* :func:`publish_dir`: a whole folder at once (checkpoints). It is filled under a temp name, its files fsynced,
  and then renamed to its final name, so a folder with the final name is always complete.
* :class:`EpisodeLog`: an append-only JSONL file, one line per finished episode, each line written with one
  ``write`` and fsynced. A kill can only tear the last line: :func:`read_jsonl` skips such a tail (with a
  warning), and ``EpisodeLog`` cuts it off before it appends. Every record has a key; a key already in the file
  is not written again, so a resumed run does not duplicate episodes. One process writes a log at a time (an
  exclusive ``flock``); a second one gets an error that names the file. The lock belongs to the open file, which a
  forked child shares until it execs or exits: a child the writer forked to start a sandbox can hold it for a moment
  after the writer was killed, so opening waits up to ``LOCK_WAIT_SECONDS`` for the lock before the error.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "episodes.jsonl"
    >>> log = EpisodeLog(path, key=lambda r: r["episode"])
    >>> log.append({"episode": 0, "reward": 1.0}), log.append({"episode": 0, "reward": 2.0})
    (True, False)
    >>> log.close()
    >>> with path.open("a") as f: _ = f.write('{"episode": 1, "rew')   # a writer killed mid-line
    >>> [r["episode"] for r in read_jsonl(path, warn=False)]
    [0]
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Hashable

from t1env.files import fsync_dir, write_atomic

LOCK_WAIT_SECONDS = 5.0
"""How long :class:`EpisodeLog` waits for the lock: a killed writer's forked children that have not yet exec'd or
exited still share its open file, and with it the lock, for a moment."""


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step: readers (and a crash) see the old content or the new."""
    write_atomic(path, text)


def staging_dir(final: str | Path) -> Path:
    """An empty folder next to ``final`` to fill before :func:`publish_dir` (a leftover one is emptied first).

    Its name starts with a dot and does not match ``checkpoint-N``, so ``get_last_checkpoint`` never picks it."""
    final = Path(final)
    staging = final.parent / f".{final.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def publish_dir(staging: str | Path, final: str | Path) -> None:
    """Fsync every file under ``staging``, then rename it to ``final`` (replacing an older ``final``)."""
    staging, final = Path(staging), Path(final)
    for root, _, files in os.walk(staging):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(root))
    old = None
    if final.exists():  # the same step saved twice: keep the old one until the new one is in place
        old = final.parent / f".{final.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    staging.rename(final)
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ JSONL
def _scan(path: Path) -> tuple[list[dict], int, bool]:
    """``(records, size of the complete lines, whether the last line lacks its newline but parses)``."""
    data = path.read_bytes() if path.exists() else b""
    records: list[dict] = []
    good = 0
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if last and not line:
            break  # the file ends with a newline
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError as err:
            if last:  # no newline after it: a write cut short by a kill
                return records, good, False
            raise ValueError(
                f"{path}:{number}: not a JSON line ({err}); the file is damaged in the middle, "
                "not just at the end: move it aside and re-run"
            ) from None
        if record is not None:
            records.append(record)
        if last:
            return records, good, True  # complete JSON whose newline was never written
        good += len(line) + 1
    return records, good, False


def read_jsonl(path: str | Path, warn: bool = True) -> list[dict]:
    """The records of a JSONL file, skipping a torn last line (a writer killed mid-line)."""
    path = Path(path)
    records, good, complete_tail = _scan(path)
    torn = path.stat().st_size - good
    if torn and not complete_tail and warn:
        warnings.warn(f"{path}: skipped a torn last line ({torn} bytes): its writer was killed mid-write", stacklevel=2)
    return records


class EpisodeLog:
    """An append-only JSONL file of episodes, one fsynced line each. See the module docstring.

    Args:
        path: the file (created with its folders if missing).
        key: ``key(record)`` names an episode; a record whose key is already in the file is not written again.
    """

    def __init__(self, path: str | Path, key: Callable[[dict], Hashable]):
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._open()

    def _open(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise ValueError(
                        f"{self.path} is being written by another process (or another trainer in this "
                        "one): wait for it to finish, or write elsewhere"
                    ) from None
                time.sleep(0.05)
        records, good, complete_tail = _scan(self.path)
        size = os.fstat(fd).st_size
        if complete_tail:
            os.write(fd, b"\n")
        elif size > good:  # cut the torn line off, or the next record would be glued to it
            os.ftruncate(fd, good)
        os.fsync(fd)
        self._fd = fd
        self.keys: set = {self.key(r) for r in records}
        """The keys of the records in the file."""

    def records(self) -> list[dict]:
        """The records in the file (read again from disk)."""
        return read_jsonl(self.path, warn=False)

    def append(self, record: dict) -> bool:
        """Write ``record`` as one line and fsync it; False (nothing written) if its key is already there."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the episode log is closed")
        k = self.key(record)
        if k in self.keys:
            return False
        data = (json.dumps(record) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        self.keys.add(k)
        return True

    def clear(self) -> None:
        """Empty the file (``t1train rollout --overwrite``): the records in it are dropped."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the episode log is closed")
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)
        self.keys = set()

    def rewind(self, keep: Callable[[dict], bool], aside: str | Path) -> int:
        """Keep only the records ``keep`` accepts; append the others to ``aside``. Returns how many moved.

        Both files are replaced or fsynced before this returns, so a kill at any point loses no record (at worst
        a record is in both files)."""
        records, _, _ = _scan(self.path)
        kept = [r for r in records if keep(r)]
        moved = [r for r in records if not keep(r)]
        if not moved:
            return 0
        aside = Path(aside)
        with aside.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in moved)
            f.flush()
            os.fsync(f.fileno())
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        self.close()  # the lock was on the replaced file
        self._open()
        return len(moved)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        self.close()
