"""``python -m t2exp.generators._orphan_guard PARENT_PID COMMAND...``: run COMMAND so that it is
sent SIGTERM when the process that started it dies, however it dies (SIGKILL included).

On Linux the guard asks the kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG)``), which
survives the ``exec`` into COMMAND, then checks that PARENT_PID is still its parent (the parent
may have died before the request was made) and execs COMMAND in its own place: the server's pid
and process group are the guard's. Elsewhere it just execs. The signal follows the *thread* that
started the guard: ``t2exp.generators.vllm_server`` starts it from the thread that runs the
experiment, which lives as long as the run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: python -m t2exp.generators._orphan_guard PARENT_PID COMMAND...", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[1:]
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: run unguarded
            pass
        if os.getppid() != parent:
            return 1  # the parent is already gone: do not start an orphan
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"t2exp: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
