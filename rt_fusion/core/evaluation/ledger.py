"""A live run's camera frames stage by stage, and its end-to-end latency per stage.

Plain records in (a recorder's committed-frame counts, the fusion node's own frame ledger from
its diagnostics, the object lists and trajectories with their stage stamps); dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Lineage.msg's stage stamps, in order, and the stages between them a latency table shows.
LINEAGE = (
    'capture_ns',
    'committed_ns',
    'received_ns',
    'inputs_complete_ns',
    'inference_done_ns',
    'published_ns',
    'planner_received_ns',
    'planner_solved_ns',
    'planner_published_ns',
)
BREAKDOWN = (
    ('  capture → committed (sensor delivery, modelled)', 'capture_ns', 'committed_ns'),
    ('  committed → fusion took it in (transport)', 'committed_ns', 'received_ns'),
    ('  taken in → inputs complete (alignment)', 'received_ns', 'inputs_complete_ns'),
    ('  inputs complete → inference done', 'inputs_complete_ns', 'inference_done_ns'),
    ('  inputs complete → objects published (fusion)', 'inputs_complete_ns', 'published_ns'),
    ('  objects published → planner took them (DDS)', 'published_ns', 'planner_received_ns'),
    ('  planner took them → solved', 'planner_received_ns', 'planner_solved_ns'),
    ('  solved → trajectory published', 'planner_solved_ns', 'planner_published_ns'),
)
E2E = 'camera → trajectory (end to end)'
COMMITTED_E2E = 'camera committed → trajectory published'
FUSION = 'fusion node (inputs complete → objects)'
OVERHEAD = 'camera → trajectory, less its inference'
#: A frame is on time when its trajectory is published within this of its capture.
ON_TIME_NS = 100_000_000

LEDGER_STAGES = (
    ('committed', "camera frames committed (the ring's sequence numbers, seen by the probe)"),
    ('transport_lost', 'lost in transport (committed, never delivered nor overrun)'),
    ('frames_overrun', 'overrun in the ring (policy: newest wins)'),
    ('frames_stale', 'slot rewritten before its descriptor was read (policy: newest wins)'),
    ('frames_bad_descriptor', 'descriptor unreadable'),
    ('frames_delivered', 'delivered to the fusion node'),
    ('frames_recovered', '… of which read from the ring after DDS dropped their descriptors'),
    ('frames_queue_dropped', "dropped by the aligner's queue bound (policy)"),
    ('frames_late', 'too late for the aligner (policy)'),
    ('frames_out_of_order', 'out of order'),
    ('frames_torn', 'torn under the network (detected; fused without the camera)'),
    ('frames_failed', 'failed in the worker'),
    ('frames_in_flight', 'still in flight at the end'),
    ('frames_fused', 'fused (objects published)'),
)
# The losses no configured bound (a drop policy) explains.
UNEXPLAINED = (
    'transport_lost',
    'frames_bad_descriptor',
    'frames_out_of_order',
    'frames_failed',
    'frames_in_flight',
)

#: Why a committed camera frame was not fused: the ledger's key and a short name (for a warning
#: line and the RESULT line), policies included (a ring overrun is a loss all the same).
LOSS_CAUSES = (
    ('transport_lost', 'transport'),
    ('frames_overrun', 'overrun'),
    ('frames_stale', 'stale'),
    ('frames_bad_descriptor', 'bad_descriptor'),
    ('frames_queue_dropped', 'queue_dropped'),
    ('frames_late', 'late'),
    ('frames_out_of_order', 'out_of_order'),
    ('frames_torn', 'torn'),
    ('frames_failed', 'failed'),
    ('frames_in_flight', 'in_flight'),
)


def losses(led: Mapping[str, Any]) -> dict[str, int]:
    """A run's lost frames by cause (only the causes that lost any), from its
    :func:`frame_ledger`; a surround rig's other cameras each as ``camera_<name>``."""
    if 'frames_delivered' not in led:  # no ledger from the fusion node: all of them
        return {'no_ledger': int(led.get('committed', 0))} if led.get('committed') else {}
    out = {name: int(led.get(key, 0)) for key, name in LOSS_CAUSES if led.get(key, 0)}
    for cam, entry in led.get('extra_cameras', {}).items():
        if entry.get('lost'):
            out[f'camera_{cam}'] = int(entry['lost'])
    return out


def loss_text(lost: Mapping[str, int]) -> str:
    """``overrun:16,torn:1`` (``none`` without a loss): one token for a RESULT line."""
    return ','.join(f'{k}:{v}' for k, v in lost.items()) or 'none'


def loss_line(run: str, lost: Mapping[str, int]) -> str:
    """The warning line naming every loss of ``run`` by cause."""
    causes = ', '.join(f'{k.replace("_", " ")} {v}' for k, v in lost.items())
    return f'{run} lost {sum(lost.values())} camera frames: {causes}'


def frame_ledger(
    committed: int,
    seen: int,
    ledger: Mapping[str, int],
    extra: Mapping[str, tuple[int, Mapping[str, int]]] = {},
) -> dict[str, Any]:
    """The run's frames stage by stage: ``committed`` frames (``seen``: those whose descriptor
    the recorder itself received) and the fusion node's own ``ledger``; ``extra``: a surround
    rig's other cameras, each (frames committed, its ledger entry). ``unexplained`` names the
    losses no configured bound explains."""
    led: dict[str, Any] = {
        'committed': committed,
        'probe_missed_descriptors': committed - seen,  # counted by their sequence
        **ledger,
    }
    if not ledger:
        led['unexplained'] = {'no frame ledger from the fusion node': committed}
        return led
    led['transport_lost'] = max(
        0,
        committed
        - led['frames_delivered']
        - led['frames_overrun']
        - led.get('frames_stale', 0)
        - led.get('frames_bad_descriptor', 0),
    )
    led['unexplained'] = {
        label: led[key] for key, label in LEDGER_STAGES if key in UNEXPLAINED and led.get(key)
    }
    # A surround rig's other cameras: a frame is used with its front frame, skipped with it
    # (the detector's period), torn, late (after its front frame stopped waiting for it:
    # sync.max_wait_s), or unmatched; unmatched frames beyond the front frames the aligner
    # dropped (their partners) are lost, as are those the transport lost.
    anchor_dropped = sum(
        led.get(k, 0) for k in ('frames_queue_dropped', 'frames_late', 'frames_out_of_order')
    )
    cameras: dict[str, dict[str, int]] = {}
    for name, (made, entry) in extra.items():
        e = dict(entry)
        e['committed'] = made
        e['transport_lost'] = max(0, made - e.get('delivered', 0) - e.get('overrun', 0))
        e['lost'] = (
            e['transport_lost']
            + max(0, e.get('unmatched', 0) - anchor_dropped)
            + e.get('failed', 0)
            + e.get('in_flight', 0)
        )
        cameras[name] = e
        if e['lost']:
            led['unexplained'][f'camera {name}: frames lost'] = e['lost']
    if cameras:
        led['extra_cameras'] = cameras
    return led


def _inference_ns(lineage: Mapping[str, Any]) -> int:
    done, start = lineage.get('inference_done_ns', 0), lineage.get('inputs_complete_ns', 0)
    return done - start if done and start else 0


def on_time_share(e2e_ns: Sequence[int], committed: int, warmup: int) -> float:
    """The share of the frames committed after the warm-up whose trajectory was published within
    :data:`ON_TIME_NS` of their capture; a frame that produced none (lost, or never planned on)
    counts as late. ``e2e_ns``: one end to end per frame that produced a trajectory."""
    frames = max(committed - warmup, len(e2e_ns))
    if frames <= 0:
        return float('nan')
    return sum(1 for t in e2e_ns if t <= ON_TIME_NS) / frames


def latency_samples(
    objects: Sequence[Mapping[str, Any]], plans: Sequence[Mapping[str, Any]], warmup: int
) -> dict[str, list[int]]:
    """Per stage, the run's latencies [ns] after its first ``warmup`` object lists: end to end
    (a frame's stamp to the first trajectory made from it), from the frame's commit to shared
    memory, inside the fusion node, and broken down by the stage stamps the trajectories carry
    (a stage a frame did not pass, no inference or no shared memory, is left out)."""
    fused = objects[warmup:]
    first = fused[0]['stamp_ns'] if fused else 0
    seen: set[int] = set()
    e2e, lineages = [], []
    for p in plans:  # the first plan made from each object list, after the warm-up
        st = p['objects_stamp_ns']
        if st and st >= first and st not in seen:
            seen.add(st)
            e2e.append(p['published_ns'] - st)
            lineages.append(p['lineage'])
    samples = {
        E2E: e2e,
        # the rt_fusion run's (a conventional frame carries no commit stamp)
        COMMITTED_E2E: [
            x['planner_published_ns'] - x['committed_ns']
            for x in lineages
            if x['committed_ns'] and x['planner_published_ns']
        ],
        'camera → objects': [m['published_ns'] - m['stamp_ns'] for m in fused],
        FUSION: [m['published_ns'] - m['inputs_complete_ns'] for m in fused],
        # What the graph adds around the detector: each frame's end to end less the time its
        # inference took (inputs complete → inference done; 0 where it was not inferred).
        OVERHEAD: [t - _inference_ns(x) for t, x in zip(e2e, lineages, strict=True)],
    }
    for label, a, b in BREAKDOWN:
        samples[label] = [x[b] - x[a] for x in lineages if x[a] and x[b]]
    return samples
