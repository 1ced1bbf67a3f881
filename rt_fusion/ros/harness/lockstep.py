"""The evaluation's lock-step runs of the shipped launch files, recorded for scoring.

``replay.launch.py`` (a bag) or ``sim.launch.py`` (the closed loop) with the shipped parameter
file and only these run-time overrides: the fusion node acknowledges every input it has taken in
and the replay waits for it (``mode:=lockstep``, ``ack_topic``), stamps stay the recorded ones
(``restamp:=false``) and the planner plans once per object list on the stamps' clock (``clock:
stamps``). Every message is handled in the same order with the same inputs on any machine: two
runs give the same records. A variant switches an input off through parameters only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.evaluation.runs import RIG_ABLATIONS, VARIANTS, run_name
from rt_fusion.core.evaluation.truth import load_truth
from rt_fusion.core.scenario.generate import code_digest, generate
from rt_fusion.core.scenario.sensors import CameraModel
from rt_fusion.ros import graph
from rt_fusion.ros.harness import launching
from rt_fusion.ros.harness.recorder import Recorder
from rt_fusion.ros.harness.scenarios import with_rig

START_TOPIC = graph.start_topic('evaluate')


class GraphRunError(RtFusionError):
    """A run's graph failed to start, lost a node, or did not finish; says which and where its
    log is."""


def overrides(variant: str) -> dict[str, Any]:
    """What an evaluation run changes in the shipped parameter file (nothing else)."""
    # Every frame through the detector: lock-step runs are not real time, and quality is judged
    # on every frame (the CPU replays of config/replay.yaml skip frames to keep up).
    fusion: dict[str, Any] = {
        'ack_topic': graph.ACK_TOPIC,
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
    elif variant not in ('fused', 'radar_tracks', *RIG_ABLATIONS):  # see run_params
        raise ValueError(f'unknown variant {variant!r} (one of {[*VARIANTS, *RIG_ABLATIONS]})')
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
    if variant in RIG_ABLATIONS:  # a rig camera left out: not fused, so not replayed either
        _without_camera(merged['fusion']['ros__parameters'], variant.removeprefix('no_'))
    path = out / 'params.yaml'
    path.write_text(yaml.safe_dump(merged, sort_keys=True))
    return path


def config_for(config: Path, out: Path, zoom: float | None = None, cameras: int = 1) -> Path:
    """``config`` as it is, or (``zoom``, a surround rig of ``cameras``: the fusion's extra
    cameras at the scenario rig's mountings) a copy with those set, written beside the
    results."""
    if zoom is None and cameras == 1:
        return config
    doc = yaml.safe_load(config.read_text())
    fusion = doc['fusion']['ros__parameters']
    if zoom is not None:
        fusion['zoom'] = zoom
    with_rig(fusion, cameras)
    out.mkdir(parents=True, exist_ok=True)
    path = (
        out / f'config_zoom{zoom:g}_cameras{cameras}.yaml'
        if zoom
        else out / f'config_cameras{cameras}.yaml'
    )
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _without_camera(fusion: dict[str, Any], name: str) -> None:
    """The fusion's parameters without the rig camera ``name`` (its mounting too).

    Raises:
        GraphRunError: the graph has no such camera (``--cameras 4`` makes the rig).
    """
    cameras = list(fusion.get('cameras', []))
    if name not in cameras:
        raise GraphRunError(f'no_{name}: the graph has no camera {name!r} (--cameras 4)')
    k = cameras.index(name)
    fusion['cameras'] = cameras[:k] + cameras[k + 1 :]
    mounts = fusion.get('fusion', {})
    for key in ('extra_camera_x', 'extra_camera_y', 'extra_camera_height', 'extra_camera_yaw'):
        mounts[key] = [v for i, v in enumerate(mounts[key]) if i != k]


def bag_counts(bag: Path) -> dict[str, int]:
    """Messages per topic of the replayed inputs in the bag."""
    from rt_fusion.core.bag import open_reader  # noqa: PLC0415

    with open_reader(bag) as reader:
        return {c.topic: c.msgcount for c in reader.connections}


def camera_topic(counts: dict[str, int]) -> str:
    """The bag's camera topic: the generator's JPEG one, or raw images a recorder wrote."""
    for topic in map(graph.bag_topic, (graph.COMPRESSED_CAMERA_TOPIC, graph.CAMERA_TOPIC)):
        if counts.get(topic):
            return topic
    raise GraphRunError(f'the bag has no camera topic (it has {sorted(counts)})')


def run_graph(
    launch_file: str,
    arguments: dict[str, str],
    done: str,
    out: Path,
    recorder: Recorder,
    deadline_s: float,
) -> tuple[str, dict[str, Any]]:
    """Runs ``launch_file`` (lock-step) until a line starting with ``done`` (the replay's or the
    simulator's last line), lets the planner answer the last object lists, stops the graph;
    returns that line and what was recorded."""
    recorder.reset()
    launched = launching.LaunchedGraph(launch_file, arguments, log=out / 'graph.log')
    try:
        if not recorder.start_when_listening(START_TOPIC, 120.0, launched.died):
            dead = '; '.join(launched.died())
            raise GraphRunError(
                f'the graph failed to start: {dead} (log: {out / "graph.log"})'
                if dead
                else f"the graph's outputs never reached the recorder within 120 s "
                f'(log: {out / "graph.log"})'
            )
        line = launched.wait_for_line((done, 'process has died'), deadline_s)
        if line is not None and 'process has died' in line:
            raise GraphRunError(f'a node of the graph died: {line} (log: {out / "graph.log"})')
        if line is None:
            raise GraphRunError(
                f'the graph did not finish within {deadline_s:.0f} s (log: {out / "graph.log"})'
            )
        # The last frame's objects are out before its acknowledgement; the planner may still be
        # working on them: wait until it has answered every object list (or stays quiet).
        end, last, stable = time.monotonic() + 60.0, (-1, -1), 0
        while time.monotonic() < end:
            with recorder.lock:
                n = (len(recorder.objects), len(recorder.plans))
            stable = stable + 1 if n == last else 0
            if (n[1] >= n[0] and stable >= 1) or stable >= 6:  # all answered, or 3 s quiet
                break
            last = n
            time.sleep(0.5)  # paced: the planner's last answers
    finally:
        launched.stop()
    return line[line.index(done) :], recorder.snapshot()


def run_replay(
    bag: Path,
    variant: str,
    out: Path,
    recorder: Recorder,
    config: Path,
    deadline_s: float,
    camera: str,
    calibration: Path | None = None,
) -> dict[str, Any]:
    """Lock-step replay of ``bag`` through replay.launch.py (``calibration``: the graph's, default
    the launch file's, the scenario rig); returns what was recorded."""
    out.mkdir(parents=True, exist_ok=True)
    params = run_params(config, variant, out)
    line, rec = run_graph(
        'replay.launch.py',
        {
            'bag': str(bag),
            'mode': 'lockstep',
            'restamp': 'false',
            'ack_topic': graph.ACK_TOPIC,
            'start_topic': START_TOPIC,
            'camera_topic': camera,
            # the radar as a third-party driver's radar_msgs/RadarTracks
            'radar_type': 'tracks' if variant == 'radar_tracks' else 'objects',
            'audio': 'true',  # the fusion's hearing (a bag without a microphone: nothing)
            'config': str(params),
            **({'calibration': str(calibration)} if calibration is not None else {}),
        },
        'REPLAYED ',
        out,
        recorder,
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
    recorder: Recorder,
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
        recorder,
        deadline_s,
    )
    fields = dict(kv.split('=') for kv in line.split()[2:])
    rec['replayed'] = int(line.split()[1])
    rec['ack_timeouts'] = int(fields['ack_timeouts'])
    rec['plan_timeouts'] = int(fields['plan_timeouts'])
    rec['plans_applied'] = int(fields['plans'])
    rec['frames'] = int(fields['frames'])
    return rec


def make_bag(
    scenario: dict[str, Any],
    name: str,
    seed: int,
    seconds: float,
    camera: tuple[int, int],
    out: Path,
    mount: tuple[float, float, float, float, float] | None = None,
    cameras: int = 1,
) -> Path:
    """Generates the scenario into ``out`` unless it is already there (same name, seed, length,
    camera, rig, generator); ``mount``: the front camera's x, y, z [m], yaw, pitch [rad] on
    base_link (default the rig's, :data:`~rt_fusion.core.scenario.sensors.CAMERA_POS`, looking
    ahead); ``cameras`` 4: the surround rig (each camera's view in the truth)."""
    folder = out / run_name(name, seed, seconds) / 'scenario'
    # Reused only when made by this very generator from this very description: a bag from an
    # older generator scored against today's baseline is a false regression.
    rig = [cameras] if cameras > 1 else []  # (the key of a one-camera bag as before)
    key = hashlib.sha256(
        json.dumps([scenario, seed, seconds, list(camera), mount, *rig], sort_keys=True).encode()
        + code_digest().encode()
    ).hexdigest()
    stamp = folder / '.generator_key'
    if load_truth(folder) is None or not stamp.is_file() or stamp.read_text() != key:
        if folder.exists():
            shutil.rmtree(folder)
        model = CameraModel.sized(*camera)
        if mount is not None:
            model = dataclasses.replace(model, pos=mount[:3], yaw=mount[3], pitch=mount[4])
        generate(scenario, seconds, seed, folder, camera=model, cameras=cameras)
        stamp.write_text(key)
    return folder


def parse_mount(text: str) -> tuple[float, float, float, float, float]:
    """``X,Y,Z,YAW[,PITCH]`` (metres, degrees) as (x, y, z, yaw, pitch [rad]).

    Raises:
        ValueError: not four or five finite numbers.
    """
    parts = [float(v) for v in text.split(',')]
    if len(parts) not in (4, 5) or not all(math.isfinite(v) for v in parts):
        raise ValueError(f'{text!r}: X,Y,Z,YAW[,PITCH] (m, m, m, degrees, degrees)')
    yaw, pitch = math.radians(parts[3]), math.radians(parts[4] if len(parts) == 5 else 0.0)
    return parts[0], parts[1], parts[2], yaw, pitch
