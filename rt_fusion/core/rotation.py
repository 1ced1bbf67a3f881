"""Unit quaternions (w, x, y, z) as plain float tuples: cheap for the few products per frame."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Quat = tuple[float, float, float, float]
IDENTITY: Quat = (1.0, 0.0, 0.0, 0.0)


def mul(a: Quat, b: Quat) -> Quat:
    """Hamilton product a ⊗ b (rotation b, then a, for vectors in the body frame)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def conj(q: Quat) -> Quat:
    """Conjugate (the inverse of a unit quaternion)."""
    return (q[0], -q[1], -q[2], -q[3])


def from_rotvec(rx: float, ry: float, rz: float) -> Quat:
    """Quaternion of a rotation vector [rad] (axis * angle)."""
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    if angle < 1e-12:
        return (1.0, 0.5 * rx, 0.5 * ry, 0.5 * rz)
    s = math.sin(0.5 * angle) / angle
    return (math.cos(0.5 * angle), rx * s, ry * s, rz * s)


def to_rotvec(q: Quat) -> tuple[float, float, float]:
    """Rotation vector [rad] of a unit quaternion (shortest rotation)."""
    w, x, y, z = q
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    n = math.sqrt(x * x + y * y + z * z)
    if n < 1e-12:
        return (2.0 * x, 2.0 * y, 2.0 * z)
    angle = 2.0 * math.atan2(n, w)
    return (x * angle / n, y * angle / n, z * angle / n)


def normalize(q: Quat) -> Quat:
    """q / |q|."""
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


def yaw(w: float, x: float, y: float, z: float) -> float:
    """Heading [rad] about z of a quaternion (ZYX Euler yaw), in (-pi, pi]."""
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def integrate(
    stamps_ns: npt.NDArray[np.int64], gyro: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Orientations (N×4, w x y z) integrated from body rates [rad/s] at ``stamps_ns`` (midpoint
    rule), starting at identity."""
    out = np.empty((stamps_ns.size, 4))
    q = IDENTITY
    out[0] = q
    for i in range(1, stamps_ns.size):
        w = (gyro[i - 1] + gyro[i]) * 0.5 * (stamps_ns[i] - stamps_ns[i - 1]) * 1e-9
        q = normalize(mul(q, from_rotvec(*map(float, w))))
        out[i] = q
    return out


def from_euler(roll: float, pitch: float, yaw: float) -> Quat:
    """(w, x, y, z) of R = Rz(yaw) Ry(pitch) Rx(roll) (REP-103's fixed-axis roll, pitch, yaw)."""
    rz = from_rotvec(0.0, 0.0, yaw)
    return mul(mul(rz, from_rotvec(0.0, pitch, 0.0)), from_rotvec(roll, 0.0, 0.0))


def matrix(q: Quat) -> npt.NDArray[np.float64]:
    """The 3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
