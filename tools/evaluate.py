#!/usr/bin/env python3
"""Regression replay scored against ground truth.

    python tools/evaluate.py --scenario cut_in --seed 5 --seconds 6
    python tools/evaluate.py --scenario-file my_scenario.yaml --seed 1
    python tools/evaluate.py --bag PATH/TO/SCENARIO_OR_BAG          # a generated or recorded bag
    python tools/evaluate.py --suite --seeds 3 --ablate radar_only,camera_only
    python tools/evaluate.py --suite --baseline config/eval_baseline.yaml   # exit 1 on regression
    python tools/evaluate.py --closed-loop --scenario stopped_car --seconds 12  # planner drives

A built-in scenario (``config/scenarios/``) or a scenario YAML is generated first (seeded,
deterministic). The bag is then replayed **lock-step** through ``launch/replay.launch.py`` with
the shipped ``config/replay.yaml`` (the graph a user launches: replay_node → fusion_node →
trajectory_node), with these run-time overrides only: the fusion node acknowledges every input it
has taken in and the replay waits for it (``mode:=lockstep``, ``ack_topic``), stamps stay the
recorded ones (``restamp:=false``) and the planner plans once per object list on the stamps'
clock (``clock: stamps``). Every message is therefore handled in the same order with the same
inputs on any machine: two runs give the same outputs and the same ``metrics.json``.

Outputs (fused objects, odometry, trajectories) are recorded and scored with
:mod:`rt_fusion.core.evaluation` against the truth the generator wrote (``ground_truth.json``):
perception for objects visible to the run's sensors (any sensor for the fused run, its one sensor
for an ablation: ``visible_any`` keeps every sensor's view) and for all objects (1–80 m,
|y| ≤ 20 m, 2 m gate), planning against the true actors' motion. ``--ablate`` adds runs with
an input switched off through parameters: ``radar_only`` (no network: ``fusion.backend: none``)
and ``camera_only`` (``fusion.radar_input: false``). Machine-dependent figures (latency) go to
``timing.json``, not ``metrics.json``.

Per run: ``OUT/<scenario>-s<seed>/<variant>/metrics.json``, ``timing.json``, ``run.png``,
``graph.log``. A table is printed and a last line ``RESULT precision=… recall=… mota=…
pos_err_m=… vel_err_mps=… id_switches=… fp_per_frame=… collisions=… collisions_seen=…
min_gap_m=… frames=… frames_fused=…`` (the fused runs' aggregate). ``collisions`` counts plans
whose first 3 s overlap a true actor; ``collisions_seen`` those among them where the actor had
been seen by a sensor when the car planned (the rest are the sensor set's blind spots: who and
when in ``metrics.json``, ``planning.collision_actors``). A bag without truth gets the
consistency part (frames fused, acknowledgements, latency) and says so.

``--closed-loop`` runs ``launch/sim.launch.py`` instead: ``sim_node`` renders the scenario's
sensors as it goes, lock-step with the fusion node, and the planner's trajectories drive the ego
(:mod:`rt_fusion.core.scenario.closed_loop`); the truth it writes (``OUT/…-closed/<variant>/
scenario/ground_truth.json``) is the ego as it was driven, and the run is also scored by what the
ego did (``driving``: collisions with the true actors, the smallest gap, final speed, yield to an
emergency vehicle; ``ego_collisions=… ego_min_gap_m=… ego_final_speed_mps=…`` on the RESULT
line). ``--sim-script`` lets the script drive instead: the simulator checked against the replay.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rt_fusion.core import evaluation as ev
from rt_fusion.core.scenario.generate import code_digest, generate
from rt_fusion.core.scenario.sensors import CameraModel
from rt_fusion.ros import compat, launching
from rt_fusion_tools import report

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / 'config' / 'scenarios'
CONFIG = ROOT / 'config' / 'replay.yaml'
ACK_TOPIC = '/fusion/ack'
START_TOPIC = '/evaluate/start'
VARIANTS = ('fused', 'radar_only', 'camera_only')
#: The sensors whose sight makes a truth object count as ``visible`` in each variant: a
#: single-modality ablation is scored on what its one sensor can see (an object only the radar
#: sees is not a camera-only miss); ``visible_any`` in metrics.json keeps every sensor's view.
SENSORS = {'fused': ('camera', 'radar'), 'radar_only': ('radar',), 'camera_only': ('camera',)}
HIGHER_IS_BETTER = (
    'precision',
    'recall',
    'f1',
    'mota',
    'class_accuracy',
    'emergency_recognised',
    'min_gap_m',
    'ego_min_gap_m',
)
LOWER_IS_BETTER = (
    'pos_err_m',
    'vel_err_mps',
    'id_switches',
    'fp_per_frame',
    'collisions',
    'collisions_seen',
    'emergency_stops',
    'ego_collisions',
)
RESULT_KEYS = (
    'precision',
    'recall',
    'mota',
    'pos_err_m',
    'vel_err_mps',
    'id_switches',
    'fp_per_frame',
    'collisions',
    'collisions_seen',
    'min_gap_m',
)
# --closed-loop: the ego as the planner drove it (samples where its box overlapped an actor's,
# the smallest gap over the run, and whether it ended stopped).
CLOSED_LOOP_KEYS = ('ego_collisions', 'ego_min_gap_m', 'ego_final_speed_mps')


# --- parameters of one run -------------------------------------------------------------------


def overrides(variant: str) -> dict[str, Any]:
    """What an evaluation run changes in the shipped parameter file (nothing else)."""
    # Every frame through the detector: lock-step runs are not real time, and quality is judged
    # on every frame (the CPU replays of config/replay.yaml skip frames to keep up).
    fusion: dict[str, Any] = {
        'ack_topic': ACK_TOPIC,
        'sync': {'max_wait_s': 1.0},
        'infer_period_s': 0.0,
    }
    # The single-modality ablations hear nothing either (the microphone is replayed to all).
    if variant == 'radar_only':
        fusion['backend'] = 'none'
        fusion['hearing_model'] = ''
    elif variant == 'camera_only':
        fusion['radar_input'] = False
        fusion['sync']['wait_for'] = ['imu']
        fusion['hearing_model'] = ''
    elif variant != 'fused':
        raise SystemExit(f'evaluate: unknown variant {variant!r} (one of {list(VARIANTS)})')
    return {'fusion': fusion, 'planner': {'clock': 'stamps'}}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def run_params(config: Path, variant: str, out: Path) -> Path:
    """The shipped parameter file with the run's overrides on top, written to ``out``."""
    base = yaml.safe_load(config.read_text())
    merged = dict(base)
    for node, values in overrides(variant).items():
        section = base.get(node, {}).get('ros__parameters', {})
        merged[node] = {'ros__parameters': _merge(section, values)}
    path = out / 'params.yaml'
    path.write_text(yaml.safe_dump(merged, sort_keys=True))
    return path


# --- recording the graph's outputs -----------------------------------------------------------


class Collector:
    """An rclpy node in this process recording fused objects, odometry and trajectories."""

    def __init__(self) -> None:
        import rclpy  # noqa: PLC0415
        from nav_msgs.msg import Odometry  # noqa: PLC0415
        from rclpy.context import Context  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.qos import (  # noqa: PLC0415
            DurabilityPolicy,
            QoSProfile,
            ReliabilityPolicy,
        )
        from rt_fusion_msgs.msg import ObjectArray, Trajectory  # noqa: PLC0415
        from std_msgs.msg import UInt64  # noqa: PLC0415

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('evaluate', context=self.context)
        reliable = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
        self.lock = threading.Lock()
        self.reset()
        # Publishers matched per output (the data path, not only the graph): the replay starts
        # once every output of the new graph reaches this process.
        self.matched = {'objects': 0, 'odometry': 0, 'trajectory': 0}
        for key, cls, topic, cb, qos in (
            ('objects', ObjectArray, '/fusion/out/objects', self._objects, reliable),
            # reliable: in a lock-step run the fusion publishes its odometry reliably too; a
            # best-effort reader here lost poses (and the plans without one went unscored)
            ('odometry', Odometry, '/fusion/out/odometry', self._odometry, reliable),
            ('trajectory', Trajectory, '/planner/out/trajectory', self._plan, reliable),
        ):
            events = compat.subscription_events(matched=functools.partial(self._matched, key))
            self.node.create_subscription(cls, topic, cb, qos, event_callbacks=events)
        self._latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self._uint64 = UInt64
        self.start_pub: Any = None  # one per run: a latched signal must not start the next one
        self.runs = 0
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _matched(self, key: str, info: Any) -> None:
        with self.lock:
            self.matched[key] = int(info.current_count)

    def start_when_listening(
        self, deadline_s: float, failed: Callable[[], list[str]] = list
    ) -> bool:
        """Once every output has a matched publisher, sends the replay its start signal; False
        at the deadline or as soon as ``failed()`` names a dead process."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not failed():
            with self.lock:
                ready = all(n > 0 for n in self.matched.values())
            if ready:
                self.runs += 1
                self.start_pub = self.node.create_publisher(
                    self._uint64, START_TOPIC, self._latched
                )
                self.start_pub.publish(self._uint64(data=self.runs))
                return True
            time.sleep(0.05)  # paced: discovery
        return False

    def reset(self) -> None:
        """Forgets what was recorded (a new run)."""
        if getattr(self, 'start_pub', None) is not None:
            self.node.destroy_publisher(self.start_pub)
            self.start_pub = None
        with getattr(self, 'lock', threading.Lock()):
            self.objects: list[dict[str, Any]] = []
            self.odometry: dict[int, tuple[float, float, float]] = {}
            self.plans: list[dict[str, Any]] = []

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    @staticmethod
    def _ns(stamp: Any) -> int:
        return int(stamp.sec) * 10**9 + int(stamp.nanosec)

    def _objects(self, msg: Any) -> None:
        rec = {
            'stamp_ns': self._ns(msg.header.stamp),
            'inputs_complete_ns': int(msg.inputs_complete_ns),
            'published_ns': int(msg.published_ns),
            'received_ns': time.time_ns(),
            'objects': [
                (
                    int(o.id),
                    float(o.position.x),
                    float(o.position.y),
                    float(o.velocity.x),
                    float(o.velocity.y),
                    int(o.object_class),
                )
                for o in msg.objects
            ],
        }
        with self.lock:
            self.objects.append(rec)

    def _odometry(self, msg: Any) -> None:
        q = msg.pose.pose.orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
        p = msg.pose.pose.position
        with self.lock:
            self.odometry[self._ns(msg.header.stamp)] = (float(p.x), float(p.y), yaw)

    def _plan(self, msg: Any) -> None:
        rec = {
            'stamp_ns': self._ns(msg.header.stamp),
            'status': int(msg.status),
            'published_ns': int(msg.published_ns),
            'received_ns': time.time_ns(),
            'points': [(p.t, p.x, p.y, p.yaw, p.v, p.a) for p in msg.points],
        }
        with self.lock:
            self.plans.append(rec)

    def close(self) -> None:
        """Stops spinning and shuts its context down."""
        self._stop.set()
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


# --- truth ---------------------------------------------------------------------------------------


def load_truth(folder: Path) -> dict[str, Any] | None:
    """``ground_truth.json`` beside the bag (a generated scenario), else None."""
    path = folder / 'ground_truth.json'
    return json.loads(path.read_text()) if path.is_file() else None


def actor_tracks(truth: dict[str, Any]) -> list[ev.ActorTrack]:
    """The true actors' world motion for the planning metrics."""
    series: dict[int, dict[str, Any]] = {}
    for frame in truth['frames']:
        for o in frame['objects']:
            s = series.setdefault(
                o['id'],
                {
                    't': [],
                    'x': [],
                    'y': [],
                    'yaw': [],
                    'size': o['size'],
                    'kind': o.get('class', ''),
                    'seen': math.inf,
                },
            )
            if any(o.get('visible', {}).values()):  # any sensor: what the car could know
                s['seen'] = min(s['seen'], frame['t'])
            s['t'].append(frame['t'])
            s['x'].append(o['x'])
            s['y'].append(o['y'])
            s['yaw'].append(o['yaw'])
    return [
        ev.ActorTrack(
            aid,
            np.asarray(s['t']),
            np.asarray(s['x']),
            np.asarray(s['y']),
            np.asarray(s['yaw']),
            float(s['size'][0]),
            float(s['size'][1]),
            kind=s['kind'],
            first_seen=s['seen'],
        )
        for aid, s in sorted(series.items())
    ]


def plans_in_world(
    recorded: list[dict[str, Any]],
    odometry: dict[int, tuple[float, float, float]],
    truth: dict[str, Any],
) -> list[ev.Plan]:
    """Trajectories (planner frame = fusion odometry frame) moved into the truth's world frame
    with the true ego pose at their stamp, so the plan is judged where the car really was."""
    ego_at = {int(f['stamp_ns']): (f['t'], f['ego']) for f in truth['frames']}
    out = []
    for rec in recorded:
        if not rec['points'] or rec['stamp_ns'] not in ego_at or rec['stamp_ns'] not in odometry:
            continue
        t0, ego = ego_at[rec['stamp_ns']]
        ox, oy, oyaw = odometry[rec['stamp_ns']]
        # world <- base (truth) composed with base <- odom (inverse of the fused odometry)
        dyaw = ego['yaw'] - oyaw
        c, s = math.cos(dyaw), math.sin(dyaw)
        pts = np.asarray(rec['points'], dtype=np.float64)
        px, py = pts[:, 1] - ox, pts[:, 2] - oy
        out.append(
            ev.Plan(
                float(t0),
                pts[:, 0],
                ego['x'] + c * px - s * py,
                ego['y'] + s * px + c * py,
                pts[:, 3] + dyaw,
                pts[:, 5],
                emergency=rec['status'] == 2,
            )
        )
    return out


# --- one run ----------------------------------------------------------------------------------


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) else (obj if math.isinf(obj) else round(obj, 6))
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round(v) for v in obj]
    return obj


def bag_counts(bag: Path) -> dict[str, int]:
    """Messages per topic of the replayed inputs in the bag."""
    from rt_fusion.core.bag import open_reader  # noqa: PLC0415

    with open_reader(bag) as reader:
        return {c.topic: c.msgcount for c in reader.connections}


def camera_topic(counts: dict[str, int]) -> str:
    """The bag's camera topic: the generator's JPEG one, or raw images a recorder wrote."""
    for topic in ('/camera/out/image/compressed', '/camera/out/image'):
        if counts.get(topic):
            return topic
    raise SystemExit(f'evaluate: the bag has no camera topic (it has {sorted(counts)})')


def run_graph(
    launch_file: str,
    arguments: dict[str, str],
    done: str,
    out: Path,
    collector: Collector,
    deadline_s: float,
) -> tuple[str, dict[str, Any]]:
    """Runs ``launch_file`` (lock-step) until a line starting with ``done`` (the replay's or the
    simulator's last line), lets the planner answer the last object lists, stops the graph;
    returns that line and what was recorded."""
    collector.reset()
    graph = launching.LaunchedGraph(launch_file, arguments, log=out / 'graph.log')
    try:
        if not collector.start_when_listening(120.0, graph.died):
            dead = '; '.join(graph.died())
            raise SystemExit(
                f'evaluate: the graph failed to start: {dead} (log: {out / "graph.log"})'
                if dead
                else f"evaluate: the graph's outputs never reached the recorder within 120 s "
                f'(log: {out / "graph.log"})'
            )
        line = graph.wait_for_line((done, 'process has died'), deadline_s)
        if line is not None and 'process has died' in line:
            raise SystemExit(
                f'evaluate: a node of the graph died: {line} (log: {out / "graph.log"})'
            )
        if line is None:
            raise SystemExit(
                f'evaluate: the graph did not finish within {deadline_s:.0f} s '
                f'(log: {out / "graph.log"})'
            )
        # The last frame's objects are out before its acknowledgement; the planner may still be
        # working on them: wait until it has answered every object list (or stays quiet).
        end, last, stable = time.monotonic() + 60.0, (-1, -1), 0
        while time.monotonic() < end:
            with collector.lock:
                n = (len(collector.objects), len(collector.plans))
            stable = stable + 1 if n == last else 0
            if (n[1] >= n[0] and stable >= 1) or stable >= 6:  # all answered, or 3 s quiet
                break
            last = n
            time.sleep(0.5)  # paced: the planner's last answers
    finally:
        graph.stop()
    with collector.lock:
        return line[line.index(done) :], {
            'objects': list(collector.objects),
            'odometry': dict(collector.odometry),
            'plans': list(collector.plans),
        }


def run_replay(
    bag: Path,
    variant: str,
    out: Path,
    collector: Collector,
    config: Path,
    deadline_s: float,
    camera: str,
) -> dict[str, Any]:
    """Lock-step replay of ``bag`` through replay.launch.py; returns what was recorded."""
    out.mkdir(parents=True, exist_ok=True)
    params = run_params(config, variant, out)
    line, rec = run_graph(
        'replay.launch.py',
        {
            'bag': str(bag),
            'mode': 'lockstep',
            'restamp': 'false',
            'ack_topic': ACK_TOPIC,
            'start_topic': START_TOPIC,
            'camera_topic': camera,
            'audio': 'true',  # the fusion's hearing (a bag without a microphone: nothing)
            'config': str(params),
        },
        'REPLAYED ',
        out,
        collector,
        deadline_s,
    )
    m = re.search(r'REPLAYED (\d+) ack_timeouts=(\d+)', line)
    rec['replayed'], rec['ack_timeouts'] = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
    return rec


def run_closed_loop(
    scenario: Path,
    seed: int,
    seconds: float,
    variant: str,
    out: Path,
    collector: Collector,
    config: Path,
    deadline_s: float,
    drive: bool = True,
) -> dict[str, Any]:
    """The scenario simulated by sim.launch.py, the planner driving the ego; its truth (the
    ego as driven) goes to ``out/scenario``. Returns what was recorded."""
    out.mkdir(parents=True, exist_ok=True)
    params = run_params(config, variant, out)
    line, rec = run_graph(
        'sim.launch.py',
        {
            'scenario': str(scenario),
            'seed': str(seed),
            'seconds': f'{float(seconds)!r}',
            'out': str(out / 'scenario'),
            'start_topic': START_TOPIC,
            'drive': str(drive).lower(),
            'config': str(params),
        },
        'SIMULATED ',
        out,
        collector,
        deadline_s,
    )
    fields = dict(kv.split('=') for kv in line.split()[2:])
    rec['replayed'] = int(line.split()[1])
    rec['ack_timeouts'] = int(fields['ack_timeouts'])
    rec['plan_timeouts'] = int(fields['plan_timeouts'])
    rec['plans_applied'] = int(fields['plans'])
    rec['frames'] = int(fields['frames'])
    return rec


def score(
    rec: dict[str, Any],
    truth: dict[str, Any] | None,
    counts: dict[str, int],
    params: ev.EvalParams,
    sensors: tuple[str, ...] = SENSORS['fused'],
) -> tuple[dict[str, Any], dict[str, Any], list[ev.Frame]]:
    """(metrics, timing, frames) of one run; ``visible`` counts the objects that one of
    ``sensors`` sees (the variant's), ``visible_any`` those that any sensor sees."""
    camera = counts.get('/camera/out/image/compressed', 0) + counts.get('/camera/out/image', 0)
    fused_stamps = [o['stamp_ns'] for o in rec['objects']]
    metrics: dict[str, Any] = {
        'frames': camera,
        'frames_fused': len(set(fused_stamps)),
        'duplicates': len(fused_stamps) - len(set(fused_stamps)),
        'replayed': rec['replayed'],
        'ack_timeouts': rec['ack_timeouts'],
        'has_truth': truth is not None,
    }
    timing = {
        'fusion_node': ev.latency_stages(
            {
                'inputs_complete': [o['inputs_complete_ns'] for o in rec['objects']],
                'published': [o['published_ns'] for o in rec['objects']],
            }
        ),
        'note': 'lock-step replay: each input waits for the previous acknowledgement; these are '
        'per-stage costs, not live latencies (tools/demo.py, tools/bench_*.py measure those)',
    }
    frames: list[ev.Frame] = []
    if truth is None:
        metrics['note'] = 'no ground truth beside this bag: consistency only'
        return metrics, timing, frames
    by_stamp = {o['stamp_ns']: o for o in rec['objects']}
    ablation = tuple(sensors) != SENSORS['fused']
    any_sensor: list[ev.Frame] = []
    everything = ev.truth_frames(truth) if ablation else {}
    for stamp, objs in sorted(ev.truth_frames(truth, sensors).items()):
        got = by_stamp.get(stamp)
        outputs = (
            [ev.OutputObject(i, x, y, vx, vy, c) for i, x, y, vx, vy, c in got['objects']]
            if got is not None
            else None
        )
        frames.append(ev.Frame(stamp, objs, outputs))
        if ablation:
            any_sensor.append(ev.Frame(stamp, everything[stamp], outputs))
    metrics['frames_missing'] = [k for k, f in enumerate(frames) if f.outputs is None]
    metrics['visible_to'] = list(sensors)
    metrics['visible'] = ev.score_perception(frames, params, visible_only=True)
    if ablation:
        metrics['visible_any'] = ev.score_perception(any_sensor, params, visible_only=True)
    metrics['all'] = ev.score_perception(frames, params, visible_only=False)
    plans = plans_in_world(rec['plans'], rec['odometry'], truth)
    metrics['planning'] = ev.score_planning(plans, actor_tracks(truth))
    metrics['planning']['trajectories'] = len(rec['plans'])
    if 'plan_timeouts' in rec:  # closed loop: the ego as the plans drove it
        ego = [
            ev.EgoSample(
                f['t'],
                f['ego']['x'],
                f['ego']['y'],
                f['ego']['yaw'],
                math.hypot(f['ego']['vx'], f['ego']['vy']),
                f['ego']['d'],
                # A siren from 60 m behind to 10 m ahead: when a driver makes way.
                any(o['siren'] and -60.0 <= o['ego_x'] <= 10.0 for o in f['objects']),
            )
            for f in truth['frames']
        ]
        metrics['driving'] = ev.score_driving(ego, actor_tracks(truth))
        metrics['driving']['yield'] = ev.score_yield(ego)
        metrics['driving']['plan_timeouts'] = rec['plan_timeouts']
        metrics['driving']['plans_applied'] = rec['plans_applied']
    return _round(metrics), timing, frames


def plot(frames: list[ev.Frame], metrics: dict[str, Any], title: str, path: Path) -> None:
    """Truth vs outputs over time, and the per-frame errors, as a PNG."""
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    t0 = frames[0].stamp_ns if frames else 0
    tracks: dict[int, list[tuple[float, float, float, bool]]] = {}
    ox, oy, ot = [], [], []
    err_t, err, fp_t, fp_n, fn_n = [], [], [], [], []
    for f in frames:
        t = (f.stamp_ns - t0) / 1e9
        for o in f.truth:
            tracks.setdefault(o.id, []).append((t, o.x, o.y, o.visible))
        outs = f.outputs or []
        for out in outs:
            ot.append(t)
            ox.append(out.x)
            oy.append(out.y)
        pairs = ev.match(f.truth, outs, 2.0)
        err_t.append(t)
        err.append(float(np.mean([d for _, _, d in pairs])) if pairs else np.nan)
        fp_t.append(t)
        fp_n.append(len(outs) - len(pairs))
        hit = {i for i, _, _ in pairs}
        fn_n.append(sum(o.visible and i not in hit for i, o in enumerate(f.truth)))
    for aid, pts in sorted(tracks.items()):
        arr = np.asarray(pts, dtype=np.float64)
        line = axes[0].plot(arr[:, 0], arr[:, 1], lw=2, label=f'truth {aid}')[0]
        axes[1].plot(arr[:, 0], arr[:, 2], lw=2, color=line.get_color())
        hidden = arr[:, 3] < 0.5
        axes[0].plot(arr[hidden, 0], arr[hidden, 1], 'x', color=line.get_color(), ms=3)
    axes[0].scatter(ot, ox, s=4, c='k', label='outputs', zorder=3)
    axes[1].scatter(ot, oy, s=4, c='k', zorder=3)
    axes[0].set_ylabel('x ahead [m]')
    axes[1].set_ylabel('y left [m]')
    axes[0].legend(fontsize=7, ncol=4, loc='upper right')
    axes[2].plot(err_t, err, label='mean position error of matches [m]')
    axes[2].step(fp_t, fp_n, where='mid', label='unmatched outputs (any range)')
    axes[2].step(fp_t, fn_n, where='mid', label='missed visible truth (any range)')
    axes[2].set_xlabel('time [s]')
    axes[2].legend(fontsize=8)
    vis = metrics.get('visible', {})
    fig.suptitle(
        f'{title}: precision {vis.get("precision")}, recall {vis.get("recall")}, '
        f'MOTA {vis.get("mota")} (truth: lines, x = hidden from every sensor)'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_drive(
    truth: dict[str, Any], scenario: Path, metrics: dict[str, Any], title: str, path: Path
) -> None:
    """Closed loop: the ego as the plans drove it against its script (speed, lane offset) and
    its gap to the nearest true actor, as a PNG."""
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from rt_fusion.core.scenario.world import build_world  # noqa: PLC0415

    frames = truth['frames']
    t = np.array([f['t'] for f in frames])
    speed = np.array([math.hypot(f['ego']['vx'], f['ego']['vy']) for f in frames])
    offset = np.array([f['ego']['d'] for f in frames])
    script = build_world(yaml.safe_load(scenario.read_text()), float(truth['seconds'])).ego
    s_speed = [math.hypot(script.at(x)['vx'], script.at(x)['vy']) for x in t]
    s_offset = [script.at(x)['d'] for x in t]
    gap = []
    for f in frames:
        ego = f['ego']
        box = ev.box_corners(ego['x'], ego['y'], ego['yaw'], 4.5, 1.9)
        near = [
            ev.box_gap(box, ev.box_corners(o['x'], o['y'], o['yaw'], *o['size'][:2]))
            for o in f['objects']
            if o['class'] != 'static' and math.hypot(o['ego_x'], o['ego_y']) < 60.0
        ]
        gap.append(min(near) if near else np.nan)
    near_siren = [
        any(o['siren'] and -60.0 <= o['ego_x'] <= 10.0 for o in f['objects']) for f in frames
    ]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    axes[0].plot(t, speed, label='driven by the plans')
    axes[0].plot(t, s_speed, '--', label="the scenario's script")
    axes[0].set_ylabel('ego speed [m/s]')
    axes[1].plot(t, offset, label='driven')
    axes[1].plot(t, s_offset, '--', label='script')
    axes[1].set_ylabel('offset from the lane [m]')
    axes[2].plot(t, gap, label='gap to the nearest road user (box to box)')
    axes[2].axhline(0.0, color='r', lw=0.8)
    axes[2].set_ylabel('gap [m]')
    axes[2].set_xlabel('time [s]')
    for ax in axes:
        if any(near_siren):
            ax.fill_between(
                t, 0, 1, where=near_siren, transform=ax.get_xaxis_transform(), alpha=0.12,
                color='C3', label='emergency vehicle near',
            )  # fmt: skip
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc='upper right')
    d = metrics.get('driving', {})
    fig.suptitle(
        f'{title} (closed loop): {d.get("collision_samples")} collision samples, '
        f'min gap {d.get("min_gap_m", math.nan):.2f} m, '
        f'final speed {d.get("final_speed_mps", math.nan):.2f} m/s'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- suites, tables, baselines ---------------------------------------------------------------


def flat(metrics: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of one run (the RESULT line's and the baseline's keys)."""
    vis = metrics.get('visible', {})
    plan = metrics.get('planning', {})
    drive = metrics.get('driving', {})
    return {
        'precision': vis.get('precision'),
        'recall': vis.get('recall'),
        'f1': vis.get('f1'),
        'mota': vis.get('mota'),
        'pos_err_m': vis.get('pos_err_m'),
        'vel_err_mps': vis.get('vel_err_mps'),
        'id_switches': vis.get('id_switches'),
        'fp_per_frame': vis.get('fp_per_frame'),
        'class_accuracy': vis.get('class_accuracy'),
        'emergency_recognised': vis.get('emergency_recognised'),
        'collisions': plan.get('collisions'),
        'collisions_seen': plan.get('collisions_seen'),
        'min_gap_m': plan.get('min_gap_m'),
        'emergency_stops': plan.get('emergency_stops'),
        'ego_collisions': drive.get('collision_samples'),
        'ego_min_gap_m': drive.get('min_gap_m'),
        'ego_final_speed_mps': drive.get('final_speed_mps'),
        'frames': metrics.get('frames'),
        'frames_fused': metrics.get('frames_fused'),
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over runs (sums for counts)."""
    out: dict[str, Any] = {}
    for key in flat({}):
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if key == 'emergency_recognised':  # only runs with an emergency vehicle in view count
            values = [v for v in values if not math.isnan(v)]
        if not values:
            out[key] = None
        elif key in (
            'id_switches',
            'collisions',
            'collisions_seen',
            'emergency_stops',
            'ego_collisions',
            'frames',
            'frames_fused',
        ):
            out[key] = int(sum(values))
        elif key in ('min_gap_m', 'ego_min_gap_m'):
            out[key] = round(float(min(values)), 3)
        else:
            out[key] = round(float(np.mean(values)), 4)
    return out


def print_table(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """A rich table, one row per run."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="evaluation (visible objects: to the run's sensors; 1–80 m, 2 m gate)")
    cols = (
        'precision',
        'recall',
        'mota',
        'pos_err_m',
        'vel_err_mps',
        'id_switches',
        'fp_per_frame',
        'class_accuracy',
        'emergency_recognised',
        'collisions',
        'collisions_seen',
        'min_gap_m',
        *(c for c in CLOSED_LOOP_KEYS if any(r.get(c) is not None for _n, r in rows)),
        'frames_fused',
    )
    table.add_column('run')
    for c in cols:
        table.add_column(c.replace('_', ' '), justify='right')
    for name, row in rows:
        table.add_row(
            name,
            *(
                ''
                if row.get(c) is None
                else f'{row[c]:.3g}'
                if isinstance(row[c], float)
                else str(row[c])
                for c in cols
            ),
        )
    Console(width=200).print(table)


def compare(rows: dict[str, dict[str, Any]], baseline: dict[str, Any]) -> list[str]:
    """Every metric that regressed against the baseline beyond its tolerance, and every run
    without a baseline entry (a run nobody checks is a gate that cannot fail)."""
    tol = baseline.get('tolerances', {})
    regressions = [
        f'{key}: no baseline entry (store one with --write-baseline)'
        for key in sorted(set(rows) - set(baseline.get('runs', {})))
    ]
    for key, base in baseline.get('runs', {}).items():
        got = rows.get(key)
        if got is None:
            continue
        for metric, want in base.items():
            have = got.get(metric)
            if want is None or have is None:
                if want is not None:
                    regressions.append(f'{key}: {metric} missing (baseline {want})')
                continue
            t = float(tol.get(metric, 0.0))
            if metric in HIGHER_IS_BETTER and have < want - t:
                regressions.append(f'{key}: {metric} {have} < baseline {want} - {t}')
            elif metric in LOWER_IS_BETTER and have > want + t:
                regressions.append(f'{key}: {metric} {have} > baseline {want} + {t}')
    return regressions


def run_name(scenario: str, seed: int, seconds: float) -> str:
    """``cut_in-s5-6s``: the name of a run's folder and its baseline key."""
    return f'{scenario}-s{seed}-{seconds:g}s'


def make_bag(
    args: argparse.Namespace, scenario: dict[str, Any], name: str, seed: int, out: Path
) -> Path:
    """Generates the scenario into ``out`` unless it is already there (same name, seed, length)."""
    folder = out / run_name(name, seed, args.seconds) / 'scenario'
    # Reused only when made by this very generator from this very description: a bag from an
    # older generator scored against today's baseline is a false regression.
    key = hashlib.sha256(
        json.dumps([scenario, seed, args.seconds, list(args.camera)], sort_keys=True).encode()
        + code_digest().encode()
    ).hexdigest()
    stamp = folder / '.generator_key'
    if load_truth(folder) is None or not stamp.is_file() or stamp.read_text() != key:
        if folder.exists():
            shutil.rmtree(folder)
        generate(scenario, args.seconds, seed, folder, camera=CameraModel.sized(*args.camera))
        stamp.write_text(key)
    return folder


def main(argv: list[str] | None = None) -> int:
    """Runs the evaluation; exit status 1 on a regression against ``--baseline``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = parser.add_mutually_exclusive_group()
    src.add_argument('--scenario', default=None, help='built-in scenario (config/scenarios)')
    src.add_argument('--scenario-file', type=Path, help='a scenario YAML')
    src.add_argument('--bag', type=Path, help='a generated scenario folder or a recorded bag')
    src.add_argument('--suite', action='store_true', help='every built-in scenario × --seeds')
    parser.add_argument('--seed', type=int, default=5)
    parser.add_argument('--seeds', type=int, default=3, help='--suite: seeds per scenario')
    parser.add_argument('--first-seed', type=int, default=100, help='--suite: first seed')
    parser.add_argument('--scenarios', default='', help='--suite: comma-separated subset')
    parser.add_argument('--seconds', type=float, default=6.0)
    parser.add_argument(
        '--camera',
        type=report.resolution,
        default=(1920, 1080),
        help='scenario camera WxH, 16:9 (default 1920x1080, the vehicle camera)',
    )
    parser.add_argument('--ablate', default='', help='also run: radar_only,camera_only')
    parser.add_argument('--config', type=Path, default=CONFIG, help='parameter file of the graph')
    parser.add_argument('--gate', type=float, default=2.0, help='match gate [m]')
    parser.add_argument(
        '--zoom',
        type=float,
        help="the fusion node's zoom for every run (default: the config's, 3 in "
        'config/replay.yaml; 1: off)',
    )
    parser.add_argument('--baseline', type=Path, help='fail (exit 1) on regressions against it')
    parser.add_argument('--write-baseline', type=Path, help='store this run as the baseline')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'eval')
    parser.add_argument('--deadline', type=float, default=900.0, help='per run [s]')
    parser.add_argument(
        '--closed-loop',
        action='store_true',
        help="the planner drives the ego (sim.launch.py) instead of the scenario's script: "
        'planning is scored by what the ego did (ego_collisions, ego_min_gap_m)',
    )
    parser.add_argument(
        '--sim-script',
        action='store_true',
        help='with --closed-loop: the script drives the ego, not the plans (the simulator '
        'checked against the replay of the same scenario)',
    )
    args = parser.parse_args(argv)
    try:
        CameraModel.sized(*args.camera)
    except ValueError as err:
        parser.error(f'--camera: {err}')
    if args.closed_loop and args.bag is not None:
        parser.error('--closed-loop simulates a scenario: give --scenario or --scenario-file')
    if not launching.available():
        print(f'evaluate: {launching.LaunchUnavailableError()}', file=sys.stderr)
        return 2
    variants = ['fused', *[v for v in args.ablate.split(',') if v]]
    for v in variants:
        overrides(v)  # unknown names fail here, before anything runs
    if args.zoom is not None:  # the config with the zoom set, beside the results
        config = yaml.safe_load(args.config.read_text())
        config['fusion']['ros__parameters']['zoom'] = args.zoom
        args.out.mkdir(parents=True, exist_ok=True)
        args.config = args.out / f'config_zoom{args.zoom:g}.yaml'
        args.config.write_text(yaml.safe_dump(config, sort_keys=False))
    params = ev.EvalParams(gate_m=args.gate)
    os.environ.setdefault('ROS_DOMAIN_ID', str(1 + os.getpid() % 100))
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.setdefault('AMENT_PREFIX_PATH', sys.prefix)
    # What to run: (run name, bag folder or None, scenario YAML, seed).
    jobs: list[tuple[str, Path | None, Path | None, int]] = []
    suffix = ('-sim' if args.sim_script else '-closed') if args.closed_loop else ''

    def add(name: str, path: Path, seed: int) -> None:
        job = run_name(name, seed, args.seconds) + suffix
        if args.closed_loop:  # the simulator renders as it goes: nothing to generate
            jobs.append((job, None, path, seed))
            return
        print(f'evaluate: generating {name} seed {seed} ({args.seconds:g} s)', flush=True)
        scenario = yaml.safe_load(path.read_text())
        jobs.append((job, make_bag(args, scenario, name, seed, args.out), path, seed))

    if args.bag is not None:
        jobs.append((args.bag.name, args.bag, None, 0))  # a scenario folder or a bag
    elif args.scenario_file is not None:
        scenario = yaml.safe_load(args.scenario_file.read_text())
        add(scenario.get('name', args.scenario_file.stem), args.scenario_file.resolve(), args.seed)
    else:
        names = (
            [n for n in args.scenarios.split(',') if n]
            or sorted(p.stem for p in SCENARIOS.glob('*.yaml'))
            if args.suite
            else [args.scenario or 'cut_in']
        )
        seeds = range(args.first_seed, args.first_seed + args.seeds) if args.suite else [args.seed]
        for name in names:
            path = SCENARIOS / f'{name}.yaml'
            if not path.is_file():
                parser.error(f'no built-in scenario {name!r} in {SCENARIOS}')
            for seed in seeds:
                add(name, path, seed)
    # SIGTERM (a timeout, CI) ends the run through the finally blocks: the graph is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    collector = Collector()
    rows: list[tuple[str, dict[str, Any]]] = []
    by_key: dict[str, dict[str, Any]] = {}
    try:
        for job, folder, scenario_path, seed in jobs:
            if folder is not None:
                bag = folder / 'bag' if (folder / 'bag').is_dir() else folder
                truth = load_truth(folder)
                counts = bag_counts(bag)
            for variant in variants:
                out = args.out / job / variant
                started = time.monotonic()
                if folder is None:
                    assert scenario_path is not None
                    print(f'evaluate: {job} {variant}: closed loop ...', flush=True)
                    rec = run_closed_loop(
                        scenario_path,
                        seed,
                        args.seconds,
                        variant,
                        out,
                        collector,
                        args.config,
                        args.deadline,
                        drive=not args.sim_script,
                    )
                    truth = load_truth(out / 'scenario')  # the ego as this run drove it
                    counts = {'/camera/out/image': rec['frames']}
                else:
                    print(f'evaluate: {job} {variant}: lock-step replay ...', flush=True)
                    rec = run_replay(
                        bag,
                        variant,
                        out,
                        collector,
                        args.config,
                        args.deadline,
                        camera_topic(counts),
                    )
                metrics, timing, frames = score(
                    rec, truth, counts, params, SENSORS.get(variant, SENSORS['fused'])
                )
                (out / 'metrics.json').write_text(
                    json.dumps(metrics, indent=1, sort_keys=True) + '\n'
                )
                (out / 'timing.json').write_text(
                    json.dumps(timing, indent=1, sort_keys=True) + '\n'
                )
                (out / 'objects.json').write_text(
                    json.dumps(
                        [
                            {'stamp_ns': o['stamp_ns'], 'objects': o['objects']}
                            for o in rec['objects']
                        ]
                    )
                    + '\n'
                )
                (out / 'plans.json').write_text(
                    json.dumps(
                        {
                            'odometry': sorted(rec['odometry'].items()),
                            'plans': [
                                {k: p[k] for k in ('stamp_ns', 'status', 'points')}
                                for p in rec['plans']
                            ],
                        }
                    )
                    + '\n'
                )
                if frames:
                    plot(frames, metrics, f'{job} {variant}', out / 'run.png')
                if folder is None and truth is not None and scenario_path is not None:
                    plot_drive(
                        truth, scenario_path, metrics, f'{job} {variant}', out / 'drive.png'
                    )
                row = flat(metrics)
                rows.append((f'{job} {variant}', row))
                by_key[f'{job}/{variant}'] = row
                driving = metrics.get('driving', {})
                closed = (
                    f', {driving["plans_applied"]} plans drove the ego '
                    f'({driving["plan_timeouts"]} timeouts), {driving["collision_samples"]} '
                    f'collision samples, min gap {driving["min_gap_m"]} m, final speed '
                    f'{driving["final_speed_mps"]} m/s'
                    if driving
                    else ''
                )
                print(
                    f'evaluate: {job} {variant}: {metrics["frames_fused"]}/'
                    f'{metrics["frames"]} frames fused, {metrics["ack_timeouts"]} ack timeouts, '
                    f'{time.monotonic() - started:.0f} s{closed}',
                    flush=True,
                )
    finally:
        collector.close()
    for variant in variants:
        group = [r for n, r in rows if n.endswith(f' {variant}')]
        if len(group) > 1:
            rows.append((f'mean {variant}', aggregate(group)))
    print_table(rows)
    summary = {
        'runs': by_key,
        'aggregate': {
            v: aggregate([r for k, r in by_key.items() if k.endswith('/' + v)]) for v in variants
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / 'summary.json').write_text(json.dumps(summary, indent=1, sort_keys=True) + '\n')
    status = 0
    if args.write_baseline is not None:
        keep = RESULT_KEYS + (CLOSED_LOOP_KEYS[:2] if args.closed_loop else ())
        old = (
            yaml.safe_load(args.write_baseline.read_text())
            if args.write_baseline.is_file()
            else {}
        )
        runs = dict((old or {}).get('runs', {}))
        runs.update({k: {m: r[m] for m in keep} for k, r in by_key.items()})
        tolerances = (old or {}).get('tolerances') or {
            'precision': 0.02,
            'recall': 0.02,
            'mota': 0.03,
            'pos_err_m': 0.05,
            'vel_err_mps': 0.1,
            'id_switches': 1,
            'fp_per_frame': 0.02,
            'collisions': 0,
            'collisions_seen': 0,
            'min_gap_m': 0.3,
            'ego_collisions': 0,
            'ego_min_gap_m': 0.3,
        }
        args.write_baseline.write_text(
            '# Evaluation baseline: tools/evaluate.py --write-baseline (see README: regression '
            'testing).\n'
            + yaml.safe_dump({'tolerances': tolerances, 'runs': runs}, sort_keys=True)
        )
        print(f'evaluate: baseline written to {args.write_baseline}')
    if args.baseline is not None:
        regressions = compare(by_key, yaml.safe_load(args.baseline.read_text()))
        for line in regressions:
            print(f'REGRESSION {line}')
        status = 1 if regressions else 0
    fused = summary['aggregate']['fused']

    def fmt(v: Any) -> str:
        return 'nan' if v is None else (f'{v:.4g}' if isinstance(v, float) else str(v))

    print(
        'RESULT '
        + ' '.join(
            f'{k}={fmt(fused.get(k))}'
            for k in (
                *RESULT_KEYS,
                *(CLOSED_LOOP_KEYS if args.closed_loop else ()),
                'frames',
                'frames_fused',
            )
        )
    )
    return status


if __name__ == '__main__':
    sys.exit(main())
