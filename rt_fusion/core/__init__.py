"""ROS-free core of rt_fusion: numpy + stdlib only. Never imports rclpy or message packages."""
