"""running.StopRequest, the SIGINT/SIGTERM handler of a node process, in this process."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from rt_fusion.ros.running import StopRequest


@pytest.fixture
def stop() -> Iterator[StopRequest]:
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    request = StopRequest()
    request.install()
    yield request
    signal.signal(signal.SIGINT, handlers[0])
    signal.signal(signal.SIGTERM, handlers[1])


def test_before_spinning_a_stop_interrupts_at_once(stop: StopRequest) -> None:
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGTERM)
    assert stop.requested


def test_a_deferred_block_is_not_cut_in_two(stop: StopRequest) -> None:
    """What the executor's construction needs: a SIGINT inside rclpy's Executor() left it
    half-made, and its __del__ printed a traceback into the launch log (a Kilted CI failure)."""
    finished = []

    def block() -> None:
        with stop.deferred():
            signal.raise_signal(signal.SIGINT)
            finished.append(True)

    with pytest.raises(KeyboardInterrupt):
        block()
    assert finished and stop.requested and not stop.spinning


def test_while_spinning_a_stop_only_asks(stop: StopRequest) -> None:
    stop.spinning = True
    with stop.deferred():
        signal.raise_signal(signal.SIGINT)
    assert stop.requested and stop.spinning  # the spin loop ends at its next turn


def test_a_block_without_a_stop_runs_through(stop: StopRequest) -> None:
    with stop.deferred():
        pass
    assert not stop.requested and not stop.spinning
