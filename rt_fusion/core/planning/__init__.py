"""Trajectory planning (ROS-free): reference paths and the Frenet sampling planner."""
