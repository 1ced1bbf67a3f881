"""A surround rig's extra cameras beside the front one (the anchor of the alignment): their
frames wait until their anchor frame is fused; each frame is counted once, by where it went."""

from __future__ import annotations

import collections
import dataclasses
import re
import threading
import time
from typing import Any

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.fusion import FusionParams
from rt_fusion.core.perception.decoders import CameraGeometry
from rt_fusion.ros.shm_transport import ShmSubscription

#: Frames of an extra camera kept waiting for their anchor frame, as a multiple of the anchor
#: frames the aligner queues (sync.camera_queue): those and the ones it released to the worker
#: at once. A frame older than the anchor frame being fused is dropped as unmatched first.
EXTRA_QUEUE_FACTOR = 3


@dataclasses.dataclass
class ExtraCamera:
    """An extra camera of the rig: its subscription, waiting frames and where its frames went
    (each counted once: used, skipped by infer_period_s, torn, late, unmatched, or still
    queued)."""

    name: str
    geometry: CameraGeometry
    sub: ShmSubscription | None = None
    queue: collections.deque[Any] = dataclasses.field(default_factory=collections.deque)
    used: int = 0
    skipped: int = 0
    torn: int = 0
    failed: int = 0  # the network failed on it
    unmatched: int = 0  # never matched an anchor frame (its anchor dropped, beyond the queue)
    late: int = 0  # came after its anchor frame had given up on it (sync.max_wait_s)
    missing: int = 0  # anchor frames that found no frame of this camera in time
    #: stamps of the latest anchor frames that went on without this camera
    gave_up: collections.deque[int] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=16)
    )
    #: stamps of anchor frames fused without the network whose frame of this camera is still
    #: to come (CameraRig.skip): freed as skipped when it does
    skipping: collections.deque[int] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=16)
    )

    def drop(self, stamp_ns: int, tol_ns: int) -> None:
        """A frame that will not be used: late when its anchor frame gave up on it."""
        if any(abs(stamp_ns - g) <= tol_ns for g in self.gave_up):
            self.late += 1
        else:
            self.unmatched += 1

    def ledger(self) -> dict[str, int]:
        """Its frames, stage by stage (``lost``: delivered and neither used nor explained)."""
        delivered = self.sub.stats.delivered if self.sub is not None else 0
        done = self.used + self.skipped + self.torn + self.failed + self.unmatched + self.late
        return {
            'delivered': delivered,
            'used': self.used,
            'skipped': self.skipped,
            'torn': self.torn,
            'failed': self.failed,
            'unmatched': self.unmatched,
            'late': self.late,
            'queued': len(self.queue),
            'in_flight': max(0, delivered - done - len(self.queue)),
            'overrun': self.sub.stats.overruns if self.sub is not None else 0,
            'missing': self.missing,
        }


class CameraRig:
    """The extra cameras; ``cond`` is the node's condition (the inputs' lock, the worker's
    wake-up), ``match_s`` how close an extra frame's stamp is to its anchor's."""

    def __init__(
        self,
        cameras: list[ExtraCamera],
        cond: threading.Condition,
        match_s: float,
        queue_bound: int,
    ) -> None:
        self.cameras = cameras
        self._cond = cond
        self._tol_ns = round(match_s * 1e9)
        self._bound = EXTRA_QUEUE_FACTOR * queue_bound

    def push(self, cam: ExtraCamera, frame: Any) -> None:
        """A frame of ``cam`` arrived (an input thread)."""
        stamp_ns = frame.desc.stamp_ns
        with self._cond:
            for anchor in cam.skipping:
                if abs(stamp_ns - anchor) <= self._tol_ns:  # its anchor went without the network
                    cam.skipping.remove(anchor)
                    frame.release()
                    cam.skipped += 1
                    return
            cam.queue.append((stamp_ns, frame))
            if len(cam.queue) > self._bound:
                # its anchor frame never came, or the aligner dropped it: not used
                stamp, old = cam.queue.popleft()
                old.release()
                cam.drop(stamp, self._tol_ns)
            self._cond.notify()

    def frames_for(
        self, stamp_ns: int, max_wait_s: float, poll_s: float, stop: threading.Event
    ) -> list[tuple[ExtraCamera, Any]]:
        """The frame of each extra camera that belongs to the anchor frame at ``stamp_ns``,
        waiting at most ``max_wait_s`` for those not there yet (missing: counted, and the frame
        fused without them). Older frames are dropped: late when their anchor frame went on
        without them, else unmatched."""
        tol = self._tol_ns
        deadline = time.monotonic() + max_wait_s
        found: dict[str, Any] = {}
        with self._cond:
            while True:
                for cam in self.cameras:
                    if cam.name in found:
                        continue
                    q = cam.queue
                    while q and q[0][0] < stamp_ns - tol:
                        stamp, old = q.popleft()
                        old.release()
                        cam.drop(stamp, tol)
                    if q and q[0][0] <= stamp_ns + tol:
                        found[cam.name] = q.popleft()[1]
                left = deadline - time.monotonic()
                if len(found) == len(self.cameras) or left <= 0 or stop.is_set():
                    break
                self._cond.wait(min(left, poll_s))
        out = []
        for cam in self.cameras:
            if cam.name in found:
                out.append((cam, found[cam.name]))
            else:
                cam.missing += 1
                cam.gave_up.append(stamp_ns)
        return out

    def skip(self, stamp_ns: int) -> None:
        """The anchor frame at ``stamp_ns`` was fused without the network (``inference:
        beside``, which does not wait for the other cameras): each camera's frame of its time
        is freed as skipped, now or when it comes. Older frames are left to the network's
        thread (:meth:`frames_for`), which may be taking them."""
        tol = self._tol_ns
        with self._cond:
            for cam in self.cameras:
                match = next(
                    (i for i, (t, _) in enumerate(cam.queue) if abs(t - stamp_ns) <= tol), None
                )
                if match is None:
                    cam.skipping.append(stamp_ns)
                    continue
                _, frame = cam.queue[match]
                del cam.queue[match]
                frame.release()
                cam.skipped += 1

    def release(self) -> None:
        """Frees the waiting frames and the subscriptions (cleanup)."""
        for cam in self.cameras:
            while cam.queue:
                cam.queue.popleft()[1].release()
            if cam.sub is not None:
                cam.sub.destroy()
                cam.sub = None

    def diagnostics(self) -> dict[str, str]:
        """Each camera's ledger as one diagnostics value (``camera_<name>``)."""
        return {
            f'camera_{cam.name}': ', '.join(f'{k} {v}' for k, v in cam.ledger().items())
            for cam in self.cameras
        }


def extra_cameras(names: tuple[str, ...], fusion_params: FusionParams) -> list[ExtraCamera]:
    """The rig's extra cameras (fusion_node's ``cameras``), mounted as ``fusion.extra_camera_*``
    say, in this order.

    Raises:
        ParameterError: a bad or repeated name, or not one mounting per camera.
    """
    for name in names:
        if not re.fullmatch(r'[a-z][a-z0-9_]*', name) or names.count(name) > 1:
            raise ParameterError('cameras', names, f'{name!r}: distinct names of [a-z][a-z0-9_]*')
    if len(names) != len(fusion_params.extra_camera_x):
        raise ParameterError(
            'cameras',
            names,
            f'{len(names)} extra cameras, but fusion.extra_camera_x has '
            f'{len(fusion_params.extra_camera_x)} mountings',
        )
    geometries = fusion_params.extra_geometries()
    return [ExtraCamera(n, g) for n, g in zip(names, geometries, strict=True)]
