"""ARS408 decoding: the project's DBC against the real one, the real candump log, faults."""

from __future__ import annotations

import itertools
import math

import can
import cantools
import numpy as np
import pytest

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.protocols.ars408 import (
    CLUSTER_GENERAL,
    CLUSTER_QUALITY,
    CLUSTER_STATUS,
    OBJ_GENERAL,
    OBJ_STATUS,
    Ars408Decoder,
    RadarConfig,
    RadarCycle,
    RadarState,
    load_database,
    rms_bound,
)
from tests.conftest import shared_file

LOG = 'radar_ars408/candump-2026-06-24_154259.log'


def _frames() -> list[can.Message]:
    return list(can.LogReader(str(shared_file(LOG))))


def _decode(
    frames: list[can.Message], decoder: Ars408Decoder, offset: int = 0
) -> list[RadarCycle]:
    cycles = []
    for m in frames:
        for ev in decoder.feed(m.arbitration_id + offset, bytes(m.data), round(m.timestamp * 1e9)):
            if isinstance(ev, RadarCycle):
                cycles.append(ev)
    return cycles


def test_project_dbc_agrees_with_the_real_dbc() -> None:
    real = cantools.database.load_file(
        str(shared_file('radar_ars408/ARS408_id0.old.dbc')), strict=False
    )
    ours = load_database(0)
    compared = 0
    for message in ours.messages:
        try:
            theirs = real.get_message_by_frame_id(message.frame_id)
        except KeyError:
            continue
        mine = {s.name: s for s in message.signals}
        for sig in theirs.signals:
            assert sig.name in mine, f'{message.name}: {sig.name} missing from our DBC'
            m = mine[sig.name]
            assert (m.start, m.length, m.byte_order, m.is_signed) == (
                sig.start,
                sig.length,
                sig.byte_order,
                sig.is_signed,
            ), sig.name
            assert (m.scale, m.offset) == pytest.approx((sig.scale, sig.offset)), sig.name
            compared += 1
        assert message.length == theirs.length, message.name
    # Every signal the real DBC has for these messages, 12 messages; ours adds what the old DBC
    # lacks: Obj_ArelLong / Obj_ArelLat (0x60D) and RadarDevice_YawRate (0x301).
    assert compared >= 90
    assert {s.name for s in ours.get_message_by_frame_id(0x60D).signals} >= {
        'Obj_ArelLong',
        'Obj_ArelLat',
    }


def test_real_log_decodes_to_515_complete_cycles_with_the_three_stationary_objects() -> None:
    decoder = Ars408Decoder(0)
    cycles = _decode(_frames(), decoder) + [
        c for c in decoder.flush() if isinstance(c, RadarCycle)
    ]
    assert len(cycles) == 515
    assert all(c.complete for c in cycles)
    assert decoder.stats.decode_errors == decoder.stats.orphans == decoder.stats.stray == 0
    first = cycles[0]
    assert first.meas_counter == 64503
    assert [round(t.x, 1) for t in first.targets] == [5.6, 11.4, 17.6]
    assert all(t.dyn_prop == 1 and t.vx == 0.0 for t in first.targets)  # stationary, parked car
    assert first.targets[0].prob_exist == 1.0
    assert first.targets[1].obj_class == 1  # car
    assert decoder.state is not None and decoder.state.errors == ()
    assert decoder.version is not None and decoder.version.major == 4
    # The counter advances by 2 per cycle (this sensor skips odd values), and wraps.
    steps = {(b.meas_counter - a.meas_counter) % 65536 for a, b in itertools.pairwise(cycles)}
    assert steps == {2}


def test_sensor_id_shifts_every_frame_id() -> None:
    frames = _frames()[:500]
    shifted = _decode(frames, Ars408Decoder(3), offset=0x30)
    plain = _decode(frames, Ars408Decoder(0))
    assert [(c.meas_counter, len(c.targets)) for c in shifted] == [
        (c.meas_counter, len(c.targets)) for c in plain
    ]
    other = Ars408Decoder(0)
    assert _decode(frames, other, offset=0x30) == []
    assert other.stats.foreign == 500


def test_malformed_frames_are_counted_and_the_cycles_around_them_survive() -> None:
    # After every 7th real frame, a short (wrong-length) frame with a radar ID.
    rng = np.random.default_rng(0)
    frames = _frames()
    mixed, injected = [], 0
    for i, m in enumerate(frames):
        mixed.append(m)
        if i % 7 == 0:
            ident = int(rng.choice([OBJ_STATUS, OBJ_GENERAL, 0x60C, 0x60D, 0x201]))
            mixed.append(
                can.Message(
                    arbitration_id=ident,
                    data=bytes(int(rng.integers(0, 3))),
                    timestamp=m.timestamp,
                )
            )
            injected += 1
    decoder = Ars408Decoder(0)
    cycles = _decode(mixed, decoder)
    assert decoder.stats.decode_errors == injected
    assert len(cycles) >= 514 and all(c.complete for c in cycles)


def test_next_cycle_starting_early_flags_the_open_one_incomplete() -> None:
    db = load_database(0)
    status = db.get_message_by_frame_id(OBJ_STATUS)
    general = db.get_message_by_frame_id(OBJ_GENERAL)
    dec = Ars408Decoder(0, expect_quality=False, expect_extended=False)
    g = {
        'Obj_ID': 4,
        'Obj_DistLong': 10.0,
        'Obj_DistLat': 0.0,
        'Obj_VrelLong': 0.0,
        'Obj_VrelLat': 0.0,
        'Obj_DynProp': 1,
        'Obj_RCS': 0.0,
    }
    s = {'Obj_NofObjects': 2, 'Obj_MeasCounter': 7, 'Obj_InterfaceVersion': 1}
    assert dec.feed(OBJ_STATUS, status.encode(s), 100) == []
    assert dec.feed(OBJ_GENERAL, general.encode(g), 110) == []
    (cut,) = dec.feed(OBJ_STATUS, status.encode(s | {'Obj_MeasCounter': 8}), 200)
    assert isinstance(cut, RadarCycle)
    assert (cut.complete, cut.meas_counter, len(cut.targets), cut.expected) == (False, 7, 1, 2)
    dec.feed(OBJ_GENERAL, general.encode(g), 210)
    (done,) = dec.feed(OBJ_GENERAL, general.encode(g | {'Obj_ID': 5}), 220)
    assert done.complete and [t.id for t in done.targets] == [4, 5]
    assert (done.stamp_ns, done.last_ns) == (200, 220)
    assert dec.stats.incomplete == 1


def test_cluster_cycle_with_quality() -> None:
    db = load_database(0)
    dec = Ars408Decoder(0)
    status = db.get_message_by_frame_id(CLUSTER_STATUS)
    gen = db.get_message_by_frame_id(CLUSTER_GENERAL)
    qual = db.get_message_by_frame_id(CLUSTER_QUALITY)
    dec.feed(
        CLUSTER_STATUS,
        status.encode(
            {
                'Cluster_NofClustersNear': 2,
                'Cluster_NofClustersFar': 1,
                'Cluster_MeasCounter': 9,
                'Cluster_InterfaceVersion': 0,
            }
        ),
        0,
    )
    events = []
    for k in range(3):
        events += dec.feed(
            CLUSTER_GENERAL,
            gen.encode(
                {
                    'Cluster_ID': k,
                    'Cluster_DistLong': 10.0 + k,
                    'Cluster_DistLat': -1.0,
                    'Cluster_VrelLong': -2.5,
                    'Cluster_VrelLat': 0.0,
                    'Cluster_DynProp': 0,
                    'Cluster_RCS': 5.0,
                }
            ),
            10 + k,
        )
    assert events == []
    for k in range(3):
        events += dec.feed(
            CLUSTER_QUALITY,
            qual.encode(
                {
                    'Cluster_ID': k,
                    'Cluster_DistLong_rms': 0,
                    'Cluster_DistLat_rms': 30,
                    'Cluster_VrelLong_rms': 31,
                    'Cluster_VrelLat_rms': 5,
                    'Cluster_PdH0': 1,
                    'Cluster_AmbigState': 4,
                    'Cluster_InvalidState': 0,
                }
            ),
            20 + k,
        )
    (cycle,) = events
    assert cycle.kind == 'clusters' and cycle.complete and cycle.expected == 3
    assert [t.x for t in cycle.targets] == pytest.approx([10.0, 11.0, 12.0])
    t = cycle.targets[0]
    assert t.vx == -2.5 and t.x_rms == pytest.approx(0.005) and t.y_rms == pytest.approx(10.0)
    assert math.isnan(t.vx_rms) and t.ambig_state == 4


def test_configuration_frame_round_trips_and_the_echo_is_checked() -> None:
    dec = Ars408Decoder(2)
    cfg = RadarConfig(
        output_type='clusters',
        max_distance_m=250.0,
        sensor_id=2,
        rcs_threshold='high_sensitivity',
        send_ext_info=False,
    )
    frame_id, data = dec.encode_config(cfg)
    assert frame_id == 0x220
    decoded = load_database(2).decode_message(frame_id, data, decode_choices=False)
    assert decoded['RadarCfg_MaxDistance'] == 250 and decoded['RadarCfg_OutputType'] == 2
    assert decoded['RadarCfg_RCS_Threshold'] == 1 and decoded['RadarCfg_SendExtInfo'] == 0
    echo = RadarState(250.0, 2, 2, 0, True, False, 1, 1, False, 0, True, True, ())
    assert cfg.mismatches(echo) == []
    wrong = RadarState(200.0, 2, 1, 0, True, False, 1, 1, False, 0, True, True, ())
    assert len(cfg.mismatches(wrong)) == 2
    with pytest.raises(ParameterError, match='max_distance'):
        dec.encode_config(RadarConfig(max_distance_m=50.0))


def test_ego_motion_frames() -> None:
    dec = Ars408Decoder(0)
    db = load_database(0)
    fid, data = dec.encode_speed(-10.0)
    s = db.decode_message(fid, data, decode_choices=False)
    assert (fid, s['RadarDevice_SpeedDirection']) == (0x300, 2)  # backward
    assert s['RadarDevice_Speed'] == pytest.approx(10.0)
    fid, data = dec.encode_yaw_rate(0.1)
    assert fid == 0x301
    assert db.decode_message(fid, data)['RadarDevice_YawRate'] == pytest.approx(5.73, abs=0.01)


def test_rms_codes_map_to_the_sensor_tables() -> None:
    assert rms_bound(0, 0.005, 10.0) == pytest.approx(0.005)
    assert rms_bound(3, 0.005, 10.0) == pytest.approx(0.011, abs=0.0005)  # "<0.011 m"
    assert rms_bound(30, 0.005, 10.0) == pytest.approx(10.0)
    assert math.isnan(rms_bound(31, 0.005, 10.0))


def test_100k_random_frames_never_crash_the_decoder_and_are_all_accounted_for() -> None:
    rng = np.random.default_rng(42)
    dec = Ars408Decoder(0)
    ids = np.array(
        [
            0x200,
            0x201,
            0x300,
            0x301,
            0x600,
            0x60A,
            0x60B,
            0x60C,
            0x60D,
            0x700,
            0x701,
            0x702,
            0x123,
            0x7FF,
        ]
    )
    for _ in range(100_000):
        ident = int(rng.choice(ids)) if rng.random() < 0.9 else int(rng.integers(0, 0x800))
        data = rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8).tobytes()
        dec.feed(ident, data, 0)
    s = dec.stats
    assert s.frames == 100_000
    assert s.decode_errors > 10_000 and s.foreign > 0
