"""The step-time model and its fit.

    t_step = intercept + prefill_token * prefill_tokens + decode_seq * decode_seqs
             + context_token * context_tokens                      (seconds, all terms >= 0)

t_step is a step's *period*: from its start to the start of the next one while the engine
has work, so it holds the step (schedule, forward, sample, append) and the event loop's
turn after it (streams fed, clients' next requests submitted). That is the time a token
costs a client, which TTFT and TPOT add up.

The fit is non-negative least squares, solved exactly by trying every support (subset of
the four terms): with four terms that is 15 small least-squares problems, and the NNLS
optimum is the feasible one with the smallest residual. Steps far slower than the fit
(residual above OUTLIER_SIGMAS robust standard deviations: a GC pause, the thread
descheduled by another process) are left out and the fit repeated, up to FIT_ROUNDS
times: the model is the device's cost, not the machine's interruptions; how many were
left out is part of the fit's quality.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfkit.errors import PerfkitError
from perfkit.predict.features import StepFeatures

MIN_STEPS = 16  # fewer observed steps than this fit nothing worth predicting from
OUTLIER_SIGMAS = 5.0  # a step slower than the fit by this many robust sigmas is left out
FIT_ROUNDS = 3


@dataclass(frozen=True)
class StepModel:
    """Seconds per step and per unit of each feature; every coefficient >= 0."""

    intercept_s: float  # a step that computes nothing still costs this
    prefill_token_s: float  # per prompt token computed
    decode_seq_s: float  # per decoding sequence
    context_token_s: float  # per KV token attended

    def __post_init__(self) -> None:
        for name, value in self.terms().items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        if self.intercept_s + self.prefill_token_s + self.decode_seq_s <= 0:
            raise ValueError("a step must cost time: intercept, prefill or decode > 0")

    def terms(self) -> dict[str, float]:
        return {"intercept_s": self.intercept_s, "prefill_token_s": self.prefill_token_s,
                "decode_seq_s": self.decode_seq_s, "context_token_s": self.context_token_s}

    def step_s(self, f: StepFeatures) -> float:
        return (self.intercept_s + self.prefill_token_s * f.prefill_tokens
                + self.decode_seq_s * f.decode_seqs + self.context_token_s * f.context_tokens)


@dataclass(frozen=True)
class FitQuality:
    """How well the model explains the steps it was fitted on (timings, seconds)."""

    num_steps: int  # step periods fitted
    num_outliers: int  # periods left out as interruptions (see module doc), not in num_steps
    mean_step_s: float  # their mean
    rmse_s: float  # root mean square residual
    median_abs_error: float  # median |predicted - observed| / observed, a share
    mean_error: float  # (mean predicted - mean observed) / mean observed: the bias, a share


def _matrix(features: Sequence[StepFeatures]) -> np.ndarray:
    """[steps, 4]: 1, prefill tokens, decode sequences, context tokens."""
    return np.array([(1.0, f.prefill_tokens, f.decode_seqs, f.context_tokens)
                     for f in features], dtype=np.float64)


def nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ||x c - y|| subject to c >= 0, for a handful of columns (every support tried;
    columns scaled to unit max first, so tokens and ones are conditioned alike)."""
    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    xs = x / scale
    best, best_res = np.zeros(x.shape[1]), float(np.sum(y * y))
    for size in range(1, x.shape[1] + 1):
        for support in itertools.combinations(range(x.shape[1]), size):
            cols = list(support)
            coef = np.linalg.lstsq(xs[:, cols], y, rcond=None)[0]
            if (coef < 0).any():
                continue
            res = float(np.sum((xs[:, cols] @ coef - y) ** 2))
            if res < best_res:
                best, best_res = np.zeros(x.shape[1]), res
                best[cols] = coef
    return best / scale


def _inliers(x: np.ndarray, y: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Steps within OUTLIER_SIGMAS robust sigmas (1.4826 MAD; at least 0.1% of the mean
    step) above the median residual of a fit on `keep`."""
    resid = y - x @ nnls(x[keep], y[keep])
    centre = float(np.median(resid[keep]))
    mad = float(np.median(np.abs(resid[keep] - centre)))
    return resid <= centre + max(OUTLIER_SIGMAS * 1.4826 * mad, 1e-3 * float(y[keep].mean()))


def fit_step_model(features: Sequence[StepFeatures], periods_s: Sequence[float]
                   ) -> tuple[StepModel, FitQuality]:
    """The NNLS fit of step periods on their features, and how well it fits."""
    if len(features) != len(periods_s):
        raise ValueError("one period per step")
    if len(features) < MIN_STEPS:
        raise PerfkitError(f"calibration: {len(features)} step(s) observed, need at least "
                           f"{MIN_STEPS}; run more requests (--requests)")
    x_all, y_all = _matrix(features), np.array(periods_s, dtype=np.float64)
    keep = np.ones(len(y_all), dtype=bool)
    for _ in range(FIT_ROUNDS):
        inliers = _inliers(x_all, y_all, keep)
        if (inliers == keep).all():
            break
        keep = inliers
    x, y = x_all[keep], y_all[keep]
    coef = nnls(x, y)
    try:
        model = StepModel(*(float(c) for c in coef))
    except ValueError as err:
        raise PerfkitError(f"calibration: the steps fit no model ({err})") from None
    pred = x @ coef
    quality = FitQuality(
        num_steps=len(y), num_outliers=int((~keep).sum()), mean_step_s=float(y.mean()),
        rmse_s=float(np.sqrt(np.mean((pred - y) ** 2))),
        median_abs_error=float(np.median(np.abs(pred - y) / y)),
        mean_error=float((pred.mean() - y.mean()) / y.mean()))
    return model, quality
