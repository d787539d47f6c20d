"""How tensors print: the same text PyTorch prints (precision 4, scientific
notation when magnitudes span more than 1000x, integer-valued floats with a
trailing '.', '...' summaries above 1000 elements, dtype/grad suffixes)."""
import math

from ._lazy import numpy as np


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """Like torch.set_printoptions: profile is 'default', 'short' or 'full'."""
    if profile == "default":
        PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, 1000
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
    elif profile == "short":
        PRINT_OPTS.precision, PRINT_OPTS.threshold = 2, 1000
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 80
    elif profile == "full":
        PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, math.inf
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def _summarized(a):
    """The values a summary shows: edgeitems from each end of every dim."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:e], a[-e:]]) if a.shape[0] > 2 * e else a
    if not e:
        return a[tuple(slice(0, 0) for _ in a.shape)]
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) if a.shape[0] > 2 * e \
        else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:
            return
        absv = np.abs(finite)
        lo, hi = float(absv.min()), float(absv.max())
        if np.any(finite != np.ceil(finite)):
            self.int_mode = False
        p = PRINT_OPTS.precision
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                self.max_width = max(len(f"{v:.{p}e}") for v in finite.tolist())
            else:
                self.max_width = max(len(f"{v:.0f}") + 1 for v in finite.tolist())
        elif hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
            self.sci_mode = True
            self.max_width = max(len(f"{v:.{p}e}") for v in finite.tolist())
        else:
            self.max_width = max(len(f"{v:.{p}f}") for v in finite.tolist())
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode

    def width(self):
        return self.max_width

    def format(self, value):
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """torch's complex layout: the real and imaginary parts each formatted as
    a float column of its own, joined as 'a+bj'."""

    def __init__(self, values):
        self.re = _Formatter(values.real, True)
        self.im = _Formatter(values.imag, True)

    def width(self):
        return self.re.width() + self.im.width() + 1

    def format(self, value):
        value = complex(value)
        real = self.re.format(value.real)
        imag = (self.im.format(value.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector_str(a, indent, summarize, fmt):
    e = PRINT_OPTS.edgeitems
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / (fmt.width() + 2))))
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + \
            [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        slices = [_array_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
            [_array_str(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0] - e, a.shape[0])]
    else:
        slices = [_array_str(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _values(t):
    """The tensor's values as a NumPy array (float64 for floats)."""
    from . import _C
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype.is_floating_point:
        return t.to(_C._dtypes["float64"]).numpy()
    if t.dtype.is_complex:
        return t.to(_C._dtypes["complex128"]).numpy()
    if t.dtype in (_C._dtypes["bool"], _C._dtypes["uint64"]):  # uint64 values may not fit int64
        return t.numpy()
    return t.to(_C._dtypes["int64"]).numpy()


def _add_suffixes(text, suffixes, indent):
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > PRINT_OPTS.linewidth:
            text += ",\n" + " " * indent + s
            last_line_len = indent + len(s)
        else:
            text += ", " + s
            last_line_len += len(s) + 2
    return text + ")"


def _repr(t, prefix="tensor("):
    from . import _C
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = _C.get_default_dtype()
    default_complex = _C._dtypes["complex128" if default == _C._dtypes["float64"] else "complex64"]
    if t.is_meta:  # no values to show: the size says what there is (torch's form)
        suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != default:
            suffixes.append(f"dtype={t.dtype}")
        body = "..."
    elif t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != default:
            suffixes.append(f"dtype={t.dtype}")
        body = "[]"
    else:
        if t.dtype not in (default, default_complex, _C._dtypes["int64"], _C._dtypes["bool"]):
            suffixes.append(f"dtype={t.dtype}")
        summarize = t.numel() > PRINT_OPTS.threshold
        a = _values(t)
        shown = _summarized(a) if summarize else a
        fmt = _ComplexFormatter(shown) if t.dtype.is_complex else _Formatter(shown, t.dtype.is_floating_point)
        body = _array_str(a, indent, summarize, fmt)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
