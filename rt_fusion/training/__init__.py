"""Training the shipped models (ROS-free; torch imported where it is used): the camera detector
(:mod:`.detector`, checked on held-out scenes by :mod:`.detector_check`) and the hearing model
(:mod:`.hearing`). The command lines are ``tools/train_detector.py`` and
``tools/train_hearing.py``.
"""
