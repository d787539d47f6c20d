"""torch.onnx: importable, but ember has no ONNX exporter: export() raises
NotImplementedError, and nothing is ever being exported. What libraries do at
import works: register_custom_op_symbolic records the symbolic function (as
torch does; no exporter will read it), symbolic_helper.parse_args decorates,
and the symbolic_opset modules' functions raise NotImplementedError if called
(only an exporter would call them)."""

__all__ = ["export", "dynamo_export", "is_in_onnx_export", "OnnxExporterError", "register_custom_op_symbolic",
           "unregister_custom_op_symbolic", "select_model_mode_for_export", "TrainingMode", "TensorProtoDataType",
           "OperatorExportTypes"]

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


class TensorProtoDataType(enum.IntEnum):
    """ONNX's element types (the values of onnx.TensorProto)."""
    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16


class OperatorExportTypes(enum.IntEnum):
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


_custom_symbolics = {}  # (name, opset) -> fn


def register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version):
    """Record how an exporter should translate the op symbolic_name ("ns::op")."""
    if not isinstance(symbolic_name, str) or symbolic_name.count("::") != 1:
        raise ValueError(f"Failed to register operator {symbolic_name}. The symbolic name must match the format "
                         "domain::name, and should start with a letter and contain only alphanumerical characters")
    _custom_symbolics[(symbolic_name, int(opset_version))] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name, opset_version):
    _custom_symbolics.pop((symbolic_name, int(opset_version)), None)


def select_model_mode_for_export(model, mode):
    raise NotImplementedError(f"torch.onnx.select_model_mode_for_export: {_NO_ONNX}")


from . import symbolic_helper, symbolic_opset11  # noqa: E402,F401
