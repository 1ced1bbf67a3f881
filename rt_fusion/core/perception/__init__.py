"""Perception: ego motion from the sensors, tracking and association (ROS-free)."""
