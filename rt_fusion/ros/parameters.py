"""Parameters of the nodes: declared from core dataclasses (typed, described, ranged), read
under a prefix, a parameter file section checked against a node's groups, and unknown names
refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from rcl_interfaces.msg import IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from rt_fusion.core import params
from rt_fusion.core.errors import ParameterError

T = TypeVar('T')


_SCALAR = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
}


_ARRAY = {
    bool: Parameter.Type.BOOL_ARRAY,
    int: Parameter.Type.INTEGER_ARRAY,
    float: Parameter.Type.DOUBLE_ARRAY,
    str: Parameter.Type.STRING_ARRAY,
}
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _as_text(value: Any) -> Any:
    """A string parameter given as a number (``device:=99``) as its text; others unchanged."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _descriptor(field: params.ParamField, live: bool = False) -> ParameterDescriptor:
    spec = field.spec
    # Read once at configure unless the node applies it live (``ros2 param set`` is refused,
    # with a reason, rather than reported done and ignored).
    desc = ParameterDescriptor(description=spec.describe(), read_only=not live)
    kind = field.item_kind if field.kind is tuple else field.kind
    # Floats accept integers written in YAML (`rate: 30`); the core converts and checks them.
    # A string accepts a number (`-p device:=99`, an index): read back as its text.
    desc.dynamic_typing = kind is float or (
        kind is str and field.kind is not tuple and not field.required
    )
    if spec.low is not None or spec.high is not None:
        if kind is int:
            desc.integer_range = [
                IntegerRange(
                    from_value=int(spec.low) if spec.low is not None else _INT_MIN,
                    to_value=int(spec.high) if spec.high is not None else _INT_MAX,
                    step=0,
                )
            ]
        elif kind is float:
            desc.additional_constraints = (
                f'range [{spec.low if spec.low is not None else "-inf"}, '
                f'{spec.high if spec.high is not None else "inf"}]'
            )
    if spec.choices:
        desc.additional_constraints = f'one of {list(spec.choices)}'
    return desc


def warn_uncalibrated(
    node: Node, cls: type, prefix: str = '', covered: Iterable[str] = ()
) -> None:
    """Says which calibration parameters of ``cls`` the node is left on their defaults for: set
    neither in its parameter file nor by another source (``covered``: field names)."""
    skip = set(covered)
    defaulted = [
        prefix + f.name
        for f in params.fields(cls)
        if f.spec.calibration
        and f.name not in skip
        and prefix + f.name not in node._parameter_overrides
    ]
    if defaulted:
        node.get_logger().warning(
            "vehicle calibration not set, on the generated scenarios' defaults: "
            + ', '.join(defaulted)
            + (' (set them in the calibration file or' if skip else ' (set them in')
            + ' the parameter file)'
        )


def declare_params(
    node: Node, cls: type[T], prefix: str = '', live: bool = False, warn: bool = True
) -> T:
    """Declares every field of the parameter dataclass ``cls`` on ``node`` and reads it back.

    Fields without a default are declared without a value: a parameter file must set them.
    ``live``: the node applies new values while it runs (:func:`apply_live`); otherwise the
    parameters are read-only. ``warn``: say which calibration parameters are left on their
    defaults (false: the node says it, knowing its other sources).

    Raises:
        ParameterError: naming the parameter that is missing, mistyped or out of range.
    """
    values: dict[str, Any] = {}
    for field in params.fields(cls):
        name = prefix + field.name
        kind = field.item_kind if field.kind is tuple else field.kind
        assert kind is not None
        ptype = (_ARRAY if field.kind is tuple else _SCALAR)[kind]
        try:
            if node.has_parameter(name):  # configured before (lifecycle re-configure): re-read
                values[field.name] = node.get_parameter(name).value
                if kind is str and field.kind is not tuple:
                    values[field.name] = _as_text(values[field.name])
                continue
            if field.kind is tuple and not field.default and kind is float:
                # An empty list of floats: untyped and unset (dynamic typing, so that a file's
                # `[2, 1.5]` is taken as floats too; the core converts and checks).
                node.declare_parameter(name, None, _descriptor(field, live))
                value = node.get_parameter(name).value
                values[field.name] = field.default if value is None else value
                continue
            if field.required or (field.kind is tuple and not field.default):
                # An empty list has no element type: declare it typed, unset.
                node.declare_parameter(name, ptype, _descriptor(field, live))
            else:
                default = list(field.default) if field.kind is tuple else field.default
                node.declare_parameter(name, default, _descriptor(field, live))
            values[field.name] = node.get_parameter(name).value
            if kind is str and field.kind is not tuple:
                values[field.name] = _as_text(values[field.name])
        except ParameterUninitializedException:
            values[field.name] = None if field.required else field.default
        except (InvalidParameterValueException, InvalidParameterTypeException) as err:
            raise ParameterError(name, None, str(err)) from err
    if warn:
        warn_uncalibrated(node, cls, prefix)
    try:
        return params.build(cls, values)
    except ParameterError as err:
        raise ParameterError(prefix + err.name, err.value, err.reason) from err


@contextlib.contextmanager
def param_prefix(prefix: str) -> Iterator[None]:
    """Re-raises a ParameterError from a parameter group's later checks under its full name."""
    try:
        yield
    except ParameterError as err:
        if err.name.startswith(prefix):
            raise
        raise ParameterError(prefix + err.name, err.value, err.reason) from err


ParamGroups = tuple[tuple[type, str], ...]  # (parameter dataclass, name prefix) of a node


def check_param_section(groups: ParamGroups, section: Mapping[str, Any]) -> list[object]:
    """Validates one node's ``ros__parameters`` (nested YAML mapping) without starting it.

    Returns the built parameter objects, one per group.

    Raises:
        ParameterError: naming the first unknown, mistyped or out-of-range parameter.
    """
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(f'{prefix}{key}.', item)
        else:
            flat[prefix[:-1]] = value

    walk('', section)
    built: list[object] = []
    # Longest prefix first, so 'planner.x' is not taken by the '' group.
    claimed: set[str] = set()
    for cls, prefix in sorted(groups, key=lambda g: -len(g[1])):
        values = {
            k[len(prefix) :]: v
            for k, v in flat.items()
            if k.startswith(prefix) and k not in claimed
        }
        if prefix == '':
            values = {k: v for k, v in values.items() if k not in _FOREIGN_PARAMS}
        claimed |= {prefix + k for k in values}
        try:
            built.append(params.build(cls, values))
        except ParameterError as err:
            raise ParameterError(prefix + err.name, err.value, err.reason) from err
    return built


# Set on every node by rclpy or ros2 launch, not by us.
_FOREIGN_PARAMS = ('use_sim_time', 'start_type_description_service', 'autostart')


def reject_unknown_params(node: Node) -> None:
    """Fails on a parameter given to ``node`` (YAML file, ``-p``) that it never declared.

    rclpy silently ignores such overrides, so a misspelt name in a parameter file would leave the
    default in force without a word; here it stops the start-up instead.

    Raises:
        ParameterError: naming the first unknown parameter.
    """
    for name, value in sorted(node._parameter_overrides.items()):
        if (
            node.has_parameter(name)
            or name in _FOREIGN_PARAMS
            or name.startswith('qos_overrides.')
        ):
            continue
        raise ParameterError(
            name,
            value.value,
            f'unknown parameter of node {node.get_name()!r} (misspelt? '
            f'`ros2 param list /{node.get_name()}` shows the known ones)',
        )


def apply_live(node: Node, groups: Mapping[str, tuple[type[Any], Callable[[Any], None]]]) -> None:
    """Applies ``ros2 param set`` to the live groups (prefix -> (parameter dataclass, apply)):
    the group's values with the new ones are checked by the same rules as at start-up, and a bad
    value is refused with its name and reason; a good one is handed to ``apply`` as the whole new
    dataclass. Parameters outside these groups are read-only (:func:`declare_params`). Once per
    node, after its parameters are declared."""
    if getattr(node, '_rt_fusion_live', False):
        node._rt_fusion_live_groups = dict(groups)  # type: ignore[attr-defined]  # re-configured
        return
    node._rt_fusion_live = True  # type: ignore[attr-defined]
    node._rt_fusion_live_groups = dict(groups)  # type: ignore[attr-defined]

    def on_set(changed: list[Parameter]) -> SetParametersResult:
        live = node._rt_fusion_live_groups  # type: ignore[attr-defined]
        updates: dict[str, dict[str, Any]] = {}
        for p in changed:
            prefix = max((g for g in live if p.name.startswith(g)), key=len, default=None)
            if prefix is not None:
                updates.setdefault(prefix, {})[p.name[len(prefix) :]] = p.value
        built = []
        for prefix, new in updates.items():
            cls, apply = live[prefix]
            values = {
                f.name: node.get_parameter(prefix + f.name).value for f in params.fields(cls)
            }
            values.update(new)
            try:
                built.append((apply, params.build(cls, values)))
            except ParameterError as err:
                reason = f'{prefix}{err.name}: {err.reason}'
                return SetParametersResult(successful=False, reason=reason)
        for (prefix, _new), (apply, value) in zip(updates.items(), built, strict=True):
            try:
                apply(value)
            except ParameterError as err:  # a rule only the running node knows
                reason = f'{prefix}{err.name}: {err.reason}'
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
