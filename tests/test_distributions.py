"""The decision's distribution functions (scipy.special, cheap to import) against
scipy.stats' t and normal distributions, over the degrees of freedom and tails the decision
uses: Satterthwaite's fractional df, α spent over looks (p down to 1e-12)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from perfgate.analysis.statistics import normal_isf, normal_sf, t_cdf, t_isf, t_sf

DFS = [1.0, 1.7, 2.0, 3.4, 7.0, 13.25, 29.0, 120.5, 1e4]
XS = [-40.0, -6.0, -2.5, -0.3, 0.0, 0.7, 2.33, 5.0, 12.0, 60.0]
PS = [1e-12, 1e-6, 0.0005, 0.002, 0.01, 0.05, 0.3, 0.5, 0.9]


@pytest.mark.parametrize("df", DFS)
def test_t_tails_match_scipy_stats(df: float) -> None:
    for x in XS:
        assert t_sf(x, df) == pytest.approx(float(student_t.sf(x, df)), rel=1e-9, abs=1e-300)
        assert t_cdf(x, df) == pytest.approx(float(student_t.cdf(x, df)), rel=1e-9, abs=1e-300)
    for p in PS:
        quantile = t_isf(p, df)
        assert quantile == pytest.approx(float(student_t.isf(p, df)), rel=1e-8)
        assert t_sf(quantile, df) == pytest.approx(p, rel=1e-8)  # the tail it names


def test_normal_tails_match_scipy_stats() -> None:
    for z in XS:
        assert normal_sf(z) == pytest.approx(float(norm.sf(z)), rel=1e-9, abs=1e-300)
    for p in PS:
        assert normal_isf(p) == pytest.approx(float(norm.isf(p)), rel=1e-9, abs=1e-12)
    assert normal_isf(0.5) == 0.0 and np.isinf(normal_isf(0.0))


def test_the_decision_does_not_import_scipy_stats() -> None:
    # scipy.stats costs every CLI process and pytest session ~0.7 s to import; the decision
    # needs only scipy.special (the Mann-Whitney test of two plain profiles imports it then).
    code = (
        "import sys, perfgate.analysis.compare, perfgate.cli, perfgate.gate, "
        "perfgate.pytest_plugin.plugin, perfgate.pytest_plugin.session; "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
