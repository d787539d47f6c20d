"""GPU benchmark: ember next to PyTorch on the same GPU, as ratios.

    python -m benchmarks.gpu [--quick]

Cases (and their targets):
  bf16 matmul 8192^2           TFLOP/s, ember >= 0.95x torch
  a + b, 256M float32          GB/s vs a device-to-device copy of the same bytes, >= 0.9x
  per-op launch overhead       us per small op (a + b on 1,024 elements), ember <= 0.5x torch
  GPT-2 small bf16 train step  T=1024: tokens/s >= 1.0x torch eager, MFU >= 40%

Timing: CUDA events around a loop after warm-up, the median of several
repeats. Needs a GPU with both libraries' CUDA backends; prints why not
otherwise. Run by benchmarks/gpu_check.sh on the device machine.
"""
import argparse
import statistics
import sys
import time

H200_BF16_DENSE_TFLOPS = 989.0  # vendor datasheet, dense bf16: the MFU denominator


def _sync(lib):
    lib.cuda.synchronize()


def time_gpu(lib, fn, inner, repeats):
    """Median milliseconds per call of fn, timed with the library's CUDA events."""
    for _ in range(max(2, inner // 4)):
        fn()
    _sync(lib)
    times = []
    for _ in range(repeats):
        start, end = lib.cuda.Event(enable_timing=True), lib.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def time_host(lib, fn, inner, repeats):
    """Median wall microseconds per call (launch overhead: the host side)."""
    for _ in range(inner // 4 + 1):
        fn()
    _sync(lib)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        _sync(lib)
        times.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(times)


def bench_matmul(lib, n, repeats):
    a = lib.randn(n, n, device="cuda", dtype=lib.bfloat16)
    b = lib.randn(n, n, device="cuda", dtype=lib.bfloat16)
    ms = time_gpu(lib, lambda: a @ b, 10, repeats)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def bench_add(lib, n, repeats):
    a = lib.randn(n, device="cuda")
    b = lib.randn(n, device="cuda")
    c = lib.empty(n, device="cuda")
    ms = time_gpu(lib, lambda: lib.add(a, b, out=c), 10, repeats)
    add_gbs = 3 * 4 * n / (ms * 1e-3) / 1e9
    ms_copy = time_gpu(lib, lambda: c.copy_(a), 10, repeats)
    copy_gbs = 2 * 4 * n / (ms_copy * 1e-3) / 1e9
    return add_gbs, copy_gbs


def bench_launch(lib, repeats):
    a = lib.randn(1024, device="cuda")
    b = lib.randn(1024, device="cuda")
    return time_host(lib, lambda: a + b, 2000, repeats)


def gpt2_step_tokens_per_s(lib, steps, batch, T):
    """A GPT-2 small (124M) bf16-autocast AdamW step on T tokens per sequence
    (benchmarks/gpt.py's model at GPT-2 small's size, on the GPU)."""
    from benchmarks.gpt import GPT2_SMALL, gpt_step
    shape = {k: v for k, v in GPT2_SMALL.items() if k not in ("batch", "seq")}
    step = gpt_step(lib, batch=batch, seq=T, device="cuda", autocast=lib.bfloat16, **shape)
    model = step.model
    for _ in range(2):
        step()
    _sync(lib)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    _sync(lib)
    dt = (time.perf_counter() - t0) / steps
    n_params = sum(p.numel() for p in model.parameters())
    tokens = batch * T
    mfu = 6 * n_params * tokens / dt / (H200_BF16_DENSE_TFLOPS * 1e12)
    return tokens / dt, mfu, float(loss)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--skip-gpt", action="store_true")
    args = p.parse_args(argv)
    import ember
    try:
        import torch
    except ImportError:
        torch = None
    if not ember.cuda.is_available():
        print("ember.cuda.is_available() is False: no GPU benchmark")
        return 0
    libs = [ember] + ([torch] if torch is not None and torch.cuda.is_available() else [])
    rep = 3 if args.quick else 7
    rows = []
    res = {lib.__name__: {} for lib in libs}
    for lib in libs:
        r = res[lib.__name__]
        r["matmul"] = bench_matmul(lib, 4096 if args.quick else 8192, rep)
        r["add"], r["copy"] = bench_add(lib, (64 if args.quick else 256) * 2 ** 20, rep)
        r["launch"] = bench_launch(lib, rep)
        if not args.skip_gpt:
            try:
                r["gpt"] = gpt2_step_tokens_per_s(lib, 3 if args.quick else 10, 4 if args.quick else 8, 1024)
            except Exception as e:  # report, keep the other rows
                r["gpt"] = None
                print(f"{lib.__name__}: GPT-2 step failed: {type(e).__name__}: {e}", file=sys.stderr)
    e, t = res["ember"], res.get("torch", {})

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"
    rows.append(("bf16 matmul TFLOP/s", e["matmul"], t.get("matmul"), ratio(e["matmul"], t.get("matmul")), ">=0.95x torch"))
    rows.append(("a+b GB/s (256M f32)", e["add"], t.get("add"), ratio(e["add"], e["copy"]) + " of copy", ">=0.9x D2D copy"))
    rows.append(("D2D copy GB/s", e["copy"], t.get("copy"), ratio(e["copy"], t.get("copy")), ""))
    rows.append(("launch overhead us/op", e["launch"], t.get("launch"), ratio(e["launch"], t.get("launch")), "<=0.5x torch"))
    if e.get("gpt"):
        tg = t.get("gpt")
        rows.append(("GPT-2 small bf16 tokens/s", e["gpt"][0], tg[0] if tg else None,
                     ratio(e["gpt"][0], tg[0] if tg else None), ">=1.0x torch"))
        rows.append(("GPT-2 small MFU %", 100 * e["gpt"][1], 100 * tg[1] if tg else None, "", ">=40%"))
    print(f"{'case':30s} {'ember':>12s} {'torch':>12s} {'ratio':>16s}  target")
    for name, a, b, r, target in rows:
        fa = f"{a:12.2f}" if a is not None else f"{'-':>12s}"
        fb = f"{b:12.2f}" if b is not None else f"{'-':>12s}"
        print(f"{name:30s} {fa} {fb} {r:>16s}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
