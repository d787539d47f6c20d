/* nn.c — embedding and dropout: front-ends built from table ops (run with
 * grad mode off: the op's own node, with its own formula in
 * autograd/derivatives_nn.c, is what the graph records). A GPU embedding
 * runs the backend's gather kernel (bounds checked on the device). */
#include "../ember.h"
#include "fused_gpu.h"
#include "device_slot.h"

/* the inner ops of a front-end: no nodes of their own */
static PyObject *inner(EmOpId id, int n, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *args[3] = {a, b, c};
    bool grad = em_grad_enabled();
    em_set_grad_enabled(false);
    PyObject *r = em_op(id, n, args);
    em_set_grad_enabled(grad);
    return r;
}

/* The GPU gather: floating weights only (others take the fallback). */
static PyObject *embedding_gpu(EmTensor *w, EmTensor *idx) {
    if (!em_cuda->embedding || !em_is_float(w->dtype)) return em_fused_no_kernel("embedding");
    if (idx->ndim + 1 > EM_MAX_DIMS) {
        PyErr_SetString(PyExc_RuntimeError, "embedding(): too many index dimensions");
        return NULL;
    }
    EmDevice dev = em_device(w);
    EmTensor *wc = NULL, *ic = NULL, *out = NULL;
    int64_t sizes[EM_MAX_DIMS], bad = 0;
    for (int d = 0; d < idx->ndim; d++) sizes[d] = idx->sizes[d];
    sizes[idx->ndim] = w->sizes[1];
    EM_TRY(wc = em_fused_operand(w, (EmDType)w->dtype, dev));
    EM_TRY(ic = em_fused_operand(idx, (EmDType)idx->dtype, dev));
    EM_TRY(out = em_empty(idx->ndim + 1, sizes, (EmDType)w->dtype, dev));
    if (out->numel > 0 || (idx->numel > 0 && w->sizes[1] == 0)) {
        int rc = em_cuda->embedding(dev.index, w->dtype, em_data(out), em_data(wc), em_data(ic), idx->dtype,
                                    idx->numel, w->sizes[0], w->sizes[1], &bad);
        if (rc == 1) PyErr_SetString(PyExc_IndexError, "index out of range in self");
        else if (rc < 0) em_cuda_error("embedding");
        EM_TRY(rc == 0);
    }
    Py_DECREF(wc);
    Py_DECREF(ic);
    return (PyObject *)out;
fail:
    Py_XDECREF(wc);
    Py_XDECREF(ic);
    Py_XDECREF(out);
    return NULL;
}

/* Embedding's weight gradient from the GPU kernel (fused_gpu.h): a new
 * reference, or NULL without an error when the backend has no kernel. */
PyObject *em_embedding_backward_gpu(EmTensor *g, EmTensor *idx, int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq) {
    if (!em_cuda || !em_cuda->embedding_backward || !em_is_float(g->dtype) || g->ndim < 1) return NULL;
    EmDevice dev = em_device(g);
    int64_t dim = g->sizes[g->ndim - 1], sizes[2] = {num_weights, dim};
    EmTensor *gc = NULL, *ic = NULL, *gw = NULL;
    EM_TRY(gc = em_fused_operand(g, (EmDType)g->dtype, dev));
    EM_TRY(ic = em_fused_operand(idx, (EmDType)idx->dtype, dev));
    EM_TRY(gw = em_empty(2, sizes, (EmDType)g->dtype, dev));
    if (gw->numel > 0 &&
        em_cuda->embedding_backward(dev.index, g->dtype, em_data(gw), em_data(gc), em_data(ic), idx->dtype, idx->numel,
                                    num_weights, dim, padding_idx, scale_grad_by_freq) < 0) {
        em_cuda_error("embedding_backward");
        goto fail;
    }
    Py_DECREF(gc);
    Py_DECREF(ic);
    return (PyObject *)gw;
fail:
    Py_XDECREF(gc);
    Py_XDECREF(ic);
    Py_XDECREF(gw);
    return NULL;
}

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): rows of
 * weight picked by indices, shaped indices.shape + (embedding_dim,) */
static PyObject *embedding_op(EmCall *c, bool gpu) {
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
    if (gpu) return embedding_gpu(w, idx);
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
EM_DEVICE_SLOTS(embedding, embedding_op)

/* Dropout on a GPU tensor (Note [CUDA nn kernels]): one kernel draws
 * the mask from the device generator's Philox stream, as bernoulli_(1 - p)
 * would on a tensor of the input's dtype, and writes (input * mask) * scale. */
static PyObject *dropout_gpu(EmTensor *in, double p) {
    if (!em_cuda->dropout) return em_fused_no_kernel("native_dropout");
    EmDevice dev = em_device(in);
    EmTensor *x = NULL, *out = NULL, *mask = NULL;
    PyObject *res = NULL;
    EM_TRY(x = em_contiguous(in));
    EM_TRY(out = em_empty(in->ndim, in->sizes, (EmDType)in->dtype, dev));
    EM_TRY(mask = em_empty(in->ndim, in->sizes, EM_BOOL, dev));
    uint64_t seed, offset;
    em_cuda_generator_next(dev.index, &seed, &offset); /* one launch's offset, as bernoulli_ */
    if (x->numel && em_cuda->dropout(dev.index, x->dtype, em_data(out), (bool *)em_data(mask), em_data(x),
                                     x->numel, 1.0 - p, p < 1 ? 1.0 / (1.0 - p) : 0.0, seed, offset) < 0) {
        em_cuda_error("dropout");
        goto fail;
    }
    res = PyTuple_Pack(2, (PyObject *)out, (PyObject *)mask);
fail:
    Py_XDECREF(x);
    Py_XDECREF(out);
    Py_XDECREF(mask);
    return res;
}

/* _native_dropout(input, p, train) -> (input * mask / (1 - p), mask): mask is
 * a bool tensor of Bernoulli(1 - p) draws (torch's native_dropout) */
static PyObject *native_dropout_op(EmCall *c, bool gpu) {
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
        char v[32]; /* PyErr_Format has no %g */
        snprintf(v, sizeof v, "%g", p);
        PyErr_Format(PyExc_RuntimeError, "dropout probability has to be between 0 and 1, but got %s", v);
        return NULL;
    }
    if (train && gpu) return dropout_gpu(in, p);
    EmTensor *draw = NULL, *mask = NULL;
    PyObject *keep = NULL, *scale = NULL, *kept = NULL, *out = NULL, *res = NULL;
    if (!train) { /* evaluation: everything kept, unscaled (on the input's device) */
        if (!(out = (PyObject *)em_clone(in)) || !(mask = em_empty(in->ndim, in->sizes, EM_BOOL, em_device(in))))
            goto done;
        if (em_fill_(mask, (EmScalar){'b', {.i = 1}}) < 0) goto done;
        res = PyTuple_Pack(2, out, mask);
        goto done;
    }
    /* the CPU, or meta (Note [meta device]: bernoulli_ and mul then give shapes only) */
    if (!(draw = em_empty(in->ndim, in->sizes, (EmDType)in->dtype, em_device(in)))) goto done;
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
EM_DEVICE_SLOTS(_native_dropout, native_dropout_op)
