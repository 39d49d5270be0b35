"""SIGINT and SIGTERM, the two signals every t2exp process stops on, and the processes they reach
(found with psutil): one :class:`Interrupted`, the signals passed on to a sweep's cell workers and
to ``t2exp reproduce``'s run, and one way to stop a child process with its process group."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
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
    about it); a run's MLflow run is closed as KILLED."""

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
    """loky's resource tracker: a child of a sweep's launcher that runs no cell and ends with it."""
    try:
        return "resource_tracker" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def group_members(pgid: int, *, session: bool = False) -> list[str]:
    """``"pid name"`` of each live process (not zombies) of process group ``pgid`` (or session: ``session``)."""
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


def process_ended(pid: int) -> bool:
    """No process has ``pid`` now, or only one that has ended and waits for its reaper (a zombie)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # there, another user's
        return False


def stop_process(proc: subprocess.Popen[bytes], grace: float, *, term_group: bool, kill_wait: float = 10.0) -> signal.Signals | None:
    """SIGTERM ``proc`` (the leader of its own process group), then SIGKILL its whole group if it is
    still there ``grace`` seconds later (waiting at most ``kill_wait`` more); the last signal sent
    (None: it had ended). SIGTERM goes to the group with ``term_group`` (a model server's workers),
    else to ``proc`` alone (a t2exp run passes it on to its workers: a second one stops them at once)."""
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
        with suppress(ProcessLookupError):  # it leads no group (any more): the process alone
            return os.killpg(proc.pid, sig)
    proc.send_signal(sig)  # nothing once it has been reaped


def _ended(proc: subprocess.Popen[bytes], group: bool, wait: float) -> bool:
    """Whether ``proc`` (and, with ``group``, all of its group) has ended, waiting at most ``wait`` s."""
    deadline = time.monotonic() + wait
    while proc.poll() is None or (group and group_alive(proc.pid)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# --- signals passed on ----------------------------------------------------------------------------
class PassOnToChild:
    """SIGINT/SIGTERM while :attr:`child` runs (``t2exp reproduce``'s run, in its own process group:
    a Ctrl-C reaches it once, through here) are passed on to it, which stops as any run does;
    :attr:`received` names the first. With no child running a signal raises :class:`Interrupted`."""

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
        return handle_stop_signals(self.handler)


_forwarded: list[str] = []  # the signals this launching process passed on to its cell processes


def forwarded_signal() -> str | None:
    """The first SIGTERM/SIGINT this launching process passed on to its cells, or None."""
    return _forwarded[0] if _forwarded else None


def start_sweep_signals(local_workers: bool) -> None:
    """A sweep starts here (what an earlier one passed on is forgotten). With ``local_workers``
    (``hydra/launcher=local_parallel``) SIGTERM/SIGINT sent to the launching process alone (``kill
    PID``, ``docker stop``) is passed on to its cell processes, which stop as a run does; the sweep
    then ends, its parent run KILLED. A terminal's Ctrl-C reaches the cells already."""
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
        with suppress(ProcessLookupError):
            os.kill(pid, signum)
    log.warning("%s: passed on to the %d cell processes; the sweep ends when they have stopped", name, len(kids))


def _keyboard_reaches_the_group() -> bool:
    """This process's group is the foreground of its terminal: a Ctrl-C there signals every cell."""
    try:
        with open("/dev/tty", "rb", buffering=0) as tty:
            return os.tcgetpgrp(tty.fileno()) == os.getpgrp()
    except OSError:  # no controlling terminal (a batch job, a service, a test)
        return False


def end_local_workers() -> None:
    """End the cell processes of this interpreter's ``local_parallel`` sweeps, which loky keeps for
    a next sweep (each holding the models its cells loaded); its resource tracker ends with us."""
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)
