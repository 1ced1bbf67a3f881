"""The ROS layer: rclpy library code shared by the nodes (compatibility across distributions)."""
