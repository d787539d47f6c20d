"""Writes tests/data/spectral_torch_reference.npz (window functions, stft and istft as
torch 2.15 computes them) for tests/test_fft.py. Needs torch; run from the repository root."""
import numpy as np, torch
rng=np.random.default_rng(0)
x=rng.standard_normal((2,300)); out={"x":x}
for name in ["hann_window","hamming_window","blackman_window","bartlett_window","kaiser_window"]:
    for L in [0,1,2,7,16]:
        for per in [True, False]:
            out[f"{name}_{L}_{per}"]=getattr(torch,name)(L, periodic=per, dtype=torch.float64).numpy()
t=torch.tensor(x)
w=torch.hann_window(40, dtype=torch.float64)
cfgs=[dict(n_fft=64), dict(n_fft=64, hop_length=10, win_length=40, window=w), dict(n_fft=50, center=False, normalized=True),
      dict(n_fft=32, onesided=False), dict(n_fft=64, pad_mode="constant")]
for i,c in enumerate(cfgs):
    s=torch.stft(t, return_complex=True, **c)
    out[f"stft{i}"]=s.numpy()
    kw={k:v for k,v in c.items() if k!="pad_mode"}
    out[f"istft{i}"]=torch.istft(s, length=300, **kw).numpy()
np.savez("tests/data/spectral_torch_reference.npz", **out)
