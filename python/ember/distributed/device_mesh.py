"""torch.distributed.device_mesh: not available in ember (no DTensor)."""
from ._absent import absent_class, absent_function

DeviceMesh = absent_class("DeviceMesh", "device meshes (torch.distributed.device_mesh)")
init_device_mesh = absent_function("init_device_mesh", "device meshes (torch.distributed.device_mesh)")

__all__ = ["DeviceMesh", "init_device_mesh"]
