"""calibration_node: the vehicle's calibration file on ``/tf_static``.

Reads ``calibration`` (:mod:`rt_fusion.core.calibration`: 6-DoF mountings ``base_link →``
each sensor frame) at configure, refusing a bad file with what is wrong in it, and publishes
every mounting as one ``tf2_msgs/TFMessage`` on ``/tf_static`` (reliable, transient local, depth
1: what ``static_transform_publisher`` does, so RViz, Foxglove and tf2 listeners that start later
still get it). ``odom → base_link`` comes from fusion_node, on ``/tf``.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, ClassVar

from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

from rt_fusion.core import calibration
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param
from rt_fusion.ros import graph, lifecycle, parameters, running, share
from rt_fusion.ros.diagnostics import Level, NodeDiagnostics


@dataclasses.dataclass(frozen=True)
class CalibrationParams:
    """Parameters of calibration_node."""

    calibration: str = param(
        "the vehicle's calibration YAML (relative: to the package's share or the repository)",
        default='config/calibration/scenario.yaml',
    )
    frame_prefix: str = param(
        "put before every frame of the file ('car1/': car1/base_link -> car1/camera): two "
        "vehicles' graphs on one machine share /tf_static",
        default='',
    )


def transforms(
    cal: calibration.Calibration, stamp: Any, prefix: str = ''
) -> list[TransformStamped]:
    """One ``TransformStamped`` per sensor mounting, from the base frame (each frame with
    ``prefix`` before it)."""
    out = []
    for m in cal.sensors:
        t = TransformStamped()
        t.header.stamp = stamp
        t.header.frame_id, t.child_frame_id = prefix + cal.base_frame, prefix + m.frame
        t.transform.translation.x, t.transform.translation.y = m.x, m.y
        t.transform.translation.z = m.z
        r = t.transform.rotation
        r.w, r.x, r.y, r.z = m.quaternion()
        out.append(t)
    return out


class CalibrationNode(lifecycle.DeviceNode):
    """See the module docstring."""

    PARAM_GROUPS: ClassVar[parameters.ParamGroups] = ((CalibrationParams, ''),)
    PARAMS = (CalibrationParams,)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('calibration', **kwargs)
        self.cal: calibration.Calibration | None = None

    def configure(self) -> None:
        """Reads and checks the file; the latched publisher."""
        p = self.p = parameters.declare_params(self, CalibrationParams)
        path = share.resolve_share(p.calibration)
        try:
            self.cal = calibration.load(path)
        except calibration.CalibrationError as err:
            raise ParameterError('calibration', str(path), str(err)) from err
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.pub = self.create_lifecycle_publisher(TFMessage, graph.TF_STATIC_TOPIC, latched)
        self.diag = NodeDiagnostics(self, 'calibration')

    def activate(self) -> None:
        """Publishes the mountings once (latched)."""
        assert self.cal is not None
        stamp = self.get_clock().now().to_msg()
        self.pub.publish(TFMessage(transforms=transforms(self.cal, stamp, self.p.frame_prefix)))
        self.diag.publish(
            Level.OK,
            f'{len(self.cal.sensors)} sensor frames on {graph.TF_STATIC_TOPIC}',
            {'file': self.cal.path, 'frames': ', '.join(self.cal.frames())},
        )


def main(args: list[str] | None = None) -> int:
    """Entry point of ``calibration_node``."""
    return running.run(CalibrationNode, args)


if __name__ == '__main__':
    sys.exit(main())
