"""The compiled planner (frenet_jit) plans what its numpy form plans, scene for scene; how a node
loads it (rt_fusion.core.compiled)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest

from rt_fusion.core.compiled import CompiledSet
from rt_fusion.core.planning import frenet as fr
from rt_fusion.core.planning.reference import ReferencePath

FIELDS = ('t', 's', 's_d', 's_dd', 'd', 'd_d', 'd_dd', 'x', 'y', 'yaw', 'v', 'a', 'kappa')


@pytest.fixture(scope='module')
def loop() -> fr.PlanLoop:
    loop = fr.COMPILED.compiled()
    if loop is None:
        pytest.skip('numba is not installed')
    return loop


def _scene(rng: np.random.Generator) -> list[fr.Obstacle]:
    obstacles = []
    for _ in range(int(rng.integers(0, 21))):
        lane = float(rng.choice([-3.5, 0.0, 3.5]))
        x = float(rng.uniform(-30, 120))
        if abs(x) < 8 and abs(lane) < 1:
            continue  # not on top of the ego
        heading = float(rng.normal(0, 0.05))
        speed = float(rng.uniform(0, 16))
        walker = rng.random() < 0.1
        obstacles.append(
            fr.Obstacle(
                x,
                lane + float(rng.normal(0, 0.3)),
                math.pi / 2 if walker else heading,
                *((0.6, 0.6) if walker else (4.5, 1.9)),
                vx=0.0 if walker else speed * math.cos(heading),
                vy=1.4 if walker else speed * math.sin(heading),
                yaw_rate=float(rng.normal(0, 0.05)) * (rng.random() < 0.5),
                std=float(rng.uniform(0, 0.5)),
                growth=None if rng.random() < 0.5 else float(rng.uniform(0, 0.3)),
                yield_to=walker,
            )
        )
    return obstacles


def _same(a: fr.Trajectory, b: fr.Trajectory) -> None:
    assert (a.status, a.target_offset, a.target_speed) == (
        b.status,
        b.target_offset,
        b.target_speed,
    )
    assert (a.candidates, a.collision_checks) == (b.candidates, b.collision_checks)
    assert a.cost == pytest.approx(b.cost, rel=1e-9) or a.cost == b.cost == math.inf
    for name in FIELDS:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    'path',
    [
        ReferencePath.straight(600.0),
        ReferencePath([[0.0, 0.0], [60.0, 5.0], [120.0, 30.0], [200.0, 40.0], [400.0, 0.0]]),
    ],
    ids=['straight', 'curved'],
)
def test_compiled_and_numpy_planners_plan_the_same_trajectories(
    loop: fr.PlanLoop, path: ReferencePath
) -> None:
    """200 random scenes (turning traffic, uncertain and yielded-to road users, no way through),
    each replanned five times from the previous plan (the consistency cost), with other goals
    from the fourth: every status, target, cost, check count and array equal."""
    del loop  # the fixture skips where numba is missing
    rng = np.random.default_rng(31)
    numpy_planner = fr.FrenetPlanner(path, jit=False)
    compiled = fr.FrenetPlanner(path, jit=True)
    assert (numpy_planner.kind, compiled.kind) == ('numpy', 'numba')
    statuses = [0, 0, 0]
    for _ in range(200):
        obstacles = _scene(rng)
        start = fr.FrenetState(
            0.0, float(rng.uniform(0, 18)), 0.0, float(rng.uniform(-1, 1)), 0, 0
        )
        numpy_planner.previous = compiled.previous = None
        numpy_planner.p = compiled.p = fr.PlannerParams()
        for step in range(5):
            if step == 3:  # a node replaces p (emergency.goal): the compiled planner follows
                numpy_planner.p = compiled.p = fr.PlannerParams(
                    desired_speed=8.0, preferred_offset=-0.875
                )
            moved = [dataclasses.replace(o, x=o.x + o.vx * 0.1 * step) for o in obstacles]
            a, b = numpy_planner.plan(start, moved), compiled.plan(start, moved)
            _same(a, b)
            statuses[a.status] += 1
            start = a.state_at(0.1)
    assert min(statuses) > 0, statuses  # every branch was taken: ok, comfort and emergency stops


def test_the_numpy_planner_serves_where_compiled_kernels_are_not_wanted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planner = fr.FrenetPlanner(ReferencePath.straight(100.0))
    monkeypatch.setenv('RT_FUSION_JIT', '0')
    assert planner.kind == 'numpy'
    assert planner.plan(fr.FrenetState(0, 10, 0, 0, 0, 0), []).status == fr.STATUS_OK


def test_a_deferred_set_serves_numpy_until_loaded_in_the_background(loop: fr.PlanLoop) -> None:
    """What a node does (trajectory_node): defer while it builds, load once it is up."""
    compiled: CompiledSet[fr.PlanLoop] = CompiledSet(fr._load)
    compiled.defer()
    assert compiled.pending() and compiled.get() is None
    started: list[Callable[[], None]] = []
    warmed: list[str] = []
    assert compiled.load_in_background(lambda k: warmed.append(fr.warm_up(k)), started.append)
    assert compiled.loading() and compiled.get() is None  # until the thread has run
    started[0]()  # the thread
    assert not compiled.pending() and warmed == ['numba']
    assert compiled.get() is loop  # numba's dispatcher: the same object
    assert not compiled.load_in_background(warmed.append, started.append)  # loaded already


def test_a_failed_background_load_is_kept_and_numpy_serves() -> None:
    def broken() -> fr.PlanLoop:
        raise RuntimeError('LLVM ran out of memory')

    compiled: CompiledSet[fr.PlanLoop] = CompiledSet(broken)
    assert compiled.load_in_background(lambda k: None, lambda work: work())
    assert compiled.get() is None
    assert [str(e) for e in compiled.failed] == ['LLVM ran out of memory']


def test_where_numba_is_missing_the_set_is_none_for_good() -> None:
    def missing() -> fr.PlanLoop:
        raise ImportError('No module named numba')

    compiled: CompiledSet[fr.PlanLoop] = CompiledSet(missing)
    assert compiled.get() is None and compiled.compiled() is None
    assert not compiled.load_in_background(lambda k: None, lambda work: work())
