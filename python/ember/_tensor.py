"""Every Tensor method and property written in Python, attached to the C type
in one table at the end of this file (ember/__init__.py imports this module
last). Printing, formatting, pickling, copying, the NumPy array protocols,
hooks and a few views are defined here; the rest are the torch functions of
the other modules (comparison, shape functions, statistics, linalg, ...) as
methods, and their in-place `_` twins made here."""
from . import _C, overrides, _aliases, _calculus, _stft, _comparison, _distances, _products, _quantile
from . import _shape_functions, _statistics, special
from ._checks import _type_name
from ._tensor_str import _repr
from .linalg import _cholesky, _least_squares, _matrix_functions, _norms, _qr, _solve, _spectral


def _rebuild_tensor(data, dtype_name, shape, requires_grad):
    """Unpickle: raw native-endian bytes -> tensor. Plain data; no code runs."""
    t = _C._from_bytes(data, _C._dtypes[dtype_name], tuple(shape))
    if requires_grad:
        t.requires_grad_(True)
    return t


def __reduce_ex__(self, protocol):
    t = self.detach()
    return (_rebuild_tensor, (t._raw_bytes(), repr(t.dtype).split(".")[-1], tuple(t.shape),
                              self.requires_grad))


def __deepcopy__(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    new = self.detach().clone()
    if type(self) is not _C.Tensor:
        new = _C.Tensor._make_subclass(type(self), new, self.requires_grad)
    else:
        new.requires_grad_(self.requires_grad)
    if self.grad is not None:
        new.grad = self.grad.clone()
    new.__dict__.update(__import__("copy").deepcopy(self.__dict__, memo))
    memo[id(self)] = new
    return new


def __format__(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec)


def __array__(self, dtype=None, copy=None):
    a = self.numpy()
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return a.copy() if copy else a


_TYPESTR = {"bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4",
            "int64": "<i8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
            "complex64": "<c8", "complex128": "<c16", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8"}


@property
def __array_interface__(self):
    name = repr(self.dtype).split(".")[-1]
    if name not in _TYPESTR:
        raise TypeError(f"Got unsupported ScalarType {name}: NumPy has no such dtype")
    if self.requires_grad:
        raise RuntimeError("Can't export a tensor that requires grad. Use tensor.detach() first.")
    if self.device.type != "cpu":  # NumPy would read the device pointer as host memory
        raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first.")
    isz = self.element_size()
    return {"shape": tuple(self.shape), "typestr": _TYPESTR[name], "data": (self.data_ptr(), False),
            "strides": tuple(s * isz for s in self.stride()), "version": 3}


def __array_wrap__(self, array, context=None, return_scalar=False):
    """NumPy ufuncs applied to tensors give tensors back."""
    if return_scalar:
        return array[()]
    return _C.from_numpy(array.copy() if not array.flags.writeable else array)


def where(self, condition, y):
    """Tensor.where(condition, y) == ember.where(condition, self, y)."""
    return _C.where(condition, self, y)


@property
def H(self):
    """Conjugate transpose of a matrix (the transpose for real dtypes)."""
    if self.dim() not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D tensor.")
    t = self.transpose(0, 1) if self.dim() == 2 else self
    return t.conj()


@property
def mH(self):
    """Conjugate transpose of the last two dims; the transpose for real dtypes."""
    return self.mT.conj()


def _get_real(self):
    """The real part, a view (the tensor itself for real dtypes, as torch)."""
    return _C.real(self)


def _set_real(self, value):
    _C.real(self).copy_(value)


def _get_imag(self):
    """The imaginary part of a complex tensor, a view; RuntimeError for real dtypes."""
    return _C.imag(self)


def _set_imag(self, value):
    _C.imag(self).copy_(value)


def __complex__(self):
    """complex(t) of a one-element tensor."""
    return complex(self.item())


real = property(_get_real, _set_real)
imag = property(_get_imag, _set_imag)


def adjoint(self):
    """Conjugate transpose of the last two dims (the transpose for real dtypes)."""
    return self.mH


def type_as(self, other):
    """self converted to other's dtype and device (differentiable, as Tensor.to)."""
    return self.to(device=other.device, dtype=other.dtype)


def _identity(self):
    """resolve_conj/resolve_neg: no-ops (ember's conj is an eager copy: no conj or neg bits)."""
    return self


def _false(self):
    return False


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaf) into the .grad of the leaves of its graph."""
    from . import autograd
    autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def register_hook(self, hook):
    """hook(grad) runs when the gradient of this tensor is computed; it may
    return a replacement. Returns a handle with .remove()."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    from .utils.hooks import RemovableHandle
    hooks = _C._backward_hooks(self)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) runs after a gradient was accumulated into this leaf's .grad."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    from .utils.hooks import RemovableHandle
    hooks = _C._post_accumulate_grad_hooks(self)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def retain_grad(self):
    """Keep the .grad of a non-leaf tensor after backward."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf or self.__dict__.get("_retains_grad"):
        return
    import weakref
    ref = weakref.ref(self)

    def keep_grad(grad):
        t = ref()
        if t is not None:  # a copy in grad's layout; contiguous when grad is a view into a shared buffer
            fmt = _C.preserve_format if _C._is_non_overlapping_and_dense(grad) else _C.contiguous_format
            t.grad = grad.detach().clone(memory_format=fmt) if t.grad is None else t.grad + grad.detach()
    self.register_hook(keep_grad)
    self.__dict__["_retains_grad"] = True


@property
def retains_grad(self):
    return bool(self.__dict__.get("_retains_grad", False))


def is_inference(self):
    return _C._is_inference(self)


def __reversed__(self):
    return iter(list(self)[::-1]) if self.dim() else iter([self])


def unfold(self, dimension, size, step):
    """A view of every `size`-long window along `dimension`, `step` apart, in a new last dim
    (torch's Tensor.unfold: dim becomes (n - size) // step + 1 windows)."""
    nd = self.dim()
    top = max(nd, 1)
    if not -top <= dimension < top:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-top}, {top - 1}], but got {dimension})")
    d = dimension % top
    n = self.shape[d] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if nd == 0:
        return self.as_strided((size,), (1,), self.storage_offset())
    shape, strides = list(self.shape), list(self.stride())
    shape[d], strides[d] = (n - size) // step + 1, strides[d] * step
    return self.as_strided(tuple(shape) + (size,), tuple(strides) + (self.stride(d),), self.storage_offset())


def share_memory_(self):
    """Move the data into shared memory (ember._shared_memory); returns self."""
    from . import _shared_memory
    return _shared_memory.share_memory_(self)


def is_shared(self):
    from . import _shared_memory
    return _shared_memory.is_shared(self)


def is_same_size(self, other):
    if not isinstance(other, _C.Tensor):
        raise TypeError(f"is_same_size(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return tuple(self.shape) == tuple(other.shape)


def split_with_sizes(self, split_sizes, dim=0):
    """split() with a list of sizes that must add up to the dim's size."""
    return self.split(list(split_sizes), dim)


def fill_diagonal_(self, fill_value, wrap=False):
    """Write fill_value on the main diagonal (all dims equal, or a tall 2-d matrix whose
    diagonal restarts every ncols + 1 rows when wrap=True), in place."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    n = self.shape[0]
    if self.dim() > 2 and any(s != n for s in self.shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    if self.numel() == 0:
        return self
    strides = self.stride()
    step = sum(strides)  # one element down every dim at once
    count = min(self.shape)
    if self.dim() == 2 and wrap and self.shape[0] > self.shape[1] + 1:
        # torch: the diagonal continues after a skipped row, i.e. every (ncols + 1) rows
        rows, cols = self.shape
        count = len(range(0, rows * cols, (cols + 1))) if strides == (cols, 1) else count
    diag = self.as_strided((count,), (step,), self.storage_offset())
    diag.fill_(fill_value)
    return self


def renorm_(self, p, dim, maxnorm):
    return self.copy_(_distances.renorm(self.clone() if self.requires_grad else self, p, dim, maxnorm))


def _in_place(fn):
    """x.fn_(...): fn's result written back into x (torch's cast rule for in-place ops)."""
    def method(self, *args, **kwargs):
        # under autograd fn reads a copy: a formula that saved self itself would
        # find it overwritten by the write below (x.clone().logit_() failed in backward)
        src = self.clone() if self.requires_grad and _C.is_grad_enabled() else self
        result = fn(src, *args, **kwargs)
        if result.dtype != self.dtype and not _C.can_cast(result.dtype, self.dtype):
            raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the "
                               f"desired output type {_type_name(self.dtype)}")
        return self.copy_(result)
    method.__name__ = fn.__name__ + "_"
    return method


def _polygamma(self, n):
    """x.polygamma(n): the op's n comes first (torch.polygamma(n, x))."""
    return _C.polygamma(n, self)


_polygamma_ = _in_place(lambda self, n: _C.polygamma(n, self))
_polygamma_.__name__ = "polygamma_"


_METHODS = {
    # -- defined above
    "unfold": unfold,
    "__reduce_ex__": __reduce_ex__, "__deepcopy__": __deepcopy__, "__format__": __format__,
    "__array__": __array__, "__array_wrap__": __array_wrap__, "__array_interface__": __array_interface__, "where": where,
    "__reversed__": __reversed__, "__module__": "ember", "H": H, "mH": mH,
    "real": real, "imag": imag, "__complex__": __complex__, "adjoint": adjoint, "type_as": type_as,
    "resolve_conj": _identity, "resolve_neg": _identity, "is_conj": _false, "is_neg": _false,
    "backward": backward, "register_hook": register_hook,
    "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
    "retain_grad": retain_grad, "retains_grad": retains_grad, "is_inference": is_inference,
    "is_same_size": is_same_size, "split_with_sizes": split_with_sizes, "fill_diagonal_": fill_diagonal_,
    "renorm_": renorm_, "share_memory_": share_memory_, "is_shared": is_shared,
    "__torch_function__": classmethod(overrides._tensor_torch_function),
    # -- the torch functions of the other modules, as methods
    "equal": _comparison.equal, "allclose": _comparison.allclose, "isclose": _comparison.isclose,
    "ravel": _shape_functions.ravel, "diag": _shape_functions.diag, "diag_embed": _shape_functions.diag_embed,
    "diagflat": _shape_functions.diagflat, "put": _shape_functions.put, "put_": _shape_functions.put_,
    "select_scatter": _shape_functions.select_scatter, "slice_scatter": _shape_functions.slice_scatter,
    "diagonal_scatter": _shape_functions.diagonal_scatter, "as_strided_scatter": _shape_functions.as_strided_scatter,
    "logit": special.logit, "sinc": special.sinc,
    "polygamma": _polygamma, "polygamma_": _polygamma_,
    "logcumsumexp": _calculus.logcumsumexp,
    "bincount": _statistics.bincount, "histc": _statistics.histc, "histogram": _statistics.histogram,
    "cov": _statistics.cov, "corrcoef": _statistics.corrcoef,
    "dist": _distances.dist, "renorm": _distances.renorm, "cross": _products.cross,
    "quantile": _quantile.quantile, "nanquantile": _quantile.nanquantile,
    "stft": _stft.stft, "istft": _stft.istft,
    # linalg: torch's Tensor spellings (norm takes p='nuc' to the SVD)
    "inverse": _solve.inv, "det": _solve.det, "logdet": _solve.logdet, "slogdet": _solve._torch_slogdet,
    "triangular_solve": _solve.triangular_solve, "lu_solve": _solve._torch_lu_solve, "lu": _solve._torch_lu,
    "cholesky": _cholesky._torch_cholesky, "cholesky_solve": _cholesky.cholesky_solve,
    "cholesky_inverse": _cholesky.cholesky_inverse, "qr": _qr._torch_qr, "geqrf": _qr.geqrf,
    "orgqr": _qr.householder_product, "ormqr": _qr.ormqr, "svd": _spectral._torch_svd,
    "pinverse": _least_squares.pinverse, "matrix_power": _matrix_functions.matrix_power,
    "matrix_exp": _matrix_functions.matrix_exp, "norm": _norms._torch_norm,
}
for _fn in (special.logit, special.sinc):
    _METHODS[_fn.__name__ + "_"] = _in_place(_fn)
del _fn
# torch's other spellings (arccos, divide, greater_equal, ...): the C methods themselves
_METHODS.update(_aliases.methods(_C.Tensor))
from ._layout import strided as _strided  # noqa: E402
_METHODS["layout"] = property(lambda self: _strided, doc="ember.strided: every tensor is dense")

_C._add_attrs(_C.Tensor, _METHODS)


def _repr_of(t):
    """torch's prefix: `tensor(` for Tensor and Parameter, a subclass's own name otherwise."""
    from .nn.parameter import Parameter
    cls = type(t)
    return _repr(t) if cls is _C.Tensor or cls is Parameter else _repr(t, prefix=f"{cls.__name__}(")


_C._set_helpers({"repr": _repr_of})
