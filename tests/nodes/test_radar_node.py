"""radar_node as a real process on a CAN bus shared between processes (python-can udp_multicast),
fed by the real ARS408 candump log played at its recorded timing (sped up)."""

from __future__ import annotations

import pytest

from rt_fusion.core.linux import can_udp_port
from tests.conftest import ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

LOG = 'radar_ars408/candump-2026-06-24_154259.log'
GROUP = '239.74.163.2'


def _radar(procs: ProcGroup, port: int, *params: str) -> object:
    return procs.node(
        'radar_node',
        '-r',
        '__node:=radar',
        '-p',
        'interface:=udp_multicast',
        '-p',
        f'channel:={GROUP}',
        '-p',
        f'port:={port}',
        *params,
        name='radar',
    )


def test_every_cycle_of_the_real_log_is_published(procs: ProcGroup) -> None:
    log = shared_file(LOG)
    port = can_udp_port()
    echo = procs.echo(
        '/radar/out/objects',
        'rt_fusion_msgs/msg/RadarObjects',
        '--depth',
        '1000',
        '--idle',
        '10',
        '--timeout',
        '180',
        '--matched',
        '1',
    )
    # Reliable here (a qos override, as a vehicle's parameter file would set it): the test is of
    # the decoding, and a loaded machine drops best-effort samples on loopback (35 of 515 once).
    radar = _radar(
        procs, port, '-p', 'configure_sensor:=false', '-p', 'ego_rate_hz:=0.0',
        '-p', 'qos_overrides./radar/out/objects.publisher.reliability:=reliable',
        '-p', 'qos_overrides./radar/out/objects.publisher.depth:=1000',
    )  # fmt: skip
    # The radar's publisher is created after its bus is open: once both sides have matched (the
    # echo says so; the radar logs its side), every frame sent from here on is received (a
    # loaded machine can take many seconds to get there).
    echo.read_until('MATCHED', 90)
    assert radar.wait_stderr('objects output matched: 1 subscriber(s)', 90)
    replay = procs.tool(
        'can_replay.py',
        str(log),
        '-i',
        'udp_multicast',
        '-c',
        GROUP,
        '--port',
        str(port),
        '--rate',
        '8',
        '--quiet',
    )
    assert replay.read_until('RESULT', 90)[1].startswith('RESULT frames=9579')
    msgs, summary = echo.messages(60)
    assert summary['received'] == len(msgs) == 515
    assert all(m['complete'] for m in msgs)
    assert [m['output_type'] for m in msgs[:1]] == ['objects']
    first = msgs[0]
    assert first['measurement_counter'] == 64503
    assert [round(o['position']['x'], 1) for o in first['objects']] == [5.6, 11.4, 17.6]
    assert first['objects'][1]['object_class'] == 1  # car
    stamps = [m['header']['stamp']['sec'] * 10**9 + m['header']['stamp']['nanosec'] for m in msgs]
    assert stamps == sorted(stamps)
    radar.stop()


@pytest.mark.parametrize('wrong', [False, True], ids=['echo-matches', 'echo-differs'])
def test_sensor_configuration_is_sent_and_its_echo_checked(procs: ProcGroup, wrong: bool) -> None:
    log = shared_file(LOG)
    port = can_udp_port()
    sensor = procs.tool(
        'can_replay.py',
        str(log),
        '-i',
        'udp_multicast',
        '-c',
        GROUP,
        '--port',
        str(port),
        '--answer-config',
        '0',
        '--wait-config',
        '20',
        '--limit',
        '100',
        '--quiet',
        *(['--answer-wrong'] if wrong else []),
    )
    radar = _radar(
        procs,
        port,
        '-p',
        'configure_sensor:=true',
        '-p',
        'require_echo:=true',
        '-p',
        'echo_timeout_s:=15.0',
        '-p',
        'max_distance:=250.0',
    )
    if wrong:
        assert radar.wait(60) == 2, radar.stderr[-20:]
        assert any(
            'did not take its configuration' in line and 'max_distance_m' in line
            for line in radar.stderr
        ), radar.stderr[-20:]
    else:
        diag = procs.echo(
            '/diagnostics',
            'diagnostic_msgs/msg/DiagnosticArray',
            '--count',
            '1',
            '--timeout',
            '60',  # configure waits up to echo_timeout_s for the echo first
        )
        msgs, _ = diag.messages(70)
        assert msgs, f'no diagnostics; radar exit={radar.popen.poll()} stderr:\n' + '\n'.join(
            radar.stderr[-20:]
        )
        (msg,) = msgs
        values = {kv['key']: kv['value'] for kv in msg['status'][0]['values']}
        assert msg['status'][0]['level'] == 0, msg['status'][0]['message']
        # The echo matched (require_echo would have stopped the node); the log played after it
        # carries the real sensor's own states (200 m), which diagnostics show from then on.
        assert 'state.max_distance_m' in values
        assert radar.popen.poll() is None
    sensor.stop()


def test_bad_can_interface_fails_at_start_with_its_name(procs: ProcGroup) -> None:
    radar = procs.node('radar_node', '-p', 'interface:=socketcan', '-p', 'channel:=can_nope')
    assert radar.wait(30) == 2
    assert any("channel 'can_nope'" in line for line in radar.stderr)


def test_datagrams_the_bus_cannot_unpack_are_counted_not_fatal(procs: ProcGroup) -> None:
    """An RTPS packet on the CAN bus's UDP port (DDS shares the port space) while the radar is
    being configured: the node counts it as a bus error and comes up (it died on one in CI)."""
    import socket  # noqa: PLC0415
    import threading  # noqa: PLC0415

    port = can_udp_port()
    stop = threading.Event()

    def garbage() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            while not stop.wait(0.02):  # paced: a steady trickle of foreign datagrams
                sock.sendto(b'RTPS\x02\x03\x01\x0f' + bytes(40), (GROUP, port))

    sender = threading.Thread(target=garbage, daemon=True)
    sender.start()
    try:
        diag = procs.echo(
            '/diagnostics',
            'diagnostic_msgs/msg/DiagnosticArray',
            '--count',
            '1',
            '--timeout',
            '60',
        )
        radar = _radar(
            procs,
            port,
            *('-p', 'configure_sensor:=true', '-p', 'require_echo:=false'),
            *('-p', 'echo_timeout_s:=2.0', '-p', 'ego_rate_hz:=0.0'),
        )
        msgs, _ = diag.messages(70)
        assert msgs, f'radar exit={radar.popen.poll()}:\n' + '\n'.join(radar.stderr[-20:])
        values = {kv['key']: kv['value'] for kv in msgs[0]['status'][0]['values']}
        assert int(values['bus_errors']) > 0, values
        assert radar.popen.poll() is None
    finally:
        stop.set()
        sender.join()
