"""One recorder of a running graph's output, for every tool and test that runs one.

A node in the tool's own process (its own rclpy context) that keeps, as plain records
(:mod:`rt_fusion.core.evaluation.runs` describes them):

- ``objects``: every fused object list (stamps, the fusion's own stage stamps, the objects as
  (id, x, y, vx, vy, class));
- ``plans``: every trajectory (its object list's stamp, status, solve time, stage stamps
  (``lineage``), points as (t, x, y, yaw, v, a));
- ``odometry`` (``odometry=True``): the fused pose per stamp;
- ``cameras`` (a tuple of rig camera names, ``'front'`` first): the frames each camera committed,
  counted by their shared-memory sequence numbers, so a descriptor this recorder missed still
  counts, and the front camera's frame stamps;
- the fusion node's frame ledger, its other cameras' ledgers, its stage times and each camera
  node's own frame count, from ``/diagnostics``;
- ``arrivals``: the arrival times of any other topics (counted raw, nothing deserialised).

It can announce a run's start on a latched topic once every output it records has a matched
publisher (:meth:`start_when_listening`), and spins in a thread of its own (:meth:`start`) or
when asked (:meth:`spin`). Topic names come from :mod:`rt_fusion.ros.graph`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rt_fusion.core.evaluation.ledger import LINEAGE
from rt_fusion.ros import compat, diagnostics, graph
from rt_fusion.ros.conversions import message_class, quaternion_yaw, time_to_ns

#: What the fusion node's diagnostics say of its own times and tracks (the benchmarks' rows).
STAGE_KEYS = ('inference_p99_us', 'stages_p50_us', 'stages_p99_us', 'stages_max_us',
              'latency_p50_us', 'latency_p99_us', 'latency_max_us', 'tracks_all',
              'tracks_confirmed', 'inference_errors', 'recorded_missed', 'cpu_us',
              'inference', 'detections_age_us', 'inference_skipped_busy')  # fmt: skip


class Recorder:
    """Records a graph's outputs in this process; see the module docstring."""

    def __init__(
        self,
        name: str = 'recorder',
        *,
        outputs: bool = True,
        odometry: bool = False,
        cameras: tuple[str, ...] = (),
        expected_frames: int = 0,
        arrivals: Mapping[str, tuple[str, str]] | None = None,
        depth: int = 1000,
        namespace: str = '',
    ) -> None:
        """``outputs``: record the object lists and trajectories (False: only what else is
        asked); ``expected_frames``: the frames the front camera is known to commit (a camera node
        stopping after ``count``; 0: not known); ``arrivals``: name → (topic, type name);
        ``namespace``: the graph's (``namespace:=`` of the launch files), whose topics and
        diagnostics alone are followed."""
        import rclpy  # noqa: PLC0415
        from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415
        from nav_msgs.msg import Odometry  # noqa: PLC0415
        from rclpy.context import Context  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.qos import (  # noqa: PLC0415
            DurabilityPolicy,
            QoSProfile,
            ReliabilityPolicy,
        )
        from rt_fusion_msgs.msg import ObjectArray, ShmFrame, Trajectory  # noqa: PLC0415
        from std_msgs.msg import UInt64  # noqa: PLC0415

        from rt_fusion.ros.shm_transport import HELLO  # noqa: PLC0415

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, namespace=namespace or None, context=self.context)
        # '/car1' (or ''): the diagnostics of this graph's nodes are named '/car1/<node>: ...'
        self.namespace = self.node.get_namespace().rstrip('/')
        self.lock = threading.Lock()
        self.cameras = cameras
        self.expected_frames = expected_frames
        self._hello = HELLO  # a writer's handshake descriptor: no frame
        self.reset()
        self.ledger: dict[str, int] = {}  # the fusion node's frame ledger (its diagnostics)
        self.extra_ledger: dict[str, dict[str, int]] = {}  # its other cameras'
        self.camera_frames: dict[str, int] = {}  # each camera node's own count (diagnostics)
        self.stages: dict[str, str] = {}  # the fusion node's own stage times
        self.fusion_status: dict[str, str] = {}  # its last diagnostic values, all of them
        self.planner_status: dict[str, str] = {}  # the planner's, likewise
        # reliable: a lock-step fusion publishes reliably too; a best-effort reader lost poses
        reliable = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        # Publishers matched per output (the data path, not only the graph): a replay is
        # started once every output reaches this process.
        self.matched: dict[str, int] = {}
        subs: list[tuple[str, Any, str, Callable[[Any], None]]] = []
        if outputs:
            subs.append(('objects', ObjectArray, graph.OBJECTS_TOPIC, self._on_objects))
            subs.append(('trajectory', Trajectory, graph.TRAJECTORY_TOPIC, self._on_plan))
        if odometry:
            subs.append(('odometry', Odometry, graph.ODOMETRY_TOPIC, self._on_odometry))
        for key, cls, topic, cb in subs:
            self.matched[key] = 0
            events = compat.subscription_events(matched=functools.partial(self._matched, key))
            self.node.create_subscription(cls, topic, cb, reliable, event_callbacks=events)
        for camera in cameras:
            self.node.create_subscription(
                ShmFrame,
                graph.camera_topic(camera) + graph.SHM_SUFFIX,
                functools.partial(self._on_frame, camera),
                reliable,
            )
        self.node.create_subscription(
            DiagnosticArray, graph.DIAGNOSTICS_TOPIC, self._on_diagnostics, 50
        )
        # Best effort matches reliable and best-effort publishers alike; raw: counted, not
        # deserialised (an IMU's 400 Hz in Python took a third of a core of a 2-core machine).
        self.arrivals: dict[str, list[float]] = {}
        best_effort = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        for key, (topic, typename) in (arrivals or {}).items():
            self.arrivals[key] = []
            self.node.create_subscription(
                message_class(typename),
                topic,
                functools.partial(self._arrived, key),
                best_effort,
                raw=True,
            )
        self._latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self._uint64 = UInt64
        self.start_pub: Any = None  # one per run: a latched signal must not start the next one
        self.runs = 0
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    # --- records ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Forgets what was recorded (a new run)."""
        if getattr(self, 'start_pub', None) is not None:
            self.node.destroy_publisher(self.start_pub)
            self.start_pub = None
        with self.lock:
            self.objects: list[dict[str, Any]] = []
            self.odometry: dict[int, tuple[float, float, float]] = {}
            self.plans: list[dict[str, Any]] = []
            # frame stamp -> when its first object list / first trajectory was published
            self.fused: dict[int, int] = {}
            self.planned: dict[int, int] = {}
            self.frame_stamps: list[int] = []  # the front camera's committed frames
            self.seen = 0  # front-camera descriptors that arrived
            self._last_sequence: dict[tuple[str, str, int], int] = {}

    def snapshot(self) -> dict[str, Any]:
        """Copies of the records (objects, odometry, plans), for scoring."""
        with self.lock:
            return {
                'objects': list(self.objects),
                'odometry': dict(self.odometry),
                'plans': list(self.plans),
            }

    def _matched(self, key: str, info: Any) -> None:
        with self.lock:
            self.matched[key] = int(info.current_count)

    def _on_objects(self, m: Any) -> None:
        stamp, published = time_to_ns(m.header.stamp), int(m.published_ns)
        rec = {
            'stamp_ns': stamp,
            'inputs_complete_ns': int(m.inputs_complete_ns),
            'published_ns': published,
            'received_ns': time.time_ns(),
            'objects': [
                (
                    int(o.id),
                    float(o.position.x),
                    float(o.position.y),
                    float(o.velocity.x),
                    float(o.velocity.y),
                    int(o.object_class),
                    float(o.existence_probability),
                )
                for o in m.objects
            ],
        }
        with self.lock:
            self.objects.append(rec)
            self.fused.setdefault(stamp, published)

    def _on_odometry(self, m: Any) -> None:
        p = m.pose.pose.position
        pose = (float(p.x), float(p.y), quaternion_yaw(m.pose.pose.orientation))
        with self.lock:
            self.odometry[time_to_ns(m.header.stamp)] = pose

    def _on_plan(self, m: Any) -> None:
        objects_stamp, published = time_to_ns(m.objects_stamp), int(m.published_ns)
        rec = {
            'stamp_ns': time_to_ns(m.header.stamp),
            'objects_stamp_ns': objects_stamp,
            'status': int(m.status),
            'published_ns': published,
            'received_ns': time.time_ns(),
            'solve_ms': float(m.solve_time_ms),
            'lineage': {f: int(getattr(m.lineage, f)) for f in LINEAGE},
            'points': [(p.t, p.x, p.y, p.yaw, p.v, p.a) for p in m.points],
        }
        with self.lock:
            self.plans.append(rec)
            self.planned.setdefault(objects_stamp, published)

    def _on_frame(self, camera: str, m: Any) -> None:
        if m.encoding == self._hello:
            return
        ring = (camera, m.segment, m.segment_epoch_ns)
        with self.lock:
            if camera == 'front':
                self.seen += 1
                self.frame_stamps.append(time_to_ns(m.header.stamp))
            self._last_sequence[ring] = max(self._last_sequence.get(ring, -1), m.sequence)

    def _on_diagnostics(self, m: Any) -> None:
        for status, values in diagnostics.statuses(m, 'camera'):
            # '/camera: camera' or '/camera_left: camera': the frames each camera committed.
            space, node = status.name.split(':', 1)[0].rsplit('/', 1)
            if space != self.namespace:
                continue  # another graph's (two namespaced graphs share /diagnostics)
            if node == 'camera' or node.startswith('camera_'):
                camera = node.removeprefix('camera').removeprefix('_') or 'front'
                if values.get('frames', '').isdigit():
                    self.camera_frames[camera] = int(values['frames'])
        for status, values in diagnostics.statuses(m, 'fusion'):
            if status.name.split(':', 1)[0].rsplit('/', 1)[0] != self.namespace:
                continue
            self.fusion_status = values
            self.ledger = {k: int(v) for k, v in values.items() if k.startswith('frames_')}
            for name in self.cameras[1:]:  # 'delivered 12, used 11, ...'
                text = values.get(f'camera_{name}', '')
                pairs = (item.rsplit(' ', 1) for item in text.split(', ') if ' ' in item)
                self.extra_ledger[name] = {k: int(v) for k, v in pairs}
            self.stages = {k: values[k] for k in STAGE_KEYS if k in values}
        for status, values in diagnostics.statuses(m, 'planner'):
            if status.name.split(':', 1)[0].rsplit('/', 1)[0] == self.namespace:
                self.planner_status = values  # its plan()/solve percentiles, deadlines

    def _arrived(self, key: str, _msg: Any) -> None:
        self.arrivals[key].append(time.monotonic())

    # --- what the records say ---------------------------------------------------------------

    def committed_by(self, camera: str = 'front') -> int:
        """Frames one camera committed: its rings' sequences, or the camera node's own count in
        its diagnostics where that is more (the last descriptors may reach this recorder late,
        or not before the run ends, on a loaded machine)."""
        with self.lock:
            by_sequence = sum(
                last + 1 for (c, *_ring), last in self._last_sequence.items() if c == camera
            )
            seen = self.seen if camera == 'front' else 0
        return max(by_sequence, seen, self.camera_frames.get(camera, 0))

    def accounted(self) -> bool:
        """Whether the fusion node's ledger accounts for every committed frame (nothing in
        flight any more), and this recorder has seen every frame the ledger has: on a loaded
        machine its descriptors lag the fusion node's."""
        led = self.ledger
        if not led or led.get('frames_in_flight', 1) != 0:
            return False
        committed = self.committed_by()
        if committed < self.expected_frames:
            return False
        for name in self.cameras[1:]:
            extra = self.extra_ledger.get(name, {})
            if extra.get('in_flight', 1) or extra.get('queued', 1):
                return False
        fusion_saw = led['frames_delivered'] + led['frames_overrun'] + led.get('frames_stale', 0)
        return fusion_saw == committed

    def count(self, key: str, lo: float, hi: float) -> int:
        """Arrivals on ``key`` between monotonic times ``lo`` and ``hi``."""
        return sum(1 for t in self.arrivals[key] if lo <= t < hi)

    def first_after(self, key: str, t: float) -> float | None:
        """The first arrival on ``key`` after monotonic time ``t``."""
        return next((x for x in self.arrivals[key] if x > t), None)

    # --- a run's start ----------------------------------------------------------------------

    def outputs_listening(self) -> bool:
        """Every output this recorder keeps has a matched publisher."""
        with self.lock:
            return all(n > 0 for n in self.matched.values())

    def graph_ready(self) -> bool:
        """The outputs have publishers and the fusion node spins: its diagnostics arrive (it is
        configured, its model loaded). Publishers exist from configure on, but descriptors sent
        before it spins pile up in its keep-last history, and all but the last few are lost (83
        of 300 frames on a cold H200 start)."""
        return bool(self.ledger) and all(
            self.node.get_publishers_info_by_topic(t)
            for t in (graph.OBJECTS_TOPIC, graph.TRAJECTORY_TOPIC)
        )

    def wait(
        self,
        ready: Callable[[], bool],
        deadline_s: float,
        failed: Callable[[], list[str]] = list,
    ) -> bool:
        """Spins (or, with a thread spinning, waits) until ``ready()``; False at the deadline
        or as soon as ``failed()`` names a dead process."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not failed():
            if ready():
                return True
            self.spin(0.05)
        return False

    def send_start(self, topic: str) -> None:
        """Publishes the run's number on the latched ``topic`` (a replay or simulator waits for
        it: :func:`rt_fusion.ros.graph.start_topic`)."""
        self.runs += 1
        self.start_pub = self.node.create_publisher(self._uint64, topic, self._latched)
        self.start_pub.publish(self._uint64(data=self.runs))

    def start_when_listening(
        self, topic: str, deadline_s: float, failed: Callable[[], list[str]] = list
    ) -> bool:
        """Once every output has a matched publisher, sends the start signal on ``topic``."""
        if not self.wait(self.outputs_listening, deadline_s, failed):
            return False
        self.send_start(topic)
        return True

    # --- spinning --------------------------------------------------------------------------

    def start(self) -> Recorder:
        """Spins in a thread of its own from now on."""
        self.thread = threading.Thread(target=self._spin_thread, daemon=True)
        self.thread.start()
        return self

    def _spin_thread(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def spin(self, seconds: float) -> None:
        """Takes messages in for ``seconds`` (with a spinning thread: waits as long)."""
        if self.thread is not None:
            self._stop.wait(seconds)
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        """Stops spinning, destroys the node and shuts its context down."""
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()
