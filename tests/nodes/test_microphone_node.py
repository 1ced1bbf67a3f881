"""microphone_node as a real process, capturing through PortAudio from an ALSA ``file`` PCM defined
in a test-local .asoundrc whose input is a FIFO fed with the real audio clips."""

from __future__ import annotations

import itertools
import os
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, ProcGroup, shared_file

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration


def _rig(tmp_path: Path, clip: str) -> tuple[Path, Path, np.ndarray, int, int]:
    """(HOME with the .asoundrc, FIFO, samples, rate, channels) for one clip."""
    with wave.open(str(shared_file(f'audio/{clip}'))) as w:
        rate, channels = w.getframerate(), w.getnchannels()
        raw = w.readframes(w.getnframes())
    (tmp_path / 'clip.raw').write_bytes(raw)
    fifo = tmp_path / 'capture.fifo'
    os.mkfifo(fifo)
    (tmp_path / '.asoundrc').write_text(f"""
pcm.rtf_mic {{
    type file
    slave.pcm "null"
    file "/dev/null"
    infile "{fifo}"
    format "raw"
    hint {{ show on description "rt_fusion test microphone" }}
}}
""")
    samples = np.frombuffer(raw, np.int16).reshape(-1, channels)
    return tmp_path, fifo, samples, rate, channels


def _feeder(procs: ProcGroup, fifo: Path, raw: Path, *args: str) -> object:
    feeder = procs.spawn(
        [sys.executable, str(ROOT / 'tools' / 'alsa_feeder.py'), str(fifo), str(raw), *args],
        'feeder',
    )
    assert feeder.read_line(10) == 'OPEN'
    return feeder


def _mic(procs: ProcGroup, home: Path, rate: int, channels: int, *params: str) -> object:
    return procs.node(
        'microphone_node',
        '-r',
        '__node:=mic',
        '-p',
        'device:=rtf_mic',
        '-p',
        f'sample_rate:={rate}',
        '-p',
        f'channels:={channels}',
        '-p',
        'block_size:=1024',
        '-p',
        'inline_samples:=true',
        '-p',
        'segment:=rt_fusion_test_mic',
        *params,
        env={'HOME': str(home)},
        name='mic',
    )


def test_samples_arrive_bit_exact_and_in_order(procs: ProcGroup, tmp_path: Path) -> None:
    home, fifo, samples, rate, channels = _rig(tmp_path, 'car-horn.wav')
    n_blocks = samples.shape[0] // 1024  # whole blocks of the clip
    echo = procs.echo(
        '/mic/out/audio',
        'rt_fusion_msgs/msg/AudioChunk',
        '--count',
        str(n_blocks),
        '--timeout',
        '180',
    )
    _feeder(procs, fifo, tmp_path / 'clip.raw', '--pace-bytes-per-s', str(rate * channels * 2))
    # The stream starts once the echo subscribes (the FIFO holds the clip until then): a loaded
    # machine took longer to discover than the fixed start delay, and lost the first blocks.
    _mic(
        procs,
        home,
        rate,
        channels,
        *('-p', 'stall_s:=30.0', '-p', 'wait_subscribers_s:=120.0'),
    )
    msgs, summary = echo.messages(180)
    assert summary['received'] == n_blocks
    got = np.concatenate([np.array(m['samples'], np.int16).reshape(-1, channels) for m in msgs])
    assert np.array_equal(got, samples[: got.shape[0]])  # bit-exact, in order, none lost
    assert [m['first_sample_index'] for m in msgs] == [1024 * k for k in range(n_blocks)]
    stamps = [m['header']['stamp']['sec'] * 10**9 + m['header']['stamp']['nanosec'] for m in msgs]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    # the explicit name, scoped by the ROS domain
    assert (
        msgs[0]['frame']['segment']
        == f'rt_fusion_d{procs.env["ROS_DOMAIN_ID"]}_rt_fusion_test_mic'
    )
    assert msgs[0]['frame']['shape'] == [1024, channels]
    assert {m['stamp_source'] for m in msgs} == {'adc'}


def test_a_silent_device_is_reported_and_reopened(procs: ProcGroup, tmp_path: Path) -> None:
    home, fifo, _samples, rate, channels = _rig(tmp_path, 'car-horn.wav')
    diag = procs.echo('/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', '--timeout', '12')
    _feeder(procs, fifo, tmp_path / 'clip.raw', '--stall-after', str(200 * 1024), '--stall-s', '4')
    _mic(procs, home, rate, channels, '-p', 'stall_s:=1.0', '-p', 'diagnostics_period_s:=0.3')
    statuses = [s for m in diag.messages(30)[0] for s in m['status'] if 'microphone' in s['name']]
    assert any(s['level'] == 2 and 'no audio block' in s['message'] for s in statuses)
    values = {kv['key']: kv['value'] for kv in statuses[-1]['values']}
    assert int(values['reconnects']) >= 1
    assert int(values['blocks']) > 0
