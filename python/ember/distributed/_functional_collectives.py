"""torch.distributed._functional_collectives, the part eager code calls.
wait_tensor waits for a collective's result: ember's collectives hand back
finished tensors (async work is waited through its Work handle), so the
tensor is complete and comes back as it is. The autograd-aware all-to-all is
not available."""
import ember as _ember

from ._absent import absent_function

__all__ = ["wait_tensor", "all_to_all_single_autograd"]


def wait_tensor(tensor):
    if not isinstance(tensor, _ember.Tensor):
        raise TypeError(f"wait_tensor(): expected a Tensor, got {type(tensor).__name__}")
    return tensor


all_to_all_single_autograd = absent_function("all_to_all_single_autograd",
                                             "differentiable functional collectives")
