/* reduce.c — CPU kernels of the reductions (Note [reduce kernels] in
 * ember.h). Each op is a handful of macros over its accumulator — ACC (the
 * type), INIT, STEP (fold one value X with index I), COMBINE, FINISH, the
 * dtypes FINISH writes (OUT0/OUT1) and RUN (fold a contiguous run) — which
 * RED_DEFINE instantiates for every input dtype of the op's type list.
 *
 * The type lists are in cpu/reduce.h: float inputs (float32 too) accumulate
 * sums in double, the half types are converted to float as they are loaded,
 * integer sums wrap in int64 (the build uses -fwrapv).
 */
#include "reduce.h"

/* The dtype finish writes for an accumulator type. */
#define RED_ODT(AT) _Generic((AT)0, double _Complex: EM_COMPLEX128, default: (AT)0.5 != 0 ? EM_FLOAT64 : EM_INT64)

/* Fold a contiguous run one element at a time. */
#define RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)                                  \
    for (int64_t i_ = 0; i_ < (N); i_++) {                                               \
        CT v_ = LD(&(X)[i_]);                                                            \
        op##_STEP(A, v_, (I0) + i_, CT, AT, P);                                          \
    }

/* The driver of one op for one dtype: init / step / combine / finish. The
 * step picks its loop order: across the outputs (vectorizable: a row of
 * contiguous outputs at a time) when they are closer in memory than the
 * reduced elements, else along each output's run. */
#define RED_DEFINE(op, DT, T, CT, LD, AT, LO, HI)                                         \
    typedef op##_ACC(CT, AT) op##_acc_##DT;                                               \
    static void op##_init_##DT(void *av, int64_t k, const char *aux, int64_t as) {        \
        op##_acc_##DT *a = (op##_acc_##DT *)av;                                           \
        for (int64_t j = 0; j < k; j++) {                                                 \
            double auxv = aux ? *(const double *)(aux + j * as) : 0.0;                    \
            (void)auxv;                                                                   \
            op##_INIT(a[j], auxv, CT, AT, LO, HI);                                        \
        }                                                                                 \
    }                                                                                     \
    EM_CLONES static void op##_step_##DT(void *av, int64_t k, const char *in, int64_t so,  \
                                         int64_t n, int64_t sr, int64_t i0,               \
                                         const EmReduceParams *P) {                       \
        op##_acc_##DT *restrict a = (op##_acc_##DT *)av;                                  \
        (void)P;                                                                          \
        const int64_t isz = (int64_t)sizeof(T);                                           \
        if (k > 1 && (so == isz || (sr != isz && so < sr))) {                             \
            int64_t i = 0;                                                                \
            /* four rows per pass over the accumulators, each element still folded  \
             * in row order: a quarter of the accumulator loads and stores */          \
            if (so == isz)                                                                \
                for (; i + 4 <= n; i += 4) {                                              \
                    const T *restrict x0 = (const T *)(in + i * sr);                      \
                    const T *restrict x1 = (const T *)(in + (i + 1) * sr);                \
                    const T *restrict x2 = (const T *)(in + (i + 2) * sr);                \
                    const T *restrict x3 = (const T *)(in + (i + 3) * sr);                \
                    for (int64_t j = 0; j < k; j++) {                                     \
                        op##_acc_##DT acc = a[j];                                         \
                        CT v0 = LD(&x0[j]), v1 = LD(&x1[j]), v2 = LD(&x2[j]), v3 = LD(&x3[j]); \
                        op##_STEP(acc, v0, i0 + i, CT, AT, P);                            \
                        op##_STEP(acc, v1, i0 + i + 1, CT, AT, P);                        \
                        op##_STEP(acc, v2, i0 + i + 2, CT, AT, P);                        \
                        op##_STEP(acc, v3, i0 + i + 3, CT, AT, P);                        \
                        a[j] = acc;                                                       \
                    }                                                                     \
                }                                                                         \
            for (; i < n; i++) {                                                          \
                const char *row = in + i * sr;                                            \
                if (so == isz) {                                                          \
                    const T *restrict x = (const T *)row;                                 \
                    for (int64_t j = 0; j < k; j++) {                                     \
                        CT v = LD(&x[j]);                                                 \
                        op##_STEP(a[j], v, i0 + i, CT, AT, P);                            \
                    }                                                                     \
                } else {                                                                  \
                    for (int64_t j = 0; j < k; j++) {                                     \
                        CT v = LD((const T *)(row + j * so));                             \
                        op##_STEP(a[j], v, i0 + i, CT, AT, P);                            \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        } else {                                                                          \
            for (int64_t j = 0; j < k; j++) {                                             \
                op##_acc_##DT acc = a[j];                                                 \
                const char *p = in + j * so;                                              \
                if (sr == isz) {                                                          \
                    const T *x = (const T *)p;                                            \
                    op##_RUN(op, acc, x, n, i0, DT, T, CT, LD, AT, P);                    \
                } else {                                                                  \
                    for (int64_t i = 0; i < n; i++) {                                     \
                        CT v = LD((const T *)(p + i * sr));                               \
                        op##_STEP(acc, v, i0 + i, CT, AT, P);                             \
                    }                                                                     \
                }                                                                         \
                a[j] = acc;                                                               \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    static void op##_combine_##DT(void *av, const void *bv, int64_t k) {                  \
        op##_acc_##DT *a = (op##_acc_##DT *)av;                                           \
        const op##_acc_##DT *b = (const op##_acc_##DT *)bv;                               \
        for (int64_t j = 0; j < k; j++) op##_COMBINE(a[j], b[j], CT, AT);                 \
    }                                                                                     \
    static void op##_finish_##DT(char *o0, char *o1, const void *av, int64_t k,           \
                                 const EmReduceParams *P) {                               \
        const op##_acc_##DT *a = (const op##_acc_##DT *)av;                               \
        (void)P;                                                                          \
        (void)o1;                                                                         \
        for (int64_t j = 0; j < k; j++) op##_FINISH(a[j], o0, o1, j, CT, AT, P);          \
    }

#define RED_ENTRY(op, DT, T, CT, LD, AT, LO, HI)                                          \
    [EM_##DT] = {(int)sizeof(op##_acc_##DT), {op##_OUT0(AT), op##_OUT1(AT)},              \
                 op##_init_##DT, op##_step_##DT, op##_combine_##DT, op##_finish_##DT, #op},

#define RED_KERNELS(op, TYPES)                                                            \
    TYPES(RED_DEFINE, op)                                                                 \
    const EmReduceKernels em_reduce_##op = {{TYPES(RED_ENTRY, op)}};                      \
    EM_REGISTER_REDUCE(em_reduce_##op)

/* ------------------------------------------------------------------ sums */

/* Note [lanes]: a contiguous run is folded in NL independent lanes (the
 * compiler vectorizes them; EM_CLONES adds an AVX2 build picked at run time),
 * then the lanes into the accumulator. LANES_FN(name, DT, T, LD, LT, INIT,
 * STEP, MERGE) makes `LT name_lanes_DT(x, n, acc)`: lanes of type LT start
 * at INIT and fold each element v as lane = STEP(lane, v); MERGE(a, b)
 * folds two lanes (STEP itself for sums and extrema; a plain sum of the
 * lanes for norms, whose STEP transforms v). */
#define NL 16
#define LANES_FN(name, DT, T, LD, LT, INIT, STEP, MERGE)                                 \
    EM_CLONES static LT name##_lanes_##DT(const T *x, int64_t n, LT acc) {                \
        LT l[NL];                                                                         \
        for (int j = 0; j < NL; j++) l[j] = INIT;                                         \
        int64_t i = 0;                                                                    \
        for (; i + NL <= n; i += NL)                                                      \
            for (int j = 0; j < NL; j++) {                                                \
                LT v = (LT)LD(&x[i + j]);                                                 \
                l[j] = STEP(l[j], v);                                                     \
            }                                                                             \
        for (int w = NL / 2; w > 0; w /= 2) /* a pairwise tree over the lanes */          \
            for (int j = 0; j < w; j++) l[j] = MERGE(l[j], l[j + w]);                     \
        acc = MERGE(acc, l[0]);                                                           \
        for (; i < n; i++) {                                                              \
            LT v = (LT)LD(&x[i]);                                                         \
            acc = STEP(acc, v);                                                           \
        }                                                                                 \
        return acc;                                                                       \
    }
/* the same for every dtype of a type list: X(op, DT, T, CT, LD, AT, LO, HI) */
#define LANES_AT(op, DT, T, CT, LD, AT, LO, HI) LANES_FN(op, DT, T, LD, AT, 0, op##_LANE, op##_MERGE)
#define LANES_CT(op, DT, T, CT, LD, AT, LO, HI)                                          \
    LANES_FN(op, DT, T, LD, CT, op##_LANE_INIT(LO, HI), op##_LANE, op##_LANE)

/* Sums of long runs split in halves above 4096 elements: the rounding error
 * grows with log n, not n. */
#define PAIRWISE_FN(op, DT, T, CT, LD, AT, LO, HI)                                      \
    static AT op##_run_##DT(const T *x, int64_t n) {                                      \
        if (n <= 4096) return op##_lanes_##DT(x, n, 0);                                   \
        int64_t h = (n / 2 + NL - 1) & ~(int64_t)(NL - 1);                                \
        return op##_run_##DT(x, h) + op##_run_##DT(x + h, n - h);                         \
    }

#define ADD(a, b) ((a) + (b))
#define ADD_NO_NAN(a, b) ((b) == (b) ? (a) + (b) : (a))
#define sum_LANE ADD
#define sum_MERGE ADD
#define nansum_LANE ADD_NO_NAN
#define nansum_MERGE ADD
RT_ALLU(LANES_AT, sum)
RT_INTB(PAIRWISE_FN, sum)
RT_UWIDE(PAIRWISE_FN, sum)
PAIRWISE_FN(sum, FLOAT16, uint16_t, float, LD_F16, double, 0, 0)
PAIRWISE_FN(sum, BFLOAT16, uint16_t, float, LD_BF16, double, 0, 0)
PAIRWISE_FN(sum, FLOAT64, double, double, LD_PLAIN, double, 0, 0)
RT_FLOAT(LANES_AT, nansum)
PAIRWISE_FN(nansum, FLOAT16, uint16_t, float, LD_F16, double, 0, 0)
PAIRWISE_FN(nansum, BFLOAT16, uint16_t, float, LD_BF16, double, 0, 0)
PAIRWISE_FN(nansum, FLOAT64, double, double, LD_PLAIN, double, 0, 0)

/* float32 sums, the hot case, written with GCC vector extensions (the
 * compiler's own vectorization of the lane loops varies with the step):
 * four vectors of float lanes over blocks of 8 x 4 vectors (converting every
 * element to double would halve the vector width), each block's four
 * vectors then added together and into one vector of double lanes (few
 * double lanes to fold: rows of 64 floats are common). ones(2**24).sum() is
 * exact; the error of a block is that of 10 float additions. FV/FS fold a vector / a float. Built for
 * 32-byte vectors (plain and AVX2) and, where the CPU has it, 64-byte AVX-512
 * ones: streaming from memory, wider loads keep more bytes in flight. */
typedef float em_vf8 __attribute__((vector_size(32)));
typedef int32_t em_vi8 __attribute__((vector_size(32)));
typedef float em_vf16 __attribute__((vector_size(64)));
typedef int32_t em_vi16 __attribute__((vector_size(64)));
#define HYBRID_F32(name, VF, VI, VW, ATTR, FV, FS)                                       \
    ATTR static double name(const float *x, int64_t n, double acc) {                      \
        double d[VW];                                                                     \
        for (int j = 0; j < VW; j++) d[j] = 0;                                            \
        int64_t i = 0;                                                                    \
        while (i + 4 * VW <= n) {                                                         \
            VF l[4];                                                                      \
            memset(l, 0, sizeof l);                                                       \
            int64_t stop = i + 32 * VW < n - 4 * VW + 1 ? i + 32 * VW : n - 4 * VW + 1;   \
            for (; i < stop; i += 4 * VW)                                                 \
                for (int u = 0; u < 4; u++) {                                             \
                    VF v;                                                                 \
                    memcpy(&v, x + i + u * VW, sizeof v);                                 \
                    l[u] = FV(l[u], v, VF, VI);                                           \
                }                                                                         \
            VF b = (l[0] + l[1]) + (l[2] + l[3]); /* the block's lanes, two float adds */ \
            for (int j = 0; j < VW; j++) d[j] += b[j];                                    \
        }                                                                                 \
        for (int w = VW / 2; w > 0; w /= 2)                                               \
            for (int j = 0; j < w; j++) d[j] += d[j + w];                                 \
        acc += d[0];                                                                      \
        for (; i < n; i++) acc += FS(0.0f, x[i]);                                         \
        return acc;                                                                       \
    }
#ifdef EM_AVX512
#define HYBRID_AVX512(name, FV, FS) HYBRID_F32(name##_v16, em_vf16, em_vi16, 16, EM_AVX512, FV, FS)
/* (short runs stay with 32-byte vectors: fewer lanes to fold at the end) */
#define HYBRID_PICK(name, x, n, acc)                                                     \
    ((n) >= 4096 && EM_HAS_AVX512() ? name##_v16(x, n, acc) : name##_v8(x, n, acc))
#else
#define HYBRID_AVX512(name, FV, FS)
#define HYBRID_PICK(name, x, n, acc) name##_v8(x, n, acc)
#endif
#define HYBRID_F32_FN(name, FV, FS)                                                      \
    HYBRID_F32(name##_v8, em_vf8, em_vi8, 8, EM_CLONES, FV, FS)                           \
    HYBRID_AVX512(name, FV, FS)                                                           \
    static double name(const float *x, int64_t n, double acc) { return HYBRID_PICK(name, x, n, acc); }
#define F_ADD(l, v, ...) ((l) + (v))
#define F_SQR(l, v, ...) ((l) + (v) * (v))
#define FV_ABS(l, v, VF, VI) ((l) + (VF)((VI)(v) & 0x7fffffff))
#define FS_ABS(l, v) ((l) + fabsf(v))
HYBRID_F32_FN(sum_f32, F_ADD, F_ADD)
static double sum_run_FLOAT32(const float *x, int64_t n) { return sum_f32(x, n, 0.0); }
#define FV_NO_NAN(l, v, VF, VI) ((l) + (VF)((VI)(v) & ((v) == (v))))
#define FS_NO_NAN(l, v) ((v) == (v) ? (l) + (v) : (l))
HYBRID_F32_FN(nansum_f32, FV_NO_NAN, FS_NO_NAN)
static double nansum_run_FLOAT32(const float *x, int64_t n) { return nansum_f32(x, n, 0.0); }

/* finish of sums: floats divide by P->divisor (1 for sum, the count for mean) */
static inline int64_t red_scale_i(int64_t a, const EmReduceParams *p) { (void)p; return a; }
static inline double red_scale_d(double a, const EmReduceParams *p) { return a / p->divisor; }
#define RED_SCALE(a, p) _Generic((a), double: red_scale_d, default: red_scale_i)(a, p)

#define sum_ACC(CT, AT) AT
#define sum_INIT(A, AUX, CT, AT, LO, HI) A = 0
#define sum_STEP(A, X, I, CT, AT, P) A += (AT)(X)
#define sum_COMBINE(A, B, CT, AT) A += B
#define sum_FINISH(A, O0, O1, J, CT, AT, P) ((AT *)(O0))[J] = RED_SCALE(A, P)
#define sum_OUT0(AT) RED_ODT(AT)
#define sum_OUT1(AT) EM_INT64
#define sum_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) A += sum_run_##DT(X, N)
RED_KERNELS(sum, RT_ALLU)

#define nansum_ACC sum_ACC
#define nansum_INIT sum_INIT
#define nansum_STEP(A, X, I, CT, AT, P) A += (X) == (X) ? (AT)(X) : (AT)0
#define nansum_COMBINE sum_COMBINE
#define nansum_FINISH sum_FINISH
#define nansum_OUT0 sum_OUT0
#define nansum_OUT1 sum_OUT1
#define nansum_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) A += nansum_run_##DT(X, N)
RED_KERNELS(nansum, RT_FLOAT)

/* nanmean: the sum and count of the non-NaN elements */
#define nanmean_ACC(CT, AT) struct { double s; int64_t c; }
#define nanmean_INIT(A, AUX, CT, AT, LO, HI) (A).s = 0, (A).c = 0
#define nanmean_STEP(A, X, I, CT, AT, P)                                                 \
    if ((X) == (X)) {                                                                     \
        (A).s += (double)(X);                                                             \
        (A).c++;                                                                          \
    }
#define nanmean_COMBINE(A, B, CT, AT) (A).s += (B).s, (A).c += (B).c
#define nanmean_FINISH(A, O0, O1, J, CT, AT, P) ((double *)(O0))[J] = (A).s / (double)(A).c
#define nanmean_OUT0(AT) EM_FLOAT64
#define nanmean_OUT1(AT) EM_INT64
#define nanmean_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)
RED_KERNELS(nanmean, RT_FLOAT)

#define prod_ACC(CT, AT) AT
#define prod_INIT(A, AUX, CT, AT, LO, HI) A = 1
#define prod_STEP(A, X, I, CT, AT, P) A *= (AT)(X)
#define prod_COMBINE(A, B, CT, AT) A *= B
#define prod_FINISH(A, O0, O1, J, CT, AT, P) ((AT *)(O0))[J] = A
#define prod_OUT0(AT) RED_ODT(AT)
#define prod_OUT1(AT) EM_INT64
#define prod_LANE(a, v) ((a) * (v))
#define prod_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) A = op##_lanes_##DT(X, N, A)
#define LANES_PROD(op, DT, T, CT, LD, AT, LO, HI) LANES_FN(op, DT, T, LD, AT, 1, prod_LANE, prod_LANE)
RT_ALLCU(LANES_PROD, prod)
RED_KERNELS(prod, RT_ALLCU)

/* count_nonzero, all, any: NaN is nonzero */
#define count_nonzero_ACC(CT, AT) int64_t
#define count_nonzero_INIT(A, AUX, CT, AT, LO, HI) A = 0
#define count_nonzero_STEP(A, X, I, CT, AT, P) A += (X) != 0
#define count_nonzero_COMBINE(A, B, CT, AT) A += B
#define count_nonzero_FINISH(A, O0, O1, J, CT, AT, P) ((int64_t *)(O0))[J] = A
#define count_nonzero_OUT0(AT) EM_INT64
#define count_nonzero_OUT1(AT) EM_INT64
#define count_nonzero_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)
RED_KERNELS(count_nonzero, RT_ALL)

#define all_ACC(CT, AT) int64_t
#define all_INIT(A, AUX, CT, AT, LO, HI) A = 1
#define all_STEP(A, X, I, CT, AT, P) A &= (X) != 0
#define all_COMBINE(A, B, CT, AT) A &= B
#define all_FINISH count_nonzero_FINISH
#define all_OUT0(AT) EM_INT64
#define all_OUT1(AT) EM_INT64
#define all_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)
RED_KERNELS(all, RT_ALLU)

#define any_ACC all_ACC
#define any_INIT(A, AUX, CT, AT, LO, HI) A = 0
#define any_STEP(A, X, I, CT, AT, P) A |= (X) != 0
#define any_COMBINE(A, B, CT, AT) A |= B
#define any_FINISH count_nonzero_FINISH
#define any_OUT0(AT) EM_INT64
#define any_OUT1(AT) EM_INT64
#define any_RUN all_RUN
RED_KERNELS(any, RT_ALLU)

/* -------------------------------------------------------------- extrema */

/* NaN propagates: once the accumulator holds NaN nothing replaces it.
 *
 * float32/float64 runs use GCC vector extensions (the compiler does not
 * vectorize the NaN-aware select by itself): two 32-byte vectors of lanes,
 * a lane taking v when v CMP lane or v is NaN, unless the lane is NaN. */
#define VEXT_FN(name, DT, T, IT, CMP)                                                    \
    typedef T name##_vt_##DT __attribute__((vector_size(32)));                            \
    typedef IT name##_vi_##DT __attribute__((vector_size(32)));                           \
    EM_CLONES static T name##_lanes_##DT(const T *x, int64_t n, T acc) {                  \
        enum { W = 32 / sizeof(T) };                                                      \
        name##_vt_##DT a[2];                                                              \
        for (int j = 0; j < W; j++) a[0][j] = a[1][j] = acc;                              \
        int64_t i = 0;                                                                    \
        for (; i + 2 * W <= n; i += 2 * W) {                                              \
            for (int u = 0; u < 2; u++) {                                                 \
                name##_vt_##DT v;                                                         \
                memcpy(&v, x + i + u * W, sizeof v);                                      \
                name##_vi_##DT m = ((v CMP a[u]) | (v != v)) & (a[u] == a[u]);            \
                a[u] = (name##_vt_##DT)(((name##_vi_##DT)v & m) |                         \
                                        ((name##_vi_##DT)a[u] & ~m));                     \
            }                                                                             \
        }                                                                                 \
        for (int u = 0; u < 2; u++)                                                       \
            for (int j = 0; j < W; j++) acc = name##_LANE(acc, a[u][j]);                  \
        for (; i < n; i++) acc = name##_LANE(acc, x[i]);                                  \
        return acc;                                                                       \
    }

#define amax_ACC(CT, AT) CT
#define amax_INIT(A, AUX, CT, AT, LO, HI) A = (CT)(LO)
#define amax_STEP(A, X, I, CT, AT, P) A = amax_LANE(A, X)
#define amax_COMBINE(A, B, CT, AT) amax_STEP(A, B, 0, CT, AT, 0)
#define amax_FINISH(A, O0, O1, J, CT, AT, P) ((AT *)(O0))[J] = (AT)(A)
#define amax_OUT0(AT) RED_ODT(AT)
#define amax_OUT1(AT) EM_INT64
#define amax_LANE(a, v) (((((v) > (a)) | ((v) != (v))) & ((a) == (a))) ? (v) : (a))
#define amax_LANE_INIT(LO, HI) (LO)
#define amax_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) A = op##_lanes_##DT(X, N, A)
RT_INTB(LANES_CT, amax)
LANES_CT(amax, FLOAT16, uint16_t, float, LD_F16, double, -INFINITY, INFINITY)
LANES_CT(amax, BFLOAT16, uint16_t, float, LD_BF16, double, -INFINITY, INFINITY)
VEXT_FN(amax, FLOAT32, float, int32_t, >)
VEXT_FN(amax, FLOAT64, double, int64_t, >)
RED_KERNELS(amax, RT_ALL)

#define amin_ACC amax_ACC
#define amin_INIT(A, AUX, CT, AT, LO, HI) A = (CT)(HI)
#define amin_STEP(A, X, I, CT, AT, P) A = amin_LANE(A, X)
#define amin_COMBINE(A, B, CT, AT) amin_STEP(A, B, 0, CT, AT, 0)
#define amin_FINISH amax_FINISH
#define amin_OUT0 amax_OUT0
#define amin_OUT1 amax_OUT1
#define amin_LANE(a, v) (((((v) < (a)) | ((v) != (v))) & ((a) == (a))) ? (v) : (a))
#define amin_LANE_INIT(LO, HI) (HI)
#define amin_RUN amax_RUN
RT_INTB(LANES_CT, amin)
LANES_CT(amin, FLOAT16, uint16_t, float, LD_F16, double, -INFINITY, INFINITY)
LANES_CT(amin, BFLOAT16, uint16_t, float, LD_BF16, double, -INFINITY, INFINITY)
VEXT_FN(amin, FLOAT32, float, int32_t, <)
VEXT_FN(amin, FLOAT64, double, int64_t, <)
RED_KERNELS(amin, RT_ALL)

/* aminmax: out0 the min, out1 the max */
#define aminmax_ACC(CT, AT) struct { CT lo, hi; }
#define aminmax_INIT(A, AUX, CT, AT, LO, HI) (A).lo = (CT)(HI), (A).hi = (CT)(LO)
#define aminmax_STEP(A, X, I, CT, AT, P)                                                 \
    do {                                                                                  \
        if ((X) < (A).lo || (X) != (X)) (A).lo = (X);                                     \
        if ((X) > (A).hi || (X) != (X)) (A).hi = (X);                                     \
    } while (0)
#define aminmax_COMBINE(A, B, CT, AT)                                                    \
    do {                                                                                  \
        amin_STEP((A).lo, (B).lo, 0, CT, AT, 0);                                          \
        amax_STEP((A).hi, (B).hi, 0, CT, AT, 0);                                          \
    } while (0)
#define aminmax_FINISH(A, O0, O1, J, CT, AT, P)                                          \
    ((AT *)(O0))[J] = (AT)(A).lo, ((AT *)(O1))[J] = (AT)(A).hi
#define aminmax_OUT0(AT) RED_ODT(AT)
#define aminmax_OUT1(AT) RED_ODT(AT)
#define aminmax_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P)                              \
    do {                                                                                  \
        (A).lo = amin_lanes_##DT(X, N, (A).lo);                                           \
        (A).hi = amax_lanes_##DT(X, N, (A).hi);                                           \
    } while (0)
RED_KERNELS(aminmax, RT_ALL)

/* argmax / argmin (and max/min with dim): the first index of the extreme,
 * or of the first NaN. out0 the value, out1 the index. */
#define argmax_ACC(CT, AT) struct { CT v; int64_t idx; }
#define argmax_INIT(A, AUX, CT, AT, LO, HI) (A).v = (CT)(LO), (A).idx = -1
#define ARG_TAKES(A, X, IDX, CMP)                                                        \
    ((A).idx < 0 || (X) CMP (A).v || ((X) != (X) && (A).v == (A).v))
#define argmax_STEP(A, X, I, CT, AT, P)                                                  \
    if (ARG_TAKES(A, X, I, >)) {                                                          \
        (A).v = (X);                                                                      \
        (A).idx = (I);                                                                    \
    }
#define argmax_COMBINE(A, B, CT, AT)                                                     \
    if ((B).idx >= 0 && ARG_TAKES(A, (B).v, 0, >)) (A) = (B)
#define argmax_FINISH(A, O0, O1, J, CT, AT, P)                                           \
    ((AT *)(O0))[J] = (AT)(A).v, ((int64_t *)(O1))[J] = (A).idx
#define argmax_OUT0(AT) RED_ODT(AT)
#define argmax_OUT1(AT) EM_INT64
#define argmax_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)
RED_KERNELS(argmax, RT_ALL)

#define argmin_ACC argmax_ACC
#define argmin_INIT(A, AUX, CT, AT, LO, HI) (A).v = (CT)(HI), (A).idx = -1
#define argmin_STEP(A, X, I, CT, AT, P)                                                  \
    if (ARG_TAKES(A, X, I, <)) {                                                          \
        (A).v = (X);                                                                      \
        (A).idx = (I);                                                                    \
    }
#define argmin_COMBINE(A, B, CT, AT)                                                     \
    if ((B).idx >= 0 && ARG_TAKES(A, (B).v, 0, <)) (A) = (B)
#define argmin_FINISH argmax_FINISH
#define argmin_OUT0 argmax_OUT0
#define argmin_OUT1 argmax_OUT1
#define argmin_RUN argmax_RUN
RED_KERNELS(argmin, RT_ALL)

/* ----------------------------------------------------------------- norms */

/* vector norms of float inputs, accumulated in double: p = 0 (count of
 * nonzeros), 1, 2, inf, -inf and any other p (P->p) */
#define norm_ACC(CT, AT) double
#define norm_COMBINE(A, B, CT, AT) A += B
#define norm_OUT0(AT) EM_FLOAT64
#define norm_OUT1(AT) EM_INT64
#define norm_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) RED_RUN_GENERIC(op, A, X, N, I0, CT, LD, AT, P)

#define norm0_ACC norm_ACC
#define norm0_INIT(A, AUX, CT, AT, LO, HI) A = 0
#define norm0_STEP(A, X, I, CT, AT, P) A += (X) != 0
#define norm0_COMBINE norm_COMBINE
#define norm0_FINISH(A, O0, O1, J, CT, AT, P) ((double *)(O0))[J] = A
#define norm0_OUT0 norm_OUT0
#define norm0_OUT1 norm_OUT1
#define norm0_RUN norm_RUN
RED_KERNELS(norm0, RT_FLOAT)

#define norm1_ACC norm_ACC
#define norm1_INIT norm0_INIT
#define norm1_STEP(A, X, I, CT, AT, P) A += fabs((double)(X))
#define norm1_COMBINE norm_COMBINE
#define norm1_FINISH norm0_FINISH
#define norm1_OUT0 norm_OUT0
#define norm1_OUT1 norm_OUT1
#define norm1_LANE(a, v) ((a) + fabs(v))
#define norm1_MERGE ADD
#define norm1_RUN(op, A, X, N, I0, DT, T, CT, LD, AT, P) A = op##_lanes_##DT(X, N, A)
LANES_AT(norm1, FLOAT16, uint16_t, float, LD_F16, double, 0, 0)
LANES_AT(norm1, BFLOAT16, uint16_t, float, LD_BF16, double, 0, 0)
LANES_AT(norm1, FLOAT64, double, double, LD_PLAIN, double, 0, 0)
HYBRID_F32_FN(norm1_lanes_FLOAT32, FV_ABS, FS_ABS)
RED_KERNELS(norm1, RT_FLOAT)

#define norm2_ACC norm_ACC
#define norm2_INIT norm0_INIT
#define norm2_STEP(A, X, I, CT, AT, P) A += (double)(X) * (double)(X)
#define norm2_COMBINE norm_COMBINE
#define norm2_FINISH(A, O0, O1, J, CT, AT, P) ((double *)(O0))[J] = sqrt(A)
#define norm2_OUT0 norm_OUT0
#define norm2_OUT1 norm_OUT1
#define norm2_LANE(a, v) ((a) + (v) * (v))
#define norm2_MERGE ADD
#define norm2_RUN norm1_RUN
LANES_AT(norm2, FLOAT16, uint16_t, float, LD_F16, double, 0, 0)
LANES_AT(norm2, BFLOAT16, uint16_t, float, LD_BF16, double, 0, 0)
LANES_AT(norm2, FLOAT64, double, double, LD_PLAIN, double, 0, 0)
HYBRID_F32_FN(norm2_lanes_FLOAT32, F_SQR, F_SQR)
double em_cpu_sumsq_f32(const float *x, int64_t n) { return norm2_lanes_FLOAT32(x, n, 0.0); }
double em_cpu_sumsq_f64(const double *x, int64_t n) { return norm2_lanes_FLOAT64(x, n, 0.0); }
RED_KERNELS(norm2, RT_FLOAT)

#define normp_ACC norm_ACC
#define normp_INIT norm0_INIT
#define normp_STEP(A, X, I, CT, AT, P) A += pow(fabs((double)(X)), (P)->p)
#define normp_COMBINE norm_COMBINE
#define normp_FINISH(A, O0, O1, J, CT, AT, P) ((double *)(O0))[J] = pow(A, 1.0 / (P)->p)
#define normp_OUT0 norm_OUT0
#define normp_OUT1 norm_OUT1
#define normp_RUN norm_RUN
RED_KERNELS(normp, RT_FLOAT)

#define norminf_ACC norm_ACC
#define norminf_INIT norm0_INIT
#define norminf_STEP(A, X, I, CT, AT, P)                                                 \
    do {                                                                                  \
        double t_ = fabs((double)(X));                                                    \
        if (t_ > (A) || t_ != t_) A = t_;                                                 \
    } while (0)
#define norminf_COMBINE(A, B, CT, AT) norminf_STEP(A, B, 0, CT, AT, 0)
#define norminf_FINISH norm0_FINISH
#define norminf_OUT0 norm_OUT0
#define norminf_OUT1 norm_OUT1
#define norminf_RUN norm_RUN
RED_KERNELS(norminf, RT_FLOAT)

#define normninf_ACC norm_ACC
#define normninf_INIT(A, AUX, CT, AT, LO, HI) A = INFINITY
#define normninf_STEP(A, X, I, CT, AT, P)                                                \
    do {                                                                                  \
        double t_ = fabs((double)(X));                                                    \
        if (t_ < (A) || t_ != t_) A = t_;                                                 \
    } while (0)
#define normninf_COMBINE(A, B, CT, AT) normninf_STEP(A, B, 0, CT, AT, 0)
#define normninf_FINISH norm0_FINISH
#define normninf_OUT0 norm_OUT0
#define normninf_OUT1 norm_OUT1
#define normninf_RUN norm_RUN
RED_KERNELS(normninf, RT_FLOAT)

/* ------------------------------------------------- passes against an aux */

/* var/std, second pass: squared deviations from the first pass's mean (aux),
 * divided by max(0, N - correction) (P->divisor) */
#define sqdev_ACC(CT, AT) struct { double m, s; }
#define sqdev_INIT(A, AUX, CT, AT, LO, HI) (A).m = (AUX), (A).s = 0
#define sqdev_STEP(A, X, I, CT, AT, P)                                                   \
    do {                                                                                  \
        double d_ = (double)(X) - (A).m;                                                  \
        (A).s += d_ * d_;                                                                 \
    } while (0)
#define sqdev_COMBINE(A, B, CT, AT) (A).s += (B).s
#define sqdev_FINISH(A, O0, O1, J, CT, AT, P)                                            \
    do {                                                                                  \
        double r_ = (A).s / (P)->divisor;                                                 \
        ((double *)(O0))[J] = (P)->root ? sqrt(r_) : r_;                                  \
    } while (0)
#define sqdev_OUT0(AT) EM_FLOAT64
#define sqdev_OUT1(AT) EM_INT64
#define sqdev_RUN norm_RUN
RED_KERNELS(sqdev, RT_FLOAT)

/* logsumexp, second pass: sum of exp(x - max) with the max (aux) taken as 0
 * when infinite, as torch does: all -inf gives -inf, any +inf gives +inf */
#define lse_ACC(CT, AT) struct { double m, s; }
#define lse_INIT(A, AUX, CT, AT, LO, HI) (A).m = isinf(AUX) ? 0.0 : (AUX), (A).s = 0
#define lse_STEP(A, X, I, CT, AT, P) (A).s += exp((CT)((double)(X) - (A).m)) /* float32: expf */
#define lse_COMBINE(A, B, CT, AT) (A).s += (B).s
#define lse_FINISH(A, O0, O1, J, CT, AT, P) ((double *)(O0))[J] = log((A).s) + (A).m
#define lse_OUT0(AT) EM_FLOAT64
#define lse_OUT1(AT) EM_INT64
#define lse_RUN norm_RUN
RED_KERNELS(lse, RT_FLOAT)
