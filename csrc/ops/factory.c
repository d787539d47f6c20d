/* factory.c — functions that create tensors: zeros/ones/full/empty and their
 * _like and new_ forms, arange, linspace, logspace, eye, tensor, as_tensor,
 * from_numpy, from_dlpack. They bind arguments with the op table's
 * signature binder (em_register_functions) but are not ops: nothing flows
 * into them, so they have no kernels and no backward.
 *
 * On a GPU (device='cuda', a GPU out=, or a GPU input of _like / new_):
 * fills go through em_fill_ (the strided copy of one value), eye fills its
 * diagonal view, and arange / linspace / logspace run the backend's fill
 * kernels (Note [CUDA shape kernels]), which compute each element by the
 * formulas below. tensor / as_tensor / scalar_tensor and tril_indices /
 * triu_indices build on the host and copy once to the device. */
#include "../ember.h"
#include "fused_gpu.h"
#include <math.h>

/* --------------------------------------------------------- shared parts */

int em_factory_opts(EmCall *c, EmFactoryOpts *o) {
    o->dtype = EM_AUTO;
    o->requires_grad = false;
    PyObject *d = em_arg_named(c, "dtype");
    if (d && d != Py_None) {
        EmDType x;
        if (em_dtype_from_py(d, &x) < 0) return -1;
        o->dtype = x;
    }
    PyObject *dev = em_arg_named(c, "device");
    if (dev && dev != Py_None) {
        EmDevice dv;
        if (em_device_from_py(dev, &dv) < 0) return -1;
        if (dv.type != EM_CPU && em_device_unavailable(dv) < 0) return -1; /* not dispatch: is it there */
    }
    PyObject *rg = em_arg_named(c, "requires_grad");
    o->requires_grad = rg == Py_True;
    return 0;
}

EmTensor *em_factory_out(EmCall *c, int ndim, const int64_t *shape, EmDType dtype) {
    if (!c->out) { /* on device= (the dispatcher runs only some factories natively on a GPU) */
        PyObject *dev = em_arg_named(c, "device");
        EmDevice d = em_cpu();
        if (dev && dev != Py_None && (em_device_from_py(dev, &d) < 0 || em_cuda_resolve(&d) < 0)) return NULL;
        return em_empty(ndim, shape, dtype, d.type == EM_CPU ? em_cpu() : d); /* not dispatch: device= */
    }
    if (c->out->dtype != dtype) {
        PyErr_Format(PyExc_RuntimeError, "dtype %s does not match dtype of out parameter (%s)",
                     em_dtype_name(dtype), em_dtype_name((EmDType)c->out->dtype));
        return NULL;
    }
    PyObject *dev = em_arg_named(c, "device");
    EmDevice d;
    if (dev && dev != Py_None) { /* out= decides where; a device= must agree with it */
        char a[32], b[32];
        if (em_device_from_py(dev, &d) < 0 ||
            (d.type == EM_CUDA && em_cuda_resolve(&d) < 0)) /* not dispatch: device= */
            return NULL;
        if (!em_device_eq(d, em_device(c->out))) {
            PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have device %s, but got %s instead",
                         em_device_str(d, a, sizeof a), em_device_str(em_device(c->out), b, sizeof b));
            return NULL;
        }
    }
    bool same = c->out->ndim == ndim && !memcmp(c->out->sizes, shape, ndim * sizeof(int64_t));
    if (!same && em_tensor_resize(c->out, ndim, shape, true) < 0) return NULL;
    em_bump_version(c->out);
    return (EmTensor *)Py_NewRef(c->out);
}

/* The device= argument, or `dflt` when absent or None. 0 / -1. */
static int device_or(EmCall *c, EmDevice dflt, EmDevice *out) {
    PyObject *dev = em_arg_named(c, "device");
    *out = dflt;
    if (!dev || dev == Py_None) return 0;
    return em_device_from_py(dev, out) < 0 || em_cuda_resolve(out) < 0 ? -1 : 0;
}

EmTensor *em_factory_like(EmCall *c, EmTensor *src, EmDType dtype) {
    EmDevice d;
    EmMemoryFormat f;
    if (device_or(c, em_device(src), &d) < 0 ||
        em_memory_format_from_py(em_arg_named(c, "memory_format"), EM_PRESERVE_FORMAT, &f) < 0)
        return NULL;
    return em_empty_format(src, dtype, d, f);
}

PyObject *em_factory_finish(EmTensor *t, const EmFactoryOpts *o) {
    if (t && o->requires_grad) {
        if (!em_is_float(t->dtype)) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_RuntimeError,
                            "Only Tensors of floating point and complex dtype can require gradients");
            return NULL;
        }
        t->requires_grad = true;
    }
    return (PyObject *)t;
}

/* dtype of full()/new_full() from the fill value when not given */
static EmDType scalar_default_dtype(EmScalar s) { return em_scalar_dtype(s); }

/* A filled tensor of `shape`: the body of zeros/ones/full and their forms. */
static PyObject *filled(EmCall *c, int ndim, const int64_t *shape, EmScalar value, EmDType dflt) {
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    if (o.dtype == EM_AUTO) o.dtype = (int)dflt;
    EmTensor *t = em_factory_out(c, ndim, shape, (EmDType)o.dtype);
    if (!t) return NULL;
    if (em_fill_(t, value) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return em_factory_finish(t, &o);
}

static const EmScalar ZERO = {'i', {0}}, ONE = {'i', {1}};

/* ------------------------------------------------ zeros / ones / full */

static int size_arg(EmCall *c, int i, int *n, int64_t *shape) {
    return em_parse_shape(c->args[i], c->def->name, n, shape, false);
}

static PyObject *f_zeros(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (size_arg(c, 0, &n, shape) < 0) return NULL;
    return filled(c, n, shape, ZERO, em_default_float);
}

static PyObject *f_ones(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (size_arg(c, 0, &n, shape) < 0) return NULL;
    return filled(c, n, shape, ONE, em_default_float);
}

static PyObject *f_full(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    EmScalar v;
    if (size_arg(c, 0, &n, shape) < 0 || em_arg_scalar(c, 1, &v) < 0) return NULL;
    return filled(c, n, shape, v, scalar_default_dtype(v));
}

static PyObject *f_empty(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    EmFactoryOpts o;
    if (size_arg(c, 0, &n, shape) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    EmDType d = o.dtype == EM_AUTO ? em_default_float : (EmDType)o.dtype;
    EmMemoryFormat f;
    if (em_memory_format_from_py(em_arg_named(c, "memory_format"), EM_CONTIGUOUS_FORMAT, &f) < 0) return NULL;
    if (f == EM_PRESERVE_FORMAT) {
        PyErr_SetString(PyExc_RuntimeError, "preserve memory format is unsupported by empty");
        return NULL;
    }
    if (f != EM_CONTIGUOUS_FORMAT && !c->out) { /* channels-last strides */
        int64_t strides[EM_MAX_DIMS];
        EmDevice dev;
        if (em_memory_format_strides(f, n, shape, strides) < 0 || device_or(c, em_cpu(), &dev) < 0) return NULL;
        return em_factory_finish(em_empty_strided(n, shape, strides, d, dev), &o);
    }
    return em_factory_finish(em_factory_out(c, n, shape, d), &o);
}

static PyObject *f_empty_strided(EmCall *c) {
    int n, ns;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    EmFactoryOpts o;
    if (size_arg(c, 0, &n, shape) < 0 || em_arg_intlist(c, 1, &ns, strides) < 0 ||
        em_factory_opts(c, &o) < 0)
        return NULL;
    if (n != ns) {
        PyErr_Format(PyExc_RuntimeError, "mismatch in length of strides and shape");
        return NULL;
    }
    EmDType d = o.dtype == EM_AUTO ? em_default_float : (EmDType)o.dtype;
    EmDevice dev;
    if (device_or(c, em_cpu(), &dev) < 0) return NULL;
    return em_factory_finish(em_empty_strided(n, shape, strides, d, dev), &o);
}

/* _like: shape, dtype (and layout) of the input unless told otherwise */
static PyObject *like(EmCall *c, bool fill, EmScalar v) {
    EmTensor *src = em_arg_tensor(c, 0);
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : (EmDType)src->dtype;
    EmTensor *t = em_factory_like(c, src, d);
    if (t && fill && em_fill_(t, v) < 0) Py_CLEAR(t);
    return em_factory_finish(t, &o);
}
static PyObject *f_zeros_like(EmCall *c) { return like(c, true, ZERO); }
static PyObject *f_ones_like(EmCall *c) { return like(c, true, ONE); }
static PyObject *f_empty_like(EmCall *c) { return like(c, false, ZERO); }
static PyObject *f_full_like(EmCall *c) {
    EmScalar v;
    if (em_arg_scalar(c, 1, &v) < 0) return NULL;
    return like(c, true, v);
}

/* new_*: dtype of self unless told otherwise (ops.def rows, methods only) */
static PyObject *new_filled(EmCall *c, bool fill, EmScalar v) {
    EmTensor *self = em_arg_tensor(c, 0);
    int n;
    int64_t shape[EM_MAX_DIMS];
    EmFactoryOpts o;
    if (size_arg(c, 1, &n, shape) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : (EmDType)self->dtype;
    EmDevice dev;
    if (device_or(c, em_device(self), &dev) < 0) return NULL;
    EmTensor *t = em_empty(n, shape, d, dev);
    if (t && fill && em_fill_(t, v) < 0) Py_CLEAR(t);
    return em_factory_finish(t, &o);
}
PyObject *em_impl_new_zeros(EmCall *c) { return new_filled(c, true, ZERO); }
PyObject *em_impl_new_ones(EmCall *c) { return new_filled(c, true, ONE); }
PyObject *em_impl_new_empty(EmCall *c) { return new_filled(c, false, ZERO); }
PyObject *em_impl_new_full(EmCall *c) {
    EmScalar v;
    if (em_arg_scalar(c, 2, &v) < 0) return NULL;
    return new_filled(c, true, v);
}
PyObject *em_impl_new_tensor(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0);
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    EmDevice dev;
    if (device_or(c, em_device(self), &dev) < 0) return NULL;
    EmTensor *t = em_tensor_from_data(c->args[1], o.dtype != EM_AUTO ? o.dtype : self->dtype);
    if (t && dev.type != EM_CPU) /* not dispatch: the data was read on the host */
        Py_SETREF(t, em_to_device(t, dev, false));
    return em_factory_finish(t, &o);
}

/* ------------------------------------------------------------ ranges */

static bool scalar_is_float(EmScalar s) { return s.kind == 'f'; }

static PyObject *arange_body(EmCall *c, bool gpu) {
    EmScalar start, end, step = ONE;
    EmFactoryOpts o;
    if (em_arg_scalar(c, 0, &start) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    if (em_arg_is_none(c, 1)) {
        end = start;
        start = ZERO;
    } else if (em_arg_scalar(c, 1, &end) < 0) {
        return NULL;
    }
    if (!em_arg_is_none(c, 2) && em_arg_scalar(c, 2, &step) < 0) return NULL;
    bool any_float = scalar_is_float(start) || scalar_is_float(end) || scalar_is_float(step);
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : any_float ? em_default_float : EM_INT64;
    if (d == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "\"arange_cpu\" not implemented for 'Bool'");
        return NULL;
    }
    double xs = em_scalar_to_double(start), xe = em_scalar_to_double(end),
           xt = em_scalar_to_double(step);
    if (xt == 0) {
        PyErr_SetString(PyExc_RuntimeError, "step must be nonzero");
        return NULL;
    }
    if (!isfinite(xs) || !isfinite(xe)) {
        PyErr_Format(PyExc_RuntimeError, "unsupported range: %R -> %R", c->args[0], c->args[1]);
        return NULL;
    }
    if (!((xt > 0 && xe >= xs) || (xt < 0 && xe <= xs))) {
        PyErr_SetString(PyExc_RuntimeError, "upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    int64_t n;
    bool int_math = !any_float && !em_is_float(d);
    if (gpu && (!em_cuda_get() || !em_cuda->arange_fill)) return em_cuda ? em_fused_no_kernel("arange") : NULL;
    if (int_math) {
        int64_t s = start.v.i, e = end.v.i, st = step.v.i, sgn = st > 0 ? 1 : -1;
        n = (e - s + st - sgn) / st;
    } else {
        double nd = ceil((xe - xs) / xt);
        if (!(nd >= 0 && nd < 9.2e18)) {
            PyErr_Format(PyExc_RuntimeError, "invalid size, possible overflow?");
            return NULL;
        }
        n = (int64_t)nd;
    }
    EmTensor *t = em_factory_out(c, 1, &n, d);
    if (!t) return NULL;
    if (em_is_meta(t)) return em_factory_finish(t, &o); /* Note [meta device] */
    if (gpu) {
        if (em_cuda->arange_fill(em_device(t).index, d, em_data(t), n, t->strides[0], int_math, start.v.i,
                                 step.v.i, xs, xt) < 0) {
            em_cuda_error("arange");
            Py_CLEAR(t);
        }
        return em_factory_finish(t, &o);
    }
    char *p = em_data(t);
    int isz = em_itemsize(d);
    int64_t es = t->strides[0] * isz;
    for (int64_t i = 0; i < n; i++) {
        EmScalar v;
        if (int_math) {
            v.kind = 'i';
            v.v.i = start.v.i + i * step.v.i;
        } else {
            v.kind = 'f';
            v.v.f = xs + (double)i * xt;
        }
        em_scalar_store(v, d, p + i * es);
    }
    return em_factory_finish(t, &o);
}
static PyObject *f_arange(EmCall *c) { return arange_body(c, false); }
static PyObject *f_arange_cuda(EmCall *c) { return arange_body(c, true); }

/* torch's symmetric linspace: the first half counts up from start, the
 * second half down from end, so both endpoints are exact. */
/* torch converts start and end to an integer result dtype with its overflow
 * check (NaN, infinities and values outside [min, max + 1) refused) before
 * any work: linspace(-inf, 1, 2**31, dtype=uint8) fails at once. */
static int check_integer_endpoints(EmDType d, double xs, double xe) {
    static const struct { EmDType d; double lo, hi; const char *name; } ints[] = {
        {EM_UINT8, 0.0, 256.0, "uint8_t"}, {EM_INT8, -128.0, 128.0, "int8_t"},
        {EM_INT16, -32768.0, 32768.0, "int16_t"}, {EM_INT32, -2147483648.0, 2147483648.0, "int"},
        {EM_INT64, -9223372036854775808.0, 9223372036854775808.0, "int64_t"}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i].d != d) continue;
        if (!(xs >= ints[i].lo && xs < ints[i].hi) || !(xe >= ints[i].lo && xe < ints[i].hi)) {
            PyErr_Format(PyExc_RuntimeError, "value cannot be converted to type %s without overflow", ints[i].name);
            return -1;
        }
    }
    return 0;
}

static PyObject *linspace_impl(EmCall *c, bool log, double base, bool gpu) {
    double xs, xe;
    int64_t steps;
    EmFactoryOpts o;
    if (em_arg_float(c, 0, &xs) < 0 || em_arg_float(c, 1, &xe) < 0 || em_arg_int(c, 2, &steps) < 0 ||
        em_factory_opts(c, &o) < 0)
        return NULL;
    if (steps < 0) {
        PyErr_SetString(PyExc_RuntimeError, "number of steps must be non-negative");
        return NULL;
    }
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : em_default_float;
    if (d == EM_BOOL) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for 'Bool'", log ? "logspace_cpu" : "linspace_cpu");
        return NULL;
    }
    if (check_integer_endpoints(d, xs, xe) < 0) return NULL;
    if (gpu && (!em_cuda_get() || !em_cuda->linspace_fill))
        return em_cuda ? em_fused_no_kernel(log ? "logspace" : "linspace") : NULL;
    EmTensor *t = em_factory_out(c, 1, &steps, d);
    if (!t) return NULL;
    if (em_is_meta(t)) return em_factory_finish(t, &o); /* Note [meta device] */
    if (gpu) {
        if (em_cuda->linspace_fill(em_device(t).index, d, em_data(t), steps, t->strides[0], xs, xe, log, base) < 0) {
            em_cuda_error(log ? "logspace" : "linspace");
            Py_CLEAR(t);
        }
        return em_factory_finish(t, &o);
    }
    if (o.requires_grad && !em_is_float(d)) return em_factory_finish(t, &o); /* its error, before filling steps */
    char *p = em_data(t);
    int64_t es = t->strides[0] * em_itemsize(d), half = steps / 2;
    bool single = d == EM_FLOAT32 || d == EM_FLOAT16 || d == EM_BFLOAT16;
    for (int64_t i = 0; i < steps; i++) {
        EmScalar v = {'f', {0}};
        if (steps == 1) {
            v.v.f = xs;
        } else if (single) { /* float arithmetic, as torch does for float32 */
            float fs = (float)xs, fe = (float)xe, st = (fe - fs) / (float)(steps - 1);
            v.v.f = i < half ? fs + st * (float)i : fe - st * (float)(steps - i - 1);
        } else {
            double st = (xe - xs) / (double)(steps - 1);
            v.v.f = i < half ? xs + st * (double)i : xe - st * (double)(steps - i - 1);
        }
        if (log) v.v.f = pow(base, v.v.f);
        em_scalar_store(v, d, p + i * es);
    }
    return em_factory_finish(t, &o);
}
static PyObject *f_linspace(EmCall *c) { return linspace_impl(c, false, 0, false); }
static PyObject *f_linspace_cuda(EmCall *c) { return linspace_impl(c, false, 0, true); }
static PyObject *logspace_body(EmCall *c, bool gpu) {
    double base;
    if (em_arg_float(c, 3, &base) < 0) return NULL;
    return linspace_impl(c, true, base, gpu);
}
static PyObject *f_logspace(EmCall *c) { return logspace_body(c, false); }
static PyObject *f_logspace_cuda(EmCall *c) { return logspace_body(c, true); }

static PyObject *f_eye(EmCall *c) {
    int64_t n, m;
    EmFactoryOpts o;
    if (em_arg_int(c, 0, &n) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    m = n;
    if (!em_arg_is_none(c, 1) && em_arg_int(c, 1, &m) < 0) return NULL;
    if (n < 0 || m < 0) {
        PyErr_Format(PyExc_RuntimeError, "%s must be greater or equal to 0, got %lld", n < 0 ? "n" : "m",
                     (long long)(n < 0 ? n : m));
        return NULL;
    }
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : em_default_float;
    int64_t shape[2] = {n, m};
    EmTensor *t = em_factory_out(c, 2, shape, d);
    if (!t) return NULL;
    if (em_fill_(t, ZERO) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    /* ones on the diagonal: a view with stride s0 + s1, filled wherever t lives */
    int64_t len = n < m ? n : m, st = t->strides[0] + t->strides[1];
    EmTensor *diag = em_tensor_alloc(&EmTensorType, t->storage, t->offset, 1, &len, &st, d);
    if (!diag || em_fill_(diag, ONE) < 0) Py_CLEAR(t);
    Py_XDECREF(diag);
    return em_factory_finish(t, &o);
}

/* ------------------------------------------------------ from data */

/* Data given as Python objects or NumPy arrays is built on the host; on a
 * GPU target it then crosses in ONE host-to-device copy (no fallback
 * bookkeeping, no round trip). `t` (a new reference or NULL) goes to dev. */
static EmTensor *moved_to(EmTensor *t, bool move, EmDevice dev) {
    if (t && move) Py_SETREF(t, em_to_device(t, dev, false));
    return t;
}

/* device= when given (resolved), else `dflt`; *given says which. */
static int target_device(EmCall *c, EmDevice dflt, EmDevice *dev, bool *given) {
    PyObject *d = em_arg_named(c, "device");
    *given = d && d != Py_None;
    return device_or(c, dflt, dev);
}

static PyObject *f_tensor(EmCall *c) {
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    PyObject *data = c->args[0];
    if (em_is_tensor(data) &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "To copy construct from a tensor, it is recommended to use "
                     "sourceTensor.detach().clone() rather than ember.tensor(sourceTensor).", 1) < 0)
        return NULL;
    EmDevice dev;
    bool given;
    if (target_device(c, em_is_tensor(data) ? em_device((EmTensor *)data) : em_cpu(), &dev, &given) < 0) return NULL;
    EmTensor *t = em_tensor_from_data(data, o.dtype); /* a tensor's copy stays on its device */
    return em_factory_finish(moved_to(t, t && !em_device_eq(em_device(t), dev), dev), &o);
}

static PyObject *f_as_tensor(EmCall *c) {
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    PyObject *data = c->args[0];
    EmDevice dev;
    bool given;
    if (target_device(c, em_cpu(), &dev, &given) < 0) return NULL;
    EmTensor *t;
    if (em_is_tensor(data)) {
        EmTensor *x = (EmTensor *)data;
        bool move = given && !em_device_eq(em_device(x), dev);
        if (!move && (o.dtype == EM_AUTO || o.dtype == x->dtype)) return Py_NewRef(data);
        /* through the op table: the converted tensor stays in the graph (ToCopyBackward0) */
        PyObject *dt = o.dtype == EM_AUTO ? Py_None : em_dtype_object((EmDType)o.dtype);
        if (!move) {
            PyObject *args[2] = {data, dt};
            return em_op(EM_OP__to_copy, 2, args);
        }
        PyObject *dv = em_device_object(dev);
        if (!dv) return NULL;
        PyObject *args[3] = {data, dv, dt};
        PyObject *r = em_op(EM_OP__to_device, 3, args);
        Py_DECREF(dv);
        return r;
    } else {
        int isarr = em_is_ndarray(data);
        if (isarr < 0) return NULL;
        if (isarr) { /* shares the array's memory on the CPU */
            t = em_from_numpy(data, false);
            if (t && o.dtype != EM_AUTO && o.dtype != t->dtype) Py_SETREF(t, em_to_dtype(t, (EmDType)o.dtype, false));
        } else {
            t = em_tensor_from_data(data, o.dtype);
        }
    }
    return (PyObject *)moved_to(t, given && t && !em_device_eq(em_device(t), dev), dev);
}

static PyObject *f_scalar_tensor(EmCall *c) {
    EmFactoryOpts o;
    EmScalar s;
    if (em_arg_scalar(c, 0, &s) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : em_default_float;
    EmDevice dev;
    if (device_or(c, em_cpu(), &dev) < 0) return NULL;
    if (dev.type == EM_META) return em_factory_finish(em_empty(0, NULL, d, dev), &o); /* Note [meta device] */
    EmDevice at = dev.type == EM_CUDA ? dev : em_cpu(); /* not dispatch: where it is allocated */
    return em_factory_finish(em_scalar_tensor(s, d, at), &o);
}

static PyObject *f_from_numpy(EmCall *c) {
    int isarr = em_is_ndarray(c->args[0]);
    if (isarr < 0) return NULL;
    if (!isarr) {
        PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %.100s)", Py_TYPE(c->args[0])->tp_name);
        return NULL;
    }
    return (PyObject *)em_from_numpy(c->args[0], true);
}

static PyObject *f_from_dlpack(EmCall *c) {
    PyObject *ext = c->args[0];
    if (PyCapsule_CheckExact(ext)) return (PyObject *)em_from_dlpack_capsule(ext);
    if (em_is_tensor(ext)) return Py_NewRef(ext);
    if (!PyObject_HasAttrString(ext, "__dlpack__") || !PyObject_HasAttrString(ext, "__dlpack_device__")) {
        PyErr_Format(PyExc_TypeError,
                     "from_dlpack(): expected an object with __dlpack__ and __dlpack_device__ or a "
                     "DLPack capsule, got %.100s", Py_TYPE(ext)->tp_name);
        return NULL;
    }
    PyObject *dev = PyObject_CallMethod(ext, "__dlpack_device__", NULL);
    if (!dev) return NULL;
    long dtype_code = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) >= 1
                          ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) : -1;
    Py_DECREF(dev);
    if (dtype_code != 1 && dtype_code != 3 && dtype_code != 2) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError,
                         "from_dlpack: the producer's device type %ld is neither the CPU nor CUDA", dtype_code);
        return NULL;
    }
    if (dtype_code == 2 && !em_cuda_get()) return NULL;
    /* ask for a versioned capsule; older producers don't take max_version. A
     * GPU producer is told ember reads on the legacy default stream (1), as
     * ember's work runs there unless a stream context says otherwise */
    PyObject *kw = dtype_code == 2 ? Py_BuildValue("{s(ii)si}", "max_version", 1, 0, "stream", 1)
                                   : Py_BuildValue("{s(ii)}", "max_version", 1, 0);
    PyObject *meth = kw ? PyObject_GetAttrString(ext, "__dlpack__") : NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *cap = meth && args ? PyObject_Call(meth, args, kw) : NULL;
    if (!cap && meth && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        cap = PyObject_CallNoArgs(meth);
    }
    Py_XDECREF(kw);
    Py_XDECREF(meth);
    Py_XDECREF(args);
    if (!cap) return NULL;
    EmTensor *t = em_from_dlpack_capsule(cap);
    Py_DECREF(cap);
    return (PyObject *)t;
}


/* ------------------------------------------------- tril / triu indices */

/* Row i of a row x col matrix keeps columns [lo_i, hi_i): tril keeps
 * j <= i + offset, triu keeps j >= i + offset. Offsets are clamped first so
 * that no sum overflows; the count is a closed form (rows may be huge). */
static PyObject *tri_indices(EmCall *c, bool lower, bool gpu) {
    int64_t row, col, off;
    EmFactoryOpts o;
    const char *name = lower ? "tril_indices" : "triu_indices";
    if (em_arg_int(c, 0, &row) < 0 || em_arg_int(c, 1, &col) < 0 || em_arg_int(c, 2, &off) < 0 ||
        em_factory_opts(c, &o) < 0)
        return NULL;
    if (row < 0 || col < 0) {
        PyErr_Format(PyExc_RuntimeError, "%s must be non-negative, got%lld", row < 0 ? "row" : "col",
                     (long long)(row < 0 ? row : col));
        return NULL;
    }
    EmDType d = o.dtype == EM_AUTO ? EM_INT64 : (EmDType)o.dtype;
    if (d != EM_INT64 && d != EM_INT32) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", name, em_dtype_name(d));
        return NULL;
    }
    if (off > col) off = col;
    if (off < -row - 1) off = -row - 1;
    /* f(i) = clamp(i + t_off + 1, 0, col), summed over i in [0, row): zero
     * below row a, i + t_off + 1 on rows [a, b), col from row b on */
    int64_t t_off = lower ? off : off - 1;
    int64_t a = -t_off > 0 ? -t_off : 0, b = col - t_off - 1 > 0 ? col - t_off - 1 : 0;
    if (a > row) a = row;
    if (b > row) b = row;
    if (b < a) b = a;
    __int128 total = (__int128)(b - a) * ((__int128)a + t_off + 1 + (__int128)b + t_off) / 2 +
                     (__int128)(row - b) * col;
    if (!lower) total = (__int128)row * col - total;
    if (total > INT64_MAX / 2) {
        PyErr_Format(PyExc_RuntimeError, "%s: too many elements for row=%lld, col=%lld", name, (long long)row,
                     (long long)col);
        return NULL;
    }
    int64_t shape[2] = {2, (int64_t)total};
    /* built on the host; a GPU result (device= or out=) takes one copy: the
     * indices are few next to the matrix they index */
    EmTensor *t = gpu ? em_empty(2, shape, d, em_cpu()) : em_factory_out(c, 2, shape, d);
    if (!t) return NULL;
    if (em_is_meta(t)) return em_factory_finish(t, &o); /* Note [meta device] */
    char *p = em_data(t);
    int isz = em_itemsize(d);
    int64_t s0 = t->strides[0] * isz, s1 = t->strides[1] * isz, k = 0;
    for (int64_t i = lower ? a : 0; i < row && k < total; i++) {
        int64_t kept = i + t_off + 1; /* tril: [0, kept); triu: [kept, col) */
        if (kept < 0) kept = 0;
        if (kept > col) kept = col;
        int64_t lo = lower ? 0 : kept, hi = lower ? kept : col;
        for (int64_t j = lo; j < hi; j++, k++) {
            EmScalar si = {'i', {i}}, sj = {'i', {j}};
            em_scalar_store(si, d, p + k * s1);
            em_scalar_store(sj, d, p + s0 + k * s1);
        }
    }
    if (gpu) {
        EmTensor *g = em_factory_out(c, 2, shape, d);
        if (g && em_copy_(g, (PyObject *)t) < 0) Py_CLEAR(g);
        Py_SETREF(t, g);
    }
    return em_factory_finish(t, &o);
}
static PyObject *f_tril_indices(EmCall *c) { return tri_indices(c, true, false); }
static PyObject *f_tril_indices_cuda(EmCall *c) { return tri_indices(c, true, true); }
static PyObject *f_triu_indices(EmCall *c) { return tri_indices(c, false, false); }
static PyObject *f_triu_indices_cuda(EmCall *c) { return tri_indices(c, false, true); }

#define OPTS "dtype? dtype=None, object layout=None, device? device=None, bool pin_memory=False, bool requires_grad=False"
static EmOpDef factories[] = {
    {"zeros", "zeros(IntList size, *, Tensor out=None, " OPTS ")", f_zeros, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"ones", "ones(IntList size, *, Tensor out=None, " OPTS ")", f_ones, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"empty", "empty(IntList size, *, Tensor out=None, object memory_format=None, " OPTS ")", f_empty, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"empty_strided", "empty_strided(IntList size, IntList stride, *, " OPTS ")", f_empty_strided, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"full", "full(IntList size, Number fill_value, *, Tensor out=None, " OPTS ")", f_full, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"zeros_like", "zeros_like(Tensor input, *, object memory_format=None, " OPTS ")", f_zeros_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"ones_like", "ones_like(Tensor input, *, object memory_format=None, " OPTS ")", f_ones_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"empty_like", "empty_like(Tensor input, *, object memory_format=None, " OPTS ")", f_empty_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"full_like", "full_like(Tensor input, Number fill_value, *, object memory_format=None, " OPTS ")", f_full_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"arange", "arange(Number start, Number? end=None, Number? step=None, *, Tensor out=None, " OPTS ")", f_arange, .cuda_impl = f_arange_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"linspace", "linspace(float start, float end, int steps, *, Tensor out=None, " OPTS ")", f_linspace, .cuda_impl = f_linspace_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"logspace", "logspace(float start, float end, int steps, float base=10.0, *, Tensor out=None, " OPTS ")", f_logspace, .cuda_impl = f_logspace_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"eye", "eye(int n, int? m=None, *, Tensor out=None, " OPTS ")", f_eye, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"tensor", "tensor(object data, *, " OPTS ")", f_tensor, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"as_tensor", "as_tensor(object data, dtype? dtype=None, device? device=None)", f_as_tensor, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"scalar_tensor", "scalar_tensor(Number s, *, " OPTS ")", f_scalar_tensor, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"from_numpy", "from_numpy(object ndarray)", f_from_numpy, .devices = EM_RUNS_DEVICE_ARG},
    {"from_dlpack", "from_dlpack(object ext_tensor)", f_from_dlpack, .devices = EM_RUNS_DEVICE_ARG},
    {"tril_indices", "tril_indices(int row, int col, int offset=0, *, " OPTS ")", f_tril_indices, .cuda_impl = f_tril_indices_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"triu_indices", "triu_indices(int row, int col, int offset=0, *, " OPTS ")", f_triu_indices, .cuda_impl = f_triu_indices_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
};

int em_init_factories(PyObject *m) {
    return em_register_functions(m, factories, sizeof factories / sizeof factories[0]);
}
