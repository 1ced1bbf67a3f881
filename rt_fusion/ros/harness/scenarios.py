"""What the tools that run the replay graph share (demo, soak, two hosts): a generated scenario
kept between runs, and the fusion and planner parameters of one run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rt_fusion.ros import params_file


def scenario_bag(
    name: str,
    seconds: float,
    out: Path,
    scenarios: Path,
    log: Callable[[str], None] = print,
    resolution: tuple[int, int] = (1920, 1080),
    cameras: int = 1,
) -> tuple[Path, float]:
    """The bag of scenario ``name`` (built-in under ``scenarios``, or a YAML path) with
    ``cameras`` cameras (1, or 4: the surround rig) of ``resolution`` (width, height),
    generated into ``out`` once per name, length, resolution, cameras (seed 0), generator code
    (the scenario package's sources: a renderer fix regenerates it) and the scenario's content
    (a YAML edited under the same name regenerates it too); returns it and the ego's speed.

    Raises:
        ScenarioError: an unknown scenario or a bad description.
        ValueError: a resolution the camera model does not take (``CameraModel.sized``).
    """
    from rt_fusion.core.scenario import library  # noqa: PLC0415
    from rt_fusion.core.scenario.generate import code_digest, generate  # noqa: PLC0415
    from rt_fusion.core.scenario.sensors import CameraModel  # noqa: PLC0415

    scenario = library.load(name, scenarios)
    camera = CameraModel.sized(*resolution)
    truth = out / 'ground_truth.json'
    key = {
        'scenario': scenario.get('name'),
        'seconds': seconds,
        'seed': 0,
        'camera_size': list(resolution),
        'cameras': cameras,
    }
    # The generator's code and the scenario's own content (a YAML edited under the same name).
    described = hashlib.sha256(json.dumps(scenario, sort_keys=True, default=str).encode())
    code = f'{code_digest()} {described.hexdigest()}'
    stamp = out / '.generator_code'
    fresh = (
        truth.exists()
        and all(json.loads(truth.read_text()).get(k) == v for k, v in key.items())
        and stamp.is_file()
        and stamp.read_text() == code
    )
    if not fresh:
        shutil.rmtree(out, ignore_errors=True)
        log(
            f'generating the {scenario.get("name")} scenario ({seconds:g} s, camera '
            f'{resolution[0]}×{resolution[1]}' + (f' × {cameras})' if cameras > 1 else ')')
        )
        # The frames rendered on every CPU (the same bag as on one).
        workers = min(os.cpu_count() or 1, 16)
        generate(scenario, seconds, 0, out, camera=camera, cameras=cameras, workers=workers)
        stamp.write_text(code)
    return out / 'bag', float(scenario['ego'].get('speed', 0.0))


def fifo_planner() -> bool:
    """Whether a demo or evaluation graph runs the planner SCHED_FIFO: as root, and only with
    more than two CPUs. FIFO assumes CPUs of its own: on two shared cores the FIFO planner
    starved the replay (the sensors) — capture → committed P99 262 ms at 1080p, 64 ms at normal
    priority."""
    return os.geteuid() == 0 and (os.cpu_count() or 1) > 2


def with_rig(fusion: dict[str, Any], cameras: int) -> None:
    """The fusion's parameters (a parameter file's section) with the scenario's surround rig
    when ``cameras`` > 1: its other cameras and their mountings (``sensors.MOUNTS``)."""
    if cameras > 1:
        from rt_fusion.core.scenario.sensors import RIG, mount_params  # noqa: PLC0415

        extra = RIG[1:cameras]
        fusion['cameras'] = list(extra)
        fusion['fusion'] = {**fusion.get('fusion', {}), **mount_params(extra)}


def graph_params(
    config: Path,
    path: Path,
    *,
    conventional: bool,
    backend: str,
    device: str,
    infer_period_s: float,
    cameras: int = 1,
    more: Mapping[str, Any] | None = None,
) -> Path:
    """The fusion and planner sections of ``config`` (config/replay.yaml) for one run, with the
    backend, device and detector period set, written to ``path``; ``cameras`` 4: the fusion
    takes the scenario's surround rig too (its mountings from ``sensors.MOUNTS``). A detector
    paced by ``infer_period_s`` (a CPU that cannot keep up with the camera) runs without the
    mirrored pass (``mirror``): a second pass per view would halve how often it looks.

    ``more``: more fusion parameters, over the rest.

    ``conventional``: the fusion node takes the frames as sensor_msgs/Image over rclpy (the
    ``fusion_rclpy`` section, under the node name ``fusion``). SCHED_FIFO 50 for the planner
    when run as root on more than two CPUs.
    """
    import yaml  # noqa: PLC0415

    sections = params_file.load(config)
    fusion = dict(sections['fusion_rclpy' if conventional else 'fusion'])
    fusion.update(backend=backend, device=device, infer_period_s=infer_period_s, **(more or {}))
    if infer_period_s > 0.0:
        fusion['mirror'] = False
    with_rig(fusion, cameras)
    planner = dict(sections['planner'])
    if fifo_planner():
        planner['rt'] = {**planner.get('rt', {}), 'rt_priority': 50}
    doc = {
        'fusion': {params_file.PARAMS_KEY: fusion},
        'planner': {params_file.PARAMS_KEY: planner},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
