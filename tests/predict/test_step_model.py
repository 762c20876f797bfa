"""The NNLS fit: exact on exact steps, never negative, deaf to a few interruptions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from perfkit.errors import PerfkitError
from perfkit.predict.features import StepFeatures
from perfkit.predict.step_model import StepModel, fit_step_model, nnls

TRUE = StepModel(intercept_s=1e-3, prefill_token_s=2e-5, decode_seq_s=5e-5,
                 context_token_s=3e-7)


def _steps(n: int, seed: int = 0) -> list[StepFeatures]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        decode = rng.randint(0, 8)
        prefill = rng.choice([0, 0, 0, rng.randint(8, 256)])
        out.append(StepFeatures(prefill, decode, decode * rng.randint(16, 400) + prefill))
    return out


def test_exact_steps_give_the_model_back():
    feats = _steps(400)
    model, fit = fit_step_model(feats, [TRUE.step_s(f) for f in feats])
    for name, value in TRUE.terms().items():
        assert model.terms()[name] == pytest.approx(value, rel=1e-6)
    assert fit.num_steps == 400 and fit.num_outliers == 0
    assert fit.rmse_s < 1e-12 and abs(fit.mean_error) < 1e-9


def test_interruptions_are_left_out():
    feats = _steps(400, seed=1)
    periods = [TRUE.step_s(f) for f in feats]
    for i in range(0, 400, 40):  # 10 steps descheduled for 20 ms
        periods[i] += 0.02
    model, fit = fit_step_model(feats, periods)
    assert fit.num_outliers == 10 and fit.num_steps == 390
    assert model.intercept_s == pytest.approx(TRUE.intercept_s, rel=1e-6)


def test_coefficients_are_never_negative():
    # a cost that falls with context: least squares would give a negative term
    x = np.array([[1.0, c] for c in range(1, 50)])
    y = 1.0 - 0.01 * x[:, 1]
    coef = nnls(x, y)
    assert (coef >= 0).all() and coef[1] == 0.0


def test_too_few_steps_is_a_user_error():
    feats = _steps(5)
    with pytest.raises(PerfkitError, match="need at least"):
        fit_step_model(feats, [TRUE.step_s(f) for f in feats])


def test_a_model_with_a_negative_term_is_refused():
    with pytest.raises(ValueError, match="prefill_token_s"):
        StepModel(1e-3, -1e-6, 0.0, 0.0)


def test_periods_skip_idle_gaps_and_the_warm_up():
    from perfkit.engine.engine import EngineStats, KvSample
    from perfkit.predict.calibrate import step_periods

    stats = EngineStats()
    stats.step_start_s = [10.0, 10.002, 10.005, 10.5, 10.503]
    busy = [1, 1, 0, 1, 1]  # the engine went idle after the third step
    stats.kv_timeline = [KvSample(0.0, 1, 1, 0, b, 0) for b in busy]
    warm = [StepFeatures(9, 9, 9)] * 2  # the warm-up's steps come first
    measured = [StepFeatures(i, 0, i) for i in range(5)]
    feats, periods = step_periods(stats, warm + measured)
    assert feats == [measured[0], measured[1], measured[3]]
    assert periods == pytest.approx([0.002, 0.003, 0.003])
