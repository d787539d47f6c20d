/* activation.c — kernels of the nn activations (ops/activation.c is their
 * front-end). An activation kernel gets the output, the input and three
 * parameters a, b, c (scalar operands: stride 0, already in the compute
 * dtype; unused ones are zero), so an op's math is one expression in x, a,
 * b, c. The backward kernels of GELU and SiLU take (grad, input). Half types
 * arrive as float32 (the iterator converts around the kernel).
 *
 * float32 GELU/SiLU use the branch-free math of act_math.h (Note [vector
 * gelu]) so that their loops vectorize; each kernel is also built for AVX2
 * and AVX-512 and picked at load time (run time for the full-width AVX-512
 * builds). */
/* The kernels' ternaries must become blends for the loops to vectorize,
 * which GCC only does when comparisons may not trap: no code here reads
 * floating-point exception flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "loops.h"
#include "act_math.h"

#if defined(__x86_64__) && !defined(EM_NO_CLONES) && !defined(__clang__) && __GNUC__ >= 8
#define ACT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ACT_CLONES
#endif

/* out[i] = EXPR(x, a, b, c) */
#define ACT_INST(name, EXPR, DT, T)                                            \
    ACT_CLONES static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) { \
        const T a = *(const T *)d[2], b = *(const T *)d[3], c = *(const T *)d[4]; \
        (void)a, (void)b, (void)c;                                             \
        EM_UNARY_BODY(EXPR, T, T)                                              \
    }

/* out[i] = EXPR(g, x): a backward kernel */
#define ACT_BW_INST(name, EXPR, DT, T)                                         \
    ACT_CLONES static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) { \
        if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == sizeof(T)) {     \
            T *o = (T *)d[0];                                                  \
            const T *pg = (const T *)d[1], *px = (const T *)d[2];              \
            for (int64_t i = 0; i < n; i++) {                                  \
                T g = pg[i], x = px[i];                                        \
                o[i] = (T)(EXPR);                                              \
            }                                                                  \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) {                                  \
                T g = *(const T *)(d[1] + i * s[1]);                           \
                T x = *(const T *)(d[2] + i * s[2]);                           \
                *(T *)(d[0] + i * s[0]) = (T)(EXPR);                           \
            }                                                                  \
        }                                                                      \
    }

#define EM_INST_ACT ACT_INST
#define EM_INST_ACT_BW ACT_BW_INST

/* NaN-keeping clamp of t to [lo, hi] (comparisons with NaN are false) */
#define CLAMP(t, lo, hi) ((t) < (lo) ? (lo) : (t) > (hi) ? (hi) : (t))

/* The hottest float32 loops get a full-width AVX-512 build of their own,
 * called when the CPU has it (target_clones' builds keep 256-bit vectors). */
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && !defined(__clang__) && __GNUC__ >= 12
#define ACT_HOT_F32(name, EXPR)                                                \
    __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))         \
    static void name##_f32_avx512(float *o, const float *in, int64_t n) {      \
        for (int64_t i = 0; i < n; i++) {                                      \
            float x = in[i];                                                   \
            o[i] = (EXPR);                                                     \
        }                                                                      \
    }                                                                          \
    ACT_INST(name##_generic, EXPR, FLOAT32, float)                             \
    static void EM_KNAME(name, FLOAT32)(char **d, const int64_t *s, int64_t n) { \
        if (s[0] == 4 && s[1] == 4 && __builtin_cpu_supports("avx512f"))       \
            name##_f32_avx512((float *)d[0], (const float *)d[1], n);          \
        else                                                                   \
            EM_KNAME(name##_generic, FLOAT32)(d, s, n);                        \
    }
#else
#define ACT_HOT_F32(name, EXPR) ACT_INST(name, EXPR, FLOAT32, float)
#endif
#define ACT_HOT(name, EXPR)                                                    \
    ACT_HOT_F32(name, EXPR)                                                    \
    ACT_INST(name, EXPR, FLOAT64, double)                                      \
    EM_TABLE(name, EM_TYPES_FLOAT(EM_ENTRY, name))

/* Exact GELU, float32, contiguous: blocks of GELU_BLOCK inputs. A block
 * whose |x| are all below VM_TAIL_SPLIT (or NaN: both forms give NaN) runs
 * the near form alone (Note [gaussian tail ratio]): the numbers of
 * em_gelu_f, without the far form's division and polynomial. Forward and
 * backward (out = g·gelu'(x)) share the loop. */
#define GELU_BLOCK 64
#define GELU_BLOCKS(G_AT, NEAR, FULL)                                          \
    for (int64_t i0 = 0; i0 < n; i0 += GELU_BLOCK) {                           \
        int64_t end = n - i0 < GELU_BLOCK ? n : i0 + GELU_BLOCK;               \
        int far = 0; /* an integer OR, which vectorizes (a float max does not) */ \
        for (int64_t i = i0; i < end; i++) far |= fabsf(x[i]) >= VM_TAIL_SPLIT; \
        if (!far)                                                              \
            for (int64_t i = i0; i < end; i++) o[i] = G_AT(i) NEAR(x[i]);      \
        else                                                                   \
            for (int64_t i = i0; i < end; i++) o[i] = G_AT(i) FULL(x[i]);      \
    }
#define GELU_NO_G(i)
#define GELU_G(i) g[i] *
#define GELU_F32_BLOCK_FNS(ATTR, SUFFIX)                                       \
    ATTR static void gelu_f32_blocks##SUFFIX(float *o, const float *x, int64_t n) { \
        GELU_BLOCKS(GELU_NO_G, em_gelu_near_f, em_gelu_f)                      \
    }                                                                          \
    ATTR static void gelu_bw_f32_blocks##SUFFIX(float *o, const float *g, const float *x, int64_t n) { \
        GELU_BLOCKS(GELU_G, em_gelu_grad_near_f, em_gelu_grad_f)               \
    }
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && !defined(__clang__) && __GNUC__ >= 12
GELU_F32_BLOCK_FNS(__attribute__((target("arch=x86-64-v4,prefer-vector-width=512"))), _avx512)
#define GELU_HAVE_AVX512 __builtin_cpu_supports("avx512f")
#else
#define GELU_HAVE_AVX512 0
#define gelu_f32_blocks_avx512 gelu_f32_blocks
#define gelu_bw_f32_blocks_avx512 gelu_bw_f32_blocks
#endif
GELU_F32_BLOCK_FNS(ACT_CLONES, )

ACT_INST(gelu_strided, em_gelu(x), FLOAT32, float)
static void EM_KNAME(gelu, FLOAT32)(char **d, const int64_t *s, int64_t n) {
    if (s[0] == 4 && s[1] == 4)
        (GELU_HAVE_AVX512 ? gelu_f32_blocks_avx512 : gelu_f32_blocks)((float *)d[0], (const float *)d[1], n);
    else
        EM_KNAME(gelu_strided, FLOAT32)(d, s, n);
}
ACT_INST(gelu, em_gelu(x), FLOAT64, double)
EM_TABLE(gelu, EM_TYPES_FLOAT(EM_ENTRY, gelu))
ACT_HOT(gelu_tanh, em_gelu_tanh(x))
ACT_HOT(silu, em_silu(x))
EM_KERNELS(ACT, mish, EM_TYPES_FLOAT, x * tanh(log1p(exp(x))))
/* a = beta, b = threshold: linear where beta·x > threshold */
EM_KERNELS(ACT, softplus, EM_TYPES_FLOAT, x * a > b ? x : log1p(exp(x * a)) / a)
/* a = alpha·scale, b = scale, c = input scale (ELU, SELU and CELU) */
EM_KERNELS(ACT, elu, EM_TYPES_FLOAT, x <= 0 ? expm1(x * c) * a : x * b)
EM_KERNELS(ACT, leaky_relu, EM_TYPES_FLOAT, x > 0 ? x : x * a)
/* the lower bound applies last, as in torch (it wins when a > b, which
 * wrapped integer bounds can give) */
EM_KERNELS(ACT, hardtanh, EM_TYPES_NUM, (x > b ? b : x) < a ? a : (x > b ? b : x))
EM_KERNELS(ACT, hardswish, EM_TYPES_FLOAT, x * CLAMP(x + 3, 0, 6) / 6)
EM_KERNELS(ACT, hardsigmoid, EM_TYPES_FLOAT, CLAMP(x + 3, 0, 6) / 6)
EM_KERNELS(ACT, log_sigmoid, EM_TYPES_FLOAT, (x < 0 ? x : 0) - log1p(exp(-fabs(x))))
/* a = threshold, b = value */
EM_KERNELS(ACT, threshold, EM_TYPES_NUM, x <= a ? b : x)

ACT_BW_INST(gelu_backward_strided, g * em_gelu_grad(x), FLOAT32, float)
static void EM_KNAME(gelu_backward, FLOAT32)(char **d, const int64_t *s, int64_t n) {
    if (s[0] == 4 && s[1] == 4 && s[2] == 4)
        (GELU_HAVE_AVX512 ? gelu_bw_f32_blocks_avx512 : gelu_bw_f32_blocks)(
            (float *)d[0], (const float *)d[1], (const float *)d[2], n);
    else
        EM_KNAME(gelu_backward_strided, FLOAT32)(d, s, n);
}
ACT_BW_INST(gelu_backward, g * em_gelu_grad(x), FLOAT64, double)
EM_TABLE(gelu_backward, EM_TYPES_FLOAT(EM_ENTRY, gelu_backward))
EM_KERNELS(ACT_BW, gelu_tanh_backward, EM_TYPES_FLOAT, g * em_gelu_tanh_grad(x))
EM_KERNELS(ACT_BW, silu_backward, EM_TYPES_FLOAT, g * em_silu_grad(x))
/* GLU: a·σ(b) of the two halves (g is the first half, x the second) */
EM_KERNELS(ACT_BW, glu, EM_TYPES_FLOAT, g * em_sigmoid(x))
