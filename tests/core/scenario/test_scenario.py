"""The scenario generator's sensor models checked against their intent, on generated bags read
back through the same bag reader the replay uses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from rt_fusion.core.bag import image_to_array, iter_messages
from rt_fusion.core.scenario import render as rd
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.generate import T0_NS, generate
from rt_fusion.core.scenario.world import ScenarioError, build_world
from tests.conftest import ROOT

LIBRARY = ROOT / 'config' / 'scenarios'
SMALL = sm.CameraModel()  # 640x360: for what does not depend on the frame size (fast)


def _scenario(name: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((LIBRARY / f'{name}.yaml').read_text())


@pytest.fixture(scope='module')
def cut_in(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    out = tmp_path_factory.mktemp('cut_in')
    summary = generate(_scenario('cut_in'), 10.0, 7, out)  # the default: the 1080p camera
    return out, summary


def test_every_built_in_scenario_builds() -> None:
    names = sorted(p.stem for p in LIBRARY.glob('*.yaml'))
    assert names == ['cut_in', 'emergency_vehicle', 'pedestrian_crossing', 'stopped_car']
    for name in names:
        world = build_world(_scenario(name), 10.0)
        assert world.actors and len(world.ego.t) > 10_000


def test_bad_scenarios_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"actors\[0\]: class 'tank'"):
        build_world({'ego': {}, 'actors': [{'class': 'tank'}]}, 5.0)
    with pytest.raises(ScenarioError, match=r"actors\[0\].events\[0\]: 'at' is required"):
        build_world({'ego': {}, 'actors': [{'events': [{'speed': 3}]}]}, 5.0)
    with pytest.raises(ScenarioError, match="'ego' is required"):
        build_world({'actors': []}, 5.0)


def test_lane_change_and_braking_follow_their_profiles() -> None:
    world = build_world(_scenario('cut_in'), 10.0)
    car = world.actors[0]
    lane = world.road.lane_width
    assert car.at(2.9)['d'] == pytest.approx(lane)  # before the cut-in: left lane
    assert car.at(4.0)['d'] == pytest.approx(lane / 2, abs=1e-3)  # halfway (quintic)
    assert car.at(5.1)['d'] == pytest.approx(0.0, abs=1e-9)
    # Brakes from 18 to 9 m/s at 3 m/s² from t = 5.5: 3 s.
    assert math.hypot(car.at(7.0)['vx'], car.at(7.0)['vy']) == pytest.approx(13.5, abs=0.02)
    assert math.hypot(car.at(9.0)['vx'], car.at(9.0)['vy']) == pytest.approx(9.0, abs=0.02)


def test_radar_noise_has_the_configured_statistics() -> None:
    # Objects standing still around a parked ego: many scans, residuals against the truth.
    world = build_world(
        {
            'ego': {'speed': 0.0},
            'actors': [
                {'class': 'car', 'd': d, 's': s} for s, d in ((20, 0), (45, 3.5), (80, -3.5))
            ],
            'roadside': {'spacing': 0},  # only the three cars
        },
        60.0,
    )
    model = sm.RadarModel()
    rng = np.random.default_rng(1)
    dr, daz, seen, fa, scans = [], [], 0, 0, 0
    for k in range(800):
        objs = sm.radar_scan(model, world, 0.05 * k, rng)
        scans += 1
        for o in objs:
            if o['true'] is None:
                fa += 1
                continue
            seen += 1
            tx, ty = o['true']
            dr.append(math.hypot(o['x'], o['y']) - math.hypot(tx, ty))
            daz.append(
                math.degrees(
                    math.remainder(math.atan2(o['y'], o['x']) - math.atan2(ty, tx), math.tau)
                )
            )
    assert np.std(dr) == pytest.approx(model.range_std, rel=0.1)
    assert abs(np.mean(dr)) < 0.03
    assert np.std(daz) == pytest.approx(model.azimuth_std_deg, rel=0.1)
    assert seen / (3 * scans) == pytest.approx(model.detect_prob, abs=0.02)
    assert fa / scans == pytest.approx(model.false_alarms, abs=0.1)


def test_radar_velocities_are_relative_in_the_turning_sensor_frame() -> None:
    # On a curve (0.01 1/m at 10 m/s: 0.1 rad/s) an object standing still at 50 m is seen by
    # the radar to move sideways at -ω x = -5 m/s: the rate of change of its position in the
    # turning frame, as a real sensor reports it. Adding the ego's own motion back (what the
    # fusion does: gx = vx + v - ω y, gy = vy + ω x in base_link) gives zero over ground.
    world = build_world(
        {
            'road': {'curvature': 0.01},
            'ego': {'speed': 10.0},
            'actors': [{'class': 'car', 'd': 0.0, 's': 50.0, 'speed': 0.0}],
            'roadside': {'spacing': 0},
        },
        10.0,
    )
    model = sm.RadarModel(false_alarms=0.0, detect_prob=1.0)
    rng = np.random.default_rng(2)
    ground = []
    for k in range(100):
        (o,) = sm.radar_scan(model, world, 0.01 * k, rng)
        x, y = o['true'][0] + sm.RADAR_POS[0], o['true'][1] + sm.RADAR_POS[1]
        assert o['vy'] == pytest.approx(-0.1 * x, abs=0.5)
        ground.append((o['vx'] + 10.0 - 0.1 * y, o['vy'] + 0.1 * x))
    assert np.mean(ground, axis=0) == pytest.approx([0.0, 0.0], abs=0.05)


def test_imu_integrates_back_to_the_ego_trajectory(tmp_path: Path) -> None:
    # stopped_car: a left curve (0.002 1/m) at 14 m/s, so heading and position both change.
    generate(_scenario('stopped_car'), 10.0, 5, tmp_path, camera=SMALL)
    msgs = list(iter_messages(tmp_path / 'bag', ['/imu/out/imu', '/scenario/truth/odometry']))
    imu = [m.msg for m in msgs if m.topic == '/imu/out/imu']
    odom = [m.msg for m in msgs if m.topic == '/scenario/truth/odometry']
    assert len(imu) == 2000 and len(odom) == 500
    dt = 1 / 200
    # Dead reckoning from the IMU alone (speed from the forward acceleration, heading from the
    # yaw rate) from the true initial state, up to the last truth sample (t = 9.98 s).
    v = odom[0].twist.twist.linear.x
    yaw = x = y = 0.0
    for m in imu[:1996]:
        x += v * math.cos(yaw) * dt
        y += v * math.sin(yaw) * dt
        v += m.linear_acceleration.x * dt
        yaw += m.angular_velocity.z * dt
    end = odom[-1]
    q = end.pose.pose.orientation
    yaw_true = 2 * math.atan2(q.z, q.w)
    assert yaw_true == pytest.approx(0.002 * 14.0 * 9.98, rel=0.01)  # it did turn
    # Budget over 10 s: accel bias 0.03 m/s² -> 0.3 m/s and 1.5 m; gyro bias 0.002 rad/s ->
    # 0.02 rad and ~1.4 m sideways; white noise adds little.
    assert v == pytest.approx(end.twist.twist.linear.x, abs=0.4)
    assert yaw == pytest.approx(yaw_true, abs=0.03)
    p = end.pose.pose.position
    assert math.hypot(x - p.x, y - p.y) < 3.0
    # Gravity and the covariances are there.
    assert np.mean([m.linear_acceleration.z for m in imu]) == pytest.approx(9.81, abs=0.1)
    assert imu[0].angular_velocity_covariance[0] == pytest.approx(sm.ImuModel().gyro_std ** 2)


@pytest.mark.integration
def test_projected_truth_lands_on_the_rendered_objects(cut_in: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    out, summary = cut_in
    truth = json.loads((out / 'ground_truth.json').read_text())
    cam = summary['camera']
    assert (cam.width, cam.height) == (1920, 1080)
    frames = list(iter_messages(out / 'bag', ['/camera/out/image/compressed']))
    assert len(frames) == 300
    checked = 0
    for m, gt in zip(frames, truth['frames'], strict=True):
        assert m.msg.header.stamp.sec * 10**9 + m.msg.header.stamp.nanosec == gt['stamp_ns']
        img, _enc = image_to_array(m.msg, m.msgtype)
        visible = [o for o in gt['objects'] if o['ego_x'] - sm.CAMERA_POS[0] > 5.0]
        if not visible:
            continue
        o = min(visible, key=lambda o: o['ego_x'])  # the nearest: nothing hides it
        if o['class'] not in ('car', 'static'):
            continue  # a car's body (any of its bodies) and a post fill 0.16-0.5 of the height
        # Low on the centre line: the ray meets the near face below the lamps (0.34-0.44).
        centre = np.array([[o['ego_x'], o['ego_y'], o['size'][2] * 0.15]])
        ((u, v),) = cam.project(centre)[0]
        if not (0 <= u < cam.width and 0 <= v < cam.height):
            continue
        pixel = img[int(v), int(u)].astype(np.float64)
        colour = rd.actor_bgr(o['class'], o['id'], rd.Look()).astype(np.float64)
        cos = pixel @ colour / (np.linalg.norm(pixel) * np.linalg.norm(colour))
        assert cos > 0.95, (gt['t'], o['id'], pixel, colour)
        checked += 1
    assert checked > 200


def test_audio_carries_the_horn_at_its_time(cut_in: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    out, _ = cut_in
    chunks = [m.msg for m in iter_messages(out / 'bag', ['/microphone/out/audio'])]
    samples = np.concatenate([c.samples for c in chunks]).astype(np.float64) / 32768
    rate = chunks[0].sample_rate

    def level(t0: float, t1: float, f: float) -> float:
        seg = samples[int(t0 * rate) : int(t1 * rate)]
        spec = np.abs(np.fft.rfft(seg * np.hanning(len(seg))))
        freqs = np.fft.rfftfreq(len(seg), 1 / rate)
        return float(spec[np.argmin(np.abs(freqs - f))] / len(seg))

    horn = _scenario('cut_in')['audio_events'][0]
    during = level(horn['at'] + 0.1, horn['at'] + 0.5, 420.0)
    before = level(horn['at'] - 1.0, horn['at'] - 0.6, 420.0)
    assert during > 30 * before
    starts = [c.header.stamp.sec * 10**9 + c.header.stamp.nanosec - T0_NS for c in chunks]
    assert starts == [round(k * 1024 / rate * 1e9) for k in range(len(chunks))]


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    sc = _scenario('stopped_car')
    # 'b' renders its frames in two processes: the same bytes as on one.
    for name, seed, workers in (('a', 3, 1), ('b', 3, 2), ('c', 4, 1)):
        generate(sc, 2.0, seed, tmp_path / name, camera=SMALL, workers=workers)
    read = {n: (tmp_path / n / 'bag' / 'bag.mcap').read_bytes() for n in 'abc'}
    assert read['a'] == read['b']
    assert read['a'] != read['c']
    assert (tmp_path / 'a' / 'ground_truth.json').read_bytes() == (
        tmp_path / 'b' / 'ground_truth.json'
    ).read_bytes()
    img = cv2.imdecode(
        np.frombuffer(
            next(iter_messages(tmp_path / 'a' / 'bag', ['/camera/out/image/compressed'])).msg.data,
            np.uint8,
        ),
        cv2.IMREAD_COLOR,
    )
    assert img.shape == (360, 640, 3)


def test_raw_images_option_writes_sensor_msgs_image(tmp_path: Path) -> None:
    generate(_scenario('cut_in'), 0.5, 0, tmp_path, raw_images=True, camera=SMALL)
    frames = list(iter_messages(tmp_path / 'bag', ['/camera/out/image']))
    assert len(frames) == 15
    img, enc = image_to_array(frames[0].msg, frames[0].msgtype)
    assert enc == 'bgr8' and img.shape == (360, 640, 3)


def test_the_imu_clock_maps_back_onto_the_host_timeline(cut_in: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    from rt_fusion.core.clock import ClockMapper, ClockParams  # noqa: PLC0415
    from rt_fusion.core.scenario.generate import IMU_CLOCK_SKEW_PPM, IMU_DEVICE_TOPIC  # noqa: PLC0415

    out, _ = cut_in
    dev = list(iter_messages(out / 'bag', [IMU_DEVICE_TOPIC]))
    imu = [m.msg for m in iter_messages(out / 'bag', ['/imu/out/imu'])]
    assert len(dev) == len(imu) == 2000
    mapper = ClockMapper(ClockParams(tick_ns=100_000, window_s=20.0, lock_span_s=2.0))
    errors = []
    for m, sample in zip(dev, imu, strict=True):
        ticks = (m.msg.stamp.sec * 10**9 + m.msg.stamp.nanosec) // 100_000
        hw = mapper.update(ticks, m.log_time_ns)  # (device time, host receive time)
        if mapper.locked:
            true = sample.header.stamp.sec * 10**9 + sample.header.stamp.nanosec
            errors.append(mapper.to_host(hw) - true)
    state = mapper.state()
    assert state.locked
    assert state.skew_ppm == pytest.approx(IMU_CLOCK_SKEW_PPM, abs=3.0)
    # The mapping lands on the sample time plus the constant 1 ms delivery delay (the minimum
    # delay is all a one-way mapping can see), within the 100 µs tick.
    assert len(errors) > 1000
    assert np.abs(np.array(errors) - 1_000_000).max() < 150_000


def test_sqlite3_storage_is_readable_too(tmp_path: Path) -> None:
    generate(_scenario('cut_in'), 0.5, 0, tmp_path, storage='sqlite3', camera=SMALL)
    assert list((tmp_path / 'bag').glob('*.db3'))
    assert len(list(iter_messages(tmp_path / 'bag', ['/imu/out/imu']))) == 100


def test_real_clips_mix_in_when_present(tmp_path: Path) -> None:
    from tests.conftest import shared_file  # noqa: PLC0415

    clips = shared_file('audio/car-horn.wav').parent  # skips without the recordings
    sc = _scenario('stopped_car') | {
        'audio_events': [{'kind': 'clip', 'file': 'car-horn.wav', 'at': 1.0, 'duration': 1.0}]
    }
    generate(sc, 2.5, 0, tmp_path, clips_dir=clips, camera=SMALL)
    chunks = [m.msg for m in iter_messages(tmp_path / 'bag', ['/microphone/out/audio'])]
    x = np.concatenate([c.samples for c in chunks]).astype(np.float64) / 32768
    rms = lambda a, b: float(np.sqrt(np.mean(x[int(a * 48_000) : int(b * 48_000)] ** 2)))  # noqa: E731
    assert rms(1.1, 1.9) > 5 * rms(0.1, 0.9)
    with pytest.raises(ScenarioError, match=r"car-horn\.wav' not found"):
        generate(sc, 1.0, 0, tmp_path / 'again', clips_dir=tmp_path, camera=SMALL)


def _line_up(speed_behind: float = 0.0) -> object:
    # Ego in lane 0; a car 20 m ahead, a truck 45 m ahead in the same lane (hidden behind the car
    # for both sensors), a car 30 m ahead in the left lane, and a car 30 m behind (out of view).
    scenario = {
        'name': 'line_up',
        'road': {'curvature': 0.0, 'lanes': 2, 'lane_width': 3.5},
        'ego': {'class': 'car', 'speed': 10.0, 'lane': 0},
        'roadside': {'spacing': 0},
        'actors': [
            {'class': 'car', 'lane': 0, 's': 20.0, 'speed': 10.0},
            {'class': 'car', 'lane': 0, 's': 45.0, 'speed': 10.0 + speed_behind},
            {'class': 'car', 'lane': 1, 's': 30.0, 'speed': 10.0},
            {'class': 'car', 'lane': 0, 's': -30.0, 'speed': 10.0},
        ],
    }
    return build_world(scenario, 2.0)


def test_visibility_knows_field_of_view_and_occlusion() -> None:
    world = _line_up()
    ids = [a.id for a in world.actors]  # type: ignore[attr-defined]
    seen = sm.visibility(world, 0.5, sm.CameraModel(), sm.RadarModel())  # type: ignore[arg-type]
    assert seen[ids[0]] == {'camera': True, 'radar': True}
    assert seen[ids[1]] == {'camera': False, 'radar': False}  # behind the first car
    assert seen[ids[2]] == {'camera': True, 'radar': True}  # beside it, in the next lane
    assert seen[ids[3]] == {'camera': False, 'radar': False}  # behind the ego


def test_the_radar_reports_only_what_it_sees() -> None:
    world = _line_up()
    hidden = world.actors[1].id  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    model = sm.RadarModel(false_alarms=0.0, detect_prob=1.0)
    for k in range(20):
        t = 0.05 * k
        seen = {a: v['radar'] for a, v in sm.radar_visibility(world, t, model).items()}  # type: ignore[arg-type]
        scan = sm.radar_scan(model, world, t, rng, sm.RadarIds(), seen)  # type: ignore[arg-type]
        assert hidden not in {o['actor'] for o in scan}
        assert len(scan) == 2


def test_radar_ids_are_the_sensors_own_lost_renewed_and_reused() -> None:
    ids = sm.RadarIds(lost_after=2)
    # Scan 0: actors 7 and 9 appear -> ids 0 and 1; one false alarm -> id 2.
    given, fa = ids.scan([7, 9], 1)
    assert given == {7: 0, 9: 1} and fa == [2]
    # Scan 1: 7 missed once (keeps its id), 9 seen; the false alarm's id is free again.
    given, fa = ids.scan([9], 1)
    assert given == {9: 1} and fa == [2]
    # Scan 2: 7 missed twice: lost. Scan 3: an unrelated actor 4 takes id 0 at once ...
    ids.scan([9], 0)
    given, _ = ids.scan([4, 9], 0)
    assert given == {4: 0, 9: 1}
    # ... and 7, found again, gets a new id.
    given, _ = ids.scan([4, 9, 7], 0)
    assert given[7] == 2


def test_generated_radar_ids_and_existence_do_not_give_the_answer_away(cut_in) -> None:  # type: ignore[no-untyped-def]
    out, _ = cut_in
    truth = json.loads((out / 'ground_truth.json').read_text())
    actors = {o['id'] for f in truth['frames'] for o in f['objects']}
    ids, probs = set(), []
    for m in iter_messages(out / 'bag', ['/radar/out/objects']):
        for o in m.msg.objects:
            ids.add(o.id)
            probs.append(o.existence_probability)
    assert ids != actors  # sensor ids, not the actors' own
    assert len(set(np.round(probs, 3))) >= 3  # existence varies, not a constant per kind
    # Every truth object carries which sensors see it.
    assert all(
        set(o['visible']) == {'camera', 'radar'} for f in truth['frames'] for o in f['objects']
    )


def test_roadside_posts_line_both_edges_and_are_in_the_truth() -> None:
    world = build_world(_scenario('cut_in'), 4.0)
    posts = [a for a in world.actors if a.cls == 'static']
    right, left = world.road.edges()
    ds = sorted({round(float(a.d[0]), 3) for a in posts})
    assert ds == [round(right - 1.0, 3), round(left + 1.0, 3)]
    assert all(abs(float(a.vx.max())) < 1e-9 for a in posts)
    off = build_world({**_scenario('cut_in'), 'roadside': {'spacing': 0}}, 4.0)
    assert not [a for a in off.actors if a.cls == 'static']


def test_random_scenes_for_the_detector_label_what_the_camera_sees() -> None:
    from rt_fusion.core.scenario import detector_data as dd  # noqa: PLC0415

    cam = sm.CameraModel()
    frames = dd.scene_frames((dd.HELDOUT_SEED_BASE, 7), 3, cam)
    again = dd.scene_frames((dd.HELDOUT_SEED_BASE, 7), 3, cam)
    assert frames and all(np.array_equal(a[0], b[0]) for a, b in zip(frames, again, strict=True))
    labels = [lab for _, labs in frames for lab in labs]
    assert labels
    for lab in labels:
        u0, v0, u1, v1 = lab.box
        assert 0 <= u0 < u1 < cam.width and 0 <= v0 < v1 < cam.height
        assert u0 <= lab.keypoint[0] <= u1 and v0 <= lab.keypoint[1] <= v1
        assert lab.depth == pytest.approx(lab.x - sm.CAMERA_POS[0])
        assert 0 < lab.depth <= dd.MAX_LABEL_RANGE_M
        # The keypoint is the centre's projection through the lens where the centre is inside
        # the image: without the lens, its u does not depend on the height.
        u = cam.project_pinhole(np.array([[lab.x, lab.y, 0.0]]))[0][0, 0]
        if u0 < lab.keypoint[0] < u1 and v0 < lab.keypoint[1] < v1:
            assert cam.undistort(np.array([lab.keypoint]))[0, 0] == pytest.approx(u, abs=1e-4)


def test_a_1080p_camera_sees_what_the_640_one_sees_scaled_and_odd_sizes_are_refused() -> None:
    small, big = sm.CameraModel(), sm.CameraModel.sized(1920, 1080)
    assert (big.width, big.height, big.fx, big.cx, big.cy) == (1920, 1080, 1380.0, 960.0, 540.0)
    pts = np.array([[20.0, 3.0, 0.5], [60.0, -4.0, 1.0]])
    uv_small, d_small = small.project(pts)
    uv_big, d_big = big.project(pts)
    np.testing.assert_allclose(uv_big, 3.0 * uv_small)
    np.testing.assert_allclose(d_big, d_small)
    for bad in ((1920, 1208), (32, 18)):
        with pytest.raises(ValueError, match='16:9'):
            sm.CameraModel.sized(*bad)


def test_occluders_stand_between_the_ego_and_a_far_roadside_post() -> None:
    """detector_data.add_occluders (train_detector --occluders): 1-3 standing objects, each
    on the straight line from the ego's camera at some time of the scene to a roadside post
    40-100 m ahead, 55-90 % of the way there; a scene drawn without them is the same scene as
    before the option existed, and one without posts gets none."""
    from rt_fusion.core.scenario import detector_data as dd  # noqa: PLC0415

    scenario = {
        'road': {'curvature': 0.0, 'lanes': 2, 'lane_width': 3.5},
        'ego': {'class': 'car', 'speed': 10.0, 'lane': 0},
        'actors': [],
        'roadside': {'spacing': 25.0, 'offset': 1.0, 'size': [0.3, 0.3, 1.2]},
    }
    right, left = -1.5 * 3.5 - 1.0, 1.5 * 3.5 + 1.0  # the post lines (Road.edges, offset)
    for k in range(20):
        sc = {**scenario, 'actors': []}
        dd.add_occluders(sc, np.random.default_rng(k), 4.0)
        assert 1 <= len(sc['actors']) <= 3
        for a in sc['actors']:
            assert a['class'] in ('static', 'car') and a['speed'] == 0.0
            # Straight road: Frenet is the world. From the ego at (s0 in [0, 40], 0) to a post
            # at (s0 + 40..100 rounded up to the post grid, line d), 55-90 % of the way.
            fractions = [a['d'] / line for line in (right, left)]
            assert any(0.55 - 0.3 <= f <= 0.9 + 0.3 for f in fractions), a
            assert 0.55 * 40.0 - 1.0 <= a['s'] <= 40.0 + 0.9 * 125.0, a
    none = {**scenario, 'actors': [], 'roadside': {**scenario['roadside'], 'spacing': 0.0}}
    dd.add_occluders(none, np.random.default_rng(0), 4.0)
    assert none['actors'] == []
    cam = sm.CameraModel()
    plain = dd.scene_frames((dd.HELDOUT_SEED_BASE, 7), 2, cam)
    off = dd.scene_frames((dd.HELDOUT_SEED_BASE, 7), 2, cam, occluders=0.0)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(plain, off, strict=True))
