/* reduce.cu — the GPU reductions (Note [CUDA reduce] in cuda_backend.h): one
 * launch per EmCudaReduce, the plan the core's reduce iterator made (kept
 * dims x reduced dims, innermost first, byte strides). Each op is a small
 * struct — Acc (the accumulator), ident, step (fold one value with its
 * reduced index), combine (merge a partial), finish (the results) — with the
 * CPU kernels' semantics (csrc/cpu/reduce.c): integer sums and products wrap
 * in int64; float32/float64 sums accumulate in double as on the CPU, the
 * half types in float; NaN propagates through extrema; arg-reductions take
 * the first index of the extreme (or of the first NaN).
 *
 * One kernel template serves three shapes of work, 256 threads a block:
 *  - inner (the reduced dim is the input's innermost of the two groups, and
 *    long): a group of G = 32..256 threads per output strides along the
 *    run (coalesced), folds in registers, then warp shuffles and a few
 *    shared-memory slots combine the group;
 *  - outer / column (a kept dim is innermost, or the run is short): the 256
 *    threads are OPB neighbouring outputs x P threads per output, so a warp
 *    reads OPB consecutive elements per step; shared memory combines the P;
 *  - when there are few outputs and a long reduction, either shape also
 *    splits the reduced range over gridDim.y blocks, which write partial
 *    accumulators to a workspace that a second kernel combines in order
 *    and finishes (a two-stage grid reduction).
 * Combines are order-independent where it matters (argmax/argmin break ties
 * by index), so no launch shape changes a tie's winner.
 *
 * Built inside ember._cuda it uses the runtime's current stream, caching
 * allocator, error buffer and device guard (csrc/cuda/runtime.h); alone it
 * falls back to the legacy default stream, cudaMallocAsync and its own
 * error buffer, so the file compiles and links by itself. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "reduce.h"

#if __has_include("runtime.h")
#include "runtime.h"
#define EMR_WITH_RUNTIME 1
#else
#define EMR_WITH_RUNTIME 0
#endif

namespace {

/* EmDType codes (csrc/ember.h) */
enum { RD_BOOL, RD_UINT8, RD_INT8, RD_INT16, RD_INT32, RD_INT64, RD_FLOAT16, RD_BFLOAT16,
       RD_FLOAT32, RD_FLOAT64 };

constexpr int kThreads = 256;
constexpr int kMaxDims = 16; /* per group after merging; more is refused with a message */

/* ------------------------------------------------------------ errors */

thread_local char err_buf[512];

int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
#if EMR_WITH_RUNTIME
    return emc_fail("%s", err_buf);
#else
    return -1;
#endif
}

int check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    cudaGetLastError(); /* clear it: a later, unrelated call must not see it */
    return fail("%s: %s", what, cudaGetErrorString(e));
}

/* ----------------------------------------------- runtime services */

#if EMR_WITH_RUNTIME
using Guard = EmcDeviceGuard;
int multiprocessors(int dev) { return emc_multiprocessors(dev); }
void *ws_alloc(int dev, size_t n, cudaStream_t s) { return emc_alloc(dev, n, (EmCudaStream)s); }
void ws_free(int dev, void *p, size_t n, cudaStream_t s) { emc_free(dev, p, n, (EmCudaStream)s); }
cudaStream_t current_stream(int dev) { return (cudaStream_t)emc_current_stream(dev); }
#else
struct Guard {
    int prev = -1, ok = 0;
    explicit Guard(int dev) {
        if (check(cudaGetDevice(&prev), "cudaGetDevice") < 0) return;
        if (prev != dev && check(cudaSetDevice(dev), "cudaSetDevice") < 0) return;
        ok = 1;
    }
    ~Guard() {
        int now;
        if (ok && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;
};
int multiprocessors(int dev) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        cudaGetLastError();
        return 1;
    }
    return n;
}
void *ws_alloc(int dev, size_t n, cudaStream_t s) {
    void *p = nullptr;
    if (check(cudaMallocAsync(&p, n, s), "reduction workspace") < 0) return nullptr;
    return p;
}
void ws_free(int dev, void *p, size_t n, cudaStream_t s) { cudaFreeAsync(p, s); }
cudaStream_t current_stream(int dev) { return nullptr; }
#endif

/* ------------------------------------------------------ geometry */

/* The launch description as a kernel parameter (about 1 KB): kept dims
 * (sizes; byte strides of input, out0, out1, aux) and reduced dims. */
struct Geo {
    const char *in;
    char *out0, *out1;
    const char *aux;
    int nk, nr;
    int od0, od1; /* output dtypes */
    int64_t M, R;
    int64_t ks[kMaxDims], kin[kMaxDims], ko0[kMaxDims], ko1[kMaxDims], kax[kMaxDims];
    int64_t rs[kMaxDims], rin[kMaxDims];
    double p, divisor;
    bool root;
};

__device__ __forceinline__ uint64_t udiv(uint64_t a, uint64_t b) {
    if (((a | b) >> 32) == 0) return (uint32_t)a / (uint32_t)b; /* far cheaper */
    return a / b;
}

/* Byte offsets of output o in the input and the outputs. The loop is
 * unrolled so the parameter arrays are read at constant offsets (indexing
 * them at run time would copy the struct to local memory). */
__device__ __forceinline__ void kept_offsets(const Geo &g, int64_t o, int64_t &in, int64_t &o0,
                                             int64_t &o1, int64_t &ax) {
    in = o0 = o1 = ax = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; d++) {
        if (d >= g.nk) break;
        int64_t c = o;
        if (d + 1 < g.nk) {
            int64_t q = (int64_t)udiv((uint64_t)o, (uint64_t)g.ks[d]);
            c = o - q * g.ks[d];
            o = q;
        }
        in += c * g.kin[d];
        o0 += c * g.ko0[d];
        o1 += c * g.ko1[d];
        ax += c * g.kax[d];
    }
}

/* Byte offset in the input of reduced element j (innermost first). */
__device__ __forceinline__ int64_t red_offset(const Geo &g, int64_t j) {
    int64_t off = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; d++) {
        if (d >= g.nr) break;
        int64_t c = j;
        if (d + 1 < g.nr) {
            int64_t q = (int64_t)udiv((uint64_t)j, (uint64_t)g.rs[d]);
            c = j - q * g.rs[d];
            j = q;
        }
        off += c * g.rin[d];
    }
    return off;
}

/* --------------------------------------------------------- dtypes */

struct Half { uint16_t bits; };
struct BHalf { uint16_t bits; };

__device__ __forceinline__ float f_inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double d_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

/* Tr<T>: CT the type values are compared in, WT the wide sum accumulator,
 * lo/hi the identities of max/min, load from a byte address. */
template <class T> struct Tr;
template <> struct Tr<bool> {
    using CT = bool;
    using WT = int64_t;
    __device__ static CT load(const char *p) { return *(const uint8_t *)p != 0; }
    __device__ static CT lo() { return false; }
    __device__ static CT hi() { return true; }
};
#define EMR_INT_TR(T, LO, HI)                                                          \
    template <> struct Tr<T> {                                                         \
        using CT = T;                                                                  \
        using WT = int64_t;                                                            \
        __device__ static CT load(const char *p) { return *(const T *)p; }             \
        __device__ static CT lo() { return (T)(LO); }                                  \
        __device__ static CT hi() { return (T)(HI); }                                  \
    };
EMR_INT_TR(uint8_t, 0, 255)
EMR_INT_TR(int8_t, -128, 127)
EMR_INT_TR(int16_t, -32768, 32767)
EMR_INT_TR(int32_t, -2147483647 - 1, 2147483647)
EMR_INT_TR(int64_t, -9223372036854775807LL - 1, 9223372036854775807LL)
#undef EMR_INT_TR
template <> struct Tr<Half> {
    using CT = float;
    using WT = float; /* half types accumulate in float */
    __device__ static CT load(const char *p) {
        return __half2float(__ushort_as_half(*(const unsigned short *)p));
    }
    __device__ static CT lo() { return -f_inf(); }
    __device__ static CT hi() { return f_inf(); }
};
template <> struct Tr<BHalf> {
    using CT = float;
    using WT = float;
    __device__ static CT load(const char *p) {
        return __uint_as_float((unsigned)*(const unsigned short *)p << 16);
    }
    __device__ static CT lo() { return -f_inf(); }
    __device__ static CT hi() { return f_inf(); }
};
template <> struct Tr<float> {
    using CT = float;
    using WT = double; /* as the CPU: float32 sums in double */
    __device__ static CT load(const char *p) { return *(const float *)p; }
    __device__ static CT lo() { return -f_inf(); }
    __device__ static CT hi() { return f_inf(); }
};
template <> struct Tr<double> {
    using CT = double;
    using WT = double;
    __device__ static CT load(const char *p) { return *(const double *)p; }
    __device__ static CT lo() { return -d_inf(); }
    __device__ static CT hi() { return d_inf(); }
};

/* A result before it is stored: an int64 or a float64 (the CPU kernels'
 * result dtypes), converted to the output's dtype by store(). */
struct Val {
    double d;
    int64_t i;
    bool is_int;
};
__device__ __forceinline__ Val ival(int64_t i) { return Val{0.0, i, true}; }
__device__ __forceinline__ Val dval(double d) { return Val{d, 0, false}; }
template <class X> __device__ __forceinline__ Val val(X x) {
    if constexpr (std::is_floating_point<X>::value)
        return dval((double)x);
    else
        return ival((int64_t)x);
}

/* float -> bfloat16 bits, round to nearest even, NaN kept quiet */
__device__ __forceinline__ uint16_t bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Note [CUDA casts] of the strided copy: floats to narrow integers through
 * int64 (low bits), to bool `!= 0`, halves through float. */
__device__ void store(char *p, int dt, const Val &v) {
    int64_t i = v.is_int ? v.i : (int64_t)v.d;
    double d = v.is_int ? (double)v.i : v.d;
    switch (dt) {
    case RD_BOOL: *(uint8_t *)p = v.is_int ? v.i != 0 : v.d != 0; break;
    case RD_UINT8: *(uint8_t *)p = (uint8_t)i; break;
    case RD_INT8: *(int8_t *)p = (int8_t)i; break;
    case RD_INT16: *(int16_t *)p = (int16_t)i; break;
    case RD_INT32: *(int32_t *)p = (int32_t)i; break;
    case RD_INT64: *(int64_t *)p = i; break;
    case RD_FLOAT16: *(unsigned short *)p = __half_as_ushort(__float2half_rn((float)d)); break;
    case RD_BFLOAT16: *(uint16_t *)p = bf16_bits((float)d); break;
    case RD_FLOAT32: *(float *)p = (float)d; break;
    case RD_FLOAT64: *(double *)p = d; break;
    default: break;
    }
}

/* integer sums and products wrap (the CPU builds with -fwrapv) */
template <class W> __device__ __forceinline__ W wadd(W a, W b) {
    if constexpr (std::is_integral<W>::value)
        return (W)((uint64_t)a + (uint64_t)b);
    else
        return a + b;
}
template <class W> __device__ __forceinline__ W wmul(W a, W b) {
    if constexpr (std::is_integral<W>::value)
        return (W)((uint64_t)a * (uint64_t)b);
    else
        return a * b;
}
template <class C> __device__ __forceinline__ bool isnan_(C x) { return x != x; }
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }

/* ------------------------------------------------------------- ops */

#define EMR_TYPES                                                                      \
    using CT = typename Tr<T>::CT;                                                     \
    using WT = typename Tr<T>::WT;

template <class T> struct Sum {
    EMR_TYPES
    using Acc = WT;
    __device__ static Acc ident(double) { return (WT)0; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a = wadd(a, (WT)v); }
    __device__ static void combine(Acc &a, const Acc &b) { a = wadd(a, b); }
    __device__ static void finish(const Acc &a, const Geo &g, Val &v0, Val &) {
        if constexpr (std::is_integral<WT>::value)
            v0 = ival(a);
        else
            v0 = dval((double)a / g.divisor); /* mean: the count; 1 for sum */
    }
};

template <class T> struct NanSum : Sum<T> {
    EMR_TYPES
    using Acc = WT;
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) {
        if (!isnan_(v)) a += (WT)v;
    }
};

template <class T> struct NanMean {
    EMR_TYPES
    struct Acc {
        WT s;
        int64_t c;
    };
    __device__ static Acc ident(double) { return Acc{(WT)0, 0}; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) {
        if (!isnan_(v)) {
            a.s += (WT)v;
            a.c++;
        }
    }
    __device__ static void combine(Acc &a, const Acc &b) {
        a.s += b.s;
        a.c += b.c;
    }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) {
        v0 = dval((double)a.s / (double)a.c);
    }
};

template <class T> struct Prod {
    EMR_TYPES
    using Acc = WT;
    __device__ static Acc ident(double) { return (WT)1; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a = wmul(a, (WT)v); }
    __device__ static void combine(Acc &a, const Acc &b) { a = wmul(a, b); }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) { v0 = val(a); }
};

/* count_nonzero, all, any: NaN is nonzero */
template <class T> struct CountNonzero {
    EMR_TYPES
    using Acc = int64_t;
    __device__ static Acc ident(double) { return 0; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a += v != (CT)0; }
    __device__ static void combine(Acc &a, const Acc &b) { a += b; }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) { v0 = ival(a); }
};
template <class T> struct All : CountNonzero<T> {
    EMR_TYPES
    using Acc = int64_t;
    __device__ static Acc ident(double) { return 1; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a &= v != (CT)0; }
    __device__ static void combine(Acc &a, const Acc &b) { a &= b; }
};
template <class T> struct Any : CountNonzero<T> {
    EMR_TYPES
    using Acc = int64_t;
    __device__ static Acc ident(double) { return 0; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a |= v != (CT)0; }
    __device__ static void combine(Acc &a, const Acc &b) { a |= b; }
};

/* extrema: NaN propagates — once held, nothing replaces it */
template <class C> __device__ __forceinline__ C max_of(C a, C v) {
    return ((v > a) || isnan_(v)) && !isnan_(a) ? v : a;
}
template <class C> __device__ __forceinline__ C min_of(C a, C v) {
    return ((v < a) || isnan_(v)) && !isnan_(a) ? v : a;
}

template <class T> struct Amax {
    EMR_TYPES
    using Acc = CT;
    __device__ static Acc ident(double) { return Tr<T>::lo(); }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a = max_of(a, v); }
    __device__ static void combine(Acc &a, const Acc &b) { a = max_of(a, b); }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) { v0 = val(a); }
};
template <class T> struct Amin : Amax<T> {
    EMR_TYPES
    using Acc = CT;
    __device__ static Acc ident(double) { return Tr<T>::hi(); }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a = min_of(a, v); }
    __device__ static void combine(Acc &a, const Acc &b) { a = min_of(a, b); }
};

/* aminmax: out0 the min, out1 the max */
template <class T> struct AminMax {
    EMR_TYPES
    struct Acc {
        CT lo, hi;
    };
    __device__ static Acc ident(double) { return Acc{Tr<T>::hi(), Tr<T>::lo()}; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) {
        a.lo = min_of(a.lo, v);
        a.hi = max_of(a.hi, v);
    }
    __device__ static void combine(Acc &a, const Acc &b) {
        a.lo = min_of(a.lo, b.lo);
        a.hi = max_of(a.hi, b.hi);
    }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &v1) {
        v0 = val(a.lo);
        v1 = val(a.hi);
    }
};

/* argmax / argmin (and max/min with dim): the first index of the extreme or
 * of the first NaN. step sees increasing indices within a thread; combine
 * breaks ties by index, so it is correct in any order. */
template <class T, bool IsMax> struct ArgExt {
    EMR_TYPES
    struct Acc {
        CT v;
        int64_t idx;
    };
    __device__ static bool better(CT x, CT y) { return IsMax ? x > y : x < y; }
    __device__ static Acc ident(double) { return Acc{IsMax ? Tr<T>::lo() : Tr<T>::hi(), -1}; }
    __device__ static void step(Acc &a, CT v, int64_t j, const Geo &) {
        if (a.idx < 0 || better(v, a.v) || (isnan_(v) && !isnan_(a.v))) {
            a.v = v;
            a.idx = j;
        }
    }
    __device__ static void combine(Acc &a, const Acc &b) {
        if (b.idx < 0) return;
        if (a.idx < 0) {
            a = b;
            return;
        }
        bool an = isnan_(a.v), bn = isnan_(b.v), take;
        if (an || bn)
            take = bn && (!an || b.idx < a.idx);
        else
            take = better(b.v, a.v) || (b.v == a.v && b.idx < a.idx);
        if (take) a = b;
    }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &v1) {
        v0 = val(a.v);
        v1 = ival(a.idx);
    }
};
template <class T> using ArgMax = ArgExt<T, true>;
template <class T> using ArgMin = ArgExt<T, false>;

/* vector norms of float inputs: p = 0, 1, 2, inf, -inf, other (g.p) */
template <class T> struct Norm0 {
    EMR_TYPES
    using Acc = double;
    __device__ static Acc ident(double) { return 0.0; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a += v != (CT)0; }
    __device__ static void combine(Acc &a, const Acc &b) { a += b; }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) { v0 = dval(a); }
};
template <class T> struct Norm1 {
    EMR_TYPES
    using Acc = WT;
    __device__ static Acc ident(double) { return (WT)0; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a += fabs((WT)v); }
    __device__ static void combine(Acc &a, const Acc &b) { a += b; }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) { v0 = dval((double)a); }
};
template <class T> struct Norm2 : Norm1<T> {
    EMR_TYPES
    using Acc = WT;
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { a += (WT)v * (WT)v; }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) {
        v0 = dval(sqrt((double)a));
    }
};
template <class T> struct NormP : Norm0<T> {
    EMR_TYPES
    using Acc = double;
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &g) { a += pow(fabs((double)v), g.p); }
    __device__ static void finish(const Acc &a, const Geo &g, Val &v0, Val &) {
        v0 = dval(pow(a, 1.0 / g.p));
    }
};
template <class T> struct NormInf : Norm0<T> {
    EMR_TYPES
    using Acc = double;
    __device__ static void take(Acc &a, double t) {
        if (t > a || isnan_(t)) a = t;
    }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { take(a, fabs((double)v)); }
    __device__ static void combine(Acc &a, const Acc &b) { take(a, b); }
};
template <class T> struct NormNInf : Norm0<T> {
    EMR_TYPES
    using Acc = double;
    __device__ static Acc ident(double) { return d_inf(); }
    __device__ static void take(Acc &a, double t) {
        if (t < a || isnan_(t)) a = t;
    }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) { take(a, fabs((double)v)); }
    __device__ static void combine(Acc &a, const Acc &b) { take(a, b); }
};

/* var/std, second pass: squared deviations from the first pass's mean
 * (aux), divided by max(0, N - correction) (g.divisor) */
template <class T> struct SqDev {
    EMR_TYPES
    struct Acc {
        double m, s;
    };
    __device__ static Acc ident(double aux) { return Acc{aux, 0.0}; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) {
        double d = (double)v - a.m;
        a.s += d * d;
    }
    __device__ static void combine(Acc &a, const Acc &b) { a.s += b.s; }
    __device__ static void finish(const Acc &a, const Geo &g, Val &v0, Val &) {
        double r = a.s / g.divisor;
        v0 = dval(g.root ? sqrt(r) : r);
    }
};

/* logsumexp, second pass: sum of exp(x - max), the max (aux) taken as 0
 * when infinite, as the CPU kernel does */
template <class T> struct Lse : SqDev<T> {
    EMR_TYPES
    using Acc = typename SqDev<T>::Acc;
    __device__ static Acc ident(double aux) { return Acc{isinf(aux) ? 0.0 : aux, 0.0}; }
    __device__ static void step(Acc &a, CT v, int64_t, const Geo &) {
        a.s += (double)exp_((CT)((double)v - a.m));
    }
    __device__ static void finish(const Acc &a, const Geo &, Val &v0, Val &) {
        v0 = dval(log(a.s) + a.m);
    }
};

/* ---------------------------------------------------------- kernels */

/* An accumulator moved down the warp, 32 bits at a time. */
template <class A> __device__ __forceinline__ A shfl_down(const A &a, int delta) {
    constexpr int W = (int)((sizeof(A) + 3) / 4);
    unsigned w[W];
#pragma unroll
    for (int i = 0; i < W; i++) w[i] = 0;
    memcpy(w, &a, sizeof(A));
#pragma unroll
    for (int i = 0; i < W; i++) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta);
    A r;
    memcpy(&r, w, sizeof(A));
    return r;
}

template <class Op>
__device__ __forceinline__ void finish_store(const Geo &g, const typename Op::Acc &a, int64_t o0,
                                             int64_t o1) {
    Val v0 = dval(0.0), v1 = ival(0);
    Op::finish(a, g, v0, v1);
    if (g.out0) store(g.out0 + o0, g.od0, v0);
    if (g.out1) store(g.out1 + o1, g.od1, v1);
}

/* One launch shape for all: 256 threads = OPB outputs x G threads each.
 * inner: a thread's G-group is contiguous (p = tid % G; G >= 32, a multiple
 * of 32, so each warp serves one output); else p = tid / OPB (neighbouring
 * threads, neighbouring outputs). blockIdx.y picks the chunk of the reduced
 * range: with gridDim.y > 1 the partials go to `partial[o * splits + y]`. */
template <class Op, class T>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const Geo g, const int inner, const int G, typename Op::Acc *partial,
                  const int64_t chunk) {
    using Acc = typename Op::Acc;
    __shared__ Acc sm[kThreads];
    const int tid = threadIdx.x;
    const int OPB = kThreads / G;
    const int p = inner ? tid % G : tid / OPB;
    const int ol = inner ? tid / G : tid % OPB;
    const int64_t jb = (int64_t)blockIdx.y * chunk;
    const int64_t je = jb + chunk < g.R ? jb + chunk : g.R;
    const int splits = gridDim.y;
    for (int64_t ob = blockIdx.x; ob * OPB < g.M; ob += gridDim.x) { /* block-uniform trip count */
        const int64_t o = ob * OPB + ol;
        const bool live = o < g.M;
        int64_t in_off = 0, o0 = 0, o1 = 0, ax = 0;
        if (live) kept_offsets(g, o, in_off, o0, o1, ax);
        Acc a = Op::ident(live && g.aux ? *(const double *)(g.aux + ax) : 0.0);
        if (live) {
            const char *base = g.in + in_off;
            if (g.nr == 1) {
                const int64_t rs = g.rin[0];
                for (int64_t j = jb + p; j < je; j += G) Op::step(a, Tr<T>::load(base + j * rs), j, g);
            } else {
                for (int64_t j = jb + p; j < je; j += G)
                    Op::step(a, Tr<T>::load(base + red_offset(g, j)), j, g);
            }
        }
        if (inner) { /* G >= 32: shuffles within the warp, then its G/32 warps */
#pragma unroll
            for (int d = 16; d > 0; d >>= 1) {
                Acc b = shfl_down(a, d);
                Op::combine(a, b);
            }
            if ((tid & 31) == 0) sm[tid >> 5] = a;
            __syncthreads();
            if (p == 0)
                for (int w = 1; w < G / 32; w++) Op::combine(a, sm[(tid >> 5) + w]);
        } else { /* a tree over the G threads of each output, OPB apart */
            sm[tid] = a;
            __syncthreads();
            for (int s = G / 2; s > 0; s >>= 1) {
                if (p < s) Op::combine(sm[tid], sm[tid + s * OPB]);
                __syncthreads();
            }
            a = sm[tid];
        }
        if (p == 0 && live) {
            if (splits == 1)
                finish_store<Op>(g, a, o0, o1);
            else
                partial[o * splits + blockIdx.y] = a;
        }
        __syncthreads(); /* sm is reused by the next outputs */
    }
}

/* The second stage: each output's partials combined in order, finished. */
template <class Op>
__global__ void __launch_bounds__(kThreads)
    finalize_kernel(const Geo g, const typename Op::Acc *partial, const int splits) {
    for (int64_t o = (int64_t)blockIdx.x * kThreads + threadIdx.x; o < g.M;
         o += (int64_t)gridDim.x * kThreads) {
        typename Op::Acc a = partial[o * splits];
        for (int s = 1; s < splits; s++) Op::combine(a, partial[o * splits + s]);
        int64_t in_off, o0, o1, ax;
        kept_offsets(g, o, in_off, o0, o1, ax);
        finish_store<Op>(g, a, o0, o1);
    }
}

/* ------------------------------------------------------------ host */

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t iabs(int64_t x) { return x < 0 ? -x : x; }

template <class Op, class T> int launch(int dev, const Geo &g, cudaStream_t st) {
    using Acc = typename Op::Acc;
    const int64_t M = g.M, R = g.R;
    /* inner when the reduced run is closer in memory than the next output
     * and long enough to give a warp work; else the column shape */
    const bool inner = R >= 64 && (M == 1 || iabs(g.rin[0]) <= iabs(g.kin[0]));
    int G;
    if (inner) {
        G = R >= 4096 ? 256 : R >= 1024 ? 128 : R >= 256 ? 64 : 32;
    } else {
        G = 1;
        while (G < 8 && R >= (int64_t)G * 2 * 16) G *= 2; /* at least 16 elements a thread */
    }
    const int OPB = kThreads / G;
    const int64_t bx = ceil_div(M, OPB);
    const int sms = multiprocessors(dev);
    int64_t splits = 1;
    if (bx < 2 * (int64_t)sms && R > 0) { /* few outputs: split the reduction too */
        int64_t by_work = R / ((int64_t)G * 64); /* >= 64 elements a thread and chunk */
        int64_t want = ceil_div(4 * (int64_t)sms, bx);
        splits = by_work < want ? by_work : want;
        if (splits > 65535) splits = 65535;
        if (splits < 1) splits = 1;
    }
    int64_t chunk = R;
    if (splits > 1) {
        chunk = ceil_div(R, splits);
        splits = ceil_div(R, chunk);
    }
    Acc *ws = nullptr;
    size_t ws_bytes = 0;
    if (splits > 1) {
        ws_bytes = (size_t)M * (size_t)splits * sizeof(Acc);
        ws = (Acc *)ws_alloc(dev, ws_bytes, st);
        if (!ws) return fail("cannot allocate %zu bytes of reduction workspace on cuda:%d", ws_bytes, dev);
    }
    const int64_t gx = bx < (1 << 20) ? bx : (1 << 20); /* the kernel strides over the rest */
    reduce_kernel<Op, T><<<dim3((unsigned)gx, (unsigned)splits), kThreads, 0, st>>>(
        g, inner ? 1 : 0, G, ws, chunk);
    int rc = check(cudaGetLastError(), "reduce kernel launch");
    if (rc == 0 && splits > 1) {
        int64_t fx = ceil_div(M, kThreads);
        finalize_kernel<Op><<<(unsigned)(fx < (1 << 20) ? fx : (1 << 20)), kThreads, 0, st>>>(
            g, ws, (int)splits);
        rc = check(cudaGetLastError(), "reduce finalize launch");
    }
    if (ws) ws_free(dev, ws, ws_bytes, st); /* stream-ordered: after the kernels */
    return rc;
}

typedef int (*LaunchFn)(int, const Geo &, cudaStream_t);

/* The launcher of op Op for an input dtype, or NULL. */
template <template <class> class Op> LaunchFn all_types(int dt) {
    switch (dt) {
    case RD_BOOL: return launch<Op<bool>, bool>;
    case RD_UINT8: return launch<Op<uint8_t>, uint8_t>;
    case RD_INT8: return launch<Op<int8_t>, int8_t>;
    case RD_INT16: return launch<Op<int16_t>, int16_t>;
    case RD_INT32: return launch<Op<int32_t>, int32_t>;
    case RD_INT64: return launch<Op<int64_t>, int64_t>;
    case RD_FLOAT16: return launch<Op<Half>, Half>;
    case RD_BFLOAT16: return launch<Op<BHalf>, BHalf>;
    case RD_FLOAT32: return launch<Op<float>, float>;
    case RD_FLOAT64: return launch<Op<double>, double>;
    default: return nullptr;
    }
}
template <template <class> class Op> LaunchFn float_types(int dt) {
    switch (dt) {
    case RD_FLOAT16: return launch<Op<Half>, Half>;
    case RD_BFLOAT16: return launch<Op<BHalf>, BHalf>;
    case RD_FLOAT32: return launch<Op<float>, float>;
    case RD_FLOAT64: return launch<Op<double>, double>;
    default: return nullptr;
    }
}

/* the CPU table's names (em_reduce_<name>) and their dtype lists */
struct Entry {
    const char *name;
    LaunchFn (*pick)(int dt);
};
const Entry kOps[] = {
    {"sum", all_types<Sum>},
    {"prod", all_types<Prod>},
    {"count_nonzero", all_types<CountNonzero>},
    {"all", all_types<All>},
    {"any", all_types<Any>},
    {"amax", all_types<Amax>},
    {"amin", all_types<Amin>},
    {"aminmax", all_types<AminMax>},
    {"argmax", all_types<ArgMax>},
    {"argmin", all_types<ArgMin>},
    {"nansum", float_types<NanSum>},
    {"nanmean", float_types<NanMean>},
    {"norm0", float_types<Norm0>},
    {"norm1", float_types<Norm1>},
    {"norm2", float_types<Norm2>},
    {"normp", float_types<NormP>},
    {"norminf", float_types<NormInf>},
    {"normninf", float_types<NormNInf>},
    {"sqdev", float_types<SqDev>},
    {"lse", float_types<Lse>},
};

LaunchFn find(const char *op, int dt) {
    if (!op) return nullptr;
    for (const Entry &e : kOps)
        if (!strcmp(e.name, op)) return e.pick(dt);
    return nullptr;
}

} // namespace

extern "C" bool em_cuda_has_reduce(const char *op, int in_dtype) { return find(op, in_dtype) != nullptr; }

extern "C" int em_cuda_reduce_on(int dev, const EmCudaReduce *r, void *stream) {
    LaunchFn fn = find(r->op, r->in_dtype);
    if (!fn) return fail("reduction \"%s\" has no CUDA kernel for dtype %d", r->op ? r->op : "?", r->in_dtype);
    if (r->nkept < 1 || r->nred < 1 || r->nkept > kMaxDims || r->nred > kMaxDims)
        return fail("reduction \"%s\": %d kept and %d reduced dims after merging; the CUDA kernel "
                    "takes 1 to %d of each", r->op, r->nkept, r->nred, kMaxDims);
    if (r->out_numel <= 0) return 0;
    Geo g;
    memset(&g, 0, sizeof g);
    g.in = (const char *)r->in;
    g.out0 = (char *)r->out[0];
    g.out1 = (char *)r->out[1];
    g.aux = (const char *)r->aux;
    g.od0 = r->out_dtype[0];
    g.od1 = r->out_dtype[1];
    g.nk = r->nkept;
    g.nr = r->nred;
    g.M = r->out_numel;
    g.R = r->red_numel;
    for (int d = 0; d < g.nk; d++) {
        g.ks[d] = r->kept_shape[d];
        g.kin[d] = r->kept_strides[d][0];
        g.ko0[d] = r->kept_strides[d][1];
        g.ko1[d] = r->kept_strides[d][2];
        g.kax[d] = r->kept_strides[d][3];
    }
    for (int d = 0; d < g.nr; d++) {
        g.rs[d] = r->red_shape[d];
        g.rin[d] = r->red_strides[d];
    }
    g.p = r->p;
    g.divisor = r->divisor;
    g.root = r->root;
    Guard guard(dev);
    if (!guard.ok) return -1;
    return fn(dev, g, (cudaStream_t)stream);
}

extern "C" int em_cuda_reduce(int dev, const EmCudaReduce *r) {
    return em_cuda_reduce_on(dev, r, (void *)current_stream(dev));
}

extern "C" const char *em_cuda_reduce_last_error(void) { return err_buf; }
