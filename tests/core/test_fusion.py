"""FusionEngine on frames from the real Aligner: ego dead reckoning, radar objects into the vehicle
frame at the frame time, camera detections, audio level."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import (
    CLASS_CAR,
    CLASS_EMERGENCY,
    CLASS_PEDESTRIAN,
    CLASS_TRUCK,
    SOURCE_AUDIO,
    FusionEngine,
    FusionParams,
    RadarObjectIn,
)
from rt_fusion.core.sync import Aligner, SyncParams

MS = 1_000_000
T0 = 1_000_000_000_000


def _aligner(**kw: object) -> Aligner:
    return Aligner(SyncParams(max_wait_s=0.05, radar_mode='latest', **kw))  # type: ignore[arg-type]


def _drive(engine: FusionEngine, seconds: float, yaw_rate: float) -> list:  # type: ignore[type-arg]
    """A 200 Hz IMU turning at ``yaw_rate`` and 30 Hz camera frames; returns the fused frames."""
    al = _aligner(wait_for=('imu',))
    out = []
    imu_t = T0
    for k in range(int(seconds * 30)):
        t = T0 + k * 33_333_333
        while imu_t <= t + 10 * MS:
            al.push_imu(imu_t, (0.0, 0.0, yaw_rate), (0.0, 0.0, 9.81), imu_t)
            imu_t += 5 * MS
        al.push_camera(t, k, t)
        for frame in al.poll(t):
            out.append(engine.fuse(frame))
    return out


def test_dead_reckoning_follows_a_circle() -> None:
    v, w = 10.0, 0.2
    engine = FusionEngine(FusionParams(ego_speed_mps=v))
    frames = _drive(engine, 3.0, w)
    ego = frames[-1].ego
    t = (ego.stamp_ns - frames[0].ego.stamp_ns) / 1e9
    # Ground truth of a constant-rate turn from the first frame's pose (origin, heading 0).
    assert ego.yaw == pytest.approx(w * t, abs=1e-6)
    assert ego.x == pytest.approx(v / w * math.sin(w * t), abs=2e-3)
    assert ego.y == pytest.approx(v / w * (1 - math.cos(w * t)), abs=2e-3)
    assert ego.yaw_rate == pytest.approx(w)
    assert frames[-1].missing == ('radar', 'audio')


def test_measured_vehicle_speed_drives_the_estimate() -> None:
    engine = FusionEngine(FusionParams())  # no fixed speed: estimated
    engine.set_speed(20.0)
    frames = _drive(engine, 1.0, 0.0)
    t = (frames[-1].ego.stamp_ns - frames[0].ego.stamp_ns) / 1e9
    assert frames[-1].ego.v == pytest.approx(20.0, abs=1e-3)
    assert frames[-1].ego.x == pytest.approx(20.0 * t, rel=1e-3)
    assert frames[-1].ego.speed_source == 'vehicle'


def test_a_stamped_vehicle_speed_waits_for_the_frames_of_its_time() -> None:
    """A TwistStamped speed is aligned by its stamp: the frames before it do not see it, the
    first frame at or after it does (an unstamped one applies at once, as it arrives)."""
    engine = FusionEngine(FusionParams())
    engine.set_speed(20.0, T0 + 500 * MS)  # measured half a second in
    frames = _drive(engine, 1.0, 0.0)
    before = [f for f in frames if f.ego.stamp_ns < T0 + 500 * MS]
    after = [f for f in frames if f.ego.stamp_ns >= T0 + 500 * MS]
    assert before and after
    assert all(f.ego.speed_source != 'vehicle' for f in before)
    assert after[0].ego.speed_source == 'vehicle'
    assert after[-1].ego.v == pytest.approx(20.0, abs=0.5)


def _one_frame(
    engine: FusionEngine,
    objects: list[RadarObjectIn],
    frame_dt_ms: int = 50,
    audio: np.ndarray | None = None,
    network_output: np.ndarray | None = None,
):  # type: ignore[no-untyped-def]
    al = _aligner(audio_window_s=0.1)
    al.push_radar('radar', T0, engine.add_scan(T0, objects), T0)
    t = T0 + frame_dt_ms * MS
    if audio is not None:
        al.push_audio(t - len(audio) * 1_000_000_000 // 48_000, audio, t)
    al.push_camera(t, None, t)
    (frame,) = al.poll(t + 100 * MS)
    return engine.fuse(frame, network_output)


def test_radar_objects_move_to_the_frame_time_and_into_the_vehicle_frame() -> None:
    p = FusionParams(
        radar_x=3.6,
        radar_y=0.5,
        radar_yaw=math.radians(10),
        ego_speed_mps=10.0,
        output='detections',
    )
    engine = FusionEngine(p)
    # A car 30 m straight ahead of the radar closing at 10 m/s (relative): standing still.
    car = RadarObjectIn(7, 30.0, 0.0, -10.0, 0.0, ars_class=1, prob_exist=0.99)
    fused = _one_frame(engine, [car], frame_dt_ms=50)
    (obj,) = fused.objects
    assert fused.radar_dt_ns == 50 * MS
    r = 30.0 - 10.0 * 0.05  # moved along its line of sight to the frame time
    c, s = math.cos(p.radar_yaw), math.sin(p.radar_yaw)
    assert obj.x == pytest.approx(3.6 + c * r, abs=1e-9)
    assert obj.y == pytest.approx(0.5 + s * r, abs=1e-9)
    # Over ground: relative velocity rotated into base_link plus the ego speed.
    assert obj.vx == pytest.approx(c * -10.0 + 10.0, abs=1e-9)
    assert obj.vy == pytest.approx(s * -10.0, abs=1e-9)
    assert (obj.id, obj.object_class, obj.class_probability) == (7, CLASS_CAR, 0.99)
    assert (obj.length, obj.width) == (4.5, 1.9)  # class default without a measured size
    assert obj.position_std == p.position_std_m
    assert math.isnan(obj.camera_score) and obj.sources == 1


def test_measured_size_rms_and_existence_threshold() -> None:
    engine = FusionEngine(FusionParams(min_probability=0.5, output='detections'))
    ped = RadarObjectIn(
        1, 12.0, -2.0, 0.0, 1.0, 3, length=0.8, width=0.7, prob_exist=0.9, rms_x=0.3, rms_y=0.4
    )
    ghost = RadarObjectIn(2, 40.0, 3.0, 0.0, 0.0, 1, prob_exist=0.25)
    (obj,) = _one_frame(engine, [ped, ghost]).objects
    assert (obj.id, obj.object_class, obj.length, obj.width) == (1, CLASS_PEDESTRIAN, 0.8, 0.7)
    assert obj.position_std == 0.4


def test_a_network_output_without_a_decoder_is_refused() -> None:
    """The fusion takes decoded detections; a raw output with no decoder to read it is a bug
    (the node refuses such a model at configure)."""
    engine = FusionEngine(FusionParams(output='detections'))
    with pytest.raises(ValueError, match='decoder'):
        _one_frame(engine, [], network_output=np.zeros((1, 4, 48, 80), np.float32))


def test_audio_level_in_dbfs() -> None:
    n = 4800
    tone = (0.5 * np.sin(2 * np.pi * 1000 * np.arange(n) / 48_000)).astype(np.float32)[:, None]
    fused = _one_frame(FusionEngine(), [], frame_dt_ms=0, audio=tone)
    assert fused.audio_dbfs == pytest.approx(20 * math.log10(0.5 / math.sqrt(2)), abs=0.05)
    assert 'audio' not in fused.missing


def test_a_bad_mounting_fails_with_the_parameter_name() -> None:
    with pytest.raises(ParameterError, match='radar_x'):
        FusionParams(radar_x=-20.0, camera_x=1.8).check()
    for bad in ((0.1, 0.2), (math.nan, 0, 0, 0, 0)):
        with pytest.raises(ParameterError, match='distortion'):
            FusionParams(distortion=bad).check()


def _centernet_heads(
    engine: FusionEngine, objects: list[tuple[int, float, float, float]], hw: tuple[int, int]
) -> np.ndarray:
    """Hand-made rtf_centernet-layout heads: (class index, vehicle x, y, score) per object."""
    decoder = engine.decoder
    assert decoder is not None
    s = decoder.stride
    heads = np.zeros((1, decoder.channels, hw[0] // s, hw[1] // s), np.float32)
    heads[0, : len(decoder.classes)] = -20.0
    p = engine.p
    for cls, x, y, score in objects:
        depth = x - p.camera_x
        u, v = p.cx - p.fx * y / depth, p.cy + p.fy * 0.5 / depth  # centre 0.9 m up
        cx, cy = int(u / s), int(v / s)
        nc = len(decoder.classes)
        heads[0, cls, cy, cx] = math.log(score / (1 - score))
        heads[0, nc : nc + 4, cy, cx] = math.log(2.0)
        heads[0, nc + 4 : nc + 6, cy, cx] = (u / s - cx, v / s - cy)
        heads[0, nc + 6, cy, cx] = math.log(depth)
        heads[0, nc + 8, cy, cx] = 1.0  # cos: heading 0
    return heads


def _camera_frames(engine: FusionEngine, heads: np.ndarray, hw: tuple[int, int], n: int) -> list:  # type: ignore[type-arg]
    """``n`` 30 Hz camera frames alone, each with the network output ``heads``; the fused."""
    al = _aligner(wait_for=())
    fused = []
    for k in range(n):
        t = T0 + k * 33_333_333
        al.push_camera(t, k, t)
        for frame in al.poll(t + 100 * MS):
            fused.append(engine.fuse(frame, heads, hw))
    return fused


def test_camera_detections_alone_make_tracks_at_their_place() -> None:
    from rt_fusion.core.perception.decoders import DecoderSpec  # noqa: PLC0415

    engine = FusionEngine(FusionParams(ego_speed_mps=0.0))
    engine.set_decoder(
        DecoderSpec.from_dict(
            {
                'type': 'centernet',
                'classes': ['car', 'pedestrian', 'spaceship'],
                'depth': 'log',
                'heading': True,
            },
            'test',
        )
    )
    hw = (384, 640)
    # A car 30 m ahead 2 m left; a pedestrian at 12 m, 2 m right, whose score may update a
    # track but not start one; a class the fusion does not know; a car beyond the camera range;
    # a car at 65 m, within the camera range but beyond camera_birth_range_m (50 m): with a
    # radar its depth is too uncertain to start a track (the radar starts far ones); there is
    # no radar here, so the camera starts it (camera_birth_radar_timeout_s).
    heads = _centernet_heads(
        engine,
        [
            (0, 30.0, 2.0, 0.9),
            (1, 12.0, -2.0, 0.4),
            (2, 20.0, 0.0, 0.9),
            (0, 95.0, 0.0, 0.9),
            (0, 65.0, -8.0, 0.9),
        ],
        hw,
    )
    fused = _camera_frames(engine, heads, hw, 6)
    # The car at 30 m, scored 0.9, is reported in its first frame (camera_confirm_score 0.75
    # within camera_confirm_range_m 60 m); the one at 65 m is tentative for 2 frames.
    assert [(round(o.x), round(o.y)) for o in fused[0].objects] == [(30, 2)]
    assert len(fused[1].objects) == 1 and len(fused[2].objects) == 2
    assert engine.tracker.confirmed_early == 1
    car, far = sorted(fused[-1].objects, key=lambda o: o.x)
    assert (far.x, far.y) == pytest.approx((65.0, -8.0), abs=1e-3)
    assert car.object_class == CLASS_CAR and car.sources == 2  # the camera alone
    assert (car.x, car.y) == pytest.approx((30.0, 2.0), abs=1e-3)  # regressed depth, its ray
    assert car.camera_score == pytest.approx(0.9, abs=1e-3)
    assert len(engine.camera_detections) == 5


@pytest.mark.parametrize(
    ('score', 'range_m', 'first'),
    [(0.75, 60.0, [30, 45]), (0.85, 60.0, [30]), (0.75, 40.0, [30]), (0.0, 60.0, [])],
)
def test_a_camera_track_the_detector_is_sure_of_is_reported_in_its_first_frame(
    score: float, range_m: float, first: list[int]
) -> None:
    """camera_confirm_score: a track born of a detection scoring at least that, within
    camera_confirm_range_m, is confirmed at once; the others wait for tracker.confirm_hits (3:
    two frames without them); 0 turns the rule off."""
    from rt_fusion.core.perception.decoders import DecoderSpec  # noqa: PLC0415

    p = FusionParams(ego_speed_mps=0.0, camera_confirm_score=score, camera_confirm_range_m=range_m)
    engine = FusionEngine(p)
    engine.set_decoder(
        DecoderSpec.from_dict(
            {'type': 'centernet', 'classes': ['car'], 'depth': 'log', 'heading': True}, 'test'
        )
    )
    hw = (384, 640)
    # Cars at 30 m (score 0.9), 45 m (0.8) and 20 m (0.6: sure enough to start a track only).
    heads = _centernet_heads(
        engine, [(0, 30.0, 2.0, 0.9), (0, 45.0, -4.0, 0.8), (0, 20.0, -1.0, 0.6)], hw
    )
    fused = _camera_frames(engine, heads, hw, 3)
    assert sorted(round(o.x) for o in fused[0].objects) == first
    assert sorted(round(o.x) for o in fused[1].objects) == first
    assert sorted(round(o.x) for o in fused[2].objects) == [20, 30, 45]
    assert engine.tracker.confirmed_early == len(first)


def test_camera_detections_start_far_tracks_only_while_no_radar_does() -> None:
    """Beyond camera_birth_range_m the radar starts tracks: a far camera detection only updates
    them while radar scans come; without a scan for camera_birth_radar_timeout_s (none yet, or
    the radar lost) the camera starts them out to camera_max_range_m."""
    import dataclasses  # noqa: PLC0415

    from rt_fusion.core.perception import track_layout as tl  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415

    p = FusionParams(ego_speed_mps=0.0, camera_birth_radar_timeout_s=0.5)
    engine = FusionEngine(p)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 'test'))
    far = CameraDetection(0, 0.9, (300.0, 190.0, 310.0, 196.0), (305.0, 193.0), 65.0)
    near = dataclasses.replace(far, depth=30.0)

    def births(stamp_ns: int) -> list[bool]:
        block = engine.camera_block(
            [near, far], (0.0, 0.0, 0.0), birth_range_m=engine.camera_birth_range(stamp_ns)
        ).block
        return block[:, tl.DBIRTH].astype(bool).tolist()

    assert engine.camera_birth_range(T0) == p.camera_max_range_m  # no radar yet
    assert births(T0) == [True, True]
    engine._track(T0, [])  # a radar scan (empty road)
    assert births(T0 + 400 * MS) == [True, False]
    assert births(T0 + 600 * MS) == [True, True]  # the radar is gone


def test_a_rear_camera_starts_far_tracks_where_the_front_radar_does_not_look() -> None:
    """A rear camera's detection 65 m behind starts a track while the front radar scans (no
    radar looks there: ``radar_fov_deg``); the same 65 m ahead, in the radar's view, does not."""
    from rt_fusion.core.perception import track_layout as tl  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415
    from rt_fusion.core.scenario import sensors as sm  # noqa: PLC0415

    p = FusionParams(
        ego_speed_mps=0.0, **{k: tuple(v) for k, v in sm.mount_params(('rear',)).items()}
    )
    engine = FusionEngine(p)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 'test'))
    engine._track(T0, [])  # the radar is there: camera births ahead stop at 50 m
    far = CameraDetection(0, 0.9, (300.0, 190.0, 310.0, 196.0), (305.0, 193.0), 65.0)
    births = engine.camera_birth_range(T0)
    pose = (0.0, 0.0, 0.0)
    ahead = engine.camera_block([far], pose, birth_range_m=births).block
    (rear,) = p.extra_geometries()
    behind = engine.camera_block(
        [far], pose, dataclasses.replace(rear, height=p.camera_height), births
    ).block  # (at the front camera's height: its regressed depth)
    assert ahead[0, tl.DXY] > 60.0 and behind[0, tl.DXY] < -60.0
    assert not ahead[0, tl.DBIRTH] and behind[0, tl.DBIRTH]


def test_a_heard_siren_marks_the_vehicle_moving_fastest_relative_to_the_ego() -> None:
    """Ego at 13 m/s; a car ahead at its speed, a pedestrian crossing fast-ish, a truck
    overtaking at +11 m/s (relative, as an emergency vehicle passes). Radar velocities are
    relative: over ground = relative + ego speed."""
    engine = FusionEngine(FusionParams(ego_speed_mps=13.0, output='detections'))
    car = RadarObjectIn(1, 30.0, 0.0, 0.0, 0.0, ars_class=1, prob_exist=0.99)
    ped = RadarObjectIn(2, 15.0, 3.0, -13.0, -4.0, ars_class=3, prob_exist=0.99)  # standing-ish
    truck = RadarObjectIn(3, 10.0, 3.5, 11.0, 0.0, ars_class=2, prob_exist=0.99)
    far = RadarObjectIn(4, 150.0, 0.0, -30.0, 0.0, ars_class=1, prob_exist=0.99)  # out of range
    parked = RadarObjectIn(6, 25.0, 5.0, -13.0, 0.0, ars_class=1, prob_exist=0.99)  # 13 m/s rel.
    scan = [car, ped, truck, far, parked]
    classes = {o.id: o.object_class for o in _one_frame(engine, scan).objects}
    assert classes[3] == CLASS_TRUCK  # no siren: nothing is marked
    engine.set_siren(0.97)
    objs = {o.id: o for o in _one_frame(engine, scan).objects}
    assert objs[3].object_class == CLASS_EMERGENCY
    assert objs[3].class_probability == pytest.approx(0.97)
    assert objs[3].sources & SOURCE_AUDIO
    assert [o.object_class for k, o in sorted(objs.items()) if k != 3] == [
        CLASS_CAR, CLASS_PEDESTRIAN, CLASS_CAR, CLASS_CAR,
    ]  # fmt: skip
    # The mark stays with the track while the siren lasts, even when another moves faster.
    faster = RadarObjectIn(5, 20.0, -3.5, 20.0, 0.0, ars_class=1, prob_exist=0.99)
    objs = {o.id: o for o in _one_frame(engine, [*scan, faster]).objects}
    assert objs[3].object_class == CLASS_EMERGENCY and objs[5].object_class == CLASS_CAR
    engine.set_siren(None)
    objs = {o.id: o for o in _one_frame(engine, scan).objects}
    assert objs[3].object_class == CLASS_TRUCK and engine.emergency_id is None
    # A siren with only slow traffic marks nothing.
    engine.set_siren(0.9)
    assert all(o.object_class != CLASS_EMERGENCY for o in _one_frame(engine, [car]).objects)
    # Nor a car ahead that the ego catches up with (8 m/s over ground, 5 m/s slower than the ego:
    # as fast relative to the ego as a vehicle passing it, but the ego does the approaching).
    slower = RadarObjectIn(7, 30.0, 0.0, -5.0, 0.0, ars_class=1, prob_exist=0.99)
    assert all(o.object_class != CLASS_EMERGENCY for o in _one_frame(engine, [slower]).objects)


@pytest.mark.parametrize('static_depth', ['ground', 'regressed'])
def test_the_camera_block_places_each_detection_as_camera_to_vehicle_does(
    static_depth: str,
) -> None:
    """The vectorised camera path against the per-detection reference: camera_to_vehicle, the
    along-the-ray covariance and the class's size, for detections with and without a regressed
    depth, above the horizon, of an unknown class, beyond the range, and a post (with
    ``static_depth: ground``: on the road below its box, plus half its width, whatever its
    regressed depth)."""
    from rt_fusion.core.fusion import (  # noqa: PLC0415
        CLASS_STATIC,
        CLASS_UNKNOWN,
        DEFAULT_SIZE,
        SOURCE_CAMERA,
    )
    from rt_fusion.core.perception import track_layout as tl  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import (  # noqa: PLC0415
        CameraDetection,
        DecoderSpec,
        camera_to_vehicle,
    )
    from rt_fusion.core.perception.tracker import Detection, Detections, along_ray_cov  # noqa: PLC0415

    engine = FusionEngine(FusionParams(ego_speed_mps=0.0, static_depth=static_depth))
    classes = ['car', 'pedestrian', 'spaceship', 'static']
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': classes}, 'test'))
    rng = np.random.default_rng(3)
    cams = []
    for _ in range(200):
        u, v = rng.uniform(0, 640), rng.uniform(150, 384)
        depth = rng.choice([math.nan, -1.0, rng.uniform(2, 120)])
        cams.append(
            CameraDetection(
                int(rng.integers(4)),
                float(rng.uniform(0.2, 1.0)),
                (u - 10, v - 8, u + 10, v + rng.uniform(-30, 30)),
                (u, v),
                float(depth),
            )
        )
    pose = (12.0, -3.0, 0.3)
    got = engine.camera_block(cams, pose).block
    p, ox, oy, oyaw = engine.p, *pose
    c, s = math.cos(oyaw), math.sin(oyaw)
    want = []
    for det in cams:
        cls = engine._class_ids[det.cls]
        if cls == CLASS_UNKNOWN:
            continue
        geo = engine.geometry
        if cls == CLASS_STATIC and static_depth == 'ground' and det.box[3] - geo.cy > 1.0:
            flat = camera_to_vehicle(dataclasses.replace(det, depth=math.nan), geo)
            assert flat is not None
            grow = 1.0 + 0.5 * (det.box[2] - det.box[0]) / geo.fx  # half its width, deeper
            x, y = geo.x + (flat[0] - geo.x) * grow, geo.y + (flat[1] - geo.y) * grow
            pos = (x, y, math.hypot(x - geo.x, y - geo.y))
        else:
            pos = camera_to_vehicle(det, geo, DEFAULT_SIZE[cls][0] / 2)
        if pos is None or pos[2] > p.camera_max_range_m:
            continue
        x, y, r = pos
        along = p.camera_position_std_m + (p.camera_range_std + p.camera_range_std_sq * r) * r
        across = p.camera_position_std_m + p.camera_bearing_std * r
        still = 0.0 if cls == CLASS_STATIC else math.nan
        want.append(
            Detection(
                ox + c * x - s * y,
                oy + s * x + c * y,
                still,
                still,
                cov_xy=along_ray_cov(oyaw + math.atan2(y, x - p.camera_x), along, across),
                vel_std=0.5,
                can_birth=det.score >= p.camera_birth_score and r <= p.camera_birth_range_m,
                cls=cls,
                cls_prob=det.score,
                exist_prob=det.score,
                length=DEFAULT_SIZE[cls][0],
                width=DEFAULT_SIZE[cls][1],
                source=SOURCE_CAMERA,
            )
        )
    assert 40 < len(want) < 180  # some of each kind were dropped
    np.testing.assert_allclose(got, Detections.of(want).block, rtol=1e-12, atol=1e-9)
    assert got.shape[1] == tl.DET_WIDTH
    assert engine.camera_block([], pose).block.shape == (0, tl.DET_WIDTH)


def test_a_rig_camera_places_its_detections_through_its_mounting() -> None:
    """Each camera of the scenario's surround rig (front, left, right, rear: the renderer's
    mountings) sees a car on the road beside or behind the ego; its detection (the keypoint and
    depth the scenario camera gives it) lands where the car is, in odom."""
    from rt_fusion.core.perception import track_layout as tl  # noqa: PLC0415
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415
    from rt_fusion.core.scenario import sensors as sm  # noqa: PLC0415

    cam = sm.CameraModel()  # 640x360 at the model input's scale (fx 460)
    names = sm.RIG[1:]
    mounts = {k: tuple(v) for k, v in sm.mount_params(names).items()}
    # (every camera's regressed depth taken, whatever its height: the mounting is under test)
    params = FusionParams(
        ego_speed_mps=0.0, fx=cam.fx, fy=cam.fy, cx=cam.cx, cy=cam.cy, distortion=cam.d,
        regressed_depth_height_tolerance_m=10.0, **mounts,
    )  # fmt: skip
    params.check()
    engine = FusionEngine(params)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 'test'))
    geos = dict(zip(names, params.extra_geometries(), strict=True))
    geos['front'] = engine.geometry
    pose = (100.0, 20.0, 0.4)
    c, s = math.cos(pose[2]), math.sin(pose[2])
    for name, car in (
        ('front', (25.0, 1.0)),
        ('left', (3.0, 9.0)),
        ('right', (1.0, -12.0)),
        ('rear', (-30.0, -3.5)),
    ):
        rig_cam = cam.mounted(name)
        pt = np.array([[car[0], car[1], 0.8]])
        (uv,), (depth,) = rig_cam.project(pt)
        assert 0 <= uv[0] < cam.width and 0 <= uv[1] < cam.height, name
        det = CameraDetection(
            0, 0.9, (uv[0] - 5, uv[1] - 5, uv[0] + 5, uv[1] + 5), tuple(uv), depth
        )
        block = engine.camera_block([det], pose, geos[name]).block
        want = (pose[0] + c * car[0] - s * car[1], pose[1] + s * car[0] + c * car[1])
        assert block[0, tl.DXY : tl.DXY + 2] == pytest.approx(want, abs=0.02), name
        # By default a camera not at the detector's height (1.4 m: the rig's others, 1.1 and
        # 1.2 m) places by the road below the box: a depth 20 % long moves only the front one's.
        plain = FusionEngine(dataclasses.replace(params, regressed_depth_height_tolerance_m=0.1))
        plain.set_decoder(engine.decoder)
        far = dataclasses.replace(det, depth=1.2 * depth)
        moved = [plain.camera_block([d], pose, geos[name]).block[0, :2] for d in (det, far)]
        assert (np.abs(moved[1] - moved[0]).max() > 1.0) == (name == 'front'), name
    with pytest.raises(ParameterError, match='extra_camera_yaw'):
        FusionParams(
            extra_camera_x=(1.0,), extra_camera_y=(0.0,), extra_camera_height=(1.0,)
        ).check()


@pytest.mark.parametrize('ratio', [1.35, 1.0])
def test_a_detection_on_a_track_s_line_of_sight_does_not_start_a_second_track(
    ratio: float,
) -> None:
    """A car tracked at 20 m; in a later frame, beside its own detection, one on the same ray at
    25 m (its depth off, as a partly hidden object's is) starts no track: counted as vetoed. One
    at 25 m on another bearing, and one on the same ray at twice the range (an object behind),
    do. With camera_ray_ratio 1 the rule is off."""
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415

    # The new tracks stay tentative (no camera_confirm_score), so that the last check sees
    # the one confirmed track.
    p = FusionParams(ego_speed_mps=0.0, camera_ray_ratio=ratio, camera_confirm_score=0.0)
    engine = FusionEngine(p)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 'test'))

    def det(u: float, depth: float) -> CameraDetection:
        return CameraDetection(0, 0.9, (u - 20.0, 180.0, u + 20.0, 200.0), (u, 195.0), depth)

    for k in range(4):
        engine._track_camera(T0 + k * 33_333_333, [det(400.0, 20.0)], 640)
    assert engine.tracker.is_confirmed.tolist() == [True]
    same_ray, beside, behind = det(400.0, 25.0), det(200.0, 25.0), det(400.0, 40.0)
    engine._track_camera(T0 + 4 * 33_333_333, [det(400.0, 20.0), same_ray, beside, behind], 640)
    started = len(engine.tracker) - 1
    assert (started, engine.tracker.vetoed) == ((2, 1) if ratio > 1.0 else (3, 0))
    block = engine.camera_block([same_ray, beside, behind], (0.0, 0.0, 0.0)).block
    eyes = np.tile((p.camera_x, 0.0), (3, 1))
    assert engine.on_a_track_s_ray(block, eyes).tolist() == [ratio > 1.0, False, False]


@pytest.mark.parametrize('misses', [1, 0])
def test_a_track_whose_object_reads_nearer_on_its_line_of_sight_moves_there(
    misses: int,
) -> None:
    """A post tracked at 30 m whose detections then read 23 m on the same line of sight (a post
    half hidden behind a car reads too far; in view, right): once a camera frame has missed the
    track, it moves to the nearer detection and keeps its id, and nothing new starts. A post
    tracked at 23 m with detections at 30 m on its ray (another post behind it) stays where it
    is. With camera_reanchor_misses 0 the stale track stays and the right detections are only
    vetoed."""
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415

    def det(depth: float) -> CameraDetection:
        return CameraDetection(0, 0.9, (390.0, 180.0, 410.0, 200.0), (400.0, 195.0), depth)

    def run(first: float, then: float) -> FusionEngine:
        p = FusionParams(ego_speed_mps=0.0, camera_reanchor_misses=misses)
        engine = FusionEngine(p)
        engine.set_decoder(
            DecoderSpec.from_dict({'type': 'centernet', 'classes': ['static']}, 'test')
        )
        for k in range(4):
            engine._track_camera(T0 + k * 33_333_333, [det(first)], 640)
        assert engine.tracker.is_confirmed.tolist() == [True]
        for k in range(4, 7):
            engine._track_camera(T0 + k * 33_333_333, [det(then)], 640)
        return engine

    p = FusionParams()
    nearer = run(30.0, 23.0)
    assert nearer.tracker.ids.tolist() == [1]
    if misses:
        assert nearer.tracker.reanchored >= 1
        assert nearer.tracker.x[0, 0] == pytest.approx(p.camera_x + 23.0, abs=0.3)
    else:
        assert (nearer.tracker.reanchored, nearer.tracker.vetoed) == (0, 3)
        assert nearer.tracker.x[0, 0] == pytest.approx(p.camera_x + 30.0, abs=0.3)
    behind = run(23.0, 30.0)
    assert behind.tracker.ids.tolist() == [1]
    assert (behind.tracker.reanchored, behind.tracker.vetoed) == (0, 3)
    assert behind.tracker.x[0, 0] == pytest.approx(p.camera_x + 23.0, abs=0.3)


@pytest.mark.parametrize('floor', [0.3, 0.0])
def test_a_far_static_track_seen_by_the_camera_alone_keeps_a_depth_floor(floor: float) -> None:
    """A post at 70 m tracked over many frames: the camera's depth error persists from frame to
    frame, so the track's std along the line of sight stays at least camera_static_floor of one
    detection's (it would shrink as 1/sqrt(n) without); across it, the filter's own. Off (0):
    the plain Kalman filter's average."""
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415

    p = FusionParams(ego_speed_mps=0.0, camera_static_floor=floor)
    engine = FusionEngine(p)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['static']}, 'test'))
    det = CameraDetection(0, 0.9, (318.0, 190.0, 322.0, 200.0), (320.0, 195.0), 70.0)
    for k in range(40):
        engine._track_camera(T0 + k * 33_333_333, [det], 640)
    assert engine.tracker.is_confirmed.tolist() == [True]
    along = p.camera_position_std_m + (p.camera_range_std + p.camera_range_std_sq * 70) * 70
    std = math.sqrt(engine.tracker.P[0, 0, 0])  # straight ahead: x is along the line of sight
    if floor:
        assert std == pytest.approx(floor * along, rel=0.02)
    else:
        assert std < 0.2 * along


def test_a_track_turning_at_a_steady_rate_reports_that_yaw_rate() -> None:
    """The heading over ground of a track on a circle at 0.2 rad/s, frame to frame at 30 Hz; a
    track slower than yaw_rate_min_speed_mps reports 0 (its heading is noise)."""
    engine = FusionEngine(FusionParams(yaw_rate_smoothing=0.5, yaw_rate_min_speed_mps=1.0))
    w, v, dt = 0.2, 10.0, 1 / 30
    rates: list[float] = []
    for k in range(60):
        h = w * k * dt
        vx = np.array([v * math.cos(h), 0.3])
        vy = np.array([v * math.sin(h), 0.0])
        rates = engine._heading_rates(T0 + round(k * dt * 1e9), np.array([7, 8]), vx, vy)
    assert rates[0] == pytest.approx(w, rel=1e-3)
    assert rates[1] == 0.0
    # A new track has no rate yet; one gone is forgotten.
    assert engine._heading_rates(T0 + 3 * 10**9, np.array([9]), vx[:1], vy[:1]) == [0.0]
    assert set(engine._headings) == {9}


def test_a_track_covariance_turns_into_the_vehicle_frame() -> None:
    """Long along odom x, seen by an ego heading along odom y (yaw 90°): long along base_link y;
    at 45° the correlation appears, the trace stays."""
    from rt_fusion.core.fusion import _rotated_cov  # noqa: PLC0415

    cov = np.array([[[4.0, 0.0], [0.0, 1.0]]])
    ((xx, xy, yy),) = _rotated_cov(cov, math.cos(math.pi / 2), math.sin(math.pi / 2))
    assert (xx, xy, yy) == pytest.approx((1.0, 0.0, 4.0), abs=1e-12)
    ((xx, xy, yy),) = _rotated_cov(cov, math.cos(math.pi / 4), math.sin(math.pi / 4))
    assert xx + yy == pytest.approx(5.0) and xy == pytest.approx(-1.5)


def test_camera_info_scaled_to_the_model_input_is_the_scenario_camera_s_intrinsics() -> None:
    """The scenario camera's CameraInfo at 1920x1080 (and the same lens at 960x540) resized to
    the 640x384 input: config/replay.yaml's fusion.fx, fy, cx, cy; D as it is."""
    import yaml  # noqa: PLC0415

    from rt_fusion.core.fusion import model_intrinsics  # noqa: PLC0415
    from rt_fusion.core.scenario.sensors import CameraModel  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    params = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    want = params['fusion']['ros__parameters']['fusion']
    for size in ((1920, 1080), (960, 540)):
        info = CameraModel.sized(*size).camera_info()
        fx, fy, cx, cy, d = model_intrinsics(
            info['camera_matrix']['data'], info['distortion_coefficients']['data'], size,
            (384, 640),
        )  # fmt: skip
        assert (fx, fy, cx, cy) == pytest.approx((want['fx'], want['fy'], want['cx'], want['cy']))
        assert d == pytest.approx(tuple(want['distortion']))
    with pytest.raises(ValueError, match='skew'):
        model_intrinsics([1000.0, 2.0, 960.0, 0.0, 1000.0, 540.0, 0, 0, 1], [], (1920, 1080),
                         (384, 640))  # fmt: skip
    with pytest.raises(ValueError, match='not a camera'):
        model_intrinsics([math.nan, 0.0, 960.0, 0.0, 1000.0, 540.0, 0, 0, 1], [], (1920, 1080),
                         (384, 640))  # fmt: skip


def test_a_pitched_and_turned_camera_places_what_it_sees_where_it_is() -> None:
    """The scenario camera mounted 0.3 m left, turned 2° and looking 3° down renders road points
    and raised points; placed back with the same mounting (camera_to_vehicle, and the fusion's
    vectorised camera_block) they land where they are; with the level, straight mounting they
    land metres off."""
    from rt_fusion.core.perception.decoders import (  # noqa: PLC0415
        CameraDetection,
        CameraGeometry,
        DecoderSpec,
        camera_to_vehicle,
    )
    from rt_fusion.core.scenario.sensors import CameraModel  # noqa: PLC0415

    mount = {'pos': (1.8, 0.3, 1.4), 'yaw': math.radians(2.0), 'pitch': math.radians(3.0)}
    cam = dataclasses.replace(CameraModel(d=(0.0,) * 5), **mount)
    geo = CameraGeometry(cam.fx, cam.fy, cam.cx, cam.cy, 1.8, 1.4, 0.3, (), *(mount['yaw'],
                         mount['pitch']))  # fmt: skip
    level = CameraGeometry(cam.fx, cam.fy, cam.cx, cam.cy, 1.8, 1.4)
    road = np.array([[12.0, 1.5, 0.0], [30.0, -2.0, 0.0], [55.0, 3.5, 0.0]])
    raised = road + np.array([0.0, 0.0, 0.8])
    uv_road, _ = cam.project_pinhole(road)
    uv_up, _ = cam.project_pinhole(raised)
    axis = cam.to_camera(raised)[:, 0]  # a regressed depth: along the optical axis
    dets = []
    for (u0, v0), (u1, v1), d in zip(uv_road, uv_up, axis, strict=True):
        dets.append(CameraDetection(0, 0.9, (u0 - 5, v0 - 20, u0 + 5, v0), (u0, v0), math.nan))
        dets.append(CameraDetection(0, 0.9, (u1 - 5, v1 - 20, u1 + 5, v1), (u1, v1), float(d)))
    want = np.repeat(road[:, :2], 2, axis=0)
    got = np.array([camera_to_vehicle(d, geo)[:2] for d in dets])
    assert got == pytest.approx(want, abs=1e-6)
    # On the road below the boxes, a level camera's: metres off, or above its horizon (lost).
    off = [camera_to_vehicle(d, level) for d in dets[0::2]]
    assert all(o is None or math.dist(o[:2], w[:2]) > 2.0 for o, w in zip(off, road, strict=True))
    params = FusionParams(
        camera_y=0.3, camera_yaw=mount['yaw'], camera_pitch=mount['pitch'], fx=cam.fx,
        fy=cam.fy, cx=cam.cx, cy=cam.cy, distortion=(0.0,) * 5, ego_speed_mps=0.0,
        regressed_depth_max_pitch=0.1,  # the geometry of a regressed depth, pitched
    )  # fmt: skip
    engine = FusionEngine(params)
    engine.set_decoder(DecoderSpec.from_dict({'type': 'centernet', 'classes': ['car']}, 't'))
    block = engine.camera_block(dets, (0.0, 0.0, 0.0)).block
    from rt_fusion.core.perception import track_layout as tl  # noqa: PLC0415

    # along the keypoints' rays (the regressed depths) as camera_to_vehicle; on the road below
    # the boxes plus half a car's length further along the same level ray
    assert block[1::2, tl.DXY : tl.DXY + 2] == pytest.approx(want[1::2], abs=1e-6)
    ahead = block[0::2, tl.DXY : tl.DXY + 2] - np.array([1.8, 0.3])
    assert np.hypot(*ahead.T) == pytest.approx(np.hypot(*(want[0::2] - [1.8, 0.3]).T) + 2.25,
                                               abs=0.05)  # fmt: skip


def test_a_camera_frame_s_late_detections_go_in_at_its_time_as_if_in_order() -> None:
    """The network beside the fusion (fusion_node ``inference: beside``): a frame given to the
    network is fused before its detections (``camera_later``), which come while the next frame
    is fused without the network (it was busy) and go in after it (``camera_late``). The tracker
    goes back to the frame, takes them, and tracks the radar scans since again: after the last
    frame's, its tracks are those of a fusion that had every detection in time, bit for bit."""
    from rt_fusion.core.perception.decoders import CameraDetection, DecoderSpec  # noqa: PLC0415

    def engine() -> FusionEngine:
        e = FusionEngine(FusionParams(ego_speed_mps=10.0))
        spec = {'type': 'centernet', 'classes': ['car', 'pedestrian']}
        e.set_decoder(DecoderSpec.from_dict(spec, 'test'))
        return e

    def seen(e: FusionEngine, x: float, y: float, cls: int) -> CameraDetection:
        p, depth = e.p, x - e.p.camera_x
        u, v = p.cx - p.fx * y / depth, p.cy + p.fy * 0.5 / depth
        half = p.fx * 0.9 / depth
        return CameraDetection(cls, 0.9, (u - half, v - half, u + half, v + half), (u, v), depth)

    inline, late = engine(), engine()
    aligners = (_aligner(wait_for=()), _aligner(wait_for=()))
    # A car 40 m ahead at 12 m/s (the ego at 10), seen by both sensors; a pedestrian at 15 m,
    # 3 m right, standing: the camera's alone. The network on every other frame.
    scan_t, waiting, outputs = T0, None, []
    for k in range(46):  # 1.5 s of 30 Hz frames, radar at 13.6 Hz between them
        t = T0 + k * 33_333_333
        while scan_t <= t:
            dt = (scan_t - T0) / 1e9
            car = RadarObjectIn(7, 40.0 + 2.0 * dt - 3.6, 1.0, 2.0, 0.0, 1, prob_exist=0.99)
            for e, al in zip((inline, late), aligners, strict=True):
                al.push_radar('radar', scan_t, e.add_scan(scan_t, [car]), scan_t)
            scan_t += 73_529_411
        dt = (t - T0) / 1e9
        for al in aligners:
            al.push_camera(t, k, t)
        (a,) = aligners[0].poll(t + 100 * MS)
        (b,) = aligners[1].poll(t + 100 * MS)
        dets = [seen(inline, 40.0 + 2.0 * dt, 1.0, 0), seen(inline, 15.0 - 10.0 * dt, -3.0, 1)]
        inferred = k % 2 == 0
        inline.fuse(a, detections=dets if inferred else None)
        outputs.append(late.fuse(b, camera_later=inferred))
        if waiting is not None:  # the network's result for the frame before, ready now
            assert late.camera_late(*waiting, 640)
            waiting = None
        if inferred:
            waiting = (t, dets)
    assert not late.camera_late(t - 33_333_333, [], 640)  # no frame of that time waits
    assert late.late_applied == 23 and late.late_replayed > 0
    for name in ('_f', '_i', '_c'):
        np.testing.assert_array_equal(getattr(late.tracker, name), getattr(inline.tracker, name))
    assert late.tracker.births == inline.tracker.births
    # The pedestrian (the camera's alone; a sure detection, confirmed at its first hit): frame
    # 0's detections went in after frame 1 was fused: it is out with frame 2.
    first = next(k for k, f in enumerate(outputs) if any(o.object_class == 3 for o in f.objects))
    assert first == 2
