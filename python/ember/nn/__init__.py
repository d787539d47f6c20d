"""ember.nn: neural-network layers and functions (torch.nn)."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import attention  # noqa: F401  (sdpa_kernel, SDPBackend)
from .parameter import Parameter, Buffer, UninitializedParameter  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from .modules.module import register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from . import utils  # noqa: F401,E402
from . import parallel  # noqa: F401,E402  (DistributedDataParallel; imports ember.distributed on use)
from .parallel import DataParallel  # noqa: F401,E402
