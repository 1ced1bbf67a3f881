"""The tracker's assignment solver is scipy's, loaded without ``scipy.optimize``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment as public

from rt_fusion.core.perception import assignment


def test_it_is_loaded_alone_and_is_scipys_own_function() -> None:
    assert assignment.how == 'alone'
    # The registered module is reused by scipy.optimize (imported above, after it).
    assert assignment.linear_sum_assignment is public


@pytest.mark.parametrize('shape', [(1, 1), (3, 3), (4, 7), (9, 2), (30, 30)])
def test_same_answers_as_the_public_import(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    for _ in range(20):
        cost = rng.uniform(0, 10, shape)
        cost[rng.random(shape) < 0.3] = 1e9  # out of gate, as the tracker fills it
        r, c = assignment.linear_sum_assignment(cost)
        r_ref, c_ref = public(cost)
        assert np.array_equal(r, r_ref) and np.array_equal(c, c_ref)
    with pytest.raises(ValueError, match='invalid'):
        assignment.linear_sum_assignment(np.array([[np.nan, 1.0], [1.0, 2.0]]))


def test_importing_the_tracker_does_not_import_scipy_optimize() -> None:
    code = (
        'import sys, rt_fusion.core.perception.tracker, rt_fusion.core.fusion; '
        "print(sorted(m for m in sys.modules if m.startswith('scipy.optimize')))"
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['scipy.optimize._lsap']"
