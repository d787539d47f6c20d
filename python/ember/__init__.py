"""ember: PyTorch's core written again in C.

`import ember as torch` gives the tensor API PyTorch users know: the
`Tensor` type, dtypes, devices, creation functions and every op of the op
table as `ember.<op>` and `Tensor.<op>` (see csrc/ops/ops.def).
"""
import os as _os

# OpenMP threads spin only briefly when idle (GOMP_SPINCOUNT 10000, a few
# microseconds) before they sleep, unless the user chose a policy: back-to-back
# parallel regions then find their threads awake (sleeping at once made a GPT
# step 1.4x slower on a quiet 2-core machine), while on a machine whose cores
# are shared (other processes, a DataLoader's workers) idle threads don't hold
# the cores for long (libgomp's own default spins ~100x longer, and made a
# GPT step several times slower on a busy machine). Read when libgomp loads,
# i.e. with ember._C below.
_omp_env_set_by_ember = not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(_os.environ)
if _omp_env_set_by_ember:
    _os.environ["GOMP_SPINCOUNT"] = "10000"
del _os

try:
    from . import _C
except ImportError:  # OpenBLAS not found through the rpath (e.g. an in-place build)
    import scipy_openblas32  # noqa: F401  (loads libscipy_openblas by soname)
    from . import _C

# the torch release whose API ember follows, labelled with ember's own ("2.15.0+ember0.1.0"):
# a TorchVersion, which compares with "2.6" or (2, 6) as a version (ember.torch_version)
from .torch_version import __version__  # noqa: E402

# -- core types and dtypes -------------------------------------------------
Tensor = _C.Tensor
Size = _C.Size
device = _C.device
dtype = _C.dtype
Generator = _C.Generator
UntypedStorage = _C.UntypedStorage
default_generator = _C.default_generator

bool = _C._dtypes["bool"]  # noqa: A001  (torch.bool shadows the builtin too)
uint8 = _C._dtypes["uint8"]
int8 = _C._dtypes["int8"]
int16 = _C._dtypes["int16"]
int32 = _C._dtypes["int32"]
int64 = _C._dtypes["int64"]
float16 = _C._dtypes["float16"]
bfloat16 = _C._dtypes["bfloat16"]
float32 = _C._dtypes["float32"]
float64 = _C._dtypes["float64"]
complex64 = _C._dtypes["complex64"]
complex128 = _C._dtypes["complex128"]
uint16 = _C._dtypes["uint16"]
uint32 = _C._dtypes["uint32"]
uint64 = _C._dtypes["uint64"]
# torch dtypes ember has no tensors of: named, with their traits and finfo/iinfo, but making a
# tensor of one raises (Note [dtypes without tensors] in csrc/core/dtype.c)
globals().update(_C._dtypes_without_tensors)
cfloat, cdouble, chalf = complex64, complex128, complex32  # noqa: F821
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001
long = int64

# -- every function of the C core: ops of the table, factories, queries ----
_skip = {"Tensor", "Size", "device", "dtype", "Generator", "UntypedStorage", "default_generator"}
for _name in dir(_C):
    if not _name.startswith("_") and _name not in _skip:
        globals()[_name] = getattr(_C, _name)
del _name, _skip
# torch's private list ops, which user code and optimizers call by these names
_foreach_norm, _foreach_mul_ = _C._foreach_norm, _C._foreach_mul_

from ._dtype_info import finfo, iinfo  # noqa: E402
from .random import (manual_seed, seed, initial_seed, get_rng_state,  # noqa: E402
                     set_rng_state)
from . import autograd, cuda, return_types, testing  # noqa: E402,F401
from .autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: E402
                                 is_grad_enabled, is_inference_mode_enabled)
from . import nn  # noqa: E402,F401
from .nn.functional import (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,  # noqa: E402,F401
                            conv_transpose3d)  # torch.conv*: the same functions as torch.nn.functional's
from . import optim  # noqa: E402,F401
from .functional import broadcast_shapes, broadcast_tensors, meshgrid  # noqa: E402
from . import functional, linalg  # noqa: E402,F401
from .functional import einsum  # noqa: E402  (varargs front of _C.einsum)
from ._functions import is_tensor, is_storage, is_floating_point, is_complex, is_nonzero, numel, typename  # noqa: E402
from ._assertions import (_check, _check_with, _check_index, _check_value, _check_type,  # noqa: E402,F401
                          _check_not_implemented, _check_tensor_all, _check_tensor_all_with, _assert)
from ._tensor_str import set_printoptions  # noqa: E402
from . import amp, backends  # noqa: E402,F401
from .amp import (autocast, is_autocast_enabled, is_autocast_cpu_enabled, get_autocast_dtype,  # noqa: E402,F401
                  get_autocast_gpu_dtype, get_autocast_cpu_dtype)
from ._compile import compile, set_float32_matmul_precision, get_float32_matmul_precision  # noqa: E402,F401,A004
from .serialization import save, load  # noqa: E402
# -- torch functions composed from ember ops in Python, one module per concern --
from ._comparison import *  # noqa: E402,F401,F403  (equal, isclose, allclose, isin)
from ._shape_functions import *  # noqa: E402,F401,F403  (ravel, diag*, block_diag, atleast_*d, ...)
from ._products import *  # noqa: E402,F401,F403  (tensordot, cross, chain_matmul)
from ._distances import *  # noqa: E402,F401,F403  (cdist, dist, renorm)
from ._calculus import *  # noqa: E402,F401,F403  (trapezoid, gradient, logcumsumexp, ...)
from ._statistics import *  # noqa: E402,F401,F403  (cov, corrcoef, histogram*, histc, bincount)
from ._quantile import quantile, nanquantile  # noqa: E402
from ._lowrank import svd_lowrank, pca_lowrank  # noqa: E402
from . import fft  # noqa: E402,F401
from ._creation import asarray, frombuffer  # noqa: E402
from ._settings import *  # noqa: E402,F401,F403  (deterministic algorithms, default device)
from . import special, distributions  # noqa: E402,F401
from ._stft import *  # noqa: E402,F401,F403  (window functions, stft, istft)
from .special import logit, sinc  # noqa: E402  (torch.* too; xlog1py is torch.special only)
globals().update(linalg._TORCH_FUNCTIONS)  # inverse, det, svd, lu, norm (with p='nuc'), ...
from . import _aliases  # noqa: E402  (arccos, multiply, greater_equal, ... as torch spells them)
globals().update(_aliases.functions(globals()))
# torch.* twins of nn functionals
from .nn.functional import (pdist, pixel_shuffle, pixel_unshuffle, channel_shuffle,  # noqa: E402,F401
                            native_channel_shuffle, prelu, rrelu, rrelu_, hardshrink)
# every Tensor method written in Python, attached in one table (last: it takes functions from all of the above)
from . import _tensor  # noqa: E402,F401


# -- torch's legacy typed tensors (ember.LongTensor, ...; isinstance by dtype) and layouts --
from ._tensor_types import CPU_TYPES as _CPU_TYPES  # noqa: E402
globals().update(_CPU_TYPES)
from ._layout import layout, strided  # noqa: E402
from ._torch_c_names import PyTorchFileReader  # noqa: E402,F401  (and torch._C's names)
from math import pi, e, inf, nan  # noqa: E402,F401  (torch.pi, torch.e, torch.inf, torch.nan)

# submodules loaded on first attribute access (`torch.compiler.is_compiling()` with no import)
_LAZY_SUBMODULES = frozenset({"func", "profiler", "compiler", "jit", "_dynamo", "accelerator", "library", "version",
                              "torch_version", "distributed", "futures", "hub", "multiprocessing", "fx", "onnx",
                              "ao"})


def __getattr__(name):
    """Submodules loaded on first use, so that `import ember` stays fast:
    ember.func (and ember.vmap), ember.profiler, ember.compiler, ember.jit, ember.distributed, ember.futures, ..."""
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in ("get_device_module", "get_deterministic_debug_mode", "set_deterministic_debug_mode"):
        return getattr(importlib.import_module("._device_module", __name__), name)
    if name == "ops":  # torch.ops: the operators defined with ember.library.custom_op
        return importlib.import_module(".library", __name__).ops
    if name == "vmap":
        return importlib.import_module(".func", __name__).vmap
    if name in ("ScriptModule", "ScriptFunction"):  # torch re-exports torch.jit's (nothing is compiled)
        return getattr(importlib.import_module(".jit", __name__), name)
    raise AttributeError(f"module 'ember' has no attribute '{name}'")
