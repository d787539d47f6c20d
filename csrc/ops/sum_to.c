/* sum_to.c — Tensor.sum_to_size: sum a tensor down to a shape it was
 * broadcast from (integer and bool sums give int64, as torch's). The
 * autograd engine uses it to undo broadcasting in gradients. Accumulates in
 * double (int64 for integers) over a plain multi-index walk. */
#include "../ember.h"

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
    if (em_check_cpu(t, "sum_to_size") < 0) return NULL;
    EmDType d = (EmDType)t->dtype, acc = em_is_float(d) ? EM_FLOAT64 : EM_INT64;
    EmTensor *sum = em_zeros(nd, shape, acc, em_cpu()), *res = NULL;
    EmTensor *src = em_to_dtype(t, acc, false);
    if (!sum || !src) goto done;
    /* map each source element to its target: leading dims and size-1 target dims collapse */
    int lead = t->ndim - nd;
    int64_t tstride[EM_MAX_DIMS], idx[EM_MAX_DIMS] = {0}, tgt = 0, srcoff = 0;
    for (int dd = 0; dd < t->ndim; dd++) {
        int td = dd - lead;
        tstride[dd] = td < 0 || shape[td] == 1 ? 0 : sum->strides[td];
    }
    char *sp = em_data(src);
    int isz = 8;
    for (int64_t n = 0; n < t->numel; n++) {
        if (acc == EM_FLOAT64)
            ((double *)em_data(sum))[tgt] += *(double *)(sp + srcoff * isz);
        else
            ((int64_t *)em_data(sum))[tgt] += *(int64_t *)(sp + srcoff * isz);
        for (int dd = t->ndim - 1; dd >= 0; dd--) { /* odometer step */
            if (++idx[dd] < t->sizes[dd]) {
                tgt += tstride[dd];
                srcoff += src->strides[dd];
                break;
            }
            tgt -= tstride[dd] * (t->sizes[dd] - 1);
            srcoff -= src->strides[dd] * (t->sizes[dd] - 1);
            idx[dd] = 0;
        }
    }
    res = em_to_dtype(sum, em_is_float(d) ? d : EM_INT64, false); /* integer sums are int64 */
done:
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
