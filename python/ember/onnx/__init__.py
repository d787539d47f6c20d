"""torch.onnx: importable, but ember has no ONNX exporter: export() raises
NotImplementedError, and nothing is ever being exported."""

__all__ = ["export", "is_in_onnx_export", "OnnxExporterError", "register_custom_op_symbolic",
           "unregister_custom_op_symbolic", "select_model_mode_for_export", "TrainingMode"]

import enum

_NO_ONNX = "ember has no ONNX exporter (torch.onnx.export needs TorchScript/FX graphs, which ember does not build)"


class OnnxExporterError(RuntimeError):
    """Errors of the ONNX exporter."""


class TrainingMode(enum.IntEnum):
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def export(model, args=(), f=None, *pargs, **kwargs):
    raise NotImplementedError(f"torch.onnx.export: {_NO_ONNX}")


def dynamo_export(model, *args, **kwargs):
    raise NotImplementedError(f"torch.onnx.dynamo_export: {_NO_ONNX}")


def is_in_onnx_export():
    """False: ember never exports."""
    return False


def register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version):
    raise NotImplementedError(f"torch.onnx.register_custom_op_symbolic: {_NO_ONNX}")


def unregister_custom_op_symbolic(symbolic_name, opset_version):
    raise NotImplementedError(f"torch.onnx.unregister_custom_op_symbolic: {_NO_ONNX}")


def select_model_mode_for_export(model, mode):
    raise NotImplementedError(f"torch.onnx.select_model_mode_for_export: {_NO_ONNX}")
