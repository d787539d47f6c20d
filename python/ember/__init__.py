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

__version__ = "0.1.0"

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
from . import _tensor  # noqa: E402,F401  (Python-side Tensor methods: repr, pickling, ...)
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
from ._functions import is_tensor, is_storage, is_floating_point, is_nonzero, numel  # noqa: E402
from ._tensor_str import set_printoptions  # noqa: E402
from . import amp, backends  # noqa: E402,F401
from .amp import (autocast, is_autocast_enabled, is_autocast_cpu_enabled, get_autocast_dtype,  # noqa: E402,F401
                  get_autocast_gpu_dtype, get_autocast_cpu_dtype)
from ._compile import compile, set_float32_matmul_precision, get_float32_matmul_precision  # noqa: E402,F401,A004
from .serialization import save, load  # noqa: E402
# -- torch functions composed from ember ops in Python (issue #5 compat part) --
from . import _extra_functions  # noqa: E402
from ._extra_functions import *  # noqa: E402,F401,F403
from . import special, distributions  # noqa: E402,F401
_C._add_attrs(_C.Tensor, _extra_functions.TENSOR_METHODS)
# -- cross, cov, histogram, gradient, atleast_*d, ... (python/ember/_math_more.py) --
from . import _math_more  # noqa: E402
from ._math_more import *  # noqa: E402,F401,F403
_C._add_attrs(_C.Tensor, _math_more.TENSOR_METHODS)
# -- LAPACK decompositions as torch.* and Tensor methods (linalg part) --
from . import _linalg_decomp  # noqa: E402
globals().update(_linalg_decomp.TORCH)
_C._add_attrs(_C.Tensor, _linalg_decomp.TENSOR_METHODS)
# -- quantile / nanquantile (parity part) --
from ._quantile import quantile, nanquantile, TENSOR_METHODS as _QUANTILE_METHODS  # noqa: E402
_C._add_attrs(_C.Tensor, _QUANTILE_METHODS)
from . import _aliases  # noqa: E402  (arccos, multiply, greater_equal, ... as torch spells them)
globals().update(_aliases._functions(), **_aliases.FUNCTIONS)
_C._add_attrs(_C.Tensor, _aliases._methods())
from . import _gamma  # noqa: E402  (lgamma, digamma, mvlgamma, logaddexp2)
globals().update(_gamma.FUNCTIONS)
_C._add_attrs(_C.Tensor, _gamma.TENSOR_METHODS)

# -- torch.* twins of nn functionals composed in Python (nnmore part) --
from .nn.functional_more import (pdist, pixel_shuffle, pixel_unshuffle, channel_shuffle,  # noqa: E402,F401
                                 native_channel_shuffle, prelu, rrelu, rrelu_, hardshrink)


def __getattr__(name):
    """Submodules loaded on first use, so that `import ember` stays fast:
    ember.func (and ember.vmap), ember.profiler, ember.distributed, ember.futures."""
    import importlib
    if name in ("func", "profiler", "distributed", "futures"):
        return importlib.import_module(f".{name}", __name__)
    if name == "vmap":
        return importlib.import_module(".func", __name__).vmap
    raise AttributeError(f"module 'ember' has no attribute '{name}'")
