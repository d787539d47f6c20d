/* derivatives_reduce.c — backward formulas of reductions, scans and
 * selections (ops/reduce.c, ops/sort.c), torch's formulas and conventions:
 * ties of amax/amin and of the all-reduce max/min/median share the gradient
 * evenly; max(dim), sort, topk, kthvalue, mode, median(dim) send it to the
 * chosen index; prod and cumprod are exact with zeros in the input; norms
 * give 0 where the norm is 0 (p = 0: no gradient at all, as torch).
 *
 * A reduction's gradient has the output's shape; kept() reshapes it so the
 * reduced dims are 1 (keepdim or not), and broadcasting or expand() takes it
 * back to the input's shape. */
#include "formula.h"

#define TRUE_ Py_True
#define WHERE(c, a, b) OP3(where, c, a, b)
#define EQ(a, b) OP2(eq, a, b)

/* ----------------------------------------------------------- helpers */

/* The dims of input 0 that `dim` (None, (), an int or a list) reduces. */
static int reduced(Scratch *s, EmNode *n, PyObject *dim, uint64_t *mask) {
    bool all;
    if (em_reduce_mask(dim, n->in_meta[0].ndim, mask, &all) < 0) {
        s->failed = true;
        return -1;
    }
    return 0;
}

/* The reduced dims as a tuple (for sum(x, dims, True)); () on a 0-d input. */
static PyObject *dims_tuple(Scratch *s, EmNode *n, uint64_t mask) {
    int nd = n->in_meta[0].ndim, k = 0;
    for (int d = 0; d < nd; d++) k += (int)(mask >> d & 1);
    PyObject *t = keep(s, PyTuple_New(k));
    for (int d = 0, i = 0; t && d < nd; d++)
        if (mask >> d & 1) PyTuple_SET_ITEM(t, i++, PyLong_FromLong(d));
    return t;
}

/* a tensor of the output's shape, reshaped to input 0's rank with the
 * reduced dims of size 1 */
static PyObject *kept(Scratch *s, EmNode *n, PyObject *t, uint64_t mask) {
    const EmMeta *m = &n->in_meta[0];
    int64_t sh[EM_MAX_DIMS];
    for (int d = 0; d < m->ndim; d++) sh[d] = (mask >> d & 1) ? 1 : em_meta_sizes(m)[d];
    PyObject *size = keep(s, em_size_new(m->ndim, sh));
    return size && t ? call(s, EM_OP_reshape, 2, t, size, NULL, NULL) : NULL;
}
#define KEPT(t) kept(S, n, (t), mask)
#define EXPAND(t) OP2(expand, t, IN_SIZE(0))

/* the number of elements each output element reduces */
static double count_of(EmNode *n, uint64_t mask) {
    const EmMeta *m = &n->in_meta[0];
    double c = 1;
    for (int d = 0; d < m->ndim; d++)
        if (mask >> d & 1) c *= (double)em_meta_sizes(m)[d];
    return c;
}

static bool any_true(Scratch *s, PyObject *t) {
    /* Note [meta device]: no values to test; the formula that holds either way */
    if (t && em_is_tensor(t) && em_is_meta((EmTensor *)t)) return true;
    PyObject *a = call(s, EM_OP_any, 1, t, NULL, NULL, NULL);
    int r = a ? PyObject_IsTrue(a) : -1;
    if (r < 0) s->failed = true;
    return r > 0;
}

/* The gradient of an extremum over dims (amax, amin, aminmax): split evenly
 * among the elements equal to the result (torch's scale_grad_by_count). */
static PyObject *extremum_grad(Scratch *s, EmNode *n, PyObject *g, PyObject *out, uint64_t mask) {
    PyObject *x = input(s, n, 0);
    PyObject *hit = call(s, EM_OP_eq, 2, x, kept(s, n, out, mask), NULL, NULL);
    PyObject *cnt = call(s, EM_OP_sum, 3, hit, dims_tuple(s, n, mask), TRUE_, NULL);
    PyObject *share = call(s, EM_OP_div, 2, kept(s, n, g, mask), cnt, NULL, NULL);
    return call(s, EM_OP_mul, 2, share, hit, NULL, NULL);
}

/* All-reduce max/min/median: the gradient split evenly among the elements
 * equal to the value (or NaN when the value is NaN). */
static PyObject *evenly(Scratch *s, EmNode *n, PyObject *g) {
    PyObject *x = input(s, n, 0), *v = output(s, n, 0);
    PyObject *both_nan = call(s, EM_OP_logical_and, 2, call(s, EM_OP_isnan, 1, x, NULL, NULL, NULL),
                              call(s, EM_OP_isnan, 1, v, NULL, NULL, NULL), NULL, NULL);
    PyObject *hit = call(s, EM_OP_logical_or, 2, call(s, EM_OP_eq, 2, x, v, NULL, NULL), both_nan, NULL, NULL);
    PyObject *share = call(s, EM_OP_div, 2, g, call(s, EM_OP_sum, 1, hit, NULL, NULL, NULL), NULL, NULL);
    return call(s, EM_OP_where, 3, hit, share, keep(s, PyFloat_FromDouble(0.0)), NULL);
}

/* Ops that pick elements along `dim` (max(dim), sort, topk, ...): the
 * gradient scattered into zeros at the indices (added up for cummax,
 * whose indices repeat). */
static PyObject *picked(Scratch *s, EmNode *n, PyObject *g, PyObject *idx, int64_t dim, bool keepdim, bool add) {
    if (n->in_meta[0].ndim == 0) return call(s, EM_OP_reshape, 2, g, keep(s, PyTuple_New(0)), NULL, NULL);
    PyObject *d = keep(s, PyLong_FromLongLong(dim));
    if (!keepdim) {
        g = call(s, EM_OP_unsqueeze, 2, g, d, NULL, NULL);
        idx = call(s, EM_OP_unsqueeze, 2, idx, d, NULL, NULL);
    }
    PyObject *z = zeros_for(s, n, 0, g);
    return call(s, add ? EM_OP_scatter_add : EM_OP_scatter, 4, z, d, idx, g);
}

static int64_t int_arg(Scratch *s, PyObject *o) {
    int64_t v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) s->failed = true;
    return v;
}
#define INT_ARG(i) int_arg(S, ARG(i))
#define TRUTH(i) (PyObject_IsTrue(ARG(i)) == 1)

/* ------------------------------------------------------- sum and mean */

int bw_sum(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0) SET(0, EXPAND(KEPT(G(0))));
    END;
}

/* NaNs contribute nothing, so they get no gradient */
int bw_nansum(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0)
        SET(0, MUL(EXPAND(KEPT(G(0))), OP1(logical_not, OP1(isnan, IN(0)))));
    END;
}

int bw_mean(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0) SET(0, DIV(EXPAND(KEPT(G(0))), NUM(count_of(n, mask))));
    END;
}

/* torch computes nanmean as nansum / (number of non-NaNs): DivBackward0 */
int bw_nanmean(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0) {
        PyObject *ok = OP1(logical_not, OP1(isnan, IN(0)));
        PyObject *cnt = OP3(sum, ok, ARG(1), ARG(2));
        SET(0, MUL(EXPAND(KEPT(DIV(G(0), cnt))), ok));
    }
    END;
}

/* prod: g * prod / x without zeros (torch). With zeros, per reduced slice
 * with c zeros and P the product of the non-zeros: c == 1 -> the zero gets
 * g P, the others g P S / x; c == 2 -> each zero gets g P (S - x); c > 2 ->
 * 0. S, the sum of the zeros, is 0 but carries the second derivative. */
int bw_prod(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    PyObject *x = IN(0), *dim = ARG(1);
    if (reduced(S, n, dim, &mask) < 0) END;
    PyObject *g = KEPT(G(0)), *out = KEPT(OUT(0)), *zero = EQ(x, NUM(0.0));
    /* complex: g times the conjugate of the real formula's factor (Note [complex gradients]) */
    bool cx = x && em_is_complex(((EmTensor *)x)->dtype);
    PyObject *g_cx = g;
    if (cx) g = NUM(1.0);
    if (!sc.failed && !any_true(S, zero)) {
        PyObject *f = DIV(EXPAND(MUL(g, out)), x);
        SET(0, cx ? MUL(EXPAND(g_cx), CJ(f)) : f);
        END;
    }
    PyObject *dims = dims_tuple(S, n, mask), *z = NUM(0.0);
    PyObject *safe = WHERE(zero, NUM(1.0), x);
    PyObject *P = dim == Py_None ? KEPT(OP1(prod, safe)) : OP3(prod, safe, dim, TRUE_);
    PyObject *c = OP3(sum, zero, dims, TRUE_), *sz = OP3(sum, WHERE(zero, x, z), dims, TRUE_);
    PyObject *at_zero = WHERE(EQ(c, NUM(1.0)), P, WHERE(EQ(c, NUM(2.0)), MUL(SUB(sz, x), P), z));
    PyObject *off_zero = WHERE(EQ(c, NUM(0.0)), DIV(MUL(g, out), safe),
                               WHERE(EQ(c, NUM(1.0)), MUL(g, DIV(MUL(sz, P), safe)), z));
    PyObject *f = WHERE(zero, MUL(g, at_zero), off_zero);
    SET(0, cx ? MUL(EXPAND(g_cx), CJ(f)) : f);
    END;
}

/* ------------------------------------------------------------ extrema */

int bw_amax(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0) SET(0, extremum_grad(S, n, G(0), OUT(0), mask));
    END;
}

/* aminmax -> (min, max): each output's gradient goes to its extrema */
int bw_aminmax(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) < 0) END;
    PyObject *r = NULL;
    for (int j = 0; j < 2; j++) {
        if (!go[j]) continue;
        PyObject *gj = extremum_grad(S, n, G(j), OUT(j), mask);
        r = r ? ADD(r, gj) : gj;
    }
    if (r) SET(0, r);
    END;
}

/* max / min: max(x) shares among ties, max(x, dim) picks the index, and
 * max(x, other) is maximum (its tensor moved to `other` by the forward) */
static int max_min(EmNode *n, EmTensor **go, EmTensor **gi, EmOpId wins) {
    BEGIN;
    PyObject *g = G(0);
    if (!g) END;
    if (n->num_next > 1 && n->in_meta[1].defined) {
        PyObject *a = IN(0), *b = IN(1), *half = DIV(g, NUM(2.0)), *tie = EQ(a, b);
        PyObject *ab[2] = {a, b}, *a_wins = call_n(S, wins, 2, ab);
        if (need(n, 0)) SET(0, WHERE(tie, half, WHERE(a_wins, g, NUM(0.0))));
        if (need(n, 1)) SET(1, WHERE(tie, half, WHERE(a_wins, NUM(0.0), g)));
    } else if (ARG(1) == Py_None) {
        SET(0, evenly(S, n, g));
    } else {
        SET(0, picked(S, n, g, OUT(1), INT_ARG(1), TRUTH(2), false));
    }
    END;
}
int bw_max(EmNode *n, EmTensor **go, EmTensor **gi) { return max_min(n, go, gi, EM_OP_gt); }
int bw_min(EmNode *n, EmTensor **go, EmTensor **gi) { return max_min(n, go, gi, EM_OP_lt); }

/* median / nanmedian: (input, dim, keepdim) */
int bw_median(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0)) END;
    if (ARG(1) == Py_None)
        SET(0, evenly(S, n, G(0)));
    else
        SET(0, picked(S, n, G(0), OUT(1), INT_ARG(1), TRUTH(2), false));
    END;
}

/* mode(input, dim, keepdim); kthvalue(input, k, dim, keepdim) */
int bw_mode(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0)) SET(0, picked(S, n, G(0), OUT(1), INT_ARG(1), TRUTH(2), false));
    END;
}

int bw_kthvalue(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0)) SET(0, picked(S, n, G(0), OUT(1), INT_ARG(2), TRUTH(3), false));
    END;
}

/* sort(input, dim, ...), topk(input, k, dim, ...): values keep the dim */
int bw_sort(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0)) SET(0, picked(S, n, G(0), OUT(1), INT_ARG(1), true, false));
    END;
}

int bw_topk(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0)) SET(0, picked(S, n, G(0), OUT(1), INT_ARG(2), true, false));
    END;
}

/* msort returns no indices: the (stable) order is recomputed */
int bw_msort(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *idx = n->in_meta[0].ndim ? OP2(argsort, IN(0), INT(0)) : NULL;
    SET(0, picked(S, n, G(0), idx, 0, true, false));
    END;
}

/* cummax / cummin(input, dim): an element may be the running extremum of
 * several outputs: their gradients add up */
int bw_cummax(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0)) SET(0, picked(S, n, G(0), OUT(1), INT_ARG(1), true, true));
    END;
}

/* ------------------------------------------------------------ var, std */

typedef struct {
    PyObject *dim;
    double correction;
} VarArgs;

/* (input, dim, unbiased, keepdim, *, correction): var(x, True) passes
 * unbiased in dim's place */
static VarArgs var_args(EmNode *n) {
    PyObject *dim = ARG(1), *unbiased = ARG(2), *corr = ARG(4);
    if (PyBool_Check(dim)) {
        unbiased = dim;
        dim = Py_None;
    }
    VarArgs v = {dim, unbiased == Py_False ? 0.0 : 1.0};
    if (corr != Py_None) v.correction = PyFloat_AsDouble(corr);
    return v;
}

/* d var / dx for a gradient gv of var's shape: 2 / (N - correction) * gv * (x - mean) */
static PyObject *var_grad(Scratch *s, EmNode *n, PyObject *gv, VarArgs v, uint64_t mask) {
    PyObject *x = input(s, n, 0), *dims = dims_tuple(s, n, mask);
    PyObject *dev = call(s, EM_OP_sub, 2, x, call(s, EM_OP_mean, 3, x, dims, TRUE_, NULL), NULL, NULL);
    double scale = 2.0 / (count_of(n, mask) - v.correction);
    PyObject *sg = call(s, EM_OP_mul, 2, keep(s, PyFloat_FromDouble(scale)), kept(s, n, gv, mask), NULL, NULL);
    return call(s, EM_OP_mul, 2, sg, dev, NULL, NULL);
}

/* std = sqrt(var): var's gradient is g / (2 std), 0 where std is 0 */
static PyObject *std_to_var(Scratch *s, PyObject *g, PyObject *std) {
    PyObject *zero = keep(s, PyFloat_FromDouble(0.0)), *two = keep(s, PyFloat_FromDouble(2.0));
    PyObject *q = call(s, EM_OP_div, 2, g, call(s, EM_OP_mul, 2, std, two, NULL, NULL), NULL, NULL);
    return call(s, EM_OP_where, 3, call(s, EM_OP_eq, 2, std, zero, NULL, NULL), zero, q, NULL);
}

/* var, std, var_mean, std_mean: output 0 the var or std, output 1 the mean */
static int var_std(EmNode *n, EmTensor **go, EmTensor **gi, bool root) {
    BEGIN;
    VarArgs v = var_args(n);
    uint64_t mask;
    if (PyErr_Occurred() || reduced(S, n, v.dim, &mask) < 0) {
        sc.failed = true;
        END;
    }
    PyObject *r = NULL;
    if (go[0]) r = var_grad(S, n, root ? std_to_var(S, G(0), OUT(0)) : G(0), v, mask);
    if (n->num_outputs > 1 && go[1]) {
        PyObject *gm = DIV(EXPAND(KEPT(G(1))), NUM(count_of(n, mask)));
        r = r ? ADD(r, gm) : gm;
    }
    if (r) SET(0, r);
    END;
}
int bw_var(EmNode *n, EmTensor **go, EmTensor **gi) { return var_std(n, go, gi, false); }
int bw_std(EmNode *n, EmTensor **go, EmTensor **gi) { return var_std(n, go, gi, true); }

/* ---------------------------------------------------------------- norms */

/* torch's vector norm gradient for order p (r: the norm, g: its gradient,
 * both with the reduced dims kept) */
static int vector_norm_grad(EmNode *n, EmTensor **go, EmTensor **gi, double p, PyObject *dim) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, dim, &mask) < 0) END;
    PyObject *x = IN(0), *g = KEPT(G(0)), *r = KEPT(OUT(0)), *zero = NUM(0.0);
    if (p == 0) {
        /* piecewise constant: torch returns no gradient at all (x.grad stays None) */
    } else if (p == 1) {
        SET(0, MUL(OP1(sgn, x), EXPAND(g)));
    } else if (p == 2) {
        SET(0, MUL(x, WHERE(EQ(r, zero), zero, DIV(g, r))));
    } else if (isinf(p)) { /* amax / amin of |x|, NaNs included */
        PyObject *ax = OP1(abs, x);
        PyObject *hit = OP2(logical_or, EQ(ax, r), OP1(isnan, ax));
        PyObject *cnt = OP3(sum, hit, dims_tuple(S, n, mask), TRUE_);
        SET(0, MUL(OP1(sgn, x), MUL(DIV(g, cnt), hit)));
    } else if (p < 1) {
        PyObject *scaled = MUL(OP1(sgn, x), WHERE(EQ(x, zero), zero, OP2(pow, OP1(abs, x), NUM(p - 1))));
        SET(0, MUL(MUL(scaled, g), OP2(pow, r, NUM(1 - p))));
    } else {
        PyObject *scaled = p < 2 ? MUL(OP1(sgn, x), OP2(pow, OP1(abs, x), NUM(p - 1)))
                                 : MUL(x, OP2(pow, OP1(abs, x), NUM(p - 2)));
        PyObject *sv = WHERE(EQ(r, zero), zero, DIV(g, OP2(pow, r, NUM(p - 1))));
        SET(0, MUL(scaled, sv));
    }
    END;
}

/* norm(input, p='fro', dim, ...): 'fro' and None are the 2-norm */
int bw_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    PyObject *po = ARG(1);
    double p = po == Py_None || PyUnicode_Check(po) ? 2.0 : PyFloat_AsDouble(po);
    if (p == -1.0 && PyErr_Occurred()) return -1;
    return vector_norm_grad(n, go, gi, p, ARG(2));
}

int bw_linalg_vector_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    double p = PyFloat_AsDouble(ARG(1));
    if (p == -1.0 && PyErr_Occurred()) return -1;
    return vector_norm_grad(n, go, gi, p, ARG(2));
}

/* logsumexp: g * exp(x - result) */
int bw_logsumexp(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    uint64_t mask;
    if (reduced(S, n, ARG(1), &mask) == 0) SET(0, MUL(KEPT(G(0)), OP1(exp, SUB(IN(0), KEPT(OUT(0))))));
    END;
}

/* ---------------------------------------------------------------- scans */

/* sum_{j >= i} t_j along dim */
static PyObject *reversed_cumsum(Scratch *s, PyObject *t, PyObject *dim) {
    PyObject *dims = keep(s, PyTuple_Pack(1, dim));
    PyObject *f = call(s, EM_OP_flip, 2, t, dims, NULL, NULL);
    return call(s, EM_OP_flip, 2, call(s, EM_OP_cumsum, 2, f, dim, NULL, NULL), dims, NULL, NULL);
}

/* the gradient in the input's dtype first, as torch (cumsum(dtype=...)) */
static PyObject *as_input_dtype(Scratch *s, EmNode *n, PyObject *g) {
    if (!g || ((EmTensor *)g)->dtype == n->in_meta[0].dtype) return g;
    return call(s, EM_OP__to_copy, 2, g, em_dtype_object((EmDType)n->in_meta[0].dtype), NULL, NULL);
}

int bw_cumsum(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *g = as_input_dtype(S, n, G(0));
    SET(0, n->in_meta[0].ndim == 0 ? g : reversed_cumsum(S, g, ARG(1)));
    END;
}

/* A (k, k) bool matrix: m[i][j] = j > i (strict) or j >= i. */
static PyObject *tri_mask(Scratch *s, int64_t k, bool strict, EmDevice device) {
    int64_t sz[2] = {k, k};
    EmTensor *m = em_zeros(2, sz, EM_BOOL, em_cpu());
    if (!keep(s, (PyObject *)m)) return NULL;
    uint8_t *p = (uint8_t *)em_data(m);
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < k; j++) p[i * k + j] = strict ? j > i : j >= i;
    return keep(s, (PyObject *)em_to_device(m, device, false)); /* written on the host */
}

/* cumprod with zeros: d out_j / d x_k = prod_{i<k} x_i * prod_{k<i<=j} x_i
 * for j >= k, exact at zeros. Along the last dim (size k), row k of a
 * (k, k) matrix holds x_i for i > k (1 elsewhere): its cumprod gives the
 * second factor, its complement's prod the first. */
static PyObject *cumprod_zeros(Scratch *s, EmNode *n, PyObject *x, PyObject *g, int64_t dim) {
    int64_t k = em_meta_sizes(&n->in_meta[0])[dim];
    EmDevice dev = em_device((EmTensor *)x);
    PyObject *d = keep(s, PyLong_FromLongLong(dim)), *last = keep(s, PyLong_FromLong(-1));
    PyObject *two = keep(s, PyLong_FromLong(-2)), *one = keep(s, PyFloat_FromDouble(1.0));
    PyObject *zero = keep(s, PyFloat_FromDouble(0.0)), *after = tri_mask(s, k, true, dev);
    PyObject *xm = call(s, EM_OP_transpose, 3, x, d, last, NULL);
    PyObject *gm = call(s, EM_OP_transpose, 3, g, d, last, NULL);
    PyObject *rows = call(s, EM_OP_unsqueeze, 2, xm, two, NULL, NULL); /* (..., 1, k) */
    PyObject *tail = call(s, EM_OP_cumprod, 2, call(s, EM_OP_where, 3, after, rows, one, NULL), last, NULL, NULL);
    tail = call(s, EM_OP_where, 3, tri_mask(s, k, false, dev), tail, zero, NULL); /* only j >= k */
    PyObject *head = call(s, EM_OP_prod, 2,
                          call(s, EM_OP_where, 3, call(s, EM_OP_logical_not, 1, tri_mask(s, k, false, dev), NULL,
                                                       NULL, NULL), rows, one, NULL), last, NULL, NULL);
    PyObject *gsum = call(s, EM_OP_sum, 2, call(s, EM_OP_mul, 2, tail, call(s, EM_OP_unsqueeze, 2, gm, two,
                                                                             NULL, NULL), NULL, NULL), last,
                          NULL, NULL);
    return call(s, EM_OP_transpose, 3, call(s, EM_OP_mul, 2, head, gsum, NULL, NULL), d, last, NULL);
}

/* cumprod: reversed_cumsum(g * out) / x without zeros (torch) */
int bw_cumprod(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    PyObject *g = as_input_dtype(S, n, G(0));
    int dim = 0;
    if (m->ndim == 0 || em_wrap_dim(INT_ARG(1), m->ndim, &dim) < 0 || em_meta_sizes(m)[dim] <= 1) {
        if (PyErr_Occurred()) sc.failed = true;
        SET(0, g);
        END;
    }
    PyObject *x = IN(0);
    if (!x) END; /* released graph: the error is set */
    PyObject *zero = EQ(x, NUM(0.0));
    if (!sc.failed && !any_true(S, zero))
        SET(0, DIV(reversed_cumsum(S, MUL(OUT(0), g), ARG(1)), x));
    else
        SET(0, cumprod_zeros(S, n, x, g, dim));
    END;
}

/* -------------------------------------------------------- node names */

static const char *by_dim(EmCall *c, const char *all, const char *dims) { return c->args[1] == Py_None ? all : dims; }
const char *name_sum(EmCall *c, PyObject *r) { return by_dim(c, "SumBackward0", "SumBackward1"); }
const char *name_mean(EmCall *c, PyObject *r) { return by_dim(c, "MeanBackward0", "MeanBackward1"); }
const char *name_prod(EmCall *c, PyObject *r) { return by_dim(c, "ProdBackward0", "ProdBackward1"); }
const char *name_median(EmCall *c, PyObject *r) { return by_dim(c, "MedianBackward0", "MedianBackward1"); }
const char *name_nanmedian(EmCall *c, PyObject *r) {
    return by_dim(c, "NanmedianBackward0", "NanmedianBackward1");
}
const char *name_max(EmCall *c, PyObject *r) {
    if (c->args[3] != Py_None || em_is_tensor(c->args[1])) return "MaximumBackward0";
    return by_dim(c, "MaxBackward1", "MaxBackward0");
}
const char *name_min(EmCall *c, PyObject *r) {
    if (c->args[3] != Py_None || em_is_tensor(c->args[1])) return "MinimumBackward0";
    return by_dim(c, "MinBackward1", "MinBackward0");
}
/* sort(stable=...) is torch's other overload (an explicit stable=False
 * can't be told from the default here) */
const char *name_sort(EmCall *c, PyObject *r) { return c->args[3] == Py_True ? "SortBackward1" : "SortBackward0"; }


