"""Running and recording graphs, for the tools and the tests.

- :mod:`.launching`: a launch file in a child process (``LaunchedGraph``), and what a dead
  process last said;
- :mod:`.recorder`: the one recorder of a graph's outputs (``Recorder``);
- :mod:`.scenarios`: a generated scenario kept between runs, one run's fusion and planner
  parameters;
- :mod:`.lockstep`: the evaluation's lock-step runs (replay or closed loop) of the shipped
  launch files;
- :mod:`.live`: the demo's live runs (a scenario replayed on the host clock, or the vehicle's
  graph on its emulated sensors), followed with a progress bar.

Topic names come from :mod:`rt_fusion.ros.graph`; what is recorded is scored by the ROS-free
:mod:`rt_fusion.core.evaluation`.
"""
