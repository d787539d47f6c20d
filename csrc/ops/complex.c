/* complex.c — front-ends of the complex-number ops (ops.def, "complex"
 * block): view_as_real / view_as_complex and .real / .imag as views of the
 * same storage, conj (an eager copy: ember has no conj bit, so resolve_conj
 * and is_conj are trivially true to it), angle, complex() and polar(), and
 * the complex paths of abs, sum and mean, which work on the float view
 * (view_as_real) with the real kernels. Complex kernels are in cpu/binary.c
 * and cpu/unary.c. */
#include "../ember.h"
#include <math.h>

/* ------------------------------------------------------------------ views */

EmTensor *em_view_as_real(EmTensor *t) {
    EM_CHECK(em_is_complex(t->dtype), PyExc_RuntimeError,
             "view_as_real is only supported for complex tensors");
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    EM_CHECK(t->ndim < EM_MAX_DIMS, PyExc_RuntimeError, "view_as_real: a tensor of %d dims has no room for "
             "the real/imaginary dim", t->ndim);
    for (int d = 0; d < t->ndim; d++) {
        sizes[d] = t->sizes[d];
        strides[d] = 2 * t->strides[d];
    }
    sizes[t->ndim] = 2;
    strides[t->ndim] = 1;
    EmTensor *v = em_view_of(t, t->ndim + 1, sizes, strides, 2 * t->offset);
    if (v) v->dtype = (int8_t)em_complex_part(t->dtype);
    return v;
fail:
    return NULL;
}

EmTensor *em_view_as_complex(EmTensor *t) {
    /* torch also takes half (to complex32, which ember has no tensors of) */
    EM_CHECK(t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64, PyExc_NotImplementedError,
             "view_as_complex is only supported for float and double tensors, but got a tensor of "
             "scalar type: %s", em_dtype_name(t->dtype));
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError, "Input tensor must have one or more dimensions");
    EM_CHECK(t->sizes[t->ndim - 1] == 2, PyExc_RuntimeError, "Tensor must have a last dimension of size 2");
    EM_CHECK(t->strides[t->ndim - 1] == 1, PyExc_RuntimeError, "Tensor must have a last dimension with stride 1");
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    for (int d = 0; d + 1 < t->ndim; d++) {
        EM_CHECK(t->strides[d] % 2 == 0, PyExc_RuntimeError,
                 "Tensor must have a stride divisible by 2 for all but last dimension");
        sizes[d] = t->sizes[d];
        strides[d] = t->strides[d] / 2;
    }
    EM_CHECK(t->offset % 2 == 0, PyExc_RuntimeError, "Tensor must have a storage_offset divisible by 2");
    EmTensor *v = em_view_of(t, t->ndim - 1, sizes, strides, t->offset / 2);
    if (v) v->dtype = (int8_t)em_complex_of(t->dtype);
    return v;
fail:
    return NULL;
}

/* The real (part 0) or imaginary (part 1) plane of a complex tensor, a view. */
static EmTensor *complex_part(EmTensor *t, int part) {
    EmTensor *r = em_view_as_real(t);
    if (!r) return NULL;
    EmTensor *p = em_select(r, r->ndim - 1, part);
    Py_DECREF(r);
    return p;
}

PyObject *em_impl_view_as_real(EmCall *c) { return (PyObject *)em_view_as_real(em_arg_tensor(c, 0)); }
PyObject *em_impl_view_as_complex(EmCall *c) { return (PyObject *)em_view_as_complex(em_arg_tensor(c, 0)); }

PyObject *em_impl_real(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    /* torch: the real part of a real tensor is the tensor itself */
    if (!em_is_complex(t->dtype)) return Py_NewRef(t);
    return (PyObject *)complex_part(t, 0);
}

PyObject *em_impl_imag(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (!em_is_complex(t->dtype)) {
        PyErr_SetString(PyExc_RuntimeError, "imag is not implemented for tensors with non-complex dtypes.");
        return NULL;
    }
    return (PyObject *)complex_part(t, 1);
}

/* ------------------------------------------------------------- conj */

static PyObject *run_conj(EmCall *c, EmTensor *t) {
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(t);
    cfg.ninputs = 1;
    cfg.out = c->out;
    cfg.inplace = c->inplace;
    return (PyObject *)em_iter_run(&cfg);
}

/* conj: a new tensor for complex inputs (eager, no conj bit), the input
 * itself for real ones, as torch */
PyObject *em_impl_conj(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (!em_is_complex(t->dtype)) return Py_NewRef(t);
    return run_conj(c, t);
}

PyObject *em_impl_conj_physical(EmCall *c) { return run_conj(c, em_arg_tensor(c, 0)); }

/* ------------------------------------------------- abs, angle, sum, mean */

static PyObject *call2(EmOpId id, PyObject *a, PyObject *b) {
    PyObject *args[2] = {a, b};
    return em_op(id, 2, args);
}

/* Write r into out (out=): resized and cast as torch's out= does. */
static PyObject *into_out(PyObject *r, EmTensor *out) {
    if (!r || !out) return r;
    if (!em_can_cast((EmDType)((EmTensor *)r)->dtype, (EmDType)out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "result type %s can't be cast to the desired output type %s",
                     em_dtype_name(((EmTensor *)r)->dtype), em_dtype_name((EmDType)out->dtype));
        Py_DECREF(r);
        return NULL;
    }
    EmTensor *rt = (EmTensor *)r;
    if ((out->ndim != rt->ndim || memcmp(out->sizes, rt->sizes, rt->ndim * sizeof(int64_t))) &&
        em_tensor_resize(out, rt->ndim, rt->sizes, true) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    int rc = em_copy_(out, r);
    Py_DECREF(r);
    return rc < 0 ? NULL : Py_NewRef(out);
}

/* |z| = hypot(re, im) over the float view: a real result */
PyObject *em_complex_abs(EmTensor *t, EmTensor *out) {
    EmTensor *re = complex_part(t, 0), *im = re ? complex_part(t, 1) : NULL;
    PyObject *r = im ? call2(EM_OP_hypot, (PyObject *)re, (PyObject *)im) : NULL;
    Py_XDECREF(re);
    Py_XDECREF(im);
    return into_out(r, out);
}

PyObject *em_impl_angle(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    PyObject *r = NULL;
    if (em_is_complex(t->dtype)) {
        EmTensor *re = complex_part(t, 0), *im = re ? complex_part(t, 1) : NULL;
        r = im ? call2(EM_OP_atan2, (PyObject *)im, (PyObject *)re) : NULL;
        Py_XDECREF(re);
        Py_XDECREF(im);
    } else {
        /* torch: pi where x < 0, else 0; NaN stays NaN; integers give the default float */
        EmTensor *x = em_is_float(t->dtype) ? (EmTensor *)Py_NewRef(t) : em_to_dtype(t, em_default_float, false);
        PyObject *zero = PyLong_FromLong(0), *pi = PyFloat_FromDouble(M_PI);
        PyObject *neg = x && zero ? call2(EM_OP_lt, (PyObject *)x, zero) : NULL;
        PyObject *scaled = neg && pi ? call2(EM_OP_mul, neg, pi) : NULL;
        PyObject *typed = scaled ? (PyObject *)em_to_dtype((EmTensor *)scaled, (EmDType)x->dtype, false) : NULL;
        PyObject *nan = x ? em_op(EM_OP_isnan, 1, (PyObject *[]){(PyObject *)x}) : NULL;
        if (nan && typed) r = em_op(EM_OP_where, 3, (PyObject *[]){nan, (PyObject *)x, typed});
        Py_XDECREF(x);
        Py_XDECREF(zero);
        Py_XDECREF(pi);
        Py_XDECREF(neg);
        Py_XDECREF(scaled);
        Py_XDECREF(typed);
        Py_XDECREF(nan);
    }
    return into_out(r, c->out);
}

/* sum / mean of a complex tensor: the same reduction of its float view,
 * whose last dim (the two parts) is kept. Signature (input, dim, keepdim,
 * *, dtype, out). */
PyObject *em_complex_sum(EmCall *c, bool mean) {
    EmTensor *t = em_arg_tensor(c, 0);
    EmDType dt;
    int has_dt = em_arg_dtype(c, 3, &dt);
    if (has_dt < 0) return NULL;
    if (has_dt == 0 && !em_is_complex(dt)) {
        PyErr_Format(PyExc_RuntimeError, "%s: a complex input cannot be reduced into dtype %s",
                     c->def->name, em_dtype_name(dt));
        return NULL;
    }
    PyObject *dims = NULL, *real = NULL, *r = NULL, *res = NULL;
    int64_t d[EM_MAX_DIMS];
    int n = 0;
    if (c->args[1] == Py_None) {
        for (int i = 0; i < t->ndim; i++) d[n++] = i;
    } else {
        if (em_arg_intlist(c, 1, &n, d) < 0) return NULL;
        for (int i = 0; i < n; i++) {
            int64_t lo = t->ndim ? -t->ndim : -1, hi = t->ndim ? t->ndim - 1 : 0;
            if (d[i] < lo || d[i] > hi) {
                PyErr_Format(PyExc_IndexError,
                             "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                             (long long)lo, (long long)hi, (long long)d[i]);
                return NULL;
            }
            if (d[i] < 0) d[i] += t->ndim ? t->ndim : 1;
        }
        if (t->ndim == 0) n = 0; /* dim 0 of a 0-d tensor: nothing to reduce */
    }
    if (n == 0) /* nothing reduced (a 0-d input): the values themselves */
        return into_out((PyObject *)em_to_dtype(t, has_dt == 0 ? dt : (EmDType)t->dtype, true), c->out);
    dims = PyTuple_New(n);
    if (!dims) return NULL;
    for (int i = 0; i < n; i++) PyTuple_SET_ITEM(dims, i, PyLong_FromLongLong(d[i]));
    real = (PyObject *)em_view_as_real(t);
    if (real) {
        PyObject *args[3] = {real, dims, c->args[2]};
        r = em_op(mean ? EM_OP_mean : EM_OP_sum, 3, args);
    }
    if (r) {
        /* the reduction's result is dense, so it reinterprets as complex */
        EmTensor *rc = em_is_contiguous((EmTensor *)r) ? (EmTensor *)Py_NewRef(r)
                                                       : em_to_dtype((EmTensor *)r, ((EmTensor *)r)->dtype, true);
        if (rc) res = (PyObject *)em_view_as_complex(rc);
        Py_XDECREF(rc);
    }
    if (res && has_dt == 0 && dt != ((EmTensor *)res)->dtype)
        Py_SETREF(res, (PyObject *)em_to_dtype((EmTensor *)res, dt, false));
    Py_DECREF(dims);
    Py_XDECREF(real);
    Py_XDECREF(r);
    return into_out(res, c->out);
}

/* ------------------------------------------------------ complex, polar */

static PyObject *from_parts(EmCall *c) {
    EmTensor *a = em_arg_tensor(c, 0), *b = em_arg_tensor(c, 1);
    EmDType da = (EmDType)a->dtype, db = (EmDType)b->dtype;
    bool ok = (da == EM_FLOAT32 || da == EM_FLOAT64) && (db == EM_FLOAT32 || db == EM_FLOAT64);
    if (!ok) {
        /* torch also takes Half (complex32): ember has no complex32 tensors */
        PyErr_Format(PyExc_NotImplementedError, "Expected both inputs to be Float or Double tensors but got %s and %s",
                     em_dtype_name(da), em_dtype_name(db));
        return NULL;
    }
    if (da != db) {
        PyErr_Format(PyExc_RuntimeError, "Expected object of scalar type %s but got scalar type %s for "
                     "second argument", em_dtype_name(da), em_dtype_name(db));
        return NULL;
    }
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, EM_PROMOTE_NONE);
    cfg.common_dtype = em_complex_of(da); /* the real inputs are read as complex */
    cfg.inputs[0] = em_opnd(a);
    cfg.inputs[1] = em_opnd(b);
    cfg.ninputs = 2;
    cfg.out = c->out;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_complex(EmCall *c) { return from_parts(c); }
PyObject *em_impl_polar(EmCall *c) { return from_parts(c); }
