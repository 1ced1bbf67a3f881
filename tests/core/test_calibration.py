"""rt_fusion.core.calibration: a vehicle's calibration file read, checked, and held to the fusion
parameters and the scenario generator it must agree with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from rt_fusion.core import calibration, rotation
from rt_fusion.core.fusion import FusionParams
from rt_fusion.core.scenario import sensors

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / 'config' / 'calibration' / 'scenario.yaml'
VEHICLE = ROOT / 'config' / 'calibration' / 'vehicle.yaml'


def test_a_mounting_rotates_yaw_then_pitch_then_roll() -> None:
    m = calibration.Mounting('camera', roll=0.1, pitch=-0.2, yaw=0.3)
    # Rz(yaw) Ry(pitch) Rx(roll) as quaternion products
    rz = rotation.from_rotvec(0.0, 0.0, 0.3)
    ry = rotation.from_rotvec(0.0, -0.2, 0.0)
    rx = rotation.from_rotvec(0.1, 0.0, 0.0)
    want = rotation.mul(rotation.mul(rz, ry), rx)
    assert m.quaternion() == pytest.approx(want, abs=1e-12)
    assert rotation.yaw(*calibration.Mounting('radar', yaw=0.3).quaternion()) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ('doc', 'named'),
    [
        ({'sensors': {'camera': {'x': 'one'}}}, 'sensors.camera.x'),
        ({'sensors': {'camera': {'x': math.nan}}}, 'sensors.camera.x'),
        ({'sensors': {'camera': {'heading': 0.1}}}, "unknown keys ['heading']"),
        ({'sensors': {'Camera 1': {'x': 1.0}}}, 'sensors.Camera 1'),
        ({'sensors': {'base_link': {'x': 1.0}}}, 'sensors.base_link'),
        ({'sensors': {}}, 'no sensors'),
        ({'frames': {}}, 'base_frame and sensors'),
        ({'sensors': {'camera': {}}, 'extra': 1}, "unknown keys ['extra']"),
    ],
)
def test_a_bad_file_is_refused_naming_what_is_wrong(doc: object, named: str) -> None:
    with pytest.raises(calibration.CalibrationError, match=r'cal\.yaml') as err:
        calibration.parse(doc, 'cal.yaml')
    assert named in str(err.value)


def test_the_fusion_takes_a_turned_or_pitched_camera_and_refuses_a_rolled_one() -> None:
    cal = calibration.parse({'sensors': {'camera': {'x': 1.8, 'y': 0.3, 'z': 1.4, 'yaw': 0.035}}})
    got = calibration.fusion_mounting(cal)
    assert (got['camera_y'], got['camera_yaw']) == (0.3, 0.035)
    cal = calibration.parse({'sensors': {'camera': {'x': 1.8, 'z': 1.4, 'pitch': 0.02}}})
    assert calibration.fusion_mounting(cal)['camera_pitch'] == 0.02
    cal = calibration.parse({'sensors': {'camera': {'x': 1.8, 'z': 1.4, 'roll': 0.01}}})
    with pytest.raises(calibration.CalibrationError, match=r'sensors.camera.roll = 0.01'):
        calibration.fusion_mounting(cal)
    # A turned IMU is taken (its samples turned into base_link); its place is free.
    cal = calibration.parse({'sensors': {'imu': {'z': 0.3, 'roll': 0.1, 'yaw': 1.5}}})
    assert calibration.fusion_mounting(cal) == {'imu_roll': 0.1, 'imu_pitch': 0.0, 'imu_yaw': 1.5}


def test_an_imu_mounted_turned_reads_base_link_s_motion_once_turned_back() -> None:
    """An IMU yawed 90° and rolled 180° (upside down): base_link's turn rate about z and its
    forward acceleration, as the IMU measures them, come back as base_link's."""
    import numpy as np  # noqa: PLC0415

    p = FusionParams(imu_roll=math.pi, imu_yaw=math.pi / 2)
    r = p.imu_matrix()
    assert r is not None and FusionParams().imu_matrix() is None
    gyro_base, accel_base = np.array([0.0, 0.0, 0.3]), np.array([2.0, 0.0, 9.81])
    # What the IMU reads: base_link's vectors in the IMU's axes (R^T).
    gyro_imu, accel_imu = r.T @ gyro_base, r.T @ accel_base
    assert gyro_imu[2] == pytest.approx(-0.3)  # upside down: the turn reads negative
    assert r @ gyro_imu == pytest.approx(gyro_base) and r @ accel_imu == pytest.approx(accel_base)


def test_the_scenario_calibration_is_the_generator_s_rig_and_the_fusion_s_defaults() -> None:
    cal = calibration.load(SCENARIO)
    cam, radar = cal.mounting('camera'), cal.mounting('radar')
    assert (cam.x, cam.y, cam.z) == sensors.CAMERA_POS
    assert (radar.x, radar.y, radar.z) == sensors.RADAR_POS
    defaults = FusionParams()
    for name, value in calibration.fusion_mounting(cal).items():
        assert getattr(defaults, name) == value, name


def test_the_vehicle_s_fusion_takes_its_mountings_from_the_calibration_file_alone() -> None:
    """One source: the fusion and the calibration node (/tf_static) read the same file, and
    the parameter file repeats none of its mountings."""
    config = yaml.safe_load((ROOT / 'config' / 'vehicle.yaml').read_text())
    fusion = config['fusion']['ros__parameters']
    assert fusion['calibration'] == config['calibration']['ros__parameters']['calibration']
    assert (ROOT / fusion['calibration']).resolve() == VEHICLE.resolve()
    mounted = set(calibration.fusion_mounting(calibration.load(VEHICLE)))
    repeated = mounted & set(fusion.get('fusion', {}))
    assert mounted and not repeated, repeated
