"""SIGINT and SIGTERM, the two signals every t2exp process stops on, and the processes they reach:
one :class:`Interrupted`; one way to handle both for a while (:func:`handle_stop_signals`); a
signal passed on to child processes (a ``local_parallel`` sweep's cell workers:
:func:`start_sweep_signals`; ``t2exp reproduce``'s run: :class:`PassOnToChild`); a child process
stopped with its process group (:func:`stop_process`). Processes are found with psutil."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("t2exp")


def signal_exit_status(signal_name: str) -> int:
    """128 + the number of the signal ``signal_name`` (unknown: SIGTERM's): the exit status of a
    command that signal stopped."""
    return 128 + int(getattr(signal.Signals, signal_name, signal.SIGTERM))


class Interrupted(BaseException):
    """A run or command was stopped by SIGTERM/SIGINT (``signal_name``; ``detail``: what was done
    about it, after the name in the message); a run's MLflow run is closed as KILLED."""

    def __init__(self, signal_name: str = "SIGTERM", detail: str = "") -> None:
        super().__init__(f"{signal_name}; {detail}" if detail else signal_name)
        self.signal_name = signal_name

    @property
    def exit_status(self) -> int:
        return signal_exit_status(self.signal_name)


def handle_stop_signals(handler: Callable[[int, Any], Any]) -> Callable[[], None]:
    """``handler`` for SIGTERM and SIGINT; returns what puts the previous handlers back. Handlers
    can only be set from the main thread: elsewhere nothing is set and the restore does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


# --- processes ------------------------------------------------------------------------------------
def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started (none once it has ended)."""
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def is_resource_tracker(pid: int) -> bool:
    """loky's (or multiprocessing's) resource tracker: a child of a sweep's launcher that runs no
    cell and ends with it."""
    try:
        return "resource_tracker" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def group_members(pgid: int, *, session: bool = False) -> list[str]:
    """``"pid name"`` of each live process (zombies waiting for a reaper do not count) of process
    group ``pgid``, or of session ``pgid`` too (``session``)."""
    found = []
    for p in psutil.process_iter(["name", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and (os.getpgid(p.pid) == pgid or (session and os.getsid(p.pid) == pgid)):
                found.append(f"{p.pid} {p.info['name']}")
        except OSError:  # ended meanwhile
            continue
    return found


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies waiting for a reaper do not count)."""
    return bool(group_members(pgid))


def stop_process(proc: subprocess.Popen[bytes], grace: float, *, term_group: bool, kill_wait: float = 10.0) -> signal.Signals | None:
    """Stop ``proc``, the leader of its own process group (``start_new_session`` or
    ``process_group=0``): SIGTERM, then, if it is still there ``grace`` seconds later, SIGKILL to
    its whole group. SIGTERM goes to the whole group with ``term_group`` (a model server: its
    engine and workers stop with it), else to ``proc`` alone (a t2exp run passes it on to its own
    workers, for which a second signal means stop at once). Each wait lasts until what was
    signalled has ended, SIGKILL's at most ``kill_wait`` seconds. The last signal sent (None: it
    had ended already)."""
    if _ended(proc, term_group, 0.0):
        return None
    _send(proc, signal.SIGTERM, term_group)
    if _ended(proc, term_group, grace):
        return signal.SIGTERM
    _send(proc, signal.SIGKILL, True)
    _ended(proc, True, kill_wait)
    return signal.SIGKILL


def _send(proc: subprocess.Popen[bytes], sig: signal.Signals, group: bool) -> None:
    if group:
        try:
            os.killpg(proc.pid, sig)
            return
        except ProcessLookupError:  # it leads no group (any more): the process alone
            pass
    proc.send_signal(sig)  # nothing once it has been reaped


def _ended(proc: subprocess.Popen[bytes], group: bool, wait: float) -> bool:
    """Whether ``proc`` (and, with ``group``, every process of its group) has ended, waiting at most ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while proc.poll() is None or (group and group_alive(proc.pid)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# --- signals passed on ----------------------------------------------------------------------------
class PassOnToChild:
    """SIGINT/SIGTERM while :attr:`child` runs are passed on to it (``t2exp reproduce``'s ``python
    -m t2exp``, in its own process group, so a terminal's Ctrl-C reaches it once, through here),
    which stops as any t2exp run does: the requests in flight finish, its MLflow run is marked
    KILLED. :attr:`received` names the first signal. With no child running a signal raises
    :class:`Interrupted` at once."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.received: str | None = None

    def handler(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        self.received = self.received or name
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)  # a second Ctrl-C is the run's second: it stops at once
            return
        raise Interrupted(name)

    def install(self) -> Callable[[], None]:
        """Handle both signals (main thread only); returns what puts the previous handlers back."""
        return handle_stop_signals(self.handler)


_forwarded: list[str] = []  # the signals this launching process passed on to its cell processes


def forwarded_signal() -> str | None:
    """The first SIGTERM/SIGINT this launching process passed on to its cells, or None."""
    return _forwarded[0] if _forwarded else None


def start_sweep_signals(local_workers: bool) -> None:
    """A sweep starts in this process: a signal an earlier sweep of it passed on is forgotten.

    With ``local_workers`` (``hydra/launcher=local_parallel``), SIGTERM or SIGINT sent to the
    launching process alone (``kill PID``, ``docker stop``) is passed on to its cell processes,
    which stop as a run does (the requests in flight finish and are written, the child run is
    KILLED; a second signal stops them at once); the sweep then ends and its parent run is closed
    as KILLED. Ctrl-C in a terminal reaches every process of the group already: passed on, it
    would be the cells' second signal."""
    _forwarded.clear()
    if local_workers:
        handle_stop_signals(_pass_on_to_workers)


def _pass_on_to_workers(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    _forwarded.append(name)
    if signum == signal.SIGINT and _keyboard_reaches_the_group():
        return  # a terminal's Ctrl-C went to the cells too: passed on, it would be their second
    kids = [pid for pid in child_pids(os.getpid()) if not is_resource_tracker(pid)]
    for pid in kids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    log.warning("%s: passed on to the %d cell processes; the sweep ends when they have stopped", name, len(kids))


def _keyboard_reaches_the_group() -> bool:
    """This process's group is the foreground of its terminal: a Ctrl-C there signals every cell."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
    except OSError:  # no controlling terminal (a batch job, a service, a test)
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def end_local_workers() -> None:
    """End the cell processes of this interpreter's ``local_parallel`` sweeps: loky keeps its
    workers for a next sweep (idle for minutes, each holding the models its cells loaded), and a
    sweep run in-process (a notebook, the tests) would leave them running. Nothing when no sweep
    ran here (loky not imported); its resource tracker ends with this process."""
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)
