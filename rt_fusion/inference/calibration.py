"""INT8 calibration frames for TensorRT, read from a rosbag2 (what the vehicle recorded).

Reads camera images of one topic (sensor_msgs/Image or CompressedImage) through the bag reader,
preprocesses them exactly as at run time, and yields float32 NCHW batches. The TensorRT entropy
calibrator in ``tools/build_engine.py`` feeds these to the builder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from rt_fusion.core.bag import BagError, image_to_array, iter_messages
from rt_fusion.inference.preprocess import CpuPreprocessor
from rt_fusion.inference.spec import Preprocessing


class CalibrationFrames:
    """Batches of preprocessed frames from a bag.

    Args:
        bag: bag directory (or a file in it).
        topic: image topic.
        pre: the model's preprocessing.
        batch_size: frames per batch (the last partial batch is dropped).
        max_frames: stop after this many frames (0: all).
        every: take one frame in ``every`` (spreads a calibration set over a drive).
    """

    def __init__(
        self,
        bag: Path | str,
        topic: str,
        pre: Preprocessing,
        *,
        batch_size: int = 8,
        max_frames: int = 0,
        every: int = 1,
    ) -> None:
        if batch_size < 1 or every < 1:
            raise ValueError('batch_size and every must be >= 1')
        self.bag, self.topic, self.pre = Path(bag), topic, pre
        self.batch_size, self.max_frames, self.every = batch_size, max_frames, every
        h, w = pre.resize
        self._batch = np.empty((batch_size, 3, h, w), np.float32)

    def __iter__(self) -> Iterator[npt.NDArray[np.float32]]:
        """Yields (batch_size, 3, h, w) float32 arrays (the same buffer, refilled)."""
        prep: CpuPreprocessor | None = None
        taken = filled = 0
        for k, item in enumerate(iter_messages(self.bag, [self.topic])):
            if k % self.every:
                continue
            frame, encoding = image_to_array(item.msg, item.msgtype)
            if frame.ndim != 3 or frame.shape[2] not in (3, 4) or frame.dtype != np.uint8:
                raise BagError(f'{self.topic}: {encoding} frames cannot feed a 3-channel model')
            if frame.shape[2] == 4:
                frame = cv2.cvtColor(
                    frame, cv2.COLOR_BGRA2BGR if encoding.startswith('bgr') else cv2.COLOR_RGBA2RGB
                )
            order = 'bgr' if encoding.startswith('bgr') else 'rgb'
            if prep is None or prep.src_shape != frame.shape:
                prep = CpuPreprocessor(self.pre, frame.shape, order)
            prep(frame, self._batch[filled : filled + 1])
            filled += 1
            taken += 1
            if filled == self.batch_size:
                yield self._batch
                filled = 0
            if self.max_frames and taken >= self.max_frames:
                return
