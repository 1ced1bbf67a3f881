"""fusion_node's parameters, in their groups (one table: the node declares from it, a parameter
file is checked against it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rt_fusion.core import calibration, params, realtime
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import FusionParams
from rt_fusion.core.params import param
from rt_fusion.core.perception.hearing import HearingParams
from rt_fusion.core.perception.tracker import TrackerParams
from rt_fusion.core.sync import SyncParams
from rt_fusion.ros import parameters, share


@dataclasses.dataclass(frozen=True)
class FusionNodeParams:
    """Parameters of fusion_node (sync.*, fusion.*, rt.* come separately)."""

    model: str = param(
        "model spec YAML (relative: to the package's share or the repository)",
        default='models/rtf_centernet.yaml',
    )
    backend: str = param(
        'inference backend',
        default='onnxruntime',
        choices=('onnxruntime', 'torch', 'tensorrt', 'none', 'recorded'),
    )
    recorded_outputs: str = param(
        'backend recorded: the .npz of network outputs it replays in order, in place of the '
        'network (tools/bench_fusion_node.py: the node timed without the network)',
        default='',
    )
    device: str = param('cpu, cuda or cuda:N', default='cpu')
    threads: int = param(
        'CPU threads of the backend (0: its default; always 1 on the CPU with rt.rt_priority > 0)',
        default=0,
        low=0,
    )
    device_decode: bool = param(
        'on CUDA (torch backend), reduce a centernet head to its peaks inside the CUDA graph: '
        'a few KB to the host instead of the whole head (false: the whole head, decoded by numpy)',
        default=True,
    )
    zoom: float = param(
        'also run the network on the centre of each frame zoomed this many times over the full '
        'view (far objects at more pixels; 1: off). Costs a second inference per frame; a frame '
        'too small for it (the crop would be upsampled) runs without, and the log says so',
        default=1.0,
        low=1.0,
        high=4.0,
    )
    mirror: bool = param(
        'also run the network on each view mirrored left to right and average the two depths '
        'of each object (rt_fusion.core.perception.mirror; a second inference per view; off: '
        'no gain measured on the scenarios)',
        default=False,
    )
    infer_period_s: float = param(
        'run the network at most this often, by frame stamps (0: every frame); the frames '
        'between are fused without camera detections (a detector slower than the camera then '
        'degrades the camera rate instead of the latency)',
        unit='s',
        default=0.0,
        low=0.0,
    )
    inference: str = param(
        'beside: the network runs on a thread of its own (rt_fusion.ros.fusion.lane) beside the '
        'fusion, one frame at a time; every frame is fused and published at once, the frames '
        'that come while the network is busy without it, and the detections go into the '
        "tracker at their frame's time when ready (the tracks as if in order; the outputs lag "
        'the camera by the inference). inline: on the fusion thread, each inferred frame out '
        'with its own detections, the frames behind it waiting',
        default='beside',
        choices=('beside', 'inline'),
    )
    infer_when_behind: bool = param(
        'false: a frame with newer frames already released behind it is fused without the '
        "network (the node is behind: the backlog goes through at the fusion's own cost, the "
        'newest frame gets the network). A detector too slow for the machine then lowers the '
        'detection rate instead of queueing frames until the queue bound drops them; counted '
        '(inference_skipped_behind)',
        default=False,
    )
    serialized_objects: bool = param(
        '~/out/objects written as CDR bytes from columns (rt_fusion.ros.fusion.cdr) and '
        'published serialized; false: a message object built object by object (the same bytes; '
        'tools/bench_fusion_node.py compares the two)',
        default=True,
    )
    camera_transport: str = param(
        'auto: the shared-memory ring (zero copy) where it is reachable, else the full '
        'sensor_msgs/Image by itself (a camera on another computer: detected, logged); shm: the '
        'ring only; ros: the full message only (the conventional path, for comparison)',
        default='auto',
        choices=('auto', 'shm', 'ros'),
    )
    camera_fast_path: bool = param(
        'take frames from the ring futex, not the rclpy callback', default=True
    )
    base_frame: str = param('frame of the objects', default='base_link')
    odom_frame: str = param('frame of the dead-reckoned odometry', default='odom')
    publish_tf: bool = param(
        'also publish the odometry as odom -> base_link on /tf (REP-105; off where another '
        'node, a localisation, owns that transform)',
        default=True,
    )
    poll_period_s: float = param(
        'how often waiting frames are re-checked', unit='s', default=0.005, low=0.0005, high=0.1
    )
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)
    radar_type: str = param(
        "~/in/radar's type: objects (rt_fusion_msgs/RadarObjects, radar_node's) or tracks "
        "(radar_msgs/RadarTracks, a third-party driver's or radar_node's ~/out/tracks)",
        default='objects',
        choices=('objects', 'tracks'),
    )
    calibration: str = param(
        "the vehicle's calibration YAML (rt_fusion.core.calibration; relative: as model): the "
        "radar's and camera's mountings come from it, over fusion.radar_* and fusion.camera_* "
        "('': those parameters)",
        default='',
    )
    intrinsics: str = param(
        "the front camera's intrinsics and lens: camera_info (~/in/camera_info, the camera's "
        'calibration, scaled to the model input; fusion.fx ... until the first arrives) or '
        'parameters (fusion.fx, fusion.fy, fusion.cx, fusion.cy, fusion.distortion alone)',
        default='camera_info',
        choices=('camera_info', 'parameters'),
    )
    speed_type: str = param(
        "~/in/speed's type: twist (geometry_msgs/TwistStamped, twist.linear.x; its stamp aligns "
        'it with the frames) or float64 (std_msgs/Float64 without a stamp, applied as it '
        'arrives: older bags and gateways)',
        default='twist',
        choices=('twist', 'float64'),
    )
    radar_input: bool = param(
        'fuse the radar (false: its scans are received and ignored, the camera-only ablation; '
        'leave radar out of sync.wait_for then)',
        default=True,
    )
    hearing_model: str = param(
        "hearing model spec YAML for ~/in/audio ('': no hearing; relative: as model)",
        default='models/rtf_hearing.yaml',
    )
    cameras: tuple[str, ...] = param(
        'extra cameras beside ~/in/camera (the anchor of the alignment): the frames of each on '
        '~/in/camera_<name> (a ShmPublisher stream), mounted as fusion.extra_camera_* say (in '
        'this order); each anchor frame takes the frame of the same time (camera_match_s) of '
        'every extra camera, waiting at most sync.max_wait_s for it, and runs the network on it',
        default=(),
    )
    camera_match_s: float = param(
        "an extra camera's frame belongs to the anchor frame within this of its stamp (the "
        'cameras of a rig are triggered together)',
        unit='s',
        default=0.01,
        low=0.0,
        high=0.1,
    )
    ack_topic: str = param(
        'lock-step replays: after each input is taken in (a frame: once its objects are out, '
        "or it was dropped) publish std_msgs/UInt64 here, for replay_node's ack_topic ('': off)",
        default='',
    )


@dataclasses.dataclass(frozen=True)
class DetectorParams:
    """The camera detector's live settings (``ros2 param set /fusion detector.*``)."""

    score_threshold: float = param(
        "camera detections scoring below this are dropped (-1: the model's own, its spec's "
        'decoder.score_threshold)',
        default=-1.0,
        low=-1.0,
        high=1.0,
    )


#: (parameter dataclass, name prefix) of every group fusion_node declares.
PARAM_GROUPS: tuple[tuple[type, str], ...] = (
    (FusionNodeParams, ''),
    (SyncParams, 'sync.'),
    (FusionParams, 'fusion.'),
    (TrackerParams, 'tracker.'),
    (realtime.RealtimeParams, 'rt.'),
    (HearingParams, 'hearing.'),
    (DetectorParams, 'detector.'),
)
#: The groups ``ros2 param set`` changes while the node runs (the rest are read-only).
LIVE = ('tracker.', 'detector.', 'hearing.')


def with_calibration(node: Any, fusion: FusionParams, p: FusionNodeParams) -> FusionParams:
    """``fusion`` with the mountings of the calibration file ``p.calibration`` ('': as it is);
    says on ``node`` which calibration values are left on the generated scenarios' defaults
    (neither in the parameter file nor in the calibration file nor, with ``intrinsics:
    camera_info``, the camera's CameraInfo).

    Raises:
        ParameterError: the file cannot be read or used (as ``calibration``), or a mounting
            breaks a rule of the fusion's parameters (by its name).
    """
    mounting: dict[str, float] = {}
    if p.calibration:
        resolved = share.resolve_share(p.calibration)
        try:
            mounting = calibration.fusion_mounting(calibration.load(resolved))
        except calibration.CalibrationError as err:
            raise ParameterError('calibration', str(resolved), str(err)) from err
    covered = set(mounting)
    if p.intrinsics == 'camera_info':
        covered |= {'fx', 'fy', 'cx', 'cy', 'distortion'}
    parameters.warn_uncalibrated(node, FusionParams, 'fusion.', covered)
    out = params.build(FusionParams, {**dataclasses.asdict(fusion), **mounting})
    heights = {'camera': out.camera_height}
    heights.update(zip(p.cameras, out.extra_camera_height, strict=False))
    away = [f'{n} {h:g} m' for n, h in heights.items() if _not_at_trained_height(out, h)]
    if away and p.backend != 'none':
        node.get_logger().info(
            f"cameras placing their detections by the road, not by the detector's depths "
            f'(learned at {out.regressed_depth_height_m:g} m: fusion.regressed_depth_height_m): '
            + ', '.join(away)
        )
    return out


def _not_at_trained_height(f: FusionParams, height: float) -> bool:
    return abs(height - f.regressed_depth_height_m) > f.regressed_depth_height_tolerance_m
