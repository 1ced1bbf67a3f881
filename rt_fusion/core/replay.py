"""Replay of a rosbag2 into a live graph: parameters, topic selection and remapping, pacing.

ROS-free: :mod:`rt_fusion.nodes.replay_node` publishes what this decides. Three modes:

- ``realtime``: each message is released at its recorded log time, scaled by ``rate`` (2.0: twice
  as fast), measured from the first message;
- ``lockstep``: the next message is released only when the consumer has acknowledged the
  previous one (or ``ack_timeout_s`` passed, which is counted): deterministic regression runs
  whatever the machine's speed;
- ``fast``: as fast as the publisher goes.

The stored CDR bytes are published unchanged, so stamps and values arrive exactly as recorded.
"""

from __future__ import annotations

import dataclasses

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param

MODES = ('realtime', 'lockstep', 'fast')


@dataclasses.dataclass(frozen=True)
class ReplayParams:
    """Parameters of the replay node."""

    bag: str = param('rosbag2 directory (MCAP or sqlite3) or a file in it')
    topics: tuple[str, ...] = param('topics to replay (empty: all)', default=())
    remap: tuple[str, ...] = param(
        "topic renames, each 'from->to' (the recorded name to the live one)", default=()
    )
    relative: bool = param(
        "publish each recorded '/name' as 'name', relative to the node's namespace (a replay in "
        '/car1 feeds /car1/...); /tf, /tf_static, /clock and /diagnostics stay absolute',
        default=True,
    )
    mode: str = param('realtime, lockstep or fast', default='realtime', choices=MODES)
    rate: float = param('realtime: speed factor', default=1.0, low=0.01, high=1000.0)
    ack_topic: str = param('lockstep: std_msgs/UInt64 acknowledgements', default='~/ack')
    ack_timeout_s: float = param(
        'lockstep: go on without an acknowledgement after this long',
        unit='s',
        default=5.0,
        low=0.01,
    )
    publish_clock: bool = param(
        'publish /clock with the recorded time (use_sim_time)', default=True
    )
    start_delay_s: float = param(
        'wait before the first message (subscribers discover the publishers)',
        unit='s',
        default=1.0,
        low=0.0,
    )
    qos_depth: int = param('publisher queue depth (reliable)', default=1000, low=1)
    shm: tuple[str, ...] = param(
        'image topics replayed into a shared-memory ring as the camera node does, each '
        "'bagtopic->livebase' (sensor_msgs/Image or CompressedImage; descriptors on "
        '<livebase>/shm)',
        default=(),
    )
    wait_subscribers_s: float = param(
        'wait up to this long until every replayed topic has a subscriber (0: do not wait), '
        'then start_delay_s',
        unit='s',
        default=0.0,
        low=0.0,
    )
    require_subscribers: bool = param(
        'a topic still without a subscriber after wait_subscribers_s ends the replay with status '
        '2, naming it (the launch files: never play to an absent graph); false: start anyway',
        default=False,
    )
    restamp: bool = param(
        'move header stamps onto the host clock (the first message anchors the recorded timeline '
        'at the time it is replayed): the graph then measures live latency',
        default=False,
    )
    shm_slots: int = param('slots of each replay ring', default=16, low=2, high=256)
    start_topic: str = param(
        'wait for a std_msgs/UInt64 here (reliable, transient local) before the first message: '
        "a consumer that must be listening first says so (tools/evaluate.py); '': do not wait",
        default='',
    )
    start_timeout_s: float = param(
        'start_topic: start anyway after this long (counted as a warning)',
        unit='s',
        default=120.0,
        low=0.0,
    )
    loops: int = param(
        'passes over the bag (0: until stopped; a soak test). Each pass re-anchors the '
        'realtime pacing and restamping, so restamped stamps keep increasing',
        default=1,
        low=0,
    )
    strict: bool = param(
        'refuse a bag with a corrupt chunk (CRC mismatch) at start-up; otherwise its chunk is '
        'skipped and reported (topics, time range, messages)',
        default=False,
    )
    radar_tracks: bool = param(
        "publish the bag's rt_fusion_msgs/RadarObjects as radar_msgs/RadarTracks on the same "
        "topic (what a third-party ARS408 driver publishes: fusion_node's radar_type tracks)",
        default=False,
    )
    stamp_from: tuple[str, ...] = param(
        "header stamps taken from a trigger topic, each 'topic<-trigger' (the latest trigger "
        'stamp at or before the message replaces its stamp; e.g. radar scans and their '
        'hardware trigger)',
        default=(),
    )

    def check(self) -> None:
        """Cross-field rules."""
        parse_remaps(self.remap)
        parse_remaps(self.shm, 'shm')
        parse_pairs(self.stamp_from)


SYSTEM_TOPICS = ('/tf', '/tf_static', '/clock', '/diagnostics', '/rosout', '/parameter_events')


def live_name(topic: str, relative: bool) -> str:
    """The name a recorded topic is published under: relative (the leading '/' dropped) unless
    it is one of the system-wide :data:`SYSTEM_TOPICS` or ``relative`` is off."""
    return topic.lstrip('/') if relative and topic not in SYSTEM_TOPICS else topic


def parse_remaps(remaps: tuple[str, ...], name: str = 'remap') -> dict[str, str]:
    """``('a->b', ...)`` as a mapping (``:=`` would not pass the ROS argument parser).

    Raises:
        ParameterError: ``name`` has an entry without ``->`` or with an empty side.
    """
    return _pairs(remaps, '->', name, 'from->to')


def parse_pairs(entries: tuple[str, ...]) -> dict[str, str]:
    """``stamp_from`` entries ``('topic<-trigger', ...)`` as {topic: trigger}.

    Raises:
        ParameterError: an entry without ``<-`` or with an empty side.
    """
    return _pairs(entries, '<-', 'stamp_from', 'topic<-trigger')


def _pairs(entries: tuple[str, ...], sep_text: str, name: str, form: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        src, sep, dst = entry.partition(sep_text)
        if not sep or not src.strip() or not dst.strip():
            raise ParameterError(name, entries, f"entry {entry!r} is not '{form}'")
        out[src.strip()] = dst.strip()
    return out


class Pacer:
    """Release times of recorded messages on the host clock (``realtime`` mode)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._first_log_ns: int | None = None
        self._start_ns = 0

    def due_ns(self, log_time_ns: int, now_ns: int) -> int:
        """Host time at which the message logged at ``log_time_ns`` is due; the first message
        anchors the timeline at ``now_ns``."""
        if self._first_log_ns is None:
            self._first_log_ns, self._start_ns = log_time_ns, now_ns
        return self._start_ns + int((log_time_ns - self._first_log_ns) / self.rate)


class Restamper:
    """Recorded stamps onto the host (wall-clock) timeline: the first message's log time is
    anchored at the host time it is replayed, and stamps keep their offsets (scaled by rate).

    It remembers the range of stamps it made, so the next pass of a looped replay can be
    anchored after them (:meth:`next_floor_ns`)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._anchor: tuple[int, int] | None = None
        self.earliest_ns: int | None = None  # of the stamps made
        self.latest_ns: int | None = None

    def anchor(self, log_time_ns: int, host_ns: int) -> None:
        """Sets the anchor once (later calls do nothing)."""
        if self._anchor is None:
            self._anchor = (log_time_ns, host_ns)

    def __call__(self, stamp_ns: int) -> int:
        """The host-time stamp of a recorded stamp (after :meth:`anchor`)."""
        assert self._anchor is not None
        log0, host0 = self._anchor
        out = host0 + int((stamp_ns - log0) / self.rate)
        if self.earliest_ns is None or out < self.earliest_ns:
            self.earliest_ns = out
        if self.latest_ns is None or out > self.latest_ns:
            self.latest_ns = out
        return out

    def next_floor_ns(self) -> int:
        """The earliest anchor for the next pass over the same messages such that every stamp it
        makes is later than every stamp made here (stamps may precede the first log time: a
        sensor's delivery delay). 0 when nothing was restamped."""
        if self._anchor is None or self.earliest_ns is None or self.latest_ns is None:
            return 0
        lead = max(0, self._anchor[1] - self.earliest_ns)
        return self.latest_ns + lead + 1
