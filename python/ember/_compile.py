"""ember.compile: there is no graph compiler; the model or function comes
back unchanged (and runs eagerly), so scripts that call torch.compile run."""


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    if model is None:  # used as @ember.compile(...)
        return lambda fn: fn
    if not callable(model):
        raise RuntimeError("ember.compile(): the model must be callable")
    return model


_float32_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid float32 matmul precision {precision!r}: expected 'highest', 'high' "
                           "or 'medium'")
    _float32_matmul_precision[0] = precision


def get_float32_matmul_precision():
    return _float32_matmul_precision[0]
