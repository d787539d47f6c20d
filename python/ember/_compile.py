"""ember.compile: there is no graph compiler; the model or function comes
back unchanged (and runs eagerly), so scripts that call torch.compile run."""


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    if model is None:  # used as @ember.compile(...)
        return lambda fn: fn
    if not callable(model):
        raise RuntimeError("ember.compile(): the model must be callable")
    return model


_precision = ["highest"]  # as last set, while the core's TF32 flag still agrees with it


def set_float32_matmul_precision(precision):
    """'high' and 'medium' let float32 GPU matmuls use TF32 (as torch:
    backends.cuda.matmul.allow_tf32 follows); 'highest' does not."""
    from . import _C
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid float32 matmul precision {precision!r}: expected 'highest', 'high' "
                           "or 'medium'")
    _C._set_allow_tf32(precision != "highest")
    _precision[0] = precision


def get_float32_matmul_precision():
    from . import _C
    tf32 = _C._get_allow_tf32()
    if tf32 == (_precision[0] != "highest"):
        return _precision[0]
    return "high" if tf32 else "highest"
