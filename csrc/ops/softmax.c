/* softmax.c — front-ends of softmax, log_softmax and their fused backward
 * (_softmax_backward_data). The input is cast to dtype= when given (torch's
 * rule), and the kernel (cpu/softmax.c) sees a contiguous [outer, n, inner]
 * block (Note [softmax layout]) in that dtype; half types compute in float32
 * a block at a time there (Note [softmax of half types]).
 * GPU tensors go to the backend's fused kernels in their own dtype (halves
 * compute in float32 there), or raise EmNoCudaKernel before allocating so
 * the call takes Note [CUDA fallback]. */
#include "../cpu/softmax.h"
#include "fused_gpu.h"
#include "device_slot.h"

/* outer, n, inner of a contiguous t around dim (a 0-d tensor is one row of 1) */
static void split_dims(const EmTensor *t, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *n = 1;
    *inner = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (d < dim) *outer *= t->sizes[d];
        else if (d == dim) *n = t->sizes[d];
        else *inner *= t->sizes[d];
    }
}

/* A contiguous copy (or t itself) in the kernel's dtype. */
static EmTensor *kernel_input(EmTensor *t, EmDType cdt) {
    EmTensor *x = em_to_dtype(t, cdt, false), *r;
    if (!x) return NULL;
    r = em_contiguous(x);
    Py_DECREF(x);
    return r;
}

/* The GPU branch: the kernel reads and writes `dtype` itself. */
static PyObject *softmax_gpu(EmTensor *in, int dim, EmDType dtype, bool lg) {
    if (!em_cuda->softmax) return em_fused_no_kernel(lg ? "log_softmax" : "softmax");
    EmTensor *x = NULL, *y = NULL;
    EM_TRY(x = kernel_input(in, dtype));
    EM_TRY(y = em_empty(x->ndim, x->sizes, dtype, em_device(x)));
    if (x->numel > 0) {
        int64_t outer, n, inner;
        split_dims(x, dim, &outer, &n, &inner);
        if (em_cuda->softmax(em_device(x).index, dtype, em_data(y), em_data(x), outer, n, inner, lg) < 0) {
            em_cuda_error(lg ? "log_softmax" : "softmax");
            goto fail;
        }
    }
    Py_DECREF(x);
    return (PyObject *)y;
fail:
    Py_XDECREF(x);
    Py_XDECREF(y);
    return NULL;
}

static PyObject *softmax_common(EmCall *c, bool gpu, bool lg) {
    const char *name = lg ? "log_softmax" : "softmax";
    EmTensor *in = em_arg_tensor(c, 0), *x = NULL, *y = NULL;
    int64_t dim64;
    int dim;
    EmDType dtype;
    int given = em_arg_dtype(c, 2, &dtype);
    if (given < 0 || em_arg_int(c, 1, &dim64) < 0) return NULL;
    if (given == 1) dtype = (EmDType)in->dtype;
    /* torch checks the dim first: a bad dim on an int tensor is an IndexError */
    if (em_wrap_dim(dim64, in->ndim > 0 ? in->ndim : 1, &dim) < 0) return NULL;
    if (!em_is_real_float(dtype)) { /* complex too: torch's CPU kernels are real */
        PyErr_Format(PyExc_NotImplementedError, "\"%s_lastdim_kernel_impl\" not implemented for '%s'", name,
                     em_dtype_name(dtype));
        return NULL;
    }
    if (gpu) return softmax_gpu(in, dim, dtype, lg);
    if (em_is_meta(in)) return (PyObject *)em_empty(in->ndim, in->sizes, dtype, em_meta()); /* Note [meta device] */
    if (em_check_cpu(in, name) < 0) return NULL;
    /* half types stay half: the kernel widens a block at a time (Note [softmax of half types]) */
    EM_TRY(x = kernel_input(in, dtype));
    EM_TRY(y = em_empty(x->ndim, x->sizes, dtype, em_cpu()));
    if (x->numel > 0) {
        int64_t outer, n, inner;
        int rc;
        split_dims(x, dim, &outer, &n, &inner);
        const char *xd = em_data(x);
        char *yd = em_data(y);
        Py_BEGIN_ALLOW_THREADS
        rc = em_cpu_softmax(xd, yd, dtype, outer, n, inner, lg);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    Py_DECREF(x);
    return (PyObject *)y;
fail:
    Py_XDECREF(x);
    Py_XDECREF(y);
    return NULL;
}

static PyObject *softmax_op(EmCall *c, bool gpu) { return softmax_common(c, gpu, false); }
static PyObject *log_softmax_op(EmCall *c, bool gpu) { return softmax_common(c, gpu, true); }
EM_DEVICE_SLOTS(softmax, softmax_op)
EM_DEVICE_SLOTS(log_softmax, log_softmax_op)

/* _softmax_backward_data(grad_output, output, dim, log): the gradient of
 * softmax / log_softmax from its output, in output's dtype. */
static PyObject *softmax_backward_data_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *out = em_arg_tensor(c, 1), *g = NULL, *y = NULL, *gi = NULL;
    int64_t dim64;
    bool lg;
    int dim;
    char b1[EM_SHAPE_BUF], b2[EM_SHAPE_BUF];
    if (em_arg_int(c, 2, &dim64) < 0 || em_arg_bool(c, 3, &lg) < 0) return NULL;
    bool same = go->ndim == out->ndim;
    for (int d = 0; same && d < go->ndim; d++) same = go->sizes[d] == out->sizes[d];
    if (!same) {
        PyErr_Format(PyExc_RuntimeError, "_softmax_backward_data: grad_output of shape %s does not match output of shape %s",
                     em_shape_str(go->ndim, go->sizes, b1, sizeof b1), em_shape_str(out->ndim, out->sizes, b2, sizeof b2));
        return NULL;
    }
    if (!em_is_real_float(out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "_softmax_backward_data: expected a floating point output, got %s",
                     em_dtype_name((EmDType)out->dtype));
        return NULL;
    }
    if (em_wrap_dim(dim64, out->ndim > 0 ? out->ndim : 1, &dim) < 0) return NULL;
    if (gpu) { /* GPU: in output's own dtype */
        if (!em_cuda->softmax_backward) return em_fused_no_kernel("_softmax_backward_data");
        EmDType dt = (EmDType)out->dtype;
        EM_TRY(g = em_fused_operand(go, dt, em_device(out)));
        EM_TRY(y = kernel_input(out, dt));
        EM_TRY(gi = em_empty(y->ndim, y->sizes, dt, em_device(y)));
        if (y->numel > 0) {
            int64_t outer, n, inner;
            split_dims(y, dim, &outer, &n, &inner);
            if (em_cuda->softmax_backward(em_device(y).index, dt, em_data(gi), em_data(g), em_data(y), outer,
                                          n, inner, lg) < 0) {
                em_cuda_error("_softmax_backward_data");
                goto fail;
            }
        }
        Py_DECREF(g);
        Py_DECREF(y);
        return (PyObject *)gi;
    }
    if (em_is_meta(out)) /* Note [meta device] */
        return (PyObject *)em_empty(out->ndim, out->sizes, (EmDType)out->dtype, em_meta());
    if (em_check_cpu(go, "_softmax_backward_data") < 0 || em_check_cpu(out, "_softmax_backward_data") < 0)
        return NULL;
    EmDType dt = (EmDType)out->dtype;
    EM_TRY(g = kernel_input(go, dt));
    EM_TRY(y = kernel_input(out, dt));
    EM_TRY(gi = em_empty(y->ndim, y->sizes, dt, em_cpu()));
    if (y->numel > 0) {
        int64_t outer, n, inner;
        int rc;
        split_dims(y, dim, &outer, &n, &inner);
        const char *gd = em_data(g), *yd = em_data(y);
        char *gid = em_data(gi);
        Py_BEGIN_ALLOW_THREADS
        rc = em_cpu_softmax_backward(gd, yd, gid, dt, outer, n, inner, lg);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    Py_DECREF(g);
    Py_DECREF(y);
    return (PyObject *)gi;
fail:
    Py_XDECREF(g);
    Py_XDECREF(y);
    Py_XDECREF(gi);
    return NULL;
}
EM_DEVICE_SLOTS(softmax_backward_data, softmax_backward_data_op)
