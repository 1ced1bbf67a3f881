"""Scenario descriptions: the built-in ones (``config/scenarios/<name>.yaml``) or a YAML path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rt_fusion.core.scenario.world import ScenarioError


def load(name: str, library: Path) -> dict[str, Any]:
    """The scenario ``name`` from ``library`` (a bare name) or the YAML file ``name``.

    Raises:
        ScenarioError: no such scenario (naming the built-in ones), or not a YAML mapping.
    """
    path = Path(name)
    if not path.suffix:
        path = library / f'{name}.yaml'
    if not path.exists():
        known = sorted(p.stem for p in library.glob('*.yaml'))
        raise ScenarioError(f'no scenario {name!r} (built in: {known}, or a YAML path)')
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ScenarioError(f'{path} is not a YAML mapping')
    return data
