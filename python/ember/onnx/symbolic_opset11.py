"""torch.onnx.symbolic_opset11: the opset-11 translations an ONNX exporter
calls. ember has no exporter; any function looked up here raises
NotImplementedError when called (only an exporter would call it)."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def symbolic(*args, **kwargs):
        raise NotImplementedError(f"torch.onnx.symbolic_opset11.{name}: ember has no ONNX exporter")
    symbolic.__name__ = name
    return symbolic
