"""The soak's leak measure: files held beyond their earlier peak, read from a real process."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from rt_fusion.ros.harness import processes


def test_a_file_opened_once_more_per_sample_is_a_leak_and_one_held_part_of_the_time_is_not(
    tmp_path: Path,
) -> None:
    bag, log = tmp_path / 'bag.mcap', tmp_path / 'leak.log'
    bag.write_bytes(b'x')
    log.write_bytes(b'x')
    # A real process: each line it reads opens the leaked file once more, and the bag only on
    # some lines (a looped bag caught between two passes).
    child = subprocess.Popen(
        [
            sys.executable,
            '-c',
            (
                'import sys\n'
                'held, bag = [], None\n'
                'for line in sys.stdin:\n'
                f'    held.append(open({str(log)!r}))\n'
                f'    bag = open({str(bag)!r}) if line.strip() == "bag" else None\n'
                '    print("ok", flush=True)\n'
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    samples: list[dict[str, Counter[str]]] = []
    try:
        for line in ('bag', 'none', 'bag', 'none'):
            child.stdin.write(line + '\n')
            child.stdin.flush()
            assert child.stdout.readline().strip() == 'ok'
            samples.append({'node': processes.process_stats(child.pid, reads=1)[1]})
    finally:
        child.kill()
        child.wait()
    # The last sample holds no bag, the one before it one: the plain difference of two samples
    # would call the bag a leak or a shrink depending on the phase; the peak measure never does.
    grown = processes.fds_beyond_peak(samples[:-1], samples[-1])
    assert grown == {'node': {str(log): 1}}
    grown_with_bag = processes.fds_beyond_peak(samples[1:2], samples[2])
    assert grown_with_bag == {'node': {str(bag): 1, str(log): 1}}
