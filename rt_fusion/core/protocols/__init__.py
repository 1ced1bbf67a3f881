"""Device protocols: ARS408 radar on CAN, Xsens MTi on serial (ROS-free)."""
