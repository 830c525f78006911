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
functions of ``__main__``, pickled by reference; dpharness's modules guard their entry points."""

from __future__ import annotations

import multiprocessing.spawn as _spawn

_prepare = _spawn.prepare


def _prepare_without_main(data: dict) -> None:
    name = data.get("init_main_from_name")
    keep = name is not None and (name == "dpharness" or name.startswith("dpharness."))
    _prepare({k: v for k, v in data.items() if k != "init_main_from_path" and (keep or k != "init_main_from_name")})


_spawn.prepare = _prepare_without_main
