"""Scenario → rosbag2 (MCAP) with the topics and messages of the live nodes, plus ground truth.

Topics (as the nodes publish them): ``/camera/out/image/compressed`` (sensor_msgs/CompressedImage,
JPEG; or ``/camera/out/image`` sensor_msgs/Image bgr8 with ``raw_images``),
``/camera/out/camera_info``, ``/radar/out/objects`` (rt_fusion_msgs/RadarObjects, ~13.6 Hz),
``/imu/out/imu`` (200 Hz), ``/microphone/out/audio`` (rt_fusion_msgs/AudioChunk, 1024 samples
inline at 48 kHz), ``/scenario/imu/device_time`` (std_msgs/Header: the IMU's own clock for each
sample, 40 ppm fast, for clock-mapping tests), ``/vehicle/speed`` (geometry_msgs/TwistStamped,
50 Hz: the wheel speed from the vehicle's CAN bus, 0.5 % scale error, 3 cm/s noise), and the truth:
``/scenario/truth/objects`` (rt_fusion_msgs/ObjectArray in base_link at the camera times) and
``/scenario/truth/odometry`` (nav_msgs/Odometry, 50 Hz).

Stamps are the sensor times on a fixed host timeline starting at ``T0_NS``; each message is logged
a fixed transport delay later. Every sensor draws from its own generator seeded by
``(seed, sensor)``, so a seed gives a byte-identical bag.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import heapq
import json
import math
import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.bagout import BAG_VERSION, BagWriter, header, make, typestore
from rt_fusion.core.scenario.render import Look, render, shown_fractions
from rt_fusion.core.scenario.world import World, build_world, ego_frame

T0_NS = 1_700_000_000 * 10**9


def code_digest() -> str:
    """SHA-256 of this package's sources (world, render, sensors, this file ...): what a
    generated scenario or rendered training set depends on besides its description and seed;
    kept beside them so that a renderer fix regenerates them."""
    sources = sorted(Path(__file__).parent.glob('*.py'))
    return hashlib.sha256(b''.join(p.read_bytes() for p in sources)).hexdigest()


RENDER_CHUNK = 6  # camera frames per task of a rendering pool
CAMERA_HZ = 30.0
TRUTH_ODOM_HZ = 50.0
DELAY_NS = {
    'camera': 12_000_000,
    'radar': 4_000_000,
    'imu': 1_000_000,
    'audio': 2_000_000,
    'speed': 5_000_000,
}
OBJECT_CLASS = {'car': 1, 'truck': 2, 'pedestrian': 3, 'bicycle': 4, 'static': 6}
EMERGENCY_VEHICLE = 7  # rt_fusion_msgs/Object CLASS_EMERGENCY_VEHICLE

Item = tuple[int, int, str, str, Any]  # log_ns, tie-break, topic, type, message
# The bag's topics are the live graph's (rt_fusion.ros.graph names them; this ROS-free core
# cannot import it, and tests/test_topics.py holds the two together).
RADAR_TOPIC = '/radar/out/objects'
IMU_TOPIC = '/imu/out/imu'
SPEED_TOPIC = '/vehicle/speed'
SPEED_TYPE = 'geometry_msgs/msg/TwistStamped'
AUDIO_TOPIC = '/microphone/out/audio'
CAMERA_BASE = '/camera'  # + /out/image/compressed (or /out/image: raw)
IMU_DEVICE_TOPIC = '/scenario/imu/device_time'
IMU_CLOCK_SKEW_PPM = 40.0  # the IMU's oscillator runs this much fast
IMU_CLOCK_OFFSET_NS = 1_234_500_000_000  # its counter started long before the host timeline


def imu_device_ns(t: float) -> int:
    """The IMU's own clock at scenario time t: offset, skew, 100 µs resolution."""
    ns = IMU_CLOCK_OFFSET_NS + t * 1e9 * (1 + IMU_CLOCK_SKEW_PPM * 1e-6)
    return int(ns // 100_000) * 100_000


def _ns(t: float) -> int:
    return T0_NS + round(t * 1e9)


def camera_base(name: str) -> str:
    """The topic base of a rig camera: ``/camera`` for the front one, ``/camera_<name>``."""
    return CAMERA_BASE if name == 'front' else f'{CAMERA_BASE}_{name}'


def _encode(img: npt.NDArray[np.uint8], raw: bool) -> npt.NDArray[np.uint8]:
    if raw:
        return img
    ok, jpg = cv2.imencode('.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return np.asarray(jpg, np.uint8)


def _render_chunk(
    cam: sm.CameraModel, world: World, seed: int, raw: bool, frames: list[tuple[int, Any]]
) -> list[npt.NDArray[np.uint8]]:
    """Frames ``(k, rng state)`` of one camera, rendered and encoded (in a worker process)."""
    out = []
    for k, state in frames:
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        out.append(_encode(render(cam, world, k / CAMERA_HZ, rng, Look(scenery_seed=seed)), raw))
    return out


def _images(
    cam: sm.CameraModel,
    world: World,
    seed: int,
    raw: bool,
    rng: np.random.Generator,
    pool: concurrent.futures.Executor | None,
) -> Iterator[npt.NDArray[np.uint8]]:
    """A camera's frames in order, encoded (JPEG unless ``raw``): rendered here, or in chunks
    by ``pool``'s processes with the same random draws (the same bytes either way)."""
    n = int(world.seconds * CAMERA_HZ)
    if pool is None:
        for k in range(n):
            yield _encode(render(cam, world, k / CAMERA_HZ, rng, Look(scenery_seed=seed)), raw)
        return
    frames = []
    for k in range(n):  # render() draws the noise window's offset, two integers, per frame
        frames.append((k, rng.bit_generator.state))
        rng.integers(0, 64, 2)
    chunks = [frames[i : i + RENDER_CHUNK] for i in range(0, n, RENDER_CHUNK)]
    ahead = 2 * (getattr(pool, '_max_workers', 1) or 1)  # chunks in flight, memory bounded
    pending: collections.deque[concurrent.futures.Future[list[Any]]] = collections.deque()
    for chunk in chunks:
        pending.append(pool.submit(_render_chunk, cam, world, seed, raw, chunk))
        if len(pending) >= ahead:
            yield from pending.popleft().result()
    while pending:
        yield from pending.popleft().result()


def _camera(
    ts: Any,
    world: World,
    seed: int,
    raw: bool,
    cam: sm.CameraModel,
    name: str = 'front',
    pool: concurrent.futures.Executor | None = None,
) -> Iterator[Item]:
    k_cam = sm.RIG.index(name) if name in sm.RIG else len(sm.RIG)
    rng = np.random.default_rng([seed, 1] if name == 'front' else [seed, 1, k_cam])
    info = cam.camera_info()
    base = camera_base(name)
    frame_id = base.lstrip('/')
    # The rig's frames of one time in a fixed order, the front camera's last: the fusion's anchor
    # then finds the others there (a lock-step replay sends the next only after its ack).
    tie = 2 * (len(sm.RIG) - 1 - k_cam)
    for k, img in enumerate(_images(cam, world, seed, raw, rng, pool)):
        t = k / CAMERA_HZ
        hdr = header(ts, _ns(t), frame_id)
        log = _ns(t) + DELAY_NS['camera']
        if raw:
            msg = make(
                ts,
                'sensor_msgs/msg/Image',
                header=hdr,
                height=cam.height,
                width=cam.width,
                encoding='bgr8',
                is_bigendian=0,
                step=cam.width * 3,
                data=img.reshape(-1),
            )
            yield log, tie, f'{base}/out/image', 'sensor_msgs/msg/Image', msg
        else:
            msg = make(
                ts,
                'sensor_msgs/msg/CompressedImage',
                header=hdr,
                format='jpeg',
                data=img.reshape(-1),
            )
            yield log, tie, f'{base}/out/image/compressed', 'sensor_msgs/msg/CompressedImage', msg
        ci = make(
            ts,
            'sensor_msgs/msg/CameraInfo',
            header=hdr,
            height=cam.height,
            width=cam.width,
            distortion_model='plumb_bob',
            d=np.array(cam.d, np.float64),
            k=np.array(info['camera_matrix']['data'], np.float64),
            r=np.array([1, 0, 0, 0, 1, 0, 0, 0, 1], np.float64),
            p=np.array(info['projection_matrix']['data'], np.float64),
        )
        yield log, tie + 1, f'{base}/out/camera_info', 'sensor_msgs/msg/CameraInfo', ci


def _radar(ts: Any, world: World, seed: int, model: sm.RadarModel) -> Iterator[Item]:
    rng = np.random.default_rng([seed, 2])
    ids = sm.RadarIds()
    k = 0
    while (t := 0.013 + k * model.period_s) < world.seconds:
        objs = []
        seen = {aid: v['radar'] for aid, v in sm.radar_visibility(world, t, model).items()}
        for o in sm.radar_scan(model, world, t, rng, ids, seen):
            objs.append(
                make(
                    ts,
                    'rt_fusion_msgs/msg/RadarObject',
                    id=o['id'],
                    position=make(ts, 'geometry_msgs/msg/Point', x=o['x'], y=o['y'], z=0.0),
                    velocity=make(ts, 'geometry_msgs/msg/Vector3', x=o['vx'], y=o['vy'], z=0.0),
                    rcs=float(o['rcs']),
                    dynamic_property=0 if math.hypot(o['vx'], o['vy']) > 0.5 else 1,
                    object_class=o['class'],
                    orientation=float(o['orientation']),
                    length=float(o['length']),
                    width=float(o['width']),
                    existence_probability=float(o['prob']),
                    measurement_state=2,
                    position_rms_x=model.range_std,
                    position_rms_y=model.range_std,
                    velocity_rms_x=model.velocity_std,
                    velocity_rms_y=model.velocity_std,
                )
            )
        msg = make(
            ts,
            'rt_fusion_msgs/msg/RadarObjects',
            header=header(ts, _ns(t), 'radar'),
            measurement_counter=k,
            output_type='objects',
            expected_targets=len(objs),
            complete=True,
            cycle_duration_ns=int(model.period_s * 1e9),
            objects=objs,
        )
        yield (
            _ns(t) + DELAY_NS['radar'],
            0,
            RADAR_TOPIC,
            'rt_fusion_msgs/msg/RadarObjects',
            msg,
        )
        k += 1


def _imu(ts: Any, world: World, seed: int, model: sm.ImuModel) -> Iterator[Item]:
    rng = np.random.default_rng([seed, 3])
    vec = 'geometry_msgs/msg/Vector3'
    for k in range(int(world.seconds * model.rate_hz)):
        t = k / model.rate_hz
        s = sm.imu_sample(model, world.ego, t, rng)
        w, x, y, z = s['quat']
        msg = make(
            ts,
            'sensor_msgs/msg/Imu',
            header=header(ts, _ns(t), 'imu'),
            orientation=make(ts, 'geometry_msgs/msg/Quaternion', x=x, y=y, z=z, w=w),
            orientation_covariance=np.diag([1e-4] * 3).reshape(-1),
            angular_velocity=make(ts, vec, x=s['gyro'][0], y=s['gyro'][1], z=s['gyro'][2]),
            angular_velocity_covariance=np.diag([model.gyro_std**2] * 3).reshape(-1),
            linear_acceleration=make(ts, vec, x=s['accel'][0], y=s['accel'][1], z=s['accel'][2]),
            linear_acceleration_covariance=np.diag([model.accel_std**2] * 3).reshape(-1),
        )
        yield _ns(t) + DELAY_NS['imu'], 0, IMU_TOPIC, 'sensor_msgs/msg/Imu', msg
        # The IMU's own clock (SampleTimeFine-like, 100 µs ticks) drifting against the host.
        dev = imu_device_ns(t)
        dev_msg = make(
            ts,
            'std_msgs/msg/Header',
            stamp=make(ts, 'builtin_interfaces/msg/Time', sec=dev // 10**9, nanosec=dev % 10**9),
            frame_id='imu',
        )
        yield _ns(t) + DELAY_NS['imu'], 1, IMU_DEVICE_TOPIC, 'std_msgs/msg/Header', dev_msg


SPEED_HZ = 50.0
SPEED_SCALE_ERROR = 0.005  # wheel-speed scale error (tyre radius): 0.5 % fast
SPEED_NOISE_MPS = 0.03


def _speed(ts: Any, world: World, seed: int) -> Iterator[Item]:
    """The vehicle speed from its CAN bus (wheel odometry): geometry_msgs/TwistStamped at 50 Hz
    (``twist.linear.x`` in ``base_link``, stamped with the measurement's time), with a small
    scale error and noise, 5 ms after the measurement."""
    rng = np.random.default_rng([seed, 5])
    for k in range(int(world.seconds * SPEED_HZ)):
        t = k / SPEED_HZ
        st = world.ego.at(t)
        v = math.hypot(st['vx'], st['vy'])
        v = v * (1.0 + SPEED_SCALE_ERROR) + rng.normal(0.0, SPEED_NOISE_MPS) if v > 0.0 else 0.0
        linear = make(ts, 'geometry_msgs/msg/Vector3', x=float(v), y=0.0, z=0.0)
        twist = make(ts, 'geometry_msgs/msg/Twist', linear=linear)
        msg = make(ts, SPEED_TYPE, header=header(ts, _ns(t), 'base_link'), twist=twist)
        yield _ns(t) + DELAY_NS['speed'], 0, SPEED_TOPIC, SPEED_TYPE, msg


def _audio(
    ts: Any, world: World, seed: int, model: sm.AudioModel, clips_dir: Path | None
) -> Iterator[Item]:
    synth = sm.AudioSynth(model, world, np.random.default_rng([seed, 4]), clips_dir)
    n = model.block
    for k in range(int(world.seconds * model.rate_hz) // n):
        first = synth.next_sample
        samples = synth.block()
        t = first / model.rate_hz
        msg = make(
            ts,
            'rt_fusion_msgs/msg/AudioChunk',
            header=header(ts, _ns(t), 'microphone'),
            sample_rate=model.rate_hz,
            channels=1,
            frames=n,
            first_sample_index=k * n,
            stamp_source='scenario',
            samples=samples,
        )
        log = _ns(t) + int(n / model.rate_hz * 1e9) + DELAY_NS['audio']
        yield log, 0, AUDIO_TOPIC, 'rt_fusion_msgs/msg/AudioChunk', msg


def truth_at(
    world: World,
    t: float,
    cam: sm.CameraModel | None = None,
    radar: sm.RadarModel | None = None,
    look: Look | None = None,
    rig: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Ground truth at time t: ego pose/velocity (world), objects (world and base_link) and
    which sensors see each object (``visible``: field of view, range, occlusion). With the
    camera's ``look`` (its scenery), the camera's occlusion is what the rendered frame shows
    (:func:`~rt_fusion.core.scenario.render.shown_fractions`); without, actors' footprints.
    ``rig``: the surround rig's other cameras (:data:`sensors.RIG` names), each seen as
    ``camera_<name>`` (the same lens at its :data:`sensors.MOUNTS`)."""
    ego = world.ego.at(t)
    cam = cam or sm.CameraModel()
    radar = radar or sm.RadarModel()
    shown = shown_fractions(cam, world, t, look) if look is not None else None
    seen = sm.visibility(world, t, cam, radar, shown)
    for name in rig:
        other = cam.mounted(name)
        more = shown_fractions(other, world, t, look) if look is not None else None
        for aid, v in sm.visibility(world, t, other, radar, more).items():
            seen[aid][f'camera_{name}'] = v['camera']
    objects = []
    for a in world.actors:
        st = a.at(t)
        ex, ey = ego_frame(ego, st['x'], st['y'])
        objects.append(
            {
                'id': a.id,
                'class': a.cls,
                'siren': a.siren,
                'x': st['x'],
                'y': st['y'],
                'yaw': st['yaw'],
                'vx': st['vx'],
                'vy': st['vy'],
                'ego_x': ex,
                'ego_y': ey,
                'ego_yaw': math.remainder(st['yaw'] - ego['yaw'], math.tau),
                'size': list(a.size),
                'visible': seen[a.id],
            }
        )
    return {
        'stamp_ns': _ns(t),
        't': t,
        'ego': {k: ego[k] for k in ('x', 'y', 'yaw', 'vx', 'vy', 's', 'd')},
        'objects': objects,
    }


def truth_series(
    world: World, seed: int, cam: sm.CameraModel, cameras: int = 1
) -> list[dict[str, Any]]:
    """:func:`truth_at` at every camera frame, the cameras seeing the scenery they render
    (``cameras`` 4: the surround rig's others too)."""
    look = Look(scenery_seed=seed)  # as _images renders it
    frames = int(world.seconds * CAMERA_HZ)
    rig = sm.RIG[1:cameras]
    return [truth_at(world, k / CAMERA_HZ, cam, look=look, rig=rig) for k in range(frames)]


def _truth(ts: Any, world: World, frames: list[dict[str, Any]]) -> Iterator[Item]:
    vec = 'geometry_msgs/msg/Vector3'
    for gt in frames:
        t = gt['t']
        ego = gt['ego']
        c, s = math.cos(ego['yaw']), math.sin(ego['yaw'])
        objs = []
        for o in gt['objects']:
            rvx, rvy = c * o['vx'] + s * o['vy'], -s * o['vx'] + c * o['vy']
            objs.append(
                make(
                    ts,
                    'rt_fusion_msgs/msg/Object',
                    id=o['id'],
                    # A vehicle with its siren on is an emergency vehicle, whatever its body.
                    object_class=EMERGENCY_VEHICLE if o['siren'] else OBJECT_CLASS[o['class']],
                    class_probability=1.0,
                    existence_probability=1.0,
                    position=make(
                        ts, 'geometry_msgs/msg/Point', x=o['ego_x'], y=o['ego_y'], z=0.0
                    ),
                    yaw=o['ego_yaw'],
                    size=make(ts, vec, x=o['size'][0], y=o['size'][1], z=o['size'][2]),
                    velocity=make(ts, vec, x=rvx, y=rvy, z=0.0),
                    # Ground truth, and which sensors see it (SOURCE_RADAR / SOURCE_CAMERA).
                    sources=128 | int(o['visible']['radar']) | 2 * int(o['visible']['camera']),
                )
            )
        msg = make(
            ts,
            'rt_fusion_msgs/msg/ObjectArray',
            header=header(ts, _ns(t), 'base_link'),
            objects=objs,
            inputs_complete_ns=_ns(t),
            published_ns=_ns(t),
        )
        yield _ns(t), 2, '/scenario/truth/objects', 'rt_fusion_msgs/msg/ObjectArray', msg
    for k in range(int(world.seconds * TRUTH_ODOM_HZ)):
        t = k / TRUTH_ODOM_HZ
        e = world.ego.at(t)
        pose = make(
            ts,
            'geometry_msgs/msg/Pose',
            position=make(ts, 'geometry_msgs/msg/Point', x=e['x'], y=e['y'], z=0.0),
            orientation=make(
                ts,
                'geometry_msgs/msg/Quaternion',
                x=0.0,
                y=0.0,
                z=math.sin(e['yaw'] / 2),
                w=math.cos(e['yaw'] / 2),
            ),
        )
        c, s = math.cos(e['yaw']), math.sin(e['yaw'])
        twist = make(
            ts,
            'geometry_msgs/msg/Twist',
            linear=make(ts, vec, x=c * e['vx'] + s * e['vy'], y=-s * e['vx'] + c * e['vy'], z=0.0),
        )
        msg = make(
            ts,
            'nav_msgs/msg/Odometry',
            header=header(ts, _ns(t), 'odom'),
            child_frame_id='base_link',
            pose=make(ts, 'geometry_msgs/msg/PoseWithCovariance', pose=pose),
            twist=make(ts, 'geometry_msgs/msg/TwistWithCovariance', twist=twist),
        )
        yield _ns(t), 3, '/scenario/truth/odometry', 'nav_msgs/msg/Odometry', msg


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 6)
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round(v) for v in obj]
    return obj


def generate(
    scenario: dict[str, Any],
    seconds: float,
    seed: int,
    out: Path,
    *,
    raw_images: bool = False,
    storage: str = 'mcap',
    bag_version: int = BAG_VERSION,
    clips_dir: Path | None = None,
    progress: Callable[[float], None] | None = None,
    camera: sm.CameraModel | None = None,
    cameras: int = 1,
    workers: int = 1,
) -> dict[str, Any]:
    """Writes ``out/bag`` (rosbag2, ``storage`` mcap or sqlite3), ``out/ground_truth.json`` and
    ``out/camera_info.yaml``; returns a summary. ``clips_dir`` holds the WAV files that ``clip``
    audio events name; ``progress`` gets the simulated time written so far; ``camera`` is the
    camera's resolution and lens (default: ``sensors.VEHICLE``, 1920×1080; see
    ``CameraModel.sized``); ``cameras``: 1 (the front camera) or 4 (the surround rig,
    :data:`sensors.RIG`: the others on ``/camera_<name>/out/...``, the same lens at their
    :data:`sensors.MOUNTS`; the ground truth's frames are the front camera's, each object's
    ``visible`` also says which of the others see it); ``workers`` > 1 renders
    the camera frames in that many processes (the same bag, byte for byte); ``bag_version``: the
    rosbag2 metadata version (:data:`bagout.READERS`: 8 for Humble's ``ros2 bag``)."""

    world = build_world(scenario, seconds)
    ts = typestore()
    cam = camera or sm.VEHICLE
    out.mkdir(parents=True, exist_ok=True)
    writer = BagWriter(out / 'bag', ts, storage, bag_version)
    if cameras not in (1, len(sm.RIG)):
        raise ValueError(f'cameras {cameras}: 1 or {len(sm.RIG)}')
    pool = (
        concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context('spawn')
        )
        if workers > 1
        else None
    )
    truth = truth_series(world, seed, cam, cameras)  # once, for the bag and ground_truth.json
    streams = [
        *sensor_streams(ts, world, seed, cam, raw_images, clips_dir, pool=pool),
        *(
            _camera(ts, world, seed, raw_images, cam.mounted(name), name, pool)
            for name in sm.RIG[1:cameras]
        ),
        _truth(ts, world, truth),
    ]
    try:
        for log_ns, _tie, topic, typename, msg in heapq.merge(*streams, key=lambda i: i[:2]):
            writer.write(topic, typename, log_ns, msg)
            if progress is not None:
                progress((log_ns - T0_NS) / 1e9)
    finally:
        writer.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    write_truth(world, seed, cam, out, cameras, truth)
    return {'world': world, 'counts': dict(writer.counts), 'camera': cam, 'cameras': cameras}


def sensor_streams(
    ts: Any,
    world: World,
    seed: int,
    cam: sm.CameraModel,
    raw_images: bool,
    clips_dir: Path | None,
    audio: bool = True,
    pool: concurrent.futures.Executor | None = None,
) -> list[Iterator[Item]]:
    """The sensors' messages, each stream in time order (merge them by ``item[:2]``): camera
    (with camera_info), radar, IMU (with its device clock), microphone, vehicle speed. A sample
    is rendered when its stream is advanced to it (a closed-loop ego is integrated up to it)."""
    streams = [
        _camera(ts, world, seed, raw_images, cam, pool=pool),
        _radar(ts, world, seed, sm.RadarModel()),
        _imu(ts, world, seed, sm.ImuModel()),
        _speed(ts, world, seed),
    ]
    if audio:
        streams.insert(3, _audio(ts, world, seed, sm.AudioModel(), clips_dir))
    return streams


def write_truth(
    world: World,
    seed: int,
    cam: sm.CameraModel,
    out: Path,
    cameras: int = 1,
    frames: list[dict[str, Any]] | None = None,
) -> None:
    """``out/ground_truth.json`` (a frame per camera frame of the front camera, ``frames`` when
    already computed; ``cameras``: how many the bag has) and ``out/camera_info.yaml``."""
    import yaml  # noqa: PLC0415

    truth = {
        'scenario': world.name,
        'seed': seed,
        'seconds': world.seconds,
        't0_ns': T0_NS,
        'camera_hz': CAMERA_HZ,
        'camera_size': [cam.width, cam.height],
        'cameras': cameras,
        'audio_events': world.audio_events,
        'frames': frames if frames is not None else truth_series(world, seed, cam, cameras),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / 'ground_truth.json').write_text(json.dumps(_round(truth), sort_keys=True) + '\n')
    (out / 'camera_info.yaml').write_text(yaml.safe_dump(cam.camera_info(), sort_keys=True))
