/* nn.c — embedding and dropout: front-ends built from table ops (run with
 * grad mode off: the op's own node, with its own formula in
 * autograd/derivatives_nn.c, is what the graph records). */
#include "../ember.h"

/* the inner ops of a front-end: no nodes of their own */
static PyObject *inner(EmOpId id, int n, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *args[3] = {a, b, c};
    bool grad = em_grad_enabled();
    em_set_grad_enabled(false);
    PyObject *r = em_op(id, n, args);
    em_set_grad_enabled(grad);
    return r;
}

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): rows of
 * weight picked by indices, shaped indices.shape + (embedding_dim,) */
PyObject *em_impl_embedding(EmCall *c) {
    EmTensor *w = em_arg_tensor(c, 0), *idx = em_arg_tensor(c, 1);
    if (w->ndim != 2) {
        PyErr_SetString(PyExc_RuntimeError, "'weight' must be 2-D");
        return NULL;
    }
    if (idx->dtype != EM_INT64 && idx->dtype != EM_INT32) {
        PyErr_Format(PyExc_RuntimeError, "Expected tensor for argument #1 'indices' to have one of the following "
                     "scalar types: Long, Int; but got %s instead", em_dtype_name((EmDType)idx->dtype));
        return NULL;
    }
    PyObject *flat_shape = Py_BuildValue("(i)", -1), *flat = NULL, *dim0 = PyLong_FromLong(0), *rows = NULL,
             *shape = NULL, *res = NULL;
    if (!flat_shape || !dim0) goto done;
    if (!(flat = inner(EM_OP_reshape, 2, (PyObject *)idx, flat_shape, NULL))) goto done;
    if (!(rows = inner(EM_OP_index_select, 3, (PyObject *)w, dim0, flat))) goto done;
    if (idx->ndim + 1 > EM_MAX_DIMS) {
        PyErr_SetString(PyExc_RuntimeError, "embedding(): too many index dimensions");
        goto done;
    }
    int64_t sizes[EM_MAX_DIMS];
    for (int d = 0; d < idx->ndim; d++) sizes[d] = idx->sizes[d];
    sizes[idx->ndim] = w->sizes[1];
    if (!(shape = em_size_new(idx->ndim + 1, sizes))) goto done;
    res = inner(EM_OP_reshape, 2, rows, shape, NULL);
done:
    Py_XDECREF(flat_shape);
    Py_XDECREF(flat);
    Py_XDECREF(dim0);
    Py_XDECREF(rows);
    Py_XDECREF(shape);
    return res;
}

/* _native_dropout(input, p, train) -> (input * mask / (1 - p), mask): mask is
 * a bool tensor of Bernoulli(1 - p) draws (torch's native_dropout) */
PyObject *em_impl__native_dropout(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0);
    double p;
    bool train = true;
    if (em_arg_float(c, 1, &p) < 0 || (!em_arg_is_none(c, 2) && em_arg_bool(c, 2, &train) < 0)) return NULL;
    if (!em_is_float(in->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "result type Float can't be cast to the desired output type %s",
                     em_dtype_name((EmDType)in->dtype));
        return NULL;
    }
    if (p < 0 || p > 1) {
        PyErr_Format(PyExc_RuntimeError, "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    EmTensor *draw = NULL, *mask = NULL;
    PyObject *keep = NULL, *scale = NULL, *kept = NULL, *out = NULL, *res = NULL;
    if (!train) { /* evaluation: everything kept, unscaled */
        if (!(out = (PyObject *)em_clone(in)) || !(mask = em_empty(in->ndim, in->sizes, EM_BOOL, em_cpu()))) goto done;
        if (em_fill_(mask, (EmScalar){'b', {.i = 1}}) < 0) goto done;
        res = PyTuple_Pack(2, out, mask);
        goto done;
    }
    if (!(draw = em_empty(in->ndim, in->sizes, (EmDType)in->dtype, em_cpu()))) goto done;
    if (!(keep = PyFloat_FromDouble(1.0 - p)) || !(scale = PyFloat_FromDouble(p < 1 ? 1.0 / (1.0 - p) : 0.0)))
        goto done;
    PyObject *r = inner(EM_OP_bernoulli_, 2, (PyObject *)draw, keep, NULL);
    if (!r) goto done;
    Py_DECREF(r);
    if (!(kept = inner(EM_OP_mul, 2, (PyObject *)in, (PyObject *)draw, NULL))) goto done;
    if (!(out = inner(EM_OP_mul, 2, kept, scale, NULL))) goto done;
    if (!(mask = em_to_dtype(draw, EM_BOOL, false))) goto done;
    res = PyTuple_Pack(2, out, mask);
done:
    Py_XDECREF(draw);
    Py_XDECREF(mask);
    Py_XDECREF(keep);
    Py_XDECREF(scale);
    Py_XDECREF(kept);
    Py_XDECREF(out);
    return res;
}
