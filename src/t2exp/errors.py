"""User-facing errors: one line that names the field, the bad value and the fix."""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from typing import NoReturn


class T2ExpError(Exception):
    """Base class; ``__main__`` prints ``str(exc)`` on one line and exits non-zero."""


class ConfigError(T2ExpError):
    pass


class DataError(T2ExpError):
    pass


class TrackingError(T2ExpError):
    """The MLflow tracking store cannot be reached or written; the run's predictions are kept."""


class RemoteError(T2ExpError):
    """A remote endpoint (embedding, generation, reranking) failed after bounded retries."""


def one_line(text: object, limit: int | None = None) -> str:
    """Any message (an exception, a server's reply) as one line: whitespace and newlines collapsed,
    cut to ``limit`` characters with an ellipsis. The one helper every one-line error goes through."""
    s = " ".join(str(text).split())
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions behind it (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def exit_with(message: str, status: int = 2) -> NoReturn:
    """End the process with the one line a user reads (``t2exp: error: ...``); callers redact first."""
    print(f"t2exp: error: {one_line(message)}", file=sys.stderr)
    sys.exit(status)


# what a user does about a file-system fault; the work done so far is on disk either way
OS_FAULTS = {
    errno.ENOSPC: "the disk is full: free space and run the same command again (it resumes; the cache is intact)",
    errno.EDQUOT: "the disk quota is used up: free space and run the same command again (it resumes)",
    errno.EROFS: "a read-only file system: point paths.work (or paths.cache) at a writable directory",
    errno.EACCES: "no permission to write there: point paths.work (or paths.cache) at a directory you own",
    errno.EPERM: "not permitted: point paths.work (or paths.cache) at a directory you own",
    errno.ENOTDIR: "a file stands where a directory is expected: point the path at a directory",
    errno.EEXIST: "a file stands where a directory is expected: point the path at a directory",
    errno.EISDIR: "a directory stands where a file is expected",
}


def os_error_line(exc: OSError) -> str:
    """A file-system fault as the one line a user reads: the path, the fault, what to do."""
    where = exc.filename if exc.filename is not None else type(exc).__name__
    fault = exc.strerror or str(exc) or type(exc).__name__
    advice = OS_FAULTS.get(exc.errno or 0, "fix it and run the same command again (work already done is kept)")
    return f"{where}: {fault}; {advice}"


def command_error(prog: str, problem: object) -> int:
    """Print a subcommand's one error line (``<prog>: error: ...``; an OSError names path and fix); exit status 2."""
    line = os_error_line(problem) if isinstance(problem, OSError) else one_line(problem)
    print(f"{prog}: error: {line}", file=sys.stderr)
    return 2


@contextmanager
def naming(path: str | PathLike[str]) -> Iterator[None]:
    """A write through a file object (``f.write``, ``flush``, ``fsync``) fails with an ``OSError``
    that names no file (a full disk: ``[Errno 28] No space left on device``): inside this block it
    names ``path``, so :func:`os_error_line` can say which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise
