"""ember.func: composable function transforms (torch.func) -- grad,
grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap -- and
functional_call / stack_module_state for running modules on given tensors.

Built on the reverse-mode engine and, for vmap, a loop over the mapped
dimension (see _transforms.py and _vmap.py for what that means for cost).
"""
from ._functional_call import functional_call, stack_module_state
from ._transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from ._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "stack_module_state", "vjp", "vmap"]
