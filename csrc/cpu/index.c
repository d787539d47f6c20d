/* index.c — CPU loops behind indexing: advanced indexing and the index_*
 * ops (Note [indirect loops] in ember.h), gather/scatter along a dim (Note
 * [scatter loops]), index tensors turned into byte offsets, and nonzero.
 *
 * Kernels never see Python and never fail: the front-ends (ops/index*.c,
 * ops/scatter_gather.c) validate shapes, dtypes and every index value first.
 * Each reduction (assign, sum, prod, amax, amin) is written once per dtype;
 * half types compute in float32 and round on store. */
#include "../ember.h"
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------ per-dtype element ops */

#define LOAD_P(T, p) (*(const T *)(p))
#define STORE_P(T, p, v) (*(T *)(p) = (T)(v))
#define LOAD_Q(T, p) (*(const bool *)(p))
#define STORE_Q(T, p, v) (*(bool *)(p) = (v) != 0)
#define LOAD_H(T, p) em_f16_to_f32(*(const uint16_t *)(p))
#define STORE_H(T, p, v) (*(uint16_t *)(p) = em_f32_to_f16(v))
#define LOAD_B(T, p) em_bf16_to_f32(*(const uint16_t *)(p))
#define STORE_B(T, p, v) (*(uint16_t *)(p) = em_f32_to_bf16(v))

/* X(args..., DTYPE, storage type, compute type, load/store suffix) */
#define IDX_TYPES(X, ...)                                                      \
    X(__VA_ARGS__, BOOL, bool, int, Q) X(__VA_ARGS__, UINT8, uint8_t, uint8_t, P)   \
    X(__VA_ARGS__, INT8, int8_t, int8_t, P) X(__VA_ARGS__, INT16, int16_t, int16_t, P) \
    X(__VA_ARGS__, INT32, int32_t, int32_t, P) X(__VA_ARGS__, INT64, int64_t, int64_t, P) \
    X(__VA_ARGS__, FLOAT16, uint16_t, float, H) X(__VA_ARGS__, BFLOAT16, uint16_t, float, B) \
    X(__VA_ARGS__, FLOAT32, float, float, P) X(__VA_ARGS__, FLOAT64, double, double, P) \
    X(__VA_ARGS__, UINT16, uint16_t, uint16_t, P) X(__VA_ARGS__, UINT32, uint32_t, uint32_t, P) \
    X(__VA_ARGS__, UINT64, uint64_t, uint64_t, P)

static inline bool nan_f(float x) { return isnan(x); }
static inline bool nan_d(double x) { return isnan(x); }
static inline bool nan_never(int64_t x) { (void)x; return false; }
#define IS_NAN(x) _Generic((x), float: nan_f, double: nan_d, default: nan_never)(x)
/* bool computes in int: a + b and a * b are `or` and `and` once stored */
#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
#define OP_MAX(a, b) ((IS_NAN(a) || (a) > (b)) ? (a) : (b))
#define OP_MIN(a, b) ((IS_NAN(a) || (a) < (b)) ? (a) : (b))

/* dst[i] = dst[i] OP src[i] over n elements (byte strides) */
typedef void (*CombineRowFn)(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n);
/* x[off[j]] = x[off[j]] OP d[doff(j)] */
typedef void (*PutIndirectFn)(char *x, const int64_t *off, const char *d, const int64_t *doff,
                              int64_t djs, int64_t n);
/* x[k·xs + idx[k]·xds] = x[...] OP y[k·ys] */
typedef void (*ScatterRowFn)(char *x, int64_t xs, int64_t xds, const char *idx, int64_t is,
                             const char *y, int64_t ys, int64_t n);

#define DEF_KERNELS(OPN, OPX, DT, T, C, LS)                                    \
    static void combine_##OPN##_##DT(char *dst, int64_t ds, const char *src, int64_t ss, \
                                     int64_t n) {                              \
        for (int64_t i = 0; i < n; i++) {                                      \
            char *p = dst + i * ds;                                            \
            C a = (C)LOAD_##LS(T, p), b = (C)LOAD_##LS(T, src + i * ss);       \
            STORE_##LS(T, p, OPX(a, b));                                       \
        }                                                                      \
    }                                                                          \
    static void put_##OPN##_##DT(char *x, const int64_t *off, const char *d,   \
                                 const int64_t *doff, int64_t djs, int64_t n) { \
        for (int64_t j = 0; j < n; j++) {                                      \
            char *p = x + off[j];                                              \
            const char *q = d + (doff ? doff[j] : j * djs);                    \
            C a = (C)LOAD_##LS(T, p), b = (C)LOAD_##LS(T, q);                  \
            STORE_##LS(T, p, OPX(a, b));                                       \
        }                                                                      \
    }                                                                          \
    static void scatter_##OPN##_##DT(char *x, int64_t xs, int64_t xds, const char *idx, \
                                     int64_t is, const char *y, int64_t ys, int64_t n) { \
        if (is == 8 && ys == sizeof(T)) { /* the common layout: contiguous rows */ \
            const int64_t *ix = (const int64_t *)idx;                          \
            for (int64_t k = 0; k < n; k++) {                                  \
                char *p = x + k * xs + ix[k] * xds;                            \
                C a = (C)LOAD_##LS(T, p), b = (C)LOAD_##LS(T, y + k * sizeof(T)); \
                STORE_##LS(T, p, OPX(a, b));                                   \
            }                                                                  \
            return;                                                            \
        }                                                                      \
        for (int64_t k = 0; k < n; k++) {                                      \
            char *p = x + k * xs + *(const int64_t *)(idx + k * is) * xds;     \
            C a = (C)LOAD_##LS(T, p), b = (C)LOAD_##LS(T, y + k * ys);         \
            STORE_##LS(T, p, OPX(a, b));                                       \
        }                                                                      \
    }

IDX_TYPES(DEF_KERNELS, sum, OP_SUM)
IDX_TYPES(DEF_KERNELS, prod, OP_PROD)
IDX_TYPES(DEF_KERNELS, max, OP_MAX)
IDX_TYPES(DEF_KERNELS, min, OP_MIN)

#define ENTRY(KIND, OPN, OPX, DT, T, C, LS) [EM_##DT] = KIND##_##OPN##_##DT,
#define TABLE_ROW(KIND, OPN) {IDX_TYPES(ENTRY, KIND, OPN, _)}
/* EM_RED_ASSIGN rows stay NULL: assignment goes through the byte copies below */
static const CombineRowFn combine_fns[EM_NUM_RED][EM_NUM_DTYPES] = {
    [EM_RED_SUM] = TABLE_ROW(combine, sum), [EM_RED_PROD] = TABLE_ROW(combine, prod),
    [EM_RED_MAX] = TABLE_ROW(combine, max), [EM_RED_MIN] = TABLE_ROW(combine, min)};
static const PutIndirectFn put_fns[EM_NUM_RED][EM_NUM_DTYPES] = {
    [EM_RED_SUM] = TABLE_ROW(put, sum), [EM_RED_PROD] = TABLE_ROW(put, prod),
    [EM_RED_MAX] = TABLE_ROW(put, max), [EM_RED_MIN] = TABLE_ROW(put, min)};
static const ScatterRowFn scatter_fns[EM_NUM_RED][EM_NUM_DTYPES] = {
    [EM_RED_SUM] = TABLE_ROW(scatter, sum), [EM_RED_PROD] = TABLE_ROW(scatter, prod),
    [EM_RED_MAX] = TABLE_ROW(scatter, max), [EM_RED_MIN] = TABLE_ROW(scatter, min)};

/* ---------------------------------------------- byte copies (assignment) */

/* The same loops for 1-, 2-, 4- and 8-byte elements: fixed-size memcpy
 * compiles to a plain move and tolerates unaligned foreign memory. */
#define DEF_COPIES(S)                                                          \
    static void copy_row_##S(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n) { \
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, S);  \
    }                                                                          \
    static void put_assign_##S(char *x, const int64_t *off, const char *d,     \
                               const int64_t *doff, int64_t djs, int64_t n) {  \
        for (int64_t j = 0; j < n; j++) memcpy(x + off[j], d + (doff ? doff[j] : j * djs), S); \
    }                                                                          \
    static void gather_ind_##S(char *d, int64_t djs, const char *x, const int64_t *off, \
                               int64_t n) {                                    \
        for (int64_t j = 0; j < n; j++) memcpy(d + j * djs, x + off[j], S);     \
    }                                                                          \
    static void scatter_assign_##S(char *x, int64_t xs, int64_t xds, const char *idx, \
                                   int64_t is, const char *y, int64_t ys, int64_t n) { \
        for (int64_t k = 0; k < n; k++)                                        \
            memcpy(x + k * xs + *(const int64_t *)(idx + k * is) * xds, y + k * ys, S); \
    }                                                                          \
    /* gathers check their index values as they go (false: one was out of \
     * [0, size); nothing was read through it) */                            \
    static bool gather_row_##S(char *y, int64_t ys, const char *x, int64_t xs, int64_t xds, \
                               const char *idx, int64_t is, int64_t n, uint64_t size) { \
        if (is == 8 && ys == S) {                                              \
            const int64_t *ix = (const int64_t *)idx;                          \
            for (int64_t k = 0; k < n; k++) {                                  \
                if ((uint64_t)ix[k] >= size) return false;                     \
                memcpy(y + k * S, x + k * xs + ix[k] * xds, S);                \
            }                                                                  \
            return true;                                                       \
        }                                                                      \
        for (int64_t k = 0; k < n; k++) {                                      \
            int64_t v = *(const int64_t *)(idx + k * is);                      \
            if ((uint64_t)v >= size) return false;                             \
            memcpy(y + k * ys, x + k * xs + v * xds, S);                       \
        }                                                                      \
        return true;                                                           \
    }
DEF_COPIES(1)
DEF_COPIES(2)
DEF_COPIES(4)
DEF_COPIES(8)

typedef void (*GatherIndFn)(char *d, int64_t djs, const char *x, const int64_t *off, int64_t n);
typedef bool (*GatherRowFn)(char *y, int64_t ys, const char *x, int64_t xs, int64_t xds,
                            const char *idx, int64_t is, int64_t n, uint64_t size);
#define BY_SIZE(name) {NULL, name##_1, name##_2, NULL, name##_4, NULL, NULL, NULL, name##_8}
static const CombineRowFn copy_rows[9] = BY_SIZE(copy_row);
static const PutIndirectFn put_assigns[9] = BY_SIZE(put_assign);
static const GatherIndFn gather_inds[9] = BY_SIZE(gather_ind);
static const ScatterRowFn scatter_assigns[9] = BY_SIZE(scatter_assign);
static const GatherRowFn gather_rows[9] = BY_SIZE(gather_row);

static CombineRowFn row_fn(EmReduceOp op, EmDType dt) {
    return op == EM_RED_ASSIGN ? copy_rows[em_itemsize(dt)] : combine_fns[op][dt];
}

/* ------------------------------------------------------ small N-d walks */

/* Coordinates over `n` dims (sizes[]), with up to two byte pointers that move
 * by their strides; the last dim varies fastest. */
typedef struct {
    int n;
    const int64_t *size, *s0, *s1;
    int64_t c[EM_MAX_DIMS];
} Walk;

static void walk_start(Walk *w, int n, const int64_t *size, const int64_t *s0, const int64_t *s1,
                       int64_t linear, char **p0, char **p1) {
    w->n = n;
    w->size = size;
    w->s0 = s0;
    w->s1 = s1;
    for (int d = n - 1; d >= 0; d--) {
        w->c[d] = linear % size[d];
        linear /= size[d];
        *p0 += w->c[d] * s0[d];
        if (p1) *p1 += w->c[d] * s1[d];
    }
}

static inline void walk_next(Walk *w, char **p0, char **p1) {
    for (int d = w->n - 1; d >= 0; d--) {
        *p0 += w->s0[d];
        if (p1) *p1 += w->s1[d];
        if (++w->c[d] < w->size[d]) return;
        *p0 -= w->c[d] * w->s0[d];
        if (p1) *p1 -= w->c[d] * w->s1[d];
        w->c[d] = 0;
    }
}

static int64_t prod(int n, const int64_t *s) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

/* An A block (Note [indirect loops]): na dims, innermost last. */
static void block_run(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
                      int na, const int64_t *asize, CombineRowFn row, int isz) {
    if (na == 0) {
        row(dst, 0, src, 0, 1);
        return;
    }
    int64_t inner = asize[na - 1], dsi = ds[na - 1], ssi = ss[na - 1];
    bool memcpy_ok = row == copy_rows[isz] && dsi == isz && ssi == isz;
    int64_t rows = prod(na - 1, asize);
    Walk w;
    char *d = dst, *s = (char *)src;
    walk_start(&w, na - 1, asize, ds, ss, 0, &d, &s);
    for (int64_t r = 0; r < rows; r++) {
        if (memcpy_ok)
            memcpy(d, s, (size_t)(inner * isz));
        else
            row(d, dsi, s, ssi, inner);
        walk_next(&w, &d, &s);
    }
}

static int threads_for(int64_t work, int64_t tasks) {
#ifdef _OPENMP
    int64_t nt = em_num_threads;
    if (nt <= 1 || work < 2 * EM_GRAIN) return 1;
    if (nt > work / EM_GRAIN) nt = work / EM_GRAIN;
    if (nt > tasks) nt = tasks;
    return nt < 1 ? 1 : (int)nt;
#else
    (void)work;
    (void)tasks;
    return 1;
#endif
}

static void split(int64_t n, int t, int nt, int64_t *b, int64_t *e) {
    int64_t chunk = (n + nt - 1) / nt;
    *b = t * chunk < n ? t * chunk : n;
    *e = *b + chunk < n ? *b + chunk : n;
}

/* -------------------------------------------------- indirect loops */

static inline int64_t dense_off(const EmIndirect *g, int64_t j) {
    return g->dense_off ? g->dense_off[j] : j * g->dense_jstride;
}

/* tasks [b, e) of the flattened (p, j) space */
static void gather_tasks(const EmIndirect *g, int isz, int64_t b, int64_t e) {
    if (b >= e) return;
    int64_t p = b / g->nj, j = b % g->nj;
    char *xp = g->x, *dp = g->d;
    Walk w;
    walk_start(&w, g->np, g->psize, g->ps_x, g->ps_d, p, &xp, &dp);
    while (b < e) {
        int64_t jn = g->nj - j < e - b ? g->nj - j : e - b;
        if (g->na == 0 && !g->dense_off) {
            gather_inds[isz](dp + j * g->dense_jstride, g->dense_jstride, xp, g->off + j, jn);
        } else {
            for (int64_t k = j; k < j + jn; k++)
                block_run(dp + dense_off(g, k), g->as_d, xp + g->off[k], g->as_x, g->na, g->asize,
                          copy_rows[isz], isz);
        }
        b += jn;
        j = 0;
        walk_next(&w, &xp, &dp);
    }
}

void em_cpu_index_gather(const EmIndirect *g, int isz) {
    int64_t pn = prod(g->np, g->psize), tasks = pn * g->nj;
    if (tasks == 0 || prod(g->na, g->asize) == 0) return;
    int nt = threads_for(tasks * prod(g->na, g->asize), tasks);
    if (nt <= 1) {
        gather_tasks(g, isz, 0, tasks);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        split(tasks, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        gather_tasks(g, isz, b, e);
    }
#endif
}

/* outer positions [b, e); every j in order, so the last write wins */
static void put_range(const EmIndirect *g, EmReduceOp op, EmDType dt, int64_t b, int64_t e) {
    if (b >= e) return;
    int isz = em_itemsize(dt);
    PutIndirectFn put = op == EM_RED_ASSIGN ? put_assigns[isz] : put_fns[op][dt];
    CombineRowFn row = row_fn(op, dt);
    char *xp = g->x, *dp = g->d;
    Walk w;
    walk_start(&w, g->np, g->psize, g->ps_x, g->ps_d, b, &xp, &dp);
    for (int64_t p = b; p < e; p++) {
        if (g->na == 0) {
            put(xp, g->off, dp, g->dense_off, g->dense_jstride, g->nj);
        } else {
            for (int64_t j = 0; j < g->nj; j++)
                block_run(xp + g->off[j], g->as_x, dp + dense_off(g, j), g->as_d, g->na, g->asize,
                          row, isz);
        }
        walk_next(&w, &xp, &dp);
    }
}

void em_cpu_index_put(const EmIndirect *g, EmReduceOp op, EmDType dt, bool outer_parallel) {
    int64_t pn = prod(g->np, g->psize);
    if (pn == 0 || g->nj == 0 || prod(g->na, g->asize) == 0) return;
    int nt = outer_parallel ? threads_for(pn * g->nj * prod(g->na, g->asize), pn) : 1;
    if (nt <= 1) {
        put_range(g, op, dt, 0, pn);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        split(pn, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        put_range(g, op, dt, b, e);
    }
#endif
}

/* ------------------------------------------------------ scatter loops */

/* rows [b, e) of the walk over g->nrow dims; a gather stops at a bad index
 * (and when another thread found one: *stop) and returns false */
static bool scatter_rows(const EmScatterLoop *g, EmReduceOp op, EmDType dt, bool gather,
                         int64_t b, int64_t e, volatile int *stop) {
    if (b >= e) return true;
    int isz = em_itemsize(dt);
    char *xp = g->x, *yp = g->y, *ip = (char *)g->idx;
    /* three pointers: walk the index with its own Walk */
    Walk w, wi;
    walk_start(&w, g->nrow, g->rsize, g->rs_x, g->rs_y, b, &xp, &yp);
    walk_start(&wi, g->nrow, g->rsize, g->rs_i, g->rs_i, b, &ip, NULL);
    ScatterRowFn sc = op == EM_RED_ASSIGN ? scatter_assigns[isz] : scatter_fns[op][dt];
    for (int64_t r = b; r < e; r++) {
        if (gather) {
            if (*stop || !gather_rows[isz](yp, g->ys, xp, g->xs, g->x_dim_stride, ip, g->is, g->n,
                                           (uint64_t)g->size)) {
                *stop = 1;
                return false;
            }
        } else {
            sc(xp, g->xs, g->x_dim_stride, ip, g->is, yp, g->ys, g->n);
        }
        walk_next(&w, &xp, &yp);
        walk_next(&wi, &ip, NULL);
    }
    return true;
}

static bool scatter_run(const EmScatterLoop *g, EmReduceOp op, EmDType dt, bool gather) {
    int64_t rows = prod(g->nrow, g->rsize);
    volatile int stop = 0;
    if (rows == 0 || g->n == 0) return true;
    int64_t group = g->group > 0 ? g->group : 1, ngroups = rows / group;
    int nt = threads_for(rows * g->n, ngroups);
    if (nt <= 1) return scatter_rows(g, op, dt, gather, 0, rows, &stop);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        split(ngroups, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        scatter_rows(g, op, dt, gather, b * group, e * group, &stop);
    }
#endif
    return !stop;
}

bool em_cpu_gather(const EmScatterLoop *g, int isz) {
    return scatter_run(g, EM_RED_ASSIGN, isz == 1 ? EM_UINT8 : isz == 2 ? EM_INT16 : isz == 4 ? EM_INT32 : EM_INT64,
                       true);
}

void em_cpu_scatter(const EmScatterLoop *g, EmReduceOp op, EmDType dt) { scatter_run(g, op, dt, false); }

/* ------------------------------------------------- index values */

/* One row of n index values (byte stride s): offsets, or the position of
 * the first value outside [0, size) after wrapping negatives. */
#define INDEX_ROW(T)                                                           \
    for (int64_t k = 0; k < n; k++) {                                          \
        int64_t v = *(const T *)(p + k * s), u = (wrap && v < 0) ? v + size : v; \
        if ((uint64_t)u >= (uint64_t)size) {                                   \
            *bad = v;                                                          \
            return k;                                                          \
        }                                                                      \
        if (off) off[k] = (acc ? off[k] : 0) + u * stride;                     \
    }
/* min and max of a contiguous row: a loop the compiler vectorizes */
#define MINMAX_ROW(T)                                                          \
    {                                                                          \
        const T *q = (const T *)p;                                             \
        T mn = q[0], mx = q[0];                                                \
        for (int64_t k = 1; k < n; k++) {                                      \
            mn = q[k] < mn ? q[k] : mn;                                        \
            mx = q[k] > mx ? q[k] : mx;                                        \
        }                                                                      \
        lo = mn;                                                               \
        hi = mx;                                                               \
    }
static int64_t index_row(const char *p, int64_t s, int64_t n, bool is32, int64_t size, bool wrap,
                         int64_t stride, int64_t *off, bool acc, int64_t *bad) {
    if (!off && n > 0 && s == (is32 ? 4 : 8)) { /* only checking: min/max first */
        int64_t lo, hi;
        if (is32)
            MINMAX_ROW(int32_t)
        else
            MINMAX_ROW(int64_t)
        if (lo >= (wrap ? -size : 0) && hi < size) return -1;
    }
    if (is32) {
        INDEX_ROW(int32_t)
    } else {
        INDEX_ROW(int64_t)
    }
    return -1;
}

int64_t em_cpu_index_offsets(int64_t *off, bool accumulate, const EmTensor *idx, int nb,
                             const int64_t *bshape, int64_t size, int64_t stride, int wrap,
                             int64_t *bad) {
    int64_t nj = prod(nb, bshape);
    int isz = em_itemsize(idx->dtype), lead = nb - idx->ndim;
    int64_t st[EM_MAX_DIMS];
    if (nj == 0) return -1;
    for (int d = 0; d < nb; d++) {
        int td = d - lead;
        st[d] = (td < 0 || idx->sizes[td] == 1) ? 0 : idx->strides[td] * isz;
    }
    bool is32 = idx->dtype == EM_INT32, neg = wrap == EM_WRAP_NEG;
    int64_t inner = nb ? bshape[nb - 1] : 1, s = nb ? st[nb - 1] : 0, rows = nj / inner;
    Walk w;
    char *p = em_data(idx);
    walk_start(&w, nb ? nb - 1 : 0, bshape, st, st, 0, &p, NULL);
    for (int64_t r = 0; r < rows; r++) {
        int64_t at = index_row(p, s, inner, is32, size, neg, stride, off ? off + r * inner : NULL,
                               accumulate, bad);
        if (at >= 0) return r * inner + at;
        walk_next(&w, &p, NULL);
    }
    return -1;
}

/* ----------------------------------------------------------- nonzero */

static uint64_t nz_mask(EmDType d) {
    switch (d) {
    case EM_FLOAT16: case EM_BFLOAT16: return 0x7fffu;
    case EM_FLOAT32: return 0x7fffffffu;
    case EM_FLOAT64: return 0x7fffffffffffffffull;
    default: return ~0ull; /* -0.0 is zero, NaN is not: tests on the bits */
    }
}

/* Logical elements [b, e) of t in row-major order, a row (the last dim) at
 * a time: their count, and when asked their coordinates and/or offsets (at
 * most nmax of them: writes are unconditional below that bound, so random
 * masks cost no branch mispredictions). */
#define NZ_ROW(U)                                                              \
    if (!fill) {                                                               \
        for (int64_t k = k0; k < k1; k++) {                                    \
            U v;                                                               \
            memcpy(&v, p + k * is, sizeof(U));                                 \
            n += (v & (U)mask) != 0;                                           \
        }                                                                      \
    } else {                                                                   \
        for (int64_t k = k0; k < k1; k++) {                                    \
            U v;                                                               \
            memcpy(&v, p + k * is, sizeof(U));                                 \
            if (n < nmax) {                                                    \
                if (coords) {                                                  \
                    int64_t *c = coords + n * nd;                              \
                    for (int d = 0; d < nd - 1; d++) c[d] = w.c[d];             \
                    c[nd - 1] = k;                                             \
                }                                                              \
                if (offs) offs[n] = rowoff + k * olast;                        \
            }                                                                  \
            n += (v & (U)mask) != 0;                                           \
        }                                                                      \
    }
static int64_t nonzero_range(const EmTensor *t, int64_t b, int64_t e, int64_t *coords,
                             int64_t *offs, const int64_t *ostrides, int64_t nmax) {
    int nd = t->ndim, isz = em_itemsize(t->dtype);
    uint64_t mask = nz_mask((EmDType)t->dtype);
    int64_t st[EM_MAX_DIMS], zero[EM_MAX_DIMS] = {0}, n = 0;
    if (b >= e) return 0;
    if (nd == 0) {
        bool nz;
        switch (isz) {
        case 1: nz = (*(const uint8_t *)em_data(t) & mask) != 0; break;
        case 2: { uint16_t v; memcpy(&v, em_data(t), 2); nz = (v & mask) != 0; break; }
        case 4: { uint32_t v; memcpy(&v, em_data(t), 4); nz = (v & mask) != 0; break; }
        default: { uint64_t v; memcpy(&v, em_data(t), 8); nz = (v & mask) != 0; break; }
        }
        if (nz && offs) offs[0] = 0;
        return nz;
    }
    for (int d = 0; d < nd; d++) st[d] = t->strides[d] * isz;
    bool fill = coords || offs;
    int64_t inner = t->sizes[nd - 1], is = st[nd - 1], olast = offs ? ostrides[nd - 1] : 0;
    int64_t row = b / inner, k0 = b % inner, pos = b;
    char *p = em_data(t);
    Walk w;
    walk_start(&w, nd - 1, t->sizes, st, zero, row, &p, NULL);
    while (pos < e) {
        int64_t k1 = inner - k0 < e - pos ? inner : k0 + (e - pos);
        int64_t rowoff = 0;
        if (offs)
            for (int d = 0; d < nd - 1; d++) rowoff += w.c[d] * ostrides[d];
        switch (isz) {
        case 1: NZ_ROW(uint8_t) break;
        case 2: NZ_ROW(uint16_t) break;
        case 4: NZ_ROW(uint32_t) break;
        default: NZ_ROW(uint64_t) break;
        }
        pos += k1 - k0;
        k0 = 0;
        walk_next(&w, &p, NULL);
    }
    return n;
}

int em_cpu_nonzero_chunks(const EmTensor *t) {
    int n = threads_for(t->numel, t->numel);
    return n > 256 ? 256 : n; /* em_cpu_nonzero_fill's prefix table */
}

void em_cpu_nonzero_count(const EmTensor *t, int nchunks, int64_t *counts) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(nchunks) if (nchunks > 1)
#endif
    for (int c = 0; c < nchunks; c++) {
        int64_t b, e;
        split(t->numel, c, nchunks, &b, &e);
        counts[c] = nonzero_range(t, b, e, NULL, NULL, NULL, 0);
    }
}

void em_cpu_nonzero_fill(const EmTensor *t, int nchunks, const int64_t *counts, int64_t *coords,
                         int64_t *offs, const int64_t *ostrides) {
    int64_t start[256], acc = 0;
    for (int c = 0; c < nchunks; c++) {
        start[c] = acc;
        acc += counts[c];
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nchunks) if (nchunks > 1)
#endif
    for (int c = 0; c < nchunks; c++) {
        int64_t b, e;
        split(t->numel, c, nchunks, &b, &e);
        nonzero_range(t, b, e, coords ? coords + start[c] * t->ndim : NULL, offs ? offs + start[c] : NULL,
                      ostrides, counts[c]);
    }
}
