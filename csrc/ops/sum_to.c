/* sum_to.c — Tensor.sum_to_size: sum a tensor down to a shape it was
 * broadcast from (integer and bool sums give int64, as torch's), on t's
 * device (a GPU input runs the backend's sum: Note [CUDA reduce]). The
 * autograd engine uses it to undo broadcasting in gradients (bias gradients
 * of every linear layer), so it is one pass of the sum reduction. */
#include "../ember.h"
#include "../cpu/reduce.h"

extern const EmReduceKernels em_reduce_sum;

static int expandable_to(int nd, const int64_t *shape, const EmTensor *t) {
    if (nd > t->ndim) return 0;
    for (int i = 1; i <= nd; i++) {
        int64_t a = shape[nd - i], b = t->sizes[t->ndim - i];
        if (a != b && a != 1) return 0;
    }
    return 1;
}

EmTensor *em_sum_to(EmTensor *t, int nd, const int64_t *shape) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (!expandable_to(nd, shape, t)) {
        PyErr_Format(PyExc_RuntimeError, "size %s is not expandable to size %s",
                     em_shape_str(nd, shape, a, sizeof a), em_shape_str(t->ndim, t->sizes, b, sizeof b));
        return NULL;
    }
    if (nd == t->ndim && !memcmp(shape, t->sizes, nd * sizeof(int64_t))) return (EmTensor *)Py_NewRef(t);
    if (em_is_complex((EmDType)t->dtype)) { /* the sum of the float view (..., 2), read back as complex */
        if (nd + 1 > EM_MAX_DIMS - 1) {
            PyErr_Format(PyExc_RuntimeError, "sum_to_size: a complex tensor of %d dims is too deep", t->ndim);
            return NULL;
        }
        int64_t pairs[EM_MAX_DIMS];
        memcpy(pairs, shape, nd * sizeof(int64_t));
        pairs[nd] = 2;
        EmTensor *r = em_view_as_real(t), *s = r ? em_sum_to(r, nd + 1, pairs) : NULL, *z;
        Py_XDECREF(r);
        z = s ? em_view_as_complex(s) : NULL;
        Py_XDECREF(s);
        return z;
    }
    /* one reduction over the leading dims and the dims the target has as 1 */
    EmDType d = (EmDType)t->dtype, acc = em_is_float(d) ? d : EM_INT64;
    int lead = t->ndim - nd;
    uint64_t mask = 0;
    int64_t kept[EM_MAX_DIMS];
    for (int dd = 0; dd < t->ndim; dd++) {
        int td = dd - lead;
        bool reduced = td < 0 || (shape[td] == 1 && t->sizes[dd] != 1);
        if (reduced) mask |= (uint64_t)1 << dd;
        kept[dd] = reduced ? 1 : t->sizes[dd];
    }
    EmTensor *src = acc == d ? (EmTensor *)Py_NewRef(t) : em_to_dtype(t, acc, false);
    EmTensor *sum = src ? em_empty(t->ndim, kept, acc, em_device(t)) : NULL, *res = NULL;
    if (sum) {
        EmReduceConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.kernel = &em_reduce_sum.k[acc];
        cfg.in = src;
        cfg.mask = mask;
        cfg.out[0] = sum;
        cfg.params.divisor = 1.0;
        if (em_reduce_run(&cfg) == 0) res = em_reshape(sum, nd, kept + lead); /* drops the leading 1s */
    }
    Py_XDECREF(sum);
    Py_XDECREF(src);
    return res;
}

PyObject *em_impl_sum_to_size(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (em_parse_shape(c->args[1], "sum_to_size", &n, shape, false) < 0) return NULL;
    return (PyObject *)em_sum_to(em_arg_tensor(c, 0), n, shape);
}
