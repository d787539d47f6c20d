/* elementwise.c — front-ends of the elementwise ops. Each turns a bound call
 * into an iterator config: which inputs, which promotion rule, which kernel
 * table, plus the few checks torch makes before computing (bool subtraction,
 * integer division by zero, negative integer powers). The iterator does the
 * rest. */
#include "../ember.h"
#include <float.h>
#include <math.h>

#define KERNELS(name) (&em_kernels_##name)
extern const EmKernels em_kernels_add, em_kernels_add_alpha, em_kernels_sub, em_kernels_div,
    em_kernels_div_trunc, em_kernels_floor_divide, em_kernels_round_scaled_up,
    em_kernels_round_scaled_down, em_kernels_copy, em_kernels_clamp_min, em_kernels_clamp_max,
    em_kernels_clamp, em_kernels_pow, em_kernels_square, em_kernels_abs, em_kernels_sign;

/* Bind the first n args as operands; at least one must be a tensor. */
static int bind_inputs(EmCall *c, EmIterConfig *cfg, int n) {
    bool any_tensor = false;
    for (int i = 0; i < n; i++) {
        if (em_arg_operand(c, i, &cfg->inputs[i]) < 0) return -1;
        any_tensor |= cfg->inputs[i].t != NULL;
    }
    if (!any_tensor) { /* torch.add(1, 2): the first number becomes a 0-d tensor */
        EmTensor *t = em_scalar_tensor(cfg->inputs[0].s, em_scalar_dtype(cfg->inputs[0].s), em_cpu());
        if (!t) return -1;
        c->owned_tensor = t;
        cfg->inputs[0] = em_opnd(t);
    }
    cfg->ninputs = n;
    cfg->out = c->out;
    cfg->inplace = c->inplace;
    return 0;
}

static PyObject *run_generic(EmCall *c, EmPromotion p, unsigned bool_mask) {
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, p);
    cfg.bool_mask = bool_mask;
    if (bind_inputs(c, &cfg, c->def->sig.ninputs) < 0) return NULL;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_ew_unary(EmCall *c) {
    /* abs of a complex tensor is real: hypot of its parts (ops/complex.c) */
    EmTensor *t = em_arg_tensor(c, 0);
    if (c->def->kernels == &em_kernels_abs && t && em_is_complex(t->dtype)) {
        if (c->inplace) {
            PyErr_SetString(PyExc_RuntimeError, "In-place abs is not supported for complex tensors.");
            return NULL;
        }
        return em_complex_abs(t, c->out);
    }
    if (c->def->kernels == &em_kernels_sign && t && em_is_complex(t->dtype)) {
        PyErr_SetString(PyExc_RuntimeError, "Unlike NumPy, torch.sign is not intended to support complex numbers. "
                                            "Please use torch.sgn instead.");
        return NULL;
    }
    return run_generic(c, EM_PROMOTE_NONE, 0);
}
PyObject *em_impl_ew_binary(EmCall *c) { return run_generic(c, EM_PROMOTE_NONE, 0); }
PyObject *em_impl_ew_unary_float(EmCall *c) { return run_generic(c, EM_PROMOTE_INT_TO_FLOAT, 0); }
PyObject *em_impl_ew_binary_float(EmCall *c) { return run_generic(c, EM_PROMOTE_INT_TO_FLOAT, 0); }
PyObject *em_impl_ew_unary_bool(EmCall *c) { return run_generic(c, EM_PROMOTE_BOOL_RESULT, 0); }
PyObject *em_impl_ew_compare(EmCall *c) { return run_generic(c, EM_PROMOTE_BOOL_RESULT, 0); }
PyObject *em_impl_ew_logical(EmCall *c) {
    unsigned mask = 0;
    for (int i = 0; i < c->def->sig.ninputs; i++) mask |= EM_BOOL_IN(i);
    return run_generic(c, EM_PROMOTE_BOOL_RESULT, mask);
}

/* ------------------------------------------------------ add / sub / div */

static bool operand_is_bool(const EmOperand *o) {
    return o->t ? o->t->dtype == EM_BOOL : o->s.kind == 'b';
}

/* a + alpha * b; alpha never takes part in promotion */
static PyObject *add_with_alpha(EmCall *c, EmIterConfig *cfg, EmScalar alpha, const EmKernels *plain) {
    EmDType common = em_result_type(2, cfg->inputs);
    if (common == EM_DTYPE_ERROR) return NULL;
    if (!em_is_float(common) && alpha.kind == 'f') {
        PyErr_SetString(PyExc_RuntimeError,
                        "For integral input tensors, argument alpha must not be a floating point number.");
        return NULL;
    }
    if (common != EM_BOOL && alpha.kind == 'b') {
        PyErr_SetString(PyExc_RuntimeError, "Boolean alpha only supported for Boolean results.");
        return NULL;
    }
    bool unit = alpha.kind == 'f' ? alpha.v.f == 1.0 : alpha.v.i == 1;
    if (unit) {
        cfg->kernels = plain;
        return (PyObject *)em_iter_run(cfg);
    }
    cfg->kernels = KERNELS(add_alpha);
    cfg->common_dtype = (int8_t)common;
    cfg->inputs[2] = em_opnd_scalar(alpha);
    cfg->ninputs = 3;
    return (PyObject *)em_iter_run(cfg);
}

PyObject *em_impl_add(EmCall *c) {
    EmIterConfig cfg = em_iter_config("add", NULL, EM_PROMOTE_NONE);
    EmScalar alpha;
    if (bind_inputs(c, &cfg, 2) < 0 || em_arg_scalar(c, 2, &alpha) < 0) return NULL;
    return add_with_alpha(c, &cfg, alpha, KERNELS(add));
}

static int check_sub_bool(const EmOperand *a, const EmOperand *b) {
    if (operand_is_bool(a) && operand_is_bool(b)) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "Subtraction, the `-` operator, with two bool tensors is not supported. "
                        "Use the `^` or `logical_xor()` operator instead.");
        return -1;
    }
    if (operand_is_bool(a) || operand_is_bool(b)) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "Subtraction, the `-` operator, with a bool tensor is not supported. "
                        "If you are trying to invert a mask, use the `~` or `logical_not()` "
                        "operator instead.");
        return -1;
    }
    return 0;
}

static PyObject *sub_impl(EmCall *c, bool reversed) {
    EmIterConfig cfg = em_iter_config(reversed ? "rsub" : "sub", NULL, EM_PROMOTE_NONE);
    EmScalar alpha;
    if (bind_inputs(c, &cfg, 2) < 0 || em_arg_scalar(c, 2, &alpha) < 0) return NULL;
    if (reversed) {
        EmOperand t = cfg.inputs[0];
        cfg.inputs[0] = cfg.inputs[1];
        cfg.inputs[1] = t;
    }
    if (check_sub_bool(&cfg.inputs[0], &cfg.inputs[1]) < 0) return NULL;
    bool unit = alpha.kind == 'f' ? alpha.v.f == 1.0 : alpha.v.i == 1;
    if (unit) {
        cfg.kernels = KERNELS(sub);
        return (PyObject *)em_iter_run(&cfg);
    }
    /* a - alpha * b == a + (-alpha) * b */
    if (alpha.kind == 'f')
        alpha.v.f = -alpha.v.f;
    else
        alpha.v.i = (int64_t)(0 - (uint64_t)alpha.v.i);
    return add_with_alpha(c, &cfg, alpha, KERNELS(sub));
}
PyObject *em_impl_sub(EmCall *c) { return sub_impl(c, false); }
PyObject *em_impl_rsub(EmCall *c) { return sub_impl(c, true); }

/* True when some element of t is zero once cast to dt, the dtype the kernel
 * divides in (int32's -2^31 is a uint8 0: a check in t's own dtype would
 * let the kernel divide by zero). */
static int tensor_has_zero(EmTensor *t, EmDType dt) {
    EmTensor *h = em_to_device(t, em_cpu(), false); /* a GPU divisor is read on the host */
    EmTensor *cast = h ? em_to_dtype(h, dt, false) : NULL;
    Py_XDECREF(h);
    EmTensor *ct = cast ? em_contiguous(cast) : NULL;
    Py_XDECREF(cast);
    if (!ct) return -1;
    int isz = em_itemsize(ct->dtype);
    const char *p = em_data(ct);
    int found = 0;
    for (int64_t i = 0; i < ct->numel && !found; i++) {
        int64_t v = 0;
        memcpy(&v, p + i * isz, (size_t)isz);
        found = v == 0;
    }
    Py_DECREF(ct);
    return found;
}

/* Integer division raises on a zero divisor, as torch does -- after the
 * dtype check: a dtype without a kernel (bool) is the iterator's
 * NotImplementedError whatever the divisor holds. */
static int check_int_divisor(EmIterConfig *cfg) {
    EmDType common = em_result_type(2, cfg->inputs);
    if (common == EM_DTYPE_ERROR) return -1;
    if (em_is_float(common) || !cfg->kernels->fn[em_compute_dtype(common)]) return 0;
    const EmOperand *d = &cfg->inputs[1];
    int zero;
    if (d->t) {
        zero = tensor_has_zero(d->t, em_compute_dtype(common));
        if (zero < 0) return -1;
    } else {
        int64_t v = 0;
        em_scalar_store(d->s, common, &v);
        zero = v == 0;
    }
    if (zero) {
        PyErr_SetString(PyExc_RuntimeError, "ZeroDivisionError");
        return -1;
    }
    return 0;
}

PyObject *em_impl_ew_int_divide(EmCall *c) {
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 2) < 0 || check_int_divisor(&cfg) < 0) return NULL;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_div(EmCall *c) {
    PyObject *mode = c->args[2];
    if (mode == Py_None) {
        EmIterConfig cfg = em_iter_config("div", KERNELS(div), EM_PROMOTE_INT_TO_FLOAT);
        if (bind_inputs(c, &cfg, 2) < 0) return NULL;
        return (PyObject *)em_iter_run(&cfg);
    }
    const EmKernels *k;
    if (!PyUnicode_CompareWithASCIIString(mode, "trunc"))
        k = KERNELS(div_trunc);
    else if (!PyUnicode_CompareWithASCIIString(mode, "floor"))
        k = KERNELS(floor_divide);
    else {
        PyErr_Format(PyExc_RuntimeError,
                     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%U'",
                     mode);
        return NULL;
    }
    EmIterConfig cfg = em_iter_config("div", k, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 2) < 0 || check_int_divisor(&cfg) < 0) return NULL;
    return (PyObject *)em_iter_run(&cfg);
}

/* ----------------------------------------------------------- powers */

PyObject *em_impl_pow(EmCall *c) {
    EmIterConfig cfg = em_iter_config("pow", KERNELS(pow), EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 2) < 0) return NULL;
    const EmOperand *e = &cfg.inputs[1];
    EmDType common = em_result_type(2, cfg.inputs);
    if (common == EM_DTYPE_ERROR) return NULL;
    if (!e->t && e->s.kind == 'i' && e->s.v.i < 0 && !em_is_float(common)) {
        PyErr_SetString(PyExc_RuntimeError, "Integers to negative integer powers are not allowed.");
        return NULL;
    }
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_float_power(EmCall *c) {
    if (c->inplace && c->out->dtype != EM_FLOAT64) {
        PyErr_Format(PyExc_RuntimeError,
                     "the base given to float_power_ has dtype %s but the operation's result "
                     "requires dtype Double",
                     em_dtype_name((EmDType)c->out->dtype));
        return NULL;
    }
    EmIterConfig cfg = em_iter_config("float_power", KERNELS(pow), EM_PROMOTE_NONE);
    cfg.common_dtype = EM_FLOAT64;
    if (bind_inputs(c, &cfg, 2) < 0) return NULL;
    return (PyObject *)em_iter_run(&cfg);
}

/* ---------------------------------------------------------- unary */

PyObject *em_impl_neg(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (t->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                        "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
        return NULL;
    }
    return run_generic(c, EM_PROMOTE_NONE, 0);
}

PyObject *em_impl_positive(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (t->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "The `+` operator, on a bool tensor is not supported.");
        return NULL;
    }
    return Py_NewRef(t);
}

/* square(bool) is pow(bool, 2): an int64 result */
PyObject *em_impl_relu(EmCall *c) {
    if (em_arg_tensor(c, 0)->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "Boolean inputs not supported for relu");
        return NULL;
    }
    return run_generic(c, EM_PROMOTE_NONE, 0);
}

PyObject *em_impl_square(EmCall *c) {
    EmIterConfig cfg = em_iter_config("square", KERNELS(square), EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 1) < 0) return NULL;
    if (cfg.inputs[0].t->dtype == EM_BOOL) cfg.common_dtype = EM_INT64;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_round(EmCall *c) {
    int64_t decimals;
    if (em_arg_int(c, 1, &decimals) < 0) return NULL;
    if (decimals == 0) return run_generic(c, EM_PROMOTE_NONE, 0);
    EmTensor *t = em_arg_tensor(c, 0);
    EmIterConfig cfg = em_iter_config("round", decimals > 0 ? KERNELS(round_scaled_up)
                                                             : KERNELS(round_scaled_down),
                                      EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 1) < 0) return NULL;
    EmScalar scale = {'f', {0}};
    scale.v.f = pow(10.0, (double)(decimals > 0 ? decimals : -decimals));
    cfg.inputs[1] = em_opnd_scalar(scale);
    cfg.ninputs = 2;
    cfg.common_dtype = t->dtype;
    return (PyObject *)em_iter_run(&cfg);
}

static double dtype_max(EmDType d) {
    switch (d) {
    case EM_FLOAT16: return 65504.0;
    case EM_BFLOAT16: return 3.3895313892515355e38;
    case EM_FLOAT32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

PyObject *em_impl_nan_to_num(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (!em_is_float(t->dtype)) { /* nothing to replace: a copy, as torch returns */
        EmIterConfig cfg = em_iter_config("nan_to_num", &em_kernels_copy, EM_PROMOTE_NONE);
        if (bind_inputs(c, &cfg, 1) < 0) return NULL;
        cfg.compute_dtype = t->dtype;
        return (PyObject *)em_iter_run(&cfg);
    }
    double v[3] = {0, dtype_max(t->dtype), -dtype_max(t->dtype)};
    for (int i = 0; i < 3; i++)
        if (!em_arg_is_none(c, i + 1) && em_arg_float(c, i + 1, &v[i]) < 0) return NULL;
    EmIterConfig cfg = em_iter_config("nan_to_num", c->def->kernels, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 1) < 0) return NULL;
    for (int i = 0; i < 3; i++) {
        EmScalar s = {'f', {0}};
        s.v.f = v[i];
        cfg.inputs[i + 1] = em_opnd_scalar(s);
    }
    cfg.ninputs = 4;
    cfg.common_dtype = t->dtype;
    return (PyObject *)em_iter_run(&cfg);
}

/* ------------------------------------------------- clamp, where, lerp */

/* torch's clamp overloads take two numbers or two tensors: a 0-d tensor next
 * to a number counts as a number, any other mix is a TypeError. */
static int clamp_bound(PyObject *b, PyObject *other, EmOperand *o, PyObject *lo, PyObject *hi) {
    if (em_to_operand(b, o) != 0) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "clamp(): bounds must be Tensors or numbers");
        return -1;
    }
    if (!o->t || other == Py_None || em_is_tensor(other)) return 0;
    if (o->t->ndim != 0) {
        PyErr_Format(PyExc_TypeError,
                     "clamp() received an invalid combination of arguments - got (Tensor, %s, %s), but expected "
                     "(Tensor input, Tensor min, Tensor max) or (Tensor input, Number min, Number max)",
                     em_is_tensor(lo) ? "Tensor" : Py_TYPE(lo)->tp_name, em_is_tensor(hi) ? "Tensor" : Py_TYPE(hi)->tp_name);
        return -1;
    }
    EmScalar s;
    if (em_scalar_from_py(b, &s) < 0) return -1;
    *o = em_opnd_scalar(s);
    return 0;
}

static PyObject *clamp_impl(EmCall *c, PyObject *lo, PyObject *hi) {
    if (lo == Py_None && hi == Py_None) {
        PyErr_SetString(PyExc_RuntimeError,
                        "torch.clamp: At least one of 'min' or 'max' must not be None");
        return NULL;
    }
    EmIterConfig cfg = em_iter_config(c->def->name, NULL, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 1) < 0) return NULL;
    EmOperand b[2];
    bool have[2] = {lo != Py_None, hi != Py_None};
    if ((have[0] && clamp_bound(lo, hi, &b[0], lo, hi) < 0) || (have[1] && clamp_bound(hi, lo, &b[1], lo, hi) < 0))
        return NULL;
    int n = 1;
    for (int i = 0; i < 2; i++)
        if (have[i]) cfg.inputs[n++] = b[i];
    EmDType common = em_result_type(n, cfg.inputs);
    if (common == EM_DTYPE_ERROR) return NULL;
    /* integer results: a number bound beyond the dtype's range clamps nothing
     * on its own side and is an error on the other (torch's checks) */
    if (em_is_int(common)) {
        int bits = 8 * em_itemsize(common);
        int64_t dmax = em_dtype_info[common].is_signed ? (int64_t)((1ull << (bits - 1)) - 1)
                                                       : (bits == 64 ? INT64_MAX : (int64_t)((1ull << bits) - 1));
        int64_t dmin = em_dtype_info[common].is_signed ? -dmax - 1 : 0;
        for (int i = 0; i < 2; i++) {
            if (!have[i] || b[i].t || b[i].s.kind != 'i') continue;
            int64_t v = b[i].s.v.i;
            bool beyond_own = i == 0 ? v < dmin : v > dmax, beyond_other = i == 0 ? v > dmax : v < dmin;
            if (beyond_other) {
                PyErr_Format(PyExc_RuntimeError, "Clamp %s value %lld is outside the representable range of %s",
                             i == 0 ? "min" : "max", (long long)v, em_dtype_name(common));
                return NULL;
            }
            if (beyond_own) have[i] = false;
        }
        n = 1;
        for (int i = 0; i < 2; i++)
            if (have[i]) cfg.inputs[n++] = b[i];
        cfg.common_dtype = (int8_t)common;
    }
    cfg.ninputs = n;
    cfg.kernels = n == 1 ? KERNELS(copy) : n == 3 ? KERNELS(clamp) : have[0] ? KERNELS(clamp_min) : KERNELS(clamp_max);
    /* torch clamps bool by tensor bounds only; number bounds have no bool kernel */
    bool tensor_bound = false;
    for (int i = 1; i < n; i++) tensor_bound |= cfg.inputs[i].t != NULL;
    if (!tensor_bound && common == EM_BOOL) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s_scalar_cpu\" not implemented for 'Bool'",
                     lo != Py_None && hi != Py_None ? "clamp" : lo != Py_None ? "clamp_min" : "clamp_max");
        return NULL;
    }
    return (PyObject *)em_iter_run(&cfg);
}
PyObject *em_impl_clamp(EmCall *c) { return clamp_impl(c, c->args[1], c->args[2]); }
PyObject *em_impl_clamp_min(EmCall *c) { return clamp_impl(c, c->args[1], Py_None); }
PyObject *em_impl_clamp_max(EmCall *c) { return clamp_impl(c, Py_None, c->args[1]); }

PyObject *em_impl_where(EmCall *c) {
    EmTensor *cond = em_arg_tensor(c, 0);
    bool no_x = em_arg_is_none(c, 1), no_y = em_arg_is_none(c, 2);
    if (no_x && no_y && !c->out) return em_nonzero_tuple(cond); /* where(condition) */
    if (no_x || no_y) {
        PyErr_SetString(PyExc_TypeError, "where() takes a condition alone, or a condition, input and other");
        return NULL;
    }
    if (cond->dtype != EM_BOOL) {
        PyErr_Format(PyExc_RuntimeError,
                     "where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                     em_dtype_name((EmDType)cond->dtype));
        return NULL;
    }
    EmIterConfig cfg = em_iter_config("where", c->def->kernels, EM_PROMOTE_NONE);
    cfg.bool_mask = EM_BOOL_IN(0);
    if (bind_inputs(c, &cfg, 3) < 0) return NULL;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_lerp(EmCall *c) {
    EmIterConfig cfg = em_iter_config("lerp", c->def->kernels, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 3) < 0) return NULL;
    EmDType d = cfg.inputs[0].t->dtype;
    for (int i = 1; i < 3; i++) {
        EmTensor *t = cfg.inputs[i].t;
        if (t && t->dtype != d) {
            PyErr_Format(PyExc_RuntimeError, "expected dtype %s for `%s` but got dtype %s",
                         em_dtype_info[d].name, i == 1 ? "end" : "weight", em_dtype_info[t->dtype].name);
            return NULL;
        }
    }
    cfg.common_dtype = d;
    return (PyObject *)em_iter_run(&cfg);
}

static PyObject *addc_impl(EmCall *c, bool divide) {
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, EM_PROMOTE_NONE);
    if (bind_inputs(c, &cfg, 3) < 0) return NULL;
    EmDType common = em_result_type(3, cfg.inputs);
    if (common == EM_DTYPE_ERROR) return NULL;
    if (divide && !em_is_float(common)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Integer division with addcdiv is no longer supported, and in a future "
                        "release addcdiv will perform a true division of tensor1 and tensor2. The "
                        "historic addcdiv behavior can be implemented as (input + value * "
                        "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                        "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
                        "behavior is just the latter implementation: (input + value * tensor1 / "
                        "tensor2), for all dtypes.");
        return NULL;
    }
    EmScalar value;
    if (em_arg_scalar(c, 3, &value) < 0) return NULL;
    if (!em_is_float(common) && value.kind == 'f') {
        PyErr_SetString(PyExc_RuntimeError,
                        "For integral input tensors, argument value must not be a floating point number.");
        return NULL;
    }
    cfg.inputs[3] = em_opnd_scalar(value);
    cfg.ninputs = 4;
    cfg.common_dtype = common;
    return (PyObject *)em_iter_run(&cfg);
}
PyObject *em_impl_addcmul(EmCall *c) { return addc_impl(c, false); }
PyObject *em_impl_addcdiv(EmCall *c) { return addc_impl(c, true); }

/* ------------------------------------------------------ copy and fill */

PyObject *em_impl_copy_(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *src = em_arg_tensor(c, 1);
    if (src == self) return Py_NewRef(self);
    bool non_blocking;
    if (em_arg_bool(c, 2, &non_blocking) < 0) return NULL;
    if (em_copy_device_(self, src, non_blocking) < 0) return NULL;
    return Py_NewRef(self);
}

PyObject *em_impl_fill_(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0);
    PyObject *v = c->args[1];
    if (em_is_tensor(v) && ((EmTensor *)v)->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "fill_ only supports 0-dimension value tensor but got tensor with %d dimensions.",
                     ((EmTensor *)v)->ndim);
        return NULL;
    }
    EmScalar s;
    if (em_scalar_from_py(v, &s) < 0 || em_fill_(self, s) < 0) return NULL;
    return Py_NewRef(self);
}

PyObject *em_impl_zero_(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0);
    EmScalar zero = {'i', {0}};
    if (em_fill_(self, zero) < 0) return NULL;
    return Py_NewRef(self);
}

PyObject *em_impl_to_copy(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    EmDType d = (EmDType)t->dtype;
    if (em_arg_dtype(c, 1, &d) < 0) return NULL;
    return (PyObject *)em_to_dtype(t, d, true);
}

/* t.to(device, dtype): the bytes cross in t's dtype and are cast on the
 * destination; the layout is kept when t is dense (torch's preserve_format). */
PyObject *em_impl_to_device(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    EmDType d = (EmDType)t->dtype;
    EmDevice dev;
    bool non_blocking;
    if (em_device_from_py(c->args[1], &dev) < 0 || em_arg_dtype(c, 2, &d) < 0 ||
        em_arg_bool(c, 3, &non_blocking) < 0)
        return NULL;
    if (dev.type != EM_CPU && em_cuda_resolve(&dev) < 0) return NULL; /* not dispatch: the target device */
    EmTensor *r = em_is_non_overlapping_and_dense(t)
                      ? em_empty_strided(t->ndim, t->sizes, t->strides, d, dev)
                      : em_empty(t->ndim, t->sizes, d, dev);
    if (r && em_copy_device_(r, t, non_blocking) < 0) Py_CLEAR(r);
    return (PyObject *)r;
}

/* ------------------------------------------------ the number protocol */

static PyObject *call_with(EmOpId id, PyObject *a, PyObject *b, EmTensor *out) {
    EmCall c;
    c.def = &em_op_defs[id];
    for (int i = 0; i < c.def->sig.nparams; i++) c.args[i] = c.def->sig.params[i].default_value;
    c.args[0] = a;
    if (b) c.args[1] = b;
    c.owned = NULL;
    c.owned_tensor = NULL;
    c.out = out;
    c.inplace = out != NULL;
    c.reflected = !em_is_tensor(a);
    PyObject *r = em_call_run(&c);
    Py_XDECREF(c.owned_tensor);
    return r;
}

PyObject *em_binary_op(EmOpId id, PyObject *a, PyObject *b, EmTensor *out) {
    EmOperand oa, ob;
    int ra = em_to_operand(a, &oa), rb = ra ? ra : em_to_operand(b, &ob);
    if (ra < 0 || rb < 0) return NULL;
    if (ra > 0 || rb > 0) Py_RETURN_NOTIMPLEMENTED;
    return call_with(id, a, b, out);
}

PyObject *em_unary_op(EmOpId id, EmTensor *a, EmTensor *out) {
    return call_with(id, (PyObject *)a, NULL, out);
}
