"""Running audit chunks on a ``dask.distributed`` cluster (the optional ``dask`` extra:
``pip install -e '.[dask]'`` in the dpharness checkout).

``cluster`` is one of:

* ``None`` — no cluster (this process, or the local worker pool of :mod:`._runner`);
* ``"local"`` — a ``LocalCluster`` of worker processes (one thread each; ``workers`` of them),
  started for the call and closed afterwards;
* an address ``"tcp://HOST:PORT"`` (also ``tls://``, ``ucx://``, ``ws://``, ``wss://``,
  ``inproc://``) — a ``Client`` connected for the call (at most :data:`_CONNECT_TIMEOUT` seconds)
  and closed afterwards; the workers must have ``dpharness`` and whatever the mechanism imports;
* a ``dask.distributed.Client`` — used as is and left open. Per-call mechanisms run one chunk at a
  time in each worker process (they share its random states), so give such workers one thread
  each (``dask worker ADDRESS --nthreads 1``).

The job (sampler and events; closures included, pickled with cloudpickle by :mod:`._runner`) is
scattered to the cluster once; each task runs one chunk and returns its counts (certification) or
outputs (training). :func:`session` opens one of these once for a whole audit.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, Callable, Iterator

from dpharness.errors import MechanismError, ParameterError, UnsupportedError, install_extra

__all__ = ["check_cluster", "is_client", "session", "DaskBackend"]

_CONNECT_TIMEOUT = 10.0  # seconds to reach a scheduler before giving up
_ADDRESS = re.compile(r"^(tcp|tls|ucx|ws|wss|inproc)://[^\s/]+$")
_FORMS = (
    'None, "local" (a dask LocalCluster on this machine), an address "tcp://HOST:PORT", or a dask.distributed.Client'
)
_EXTRA = install_extra("dask")


def _distributed():
    """The ``distributed`` module, or one clear error naming the extra."""
    try:
        import distributed
    except ImportError as exc:
        raise UnsupportedError(
            f"a dask cluster needs the optional dask extra, which is not installed ({exc}); run {_EXTRA} "
            "(dask[distributed]) or pass cluster=None to use the local worker pool."
        ) from exc
    return distributed


def is_client(cluster: Any) -> bool:
    """True iff ``cluster`` is a ``dask.distributed.Client`` (without importing dask when it is not loaded)."""
    import sys

    mod = sys.modules.get("distributed")
    return mod is not None and isinstance(cluster, mod.Client)


def check_cluster(cluster: Any) -> None:
    """ParameterError for a value that is none of the accepted forms; UnsupportedError without dask."""
    if cluster is None or is_client(cluster):
        return
    if isinstance(cluster, str):
        if cluster != "local" and not _ADDRESS.match(cluster):
            hint = f' (did you mean "tcp://{cluster}"?)' if re.match(r"^[^\s/:]+:\d+$", cluster) else ""
            raise ParameterError(f"cluster={cluster!r} is not a cluster{hint}; pass {_FORMS}.")
        _distributed()
        return
    hint = (
        f" (for a dask cluster object, pass Client(cluster) or its address {cluster.scheduler_address!r})"
        if isinstance(getattr(cluster, "scheduler_address", None), str)
        else ""
    )
    raise ParameterError(f"cluster={cluster!r:.80} ({type(cluster).__name__}) is not a cluster{hint}; pass {_FORMS}.")


def _open(cluster: Any, workers: int) -> tuple[Any, Callable[[], None]]:
    """(client, close) for an accepted ``cluster`` value other than None."""
    check_cluster(cluster)
    distributed = _distributed()
    if is_client(cluster):
        return cluster, lambda: None
    if cluster == "local":
        local = distributed.LocalCluster(
            n_workers=max(1, int(workers)),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        try:
            client = distributed.Client(local, set_as_default=False)
        except BaseException:
            local.close()
            raise

        def close() -> None:
            client.close()
            local.close()

        return client, close
    try:
        client = distributed.Client(cluster, timeout=_CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ParameterError(
            f"cluster={cluster!r}: no dask scheduler answered within {_CONNECT_TIMEOUT:g} s ({first[:160]}); "
            "start one there (dask scheduler; dask worker ADDRESS) or check the address."
        ) from None
    return client, client.close


@contextlib.contextmanager
def session(cluster: Any, workers: int) -> Iterator[Any]:
    """Open ``cluster`` once (see the module docstring) and yield what to pass as ``cluster=``: a Client or None."""
    if cluster is None:
        yield None
        return
    client, close = _open(cluster, workers)
    try:
        yield client
    finally:
        close()


class DaskBackend:
    """What :class:`dpharness.auditors._runner._Tasks` needs from a cluster: submit, wait, cancel, close."""

    def __init__(self, client: Any, close: Callable[[], None], distributed: Any) -> None:
        self.client, self._close, self._distributed = client, close, distributed

    @classmethod
    def open(cls, cluster: Any, workers: int) -> "DaskBackend":
        client, close = _open(cluster, workers)
        return cls(client, close, _distributed())

    def share(self, payload: bytes) -> Any:
        """Send the pickled job to the cluster once; tasks get a reference to it."""
        return self.client.scatter(payload, broadcast=False, hash=False)

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def wait_first(self, futures: list, timeout: float) -> list:
        try:
            with self.client.as_current():
                done, _ = self._distributed.wait(futures, timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def result(self, fut: Any, where: str) -> Any:
        try:
            return fut.result()
        except self._distributed.KilledWorker as exc:
            raise MechanismError(
                f"dask workers died running {where} ({str(exc)[:300]}); the mechanism may crash the "
                "interpreter or exhaust a worker's memory: try workers=1 without a cluster to see "
                "its error."
            ) from exc

    def cancel(self, futures: list) -> None:
        self.client.cancel(futures)

    def abort(self) -> None:
        pass  # the hung tasks are cancelled by cancel(); a LocalCluster opened here is closed by close()

    def describe(self, workers: int) -> str:
        try:
            n = len(self.client.scheduler_info(n_workers=-1)["workers"])
        except Exception:  # noqa: BLE001 - only for the message
            return f"the dask cluster at {self.client.scheduler.address}"
        return f"the dask cluster at {self.client.scheduler.address} ({n} workers)"

    def close(self) -> None:
        self._close()
