"""Typed, documented, validated parameters, declared once per node as a frozen dataclass.

A node's parameters are one frozen dataclass whose fields are made with :func:`param`. The field
metadata (description, unit, range, choices) is what the node declares to rclpy (with a
``ParameterDescriptor``), what ``--help``-style documentation prints, and what
:func:`validate` checks. A field without a default must come from YAML: a missing value fails at
start-up with the parameter's name.

Example::

    @dataclasses.dataclass(frozen=True)
    class SyncParams:
        max_wait_s: float = param('longest wait for a late modality', unit='s', low=0.0, high=1.0,
                                  default=0.05)
        frame_id: str = param('frame of the fused output')   # required: no default
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from rt_fusion.core.errors import ParameterError

_META = 'rt_fusion_param'
SCALAR_TYPES = (bool, int, float, str)
T = TypeVar('T')


@dataclasses.dataclass(frozen=True, slots=True)
class ParamSpec:
    """What is known of one parameter: its documentation and its allowed values."""

    description: str
    unit: str = ''
    low: float | None = None
    high: float | None = None
    choices: tuple[object, ...] = ()
    calibration: bool = False  # a measured property of one vehicle: its default fits none

    def describe(self) -> str:
        """One line for a ParameterDescriptor's description or a help table."""
        text = self.description
        if self.unit:
            text += f' [{self.unit}]'
        if self.choices:
            text += f' (one of {", ".join(map(str, self.choices))})'
        return text


def param(
    description: str,
    *,
    unit: str = '',
    default: Any = dataclasses.MISSING,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[object] = (),
    calibration: bool = False,
) -> Any:
    """A dataclass field that is a node parameter. No ``default``: the value must come from YAML.

    List defaults are stored as tuples (frozen dataclasses need hashable defaults).
    ``calibration``: a mounting or intrinsic of one vehicle; the default serves the generated
    scenarios, and a node left on it says so at start-up.
    """
    spec = ParamSpec(description, unit, low, high, tuple(choices), calibration)
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata={_META: spec})


@dataclasses.dataclass(frozen=True, slots=True)
class ParamField:
    """One parameter field of a parameter dataclass."""

    name: str
    spec: ParamSpec
    default: Any  # dataclasses.MISSING when required
    kind: type  # bool, int, float, str or tuple
    item_kind: type | None  # element type of a tuple field

    @property
    def required(self) -> bool:
        """True when the value must come from the parameter file."""
        return self.default is dataclasses.MISSING


def fields(cls: type) -> tuple[ParamField, ...]:
    """The parameter fields of a parameter dataclass, in declaration order (cached: a node's
    start reads them twice per class, ``typing.get_type_hints`` being the slow part)."""
    return _fields(cls)


@functools.cache
def _fields(cls: Any) -> tuple[ParamField, ...]:
    hints = typing.get_type_hints(cls)
    out: list[ParamField] = []
    for field in dataclasses.fields(cls):
        spec = field.metadata.get(_META)
        if spec is None:
            continue
        hint = hints[field.name]
        if typing.get_origin(hint) is tuple:
            args = typing.get_args(hint)
            if not args or args[0] not in SCALAR_TYPES:
                raise TypeError(f'parameter {field.name!r}: use tuple[float, ...] and the like')
            out.append(ParamField(field.name, spec, field.default, tuple, args[0]))
        elif hint in SCALAR_TYPES:
            out.append(ParamField(field.name, spec, field.default, hint, None))
        else:
            raise TypeError(f'parameter field {field.name!r} has unsupported type {hint!r}')
    return tuple(out)


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """Makes the parameter dataclass from raw values, converts lists to tuples, and validates.

    Raises:
        ParameterError: a required value is missing, has the wrong type, or is out of range.
    """
    kwargs: dict[str, Any] = {}
    known = set()
    for field in fields(cls):
        name = field.name
        known.add(name)
        if name not in values or values[name] is None:
            if field.required:
                raise ParameterError(name, None, 'required (no default): set it in the YAML file')
            continue
        value = values[name]
        if field.kind is tuple:
            if not isinstance(value, (list, tuple)):
                raise ParameterError(name, value, 'expected a list')
            assert field.item_kind is not None
            value = tuple(_convert(name, item, field.item_kind) for item in value)
        else:
            value = _convert(name, value, field.kind)
        kwargs[name] = value
    unknown = sorted(set(values) - known)
    if unknown:
        raise ParameterError(
            unknown[0], values[unknown[0]], f'unknown parameter of {cls.__name__}'
        )
    obj = cls(**kwargs)
    validate(obj)
    return obj


def _convert(name: str, value: Any, kind: type) -> Any:
    """Checks a scalar's type; ints are accepted where floats are expected."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ParameterError(name, value, f'expected {kind.__name__}')
    if isinstance(value, float) and not math.isfinite(value):
        # `.nan` in YAML passes every range check (NaN compares false) and then, e.g. as a
        # polling period, spins a core: no parameter of ours means anything by it.
        raise ParameterError(name, value, 'must be a finite number (not NaN or infinity)')
    return value


def validate(obj: object) -> None:
    """Checks every parameter field of ``obj`` against its range and choices.

    Raises:
        ParameterError: for the first field out of range, naming it.
    """
    for field in fields(type(obj)):
        name, spec = field.name, field.spec
        value = getattr(obj, name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if spec.choices and item not in spec.choices:
                raise ParameterError(name, value, f'must be one of {list(spec.choices)}')
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                if spec.low is not None and item < spec.low:
                    raise ParameterError(name, value, f'must be >= {spec.low} {spec.unit}'.strip())
                if spec.high is not None and item > spec.high:
                    raise ParameterError(
                        name, value, f'must be <= {spec.high} {spec.unit}'.strip()
                    )
    check = getattr(obj, 'check', None)
    if callable(check):
        check()
