"""tools/evaluate.py: deterministic lock-step scoring through replay.launch.py; the baseline."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import ROOT, VENV, ros_env

BASELINE = ROOT / 'config' / 'eval_baseline.yaml'


def _evaluate(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch/launch_ros not installed (make setup takes them from ../shared)')
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    return subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'evaluate.py'), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.integration
def test_two_runs_write_identical_metrics_and_a_table_png_and_result(tmp_path: Path) -> None:
    outs = []
    for k in range(2):
        out = tmp_path / f'run{k}'
        proc = _evaluate(
            '--scenario', 'cut_in', '--seed', '5', '--seconds', '4', '--out', str(out)
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        outs.append(out / 'cut_in-s5-4s' / 'fused')
    first, second = ((o / 'metrics.json').read_text() for o in outs)
    assert first == second  # lock-step: the same outputs on any machine, any load
    metrics = json.loads(first)
    assert metrics['frames'] == metrics['frames_fused'] == 120
    assert metrics['ack_timeouts'] == 0 and metrics['frames_missing'] == []
    assert 0.0 < metrics['visible']['recall'] <= 1.0
    assert set(metrics['planning']) >= {'collisions', 'min_gap_m', 'emergency_stops'}
    assert (outs[0] / 'run.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    result = proc.stdout.strip().splitlines()[-1]
    assert result.startswith('RESULT precision=')
    for key in (
        'recall',
        'mota',
        'pos_err_m',
        'vel_err_mps',
        'id_switches',
        'fp_per_frame',
        'collisions',
        'min_gap_m',
        'frames',
        'frames_fused',
    ):
        assert f' {key}=' in result
    assert 'evaluation (visible objects' in proc.stdout


@pytest.mark.slow
@pytest.mark.integration
def test_the_short_suite_holds_the_stored_baseline(tmp_path: Path) -> None:
    # What make test guards: 2 scenarios × 4 s, fused and radar-only, against the baseline.
    proc = _evaluate(
        '--suite',
        '--scenarios',
        'cut_in,stopped_car',
        '--seeds',
        '1',
        '--seconds',
        '4',
        '--ablate',
        'radar_only',
        '--baseline',
        str(BASELINE),
        '--out',
        str(tmp_path),
    )
    assert 'REGRESSION' not in proc.stdout, proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    keys = yaml.safe_load(BASELINE.read_text())['runs']
    assert {'cut_in-s100-4s/fused', 'stopped_car-s100-4s/radar_only'} <= set(keys)


@pytest.mark.slow
@pytest.mark.integration
def test_a_deliberately_worse_tracker_fails_the_gate(tmp_path: Path) -> None:
    """The gate can fail for the product: the shipped graph with a tracker that confirms a
    track only after 12 hits (shipped: 3) loses recall, and the run's baseline entry names it.
    (The unchanged build passing the same entry: the short-suite test above.)"""
    config = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    fusion = config['fusion']['ros__parameters']
    fusion['tracker'] = {**fusion.get('tracker', {}), 'confirm_hits': 12}
    fusion.setdefault('fusion', {})['camera_confirm_score'] = 0.0  # no early confirmation
    worse = tmp_path / 'worse.yaml'
    worse.write_text(yaml.safe_dump(config, sort_keys=False))
    proc = _evaluate(
        '--scenario', 'cut_in', '--seed', '100', '--seconds', '4', '--config', str(worse),
        '--baseline', str(BASELINE), '--out', str(tmp_path / 'out'),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    regressions = [x for x in proc.stdout.splitlines() if x.startswith('REGRESSION ')]
    assert any(x.startswith('REGRESSION cut_in-s100-4s/fused: recall ') for x in regressions), (
        proc.stdout[-3000:]
    )


@pytest.mark.slow
@pytest.mark.integration
def test_the_radar_as_radar_msgs_tracks_scores_as_the_radar_objects(tmp_path: Path) -> None:
    """A third-party driver's radar_msgs/RadarTracks (the replay publishes the bag's radar so,
    fusion_node takes it with radar_type: tracks) against rt_fusion's RadarObjects, same
    scenario and seed. RadarTrack has no existence probability nor orientation: those are the
    only differences, and they move the scores by little."""
    proc = _evaluate(
        '--scenario', 'cut_in', '--seed', '7', '--seconds', '4', '--camera', '640x360',
        '--ablate', 'radar_tracks', '--out', str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / 'cut_in-s7-4s'
    objects = json.loads((run / 'fused' / 'metrics.json').read_text())['visible']
    tracks = json.loads((run / 'radar_tracks' / 'metrics.json').read_text())['visible']
    for key in ('precision', 'recall', 'mota'):
        assert tracks[key] == pytest.approx(objects[key], abs=0.03), (key, objects, tracks)
    assert tracks['recall'] > 0.5  # the radar really went through


@pytest.mark.slow
@pytest.mark.integration
def test_closed_loop_the_planner_stops_the_ego_behind_the_stopped_car(tmp_path: Path) -> None:
    """--closed-loop: the planner drives the ego (sim.launch.py). The scenario's script drives
    through the stopped car (its box overlaps it from about 5.8 s); driven by the plans the ego
    slows and stays behind it, every plan applied on time (deterministic)."""
    import math  # noqa: PLC0415

    from rt_fusion.core import evaluation as ev  # noqa: PLC0415
    from rt_fusion.core.scenario.world import build_world  # noqa: PLC0415

    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'stopped_car.yaml').read_text())
    world = build_world(scenario, 8.0)
    actors = [
        ev.ActorTrack(
            a.id,
            a.t[::100],
            a.x[::100],
            a.y[::100],
            a.yaw[::100],
            a.size[0],
            a.size[1],
        )
        for a in world.actors
    ]
    scripted = [
        ev.EgoSample(t, st['x'], st['y'], st['yaw'], math.hypot(st['vx'], st['vy']))
        for t in np.arange(0.0, 8.0, 0.1)
        for st in [world.ego.at(float(t))]
    ]
    assert ev.score_driving(scripted, actors)['collision_samples'] > 0  # the open loop's ego
    proc = _evaluate(
        '--closed-loop', '--scenario', 'stopped_car', '--seed', '3', '--seconds', '14',
        '--out', str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / 'stopped_car-s3-14s-closed' / 'fused'
    metrics = json.loads((run / 'metrics.json').read_text())
    driving = metrics['driving']
    assert driving['plan_timeouts'] == 0 and metrics['ack_timeouts'] == 0
    assert driving['plans_applied'] >= 400  # a plan per fused frame drove the ego
    assert driving['collision_samples'] == 0, driving
    truth = json.loads((run / 'scenario' / 'ground_truth.json').read_text())
    end = truth['frames'][-1]['ego']
    # Where the script is 100 m past it, the driven ego is behind the stopped car (s = 90 m),
    # crawling or stopped (seed 7 stopped 5 m behind it).
    assert end['s'] < 90.0 - 4.5, end
    assert driving['final_speed_mps'] < 5.0, driving
    result = proc.stdout.strip().splitlines()[-1]
    assert ' ego_collisions=0 ' in result and ' ego_min_gap_m=' in result


def test_a_regression_names_every_metric_that_got_worse() -> None:
    from rt_fusion.core.evaluation.runs import compare  # noqa: PLC0415

    baseline = {
        'tolerances': {'recall': 0.02, 'pos_err_m': 0.05, 'id_switches': 0},
        'runs': {'a/fused': {'recall': 0.9, 'pos_err_m': 0.3, 'id_switches': 1, 'mota': 0.8}},
    }
    ok = {'a/fused': {'recall': 0.89, 'pos_err_m': 0.34, 'id_switches': 1, 'mota': 0.9}}
    assert compare(ok, baseline) == []
    bad = {'a/fused': {'recall': 0.85, 'pos_err_m': 0.4, 'id_switches': 2, 'mota': None}}
    found = compare(bad, baseline)
    assert len(found) == 4
    assert any('recall' in f for f in found) and any('pos_err_m' in f for f in found)
    assert any('id_switches' in f for f in found) and any('mota missing' in f for f in found)


def test_a_run_without_a_baseline_entry_fails_the_gate() -> None:
    from rt_fusion.core.evaluation.runs import compare  # noqa: PLC0415

    baseline = {'runs': {'a/fused': {'recall': 0.9}}}
    found = compare({'a/fused': {'recall': 0.9}, 'a/camera_only': {'recall': 0.5}}, baseline)
    assert found == ['a/camera_only: no baseline entry (store one with --write-baseline)']


def test_every_run_of_make_eval_has_a_baseline_entry() -> None:
    """`make eval`'s runs (every scenario x 3 seeds x 6 s, fused and both ablations; the closed
    loop) each have an entry, so none of them goes unchecked."""
    runs = set(yaml.safe_load(BASELINE.read_text())['runs'])
    scenarios = sorted(p.stem for p in (ROOT / 'config' / 'scenarios').glob('*.yaml'))
    assert len(scenarios) >= 4, scenarios
    want = {
        f'{name}-s{seed}-6s/{variant}'
        for name in scenarios
        for seed in (100, 101, 102)
        for variant in ('fused', 'radar_only', 'camera_only')
    } | {'stopped_car-s5-12s-closed/fused'}
    assert want <= runs, sorted(want - runs)
    makefile = (ROOT / 'Makefile').read_text()
    assert '--suite --seeds 3 --seconds 6 --ablate radar_only,camera_only' in makefile
    assert '--closed-loop --scenario stopped_car --seconds 12' in makefile


def test_an_ablation_is_scored_on_what_its_own_sensor_sees() -> None:
    """An object only the radar sees is visible to the fused and the radar-only runs, not a
    camera-only miss; one only the camera sees is not a radar-only miss."""
    from rt_fusion.core.evaluation import truth_frames  # noqa: PLC0415
    from rt_fusion.core.evaluation.runs import SENSORS  # noqa: PLC0415

    def obj(oid: int, camera: bool, radar: bool) -> dict[str, Any]:
        return {
            'id': oid, 'ego_x': 30.0, 'ego_y': 0.0, 'vx': 0.0, 'vy': 0.0, 'class': 'car',
            'visible': {'camera': camera, 'radar': radar},
        }  # fmt: skip

    truth = {
        'frames': [
            {
                'stamp_ns': 1,
                'ego': {'yaw': 0.0},
                'objects': [obj(1, True, True), obj(2, False, True), obj(3, True, False)],
            }
        ]
    }
    seen = {v: [o.visible for o in truth_frames(truth, s)[1]] for v, s in SENSORS.items()}
    assert seen == {
        'fused': [True, True, True],
        'radar_only': [True, True, False],
        'camera_only': [True, False, True],
        'radar_tracks': [True, True, True],  # fused, the radar through RadarTracks
    }


@pytest.mark.slow
@pytest.mark.integration
def test_the_fusion_places_the_camera_by_the_calibration_file(tmp_path: Path) -> None:
    """The front camera mounted 0.3 m left and turned 2°: the camera-only tracks scored with the
    matching calibration (config/calibration/scenario_camera_turned.yaml) are where the
    straight-mounted camera's are; with the straight calibration they land beside the objects
    (2° is 1.4 m at 40 m), and fewer of them match."""
    runs: dict[str, dict[str, float]] = {}
    turned = ('--camera-mount', '1.8,0.3,1.4,2')
    matching = ('--calibration', str(ROOT / 'config/calibration/scenario_camera_turned.yaml'))
    for name, extra in (('straight', ()), ('matching', turned + matching), ('wrong', turned)):
        proc = _evaluate(
            '--scenario', 'cut_in', '--seed', '11', '--seconds', '4', '--camera', '640x360',
            '--ablate', 'camera_only', '--no-fused', '--out', str(tmp_path / name), *extra,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert not (tmp_path / name / 'cut_in-s11-4s' / 'fused').exists()  # --no-fused
        metrics = tmp_path / name / 'cut_in-s11-4s' / 'camera_only' / 'metrics.json'
        runs[name] = json.loads(metrics.read_text())['visible']
    straight, matching_, wrong = runs['straight'], runs['matching'], runs['wrong']
    assert matching_['mota'] == pytest.approx(straight['mota'], abs=0.08), runs
    assert wrong['mota'] < matching_['mota'] - 0.1, runs


def test_a_surround_rig_scores_every_camera_s_view() -> None:
    """``--cameras 4``: the truth says which rig camera sees each object. An object only the
    rear camera sees counts for the fused and the camera-only runs (the rig is the camera),
    and each camera's recall is on its own view (``by_camera``)."""
    from rt_fusion.core.evaluation import EvalParams  # noqa: PLC0415
    from rt_fusion.core.evaluation.runs import SENSORS, score  # noqa: PLC0415

    def obj(oid: int, x: float, seen: dict[str, bool]) -> dict[str, Any]:
        return {
            'id': oid, 'x': x, 'y': 0.0, 'yaw': 0.0, 'ego_x': x, 'ego_y': 0.0, 'vx': 0.0,
            'vy': 0.0, 'size': [4.5, 1.9, 1.5], 'class': 'car', 'visible': seen,
        }  # fmt: skip

    off = {'camera_left': False, 'camera_right': False}
    front = {'camera': True, 'radar': True, 'camera_rear': False, **off}
    rear = {'camera': False, 'radar': False, 'camera_rear': True, **off}
    ego = {'x': 0.0, 'y': 0.0, 'yaw': 0.0, 'vx': 0.0, 'vy': 0.0, 's': 0.0, 'd': 0.0}
    stamps = (1_000, 2_000)
    truth = {
        'cameras': 4,
        'frames': [
            {
                'stamp_ns': t,
                't': k,
                'ego': ego,
                'objects': [obj(1, 30.0, front), obj(2, -20.0, rear)],
            }
            for k, t in enumerate(stamps)
        ],
    }

    def rec(xs: list[float]) -> dict[str, Any]:
        objs = [(k + 1, x, 0.0, 0.0, 0.0, 1, 1.0) for k, x in enumerate(xs)]
        return {
            'objects': [
                {'stamp_ns': t, 'inputs_complete_ns': t, 'published_ns': t, 'objects': objs}
                for t in stamps
            ],
            'replayed': 2, 'ack_timeouts': 0, 'plans': [], 'odometry': {},
        }  # fmt: skip

    fused, _, _ = score(rec([30.0, -20.0]), truth, 2, EvalParams(), SENSORS['fused'])
    assert fused['visible']['recall'] == 1.0 and fused['visible']['gt'] == 4
    assert fused['by_camera'] == {
        'front': {'recall': 1.0, 'gt': 2},
        'left': {'recall': None, 'gt': 0},
        'right': {'recall': None, 'gt': 0},
        'rear': {'recall': 1.0, 'gt': 2},
    }
    cam, _, _ = score(rec([30.0]), truth, 2, EvalParams(), SENSORS['camera_only'])
    assert cam['visible']['recall'] == 0.5  # the rear car, missed, is a camera-only miss
    assert cam['by_camera']['rear'] == {'recall': 0.0, 'gt': 2}


@pytest.mark.slow
@pytest.mark.integration
def test_a_surround_rig_run_scores_each_camera_and_finds_what_is_behind(tmp_path: Path) -> None:
    """``--cameras 4`` end to end: the rig's bag, its truth per camera, the graph with the
    fusion's extra cameras, lock-step; the rear camera's view is scored on its own and found
    (before the height rule its depths read 20 % long: rear recall 0)."""
    out = tmp_path / 'rig'
    proc = _evaluate(
        '--scenario', 'cut_in', '--seed', '5', '--seconds', '3', '--cameras', '4',
        '--out', str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    metrics = json.loads((out / 'cut_in-s5-3s' / 'fused' / 'metrics.json').read_text())
    cams = metrics['by_camera']
    assert set(cams) == {'front', 'left', 'right', 'rear'}, cams
    assert cams['rear']['gt'] > 100 and cams['rear']['recall'] > 0.7, cams
    assert cams['front']['recall'] > 0.9, cams
    assert metrics['visible']['precision'] > 0.85, metrics['visible']
    assert 0.0 < metrics['field']['hota'] <= 1.0, metrics['field']


def test_a_rig_ablation_leaves_one_camera_and_its_mounting_out(tmp_path: Path) -> None:
    """``--ablate no_rear`` (with ``--cameras 4``): the fusion's cameras and mountings without
    the rear one (the launch file then does not replay it either); without a rig it is refused
    by name."""
    from rt_fusion.ros.harness import lockstep  # noqa: PLC0415

    rig = lockstep.config_for(ROOT / 'config' / 'replay.yaml', tmp_path, cameras=4)
    params = yaml.safe_load(lockstep.run_params(rig, 'no_rear', tmp_path).read_text())
    fusion = params['fusion']['ros__parameters']
    assert fusion['cameras'] == ['left', 'right']
    assert fusion['fusion']['extra_camera_yaw'] == pytest.approx([math.pi / 2, -math.pi / 2])
    assert len(fusion['fusion']['extra_camera_x']) == 2
    with pytest.raises(lockstep.GraphRunError, match='no_rear'):
        lockstep.run_params(ROOT / 'config' / 'replay.yaml', 'no_rear', tmp_path)
