"""The per-element index math of the GPU indexing kernels (csrc/cuda/index_math.h,
Note [CUDA indexing]) built for the host and checked against loops written
out here in the CPU loops' order (Note [indirect loops], Note [scatter loops]
in ember.h): for random geometries, the (x, d) byte offsets each launch
position i reads and writes must be exactly the nested loops' sequence. This
is the part of index.cu whose mistakes the fake backend (which runs
cpu/index.c) cannot see; the kernels around it are a few lines each."""

import itertools
import os
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = r"""
#include "cuda/index_math.h"
#include <cstdio>
#include <cstring>
#include <vector>

static long long rd() { long long v; if (scanf("%lld", &v) != 1) v = 0; return v; }

int main() {
    char mode[32];
    while (scanf("%31s", mode) == 1) {
        if (!strcmp(mode, "indirect")) {
            static EmCudaIndirect g;
            memset(&g, 0, sizeof g);
            g.np = (int)rd();
            for (int k = 0; k < g.np; k++) { g.psize[k] = rd(); g.ps_x[k] = rd(); g.ps_d[k] = rd(); }
            g.na = (int)rd();
            for (int k = 0; k < g.na; k++) { g.asize[k] = rd(); g.as_x[k] = rd(); g.as_d[k] = rd(); }
            g.nj = rd();
            std::vector<int64_t> off(g.nj), doff(g.nj);
            for (auto &o : off) o = rd();
            long long dense = rd();
            if (dense) for (auto &o : doff) o = rd(); else g.dense_jstride = rd();
            g.off = off.data();
            g.dense_off = dense ? doff.data() : nullptr;
            int64_t P = 1, A = 1;
            for (int k = 0; k < g.np; k++) P *= g.psize[k];
            for (int k = 0; k < g.na; k++) A *= g.asize[k];
            for (int64_t i = 0; i < P * g.nj * A; i++) {
                int64_t x, d;
                emc_index_locate(g, A, i, &x, &d);
                printf("%lld %lld\n", (long long)x, (long long)d);
            }
        } else if (!strcmp(mode, "scatter")) {
            static EmCudaScatter g;
            memset(&g, 0, sizeof g);
            g.nrow = (int)rd();
            for (int k = 0; k < g.nrow; k++) { g.rsize[k] = rd(); g.rs_x[k] = rd(); g.rs_y[k] = rd(); g.rs_i[k] = rd(); }
            g.n = rd(); g.xs = rd(); g.ys = rd(); g.is = rd();
            int64_t R = 1;
            for (int k = 0; k < g.nrow; k++) R *= g.rsize[k];
            for (int64_t i = 0; i < R * g.n; i++) {
                int64_t x, y, ix;
                emc_index_scatter_locate(g, i, &x, &y, &ix);
                printf("%lld %lld %lld\n", (long long)x, (long long)y, (long long)ix);
            }
        } else if (!strcmp(mode, "strided")) {
            static EmcShape s;
            s.nd = (int)rd();
            int64_t n = 1;
            for (int k = 0; k < s.nd; k++) { s.size[k] = rd(); s.stride[k] = rd(); n *= s.size[k]; }
            for (int64_t i = 0; i < n; i++) printf("%lld\n", (long long)emc_index_strided(s, i));
        } else if (!strcmp(mode, "wrap")) {
            long long n = rd();
            for (long long k = 0; k < n; k++) {
                long long v = rd(), size = rd(), w = rd();
                printf("%lld\n", (long long)emc_index_wrap(v, size, w != 0));
            }
        }
        printf("end\n");
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("needs a C++ compiler")
    d = tmp_path_factory.mktemp("index_math")
    src, exe = d / "driver.cpp", d / "driver"
    src.write_text(DRIVER)
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "csrc"),
                    str(src), "-o", str(exe)], check=True)

    def run(text):
        out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout
        blocks = out.split("end\n")
        return [[tuple(int(v) for v in line.split()) for line in b.splitlines()] for b in blocks[:-1]]
    return run


def nums(*vals):
    return " ".join(str(int(v)) for v in vals)


def indirect_case(rng):
    np_, na = rng.integers(0, 4), rng.integers(0, 4)
    P = [(rng.integers(1, 4), rng.integers(-50, 50), rng.integers(-50, 50)) for _ in range(np_)]
    A = [(rng.integers(1, 4), rng.integers(-50, 50), rng.integers(-50, 50)) for _ in range(na)]
    nj = int(rng.integers(1, 5))
    off = rng.integers(0, 1000, nj)
    dense = bool(rng.integers(0, 2))
    doff = rng.integers(0, 1000, nj)
    djs = int(rng.integers(-20, 20))
    text = "indirect " + nums(np_, *[v for t in P for v in t], na, *[v for t in A for v in t], nj, *off, dense)
    text += " " + (nums(*doff) if dense else nums(djs)) + "\n"
    want = []
    for pc in itertools.product(*[range(s) for s, _, _ in P]):
        for j in range(nj):
            for ac in itertools.product(*[range(s) for s, _, _ in A]):
                x = off[j] + sum(c * sx for c, (_, sx, _) in zip(pc, P)) + sum(c * sx for c, (_, sx, _) in zip(ac, A))
                d = (doff[j] if dense else j * djs) + sum(c * sd for c, (_, _, sd) in zip(pc, P)) + \
                    sum(c * sd for c, (_, _, sd) in zip(ac, A))
                want.append((int(x), int(d)))
    return text, want


def scatter_case(rng):
    nrow = rng.integers(0, 4)
    R = [tuple(rng.integers(-40, 40, 4)) for _ in range(nrow)]
    R = [(abs(int(s)) % 3 + 1, a, b, c) for s, a, b, c in R]
    n, xs, ys, is_ = int(rng.integers(1, 5)), *rng.integers(-30, 30, 3)
    text = "scatter " + nums(nrow, *[v for t in R for v in t], n, xs, ys, is_) + "\n"
    want = []
    for rc in itertools.product(*[range(t[0]) for t in R]):
        for k in range(n):
            want.append(tuple(int(k * s + sum(c * t[m] for c, t in zip(rc, R))) for s, m in ((xs, 1), (ys, 2), (is_, 3))))
    return text, want


def test_indirect_locate_follows_the_cpu_loop_order(driver):
    rng = np.random.default_rng(0)
    cases = [indirect_case(rng) for _ in range(60)]
    got = driver("".join(t for t, _ in cases))
    for (text, want), g in zip(cases, got):
        assert g == want, text


def test_scatter_locate_follows_the_cpu_loop_order(driver):
    rng = np.random.default_rng(1)
    cases = [scatter_case(rng) for _ in range(60)]
    got = driver("".join(t for t, _ in cases))
    for (text, want), g in zip(cases, got):
        assert g == want, text


def test_strided_positions_are_numpy_row_major(driver):
    rng = np.random.default_rng(2)
    for nd in range(0, 5):
        shape = tuple(int(s) for s in rng.integers(1, 4, nd))
        base = np.arange(int(np.prod(shape)) * 4).reshape(tuple(s * 2 for s in shape[:1]) + shape[1:] + (2,)) \
            if nd else np.arange(3)
        view = base[(slice(None, None, 2),) + (slice(None),) * (nd - 1) + (1,)] if nd else base[1]
        strides = [s // base.itemsize for s in view.strides]
        (got,) = driver("strided " + nums(nd, *[v for p in zip(shape, strides) for v in p]) + "\n")
        first = base.ravel()[0]
        start = (view.ravel()[0] if nd else view) - first
        assert [g[0] + start for g in got] == list(np.asarray(view).ravel() - first)


def test_wrap_matches_python_indexing(driver):
    vals = [(v, size, w) for size in (1, 3, 7) for v in range(-9, 10) for w in (0, 1)]
    vals.append((-(1 << 62), 5, 1))
    vals.append((1 << 62, 1 << 62, 0))
    (got,) = driver("wrap " + nums(len(vals), *[x for t in vals for x in t]) + "\n")
    for (v, size, w), (g,) in zip(vals, got):
        u = v + size if (w and v < 0) else v
        assert g == (u if 0 <= u < size else -1), (v, size, w)
