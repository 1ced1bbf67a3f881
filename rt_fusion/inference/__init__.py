"""ROS-free inference backends (ONNX Runtime, PyTorch, TensorRT) behind one interface."""
