"""A closed-loop scene for the planner (test helper).

The ego follows the planner's latest trajectory (``/planner/out/trajectory``) exactly, or drives
straight on at ``--speed`` until the first one arrives; one car stands still in the ego's lane
``--car-x`` metres ahead (``--emergency``: reported as an emergency vehicle). Publishes
nav_msgs/Odometry at 50 Hz on ``/scene/odometry`` and the car as an ObjectArray at 10 Hz on
``/scene/objects`` (vehicle frame, velocity over ground, as the fusion node publishes it). Motion
starts once the planner is heard (``READY`` is printed then); at the end it prints
``RESULT {json}``: the ego's final x, y and speed, the closest gap between the two outlines
(negative: they touched), its largest lateral offset, the trajectories' statuses and point
counts.

  python -m tests.nodes.scene_publisher --speed 10 --car-x 40 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import rclpy
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rt_fusion_msgs.msg import Object, ObjectArray, Trajectory

from rt_fusion.ros import compat
from rt_fusion.ros.conversions import ns_to_time, time_to_ns

CAR_LENGTH, CAR_WIDTH = 4.5, 1.9


def _corners(x: float, y: float, yaw: float) -> list[tuple[float, float]]:
    c, s = math.cos(yaw), math.sin(yaw)
    return [
        (x + lx * c - ly * s, y + lx * s + ly * c)
        for lx, ly in (
            (CAR_LENGTH / 2, CAR_WIDTH / 2),
            (CAR_LENGTH / 2, -CAR_WIDTH / 2),
            (-CAR_LENGTH / 2, -CAR_WIDTH / 2),
            (-CAR_LENGTH / 2, CAR_WIDTH / 2),
        )
    ]


def _point_segment(
    p: tuple[float, float], a: tuple[float, float], b: tuple[float, float]
) -> float:
    ax, ay = b[0] - a[0], b[1] - a[1]
    t = max(0.0, min(1.0, ((p[0] - a[0]) * ax + (p[1] - a[1]) * ay) / (ax * ax + ay * ay)))
    return math.hypot(p[0] - a[0] - t * ax, p[1] - a[1] - t * ay)


def _overlap(pa: list[tuple[float, float]], pb: list[tuple[float, float]]) -> bool:
    """Separating axes for two convex quads."""
    for poly in (pa, pb):
        for i in range(4):
            ex, ey = poly[(i + 1) % 4][0] - poly[i][0], poly[(i + 1) % 4][1] - poly[i][1]
            a = [-ey * x + ex * y for x, y in pa]
            b = [-ey * x + ex * y for x, y in pb]
            if max(a) < min(b) or max(b) < min(a):
                return False
    return True


def _gap(ex: float, ey: float, eyaw: float, cx: float, cy: float) -> float:
    """Distance between the ego's and the car's outlines (negative: they overlap)."""
    pa, pb = _corners(ex, ey, eyaw), _corners(cx, cy, 0.0)
    if _overlap(pa, pb):
        return -1.0
    return min(
        min(_point_segment(p, q[i], q[(i + 1) % 4]) for p in r for i in range(4))
        for r, q in ((pa, pb), (pb, pa))
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--speed', type=float, default=10.0)
    parser.add_argument('--car-x', type=float, default=40.0)
    parser.add_argument('--seconds', type=float, default=8.0)
    parser.add_argument('--wait', type=float, default=30.0, help='for the planner, seconds')
    parser.add_argument(
        '--emergency', action='store_true', help='report the car as an emergency vehicle'
    )
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node('scene')
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    odom_pub = node.create_publisher(Odometry, '/scene/odometry', qos_profile_sensor_data)
    obj_pub = node.create_publisher(ObjectArray, '/scene/objects', reliable)
    latest: list[Trajectory] = []
    node.create_subscription(Trajectory, '/planner/out/trajectory', latest.append, reliable)
    deadline = time.monotonic() + args.wait
    while not latest and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    print('READY', flush=True)
    x, y, yaw, v = 0.0, 0.0, 0.0, args.speed
    followed, min_gap, max_abs_y = 0, math.inf, 0.0
    statuses: dict[int, int] = {}
    lengths: set[int] = set()
    traj: Trajectory | None = None
    start = last = time.monotonic()
    k = 0
    while time.monotonic() - start < args.seconds:
        rclpy.spin_once(node, timeout_sec=0.0)
        now_mono = time.monotonic()
        now = time.time_ns()
        for t in latest:
            statuses[t.status] = statuses.get(t.status, 0) + 1
            if t.points:
                lengths.add(len(t.points))
                traj = t  # the newest one with points is followed until a newer one comes
        latest.clear()
        if traj is not None:
            pts = traj.points
            tt = (now - time_to_ns(traj.header.stamp)) / 1e9 + pts[0].t
            ts = np.array([p.t for p in pts])
            x, y, v = (
                float(np.interp(tt, ts, [getattr(p, f) for p in pts])) for f in ('x', 'y', 'v')
            )
            yaw = float(np.interp(tt, ts, np.unwrap([p.yaw for p in pts])))
            followed += 1
        else:
            x += v * math.cos(yaw) * (now_mono - last)
            y += v * math.sin(yaw) * (now_mono - last)
        last = now_mono
        min_gap = min(min_gap, _gap(x, y, yaw, args.car_x, 0.0))
        max_abs_y = max(max_abs_y, abs(y))
        odom = Odometry()
        odom.header.stamp = ns_to_time(now)
        odom.header.frame_id = 'map'
        odom.pose.pose.position.x, odom.pose.pose.position.y = x, y
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = (
            math.sin(yaw / 2),
            math.cos(yaw / 2),
        )
        odom.twist.twist.linear.x = v
        odom_pub.publish(odom)
        if k % 5 == 0:
            arr = ObjectArray()
            arr.header.stamp = ns_to_time(now)
            arr.header.frame_id = 'base_link'
            cls = Object.CLASS_EMERGENCY_VEHICLE if args.emergency else Object.CLASS_CAR
            car = Object(id=1, object_class=cls, class_probability=0.95)
            c, s = math.cos(yaw), math.sin(yaw)
            car.position.x = c * (args.car_x - x) + s * (0.0 - y)
            car.position.y = -s * (args.car_x - x) + c * (0.0 - y)
            car.yaw = -yaw
            car.size.x, car.size.y, car.size.z = CAR_LENGTH, CAR_WIDTH, 1.5
            car.velocity.x = car.velocity.y = 0.0  # over ground (Object.msg): it stands still
            arr.objects = [car]
            obj_pub.publish(arr)
        k += 1
        time.sleep(0.02)  # paced: the scene is published at 50 Hz
    print(
        'RESULT '
        + json.dumps(
            {
                'final_x': x,
                'final_y': y,
                'final_v': v,
                'min_gap': min_gap,
                'max_abs_y': max_abs_y,
                'followed': followed,
                'statuses': statuses,
                'points': sorted(lengths),
            }
        ),
        flush=True,
    )
    node.destroy_node()
    compat.try_shutdown()


if __name__ == '__main__':
    main()
