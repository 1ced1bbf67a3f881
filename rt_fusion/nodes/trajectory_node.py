"""trajectory_node: replans a collision-free trajectory at a fixed rate under real-time scheduling.

Inputs: ``~/in/odometry`` (nav_msgs/Odometry: the ego pose in the planning frame and its speed),
``~/in/objects`` (rt_fusion_msgs/ObjectArray, in the vehicle frame; the fusion node's output) and,
until fused objects exist on a vehicle, ``~/in/radar_objects`` (rt_fusion_msgs/RadarObjects).
The reference path comes from the ``waypoints_x`` / ``waypoints_y`` parameters or from
``~/in/path`` (nav_msgs/Path), which replaces it.

Every ``1 / replan_hz`` (and as soon as new objects arrive) it plans with the Frenet planner from
the state of its previous trajectory at the current time (so the plan never jumps), predicting
the objects from their stamp to now, and publishes ``~/out/trajectory``
(rt_fusion_msgs/Trajectory: points, status — ok, comfort_stop, emergency_stop, no_input — and the
solve time) and ``~/out/path`` (nav_msgs/Path, for rviz). Pedestrians get the yield treatment
(their path ahead is kept free).

Real time: at configure, after every allocation, :func:`rt_fusion.core.realtime.apply` sets
SCHED_FIFO, CPU affinity, mlockall and the GC policy from the parameters (the heap and stack are
pre-faulted once active, first on the executor); a
:class:`DeadlineMonitor` measures the loop's lateness and overruns, published in /diagnostics.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any, ClassVar

import numpy as np
from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import Odometry, Path
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.timer import Timer
from rt_fusion_msgs.msg import (
    Lineage,
    Object,
    ObjectArray,
    RadarObjects,
    Trajectory,
    TrajectoryPoint,
)
from visualization_msgs.msg import Marker, MarkerArray

from rt_fusion.core import realtime
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.latency import DIAG_WINDOW, LatencyRecorder, LatencySummary
from rt_fusion.core.params import param
from rt_fusion.core.planning import frenet, obstacles
from rt_fusion.core.planning.ego import EgoPose, PoseHistory
from rt_fusion.core.planning.emergency import EmergencyParams, EmergencyYield
from rt_fusion.core.planning.reference import PathError, ReferencePath
from rt_fusion.ros import lifecycle, parameters, running
from rt_fusion.ros.conversions import ns_to_time, quaternion_yaw, time_to_ns
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics
from rt_fusion.ros.qos import OVERRIDABLE


@dataclasses.dataclass(frozen=True)
class TrajectoryNodeParams:
    """Parameters of trajectory_node (the planner's and the real-time ones come separately)."""

    frame_id: str = param('frame of the trajectory and the path', default='map')
    replan_hz: float = param('replanning rate', unit='Hz', default=20.0, low=1.0, high=200.0)
    waypoints_x: tuple[float, ...] = param('reference path x', unit='m', default=(0.0, 500.0))
    waypoints_y: tuple[float, ...] = param('reference path y', unit='m', default=(0.0, 0.0))
    max_object_age_s: float = param(
        'objects older than this are dropped', unit='s', default=0.5, low=0.0
    )
    odometry_timeout_s: float = param(
        'no odometry for this long: status no_input', unit='s', default=0.5, low=0.01
    )
    pedestrian_growth: float = param(
        'position uncertainty growth of pedestrians', unit='m/s', default=0.5, low=0.0
    )
    yield_to_pedestrians: bool = param('keep the path ahead of pedestrians free', default=True)
    diagnostics_period_s: float = param('diagnostics period', unit='s', default=1.0, low=0.1)
    clock: str = param(
        "wall: replan every 1/replan_hz and on new objects, 'now' from the host clock (the "
        "vehicle); stamps: replan once per object list with 'now' its stamp, as soon as "
        'odometry up to that stamp has arrived (deterministic lock-step replays: '
        'tools/evaluate.py)',
        default='wall',
        choices=('wall', 'stamps'),
    )

    def check(self) -> None:
        """Cross-field rules."""
        if len(self.waypoints_x) != len(self.waypoints_y) or len(self.waypoints_x) < 2:
            raise ParameterError(
                'waypoints_x',
                self.waypoints_x,
                'waypoints_x and waypoints_y need the same length >= 2',
            )


#: The planned path's colour by Trajectory status: ok green, an emergency stop red, others amber.
PLAN_COLOUR = {
    Trajectory.STATUS_OK: (0.1, 0.9, 0.2),
    Trajectory.STATUS_EMERGENCY_STOP: (1.0, 0.1, 0.1),
}


def plan_markers(msg: Trajectory, lifetime_s: float = 0.5) -> MarkerArray:
    """The planned path for RViz (``visualization_msgs/MarkerArray``): a line strip through the
    trajectory's points in its frame, coloured by its status, 0.3 m wide."""
    m = Marker(ns='plan', id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    m.header = msg.header
    m.lifetime.sec, m.lifetime.nanosec = divmod(round(lifetime_s * 1e9), 1_000_000_000)
    m.scale.x = 0.3
    m.color.r, m.color.g, m.color.b = PLAN_COLOUR.get(msg.status, (1.0, 0.7, 0.0))
    m.color.a = 0.9
    m.pose.orientation.w = 1.0
    m.points = [Point(x=pt.x, y=pt.y, z=0.1) for pt in msg.points]
    return MarkerArray(markers=[m])


class TrajectoryNode(lifecycle.DeviceNode):
    """The planning loop; see the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = (
        (TrajectoryNodeParams, ''),
        (frenet.PlannerParams, 'planner.'),
        (EmergencyParams, 'emergency.'),
        (realtime.RealtimeParams, 'rt.'),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('planner', **kwargs)
        self.poses = PoseHistory()
        self.odom_ns = 0  # when odometry last arrived
        self.objects: list[tuple[int, frenet.Obstacle]] = []  # (stamp, obstacle in the map frame)
        self.objects_stamp: Any = None  # builtin_interfaces/Time of the newest object list
        self.lineage = Lineage()  # of the newest object list, planner_received_ns filled in
        self.plan_start_ns = 0
        self.published = 0
        self.last_status = -1
        # planner.plan() alone (what tools/bench_planner.py times) and the whole solve (the
        # message's solve_time_ms: obstacles advanced, start state, plan, message filled).
        self.plan_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.solve_ns = LatencyRecorder(DIAG_WINDOW, wrap=True)
        self.rt_report: realtime.RealtimeReport | None = None
        self.rt_params: realtime.RealtimeParams | None = None
        self._prefault_timer: Timer | None = None
        self.pending: list[ObjectArray] = []  # clock 'stamps': object lists awaiting odometry

    # -- lifecycle -----------------------------------------------------------------------------

    PARAMS = (TrajectoryNodeParams, frenet.PlannerParams, EmergencyParams, realtime.RealtimeParams)

    def configure(self) -> None:
        """Parameters, planner, publishers; then the real-time set-up, last."""
        p = self.params = parameters.declare_params(self, TrajectoryNodeParams)
        self.planner_params = parameters.declare_params(
            self, frenet.PlannerParams, 'planner.', live=True
        )
        # planner.* live: `ros2 param set` takes effect at the next replan (weights, limits)
        parameters.apply_live(
            self,
            {'planner.': (frenet.PlannerParams, lambda new: setattr(self, 'planner_params', new))},
        )
        self.emergency = EmergencyYield(
            parameters.declare_params(self, EmergencyParams, 'emergency.')
        )
        rt = parameters.declare_params(self, realtime.RealtimeParams, 'rt.')
        try:
            path = ReferencePath(np.column_stack((p.waypoints_x, p.waypoints_y)))
        except PathError as err:
            raise ParameterError('waypoints_x', p.waypoints_x, str(err)) from err
        # The planner is compiled by numba (frenet_jit) where it is installed, loaded once the
        # node is up (activate); it plans with its numpy form, the same trajectories, until then.
        frenet.COMPILED.defer()
        self.planner = frenet.FrenetPlanner(path, self.planner_params)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        over = {'qos_overriding_options': OVERRIDABLE}
        self.traj_pub = self.create_lifecycle_publisher(
            Trajectory, '~/out/trajectory', reliable, **over
        )
        self.path_pub = self.create_lifecycle_publisher(Path, '~/out/path', reliable)
        # For RViz and Foxglove beside the fusion's boxes: built only while subscribed.
        self.marker_pub = self.create_lifecycle_publisher(MarkerArray, '~/out/markers', reliable)
        self.diag = NodeDiagnostics(self, 'planner')
        # clock 'stamps' (lock-step replays): every object list and pose counts, none may be
        # overwritten while the planner lags; live ('wall') only the newest matter.
        lossless = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        stamps = p.clock == 'stamps'
        self.create_subscription(
            Odometry,
            '~/in/odometry',
            self._on_odom,
            lossless if stamps else qos_profile_sensor_data,
            **over,
        )
        self.create_subscription(
            ObjectArray, '~/in/objects', self._on_objects, lossless if stamps else reliable, **over
        )
        self.create_subscription(
            RadarObjects, '~/in/radar_objects', self._on_radar, qos_profile_sensor_data
        )
        self.create_subscription(Path, '~/in/path', self._on_path, reliable)
        self.period_ns = round(1e9 / p.replan_hz)
        self.monitor = realtime.DeadlineMonitor(self.period_ns)
        self._msg = Trajectory()
        self._msg.header.frame_id = p.frame_id
        self._points = [TrajectoryPoint() for _ in self.planner.t]
        # Warm the planner (first calls allocate caches), then lock the process down.
        self.planner.plan(frenet.FrenetState(0.0, 5.0, 0.0, 0.0, 0.0, 0.0), [])
        self.planner.previous = None
        self.rt_params = rt
        with parameters.param_prefix('rt.'):
            # The heap and stack are touched once the node is active (_prefault), on the
            # executor's thread that plans: 0.17 s of a VM's start-up otherwise.
            self.rt_report = realtime.apply(rt, prefault_here=False)
        for warning in self.rt_report.warnings:
            self.get_logger().warning(f'real time: {warning}')
        self.get_logger().info(
            f'real time: {self.rt_report.policy} priority {self.rt_report.priority}, CPUs '
            f'{list(self.rt_report.cpus)}, memory locked {self.rt_report.memory_locked}'
        )
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)

    def activate(self) -> None:
        """Starts the replanning timer (clock 'wall'; with 'stamps' object lists drive it)."""
        self._next_ns = time.monotonic_ns()
        # A straight path needs no scipy; a curved route may come later: its spline and KD-tree
        # modules are imported once the node is up (a thread at SCHED_OTHER), not on the
        # route's arrival nor before the node is back.
        realtime.import_in_background(('scipy.interpolate', 'scipy.spatial'))
        frenet.COMPILED.load_in_background(
            frenet.warm_up, lambda work: realtime.start_in_background('numba-planner', work)
        )
        self._prefault_timer = self.create_timer(0.0, self._prefault)
        if self.params.clock == 'wall':
            self.timer = self.create_timer(1.0 / self.params.replan_hz, self._on_tick)

    def _prefault(self) -> None:
        """Once, first on the executor after activation: the planning thread's heap and stack
        (its malloc arena: the main thread's, with the single-threaded executor)."""
        self._cancel_prefault()
        if self.rt_params is not None:
            realtime.prefault(self.rt_params)

    def _cancel_prefault(self) -> None:
        if self._prefault_timer is not None:
            self.destroy_timer(self._prefault_timer)
            self._prefault_timer = None

    def deactivate(self) -> None:
        """Stops replanning."""
        self._cancel_prefault()
        timer = getattr(self, 'timer', None)
        if timer is not None:
            self.destroy_timer(timer)
            del self.timer

    # -- inputs --------------------------------------------------------------------------------

    def _on_odom(self, msg: Odometry) -> None:
        now = time.time_ns()
        pose = msg.pose.pose
        self.poses.add(
            time_to_ns(msg.header.stamp) or now,
            EgoPose(
                pose.position.x,
                pose.position.y,
                quaternion_yaw(pose.orientation),
                float(msg.twist.twist.linear.x),
            ),
        )
        self.odom_ns = now
        if self.pending:
            self._drain()

    def _drain(self) -> None:
        """clock 'stamps': plans for the object lists whose odometry has arrived, in order."""
        latest = self.poses.latest()
        while self.pending and latest is not None:
            if time_to_ns(self.pending[0].header.stamp) > latest[0]:
                return
            self._use_objects(self.pending.pop(0))

    def _ego(self, stamp_ns: int) -> EgoPose | None:
        """The ego pose at ``stamp_ns`` (None without recent odometry)."""
        if self.params.clock == 'stamps':
            latest = self.poses.latest()
            if latest is None or stamp_ns - latest[0] > self.params.odometry_timeout_s * 1e9:
                return None
            return self.poses.at(stamp_ns)
        if (
            not self.odom_ns
            or time.time_ns() - self.odom_ns > self.params.odometry_timeout_s * 1e9
        ):
            return None
        return self.poses.at(stamp_ns)

    def _on_objects(self, msg: ObjectArray) -> None:
        msg.lineage.planner_received_ns = time.time_ns()
        if self.params.clock == 'stamps':
            self.pending.append(msg)
            self._drain()
            return
        self._use_objects(msg)

    def _use_objects(self, msg: ObjectArray) -> None:
        # Transformed with the ego pose at the detections' stamp, not the latest one.
        stamp = time_to_ns(msg.header.stamp)
        ego = self._ego(stamp)
        if ego is None:
            return
        p = self.params
        out = [
            (
                stamp,
                obstacles.from_track(
                    o.position.x,
                    o.position.y,
                    o.yaw,
                    o.velocity.x,  # over ground (Object.msg)
                    o.velocity.y,
                    o.size.x,
                    o.size.y,
                    float(o.yaw_rate),
                    float(o.position_std),
                    ego,
                    pedestrian=o.object_class == Object.CLASS_PEDESTRIAN,
                    pedestrian_growth=p.pedestrian_growth,
                    yield_to_pedestrians=p.yield_to_pedestrians,
                ),
            )
            for o in msg.objects
        ]
        self.objects = out
        self.objects_stamp = msg.header.stamp
        self.lineage = msg.lineage
        self.emergency.report(
            stamp,
            [
                o.class_probability
                for o in msg.objects
                if o.object_class == Object.CLASS_EMERGENCY_VEHICLE
            ],
        )
        self._on_timer(event=True, now_ns=stamp if self.params.clock == 'stamps' else None)

    def _on_radar(self, msg: RadarObjects) -> None:
        stamp = time_to_ns(msg.header.stamp)
        ego = self._ego(stamp)
        if ego is None:
            return
        out = [
            (
                stamp,
                obstacles.from_radar(
                    o.position.x,
                    o.position.y,
                    o.orientation,
                    o.velocity.x,
                    o.velocity.y,
                    o.length,
                    o.width,
                    ego,
                ),
            )
            for o in msg.objects
        ]
        self.objects = out
        self.objects_stamp = msg.header.stamp
        self.lineage = Lineage(capture_ns=stamp, planner_received_ns=time.time_ns())
        self._on_timer(event=True)

    def _on_path(self, msg: Path) -> None:
        pts = [(ps.pose.position.x, ps.pose.position.y) for ps in msg.poses]
        try:
            path = ReferencePath(np.array(pts))
        except PathError as err:
            self.get_logger().error(f'~/in/path rejected: {err}')
            return
        self.planner = frenet.FrenetPlanner(path, self.planner_params)

    # -- the loop ------------------------------------------------------------------------------

    def _on_tick(self) -> None:
        # A separate method: rclpy hands a TimerInfo to timer callbacks that take an argument.
        self._on_timer(event=False)

    def _on_timer(self, event: bool, now_ns: int | None = None) -> None:
        now_mono = time.monotonic_ns()
        if not event:
            scheduled = self._next_ns
            self._next_ns += self.period_ns
            if now_mono - self._next_ns > self.period_ns:  # far behind: resynchronise
                self._next_ns = now_mono + self.period_ns
            self.monitor.start(scheduled, now_mono)
        now = time.time_ns() if now_ns is None else now_ns
        ego = self._ego(now)
        msg = self._msg
        msg.header.stamp = ns_to_time(now)
        t0 = time.perf_counter_ns()
        if ego is None:
            msg.status = Trajectory.STATUS_NO_INPUT
            msg.points = []
        else:
            fresh = [
                (s, o) for s, o in self.objects if now - s <= self.params.max_object_age_s * 1e9
            ]
            moved = [obstacles.advance(o, (now - s) / 1e9) for s, o in fresh]
            since = (now - self.plan_start_ns) / 1e9
            start = self.planner.start_state(since, ego.x, ego.y, ego.v)
            self.planner.p = self.emergency.goal(self.planner_params, now)  # yield, or cruise
            t_plan = time.perf_counter_ns()
            traj = self.planner.plan(start, moved)
            self.plan_ns.record(time.perf_counter_ns() - t_plan)
            self.plan_start_ns = now
            self._fill(msg, traj)
        solve_ns = time.perf_counter_ns() - t0
        if ego is not None:
            self.solve_ns.record(solve_ns)
        msg.solve_time_ms = solve_ns / 1e6
        lineage = self.lineage
        lineage.planner_solved_ns = time.time_ns()
        if self.objects_stamp is not None:
            msg.objects_stamp = self.objects_stamp
        msg.published_ns = lineage.planner_published_ns = time.time_ns()
        msg.lineage = lineage
        self.traj_pub.publish(msg)
        if msg.points:
            self.path_pub.publish(self._path(msg))
            if self.marker_pub.get_subscription_count():
                self.marker_pub.publish(plan_markers(msg))
        self.published += 1
        self.last_status = msg.status
        if not event:
            self.monitor.finish(time.monotonic_ns())
            realtime.collect_at_safe_point()

    def _fill(self, msg: Trajectory, traj: frenet.Trajectory) -> None:
        # Whole arrays to Python floats at once (tolist), not element by element; the points
        # list is handed to the message again only when it was swapped out (rclpy's setter
        # checks every element's type on each assignment).
        columns = (traj.t, traj.x, traj.y, traj.yaw, traj.v, traj.a, traj.kappa)
        for pt, t, x, y, yaw, v, a, k in zip(
            self._points, *(c.tolist() for c in columns), strict=True
        ):
            pt.t, pt.x, pt.y, pt.yaw, pt.v, pt.a, pt.curvature = t, x, y, yaw, v, a, k
        if msg.points is not self._points:
            msg.points = self._points
        msg.status = traj.status
        msg.candidates, msg.collision_checks = traj.candidates, traj.collision_checks
        msg.cost = float(traj.cost) if math.isfinite(traj.cost) else -1.0
        msg.target_offset, msg.target_speed = traj.target_offset, traj.target_speed

    def _path(self, msg: Trajectory) -> Path:
        path = Path()
        path.header = msg.header
        for pt in msg.points:
            ps = PoseStamped()
            ps.header = msg.header
            ps.pose.position.x, ps.pose.position.y = pt.x, pt.y
            ps.pose.orientation.z, ps.pose.orientation.w = (
                math.sin(pt.yaw / 2),
                math.cos(pt.yaw / 2),
            )
            path.poses.append(ps)
        return path

    def _publish_diagnostics(self) -> None:
        m = self.monitor.summary()
        late, run = m['lateness'], m['runtime']
        assert isinstance(late, realtime.LatencySummary)
        assert isinstance(run, realtime.LatencySummary)
        rt = self.rt_report
        overruns = int(m['overruns'])  # type: ignore[arg-type]
        level = Level.WARN if overruns or (rt and rt.warnings) else Level.OK
        message = f'{overruns} deadline overruns' if overruns else 'planning on time'
        values = {
            'status': ('ok', 'comfort_stop', 'emergency_stop', 'no_input')[self.last_status]
            if self.last_status >= 0
            else '',
            'iterations': m['iterations'],
            'planner': self.planner.kind,
            'yielding_to_emergency': self.emergency.yielding,
            'emergency_episodes': self.emergency.episodes,
            'emergency_unconfirmed': self.emergency.unconfirmed,
            'overruns': overruns,
            'lateness_p99_us': round(late.p99_us, 1) if late.count else '',
            'lateness_max_us': round(late.max_us, 1) if late.count else '',
            'runtime_p99_us': round(run.p99_us, 1) if run.count else '',
            **_percentiles('plan', self.plan_ns.summary()),
            **_percentiles('solve', self.solve_ns.summary()),
            'policy': rt.policy if rt else '',
            'priority': rt.priority if rt else '',
            'cpus': ','.join(map(str, rt.cpus)) if rt else '',
            'memory_locked': rt.memory_locked if rt else '',
            'rt_warnings': '; '.join(rt.warnings) if rt else '',
            'non_finite_poses': self.poses.non_finite,  # NaN/inf refused by the core
            'non_finite_obstacles': self.planner.non_finite,
        }
        self.diag.publish(level, message, values)


def _percentiles(name: str, s: LatencySummary) -> dict[str, object]:
    if not s.count:
        return {f'{name}_p50_us': '', f'{name}_p99_us': ''}
    return {f'{name}_p50_us': round(s.p50_us, 1), f'{name}_p99_us': round(s.p99_us, 1)}


def main(args: list[str] | None = None) -> int:
    """Entry point of ``trajectory_node``."""
    return running.run(TrajectoryNode, args)


if __name__ == '__main__':
    sys.exit(main())
