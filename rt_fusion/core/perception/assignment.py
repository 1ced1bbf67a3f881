"""scipy's linear assignment solver, without the rest of ``scipy.optimize``.

``from scipy.optimize import linear_sum_assignment`` executes the whole ``scipy.optimize``
package: ~0.3 s of imports on the vehicle computer's class of CPU (``scipy._lib``'s array-API
layer, ``scipy.linalg``, the docstring parsing of every optimiser), all of it unused by the
tracker, and paid again by every restart of the fusion node. The solver itself is one compiled
module, ``scipy/optimize/_lsap``, that needs only numpy: :func:`load` loads that module alone
(0.2 ms) and registers it under its own name, so a later ``import scipy.optimize`` reuses it.
Where that fails (another scipy layout), it falls back to the public import: the same function
either way (``tests/core/perception/test_assignment.py`` compares them).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ['linear_sum_assignment', 'load']

_NAME = 'scipy.optimize._lsap'
Solver = Callable[..., tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]


def _load_alone() -> Solver:
    module = sys.modules.get(_NAME)
    if module is None:
        import scipy  # noqa: PLC0415 (the package's __init__ only: ~10 ms)

        folder = Path(scipy.__file__).parent / 'optimize'
        path = next(
            folder / ('_lsap' + suffix)
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
            if (folder / ('_lsap' + suffix)).is_file()
        )
        loader = importlib.machinery.ExtensionFileLoader(_NAME, str(path))
        spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
        if spec is None:
            raise ImportError(f'no module spec for {path}')
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[_NAME] = module
    solver: Solver = module.linear_sum_assignment
    return solver


def load() -> tuple[Solver, str]:
    """The solver and how it was loaded (``alone`` or ``scipy.optimize``)."""
    try:
        return _load_alone(), 'alone'
    except (ImportError, StopIteration, AttributeError, OSError):
        from scipy.optimize import linear_sum_assignment as public  # noqa: PLC0415

        return public, 'scipy.optimize'


linear_sum_assignment, how = load()
"""linear_sum_assignment(cost, maximize=False) -> (rows, columns): scipy's, see the module."""
