"""Imported first by the fork server of :func:`dpharness._run.forkserver_context`, and only there: the
processes it forks never re-run the caller's ``__main__``.

multiprocessing prepares every child of a fork server as it prepares a spawned one: it imports the
parent's main module again, as ``__mp_main__``, from its path or module name. A researcher's script that
calls ``audit`` at top level, without an ``if __name__ == "__main__":`` guard, would then start the
audit again in every worker, whose pool start fails and kills the worker. Nothing the workers run
needs ``__main__``: audit jobs travel by cloudpickle, which ships functions and classes defined in
``__main__`` by value, and the gate's tasks are dpharness functions. So here, in the fork server's
copy of :mod:`multiprocessing.spawn`, ``prepare`` drops the instruction to import the main module
(the workers of loky's own start method never import it either) and keeps the rest (the import path,
the working directory, the start method, ...). One exception: a dpharness module run with ``python -m``
(``python -m dpharness.cli gate``) is imported again by its name, since the gate's tasks are then
functions of ``__main__``, pickled by reference; dpharness's modules guard their entry points.

Ctrl-C belongs to the caller. The server and every process it forks ignore SIGINT (the server was
started with it blocked: :func:`dpharness._run.forkserver_context`), so a terminal's Ctrl-C, sent to
the whole process group, never raises in the server's imports or in a worker; the caller stops its
pool and kills the workers. A worker forked as the caller tears its pool down finds the pool's
semaphores already removed while it unpickles its start-up data: it exits with code 1, without the
traceback multiprocessing would print for it (there is no work it could have done)."""

from __future__ import annotations

import multiprocessing.spawn as _spawn
import signal
import sys
import traceback
from collections.abc import Mapping
from typing import Any

_prepare = _spawn.prepare


def _prepare_without_main(data: Mapping[str, Any]) -> None:
    name = data.get("init_main_from_name")
    keep = name is not None and (name == "dpharness" or name.startswith("dpharness."))
    _prepare({k: v for k, v in data.items() if k != "init_main_from_path" and (keep or k != "init_main_from_name")})


_spawn.prepare = _prepare_without_main


def _excepthook(kind, value, tb) -> None:
    """In a forked child, an exception reaches here only from before the worker's code ran (the
    process's own run reports its errors itself): quiet for a pool removed meanwhile, else as usual."""
    removed = issubclass(kind, FileNotFoundError) and any(
        f.f_code.co_name == "__setstate__" and f.f_code.co_filename.endswith("synchronize.py")
        for f, _line in traceback.walk_tb(tb)
    )
    if not removed:
        _default_excepthook(kind, value, tb)


_default_excepthook = sys.excepthook
sys.excepthook = _excepthook
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a SIGINT pending since the server started is dropped
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # every platform with a fork server has it
