"""torch.distributed.tensor._utils: not available in ember (no DTensor)."""
from .._absent import absent_function

compute_local_shape_and_global_offset = absent_function("compute_local_shape_and_global_offset",
                                                        "distributed tensors (DTensor)")
