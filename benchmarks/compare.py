"""ember next to NumPy and PyTorch, in one run, as ratios.

    python -m benchmarks.compare [--quick] [--smoke] [--filter SUBSTR] [--threads N]

Libraries are timed interleaved (each repeat runs every library once, in a
rotating order) so that noise on a shared machine hits them alike; the table
shows the median over repeats. Each sample runs the op enough times to last
a few milliseconds, after a short pause that lets the previous library's
idle threads stop spinning, and the cost of an empty call in the same loop
is subtracted. To add a benchmark, append a `Case` to `CASES`.
"""
import argparse
import dataclasses
import gc
import math
import os
import statistics
import sys
import time
from typing import Callable, Dict, Tuple

import numpy as np

import ember

torch = None  # imported in main(), so that importing CASES stays cheap

LIBS = ("ember", "numpy", "torch")


@dataclasses.dataclass
class Case:
    """One benchmark. `builders[lib](n)` sets up inputs of n elements and
    returns the zero-arg callable to time. `unit` is "time" (µs per call,
    lower is better), "GB/s" (`bytes_per_elem * n` / time, higher is
    better) or "GFLOP/s" (`flops(n)` / time, higher is better). `targets` maps a library to (op, ratio), e.g. {"torch": ("<=", 0.4)}:
    the ember ÷ that-library ratio the case should reach. `max_repeats`
    caps the repeats for cases whose single call takes seconds. `check(fns)`,
    when given, runs before timing on the built callables, returns a line to
    print, and raises when the libraries disagree."""
    name: str
    n: int
    builders: Dict[str, Callable[[int], Callable[[], object]]]
    unit: str = "time"
    bytes_per_elem: int = 0
    flops: Callable[[int], float] = None
    targets: Dict[str, Tuple[str, float]] = dataclasses.field(default_factory=dict)
    max_repeats: int = 0
    check: Callable[[Dict[str, Callable[[], object]]], str] = None


def inputs(lib, n, k):
    """k float32 vectors of n uniform numbers (the same numbers for every library)."""
    rng = np.random.default_rng(0)
    xs = [rng.random(n, dtype=np.float32) for _ in range(k)]
    if lib == "ember":
        return [ember.from_numpy(x).clone() for x in xs]
    if lib == "torch":
        return [torch.from_numpy(x).clone() for x in xs]
    return xs


def module(lib):
    return {"ember": ember, "numpy": np, "torch": torch}[lib]


def every_lib(make):
    """Builders for all libraries from make(mod, *vectors) -> callable, where
    mod is the library's module (ember, numpy or torch)."""
    return {lib: (lambda n, lib=lib: make(module(lib), *inputs(lib, n, 3))) for lib in LIBS}


def mul_chain_backward(m, a, b, c):
    """10 multiplies on a leaf requiring grad, reduced to a scalar, then
    backward: the per-op cost of recording and running the graph."""
    x = a.clone().requires_grad_()

    def step():
        y = x
        for _ in range(10):
            y = y * b
        y.sum().backward()
    return step


def autograd_libs(make):
    """Builders for the libraries that have autograd (not NumPy)."""
    return {lib: (lambda n, lib=lib: make(module(lib), *inputs(lib, n, 3))) for lib in ("ember", "torch")}


def matmul_case(name, n, shapes, call, flops, targets=None):
    """A matrix-product case: shapes(n) gives the operands' shapes, call(mod,
    *operands) the product; operands are float32 uniform numbers, the same
    for every library."""
    def build(lib, n):
        rng = np.random.default_rng(0)
        xs = [rng.random(s, dtype=np.float32) for s in shapes(n)]
        if lib != "numpy":
            xs = [module(lib).from_numpy(x).clone() for x in xs]
        return lambda: call(module(lib), *xs)
    return Case(name, n, {lib: (lambda n, lib=lib: build(lib, n)) for lib in LIBS}, unit="GFLOP/s",
                flops=flops, targets=targets or {})


def _t(m, x):
    return x.T if m is np else x.t()



def fft_case(name, shape, call):
    """A Fourier-transform case: complex64 input of `shape` (the same numbers
    for every library), call(mod) the library's fft module function to time."""
    def build(lib, n):
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        if lib != "numpy":
            x = module(lib).from_numpy(x).clone()
        fn = call(module(lib).fft)
        return lambda: fn(x)
    n = int(np.prod(shape))
    return Case(name, n, {lib: (lambda n, lib=lib: build(lib, n)) for lib in LIBS}, unit="time", max_repeats=7)

M = 1 << 20
CASES = [
    Case("a + b, 100 f32", 100, every_lib(lambda m, a, b, c: lambda: a + b),
         targets={"torch": ("<=", 0.4)}),
    Case("a.add_(b), 100 f32", 100,
         {lib: (lambda n, lib=lib: (lambda a, b, c: (lambda: np.add(a, b, out=a)) if lib == "numpy"
                                    else (lambda: a.add_(b)))(*inputs(lib, n, 3))) for lib in LIBS},
         targets={"torch": ("<=", 0.5)}),
    Case("a + b, 16M f32", 16 * M, every_lib(lambda m, a, b, c: lambda: a + b),
         unit="GB/s", bytes_per_elem=12),
    Case("exp(a), 16M f32", 16 * M, every_lib(lambda m, a, b, c: lambda: m.exp(a)),
         unit="GB/s", bytes_per_elem=8),
    Case("tanh(a), 16M f32", 16 * M, every_lib(lambda m, a, b, c: lambda: m.tanh(a)),
         unit="GB/s", bytes_per_elem=8, targets={"torch": (">=", 1.0)}),
    Case("add(a, b, out=c), 16M f32", 16 * M,
         every_lib(lambda m, a, b, c: lambda: m.add(a, b, out=c)),
         unit="GB/s", bytes_per_elem=12, targets={"numpy": (">=", 0.9)}),
    Case("10 muls + sum().backward(), 100 f32", 100, autograd_libs(mul_chain_backward),
         targets={"torch": ("<=", 0.4)}),
    Case("m.sum(1), 64x64 f32", 64 * 64,
         every_lib(lambda m, a, b, c: (lambda x: lambda: x.sum(1))(a.reshape(64, -1))),
         targets={"torch": ("<=", 0.5)}),
    Case("sum(a), 16M f32", 16 * M, every_lib(lambda m, a, b, c: lambda: a.sum()),
         unit="GB/s", bytes_per_elem=4, targets={"torch": (">=", 1.0)}),
    fft_case("fft 1-D 2^20 c64", (1 << 20,), lambda f: f.fft),
    fft_case("fft2 1024x1024 c64", (1024, 1024), lambda f: f.fft2),
    fft_case("fft 1-D prime 1000003 c64", (1000003,), lambda f: f.fft),
    fft_case("fft 1-D 64 x 4096 c64", (64, 4096), lambda f: f.fft),
]


def per_lib(ember_torch, numpy_fn):
    """Builders where NumPy spells the op differently: ember_torch(mod, a, b)
    and numpy_fn(a, b) return the callable to time (numpy_fn None: NumPy has
    no such case, e.g. bfloat16)."""
    def build(lib):
        def make(n):
            a, b, _ = inputs(lib, n, 3)
            return numpy_fn(a, b) if lib == "numpy" else ember_torch(module(lib), a, b)
        return make
    return {lib: build(lib) for lib in LIBS if lib != "numpy" or numpy_fn}


# joining, sorting, searching (ops/join.c, ops/sort.c)
CASES += [
    Case("sort(a, stable), 1M f32", M, per_lib(lambda m, a, b: lambda: m.sort(a, stable=True),
                                               lambda a, b: lambda: np.sort(a, kind="stable"))),
    Case("topk(a, 10), 1M f32", M, per_lib(lambda m, a, b: lambda: m.topk(a, 10),
                                           lambda a, b: lambda: np.sort(np.partition(a, a.size - 10)[-10:]))),
    Case("searchsorted(sorted a, b), 1M f32", M,
         per_lib(lambda m, a, b: (lambda s: lambda: m.searchsorted(s, b))(m.sort(a).values),
                 lambda a, b: (lambda s: lambda: np.searchsorted(s, b))(np.sort(a)))),
    Case("cat([a, b]), 2x1M f32", M, per_lib(lambda m, a, b: lambda: m.cat([a, b]),
                                             lambda a, b: lambda: np.concatenate([a, b])),
         unit="GB/s", bytes_per_elem=16),
    # n: elements of one operand; the sizes follow from it (and shrink in --smoke runs)
    matmul_case("matmul 1024x1024 @ 1024x1024, f32", M, lambda n: [(math.isqrt(n),) * 2] * 2,
                lambda m, a, b: m.matmul(a, b), lambda n: 2.0 * math.isqrt(n) ** 3,
                targets={"torch": (">=", 0.95)}),
    matmul_case("linear x @ w.t(), 256x768 @ 768x3072, f32", 256 * 768,
                lambda n: [(max(1, n // 768), 768), (3072, 768)], lambda m, x, w: x @ _t(m, w),
                lambda n: 2.0 * max(1, n // 768) * 768 * 3072, targets={"torch": (">=", 1.0)}),
    matmul_case("bmm 32 x (64x64 @ 64x64), f32", 32 * 64 * 64, lambda n: [(max(1, n // 4096), 64, 64)] * 2,
                lambda m, a, b: m.matmul(a, b), lambda n: 2.0 * max(1, n // 4096) * 64 ** 3),
]

# indexing (ops/index.c): basic keys make views, the cost is the key's parsing
CASES += [
    Case("m[3:9, ::2], 64x64 f32", 64 * 64,
         every_lib(lambda m, a, b, c: (lambda x: lambda: x[3:9, ::2])(a.reshape(64, -1))),
         targets={"torch": ("<=", 0.5)}),
    Case("m[idx] (64 int64 rows), 64x64 f32", 64 * 64,
         per_lib(lambda m, a, b: (lambda x, i: lambda: x[i])(a.reshape(64, -1), m.arange(63, -1, -1)),
                 lambda a, b: (lambda x, i: lambda: x[i])(a.reshape(64, -1), np.arange(63, -1, -1)))),
]


# nn functional ops (ops/norm.c)
CASES += [
    Case("layer_norm 2048x768 f32", 2048 * 768,
         {lib: (lambda n, lib=lib: (lambda x, w, b: lambda: module(lib).nn.functional.layer_norm(
             x, (768,), w, b))(inputs(lib, max(768, n - n % 768), 1)[0].reshape(-1, 768), *inputs(lib, 768, 2)))
          for lib in ("ember", "torch")},
         unit="GB/s", bytes_per_elem=8, targets={"torch": (">=", 1.0)}),
    # half types: computed in float32 a row at a time (ops/norm.c, norm_rows_half)
    Case("layer_norm 2048x768 bf16", 2048 * 768,
         {lib: (lambda n, lib=lib: (lambda x, w, b: lambda: module(lib).nn.functional.layer_norm(
             x, (768,), w, b))(*(t.to(module(lib).bfloat16) for t in (
                 inputs(lib, max(768, n - n % 768), 1)[0].reshape(-1, 768), *inputs(lib, 768, 2)))))
          for lib in ("ember", "torch")},
         unit="GB/s", bytes_per_elem=4),
]


# optimizers (python/ember/optim, the fused kernel in ops/optim.c): one AdamW
# step over four parameters holding n float32 numbers in all
def adamw_step(lib, n, torch_kwargs):
    m = module(lib)
    rng = np.random.default_rng(0)
    sizes = [n // 2, n // 4, n // 8]
    sizes.append(max(1, n - sum(sizes)))
    params = []
    for s in sizes:
        p = m.from_numpy(rng.standard_normal(s).astype(np.float32)).clone().requires_grad_()
        p.grad = m.from_numpy(rng.standard_normal(s).astype(np.float32)).clone()
        params.append(p)
    opt = m.optim.AdamW(params, lr=1e-3, **(torch_kwargs if lib == "torch" else {}))
    opt.step()  # the state exists before timing
    return opt.step


CASES += [
    Case("AdamW.step(), 4 params, 1M f32", M,
         {lib: (lambda n, lib=lib: adamw_step(lib, n, {})) for lib in ("ember", "torch")},
         targets={"torch": ("<=", 1.0)}),
    Case("AdamW.step() vs torch fused=True, 1M f32", M,
         {lib: (lambda n, lib=lib: adamw_step(lib, n, {"fused": True})) for lib in ("ember", "torch")}),
]


# softmax and cross-entropy (ops/softmax.c, ops/loss.c, cpu/softmax.c)
def _rows(x, cols):
    """x (n elements) as rows of `cols` (fewer in --smoke runs)."""
    cols = min(cols, x.shape[0])
    return x.reshape(x.shape[0] // cols, cols)


def _np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _cross_entropy_step(m, a, b, c):
    """forward + backward of cross_entropy over (rows, 8192) logits with class-index targets."""
    x = _rows(a, 8192).clone().requires_grad_()
    t = (_rows(b, 8192)[:, 0] * x.shape[1]).long()

    def step():
        x.grad = None
        m.nn.functional.cross_entropy(x, t).backward()
    return step


CASES += [
    Case("softmax(x, 1), 512x1024 f32", 512 * 1024,
         per_lib(lambda m, a, b: (lambda x: lambda: m.softmax(x, 1))(_rows(a, 1024)),
                 lambda a, b: (lambda x: lambda: _np_softmax(x))(_rows(a, 1024))),
         unit="GB/s", bytes_per_elem=8, targets={"torch": (">=", 1.0)}),
    Case("log_softmax(x, 1), 512x1024 f32", 512 * 1024,
         per_lib(lambda m, a, b: (lambda x: lambda: m.log_softmax(x, 1))(_rows(a, 1024)),
                 lambda a, b: (lambda x: lambda: np.log(_np_softmax(x)))(_rows(a, 1024))),
         unit="GB/s", bytes_per_elem=8),
    Case("cross_entropy fwd+bwd, 512x8192 f32", 512 * 8192, autograd_libs(_cross_entropy_step)),
    # half types: a block at a time in float32 (cpu/softmax.c, Note [softmax of half types])
    Case("softmax(x, 1), 512x1024 bf16", 512 * 1024,
         per_lib(lambda m, a, b: (lambda x: lambda: m.softmax(x, 1))(_rows(a, 1024).to(m.bfloat16)), None),
         unit="GB/s", bytes_per_elem=4),
    Case("add, 512x1024 bf16", 512 * 1024,
         per_lib(lambda m, a, b: (lambda x, y: lambda: x + y)(a.to(m.bfloat16), b.to(m.bfloat16)), None),
         unit="GB/s", bytes_per_elem=6),
    Case("add, 512x1024 f16", 512 * 1024,
         per_lib(lambda m, a, b: (lambda x, y: lambda: x + y)(a.to(m.float16), b.to(m.float16)), None),
         unit="GB/s", bytes_per_elem=6),
]


# nn activations (ops/activation.c): the float32 GELU kernel (Note [vector gelu]);
# NumPy has no erf, so these are ember next to torch
def activation_libs(make):
    return {lib: (lambda n, lib=lib: make(module(lib), (inputs(lib, n, 1)[0] - 0.5) * 8))
            for lib in ("ember", "torch")}


def _gelu_step(m, x):
    """GELU forward and backward on a leaf: the fused gelu_backward kernel."""
    x = x.clone().requires_grad_()
    gy = x.detach() * 0 + 1

    def step():
        x.grad = None
        m.nn.functional.gelu(x).backward(gy)
    return step


CASES += [
    Case("gelu(a), 16M f32", 16 * M, activation_libs(lambda m, a: lambda: m.nn.functional.gelu(a)),
         unit="GB/s", bytes_per_elem=8, targets={"torch": (">=", 1.0)}),
    Case("gelu(a, 'tanh'), 16M f32", 16 * M,
         activation_libs(lambda m, a: lambda: m.nn.functional.gelu(a, approximate="tanh")),
         unit="GB/s", bytes_per_elem=8),
    # cache-sized: the kernels' speed, not the page faults of fresh 64 MB outputs
    Case("gelu(a), 512K f32", 512 * 1024, activation_libs(lambda m, a: lambda: m.nn.functional.gelu(a)),
         unit="GB/s", bytes_per_elem=8),
    Case("gelu fwd+bwd, 512K f32", 512 * 1024, activation_libs(_gelu_step), targets={"torch": ("<=", 1.0)}),
    Case("silu(a), 16M f32", 16 * M, activation_libs(lambda m, a: lambda: m.nn.functional.silu(a)),
         unit="GB/s", bytes_per_elem=8),
]



# pooling and batch norm (ops/poolnorm.c, cpu/poolnorm.c): an
# image batch of (32, 64, 32, 32) float32 (smaller in --smoke runs)
def _nchw(lib, n):
    c = 64 if n >= 64 * 1024 else 4
    x = inputs(lib, max(c * 1024, n - n % (c * 1024)), 1)[0]
    return x.reshape(-1, c, 32, 32)


def _pool_step(m, x, backward):
    F = m.nn.functional
    if not backward:
        return lambda: F.max_pool2d(x, 2)
    x = x.clone().requires_grad_()
    gy = F.max_pool2d(x.detach(), 2) * 0 + 1

    def step():
        x.grad = None
        F.max_pool2d(x, 2).backward(gy)
    return step


def _batch_norm_step(m, x):
    F, c = m.nn.functional, x.shape[1]
    x = x.clone().requires_grad_()
    w, b = m.ones(c, requires_grad=True), m.zeros(c, requires_grad=True)
    rm, rv, gy = m.zeros(c), m.ones(c), x.detach() * 0 + 1

    def step():
        x.grad = w.grad = b.grad = None
        F.batch_norm(x, rm, rv, w, b, training=True).backward(gy)
    return step


def _image_libs(make):
    return {lib: (lambda n, lib=lib: make(module(lib), _nchw(lib, n))) for lib in ("ember", "torch")}


CASES += [
    Case("max_pool2d 2x2, 32x64x32x32 f32", 32 * 64 * 1024, _image_libs(lambda m, x: _pool_step(m, x, False)),
         targets={"torch": ("<=", 1.25)}),
    Case("max_pool2d 2x2 fwd+bwd, 32x64x32x32 f32", 32 * 64 * 1024,
         _image_libs(lambda m, x: _pool_step(m, x, True)), targets={"torch": ("<=", 1.25)}),
    Case("batch_norm train fwd+bwd, 32x64x32x32 f32", 32 * 64 * 1024, _image_libs(_batch_norm_step),
         targets={"torch": ("<=", 1.25)}),
]


# the training benchmark (benchmarks/gpt.py): one nanoGPT-style step,
# 4 layers, 256 wide, 64 tokens, batch 8, AdamW
def _gpt(lib, n):
    from benchmarks.gpt import gpt_step
    return gpt_step(module(lib))


# GPT-2 small (124M parameters; n counts them): 12 layers, 768 wide, vocabulary
# 50257, batches of 4 x 64 tokens; --smoke runs (n capped) build a tiny model
GPT2_PARAMS = 124_439_808


def _gpt2(lib, n):
    from benchmarks.gpt import gpt_step, GPT2_SMALL
    shape = GPT2_SMALL if n >= GPT2_PARAMS else dict(batch=2, seq=8, block=16, vocab=97, n_layer=1,
                                                       n_embd=32, n_head=2)
    return gpt_step(module(lib), **shape)


def same_losses(fns, steps=3, rtol=1e-4):
    """Runs `steps` training steps of every library (the same weights and
    batches) and raises unless their last losses agree to rtol."""
    losses = {lib: [fn().item() for _ in range(steps)][-1] for lib, fn in fns.items()}
    line = f"  loss after {steps} steps: " + ", ".join(f"{lib} {v:.7f}" for lib, v in losses.items())
    if "torch" in losses and abs(losses["ember"] - losses["torch"]) > rtol * abs(losses["torch"]):
        raise RuntimeError(f"ember's loss differs from torch's by more than {rtol} relative:{line}")
    return line


CASES += [
    Case("GPT train step (4x256, T=64, B=8, AdamW)", 8 * 64,
         {lib: (lambda n, lib=lib: _gpt(lib, n)) for lib in ("ember", "torch")},
         targets={"torch": ("<=", 0.8)}),
    Case("GPT-2 small train step (124M, T=64, B=4, AdamW)", GPT2_PARAMS,
         {lib: (lambda n, lib=lib: _gpt2(lib, n)) for lib in ("ember", "torch")},
         targets={"torch": ("<=", 0.8)}, max_repeats=5, check=same_losses),
]


# upsampling (ops/interp.c, cpu/interp.c): F.interpolate 2x of
# (8, 64, 64, 64) float32; NumPy has no interpolate, so ember next to torch.
# "time" per call: lower is better, the target is torch's speed or better.
def interp_libs(make):
    def planes(x, n):  # (n / 64^3, 64, 64, 64); the smoke run's few elements: one 64-wide plane
        return x.reshape(-1, 64, 64, 64) if n % 64 ** 3 == 0 else x.reshape(1, 1, -1, 64)
    return {lib: (lambda n, lib=lib: make(module(lib), planes(inputs(lib, n, 1)[0], n)))
            for lib in ("ember", "torch")}


CASES += [
    Case("interpolate bilinear 2x fwd, 8x64x64x64 f32", 8 * 64 * 64 * 64,
         interp_libs(lambda m, x: lambda: m.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")),
         targets={"torch": ("<=", 1.0)}),
    Case("interpolate nearest 2x fwd, 8x64x64x64 f32", 8 * 64 * 64 * 64,
         interp_libs(lambda m, x: lambda: m.nn.functional.interpolate(x, scale_factor=2)),
         targets={"torch": ("<=", 1.0)}),
    Case("interpolate bilinear 2x fwd+bwd, 8x64x64x64 f32", 8 * 64 * 64 * 64,
         interp_libs(lambda m, x: (lambda x: lambda: m.nn.functional.interpolate(
             x, scale_factor=2, mode="bilinear").sum().backward())(x.clone().requires_grad_()))),
]


# convolution (ops/conv.c, cpu/conv.c): a small CNN layer, N images of
# C x 32 x 32 (N = n / (C * 32 * 32): fewer in --smoke runs); torch runs oneDNN
def _conv_layer(lib, n, cin, cout, k, backward, channels_last=False):
    m = module(lib)
    rng = np.random.default_rng(0)
    batch = max(1, n // (cin * 32 * 32))
    x, w, b = (m.from_numpy(rng.standard_normal(s, dtype=np.float32))
               for s in ((batch, cin, 32, 32), (cout, cin, k, k), (cout,)))
    if channels_last:  # input and weight as a model.to(memory_format=channels_last) has them
        x, w = (t.contiguous(memory_format=m.channels_last) for t in (x, w))
    if not backward:
        return lambda: m.nn.functional.conv2d(x, w, b, padding=k // 2)
    for t in (x, w, b):
        t.requires_grad_()
    gy = m.from_numpy(rng.standard_normal((batch, cout, 32, 32), dtype=np.float32))

    def step():
        x.grad = w.grad = b.grad = None
        m.nn.functional.conv2d(x, w, b, padding=k // 2).backward(gy)
    return step


def conv_libs(cin, cout, k, backward, channels_last=False):
    return {lib: (lambda n, lib=lib: _conv_layer(lib, n, cin, cout, k, backward, channels_last))
            for lib in ("ember", "torch")}


CASES += [
    Case("conv2d 32x32x32x32 -> 64, 3x3 pad 1, f32", 32 * 32 * 32 * 32, conv_libs(32, 64, 3, False),
         targets={"torch": ("<=", 1.25)}),
    Case("conv2d fwd+bwd 32x32x32x32 -> 64, 3x3 pad 1, f32", 32 * 32 * 32 * 32, conv_libs(32, 64, 3, True),
         targets={"torch": ("<=", 1.25)}),
    Case("conv2d 32x64x32x32 -> 64, 1x1, f32", 32 * 64 * 32 * 32, conv_libs(64, 64, 1, False),
         targets={"torch": ("<=", 1.25)}),
    Case("conv2d fwd+bwd 32x64x32x32 -> 64, 1x1, f32", 32 * 64 * 32 * 32, conv_libs(64, 64, 1, True),
         targets={"torch": ("<=", 1.25)}),
    # channels_last (Note [memory format]): the NHWC forward
    Case("conv2d channels_last 32x32x32x32 -> 64, 3x3 pad 1, f32", 32 * 32 * 32 * 32,
         conv_libs(32, 64, 3, False, True), targets={"torch": ("<=", 1.25)}),
    Case("conv2d channels_last 32x64x32x32 -> 64, 1x1, f32", 32 * 64 * 32 * 32,
         conv_libs(64, 64, 1, False, True), targets={"torch": ("<=", 1.25)}),
]

# scaled-dot-product attention (ops/attention.c, cpu/attention.c): the
# fused CPU kernel, causal, forward and forward + backward; NumPy has no autograd
def _sdpa_case(B, H, L, D, backward):
    def build(lib, n):
        m = module(lib)
        Lc = max(1, min(L, n // (B * H * D)))  # --smoke caps n
        rng = np.random.default_rng(0)
        q, k, v = (m.from_numpy(rng.standard_normal((B, H, Lc, D), dtype=np.float32)) for _ in range(3))
        sdpa = m.nn.functional.scaled_dot_product_attention
        if not backward:
            return lambda: sdpa(q, k, v, is_causal=True)
        for t in (q, k, v):
            t.requires_grad_()
        g = m.ones(B, H, Lc, D)

        def step():
            q.grad = k.grad = v.grad = None
            sdpa(q, k, v, is_causal=True).backward(g)
        return step
    return {lib: (lambda n, lib=lib: build(lib, n)) for lib in ("ember", "torch")}


CASES += [
    Case(f"sdpa causal {'fwd+bwd' if bw else 'fwd'}, {B}x{H}x{L}x{D} f32", B * H * L * D, _sdpa_case(B, H, L, D, bw),
         targets={"torch": ("<=", 1.0)})
    for B, H, L, D in ((8, 4, 64, 64), (8, 8, 256, 64), (1, 8, 1024, 64)) for bw in (False, True)
]


# recurrent layers (nn/modules/rnn.py): a 2-layer LSTM / GRU, batch_first, forward
# and forward + backward; the steps run in Python over ember ops (one h @ W_hh^T
# per step), torch runs its fused CPU cell. n = B * T * H; --smoke shortens T.
# Informational: ember's LSTM took 1.9-2.2x torch's time on a quiet 2-core
# machine (the per-step Python and autograd work; no fused cell kernel).
def _rnn_case(name, B, T, I, H, backward):
    def build(lib, n):
        m = module(lib)
        Tc = max(2, min(T, n // (B * H)))
        m.manual_seed(0)
        rnn = getattr(m.nn, name)(I, H, num_layers=2, batch_first=True)
        x = m.from_numpy(np.random.default_rng(0).standard_normal((B, Tc, I), dtype=np.float32))
        if not backward:
            def fwd():
                with m.no_grad():
                    return rnn(x)[0]
            return fwd

        def step():
            rnn.zero_grad()
            rnn(x)[0].sum().backward()
        return step
    return {lib: (lambda n, lib=lib: build(lib, n)) for lib in ("ember", "torch")}


CASES += [
    Case(f"{name} 2 layers {'fwd+bwd' if bw else 'fwd'}, B={B} T={T} {I}->{H} f32", B * T * H,
         _rnn_case(name, B, T, I, H, bw), max_repeats=9)  # no target: no issue sets one yet
    for name in ("LSTM", "GRU") for B, T, I, H in ((32, 64, 64, 256),) for bw in (False, True)
]

# (resident memory from /proc: a spawned child's ru_maxrss starts at its parent's peak)
IMPORT_PROBE = """
import sys, time
def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
before = rss_kib()
t = time.perf_counter()
__import__(sys.argv[1])
print(time.perf_counter() - t, rss_kib() - before)
"""


def import_cost(name, repeats):
    """(median seconds, median KiB of peak RSS added) of `import name` in fresh processes."""
    import subprocess
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE, name], capture_output=True, text=True)
        if out.returncode != 0:
            return None
        runs.append(tuple(float(v) for v in out.stdout.split()))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def print_import_costs(repeats):
    """The issue's import row: time (target <= 0.05x torch's) and added memory (<= 0.1x)."""
    costs = {name: import_cost(name, repeats) for name in ("ember", "numpy", "torch")}
    e = costs["ember"]
    print("\nimport in a fresh process (median of %d): " % repeats + ", ".join(
        f"{n} {c[0] * 1e3:.1f} ms, +{c[1] / 1024:.1f} MiB" for n, c in costs.items() if c))
    if e and costs["torch"]:
        t = costs["torch"]
        print(f"ember / torch: time {e[0] / t[0]:.3f}x (target <=0.05x), added memory {e[1] / t[1]:.3f}x "
              f"(target <=0.1x)")


def loop_time(fn, inner):
    """Seconds per call of fn, over inner back-to-back calls."""
    t0 = time.perf_counter_ns()
    for _ in range(inner):
        fn()
    return (time.perf_counter_ns() - t0) * 1e-9 / inner


def call_overhead(repeats):
    """Seconds the timing loop itself costs per call (an empty lambda)."""
    def noop():
        return None
    return min(loop_time(noop, 200_000) for _ in range(repeats))


# Note [settle pause]: after a parallel region, a library's OpenMP workers
# spin before they sleep — torch's (libgomp's default) for milliseconds,
# ember's for a fraction of one. On a 2-core machine the next library's
# sample would share a core with that spinner, so each sample starts after
# a pause longer than any library's spin.
SETTLE_S = 0.015


def measure(fns, repeats, sample_s, overhead, warmups=2, settle_s=SETTLE_S):
    """Median seconds per call for each callable in fns, timed interleaved."""
    inner = {}
    for lib, fn in fns.items():
        for _ in range(warmups):  # first-touch page faults, caches, lazy init
            fn()
        t = loop_time(fn, 1)
        inner[lib] = max(1, math.ceil(sample_s / max(t, 1e-9)))
    samples = {lib: [] for lib in fns}
    order = list(fns)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeats):
            for lib in order[r % len(order):] + order[:r % len(order)]:
                if len(fns) > 1 and settle_s:
                    time.sleep(settle_s)  # Note [settle pause]
                samples[lib].append(loop_time(fns[lib], inner[lib]))
    finally:
        if gc_was_on:
            gc.enable()
    return {lib: max(statistics.median(s) - overhead, 1e-12) for lib, s in samples.items()}


def fmt_value(case, t):
    if t is None:
        return "-"
    if case.unit == "time":
        return f"{t * 1e6:.3f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"
    if case.unit == "GFLOP/s":
        return f"{case.flops(case.n) / t / 1e9:.1f} GF/s"
    return f"{case.bytes_per_elem * case.n / t / 1e9:.1f} GB/s"


def ratio(case, t_ember, t_other):
    """ember ÷ other: of times for "time" cases, of throughputs otherwise."""
    if t_ember is None or t_other is None:
        return None
    return t_ember / t_other if case.unit == "time" else t_other / t_ember


def fmt_targets(case, times):
    out = []
    for lib, (op, want) in case.targets.items():
        r = ratio(case, times.get("ember"), times.get(lib))
        ok = "" if r is None else (" ok" if (r <= want if op == "<=" else r >= want) else " MISS")
        out.append(f"{op}{want}x {lib}{ok}")
    return ", ".join(out) or "-"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, shorter samples")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few repeats (tests)")
    p.add_argument("--filter", default="", help="run only cases whose name contains this")
    p.add_argument("--threads", type=int, help="threads for ember and torch (default: theirs)")
    args = p.parse_args(argv)
    global torch
    if ember._omp_env_set_by_ember:  # torch's own OpenMP runs with its default policy
        os.environ.pop("GOMP_SPINCOUNT", None)
    try:
        import torch
    except ImportError:
        pass
    repeats, sample_s = (3, 2e-4) if args.smoke else (7, 3e-3) if args.quick else (25, 1e-2)

    if args.threads:
        ember.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    print(f"ember {ember.__version__}  build {ember._C._build_info()}  "
          f"threads {ember.get_num_threads()}")
    print(f"numpy {np.__version__}  threads 1 (ufuncs are single-threaded)")
    print(f"torch {torch.__version__}  threads {torch.get_num_threads()}"
          if torch is not None else "torch not installed")
    overhead = call_overhead(repeats)
    print(f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs; {repeats} interleaved repeats, median; "
          f"loop+call overhead {overhead * 1e9:.0f} ns subtracted")
    if args.smoke:
        print("smoke run: sizes capped at 4096 elements, numbers are not meaningful")
    print("ratios are ember ÷ other: for times lower is better, for GB/s and GF/s higher is better\n")

    cases = [c for c in CASES if args.filter in c.name]
    widths = (max([4] + [len(c.name) for c in cases]), 11, 11, 11, 8, 8)

    def row(name, *cells):
        cells = [c.rjust(w) for c, w in zip(cells, widths[1:])] + list(cells[len(widths) - 1:])
        print("  ".join([name.ljust(widths[0])] + cells), flush=True)

    row("case", *LIBS, "vs numpy", "vs torch", "target")
    row(*("-" * w for w in widths), "------")
    for case in cases:
        if args.smoke:
            case = dataclasses.replace(case, n=min(case.n, 4096))
        fns = {lib: build(case.n) for lib, build in case.builders.items()
               if module(lib) is not None}
        note = case.check(fns) if case.check else None
        times = measure(fns, min(repeats, case.max_repeats or repeats), sample_s, overhead,
                        warmups=0 if case.check else 2,  # the check's calls warmed up
                        settle_s=0 if args.smoke else SETTLE_S)
        del fns
        ratios = (ratio(case, times["ember"], times.get(lib)) for lib in ("numpy", "torch"))
        row(case.name, *(fmt_value(case, times.get(lib)) for lib in LIBS),
            *("-" if r is None else f"{r:.2f}x" for r in ratios), fmt_targets(case, times))
        if note:
            print(note, flush=True)
    if args.filter in "import":
        print_import_costs(3 if args.smoke or args.quick else 7)


# fused cross-entropy (ops/cross_entropy.c, cpu/cross_entropy.c): GPT-like
# shapes — a character vocabulary (65 classes) and a larger batch of a big one
def _cross_entropy_case(cols, **kw):
    def make(m, a, b, c):
        k = min(cols, a.shape[0])
        n = a.shape[0] // k * k  # whole rows (--smoke sizes need not divide)
        x = (a[:n] * 4).reshape(n // k, k).clone().requires_grad_()
        t = (b[:n].reshape(n // k, k)[:, 0] * k).long()

        def step():
            x.grad = None
            m.nn.functional.cross_entropy(x, t, **kw).backward()
        return step
    return make


CASES += [
    Case("cross_entropy fwd+bwd, 4096x65 f32", 4096 * 65, autograd_libs(_cross_entropy_case(65))),
    Case("cross_entropy fwd+bwd, 2048x8192 f32", 2048 * 8192, autograd_libs(_cross_entropy_case(8192))),
    Case("cross_entropy fwd+bwd label_smoothing=0.1, 512x8192 f32", 512 * 8192,
         autograd_libs(_cross_entropy_case(8192, label_smoothing=0.1))),
]


if __name__ == "__main__":
    main()

