"""The operator page: plain HTML and JavaScript served over HTTP by viewer_node (no build step,
no internet), for a laptop plugged into the car.

``GET /`` is the page (``static/index.html``, shipped in the package); it polls ``GET
/state.json`` (:class:`OperatorState`: the tracks and the plan top-down, each node's
diagnostics level and message, frames lost, end-to-end latency P50/P99 over the last 10 s,
the audio events active now, the camera thumbnail's stamp and the tracks' boxes on it) and
shows ``GET /camera.jpg?stamp=…`` (that thumbnail) with the boxes drawn over it.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

PAGE = Path(__file__).resolve().parent / 'static' / 'index.html'
WINDOW_S = 10.0  # the latency figures' window
EVENT_HOLD_S = 3.0  # an active audio event is shown this long after its last message


class OperatorState:
    """What the page shows, updated from the viewer's callbacks (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: Any = None  # the latest ObjectArray, turned into rows when asked
        self.plan: list[tuple[float, float]] = []
        self.plan_status = -1
        self.nodes: dict[str, dict[str, Any]] = {}
        self.frames_lost: dict[str, int] = {}
        self.events: dict[str, tuple[float, float]] = {}  # class -> (probability, last seen)
        self._latency: collections.deque[tuple[float, float]] = collections.deque(maxlen=4096)
        # The camera thumbnails shown, by stamp (the newest few: the page asks for the one its
        # state named), and the newest one's size and track boxes.
        self._jpegs: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._camera: dict[str, Any] | None = None

    @property
    def camera_jpeg(self) -> bytes:
        """The newest camera thumbnail shown (empty before the first)."""
        with self._lock:
            return next(reversed(self._jpegs.values()), b'')

    def jpeg(self, stamp: int | None) -> bytes:
        """The thumbnail of ``stamp`` while kept, else the newest."""
        with self._lock:
            if stamp is not None and stamp in self._jpegs:
                return self._jpegs[stamp]
        return self.camera_jpeg

    def set_camera(
        self, stamp: int, jpeg: bytes, size: tuple[int, int], boxes: list[dict[str, Any]]
    ) -> None:
        """A camera thumbnail (``size``: its width, height) and the tracks drawn on it
        (``boxes``: id, class and the rectangle u0, v0, u1, v1 in its pixels)."""
        with self._lock:
            self._jpegs[stamp] = jpeg
            while len(self._jpegs) > 4:
                self._jpegs.popitem(last=False)
            self._camera = {'stamp': stamp, 'width': size[0], 'height': size[1], 'boxes': boxes}

    def set_tracks(self, msg: Any) -> None:
        """The fused objects (base_link): kept as they came, read when the page asks."""
        self._objects = msg

    @staticmethod
    def _rows(msg: Any) -> list[dict[str, Any]]:
        return [
            {
                'id': int(o.id),
                'class': int(o.object_class),
                'x': round(float(o.position.x), 2),
                'y': round(float(o.position.y), 2),
                'length': round(float(o.size.x), 2),
                'width': round(float(o.size.y), 2),
                'yaw': round(float(o.yaw), 3),
                'speed': round(float(np.hypot(o.velocity.x, o.velocity.y)), 2),
            }
            for o in (msg.objects if msg is not None else ())
        ]

    def set_plan(self, msg: Any, ego: tuple[float, float, float] | None) -> None:
        """The plan's points, moved into base_link with the ego pose (x, y, yaw in odom) when
        known; its status; the end-to-end latency of the frame it answers."""
        pts = [(float(p.x), float(p.y)) for p in msg.points]
        if ego is not None and pts:
            ex, ey, eyaw = ego
            c, s = np.cos(eyaw), np.sin(eyaw)
            pts = [(c * (x - ex) + s * (y - ey), -s * (x - ex) + c * (y - ey)) for x, y in pts]
        stamp = int(msg.objects_stamp.sec) * 10**9 + int(msg.objects_stamp.nanosec)
        with self._lock:
            self.plan = [(round(x, 2), round(y, 2)) for x, y in pts]
            self.plan_status = int(msg.status)
            if stamp and msg.published_ns > stamp:
                self._latency.append((time.monotonic(), (msg.published_ns - stamp) / 1e6))

    def set_diagnostics(self, msg: Any) -> None:
        """Each status's level and message; the fusion's frame losses."""
        lost = ('frames_overrun', 'frames_stale', 'torn', 'frames_torn', 'frames_failed')
        with self._lock:
            for s in msg.status:
                level = s.level if isinstance(s.level, int) else int.from_bytes(s.level, 'little')
                self.nodes[s.name] = {'level': level, 'message': s.message}
                for kv in s.values:
                    if kv.key in lost and kv.value.isdigit():
                        self.frames_lost[f'{s.name}: {kv.key}'] = int(kv.value)

    def set_event(self, msg: Any) -> None:
        """An audio event: active ones shown for a while after their last message."""
        with self._lock:
            if msg.active:
                self.events[msg.event_class] = (float(msg.probability), time.monotonic())
            else:
                self.events.pop(msg.event_class, None)

    def snapshot(self) -> dict[str, Any]:
        """The page's JSON."""
        now = time.monotonic()
        with self._lock:
            recent = [v for t, v in self._latency if now - t <= WINDOW_S]
            objects = self._objects
            return {
                'tracks': self._rows(objects),
                'plan': list(self.plan),
                'plan_status': self.plan_status,
                'nodes': dict(self.nodes),
                'frames_lost': dict(self.frames_lost),
                'latency_ms': {
                    'p50': round(float(np.percentile(recent, 50)), 2) if recent else None,
                    'p99': round(float(np.percentile(recent, 99)), 2) if recent else None,
                    'samples': len(recent),
                    'window_s': WINDOW_S,
                },
                'events': {
                    k: round(p, 2) for k, (p, t) in self.events.items() if now - t <= EVENT_HOLD_S
                },
                'camera': self._camera,
            }


class OperatorPage:
    """The HTTP server of the page, in a thread of its own."""

    def __init__(self, state: OperatorState, host: str, port: int) -> None:
        page = PAGE.read_bytes()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split('?', 1)[0]
                if path in ('/', '/index.html'):
                    self._send(200, 'text/html; charset=utf-8', page)
                elif path == '/state.json':
                    self._send(200, 'application/json', json.dumps(state.snapshot()).encode())
                elif path == '/camera.jpg' and state.camera_jpeg:
                    query = self.path.partition('?')[2]
                    stamp = query.removeprefix('stamp=')
                    jpeg = state.jpeg(int(stamp) if stamp.isdigit() else None)
                    self._send(200, 'image/jpeg', jpeg)
                else:
                    self._send(404, 'text/plain', b'not found')

            def _send(self, code: int, kind: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header('Content-Type', kind)
                self.send_header('Content-Length', str(len(body)))
                self.send_header('Cache-Control', 'no-store')
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:  # quiet: no line per request
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name='operator-page', daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stops serving and frees the port."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5.0)
