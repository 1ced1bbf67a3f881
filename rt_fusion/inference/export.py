"""Exporting a trained PyTorch model to the ONNX our runtimes read (the training tools' one way).

ONNX opset 13 and IR version 7: the ONNX Runtime of the GPU machine (1.30) reads IR ≤ 13, and
TensorRT 8.x on JetPack 5 parses opset 13; the TorchScript exporter (``dynamo=False``) because the
dynamo exporter writes newer opsets. The file is checked with ``onnx.checker`` after the IR is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPSET = 13
IR_VERSION = 7


def export_onnx(model: Any, example: Any, path: Path, input_name: str, output_name: str) -> Path:
    """Writes ``model`` (a torch.nn.Module in eval mode) traced on ``example`` to ``path``."""
    import onnx  # noqa: PLC0415
    import torch  # noqa: PLC0415

    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (example,),
            str(path),
            input_names=[input_name],
            output_names=[output_name],
            opset_version=OPSET,
            dynamo=False,
        )
    proto = onnx.load(str(path))
    proto.ir_version = IR_VERSION
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))
    return path
