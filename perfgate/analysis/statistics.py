"""The statistics the decision uses: robust centres and spreads, rank tests. Pure functions
over numpy arrays; no thresholds, no verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.stats import mannwhitneyu, norm

FloatArray = npt.NDArray[np.float64]
Samples = Sequence[float | None] | FloatArray

MAD_TO_SD = 1.4826  # MAD of a normal sample × this = its standard deviation
_MAX_AUTOCORRELATION = 0.9


def clean(values: Samples) -> FloatArray:
    """The values as float64, ``None`` and NaN left out."""
    array = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return array[~np.isnan(array)]


def sample_median(samples: Samples) -> float:
    """Median of samples, ``None``/NaN left out; NaN when nothing is left."""
    values = clean(samples)
    return float(np.median(values)) if values.size else float("nan")


def robust_spread(samples: FloatArray) -> float:
    """A standard deviation estimate that one stalled step cannot inflate (1.4826 × MAD)."""
    if samples.size < 2:
        return 0.0
    return float(MAD_TO_SD * np.median(np.abs(samples - np.median(samples))))


def lag1_autocorrelation(samples: FloatArray) -> float:
    """Lag-one autocorrelation of a series of per-step samples (0 for fewer than 3)."""
    if samples.size < 3:
        return 0.0
    centred = samples - samples.mean()
    denominator = float(np.dot(centred, centred))
    if denominator == 0.0:
        return 0.0
    return float(np.dot(centred[:-1], centred[1:]) / denominator)


def mann_whitney_p(current: FloatArray, baseline: FloatArray, *, greater: bool) -> float:
    """One-sided Mann–Whitney U p-value, corrected for autocorrelated steps.

    Consecutive steps of one run are not independent (a slow phase lasts several steps),
    which makes the plain test overconfident: with lag-one autocorrelation 0.5, unchanged
    runs reach p < 0.01 about 7% of the time. The normal approximation's z is shrunk by the
    variance inflation (1 + ρ) / (1 − ρ) of an AR(1) series, ρ the mean lag-one
    autocorrelation of the two samples (clipped to [0, 0.9]).
    """
    result = mannwhitneyu(
        current, baseline, alternative="greater" if greater else "less", method="asymptotic"
    )
    rho = (lag1_autocorrelation(current) + lag1_autocorrelation(baseline)) / 2
    rho = min(max(rho, 0.0), _MAX_AUTOCORRELATION)
    inflation = (1 + rho) / (1 - rho)
    z = float(norm.isf(float(result.pvalue)))
    return float(norm.sf(z / math.sqrt(inflation)))


def one_sided_mann_whitney_p(current: FloatArray, baseline: FloatArray) -> float:
    """Plain one-sided Mann–Whitney U p-value that ``current`` is greater (no correction)."""
    return float(mannwhitneyu(current, baseline, alternative="greater").pvalue)


def min_attainable_p(n_baseline: int, n_current: int) -> float:
    """The smallest one-sided exact Mann–Whitney p-value these sample sizes allow."""
    return 1.0 / math.comb(n_baseline + n_current, n_baseline)
