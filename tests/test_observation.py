"""Observation models keep the reported mean equal to the latent level (so every edge's effect is what an
analyst estimates) while giving the values the shapes real systems show: right-skewed durations and
J-shaped survey answers."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.model import Variable
from worldgen.observation import report

N = 200_000


def _variable(observe: str, mean: float, sd: float, lo: float | None = None, hi: float | None = None) -> Variable:
    fields = {"name": "x", "description": "a test", "grain": "event", "dtype": "float", "unit": "minutes"}
    return Variable(**fields, mean=mean, sd=sd, min=lo, max=hi, system="crm", layer=1, observe=observe)


def _skewness(x: np.ndarray) -> float:
    d = x - x.mean()
    return float((d**3).mean() / (d**2).mean() ** 1.5)


@pytest.mark.parametrize(("mean", "sd"), [(22.0, 9.0), (4.0, 2.0), (30.0, 7.0)])
def test_durations_keep_their_mean_and_have_a_log_normal_tail(mean, sd):
    rng = np.random.default_rng(0)
    latent = rng.normal(mean, 0.5 * sd, N)
    values = report(_variable("duration", mean, sd), latent, rng)
    assert abs(values.mean() - latent.mean()) < 0.02 * sd
    # A cause's effect on the mean survives: the reported mean follows the latent level's split.
    high = latent > mean
    assert values[high].mean() - values[~high].mean() == pytest.approx(
        latent[high].mean() - latent[~high].mean(), rel=0.05
    )
    cv = sd / mean
    s2 = np.log1p(cv**2)
    log_normal_skew = (np.exp(s2) + 2) * np.sqrt(np.expm1(s2))
    assert _skewness(values) > 0.7 * log_normal_skew
    assert (values[latent > 0] > 0).all()  # a positive duration stays positive (the range clips the rest)


@pytest.mark.parametrize(("lo", "hi", "mean"), [(1, 5, 4.2), (1, 5, 3.7), (0, 10, 7.6)])
def test_survey_answers_are_whole_j_shaped_points_with_the_latent_mean(lo, hi, mean):
    rng = np.random.default_rng(1)
    latent = rng.normal(mean, 0.3, N)
    answers = report(_variable("scale", mean, 0.8, lo, hi), latent, rng)
    assert np.all(answers == np.round(answers)) and answers.min() >= lo and answers.max() <= hi
    assert abs(answers.mean() - np.clip(latent, lo, hi).mean()) < 0.01 * (hi - lo)
    share = np.array([(answers == p).mean() for p in range(lo, hi + 1)])
    assert share.argmax() == hi - lo, f"the top point is the most common answer: {share.round(3)}"
    assert share[0] > share[1], f"angry answers make a bump at the bottom: {share.round(3)}"
    # A worse experience moves answers down: the mean follows the latent level.
    worse = latent < mean
    assert answers[~worse].mean() - answers[worse].mean() == pytest.approx(
        np.clip(latent, lo, hi)[~worse].mean() - np.clip(latent, lo, hi)[worse].mean(), rel=0.05
    )
