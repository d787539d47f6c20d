"""torch.onnx.symbolic_helper: parse_args, the decorator symbolic functions
carry. Without an exporter nothing converts their arguments, so the function
comes back unchanged."""

__all__ = ["parse_args"]


def parse_args(*arg_descriptors):
    def decorator(fn):
        fn._arg_descriptors = arg_descriptors
        return fn
    return decorator
