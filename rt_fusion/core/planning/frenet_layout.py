"""The planner's array layout, shared by its numpy form (:mod:`.frenet`) and the compiled loop
(:mod:`.frenet_jit`): an obstacle's columns, a trajectory's rows, the parameter vector and the
statuses, so that neither module imports the other."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

#: A ``near`` mask that selects every obstacle.
ALL: npt.NDArray[np.bool_] = np.ones(0, bool)

#: Obstacles whose (s, d) box clearance to a candidate is below this get the exact circle check
#: (the circles stick out of the boxes by at most about a metre at the corners).
NEAR_M = 2.0

STATUS_OK = 0
STATUS_COMFORT_STOP = 1
STATUS_EMERGENCY_STOP = 2
STATUS_NAMES = ('ok', 'comfort_stop', 'emergency_stop')

# The compiled planner's arrays (frenet_jit.plan_loop): an obstacle's columns, ...
O_X, O_Y, O_YAW, O_LENGTH, O_WIDTH, O_VX, O_VY, O_YAW_RATE, O_STD, O_GROWTH = range(10)
# ... a trajectory's rows, ...
T_S, T_S_D, T_S_DD, T_D, T_D_D, T_D_DD, T_X, T_Y, T_YAW, T_V, T_A, T_KAPPA = range(12)
# ... and the parameters it reads, in one vector (FrenetPlanner._param_vector).
(
    P_W_JERK_LAT,
    P_W_JERK_LON,
    P_W_OFFSET,
    P_W_SPEED,
    P_W_TIME,
    P_W_PROXIMITY,
    P_W_CONSISTENCY,
    P_PREFERRED,
    P_DESIRED_SPEED,
    P_MAX_SPEED,
    P_MAX_ACCEL,
    P_MAX_JERK,
    P_MAX_CURVATURE,
    P_MAX_LAT_ACCEL,
    P_ROAD_LEFT,
    P_ROAD_RIGHT,
    P_TIME_GAP,
    P_PROXIMITY_RANGE,
    P_COMFORT_DECEL,
    P_MAX_DECEL,
    P_SAFETY_MARGIN,
    P_VEHICLE_LENGTH,
    P_VEHICLE_WIDTH,
    P_EGO_R,
) = range(24)
