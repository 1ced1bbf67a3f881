"""bringup_node: brings a graph's lifecycle nodes up in order, names the one that fails, and
pauses / resumes the graph (:mod:`rt_fusion.ros.bringup`). The launch files start it beside
the nodes, which they start with ``autostart: false``; its exit (status 1: a node did not reach
``active``) ends the launch.
"""

from __future__ import annotations

import contextlib
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from rt_fusion.core.errors import RtFusionError
from rt_fusion.ros import compat, running, stopping
from rt_fusion.ros.bringup import Bringup


def main(args: list[str] | None = None) -> int:
    """Entry point of ``bringup_node``: 0 when stopped, 1 when the bring-up failed, 2 for a bad
    parameter.

    SIGINT and SIGTERM only ask (:class:`running.StopRequest`): the spin loop ends, the bring-up
    thread's waits return at once, and the process leaves within a second even when a node it
    was bringing up is gone (a call that will never be answered is not waited for).
    """
    stopping.die_with_parent()  # launched: it does not outlive its launch
    rclpy.init(
        args=args if args is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,
    )
    stop = running.StopRequest()
    stop.install()
    node = None
    status = 0
    executor = None
    bringup: Bringup | None = None
    try:
        node = rclpy.create_node('bringup')
        with stop.deferred():
            executor = MultiThreadedExecutor(num_threads=4)
            bringup = Bringup(node)
            executor.add_node(node)
            bringup.start()
        stop.spinning = True
        while compat.ok() and not stop.requested and not bringup.finished.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)
            except Exception:
                if compat.ok():
                    raise
                break  # the context ended under a callback: that is the stop
        status = bringup.exit_status
    except RtFusionError as err:
        if node is not None:
            node.get_logger().fatal(f'{type(err).__name__}: {err}')
        print(f'rt_fusion: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
        status = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        running._ignore_further_stops()
        if bringup is not None and not bringup.close() and node is not None:
            node.get_logger().warning('bring-up: its thread did not end; leaving without it')
        if executor is not None:
            with contextlib.suppress(Exception):
                executor.shutdown(timeout_sec=2.0)
        if node is not None:
            with contextlib.suppress(Exception):
                node.destroy_node()
        compat.try_shutdown()
    if args is None:  # the process's main: no wait on threads at the interpreter's exit
        running.leave(status)
    return status


if __name__ == '__main__':
    sys.exit(main())
