/* linalg.c — matrix multiplication front-ends. For now `mm`: shape and dtype
 * checks, then em_gemm with operands passed as BLAS transposes when their
 * strides allow (a copy otherwise). Half types compute in float32; integer
 * dtypes in int64. */
#include "../ember.h"
#include "../cpu/blas.h"

/* A 2-D operand as (pointer, leading dim, transposed), copying to a
 * contiguous tensor in the compute dtype only when the layout needs it. */
typedef struct {
    EmTensor *t; /* owned reference actually read */
    bool trans;
    int64_t ld;
} GemmOperand;

static int gemm_operand(EmTensor *x, EmDType compute, GemmOperand *g) {
    int64_t r = x->sizes[0], c = x->sizes[1], s0 = x->strides[0], s1 = x->strides[1];
    if (x->dtype == compute) {
        if ((s1 == 1 || c == 1) && s0 >= (c > 1 ? c : 1)) {
            g->t = (EmTensor *)Py_NewRef(x);
            g->trans = false;
            g->ld = s0 > 0 ? s0 : 1;
            return 0;
        }
        if ((s0 == 1 || r == 1) && s1 >= (r > 1 ? r : 1)) {
            g->t = (EmTensor *)Py_NewRef(x);
            g->trans = true;
            g->ld = s1 > 0 ? s1 : 1;
            return 0;
        }
    }
    g->t = em_empty(2, x->sizes, compute, em_cpu());
    if (!g->t) return -1;
    if (em_copy_(g->t, (PyObject *)x) < 0) {
        Py_CLEAR(g->t);
        return -1;
    }
    g->trans = false;
    g->ld = c > 1 ? c : 1;
    return 0;
}

EmTensor *em_mm(EmTensor *a, EmTensor *b, EmTensor *out) {
    char sa[EM_SHAPE_BUF], sb[EM_SHAPE_BUF];
    GemmOperand ga = {NULL}, gb = {NULL};
    EmTensor *c = NULL, *res = NULL;
    EM_CHECK(a->ndim == 2, PyExc_RuntimeError, "self must be a matrix");
    EM_CHECK(b->ndim == 2, PyExc_RuntimeError, "mat2 must be a matrix");
    EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError,
             "expected m1 and m2 to have the same dtype, but got: %s != %s",
             em_dtype_name((EmDType)a->dtype), em_dtype_name((EmDType)b->dtype));
    EM_CHECK(a->sizes[1] == b->sizes[0], PyExc_RuntimeError,
             "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
             (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
             (long long)b->sizes[1]);
    EM_TRY(em_check_cpu(a, "mm") == 0 && em_check_cpu(b, "mm") == 0);
    EmDType d = (EmDType)a->dtype;
    EM_CHECK(d != EM_BOOL, PyExc_NotImplementedError, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
    EmDType compute = em_is_float(d) ? em_compute_dtype(d) : EM_INT64;
    int64_t m = a->sizes[0], k = a->sizes[1], n = b->sizes[1], shape[2] = {m, n};
    if (out) {
        EM_CHECK(out->dtype == d, PyExc_RuntimeError,
                 "Expected out tensor to have dtype %s, but got %s instead",
                 em_dtype_info[d].name, em_dtype_info[out->dtype].name);
        if (out->ndim != 2 || out->sizes[0] != m || out->sizes[1] != n)
            EM_TRY(em_tensor_resize(out, 2, shape, true) == 0);
        res = (EmTensor *)Py_NewRef(out);
    } else {
        res = em_empty(2, shape, d, em_cpu());
        EM_TRY(res);
    }
    if (m == 0 || n == 0) goto done;
    c = compute == d && em_is_contiguous(res) ? (EmTensor *)Py_NewRef(res)
                                               : em_empty(2, shape, compute, em_cpu());
    EM_TRY(c);
    if (k == 0) {
        memset(em_data(c), 0, (size_t)(m * n * em_itemsize(compute)));
    } else {
        EM_TRY(gemm_operand(a, compute, &ga) == 0 && gemm_operand(b, compute, &gb) == 0);
        bool big = m * n * k > (1 << 18);
        PyThreadState *ts = big ? PyEval_SaveThread() : NULL;
        em_gemm(compute, ga.trans, gb.trans, m, n, k, em_data(ga.t), ga.ld, em_data(gb.t), gb.ld,
                em_data(c), n);
        if (ts) PyEval_RestoreThread(ts);
    }
    if (c != res) EM_TRY(em_copy_(res, (PyObject *)c) == 0);
done:
    Py_XDECREF(c);
    Py_XDECREF(ga.t);
    Py_XDECREF(gb.t);
    return res;
fail:
    (void)sa;
    (void)sb;
    Py_XDECREF(c);
    Py_XDECREF(ga.t);
    Py_XDECREF(gb.t);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_mm(EmCall *c) {
    return (PyObject *)em_mm(em_arg_tensor(c, 0), em_arg_tensor(c, 1), c->out);
}
