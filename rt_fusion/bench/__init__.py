"""The benchmarks' workloads and workers, driven by the ``tools/bench_*.py`` command lines: they
print P50/P99/max, the ratio against the plain-rclpy path in the same run, and a last line
``RESULT k=v ...``. A room above :mod:`rt_fusion.ros` that nodes never import.
"""
