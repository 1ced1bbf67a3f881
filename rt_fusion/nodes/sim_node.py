"""sim_node: a scenario simulated in closed loop with the graph: the planner drives the ego.

The scenario's sensors (:mod:`rt_fusion.core.scenario`: camera frames into a shared-memory ring
as camera_node does, radar objects, IMU, microphone, vehicle speed) are rendered and published
in time order, **lock-step** like ``replay_node mode:=lockstep``: each message waits for the
fusion node's acknowledgement on ``ack_topic``. The trajectories on ``~/in/trajectory`` drive the
ego (:mod:`rt_fusion.core.scenario.closed_loop`): the plan answering the frame at t takes effect
at t + ``actuation_delay_s``, and before the ego is moved past that time the simulator waits for
it (``plan_timeout_s``). Every message is therefore rendered from the same ego motion on any
machine: a run is deterministic while no acknowledgement or plan times out.

At the end it writes ``out/ground_truth.json`` (the generator's format, with the ego as it was
driven) and prints ``SIMULATED <messages> ack_timeouts=… plan_timeouts=… plans=… frames=…``.

    ros2 launch rt_fusion sim.launch.py scenario:=stopped_car seconds:=8 out:=/tmp/sim
"""

from __future__ import annotations

import dataclasses
import heapq
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Path as PathMsg
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rt_fusion_msgs.msg import Trajectory
from std_msgs.msg import UInt64

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param
from rt_fusion.core.scenario import library
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.bagout import typestore
from rt_fusion.core.scenario.closed_loop import DriveParams, Plan, drive
from rt_fusion.core.scenario.generate import CAMERA_HZ, T0_NS, sensor_streams, write_truth
from rt_fusion.core.scenario.world import ScenarioError, build_world
from rt_fusion.ros import compat, graph, lifecycle, parameters, running, share, waiting
from rt_fusion.ros.conversions import message_class, ns_to_time, time_to_ns
from rt_fusion.ros.shm_transport import ShmPublisher, segment_name

CAMERA = graph.CAMERA_TOPIC
# What the fusion node takes in (and acknowledges), published on the topics the generator's
# streams are named after.
TYPES = {
    graph.RADAR_TOPIC: 'rt_fusion_msgs/msg/RadarObjects',
    graph.IMU_TOPIC: 'sensor_msgs/msg/Imu',
    graph.SPEED_TOPIC: 'geometry_msgs/msg/TwistStamped',
    graph.AUDIO_TOPIC: 'rt_fusion_msgs/msg/AudioChunk',
    graph.CAMERA_INFO_TOPIC: 'sensor_msgs/msg/CameraInfo',  # the fusion's intrinsics
}


@dataclasses.dataclass(frozen=True)
class SimParams:
    """Parameters of sim_node."""

    scenario: str = param('built-in scenario name (config/scenarios) or a scenario YAML path')
    seed: int = param('seed of the sensor noise', default=1, low=0)
    seconds: float = param('length of the run', unit='s', default=8.0, low=0.5, high=600.0)
    out: str = param('folder for ground_truth.json and camera_info.yaml', default='')
    audio: bool = param('render and publish the microphone', default=True)
    drive: bool = param(
        "the plans drive the ego (false: the scenario's script does, as in its bag: a check "
        'of the simulator against the replay)',
        default=True,
    )
    clips: str = param("folder of the WAV files the scenario's clip events name", default='')
    ack_topic: str = param('std_msgs/UInt64 acknowledgements of the fusion node', default='~/ack')
    ack_timeout_s: float = param(
        'go on without an acknowledgement after this long', unit='s', default=10.0, low=0.01
    )
    actuation_delay_s: float = param(
        'a plan takes effect this long after the frame it answers (planning and actuation; it '
        "must exceed the sensors' look-ahead, ~0.1 s, or the run waits for plans it cannot get)",
        unit='s',
        default=0.2,
        low=0.12,
        high=2.0,
    )
    plan_timeout_s: float = param(
        'go on with the previous plan when the one due has not come after this long',
        unit='s',
        default=10.0,
        low=0.01,
    )
    max_accel: float = param("the ego's acceleration limit", unit='m/s²', default=4.0, low=0.1)
    max_decel: float = param("the ego's braking limit", unit='m/s²', default=9.0, low=0.1)
    max_jerk: float = param(
        "how fast the ego's acceleration may change (powertrain, brakes)",
        unit='m/s³',
        default=20.0,
        low=0.1,
    )
    max_yaw_rate: float = param(
        "the ego's heading rate limit relative to the lane", unit='rad/s', default=0.5, low=0.01
    )
    wait_subscribers_s: float = param(
        'wait up to this long until every topic has a subscriber', unit='s', default=30.0, low=0.0
    )
    start_topic: str = param(
        'wait for a std_msgs/UInt64 here (reliable, transient local) before the first message '
        "('': do not wait)",
        default='',
    )
    start_timeout_s: float = param(
        'start anyway after this long without a start signal', unit='s', default=120.0, low=0.0
    )
    shm_slots: int = param('slots of the camera ring', default=16, low=2, high=256)
    route: bool = param(
        "publish the ego's lane as the planner's route on /route/path (nav_msgs/Path, odom "
        'frame: the fusion starts its odom frame where the ego starts) before the first message',
        default=True,
    )


class SimNode(lifecycle.DeviceNode):
    """A closed-loop scenario; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((SimParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('sim', **kwargs)
        self.finished: Any = None
        self._stop = threading.Event()
        self._acked = threading.Event()
        self._start = threading.Event()
        self._plans = threading.Condition()
        self._received: dict[int, Plan] = {}  # objects stamp [ns] -> plan
        self._thread: threading.Thread | None = None
        self.shm: ShmPublisher | None = None
        self.sent = self.ack_timeouts = self.plan_timeouts = self.frames = 0
        self._skipped = 0  # frames with no plan of their own (not fused, or timed out)
        self.applied: list[int] = []  # frames whose plan drives the ego

    def configure(self) -> None:
        """Builds the world and the publishers."""
        from rclpy.task import Future  # noqa: PLC0415

        p = self.params = parameters.declare_params(self, SimParams)
        try:
            scenario = library.load(p.scenario, share.resolve_share('config/scenarios'))
            self.world = build_world(scenario, p.seconds)
        except ScenarioError as err:
            raise ParameterError('scenario', p.scenario, str(err)) from err
        drive_params = DriveParams(
            actuation_delay_s=p.actuation_delay_s,
            max_accel=p.max_accel,
            max_decel=p.max_decel,
            max_jerk=p.max_jerk,
            max_yaw_rate=p.max_yaw_rate,
        )
        self.script = self.world.ego
        self.ego = drive(self.world, drive_params, self._need_plans)
        if not p.drive:
            self.world.ego = self.script  # plans are received and counted, not applied
        self.ts = typestore()
        self.cam = sm.CameraModel()
        self.finished = Future()
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.pubs: dict[str, Any] = {}
        for name, typename in TYPES.items():
            if name == graph.AUDIO_TOPIC and not p.audio:
                continue
            # Keyed by the generator's (root-namespace) name, published relative to this node.
            self.pubs[graph.bag_topic(name)] = self.create_publisher(
                message_class(typename), name, reliable
            )
        self.shm = ShmPublisher(
            self,
            CAMERA,
            segment_name(self, CAMERA),
            self.cam.width * self.cam.height * 3,
            p.shm_slots,
            frame_id='camera',
        )
        self.ack_sub = self.create_subscription(
            UInt64, p.ack_topic, lambda _m: self._acked.set(), reliable
        )
        self.route_pub = self.create_publisher(PathMsg, graph.ROUTE_TOPIC, reliable)
        self.create_subscription(Trajectory, '~/in/trajectory', self._on_plan, reliable)
        if p.start_topic:
            latched = QoSProfile(
                depth=1,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            self.create_subscription(UInt64, p.start_topic, lambda _m: self._start.set(), latched)

    def activate(self) -> None:
        """Starts the simulation thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name='sim', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the simulation thread."""
        self._stop.set()
        self._acked.set()
        with self._plans:
            self._plans.notify_all()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def cleanup(self) -> None:
        """Removes the camera ring."""
        if self.shm is not None:
            self.shm.close()
            self.shm = None

    # -- plans ---------------------------------------------------------------------------------

    def _on_plan(self, msg: Trajectory) -> None:
        if len(msg.points) < 2:
            return  # no input yet (STATUS_NO_INPUT): nothing to drive with
        stamp_s = (time_to_ns(msg.header.stamp) - T0_NS) / 1e9
        with self._plans:
            self._received[time_to_ns(msg.objects_stamp)] = Plan.from_points(stamp_s, msg.points)
            self._plans.notify_all()

    def _need_plans(self, t: float) -> None:
        """Before the ego moves past t: the plans of the frames due by then, in frame order."""
        p = self.params
        assert p is not None
        while True:
            k = len(self.applied) + self._skipped
            if k >= self.frames or k / CAMERA_HZ + p.actuation_delay_s > t:
                return  # not published yet, or not due yet
            stamp = T0_NS + round(k / CAMERA_HZ * 1e9)
            end = time.monotonic() + p.plan_timeout_s
            with self._plans:
                # The plan answering frame k, or a later one (frame k was not fused).
                while not any(s >= stamp for s in self._received) and not self._stop.is_set():
                    if not self._plans.wait(max(0.0, end - time.monotonic())):
                        break
                plan = self._received.get(stamp)
                later = any(s > stamp for s in self._received)
            if plan is not None:
                if p.drive:
                    self.ego.add_plan(plan)
                self.applied.append(k)
            else:
                self._skipped += 1
                if not later and not self._stop.is_set():
                    self.plan_timeouts += 1
                    self.get_logger().warning(
                        f'no plan for frame {k} within {p.plan_timeout_s} s: the previous one '
                        'goes on',
                        throttle_duration_sec=5.0,
                    )

    # -- the loop ------------------------------------------------------------------------------

    def _wait_start(self) -> bool:
        p = self.params
        assert p is not None
        assert self.shm is not None
        counts = [pub.get_subscription_count for pub in self.pubs.values()]
        counts.append(self.shm.subscriber_count)
        # an earlier acknowledgement is lost
        counts.append(compat.publisher_counter(self, self.ack_sub))
        if not waiting.wait_to_start(
            self,
            counts,
            p.wait_subscribers_s,
            p.start_topic,
            self._start,
            p.start_timeout_s,
            self._stop,
        ):
            return False
        if p.route:
            has_planner = self.route_pub.get_subscription_count
            if not waiting.wait_until(lambda: has_planner() > 0, p.wait_subscribers_s, self._stop):
                return False
            self.route_pub.publish(self._route())
            self.route_pub.wait_for_all_acked(Duration(seconds=10))
        self.shm.wait_ready(max(p.wait_subscribers_s, 10.0), self._stop)
        return not self._stop.is_set()

    def _route(self) -> PathMsg:
        """The ego's starting lane along the road, every 2 m, from 20 m behind its start to
        300 m beyond where its script ends."""
        script = self.script
        s = np.arange(float(script.s[0]) - 20.0, float(script.s.max()) + 300.0, 2.0)
        x, y, yaw = self.world.road.to_world(s, np.full_like(s, float(script.d[0])))
        msg = PathMsg()
        msg.header.frame_id = 'odom'
        msg.header.stamp = ns_to_time(T0_NS)
        for xi, yi, heading in zip(x, y, yaw, strict=True):
            pose = PoseStamped()
            pose.header = msg.header
            pose.pose.position.x, pose.pose.position.y = float(xi), float(yi)
            pose.pose.orientation.z = float(np.sin(heading / 2))
            pose.pose.orientation.w = float(np.cos(heading / 2))
            msg.poses.append(pose)
        return msg

    def _run(self) -> None:
        p = self.params
        assert p is not None
        assert self.shm is not None
        if not self._wait_start():
            return
        started = time.monotonic()
        streams = sensor_streams(
            self.ts,
            self.world,
            p.seed,
            self.cam,
            True,
            Path(p.clips) if p.clips else None,
            p.audio,
        )
        for _log, _tie, topic, typename, msg in heapq.merge(*streams, key=lambda i: i[:2]):
            if self._stop.is_set():
                return
            if topic == graph.bag_topic(CAMERA):
                ws = self.shm.acquire((self.cam.height, self.cam.width, 3), np.uint8, 'bgr8')
                np.copyto(ws.array, np.asarray(msg.data).reshape(ws.array.shape))
                self._acked.clear()
                self.shm.commit(ws, time_to_ns(msg.header.stamp))
                self.frames += 1
            elif topic in self.pubs:
                self._acked.clear()
                self.pubs[topic].publish(bytes(self.ts.serialize_cdr(msg, typename)))
            else:
                continue  # the IMU's device clock: the fusion does not take it
            self.sent += 1
            if not self._acked.wait(p.ack_timeout_s):
                self.ack_timeouts += 1
                self.get_logger().warning(
                    f'no acknowledgement on {p.ack_topic} within {p.ack_timeout_s} s',
                    throttle_duration_sec=5.0,
                )
        # The rest of the run's ego motion (the last plans), then the truth it makes.
        if p.drive:
            self.ego.ensure(len(self.ego.t) - 1)
        if p.out:
            write_truth(self.world, p.seed, self.cam, Path(p.out))
        self.get_logger().info(
            f'simulated {p.seconds:g} s in {time.monotonic() - started:.1f} s: {self.sent} '
            f'messages, {len(self.applied)} plans applied, {self.plan_timeouts} plan timeouts'
        )
        print(
            f'SIMULATED {self.sent} ack_timeouts={self.ack_timeouts} '
            f'plan_timeouts={self.plan_timeouts} plans={len(self.applied)} frames={self.frames}',
            flush=True,
        )
        if not self.finished.done():
            self.finished.set_result(self.sent)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``sim_node``."""
    return running.run(SimNode, args)


if __name__ == '__main__':
    sys.exit(main())
