"""bfloat16 / float16 matrix products on the CPU: ember's two paths next to
PyTorch, as GFLOP/s and ratios (Note [low-precision GEMM] in
csrc/cpu/lowp_gemm.c).

    python -m benchmarks.lowp_gemm [--quick] [--filter SUBSTR] [--threads N] [--dtype bfloat16|float16]

Columns: ember with oneDNN ("library", when it loads and has a kernel for
the dtype), ember converting to float32 for sgemm ("convert"), and torch
(which links its own oneDNN). Cases: a 1024^3 mm, and the products of a
GPT training step at benchmarks/gpt.py's default shape (batch 8 x 64
tokens, 256 wide, 4 heads) and at GPT-2 small's (4 x 64 tokens, 768 wide,
12 heads, 50257-word head): the linears (F.linear with bias, as
nn.Linear calls it) and attention's batched q @ k^T. Libraries are timed
interleaved, in a rotating order, so that noise on a shared machine hits
them alike; the table shows medians. Each case first checks that ember's
and torch's results agree to the dtype's tolerance.
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np

import ember

torch = None  # imported in main()

FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16", "avx_vnni")


def cpu_header():
    model, flags = platform.processor() or "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("?", "", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    have = [f for f in FEATURES if f in flags]
    return f"CPU: {model}, {os.cpu_count()} cores; features: {' '.join(have) or 'none of ' + ' '.join(FEATURES)}"


def linear_case(name, rows, k, n, bias=True):
    """F.linear(x [rows, k], W [n, k], b [n]): the product nn.Linear makes"""
    def build(m, dt, rng):
        x = m.from_numpy(rng.standard_normal((rows, k), dtype=np.float32)).to(dt)
        w = m.from_numpy(rng.standard_normal((n, k), dtype=np.float32) * 0.05).to(dt)
        b = m.from_numpy(rng.standard_normal(n, dtype=np.float32)).to(dt) if bias else None
        F = m.nn.functional
        return lambda: F.linear(x, w, b)
    return name, 2.0 * rows * k * n, build, (1, rows, k, n, True)


def mm_case(name, mm, k, n):
    def build(m, dt, rng):
        a = m.from_numpy(rng.standard_normal((mm, k), dtype=np.float32)).to(dt)
        b = m.from_numpy(rng.standard_normal((k, n), dtype=np.float32)).to(dt)
        return lambda: m.mm(a, b)
    return name, 2.0 * mm * k * n, build, (1, mm, k, n, False)


def scores_case(name, bh, t, d):
    """attention's q @ k^T for bh (batch x heads) matrices of t x d"""
    def build(m, dt, rng):
        q = m.from_numpy(rng.standard_normal((bh, t, d), dtype=np.float32)).to(dt)
        kk = m.from_numpy(rng.standard_normal((bh, t, d), dtype=np.float32)).to(dt)
        return lambda: m.matmul(q, kk.transpose(-1, -2))
    return name, 2.0 * bh * t * t * d, build, (bh, t, d, t, True)


def gpt_cases(tag, rows, c, heads, t, vocab):
    return [linear_case(f"{tag} qkv linear {rows}x{c}->{3 * c}", rows, c, 3 * c),
            linear_case(f"{tag} proj linear {rows}x{c}->{c}", rows, c, c),
            linear_case(f"{tag} fc linear {rows}x{c}->{4 * c}", rows, c, 4 * c),
            linear_case(f"{tag} out linear {rows}x{4 * c}->{c}", rows, 4 * c, c),
            linear_case(f"{tag} head {rows}x{c}->{vocab}, no bias", rows, c, vocab, bias=False),
            scores_case(f"{tag} q@k^T {rows // t * heads}x({t}x{c // heads}x{t})", rows // t * heads, t, c // heads)]


CASES = ([mm_case("mm 1024x1024x1024", 1024, 1024, 1024)]
         + gpt_cases("gpt", 8 * 64, 256, 4, 64, 65)
         + gpt_cases("gpt2-small", 4 * 64, 768, 12, 64, 50257))


def mkl_builder(path):
    """The alternative library, timed raw: MKL's cblas_gemm_bf16bf16f32 / cblas_gemm_f16f16f32 (float32 C,
    no bias, no rounding back: less work than the others do), GNU OpenMP threading as ember's"""
    import ctypes
    lib = ctypes.CDLL(path)
    lib.MKL_Set_Threading_Layer(3)  # MKL_THREADING_GNU
    f32 = ctypes.c_float

    def build(dname, dims, threads):
        lib.MKL_Set_Num_Threads(threads)
        batch, m, k, n, tb = dims
        rng = np.random.default_rng(0)

        def bits(x):
            if dname == "float16":
                return x.astype(np.float16).view(np.uint16)
            u = x.view(np.uint32).astype(np.uint64)
            return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
        a = bits(rng.standard_normal((batch, m, k), dtype=np.float32))
        b = bits(rng.standard_normal((batch, n, k) if tb else (batch, k, n), dtype=np.float32))
        c = np.empty((batch, m, n), dtype=np.float32)
        fn = lib.cblas_gemm_f16f16f32 if dname == "float16" else lib.cblas_gemm_bf16bf16f32
        ptr = lambda x, i: x[i].ctypes.data_as(ctypes.c_void_p)
        calls = [(ptr(a, i), ptr(b, i), ptr(c, i)) for i in range(batch)]
        TB, ldb = (112, k) if tb else (111, n)

        def run():
            for pa, pb, pc in calls:
                fn(101, 111, TB, m, n, k, f32(1.0), pa, k, pb, ldb, f32(0.0), pc, n)
            return c
        return run
    return build


def sample(fn, min_s):
    """GFLOP-free: seconds per call, over enough calls to last min_s"""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_s:
            return el / n


def main():
    global torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats of 20 ms samples")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--threads", type=int, default=0, help="threads for both libraries (default: ember's)")
    ap.add_argument("--dtype", action="append", choices=("bfloat16", "float16"),
                    help="dtypes to run (default both)")
    ap.add_argument("--gpt-step", action="store_true",
                    help="also time benchmarks/gpt.py's training step under autocast(bfloat16)")
    ap.add_argument("--mkl", default="", help="path of libmkl_rt.so: add MKL's bf16/fp16 GEMM, timed raw")
    args = ap.parse_args()
    import torch as _torch
    torch = _torch
    threads = args.threads or ember.get_num_threads()
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    info = ember._C._lowp_gemm_info()
    print(cpu_header())
    lib = (f"oneDNN {info['version']} at {info['path']}" if info["loaded"]
           else f"not loaded ({info['error'] or 'not found'})")
    print(f"ember: lowp library {lib}; kernels: "
          + ", ".join(f"{d} {v['impl'] or 'none'}" for d, v in info["dtypes"].items()))
    mkldnn = [ln.strip() for ln in torch.__config__.show().splitlines() if "DNN" in ln]
    print(f"torch {torch.__version__} ({mkldnn[0] if mkldnn else 'no oneDNN'}); {threads} threads each")
    mkl = mkl_builder(args.mkl) if args.mkl else None
    if mkl:
        print(f"mkl: {args.mkl}, raw cblas_gemm_*16*16f32 calls (float32 C, no bias)")
    repeats, min_s = (3, 0.02) if args.quick else (7, 0.05)
    mode0 = info["mode"]
    dtypes = args.dtype or ["bfloat16", "float16"]
    for dname in dtypes:
        paths = ["convert"] + (["library"] if info["loaded"] and info["dtypes"][dname]["supported"] else [])
        cols = [f"ember {p}" for p in paths] + (["mkl raw"] if mkl else []) + ["torch"]
        print(f"\n{dname}: GFLOP/s (median of {repeats}), and ember / torch")
        head = f"{'case':44s}" + "".join(f"{c:>15s}" for c in cols) + "".join(f"{c + '/torch':>20s}" for c in cols[:-1])
        print(head)
        for name, flops, build, dims in CASES:
            if args.filter not in name:
                continue
            fns = {}
            for p in paths:
                ember._C._set_lowp_gemm(p)
                fns[f"ember {p}"] = (p, build(ember, getattr(ember, dname), np.random.default_rng(0)))
            if mkl:
                fns["mkl raw"] = (None, mkl(dname, dims, threads))
            fns["torch"] = (None, build(torch, getattr(torch, dname), np.random.default_rng(0)))
            # the libraries agree (torch's tolerance for the dtype, on values of size ~sqrt(k))
            ref = fns["torch"][1]().float().numpy()
            for c, (p, fn) in fns.items():
                if p:
                    ember._C._set_lowp_gemm(p)
                    got = fn().float().numpy()
                    scale = np.abs(ref).max() + 1e-30
                    if np.abs(got - ref).max() > (2e-2 if dname == "bfloat16" else 2e-3) * scale:
                        raise SystemExit(f"{name}: {c} differs from torch by {np.abs(got - ref).max()} (max {scale})")
            times = {c: [] for c in fns}
            order = list(fns)
            for r in range(repeats):
                for c in order[r % len(order):] + order[:r % len(order)]:
                    p, fn = fns[c]
                    if p:
                        ember._C._set_lowp_gemm(p)
                    time.sleep(0.01)  # the other library's idle threads stop spinning
                    times[c].append(sample(fn, min_s))
            g = {c: flops / statistics.median(ts) / 1e9 for c, ts in times.items()}
            line = f"{name:44s}" + "".join(f"{g[c]:15.1f}" for c in cols)
            line += "".join(f"{g[c] / g['torch']:20.2f}" for c in cols[:-1])
            print(line, flush=True)
    if args.gpt_step:
        gpt_steps(info, repeats)
    ember._C._set_lowp_gemm(mode0)


def gpt_steps(info, repeats):
    """ms per training step of benchmarks/gpt.py's default GPT under autocast(bfloat16): the linears' products
    (forward and backward) are bfloat16 GEMMs; attention and the rest are as without the library"""
    from benchmarks.gpt import gpt_step
    paths = ["convert"] + (["library"] if info["loaded"] and info["dtypes"]["bfloat16"]["supported"] else [])
    steps = {}
    for p in paths:
        steps[f"ember {p}"] = (p, gpt_step(ember, autocast=ember.bfloat16))
    steps["torch"] = (None, gpt_step(torch, autocast=torch.bfloat16))
    times = {c: [] for c in steps}
    order = list(steps)
    for r in range(repeats):
        for c in order[r % len(order):] + order[:r % len(order)]:
            p, fn = steps[c]
            if p:
                ember._C._set_lowp_gemm(p)
            time.sleep(0.01)
            times[c].append(sample(fn, 0.2))
    ms = {c: 1e3 * statistics.median(ts) for c, ts in times.items()}
    print(f"\nGPT step (benchmarks/gpt.py default, autocast bfloat16): ms per step, median of {repeats}")
    print("".join(f"{c:>15s}" for c in ms) + "".join(f"{c + '/torch':>20s}" for c in ms if c != "torch"))
    print("".join(f"{v:15.1f}" for v in ms.values())
          + "".join(f"{ms[c] / ms['torch']:20.2f}" for c in ms if c != "torch"))


if __name__ == "__main__":
    main()
