"""The fusion node's inputs besides its camera frames: IMU, radar, vehicle speed, microphone and
the camera's CameraInfo (its intrinsics, :class:`CameraInfoInput`), with their QoS. Sensor
streams are best effort live (any driver matches, reliable or not) and reliable in lock-step
replays (``ack_topic``: nothing may be lost); the user's QoS overrides apply to each
(:mod:`rt_fusion.ros.qos`)."""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import TwistStamped
from radar_msgs.msg import RadarTracks
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rt_fusion_msgs.msg import AudioChunk, RadarObjects
from sensor_msgs.msg import CameraInfo, Imu
from std_msgs.msg import Float64

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import model_intrinsics
from rt_fusion.inference.hearing import load_hearing_model
from rt_fusion.inference.spec import ModelError
from rt_fusion.ros import share
from rt_fusion.ros.fusion.params import FusionNodeParams
from rt_fusion.ros.hearing_input import HearingInput
from rt_fusion.ros.qos import OVERRIDABLE


def subscribe(node: Any, p: FusionNodeParams, hearing: Any) -> HearingInput | None:
    """Subscribes the fusion node's ``~/in/imu``, ``~/in/radar``, ``~/in/speed``,
    ``~/in/camera_info`` (``intrinsics: camera_info``: ``node.camera_info``) and ``~/in/audio``
    to its callbacks; returns the hearing (None without a hearing model).

    Raises:
        ParameterError: the hearing model cannot be loaded (its path).
    """
    reliable = ReliabilityPolicy.RELIABLE
    # Best effort matches any IMU driver; lock-step replays lose nothing (reliable).
    imu = ReliabilityPolicy.RELIABLE if p.ack_topic else ReliabilityPolicy.BEST_EFFORT
    over = {'qos_overriding_options': OVERRIDABLE}
    node.create_subscription(
        Imu, '~/in/imu', node._on_imu, QoSProfile(depth=200, reliability=imu), **over
    )
    radar = RadarTracks if p.radar_type == 'tracks' else RadarObjects
    node.create_subscription(radar, '~/in/radar', node._on_radar, qos_profile_sensor_data, **over)
    # Lock-step replays must lose no speed message: a lost one is never acknowledged and the
    # replay stalls for its ack timeout (and the outputs depend on the timing).
    speed_qos = QoSProfile(depth=50, reliability=reliable) if p.ack_topic else None
    speed = TwistStamped if p.speed_type == 'twist' else Float64
    sensor = qos_profile_sensor_data
    node.create_subscription(speed, '~/in/speed', node._on_speed, speed_qos or sensor, **over)
    node.camera_info = CameraInfoInput(node) if p.intrinsics == 'camera_info' else None
    info_qos = QoSProfile(depth=10, reliability=reliable) if p.ack_topic else sensor
    if node.camera_info is not None:
        node.create_subscription(
            CameraInfo, '~/in/camera_info', node.camera_info.on_msg, info_qos, **over
        )
    elif p.ack_topic:  # taken in unused and acknowledged (a lock-step replay waits for it)
        node.create_subscription(CameraInfo, '~/in/camera_info', lambda _m: node._ack(), info_qos)
    if p.hearing_model:
        spec_path = share.resolve_share(p.hearing_model)
        try:
            model = load_hearing_model(spec_path)
        except ModelError as err:
            raise ParameterError('hearing_model', str(spec_path), str(err)) from err
        return HearingInput(
            node, model, hearing, ack=node._ack, topic='~/in/audio',
            events_topic='~/out/audio_events',
        )  # fmt: skip
    if p.ack_topic:
        # No hearing: the blocks are taken in unused and acknowledged (a lock-step replay of
        # a bag with a microphone waits for every message it sends).
        node.create_subscription(
            AudioChunk,
            '~/in/audio',
            lambda _msg: node._ack(),
            QoSProfile(depth=64, reliability=reliable),
        )
    return None


class CameraInfoInput:
    """The front camera's intrinsics from its ``sensor_msgs/CameraInfo`` (the camera node's
    ``~/out/camera_info``, from the camera's calibration file; a bag's): K and D scaled to the
    model input and handed to the fusion core whenever they change. Until the first arrives the
    fusion places detections with ``fusion.fx`` ... (said once); a CameraInfo that is not a
    camera (non-finite, a focal length <= 0, skew) is counted and dropped."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.source = 'parameters (no CameraInfo yet)'
        self._last: tuple[Any, ...] | None = None

    def on_msg(self, msg: CameraInfo) -> None:
        node = self.node
        key = (msg.width, msg.height, tuple(msg.k), tuple(msg.d))
        if key != self._last:
            work = node.work
            input_hw = work.input_hw if work is not None else (384, 640)
            try:
                fx, fy, cx, cy, d = model_intrinsics(
                    msg.k, msg.d, (msg.width, msg.height), input_hw
                )
            except ValueError as err:
                node._reject('camera_info_invalid')
                node.get_logger().warning(str(err), throttle_duration_sec=10.0)
                return
            with node._cond:  # between two frames
                node.engine.set_intrinsics(fx, fy, cx, cy, d)
            self._last = key
            self.source = f'camera_info {msg.width}x{msg.height}'
            node.get_logger().info(
                f'intrinsics from CameraInfo ({msg.width}x{msg.height}): fx {fx:.1f} fy '
                f'{fy:.1f} cx {cx:.1f} cy {cy:.1f} px of the {input_hw[1]}x{input_hw[0]} input'
            )
        node._ack()
