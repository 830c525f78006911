"""Candidate events for vector outputs (shape ``(n, k)``): a learned likelihood-ratio score,
thresholded, and exact pattern sets where the space of output patterns is small.

The approach follows DP-Sniper (Bichsel, Steffen, Bogunovic and Vechev, "DP-Sniper: Black-Box
Discovery of Differential Privacy Violations using Classifiers", IEEE S&P 2021, Alg. 1-2): a
classifier that tells outputs on D from outputs on D' is, by the Neyman-Pearson lemma, a
likelihood-ratio score, and the events worth certifying are its level sets. Two departures:

* no ``ln(1/c)`` cap: DP-Sniper only considers events of probability >= c (0.01 by default), so it
  can never certify more than ``ln(1/c)`` (4.6 for NoisyHist2, whose true ε is 10). Here every
  threshold of the score is a candidate and the threshold is chosen by the bound it is expected to
  certify on the planned number of fresh samples, tails included;
* the score is a logistic regression on a small feature map (numpy/scipy, no deep-learning stack):
  per continuous coordinate its standardised value and a ramp between the two inputs' medians
  (the exact log-likelihood ratio of a Laplace location shift is linear in that ramp), per discrete
  coordinate one-hot indicators, and indicators for atoms (sentinel values such as "not answered").
  A sparse refit keeps only the features whose Wald statistic is large, so coordinates that do not
  differ add no noise to the score. Shifts spread over several coordinates (a histogram under
  substitution: one bin down, another up) are combined by the additive score, which no
  per-coordinate test sees.

Two more scores cover many weak coordinates, where a regression's weights are mostly noise: a
signed vote (+1/−1 on each [0, 1]-valued feature that leans to one side: the bits of RAPPOR) and a
tied score (one ramp shared by all continuous coordinates, fitted on them pooled: 20 parallel
Laplace mechanisms, whose exact log-likelihood ratio it is).

Scores are fitted on the first half of the training rows (at most 250 000 a side); thresholds are
chosen on the second half, at each distinct value of a score with few values, else at a geometric
grid of tail quantiles, by the projected certified bound less one held-out standard error (so the
luckiest of many thin tails does not win).

Where the pooled training rows take few distinct values (SVT answer patterns, small RAPPOR filters)
the events are exact pattern sets: patterns ordered by their estimated likelihood ratio, the top k.

Soundness is not this module's concern: events are chosen from the training samples only, and the
driver (:func:`dpharness.auditors.audit`) certifies them on fresh samples. Every event is a
picklable callable object, vectorised over the rows of ``outputs``, with a description in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpharness.core import Event
from dpharness.errors import ParameterError

__all__ = ["propose_vector_events"]

_MAX_DISCRETE_VALUES = 12  # a column with at most this many distinct values is categorical
_MAX_PATTERNS = 4096  # exact pattern events when the pooled rows take at most this many patterns
_ATOM_SHARE = 0.01  # a value repeated in >= 1% of a continuous column's rows is an atom
_MAX_FIT_ROWS = 250_000  # rows per side used to fit the score (the rest choose thresholds)
_WALD_KEEP = 4.0  # sparse refit keeps features with |Wald z| >= this
_MIN_HITS = 25  # a threshold needs this many held-out hits on the favoured side
_MAX_THRESHOLDS = 64  # a score with more distinct values is cut at this many tail quantiles
_HOLDOUT_SE = 1.0  # thresholds are judged at (projected bound) - 1 held-out standard error
_VOTE_Z = 0.5  # the vote score counts bounded features whose univariate |z| >= this
_VOTE_REL = 0.25  # ... and >= this share of the strongest coordinate's |z|
_SCORE_BLOCK = 1 << 16  # rows per block when a linear score is computed on many rows


# --------------------------------------------------------------------------- public API


def propose_vector_events(
    train_a: np.ndarray,
    train_b: np.ndarray,
    *,
    max_events: int = 8,
    certify_samples: int | None = None,
    confidence: float = 0.95,
) -> list[Event]:
    """Candidate events separating vector outputs on D (``train_a``) from outputs on D' (``train_b``).

    ``train_a``/``train_b``: training outputs, shape ``(n, k)`` (``(n,)`` is read as ``k = 1``), the
    same ``k`` on both sides. ``max_events``: at most this many events are returned, the most
    promising first. ``certify_samples``: the number of fresh samples a side the driver will certify
    on; with ``confidence`` it sets how far into the tails a threshold may go to pay off. When it is
    not given, thresholds are proposed for 1, 10 and 100 times the training size (the driver ranks
    them again knowing its certification size). Each event's ``contains(outputs)`` takes an ``(m, k)`` array and
    returns an ``(m,)`` bool array; its description says which input it favours.

    Deterministic: the same training samples give the same events."""
    a = _as_matrix("train_a", train_a)
    b = _as_matrix("train_b", train_b)
    if a.shape[1] != b.shape[1]:
        raise ParameterError(
            f"train_b has {b.shape[1]} columns but train_a has {a.shape[1]}; "
            "pass outputs of the same mechanism (same k) on both inputs."
        )
    if isinstance(max_events, bool) or not isinstance(max_events, (int, np.integer)) or max_events < 1:
        raise ParameterError(f"max_events={max_events!r} must be a positive int; pass e.g. max_events=8.")
    for name, arr in (("train_a", a), ("train_b", b)):
        if len(arr) < 20:
            raise ParameterError(f"{name} has {len(arr)} rows; pass at least 20 training outputs a side.")
    if certify_samples is None:
        n_cert: tuple[int, ...] = (len(a), 10 * len(a), 100 * len(a))
    elif isinstance(certify_samples, bool) or not isinstance(certify_samples, (int, np.integer)) or certify_samples < 1:
        raise ParameterError(
            f"certify_samples={certify_samples!r} must be a positive int; pass the "
            "number of fresh samples a side the driver certifies on."
        )
    else:
        n_cert = (int(certify_samples),)
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ParameterError(f"confidence={confidence!r} must lie in (0, 1); pass e.g. 0.95.")
    return _propose(a, b, int(max_events), n_cert, float(confidence))


# --------------------------------------------------------------------------- validation


def _as_matrix(name: str, arr) -> np.ndarray:
    x = np.asarray(arr)
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2:
        raise ParameterError(f"{name} has shape {x.shape}; pass outputs of shape (n, k).")
    if x.dtype == bool:
        x = x.astype(np.int8)
    if not np.issubdtype(x.dtype, np.number):
        raise ParameterError(f"{name} has dtype {x.dtype}; pass numeric outputs (encode categories as ints).")
    if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
        raise ParameterError(
            f"{name} has NaN or infinite entries; pass finite outputs (encode 'no answer' as a sentinel value)."
        )
    return x


# --------------------------------------------------------------------------- events


class _ScoreEvent:
    """{x : s(x) >= t} or {x : s(x) <= t} for a score object with ``k`` and ``score(rows)`` (picklable)."""

    def __init__(self, scorer, threshold: float, above: bool) -> None:
        self.scorer, self.threshold, self.above = scorer, threshold, above

    def score(self, outputs: np.ndarray) -> np.ndarray:
        return self.scorer.score(_rows(outputs, self.scorer.k))

    def __call__(self, outputs: np.ndarray) -> np.ndarray:
        s = self.score(outputs)
        return s >= self.threshold if self.above else s <= self.threshold


class _PatternEvent:
    """Membership of a row's exact pattern in a fixed set of patterns (picklable)."""

    def __init__(self, coder: "_PatternCoder", codes: np.ndarray) -> None:
        self.coder, self.codes = coder, np.sort(codes)

    def __call__(self, outputs: np.ndarray) -> np.ndarray:
        c = self.coder.encode(_rows(outputs, self.coder.k))
        idx = np.clip(np.searchsorted(self.codes, c), 0, len(self.codes) - 1)
        return (c >= 0) & (self.codes[idx] == c)


def _rows(outputs, k: int) -> np.ndarray:
    x = np.asarray(outputs)
    if x.ndim == 1 and k == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2 or x.shape[1] != k:
        raise ParameterError(f"outputs have shape {x.shape}; this event tests rows of {k} coordinates.")
    return x


# --------------------------------------------------------------------------- feature map


@dataclass
class _Column:
    j: int
    kind: str  # "discrete" | "continuous"
    values: np.ndarray  # discrete: indicator values; continuous: atom values
    center: float = 0.0
    scale: float = 1.0
    lo: float = 0.0
    hi: float = 0.0


class _FeatureMap:
    """Per-coordinate features: one-hot for categorical coordinates; for continuous ones the
    standardised value, a ramp between the two inputs' medians and atom indicators."""

    def __init__(self, a: np.ndarray, b: np.ndarray, coordinates: np.ndarray | None = None) -> None:
        self.k = a.shape[1]
        # the coordinates' screening, said in every description of a score on them
        self.screening = (
            ""
            if coordinates is None
            else f", fitted on the {len(coordinates)} of {self.k} coordinates whose means differ most on the fitting rows"
        )
        self.columns: list[_Column] = []
        self.names: list[str] = []
        for j in range(self.k) if coordinates is None else coordinates.tolist():
            col = np.concatenate([a[:, j], b[:, j]])
            sub = col if len(col) <= 200_000 else col[:: len(col) // 200_000 + 1]
            vals, counts = np.unique(sub, return_counts=True)
            if len(vals) < 2:
                continue  # constant: carries no information
            if len(vals) <= _MAX_DISCRETE_VALUES:
                keep = np.delete(vals, int(np.argmax(counts)))  # most common value is the baseline
                self.columns.append(_Column(j, "discrete", keep))
                self.names += [f"[x{j} = {_fmt(v)}]" for v in keep]
                continue
            atoms = vals[counts >= _ATOM_SHARE * len(sub)]
            ca = a[:, j][~np.isin(a[:, j], atoms)].astype(float)
            cb = b[:, j][~np.isin(b[:, j], atoms)].astype(float)
            if len(ca) < 10 or len(cb) < 10:
                self.columns.append(_Column(j, "discrete", atoms))
                self.names += [f"[x{j} = {_fmt(v)}]" for v in atoms]
                continue
            pooled = np.concatenate([ca, cb])
            q25, med, q75 = np.quantile(pooled, [0.25, 0.5, 0.75])
            scale = float(q75 - q25) or float(np.std(pooled)) or 1.0
            ma, mb = float(np.median(ca)), float(np.median(cb))
            lo, hi = min(ma, mb), max(ma, mb)
            if hi - lo < 1e-9 * scale:
                lo = hi = float(med)
            self.columns.append(_Column(j, "continuous", atoms, float(med), scale, lo, hi))
            self.names += [f"[x{j} = {_fmt(v)}]" for v in atoms]
            self.names += [
                f"(x{j} - {_fmt(med)})/{_fmt(scale)}",
                f"clip(x{j}, {_fmt(lo)}, {_fmt(hi)})" if hi > lo else f"[x{j} > {_fmt(lo)}]",
            ]

    @property
    def n_features(self) -> int:
        return len(self.names)

    def score(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``transform(x) @ w`` without building the feature matrix (features of weight 0 skipped).

        A continuous coordinate's contribution is its weighted value terms, replaced on its atoms
        by the atom's weight: each row meets at most one atom, and every other term there is 0, so
        this adds the same doubles in the same order as the matrix product's nonzero terms."""
        s = np.zeros(len(x))
        f = 0
        for c in self.columns:
            nf = len(c.values) + (2 if c.kind == "continuous" else 0)
            wc = w[f : f + nf]
            f += nf
            if not np.any(wc):
                continue
            v = x[:, c.j]
            if c.kind != "continuous":
                for i, val in enumerate(c.values):
                    if wc[i] != 0:
                        s[v == val] += wc[i]
                continue
            vf = v.astype(float)
            part = None
            if wc[-2] != 0:
                part = np.subtract(vf, c.center)
                part /= c.scale
                np.clip(part, -50, 50, out=part)
                part *= wc[-2]
            if wc[-1] != 0:
                if c.hi > c.lo:
                    ramp = np.clip(vf, c.lo, c.hi)
                    ramp -= c.lo
                    ramp /= c.hi - c.lo
                else:
                    ramp = (vf > c.lo).astype(float)
                ramp *= wc[-1]
                part = ramp if part is None else np.add(part, ramp, out=part)
            if part is None:
                part = np.zeros(len(x))
            for i, val in enumerate(c.values):
                part[v == val] = wc[i]
            s += part
        return s

    def transform(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((len(x), self.n_features))
        f = 0
        for c in self.columns:
            v = x[:, c.j]
            for val in c.values:
                out[:, f] = v == val
                f += 1
            if c.kind == "continuous":
                atom = np.isin(v, c.values) if len(c.values) else np.zeros(len(v), bool)
                vf = v.astype(float)
                out[:, f] = np.where(atom, 0.0, np.clip((vf - c.center) / c.scale, -50, 50))
                if c.hi > c.lo:
                    ramp = (np.clip(vf, c.lo, c.hi) - c.lo) / (c.hi - c.lo)
                else:
                    ramp = (vf > c.lo).astype(float)
                out[:, f + 1] = np.where(atom, 0.0, ramp)
                f += 2
        return out


def _fmt(v) -> str:
    return f"{float(v):.4g}"


class _LinearScorer:
    """s(x) = Σ_f w_f · feature_f(x) on a feature map."""

    def __init__(self, fmap: "_FeatureMap", w: np.ndarray) -> None:
        self.fmap, self.w, self.k = fmap, w, fmap.k

    def score(self, x: np.ndarray) -> np.ndarray:
        # each row's score depends on that row alone: computed on blocks of rows, whose temporaries
        # stay in the CPU's cache (three times faster on a chunk of 10^6 rows), the same values
        if len(x) <= 2 * _SCORE_BLOCK:
            return self.fmap.score(x, self.w)
        out = np.empty(len(x))
        for start in range(0, len(x), _SCORE_BLOCK):
            out[start : start + _SCORE_BLOCK] = self.fmap.score(x[start : start + _SCORE_BLOCK], self.w)
        return out


class _TiedScorer:
    """s(x) = Σ_j ramp(sign_j · (x_j − c_j)) with one ramp shared by the continuous coordinates.

    For many coordinates with the same small shift (20 parallel Laplace mechanisms) each
    coordinate's own ramp is estimated from one column, the shared ramp from all of them pooled;
    between the pooled medians it is the exact log-likelihood ratio of a Laplace location shift.
    ``sign_j`` orients coordinate j so that the data side is the upper one."""

    def __init__(self, k: int, cols: np.ndarray, centers: np.ndarray, signs: np.ndarray, lo: float, hi: float) -> None:
        self.k, self.cols, self.centers, self.signs, self.lo, self.hi = k, cols, centers, signs, lo, hi

    def score(self, x: np.ndarray) -> np.ndarray:
        d = (x[:, self.cols].astype(float) - self.centers) * self.signs
        if self.hi > self.lo:
            r = (np.clip(d, self.lo, self.hi) - self.lo) / (self.hi - self.lo)
        else:
            r = (d > self.lo).astype(float)
        return r.sum(axis=1)

    def describe(self) -> str:
        cols = ", ".join(
            f"{'-' if sg < 0 else ''}(x{j} - {_fmt(c)})"
            for j, c, sg in zip(self.cols[:4], self.centers[:4], self.signs[:4])
        )
        more = f", ... ({len(self.cols)} coordinates)" if len(self.cols) > 4 else ""
        return f"Σ clip(d_j, {_fmt(self.lo)}, {_fmt(self.hi)}) over d_j in {cols}{more}"


def _tied(fmap: "_FeatureMap", fa: np.ndarray, fb: np.ndarray) -> _TiedScorer | None:
    cont = [c for c in fmap.columns if c.kind == "continuous"]
    if len(cont) < 3:
        return None
    cols = np.array([c.j for c in cont])
    centers = np.array([c.center for c in cont])
    da = fa[:, cols].astype(float) - centers
    db = fb[:, cols].astype(float) - centers
    signs = np.sign(np.median(da, axis=0) - np.median(db, axis=0))
    keep = signs != 0
    if np.count_nonzero(keep) < 3:
        return None
    cols, centers, signs = cols[keep], centers[keep], signs[keep]
    pa = (da[:, keep] * signs).ravel()
    pb = (db[:, keep] * signs).ravel()
    step = max(1, len(pa) // 2_000_000)
    ma, mb = float(np.median(pa[::step])), float(np.median(pb[::step]))
    return _TiedScorer(fmap.k, cols, centers, signs, min(ma, mb), max(ma, mb))


# --------------------------------------------------------------------------- logistic regression


def _fit_logistic(x: np.ndarray, y: np.ndarray, ridge: float = 1e-6) -> np.ndarray:
    """Weights (last entry: intercept) of an L2-regularised logistic regression, by L-BFGS-B."""
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    xs = (x - mu) / sd
    n, p = xs.shape

    def loss(w):
        z = xs @ w[:p] + w[p]
        # log(1 + e^z) - y z, stably
        val = np.logaddexp(0.0, z) - y * z
        r = 1.0 / (1.0 + np.exp(-z)) - y
        g = np.empty(p + 1)
        g[:p] = xs.T @ r / n + 2 * ridge * w[:p]
        g[p] = r.mean()
        return val.mean() + ridge * float(w[:p] @ w[:p]), g

    from scipy import optimize as _opt  # deferred: worker processes that only count events never load it

    res = _opt.minimize(
        loss, np.zeros(p + 1), jac=True, method="L-BFGS-B", options={"maxiter": 200, "gtol": 1e-7, "ftol": 1e-11}
    )  # proposals only: no need to polish
    w = res.x[:p] / sd
    return np.append(w, res.x[p] - float(mu @ w))


def _wald_z(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Wald statistics w_i / se(w_i) of a fitted logistic regression (last weight: intercept)."""
    if len(x) > 100_000:
        step = len(x) // 100_000 + 1
        x, y = x[::step], y[::step]
        scale = step
    else:
        scale = 1
    xi = np.hstack([x, np.ones((len(x), 1))])
    z = xi @ w
    pi = 1.0 / (1.0 + np.exp(-z))
    h = (xi * (pi * (1 - pi))[:, None]).T @ xi * scale
    try:
        cov = np.linalg.pinv(h)
    except np.linalg.LinAlgError:  # pragma: no cover - pinv does not fail on finite input
        return np.zeros(len(w) - 1)
    se = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    return (w / se)[:-1]


# --------------------------------------------------------------------------- exact patterns


class _PatternCoder:
    """Mixed-radix integer code of a row, from the values each coordinate took in training (-1: unseen)."""

    def __init__(self, a: np.ndarray, b: np.ndarray) -> None:
        self.k = a.shape[1]
        self.values = [np.unique(np.concatenate([a[:, j], b[:, j]])) for j in range(self.k)]
        radix = [len(v) for v in self.values]
        self.ok = math.prod(radix) < 2**62
        self.mult = np.cumprod([1] + radix[:-1]).astype(np.int64) if self.ok else None
        self.radix = np.array(radix, np.int64)
        contiguous = all(
            np.issubdtype(v.dtype, np.integer) and int(v[-1]) - int(v[0]) == len(v) - 1 for v in self.values
        )
        self.lo = np.array([int(v[0]) for v in self.values], np.int64) if contiguous else None

    def encode(self, x: np.ndarray) -> np.ndarray:
        mult = self.mult
        assert mult is not None  # a coder is used only when self.ok (its codes fit in int64)
        lo = self.lo
        if lo is not None and np.issubdtype(x.dtype, np.integer):
            # every coordinate takes consecutive integers: the index is the offset from the smallest
            code = np.zeros(len(x), np.int64)
            bad = np.zeros(len(x), bool)
            for j in range(self.k):
                idx = x[:, j].astype(np.int64) - lo[j]
                bad |= (idx < 0) | (idx >= self.radix[j])
                code += idx * mult[j]
            code[bad] = -1
            return code
        code = np.zeros(len(x), np.int64)
        bad = np.zeros(len(x), bool)
        for j, vals in enumerate(self.values):
            idx = np.clip(np.searchsorted(vals, x[:, j]), 0, len(vals) - 1)
            bad |= vals[idx] != x[:, j]
            code += idx.astype(np.int64) * mult[j]
        code[bad] = -1
        return code

    def decode(self, code: int) -> list:
        mult = self.mult
        assert mult is not None  # a coder is used only when self.ok (its codes fit in int64)
        out = []
        for j, vals in enumerate(self.values):
            out.append(vals[(int(code) // int(mult[j])) % len(vals)].item())
        return out


# --------------------------------------------------------------------------- threshold choice


def _projected(pa: np.ndarray, pb: np.ndarray, n_eff: float, z: float) -> np.ndarray:
    """A smooth stand-in for the certified ln(pa_lo / pb_hi) at n_eff samples a side (normal bounds)."""
    lo = pa - z * np.sqrt(pa * (1 - pa) / n_eff) - z * z / (2 * n_eff)
    hi = pb + z * np.sqrt(pb * (1 - pb) / n_eff) + z * z / n_eff
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.clip(lo, 1e-300, None)) - np.log(hi)
    out[lo <= 0] = -np.inf
    return out


@dataclass
class _Choice:
    value: float  # projected certified bound
    above: bool  # event is {score >= t} (True) or {score <= t}
    threshold: float
    favours_a: bool
    pa: float
    pb: float


def _choose_thresholds(sa: np.ndarray, sb: np.ndarray, n_cert, z: float) -> list[_Choice]:
    """Best threshold for each of {s >= t}, {s <= t}, each direction and each planned certification
    size in ``n_cert`` (an int or a tuple), judged on held-out scores."""
    sa, sb = np.sort(sa), np.sort(sb)
    ts = np.unique(np.concatenate([sa, sb]))
    na, nb = len(sa), len(sb)
    if len(ts) > _MAX_THRESHOLDS:
        # a continuous score: cut at tail probabilities on a geometric grid (few candidates, so the
        # best held-out estimate is not just the luckiest of thousands)
        tails = np.geomspace(_MIN_HITS / min(na, nb), 0.5, _MAX_THRESHOLDS // 2)
        pooled = np.concatenate([sa, sb])
        ts = np.unique(np.quantile(pooled, np.concatenate([tails, 1 - tails]), method="inverted_cdf"))
    sizes = (n_cert,) if isinstance(n_cert, (int, np.integer)) else tuple(n_cert)
    out: list[_Choice] = []
    for above in (True, False):
        if above:
            ca = na - np.searchsorted(sa, ts, "left")
            cb = nb - np.searchsorted(sb, ts, "left")
        else:
            ca = np.searchsorted(sa, ts, "right")
            cb = np.searchsorted(sb, ts, "right")
        pa, pb = ca / na, cb / nb
        for favours_a in (True, False):
            num, den, hits = (pa, pb, ca) if favours_a else (pb, pa, cb)
            picked: set[int] = set()
            with np.errstate(divide="ignore", invalid="ignore"):
                # standard error of the held-out log ratio: selection noise, not certification
                se = np.sqrt((1 - num) / (num * min(na, nb)) + (1 - den) / (den * min(na, nb)))
            for n in sizes:
                val = _projected(num, den, float(n), z) - _HOLDOUT_SE * np.nan_to_num(se, nan=np.inf)
                val[hits < _MIN_HITS] = -np.inf
                val[(num >= 1.0) & (den >= 1.0)] = -np.inf  # the whole space
                i = int(np.argmax(val))
                if np.isfinite(val[i]) and val[i] > 0 and i not in picked:
                    picked.add(i)
                    # cut half-way to the next score value: the event does not hinge on rounding
                    if above:
                        t = float(ts[i]) if i == 0 else (float(ts[i - 1]) + float(ts[i])) / 2
                    else:
                        t = float(ts[i]) if i == len(ts) - 1 else (float(ts[i]) + float(ts[i + 1])) / 2
                    out.append(_Choice(float(val[i]), above, t, favours_a, float(pa[i]), float(pb[i])))
    return out


# --------------------------------------------------------------------------- proposal


def _propose(a: np.ndarray, b: np.ndarray, max_events: int, n_cert: tuple, confidence: float) -> list[Event]:
    # split each side: the first part fits (scores, pattern orders), the rest chooses thresholds
    n_fit_a = min(_MAX_FIT_ROWS, len(a) // 2)
    n_fit_b = min(_MAX_FIT_ROWS, len(b) // 2)
    fa, ha = a[:n_fit_a], a[n_fit_a:]
    fb, hb = b[:n_fit_b], b[n_fit_b:]
    m = max(4 * max_events, 8)
    from scipy import special as _sp  # deferred, as scipy.optimize

    z = float(-_sp.ndtri((1 - confidence) / (2 * m)))  # the upper (1 - confidence) / (2m) quantile of N(0, 1)
    scored: list[tuple[float, str, Event]] = []

    if not _too_many_patterns(fa, fb):
        coder = _PatternCoder(fa, fb)
        if coder.ok:
            scored += _pattern_events(coder, fa, fb, ha, hb, n_cert, z)

    fmap = _FeatureMap(fa, fb, _screened_coordinates(fa, fb))
    if fmap.n_features:
        xf = np.vstack([fmap.transform(fa), fmap.transform(fb)])
        y = np.concatenate([np.ones(len(fa)), np.zeros(len(fb))])
        w_full = _fit_logistic(xf, y)
        variants = [("logistic regression", w_full[:-1], np.arange(fmap.n_features))]
        zs = _wald_z(xf, y, w_full)
        keep = np.flatnonzero(np.abs(zs) >= _WALD_KEEP)
        if len(keep) == 0:
            keep = np.array([int(np.argmax(np.abs(zs)))])
        if len(keep) < fmap.n_features:
            w_sp = _fit_logistic(xf[:, keep], y)
            w = np.zeros(fmap.n_features)
            w[keep] = w_sp[:-1]
            variants.append(("sparse logistic regression", w, keep))
        votes = _votes(fmap, xf, y)
        if votes is not None:
            variants.append(("signed vote of bounded features", votes, np.flatnonzero(votes)))
        for label, w, used in variants:
            scorer = _LinearScorer(fmap, w)
            sa, sb = scorer.score(ha), scorer.score(hb)
            for ch in _choose_thresholds(sa, sb, n_cert, z):
                desc = _describe_score(label, fmap, w, used, ch)
                scored.append((ch.value, desc, Event(_ScoreEvent(scorer, ch.threshold, ch.above), desc)))
        tied = _tied(fmap, fa, fb)
        if tied is not None:
            sa, sb = tied.score(ha), tied.score(hb)
            for ch in _choose_thresholds(sa, sb, n_cert, z):
                desc = (
                    f"learned score (tied coordinates{fmap.screening}) s = {tied.describe()}; "
                    f"event s {'>=' if ch.above else '<='} "
                    f"{ch.threshold:.6g}; favours {'data' if ch.favours_a else 'neighbor'} "
                    f"(training estimate P_data={ch.pa:.3g}, P_neighbor={ch.pb:.3g})"
                )
                scored.append((ch.value, desc, Event(_ScoreEvent(tied, ch.threshold, ch.above), desc)))

    scored.sort(key=lambda t: -t[0])
    out, seen = [], set()
    for _, desc, ev in scored:
        if desc in seen:
            continue
        seen.add(desc)
        out.append(ev)
        if len(out) == max_events:
            break
    return out


def _votes(fmap: _FeatureMap, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Weights ±1 on the [0, 1]-valued features (indicators, ramps) whose univariate difference
    between the two sides has |z| >= _VOTE_Z, one feature per coordinate (its strongest).

    Many weak coordinates that shift the same way (20 parallel Laplace mechanisms, the bits of
    RAPPOR) have each too small an effect for the regression's weights to be estimated well; the
    count of coordinates voting for one side is then close to the likelihood ratio's ordering."""
    xa, xb = x[y == 1], x[y == 0]
    diff = xa.mean(axis=0) - xb.mean(axis=0)
    se = np.sqrt(xa.var(axis=0) / len(xa) + xb.var(axis=0) / len(xb))
    with np.errstate(divide="ignore", invalid="ignore"):
        zs = np.where(se > 0, diff / se, 0.0)
    w = np.zeros(fmap.n_features)
    f = 0
    picks = []
    for c in fmap.columns:
        nf = len(c.values) + (2 if c.kind == "continuous" else 0)
        bounded = list(range(f, f + len(c.values))) + ([f + nf - 1] if c.kind == "continuous" else [])
        if bounded:
            picks.append(max(bounded, key=lambda i: abs(zs[i])))
        f += nf
    if not picks:
        return None
    # strong coordinates exist: leave out the weak ones (noise); else count every coordinate that leans
    cut = max(_VOTE_Z, _VOTE_REL * max(abs(zs[i]) for i in picks))
    for i in picks:
        if abs(zs[i]) >= cut:
            w[i] = np.sign(zs[i])
    return w if np.count_nonzero(w) >= 2 else None


_MAX_LEARNED_COORDINATES = 256  # coordinates the logistic score is fitted on (its Hessian is p x p)


def _screened_coordinates(fa: np.ndarray, fb: np.ndarray) -> np.ndarray | None:
    """None (every coordinate), or, for outputs of more than :data:`_MAX_LEARNED_COORDINATES` coordinates,
    those whose means differ most between the two sides' fitting rows in units of their pooled standard
    deviation (a 10 000-coordinate output made a 20 000-feature fit with a 20 000² Hessian: minutes and
    gigabytes). Chosen on the fitting rows only, like every other choice of the score."""
    k = fa.shape[1]
    if k <= _MAX_LEARNED_COORDINATES:
        return None
    xa, xb = fa.astype(np.float64, copy=False), fb.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt((np.nanvar(xa, axis=0) + np.nanvar(xb, axis=0)) / 2)
        t = np.abs(np.nanmean(xa, axis=0) - np.nanmean(xb, axis=0)) / np.where(sd > 0, sd, 1.0)
    t = np.nan_to_num(t, nan=0.0, posinf=np.finfo(float).max)
    return np.sort(np.argsort(-t, kind="stable")[:_MAX_LEARNED_COORDINATES])


def _too_many_patterns(fa: np.ndarray, fb: np.ndarray) -> bool:
    """Whether the fitting rows certainly hold more than :data:`_MAX_PATTERNS` patterns (then
    :func:`_pattern_events` proposes nothing), read off the first rows of each column: without NaN
    every row has its own pattern code, so a column with more distinct values than that in its first
    rows has more patterns (continuous outputs: no need to code every row to find out)."""
    if any(np.issubdtype(x.dtype, np.floating) and bool(np.isnan(x).any()) for x in (fa, fb)):
        return False
    m = _MAX_PATTERNS + 1
    return any(len(np.unique(np.concatenate([fa[:m, j], fb[:m, j]]))) > _MAX_PATTERNS for j in range(fa.shape[1]))


def _pattern_events(coder: _PatternCoder, fa, fb, ha, hb, n_cert: tuple, z: float) -> list:
    ca_fit, cb_fit = coder.encode(fa), coder.encode(fb)
    pats = np.unique(np.concatenate([ca_fit, cb_fit]))
    if len(pats) > _MAX_PATTERNS or len(pats) < 2:
        return []
    na, nb = len(fa), len(fb)
    cnt_a = np.bincount(np.searchsorted(pats, ca_fit), minlength=len(pats))
    cnt_b = np.bincount(np.searchsorted(pats, cb_fit), minlength=len(pats))
    lr = np.log((cnt_a + 0.5) / na) - np.log((cnt_b + 0.5) / nb)
    order = np.argsort(-lr, kind="stable")
    rank = np.empty(len(pats), np.int64)
    rank[order] = np.arange(len(pats))
    # held-out rows scored by the rank of their pattern (unseen patterns go to the middle)

    def ranks(codes):
        idx = np.clip(np.searchsorted(pats, codes), 0, len(pats) - 1)
        seen = pats[idx] == codes
        return np.where(seen, rank[idx], (len(pats) - 1) / 2.0)

    ra, rb = -ranks(coder.encode(ha)), -ranks(coder.encode(hb))  # high score = high LR
    out = []
    for ch in _choose_thresholds(ra, rb, n_cert, z):
        # {-rank >= t} = the patterns of rank <= -t; {-rank <= t} = patterns of rank >= -t
        cut = -ch.threshold
        chosen = order[: int(math.floor(cut)) + 1] if ch.above else order[int(math.ceil(cut)) :]
        if len(chosen) == 0 or len(chosen) == len(pats):
            continue
        codes = pats[chosen]
        shown = "; ".join(str(coder.decode(c)) for c in codes[:3]) + ("; ..." if len(codes) > 3 else "")
        desc = (
            f"output pattern in a set of {len(codes)} of the {len(pats)} patterns seen, ranked by estimated "
            f"likelihood ratio ({shown}); favours {'data' if ch.favours_a else 'neighbor'} "
            f"(training estimate P_data={ch.pa:.3g}, P_neighbor={ch.pb:.3g})"
        )
        out.append((ch.value, desc, Event(_PatternEvent(coder, codes), desc)))
    return out


def _describe_score(label: str, fmap: _FeatureMap, w: np.ndarray, used: np.ndarray, ch: _Choice) -> str:
    idx = [i for i in used if w[i] != 0]
    idx.sort(key=lambda i: -abs(w[i]))
    terms = " ".join(f"{'+' if w[i] >= 0 else '-'} {abs(w[i]):.3g}·{fmap.names[i]}" for i in idx[:4])
    more = f" + {len(idx) - 4} more terms" if len(idx) > 4 else ""
    op = ">=" if ch.above else "<="
    return (
        f"learned score ({label} on {len(idx)} features{fmap.screening}) s = {terms.lstrip('+ ')}{more}; "
        f"event s {op} {ch.threshold:.6g}; favours {'data' if ch.favours_a else 'neighbor'} "
        f"(training estimate P_data={ch.pa:.3g}, P_neighbor={ch.pb:.3g})"
    )
