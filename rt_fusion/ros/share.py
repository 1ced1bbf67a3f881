"""Files of the installed package (models, configuration), by a path relative to its share or to
the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

import rt_fusion


def resolve_share(path: str) -> Path:
    """A path relative to the installed share folder or the repository (editable installs)."""
    p = Path(path)
    if p.is_absolute():
        return p
    candidates = [
        Path(rt_fusion.__file__).resolve().parents[1] / p,
        Path(sys.prefix) / 'share' / 'rt_fusion' / p,
    ]
    try:
        from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415

        candidates.insert(0, Path(get_package_share_directory('rt_fusion')) / p)
    except (ImportError, LookupError, ValueError, OSError):  # no ament index (a venv)
        pass
    return next((c for c in candidates if c.exists()), candidates[-1])
