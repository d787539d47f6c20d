"""Writes interpolate_antialias_torch_reference.npz with PyTorch (run in a venv
that has torch; ember's tests only read the file):

    python tests/data/make_interpolate_antialias_reference.py

F.interpolate(..., antialias=True) of float64 and uint8 images, bilinear,
bicubic and lanczos, shrinking and growing, align_corners both ways, given
scale factors, and one gradient."""
import os

import numpy as np
import torch
import torch.nn.functional as F

CASES = [(mode, size, ac, None) for mode in ("bilinear", "bicubic") for size in ((5, 7), (9, 20), (11, 6), (25, 30))
         for ac in (False, True)] + [("bilinear", None, False, (0.37, 0.61)), ("bicubic", None, False, (0.5, 2.5)),
                                     ("lanczos", (6, 9), False, None)]

if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(1, 2, 11, 13, dtype=torch.float64)
    out = {"x": x.numpy()}
    for i, (mode, size, ac, sf) in enumerate(CASES):
        out[f"y{i}"] = F.interpolate(x, size=size, scale_factor=sf, mode=mode, align_corners=ac, antialias=True).numpy()
    xu = (torch.rand(1, 3, 19, 21) * 255).to(torch.uint8)
    out["xu"] = xu.numpy()
    out["yu_bilinear"] = F.interpolate(xu, size=(7, 9), mode="bilinear", antialias=True).numpy()
    out["yu_bicubic"] = F.interpolate(xu, size=(11, 5), mode="bicubic", antialias=True).numpy()
    xg = torch.rand(1, 2, 9, 8, dtype=torch.float64, requires_grad=True)
    F.interpolate(xg, size=(4, 5), mode="bicubic", antialias=True).backward(
        torch.arange(40, dtype=torch.float64).reshape(1, 2, 4, 5))
    out["xg"], out["grad"] = xg.detach().numpy(), xg.grad.numpy()
    np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "interpolate_antialias_torch_reference.npz"), **out)
