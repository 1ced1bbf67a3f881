"""The tracker's array layout, shared by its numpy kernels (:mod:`.track_kernels`) and their
numba twins (:mod:`.track_jit`): the columns of the track and detection blocks and the
life-cycle parameters, so that neither kernel module imports the other."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]
OUT_OF_GATE = 1e9  # cost of a pair outside the gate (linear_sum_assignment needs finite costs)
MAX_CLASSES = 16  # class ids a detection may carry (votes are a column per class)
MAX_SOURCES = 8  # sensor kinds (Detection.source values below this)

# Float block of the tracks: state x, y [m], vx, vy [m/s] (odom); its covariance, row-major;
# existence; summed class probabilities per class; length, width [m] (NaN: unknown); the last
# existence probability per source (NaN: none).
X, P, EXIST, VOTES = 0, 4, 20, 21
SIZE = VOTES + MAX_CLASSES
SCORES = SIZE + 2
FLOAT_WIDTH = SCORES + MAX_SOURCES
# Integer block: id; the time x and P are at [ns]; hits; scans; misses; birth, last hit and last
# hit by a detection that may start tracks [ns]; bits of the sensor kinds that have seen it.
ID, STAMP, HITS, SCANS, MISSES, BORN, LAST_HIT, LAST_PLACED, SOURCES = range(9)
INT_WIDTH = 9
# The confirmed flags are the third block (bool, one per track).

# Detection block: x, y [m]; over-ground vx, vy [m/s] (NaN: not measured); position covariance
# xx, xy, yy [m²]; velocity variance per axis [m²/s²]; class; class probability; existence
# probability; length, width [m] (NaN: unknown); source (sensor kind); may start a track (0/1).
DXY, DV, DCOV, DVEL_VAR, DCLS, DCLS_PROB, DEXIST, DSIZE, DSOURCE, DBIRTH = (
    0,
    2,
    4,
    7,
    8,
    9,
    10,
    11,
    13,
    14,
)
DET_WIDTH = 15


class LifeCycle(NamedTuple):
    """The tracker's life-cycle parameters, in the units the kernels use."""

    confirm_hits: int
    window_ns: int  # confirmation window
    coast_ns: int  # longest time without a placing hit
    max_var: float  # [m²] largest position variance
    merge_d2: float  # [m²] squared distance under which two confirmed tracks are one
    merge_v2: float  # [m²/s²] ... when their velocities differ by less than this
    gate: float  # squared Mahalanobis distance of the association gate
