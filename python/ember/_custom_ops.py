"""torch._custom_ops: the older spelling of torch.library's custom-op API."""
from .library import custom_op, get_ctx, impl_abstract, register_fake  # noqa: F401

__all__ = ["custom_op", "get_ctx", "impl_abstract", "register_fake"]
