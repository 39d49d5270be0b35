"""Requests sent on daemon threads, at most ``workers`` at once, their answers delivered in input
order and, as each arrives, to ``on_result`` (written as it arrives: a resume does not ask again)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import cast

from t2exp.generators import Cancelled, Generation, OnResult

Done = queue.Queue[tuple[int, Generation | None, BaseException | None]]


def generate_concurrently(
    n: int, one: Callable[[int, threading.Event], Generation], workers: int, name: str, on_result: OnResult | None
) -> list[Generation]:
    """``one(i, stop)`` for ``i`` in ``range(n)``. A failure stops the rest: queued requests are not
    sent (``Cancelled``), and ``stop`` is set for those in flight; after every answer in flight was
    delivered, ``Cancelled`` or the first failure (by index) is raised."""
    stop = threading.Event()
    done = _start_workers(n, one, workers, name, stop)
    out: list[Generation | None] = [None] * n
    failed: dict[int, BaseException] = {}
    try:
        for _ in range(n):
            i, gen, exc = done.get()  # a signal's handler runs here (Interrupted on the second one)
            if exc is not None:
                failed[i] = exc
                continue
            out[i] = gen
            if on_result is not None:
                on_result(i, cast(Generation, gen))
    except BaseException:
        stop.set()  # queued prompts are not sent; backoffs are cut short
        raise
    if any(isinstance(e, Cancelled) for e in failed.values()):
        raise Cancelled()
    if failed:
        raise failed[min(failed)]
    return cast(list[Generation], out)


def _start_workers(n: int, one: Callable[[int, threading.Event], Generation], workers: int, name: str, stop: threading.Event) -> Done:
    """``workers`` threads taking requests in order; each result (or its exception, or ``Cancelled``
    for a request not sent because ``stop`` is set) arrives on the returned queue. Daemon threads: a
    second Ctrl-C (or the end of the stop grace) ends the process at once, not when the requests in
    flight return (an executor's threads are joined at exit)."""
    pending: queue.Queue[int] = queue.Queue()
    for i in range(n):
        pending.put(i)
    done: Done = queue.Queue()

    def work() -> None:
        while True:
            try:
                i = pending.get_nowait()
            except queue.Empty:
                return
            if stop.is_set():  # the run is ending: not sent
                done.put((i, None, Cancelled()))
                continue
            try:
                done.put((i, one(i, stop), None))
            except BaseException as exc:  # delivered to the caller's thread
                done.put((i, None, exc))

    for w in range(min(workers, n)):
        threading.Thread(target=work, name=f"{name}-{w}", daemon=True).start()
    return done
