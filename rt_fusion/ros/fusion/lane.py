"""The network beside the fusion (fusion_node ``inference: beside``): one frame at a time on a
thread of its own, its results handed back to the fusion worker, which puts them into the
tracker at their frame's time (:meth:`rt_fusion.core.fusion.FusionEngine.camera_late`).

Why: on a CPU the network takes 35 ms a frame (two views of the INT8 model, one thread) and the
camera gives one every 33 ms. On the fusion thread, every frame that came while it ran waited
behind it; beside it, those frames are fused on radar and IMU and published at once, and the
camera's detections reach the tracks one inference later, at their own time. The backends
release the GIL while they run (ONNX Runtime, torch, OpenCV's resize).

The lane's thread runs at SCHED_OTHER (a real-time node's threads inherit its SCHED_FIFO): the
fusion goes first, and a late network shows as the age of the detections it puts in
(``detections_age_us`` in the diagnostics), never as the fusion's latency."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from rt_fusion.core.perception.decoders import CameraDetection, CameraGeometry


@dataclasses.dataclass(frozen=True)
class LaneResult:
    """What the network made of one frame: its detections (None: none to use, the frame was
    torn under the network or the network failed), the extra cameras', whether it was torn,
    when it was done (host clock) and how long it took [ns]."""

    stamp_ns: int
    detections: list[CameraDetection] | None
    extra: list[tuple[CameraGeometry, list[CameraDetection]]]
    torn: bool
    done_ns: int
    took_ns: int


class InferenceLane:
    """A thread that runs ``run`` on one frame at a time (:meth:`submit` while not
    :attr:`busy`); its results wait for :meth:`take`, and ``wake()`` is called at each (the
    fusion worker's condition). ``release(frame)`` frees a frame never run (stopping)."""

    def __init__(
        self,
        run: Callable[[Any], LaneResult],
        wake: Callable[[], None],
        release: Callable[[Any], None],
        name: str = 'inference',
    ) -> None:
        self._run, self._wake, self._release = run, wake, release
        self._cond = threading.Condition()
        self._job: Any = None
        self._busy = False
        self._closing = False
        self._results: list[LaneResult] = []
        self.failed = 0  # runs that raised (run counts its own expected errors)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A frame is with the network (submitted, not yet taken back)."""
        return self._busy

    def submit(self, job: Any) -> None:
        """Gives the network a frame (the lane frees it when done); the lane must be idle."""
        with self._cond:
            if self._busy or self._closing:
                raise RuntimeError('the inference lane is busy or closed')
            self._job, self._busy = job, True
            self._cond.notify_all()

    def take(self) -> list[LaneResult]:
        """The results since the last call, oldest first."""
        if not self._results:  # (the hot path: no lock while there are none)
            return []
        with self._cond:
            out, self._results = self._results, []
        return out

    def wait_idle(self, timeout_s: float, stop: threading.Event) -> bool:
        """Waits until the network has no frame (or ``timeout_s``, or ``stop``); whether idle."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._busy and not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.05))
            return not self._busy

    def close(self) -> None:
        """Stops the thread after the frame it is on (a frame not begun is freed); idempotent."""
        with self._cond:
            self._closing = True
            job, self._job = self._job, None
            self._cond.notify_all()
        if job is not None:
            self._release(job)
        self._thread.join()

    def _loop(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        while True:
            with self._cond:
                while self._job is None and not self._closing:
                    self._cond.wait()
                if self._job is None:
                    return
                job, self._job = self._job, None
            result: LaneResult | None = None
            try:
                result = self._run(job)
            except Exception:  # noqa: BLE001  (a bug in run: counted, the lane goes on)
                self.failed += 1
            with self._cond:
                if result is not None:
                    self._results.append(result)
                self._busy = False
                self._cond.notify_all()
            self._wake()
