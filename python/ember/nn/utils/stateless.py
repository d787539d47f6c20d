"""ember.nn.utils.stateless: the older home of functional_call (deprecated in
torch for ember.func.functional_call, which does the work)."""
import warnings


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the given tensors in place of its own (see ember.func.functional_call)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.",
                  FutureWarning, stacklevel=2)
    from ...func._functional_call import functional_call as _functional_call  # on first use: import stays fast
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
