/* activation.c — front-ends of the nn activations (rows under "nn
 * activations" in ops.def; kernels in cpu/activation.c). Each elementwise
 * activation runs through the iterator as (input, a, b, c): the op's
 * parameters become three scalar operands in the input's dtype, so they
 * never take part in type promotion (torch's activations keep the input's
 * dtype; half types compute in float32). */
#include "../ember.h"
#include <math.h>

extern const EmKernels em_kernels_gelu, em_kernels_gelu_tanh, em_kernels_gelu_backward,
    em_kernels_gelu_tanh_backward;

/* torch's constants of SELU (Klambauer et al.) */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

static EmScalar real(double v) {
    EmScalar s = {'f', {0}};
    s.v.f = v;
    return s;
}

/* hardtanh's integer bounds saturate to the dtype's range, as torch's results
 * show (hardtanh(uint8, -1, 1) clamps at 0; threshold(uint8, 1, -2) writes 254) */
static int64_t int_bound(EmDType d, int64_t v) {
    int bits = 8 * em_itemsize(d);
    int64_t lo = d == EM_UINT8 ? 0 : bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
    int64_t hi = d == EM_UINT8 ? 255 : bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
    return v < lo ? lo : v > hi ? hi : v;
}

/* Run `kernels` over input with parameters p[0..2] into c->out (or new). */
static PyObject *run_act(EmCall *c, const char *name, const EmKernels *kernels, EmTensor *t,
                         const double p[3]) {
    bool saturate = c->def == &em_op_defs[EM_OP__hardtanh]; /* threshold's value wraps instead */
    EmIterConfig cfg = em_iter_config(name, kernels, EM_PROMOTE_NONE);
    cfg.common_dtype = (int8_t)t->dtype;
    cfg.inputs[0] = em_opnd(t);
    for (int i = 0; i < 3; i++) {
        EmScalar s = real(p[i]);
        if (!em_is_float(t->dtype) && isfinite(p[i]) && fabs(p[i]) < 9e18) {
            /* integer inputs (hardtanh, threshold): the bound truncated to an integer */
            s.kind = 'i';
            s.v.i = (int64_t)p[i];
            if (saturate) s.v.i = int_bound((EmDType)t->dtype, s.v.i);
        }
        cfg.inputs[i + 1] = em_opnd_scalar(s);
    }
    cfg.ninputs = 4;
    cfg.out = c->out;
    cfg.inplace = c->inplace;
    return (PyObject *)em_iter_run(&cfg);
}

static int float_arg(EmCall *c, int i, double *v) { return em_arg_float(c, i, v); }

/* The generic activation: its parameters from the call, by op. The name is
 * the one torch's errors use ("elu" -> "elu_cpu" not implemented for ...). */
PyObject *em_impl_act(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    EmOpId op = (EmOpId)(c->def - em_op_defs);
    double p[3] = {0, 0, 0}, alpha;
    const char *name = c->def->sig.fname;
    switch (op) {
    case EM_OP__softplus:
        if (float_arg(c, 1, &p[0]) < 0 || float_arg(c, 2, &p[1]) < 0) return NULL;
        break;
    case EM_OP__elu: /* (alpha·scale, scale, input scale) */
        if (float_arg(c, 1, &alpha) < 0) return NULL;
        p[0] = alpha, p[1] = 1, p[2] = 1;
        break;
    case EM_OP_selu:
        p[0] = SELU_ALPHA * SELU_SCALE, p[1] = SELU_SCALE, p[2] = 1;
        name = "elu";
        break;
    case EM_OP_celu:
        if (float_arg(c, 1, &alpha) < 0) return NULL;
        if (alpha == 0) {
            PyErr_SetString(PyExc_RuntimeError, "ZeroDivisionError");
            return NULL;
        }
        p[0] = alpha, p[1] = 1, p[2] = 1 / alpha;
        name = "elu";
        break;
    case EM_OP__leaky_relu:
        if (float_arg(c, 1, &p[0]) < 0) return NULL;
        break;
    case EM_OP__hardtanh:
        if (float_arg(c, 1, &p[0]) < 0 || float_arg(c, 2, &p[1]) < 0) return NULL;
        if (p[0] > p[1]) {
            PyErr_SetString(PyExc_ValueError, "min_val cannot be greater than max_val");
            return NULL;
        }
        if (t->dtype == EM_BOOL) {
            PyErr_SetString(PyExc_NotImplementedError, "Bool inputs not supported for hardtanh");
            return NULL;
        }
        break;
    case EM_OP_threshold:
        if (float_arg(c, 1, &p[0]) < 0 || float_arg(c, 2, &p[1]) < 0) return NULL;
        break;
    case EM_OP__log_sigmoid: name = "log_sigmoid"; break;
    default: break;
    }
    return run_act(c, name, c->def->kernels, t, p);
}

/* 'none' (or None) or 'tanh'; -1 with torch's RuntimeError otherwise */
static int gelu_mode(EmCall *c, int i, bool *tanh_form) {
    PyObject *a = c->args[i];
    *tanh_form = false;
    if (a == Py_None || !PyUnicode_CompareWithASCIIString(a, "none")) return 0;
    if (!PyUnicode_CompareWithASCIIString(a, "tanh")) {
        *tanh_form = true;
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "approximate argument must be either none or tanh.");
    return -1;
}

static int gelu_dtype_check(EmTensor *t) {
    if (em_is_float(t->dtype)) return 0;
    PyErr_Format(PyExc_NotImplementedError, "\"GeluKernelImpl\" not implemented for '%s'",
                 em_dtype_name((EmDType)t->dtype));
    return -1;
}

PyObject *em_impl_act_gelu(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    bool tanh_form;
    if (gelu_mode(c, 1, &tanh_form) < 0 || gelu_dtype_check(t) < 0) return NULL;
    double p[3] = {0, 0, 0};
    return run_act(c, "gelu", tanh_form ? &em_kernels_gelu_tanh : &em_kernels_gelu, t, p);
}

/* grad · f'(input), broadcast like a binary op */
static PyObject *run_backward(EmCall *c, const char *name, const EmKernels *k) {
    EmIterConfig cfg = em_iter_config(name, k, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(em_arg_tensor(c, 0));
    cfg.inputs[1] = em_opnd(em_arg_tensor(c, 1));
    cfg.ninputs = 2;
    cfg.out = c->out;
    cfg.inplace = c->inplace;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_act_gelu_backward(EmCall *c) {
    bool tanh_form;
    if (gelu_mode(c, 2, &tanh_form) < 0 || gelu_dtype_check(em_arg_tensor(c, 1)) < 0) return NULL;
    return run_backward(c, "gelu_backward",
                        tanh_form ? &em_kernels_gelu_tanh_backward : &em_kernels_gelu_backward);
}

PyObject *em_impl_act_backward(EmCall *c) { return run_backward(c, c->def->sig.fname, c->def->kernels); }

/* GLU: first half · σ(second half) along dim */
PyObject *em_impl_act_glu(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *a = NULL, *b = NULL;
    PyObject *r = NULL;
    int64_t dim64;
    int dim;
    if (em_arg_int(c, 1, &dim64) < 0) return NULL;
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError, "glu does not support scalars because halving size must be even");
    EM_TRY(em_wrap_dim(dim64, t->ndim, &dim) == 0);
    int64_t size = t->sizes[dim];
    EM_CHECK(size % 2 == 0, PyExc_RuntimeError,
             "Halving dimension must be even, but dimension %d is size %lld", dim, (long long)size);
    if (!em_is_float(t->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"glu_cpu\" not implemented for '%s'",
                     em_dtype_name((EmDType)t->dtype));
        return NULL;
    }
    EM_TRY(a = em_narrow(t, dim, 0, size / 2));
    EM_TRY(b = em_narrow(t, dim, size / 2, size / 2));
    EmIterConfig cfg = em_iter_config("glu", c->def->kernels, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(a);
    cfg.inputs[1] = em_opnd(b);
    cfg.ninputs = 2;
    r = (PyObject *)em_iter_run(&cfg);
fail:
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}
