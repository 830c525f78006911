"""Audit targets for Opacus (``pip install opacus``; DP-SGD for PyTorch).

Written from Opacus's public documentation: ``opacus.GradSampleModule`` (per-sample gradients),
``opacus.optimizers.DPOptimizer(optimizer, noise_multiplier, max_grad_norm, expected_batch_size,
loss_reduction, generator)`` (clips each per-sample gradient to L2 norm ``max_grad_norm``, sums,
adds N(0, (noise_multiplier · max_grad_norm)^2) per coordinate) and
``opacus.accountants.RDPAccountant`` (``step(noise_multiplier, sample_rate)``,
``get_epsilon(delta)``). The claim is the library's own accountant after one step at sample rate 1
(the whole data set is the batch: no subsampling), read as ``get_epsilon(delta)`` at the target's
``delta`` (default 1e-5, a parameter).

Targets:

* ``opacus:dpsgd_step``: one real DP-SGD step. The model is ``Linear(1, 1, bias=False)`` with weight
  0 and loss ``sum_i w·x_i``, so record ``x_i``'s gradient is ``x_i``; the output is minus the weight
  after one SGD step with learning rate 1, i.e. the noisy sum of clipped gradients the optimizer
  applied.
* ``opacus:gaussian``: the optimizer's noise primitive (``opacus.optimizers.optimizer._generate_noise``,
  a private helper that ``DPOptimizer.add_noise`` calls) on the clipped sum, vectorised over a tensor
  of ``size`` entries. Private API: it may move between Opacus versions.

One-run auditing (not a registered target: it trains once, with canaries): :func:`one_run_training`,
logistic regression trained with ``PrivacyEngine``, audited by :func:`dpharness.one_run_audit`.

Randomness: both use a ``torch.Generator`` seeded from the auditor's ``rng`` per chunk
(``generator=``), so audits are reproducible and forked workers draw independent streams
(``secure_mode=False``; Opacus's secure mode takes no seed).

Neighbour relation (Opacus's accountant): add or remove one example; each per-example gradient is
clipped to L2 norm ``max_grad_norm``, so the sum moves by at most ``max_grad_norm``. Pair: three
examples with gradient 0 vs those and one with gradient ``max_grad_norm`` (the full step; 0 is where
float rounding leaks show first).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dpharness.core import AddRemove

from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "opacus", "opacus", "opacus"


def _claim(sigma: float, delta: float) -> tuple[float, str]:
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.step(noise_multiplier=sigma, sample_rate=1.0)
    eps = float(acc.get_epsilon(delta))
    return eps, (
        f"Opacus RDPAccountant after one step(noise_multiplier={sigma}, sample_rate=1.0): "
        f"get_epsilon(delta={delta!r}) = {eps!r} (delta is the target's parameter, default 1e-5)"
    )


def _generator(rng: np.random.Generator):
    import torch

    g = torch.Generator()
    g.manual_seed(int(rng.integers(0, 2**63 - 1)))
    return g


_COMMON = (
    Param("noise_multiplier", 1.0, "positive", "sigma: noise std / max_grad_norm"),
    Param("max_grad_norm", 1.0, "positive", "per-example L2 clipping norm"),
    Param("delta", 1e-5, "probability", "δ at which the accountant states ε"),
)


def _relation(c: float) -> str:
    return (
        f"data sets that differ by adding or removing one example (Opacus's accountant); each per-example "
        f"gradient clipped to L2 norm max_grad_norm = {c}, so the summed gradient moves by at most {c}"
    )


@register(
    "opacus:dpsgd_step",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="one DPOptimizer step (GradSampleModule, full batch, sample rate 1) on a 1-parameter model; "
    "output = the noisy clipped gradient sum (one step per sample)",
    params=(*_COMMON, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _dpsgd_step(v: dict) -> dict:
    import torch
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    sigma, c = v["noise_multiplier"], v["max_grad_norm"]
    eps, source = _claim(sigma, v["delta"])

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        gen = _generator(rng)
        model = GradSampleModule(torch.nn.Linear(1, 1, bias=False, dtype=torch.float64))
        x = torch.tensor(np.asarray(data, dtype=float).reshape(-1, 1), dtype=torch.float64)
        opt = DPOptimizer(
            torch.optim.SGD(model.parameters(), lr=1.0),
            noise_multiplier=sigma,
            max_grad_norm=c,
            expected_batch_size=max(1, len(x)),
            loss_reduction="sum",
            generator=gen,
        )
        weight = model._module.weight
        out = np.empty(int(size))
        for i in range(int(size)):
            with torch.no_grad():
                weight.zero_()
            opt.zero_grad(set_to_none=True)
            with warnings.catch_warnings():  # torch warns that the input needs no gradient: expected here
                warnings.simplefilter("ignore", UserWarning)
                model(x).sum().backward()
            opt.step()
            out[i] = -float(weight.detach().reshape(()))
        return out

    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    return dict(
        fn=fn,
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=float(v["delta"]),
        relation=_relation(c),
        claim_source=source,
        neighbor_relation=AddRemove(),
    )


@register(
    "opacus:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="DPOptimizer's noise primitive (_generate_noise, private API) on the clipped gradient sum; vectorised",
    params=(*_COMMON, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _gaussian(v: dict) -> dict:
    import torch
    from opacus.optimizers.optimizer import _generate_noise

    sigma, c = v["noise_multiplier"], v["max_grad_norm"]
    eps, source = _claim(sigma, v["delta"])

    def clipped_sum(data: Any) -> float:
        # what DPOptimizer computes before noise for scalar per-example gradients: each clipped to norm c
        g = np.asarray(data, dtype=float)
        factor = np.minimum(1.0, c / (np.abs(g) + 1e-6))  # Opacus's flat clipping factor: c / (norm + 1e-6), at most 1
        return float(np.sum(g * factor))

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        ref = torch.zeros(int(size), dtype=torch.float64)
        noise = _generate_noise(std=sigma * c, reference=ref, generator=_generator(rng), secure_mode=False)
        return (clipped_sum(data) + noise).numpy()

    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    return dict(
        fn=fn,
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=float(v["delta"]),
        relation=_relation(c),
        claim_source=source,
        neighbor_relation=AddRemove(),
    )


# --------------------------------------------------------------------------- one-run auditing (not a registered target)


def one_run_training(
    *,
    canaries: int = 1000,
    n: int = 10_000,
    steps: int = 100,
    sample_rate: float = 0.1,
    noise_multiplier: float = 2.0,
    max_grad_norm: float = 1.0,
    lr: float = 0.01,
    canary_scale: float = 10.0,
    delta: float = 1e-5,
    rng: np.random.Generator,
):
    """A :class:`~dpharness.auditors.one_run.OneRunTarget`: DP-SGD training with Opacus's
    ``PrivacyEngine`` (``make_private``, Poisson sampling, flat clipping to ``max_grad_norm``,
    ``loss_reduction="sum"``, the RDP accountant), audited in one run by
    :func:`dpharness.one_run_audit`.

    Model: logistic regression without bias on records ``(x1, x2, slot_1..slot_m, y)``: two features
    (the base data: ``n`` records, x uniform in [−1, 1]², y = 1 iff x1 + x2 > 0, drawn from ``rng``)
    and one input slot per canary, zero in every base record. Canaries (input-space, black-box):
    canary i is ``canary_scale`` in slot i, zero elsewhere, label 1; its score is minus the final
    model's logistic loss on it (no intermediate model is read). Training: ``steps`` optimizer steps
    of SGD (learning rate ``lr``) through Opacus's ``DPDataLoader`` (each record in a batch with
    probability ``sample_rate`` = 1/len(loader)) and ``DPOptimizer``. The batch size is chosen so that
    len(loader) = 1/sample_rate for every number of included canaries (Opacus derives the sample
    rate from it); a ``n`` too small for that is refused. Randomness: torch generators seeded from the
    ``rng`` the audit passes to ``run`` (``secure_mode=False``).

    The claim: Opacus's ``RDPAccountant`` after ``steps`` calls of ``step(noise_multiplier,
    sample_rate)``, ``get_epsilon(delta)`` (what ``PrivacyEngine.get_epsilon(delta)`` returns after
    this training)."""
    from dpharness import _validate as _v
    from dpharness.auditors.one_run import OneRunTarget
    from dpharness.errors import ParameterError

    m = _v.integer("canaries", canaries, minimum=1)
    n = _v.integer("n", n, minimum=1)
    steps = _v.integer("steps", steps, minimum=1)
    q = float(_v.probability("sample_rate", sample_rate, open_left=True))
    sigma = float(_v.positive("noise_multiplier", noise_multiplier))
    c = float(_v.positive("max_grad_norm", max_grad_norm))
    lr = float(_v.positive("lr", lr))
    scale = float(_v.positive("canary_scale", canary_scale))
    delta = float(_v.probability("delta", delta, open_left=True, open_right=True))
    rng = _v.rng("rng", rng)
    batches = round(1 / q)
    if abs(batches * q - 1) > 1e-12:
        raise ParameterError(
            f"sample_rate={q!r} is not 1/L for an integer L; Opacus's sample rate is 1/len(loader): "
            "pass e.g. 0.1 or 0.05."
        )
    batch = -(-(n + m) // batches)
    if -(-n // batch) != batches:
        raise ParameterError(
            f"n={n} with canaries={m} and sample_rate={q}: no batch size keeps len(loader) = "
            f"{batches} for every number of included canaries; pass n >= {(batches - 1) * m + 1}."
        )
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    eps = float(acc.get_epsilon(delta))
    source = (
        f"Opacus RDPAccountant after {steps} x step(noise_multiplier={sigma}, sample_rate={q}): "
        f"get_epsilon(delta={delta!r}) = {eps!r}"
    )
    width = 2 + m
    x = rng.uniform(-1, 1, size=(n, 2))
    data = np.zeros((n, width + 1))
    data[:, :2] = x
    data[:, width] = (x[:, 0] + x[:, 1] > 0).astype(float)
    cans = np.zeros((m, width + 1))
    cans[np.arange(m), 2 + np.arange(m)] = scale
    cans[:, width] = 1.0

    def run(records: np.ndarray, run_rng: np.random.Generator) -> np.ndarray:
        import torch
        from opacus import PrivacyEngine

        recs = torch.tensor(np.asarray(records, dtype=np.float32))
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(recs[:, :width], recs[:, width]),
            batch_size=batch,
            generator=_generator(run_rng),
        )
        model = torch.nn.Linear(width, 1, bias=False)
        with torch.no_grad():
            model.weight.zero_()
        with warnings.catch_warnings():  # Opacus warns about secure_mode=False: expected (the audit seeds it)
            warnings.simplefilter("ignore", UserWarning)
            engine = PrivacyEngine(accountant="rdp", secure_mode=False)
            model, opt, loader = engine.make_private(
                module=model,
                optimizer=torch.optim.SGD(model.parameters(), lr=lr),
                data_loader=loader,
                noise_multiplier=sigma,
                max_grad_norm=c,
                poisson_sampling=True,
                loss_reduction="sum",
                noise_generator=_generator(run_rng),
            )
        loss_fn = torch.nn.BCEWithLogitsLoss(reduction="sum")
        done = 0
        while done < steps:
            for xb, yb in loader:
                opt.zero_grad(set_to_none=True)
                with warnings.catch_warnings():  # torch warns that the input needs no gradient: expected here
                    warnings.simplefilter("ignore", UserWarning)
                    loss_fn(model(xb).reshape(-1), yb.reshape(-1)).backward()
                opt.step()
                done += 1
                if done == steps:
                    break
        return model._module.weight.detach().numpy().reshape(-1).astype(float)

    def score(weights: np.ndarray, canary_records: np.ndarray) -> np.ndarray:
        z = np.asarray(canary_records)[:, :width] @ np.asarray(weights, dtype=float)
        return -np.logaddexp(0.0, -z)  # minus the logistic loss at label 1

    return OneRunTarget(
        run=run,
        score=score,
        data=data,
        canaries=cans,
        epsilon=eps,
        delta=delta,
        name="opacus:dpsgd_training",
        claim_source=source,
        white_box=False,
        description=f"Opacus DP-SGD, logistic regression on 2 features + {m} canary slots, {steps} steps, "
        f"q = {q}, sigma = {sigma}, clip {c}, lr {lr}",
    )
