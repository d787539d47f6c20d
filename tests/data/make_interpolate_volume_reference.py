"""Writes interpolate_volume_torch_reference.npz with PyTorch (run in a venv
that has torch; ember's tests only read the file):

    python tests/data/make_interpolate_volume_reference.py

F.interpolate of a float64 (N, C, D, H, W) volume: nearest, nearest-exact and
trilinear (align_corners both ways), growing and shrinking, to sizes and by
scale factors; a float32 and a uint8 volume; and the gradients of nearest and
trilinear."""
import os

import numpy as np
import torch
import torch.nn.functional as F

CASES = [(mode, size, sf, ac) for mode in ("nearest", "nearest-exact", "trilinear")
         for size, sf in (((5, 7, 9), None), ((2, 3, 3), None), ((3, 9, 4), None), (None, 2.0), (None, (0.7, 1.3, 2.1)))
         for ac in ((None,) if mode != "trilinear" else (False, True))]

if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(2, 2, 3, 4, 5, dtype=torch.float64)
    out = {"x": x.numpy()}
    for i, (mode, size, sf, ac) in enumerate(CASES):
        out[f"y{i}"] = F.interpolate(x, size=size, scale_factor=sf, mode=mode, align_corners=ac).numpy()
    x32 = torch.rand(1, 3, 4, 3, 5)
    out["x32"], out["y32"] = x32.numpy(), F.interpolate(x32, scale_factor=(1.5, 2.5, 0.6), mode="trilinear").numpy()
    xu = (torch.rand(1, 2, 3, 4, 5) * 255).to(torch.uint8)
    out["xu"], out["yu"] = xu.numpy(), F.interpolate(xu, size=(4, 6, 7)).numpy()
    for mode in ("nearest", "trilinear"):
        xg = x.clone().requires_grad_()
        y = F.interpolate(xg, size=(4, 6, 3), mode=mode)
        y.backward(torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape))
        out[f"grad_{mode}"] = xg.grad.numpy()
    np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "interpolate_volume_torch_reference.npz"), **out)
