"""The exceptions rt_fusion raises on purpose: one root, specific subclasses with their message.

Each subclass builds its message from what was wrong and where, so callers raise them with data,
not prose, and the text stays uniform across nodes and tools.
"""

from __future__ import annotations


class RtFusionError(Exception):
    """Root of every error rt_fusion raises on purpose."""


class ParameterError(RtFusionError):
    """A parameter is missing or out of range; raised at start-up, naming the parameter."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        super().__init__(f'parameter {name!r} = {value!r}: {reason}')
