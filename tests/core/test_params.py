"""Parameter dataclasses: required values, types, ranges, choices, cross-field checks."""

from __future__ import annotations

import dataclasses

import pytest

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import build, fields, param


@dataclasses.dataclass(frozen=True)
class ExampleParams:
    frame_id: str = param('output frame')
    max_wait_s: float = param('longest wait', unit='s', default=0.05, low=0.0, high=1.0)
    ring_slots: int = param('slots in the ring', default=8, low=2, high=1024)
    transport: str = param('payload path', default='shm', choices=('shm', 'ros'))
    gains: tuple[float, ...] = param('gains', default=(1.0, 2.0), low=0.0)

    def check(self) -> None:
        if self.transport == 'ros' and self.ring_slots != 8:
            raise ParameterError('ring_slots', self.ring_slots, 'only 8 with transport: ros')


def test_build_fills_defaults_and_converts_ints_to_floats() -> None:
    p = build(ExampleParams, {'frame_id': 'cam', 'max_wait_s': 0, 'gains': [3, 4.5]})
    assert p == ExampleParams('cam', 0.0, 8, 'shm', (3.0, 4.5))
    assert isinstance(p.max_wait_s, float)


def test_missing_required_parameter_fails_with_its_name() -> None:
    with pytest.raises(ParameterError, match=r"'frame_id'.*required"):
        build(ExampleParams, {})


@pytest.mark.parametrize(
    ('values', 'name', 'reason'),
    [
        ({'max_wait_s': 2.0}, 'max_wait_s', r'<= 1.0 s'),
        ({'ring_slots': 1}, 'ring_slots', r'>= 2'),
        ({'ring_slots': 'many'}, 'ring_slots', 'expected int'),
        ({'ring_slots': True}, 'ring_slots', 'expected int'),
        ({'transport': 'udp'}, 'transport', 'one of'),
        ({'gains': [1.0, -1.0]}, 'gains', '>= 0.0'),
        ({'gains': 1.0}, 'gains', 'expected a list'),
        ({'transport': 'ros', 'ring_slots': 4}, 'ring_slots', 'only 8'),
        ({'max_wiat_s': 0.1}, 'max_wiat_s', 'unknown parameter'),
        ({'max_wait_s': float('nan')}, 'max_wait_s', 'finite'),  # passed every range check
        ({'gains': [1.0, float('inf')]}, 'gains', 'finite'),
    ],
)
def test_bad_values_fail_naming_the_parameter(values: dict, name: str, reason: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ParameterError, match=reason) as info:
        build(ExampleParams, {'frame_id': 'cam', **values})
    assert info.value.name == name


def test_fields_describe_units_and_required() -> None:
    by_name = {f.name: f for f in fields(ExampleParams)}
    assert by_name['frame_id'].required
    assert not by_name['max_wait_s'].required
    assert by_name['max_wait_s'].spec.describe() == 'longest wait [s]'
    assert by_name['gains'].item_kind is float
