"""The statistics the decision uses: robust centres and spreads, rank tests. Pure functions
over numpy arrays; no thresholds, no verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

# scipy.special, not scipy.stats: importing scipy.stats costs every CLI process and pytest
# session about 0.7 s more on a 2-vCPU runner, for distributions these five functions give.
from scipy.special import ndtr, ndtri, stdtr, stdtrit

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
    from scipy.stats import mannwhitneyu  # only two plain profiles need it: imported then

    result = mannwhitneyu(
        current, baseline, alternative="greater" if greater else "less", method="asymptotic"
    )
    rho = (lag1_autocorrelation(current) + lag1_autocorrelation(baseline)) / 2
    rho = min(max(rho, 0.0), _MAX_AUTOCORRELATION)
    inflation = (1 + rho) / (1 - rho)
    z = normal_isf(float(result.pvalue))
    return normal_sf(z / math.sqrt(inflation))


def one_sided_mann_whitney_p(current: FloatArray, baseline: FloatArray) -> float:
    """Plain one-sided Mann–Whitney U p-value that ``current`` is greater (no correction)."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(current, baseline, alternative="greater").pvalue)


def normal_sf(z: float) -> float:
    """P(Z > z) of the standard normal."""
    return float(ndtr(-z))


def normal_isf(p: float) -> float:
    """The z with P(Z > z) = p."""
    return float(-ndtri(p))


def t_sf(x: float, df: float) -> float:
    """P(T > x) of Student's t with ``df`` (real) degrees of freedom."""
    return float(stdtr(df, -x))


def t_cdf(x: float, df: float) -> float:
    """P(T ≤ x) of Student's t."""
    return float(stdtr(df, x))


def t_isf(p: float, df: float) -> float:
    """The x with P(T > x) = p, from the lower tail by symmetry (exact for small p)."""
    return float(-stdtrit(df, p))


def min_attainable_p(n_baseline: int, n_current: int) -> float:
    """The smallest one-sided exact Mann–Whitney p-value these sample sizes allow."""
    return 1.0 / math.comb(n_baseline + n_current, n_baseline)


# --------------------------------------------------------------------------- rounds


@dataclass(frozen=True)
class RoundValues:
    """One side's round statistics (one value per round, on the decision scale) and the
    process each round ran in."""

    values: FloatArray
    processes: npt.NDArray[np.int64]

    @property
    def rounds(self) -> int:
        return int(self.values.size)

    def process_means(self) -> FloatArray:
        """The mean of each process's rounds, in process order."""
        return np.asarray(
            [self.values[self.processes == p].mean() for p in np.unique(self.processes)],
            dtype=np.float64,
        )

    def process_medians(self) -> FloatArray:
        """The median of each process's rounds, in process order (a stalled round cannot
        move it)."""
        return np.asarray(
            [np.median(self.values[self.processes == p]) for p in np.unique(self.processes)],
            dtype=np.float64,
        )

    def centre(self) -> float:
        """Each process weighs the same: the mean of the process means."""
        return float(self.process_means().mean()) if self.values.size else float("nan")


def round_values(
    values: Samples,
    rounds: Samples | Sequence[int] | None = None,
    processes: Samples | Sequence[int] | None = None,
    *,
    log: bool = False,
) -> RoundValues:
    """The median of each round's steps (``values`` per step, ``rounds``/``processes`` the
    round and process of each step; without them, all steps are one round of process 0),
    on a log scale when ``log``. Rounds with no value are left out."""
    array = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    n = array.size
    round_ids = np.asarray(rounds if rounds is not None else np.zeros(n), dtype=np.int64)
    process_ids = np.asarray(processes if processes is not None else np.zeros(n), dtype=np.int64)
    keys = sorted(set(zip(process_ids.tolist(), round_ids.tolist())))
    medians, owners = [], []
    for process, round_id in keys:
        chosen = array[(process_ids == process) & (round_ids == round_id)]
        chosen = chosen[~np.isnan(chosen)]
        if log:
            chosen = chosen[chosen > 0]
        if chosen.size:
            median = float(np.median(chosen))
            medians.append(math.log(median) if log else median)
            owners.append(process)
    return RoundValues(np.asarray(medians, dtype=np.float64), np.asarray(owners, dtype=np.int64))


def _labels(labels: Samples | Sequence[int] | None, n: int) -> npt.NDArray[np.int64]:
    """Round or process labels as ints (missing: 0; JSON may hand them over as floats)."""
    if labels is None or len(labels) != n:
        return np.zeros(n, dtype=np.int64)
    return np.asarray([0 if v is None else int(v) for v in labels], dtype=np.int64)


# A round further than this many robust SDs from its process's median is a stall (a
# neighbour, a page-cache miss, a frequency drop), not the code: it counts, clipped to here.
STALL_CLIP = 4.0
_MAD_TO_Z = 0.6745  # the median of |z| for a standard normal z


def tame_stalls(sides: Sequence[RoundValues]) -> list[RoundValues]:
    """``sides`` with stalled rounds clipped (Huber-style winsorizing): each round within
    ``STALL_CLIP`` robust SDs of its process's median round. The SD is pooled from the
    differences of rounds within a process (the median absolute difference of all pairs,
    / (0.6745·√2): consistent for normal rounds, blind to a minority of stalls). A heavy
    tail of slow rounds otherwise moves the means and the t-test's spread alike."""
    differences = []
    for side in sides:
        for p in np.unique(side.processes):
            values = side.values[side.processes == p]
            if values.size >= 3:
                i, j = np.triu_indices(values.size, k=1)
                differences.append(np.abs(values[i] - values[j]))
    if not differences:
        return list(sides)
    pooled = np.concatenate(differences)
    scale = float(np.median(pooled)) / (_MAD_TO_Z * math.sqrt(2.0))
    if pooled.size < 6 or scale <= 0:
        return list(sides)
    limit = STALL_CLIP * scale
    tamed = []
    for side in sides:
        values = side.values.copy()
        for p in np.unique(side.processes):
            chosen = side.processes == p
            if int(chosen.sum()) >= 3:
                centre = float(np.median(values[chosen]))
                values[chosen] = np.clip(values[chosen], centre - limit, centre + limit)
        tamed.append(RoundValues(values, side.processes))
    return tamed


@dataclass(frozen=True)
class Difference:
    """``current − baseline`` of two sides' centres, with its standard error and degrees of
    freedom, and the noise figures it rests on (all on the decision scale)."""

    estimate: float
    se: float
    df: float
    round_noise: float  # SD of one round around its process's mean (None-free: 0 if unknown)
    process_noise: float | None  # SD of the process effect; None when no side has 2 processes
    rounds_df: int  # degrees of freedom of round_noise
    session_noise: float | None = None  # SD of a session's level (estimated or assumed)
    session_assumed: bool = False  # session_noise is the configured prior, not measured

    def p_greater(self) -> float:
        """One-sided p-value that the true difference is above 0."""
        if self.se <= 0:
            return 0.0 if self.estimate > 0 else 1.0
        return t_sf(self.estimate / self.se, self.df)

    def p_less(self) -> float:
        if self.se <= 0:
            return 0.0 if self.estimate < 0 else 1.0
        return t_cdf(self.estimate / self.se, self.df)

    def margin(self, alpha: float) -> float:
        """The one-sided (1 − α) margin: a change beyond ``estimate ± margin`` is excluded."""
        if self.se <= 0:
            return 0.0
        return t_isf(alpha, self.df) * self.se


def difference(
    baseline: RoundValues, current: RoundValues, history: Sequence[RoundValues] = ()
) -> Difference | None:
    """The difference of the centres under a two-level model: rounds vary around their
    process's mean (round noise σ), process means vary around the code's true value
    (process noise τ: thread placement, memory layout, the neighbours of that run).

    σ² is pooled from the rounds of every process of both sides (and of ``history``, the
    look-back baselines of the same code); τ² from the spread of process means within each
    side, less what σ explains. The variance of a side's centre is (τ² + σ²/n)/P for P
    processes of n rounds. Degrees of freedom: those of the estimate that dominates.
    None when neither noise can be estimated (one round a side).
    """
    sides = [baseline, current, *history]
    within_ss, within_df = 0.0, 0
    between_ss, between_df = 0.0, 0
    sizes: list[float] = []
    for side in sides:
        means = []
        for process in np.unique(side.processes):
            values = side.values[side.processes == process]
            within_ss += float(((values - values.mean()) ** 2).sum())
            within_df += values.size - 1
            means.append(values.mean())
            sizes.append(values.size)
        if len(means) >= 2:
            between_ss += float(((np.asarray(means) - np.mean(means)) ** 2).sum())
            between_df += len(means) - 1
    if baseline.rounds == 0 or current.rounds == 0 or (within_df == 0 and between_df == 0):
        return None
    sigma2 = within_ss / within_df if within_df else 0.0
    mean_size = float(np.mean(sizes))
    spread = between_ss / between_df if between_df else None
    tau2 = max(spread - sigma2 / mean_size, 0.0) if spread is not None else None
    shape = [
        (len(np.unique(side.processes)), side.rounds / len(np.unique(side.processes)))
        for side in (baseline, current)
    ]
    if spread is not None and tau2:
        # V = Σ (τ² + σ²/n)/P with τ² = S² − σ²/n̄: a sum of the two variance estimates,
        # whose degrees of freedom come from Satterthwaite's formula.
        c_spread = sum(1 / p for p, _ in shape)
        c_sigma = sum((1 / n - 1 / mean_size) / p for p, n in shape)
        variance = c_spread * spread + c_sigma * sigma2
        terms = (c_spread * spread) ** 2 / between_df
        if within_df:
            terms += (c_sigma * sigma2) ** 2 / within_df
        df = variance**2 / terms if terms else float(between_df)
    else:
        variance = sum(sigma2 / (n * p) for p, n in shape)
        df = float(within_df or between_df)
    return Difference(
        estimate=current.centre() - baseline.centre(),
        se=math.sqrt(max(variance, 0.0)),
        df=max(df, 1.0),
        round_noise=math.sqrt(sigma2),
        process_noise=math.sqrt(tau2) if tau2 is not None else None,
        rounds_df=within_df,
    )


# A session's level is estimated from the baselines when at least this many measured the
# same code (two degrees of freedom); with fewer, the configured prior stands in.
MIN_SESSIONS = 3


# The least slope assumed for a share made of the step's idle time (utilization, free
# ratio): its small part is gaps between operators (host Python, the dispatcher, the
# profiler's own work), which move far more than the session noise between sessions. In 18
# unchanged re-runs of the examples on this VM, transformer_infer's utilization (92–95%,
# where u(1 − u)·log 1.2 allows ±0.93pt) had a session SD of 1.46pt and read 5.9pt below a
# first baseline; two such runs failed the build (docs/verdict-quality.md). 0.11 (the slope
# at 12.5% or 87.5%) makes the default 20% assume ±2.0pt, and a dedicated runner's 2% ±0.2pt.
IDLE_SHARE_MIN_SLOPE = 0.11


def session_prior(
    session_noise: float, *, log: bool, centre: float, min_slope: float = 0.0
) -> float | None:
    """The assumed spread of a session's level on the decision scale, from
    ``statistics.session_noise`` (a relative move of the step, e.g. 0.20).

    A time (``log``): log(1 + noise). A ratio of the step (utilization, copy ratio: a share
    ``u`` in 0..1) moves when a session slows one part of the step more than the rest (the
    host's Python against the kernels, a copy against the compute): one part moved by the
    factor 1 + noise against the rest moves ``u`` by about u·(1 − u)·log(1 + noise), the
    slope of the logistic at ``u``. So 20% is ±4.6pt at a share of 50%, ±1.6pt at 90% and
    at 10%, and nothing at 0 or 1, where a share cannot move without the code changing.

    ``min_slope`` is the least slope taken, for shares whose small part is idle time
    (:data:`IDLE_SHARE_MIN_SLOPE`): gaps between operators move by far more than the step
    from one session to the next, so near 100% the slope alone assumes too little. Copy and
    communication ratios take none: their small part is work, and at 0 nothing moves.
    """
    if session_noise <= 0 or not math.isfinite(centre):
        return None
    spread = math.log1p(session_noise)
    if log:
        return spread
    share = min(max(centre, 0.0), 1.0)
    return max(share * (1.0 - share), min_slope) * spread or None


def with_session_noise(
    diff: Difference, sessions: Sequence[RoundValues], prior: float | None
) -> Difference:
    """``diff`` with the noise of whole sessions added: each run (a session) sits at its
    own level (the runner's day, its neighbours, clocks), which rounds and processes of one
    session cannot show. ``sessions``: the baseline's and the look-back's, of the same code.

    With :data:`MIN_SESSIONS` or more, the variance of a session's level ω² is the spread of
    their centres less what their rounds and processes explain; the reference (their mean)
    and the current session each carry it: + ω²(1 + 1/S), its degrees of freedom S − 1, and
    Satterthwaite's formula combines them. With fewer, ``prior`` (a standard deviation on
    the decision scale; None: none) stands in for ω, known, on both sides: + 2·prior².
    """
    sessions = [side for side in sessions if side.rounds]
    if len(sessions) >= MIN_SESSIONS:
        centres = np.asarray([side.centre() for side in sessions], dtype=np.float64)
        sigma2 = diff.round_noise**2
        tau2 = (diff.process_noise or 0.0) ** 2
        explained = []
        for side in sessions:
            processes = len(np.unique(side.processes))
            explained.append((tau2 + sigma2 * processes / side.rounds) / processes)
        omega2 = max(float(centres.var(ddof=1)) - float(np.mean(explained)), 0.0)
        added = omega2 * (1 + 1 / len(sessions))
        added_df: float | None = len(sessions) - 1.0
    elif prior:
        omega2 = prior**2
        added, added_df = 2 * omega2, None  # known: no degrees of freedom lost
        diff = replace(diff, session_assumed=True)
    else:
        return diff
    if added <= 0:
        return replace(diff, session_noise=math.sqrt(omega2))
    variance = diff.se**2 + added
    terms = diff.se**4 / diff.df + (added**2 / added_df if added_df else 0.0)
    df = variance**2 / terms if terms else diff.df
    return replace(diff, se=math.sqrt(variance), df=max(df, 1.0), session_noise=math.sqrt(omega2))


def paired_difference(baseline: RoundValues, current: RoundValues) -> Difference | None:
    """The mean difference of paired processes (a same-runner A/B run: process ``i`` of
    each side ran next to the other's, so what drifts between pairs cancels out).

    With two or more pairs, a one-sample t on the per-pair differences of process means;
    with one pair, the rounds' noise within the two processes. None when neither exists."""
    pairs = sorted(set(baseline.processes.tolist()) & set(current.processes.tolist()))
    if not pairs:
        return None
    deltas = np.asarray(
        [
            current.values[current.processes == p].mean()
            - baseline.values[baseline.processes == p].mean()
            for p in pairs
        ],
        dtype=np.float64,
    )
    within = difference(
        RoundValues(
            baseline.values[np.isin(baseline.processes, pairs)],
            baseline.processes[np.isin(baseline.processes, pairs)],
        ),
        RoundValues(
            current.values[np.isin(current.processes, pairs)],
            current.processes[np.isin(current.processes, pairs)],
        ),
    )
    if deltas.size >= 2:
        sd = float(deltas.std(ddof=1))
        se = sd / math.sqrt(deltas.size)
        return Difference(
            estimate=float(deltas.mean()),
            se=se,
            df=float(deltas.size - 1),
            round_noise=within.round_noise if within is not None else 0.0,
            process_noise=sd / math.sqrt(2),
            rounds_df=within.rounds_df if within is not None else 0,
        )
    return within


def spending_pocock(alpha: float, fraction: float) -> float:
    """Lan–DeMets Pocock-type α spending: the share of ``alpha`` spent by information
    ``fraction`` (0..1) of a group-sequential test."""
    fraction = min(max(fraction, 0.0), 1.0)
    return alpha * math.log(1 + (math.e - 1) * fraction)
