"""bringup_node: brings a graph's lifecycle nodes up in order, names the one that fails, and
pauses / resumes the graph (:mod:`rt_fusion.ros.bringup`). The launch files start it beside
the nodes, which they start with ``autostart: false``; its exit (status 1: a node did not reach
``active``) ends the launch.
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

from rt_fusion.core.errors import RtFusionError
from rt_fusion.ros import compat
from rt_fusion.ros.bringup import Bringup


def main(args: list[str] | None = None) -> int:
    """Entry point of ``bringup_node``: 0 when stopped, 1 when the bring-up failed, 2 for a bad
    parameter."""
    rclpy.init(args=args if args is not None else sys.argv)
    node = rclpy.create_node('bringup')
    status = 0
    executor = MultiThreadedExecutor(num_threads=4)
    bringup: Bringup | None = None
    try:
        bringup = Bringup(node)
        executor.add_node(node)
        bringup.start()
        while compat.ok() and not bringup.finished.is_set():
            try:
                executor.spin_once(timeout_sec=0.2)
            except Exception:
                if compat.ok():
                    raise
                break  # stopped (SIGINT) while it waited: not a failure
        status = bringup.exit_status
    except RtFusionError as err:
        node.get_logger().fatal(f'{type(err).__name__}: {err}')
        status = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if bringup is not None:
            bringup.close()
        executor.shutdown()
        node.destroy_node()
        compat.try_shutdown()
    return status


if __name__ == '__main__':
    sys.exit(main())
