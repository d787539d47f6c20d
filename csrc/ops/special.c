/* special.c — front-ends of the elementwise ops that take an integer
 * parameter or check their arguments before the iterator runs: heaviside
 * (one dtype for both operands), polygamma(n, x), mvlgamma(x, p) and frexp,
 * which returns (mantissa, int32 exponent). Kernels in cpu/special.c and
 * cpu/binary.c; the iterator does broadcasting, promotion, out= and meta. */
#include "../ember.h"

extern const EmKernels em_kernels_frexp_exponent;

PyObject *em_impl_heaviside(EmCall *c) {
    EmTensor *a = em_arg_tensor(c, 0), *b = em_arg_tensor(c, 1);
    if (a->dtype != b->dtype) {
        PyErr_SetString(PyExc_RuntimeError, "heaviside is not yet implemented for tensors with different dtypes.");
        return NULL;
    }
    EmIterConfig cfg = em_iter_config("heaviside", c->def->kernels, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(a);
    cfg.inputs[1] = em_opnd(b);
    cfg.ninputs = 2;
    cfg.out = c->out;
    cfg.inplace = c->inplace;
    return (PyObject *)em_iter_run(&cfg);
}

/* x and an integer parameter k (a scalar operand: it takes no part in
 * promotion), integer x computing in the default float */
static PyObject *with_int_param(EmCall *c, EmTensor *x, int64_t k) {
    EmIterConfig cfg = em_iter_config(c->def->name, c->def->kernels, EM_PROMOTE_INT_TO_FLOAT);
    EmScalar s = {'i', {0}};
    s.v.i = k;
    cfg.inputs[0] = em_opnd(x);
    cfg.inputs[1] = em_opnd_scalar(s);
    cfg.ninputs = 2;
    cfg.out = c->out;
    cfg.inplace = c->inplace;
    return (PyObject *)em_iter_run(&cfg);
}

PyObject *em_impl_polygamma(EmCall *c) {
    int64_t n;
    if (em_arg_int(c, 0, &n) < 0) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_RuntimeError, "polygamma(n, x) does not support negative n.");
        return NULL;
    }
    return with_int_param(c, em_arg_tensor(c, 1), n);
}

PyObject *em_impl_mvlgamma(EmCall *c) {
    int64_t p;
    EmTensor *x = em_arg_tensor(c, 0);
    if (em_arg_int(c, 1, &p) < 0) return NULL;
    if (x->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_RuntimeError, "The input tensor may not be a boolean tensor.");
        return NULL;
    }
    if (p < 1) {
        PyErr_SetString(PyExc_RuntimeError, "p has to be greater than or equal to 1");
        return NULL;
    }
    /* no domain check: torch 2.15 gives NaN / inf where (p - 1) / 2 is not exceeded */
    if (p > ((int64_t)1 << 24)) { /* torch would allocate p values per call; ember sums p terms per element */
        PyErr_Format(PyExc_RuntimeError, "mvlgamma: p=%lld is too large (at most 2^24)", (long long)p);
        return NULL;
    }
    return with_int_param(c, x, p);
}

/* The (mantissa, exponent) out= pair: None or two tensors, the mantissa in
 * the input's dtype, the exponent int32 (torch's checks). */
static int frexp_out(PyObject *o, EmDType dtype, EmTensor **m, EmTensor **e) {
    *m = *e = NULL;
    if (o == Py_None) return 0;
    if (!(PyTuple_Check(o) || PyList_Check(o)) || PySequence_Fast_GET_SIZE(o) != 2 ||
        !em_is_tensor(PySequence_Fast_ITEMS(o)[0]) || !em_is_tensor(PySequence_Fast_ITEMS(o)[1])) {
        PyErr_Format(PyExc_TypeError, "frexp(): argument 'out' must be tuple of Tensors, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *m = (EmTensor *)PySequence_Fast_ITEMS(o)[0];
    *e = (EmTensor *)PySequence_Fast_ITEMS(o)[1];
    if ((*m)->dtype != dtype) {
        PyErr_Format(PyExc_RuntimeError, "torch.frexp() expects mantissa to have dtype %s but got %s",
                     em_dtype_name(dtype), em_dtype_name((EmDType)(*m)->dtype));
        return -1;
    }
    if ((*e)->dtype != EM_INT32) {
        PyErr_Format(PyExc_RuntimeError, "torch.frexp() expects exponent to have int dtype but got %s",
                     em_dtype_info[(*e)->dtype].name);
        return -1;
    }
    return 0;
}

static EmTensor *run_unary(const char *name, const EmKernels *k, EmTensor *x) {
    EmIterConfig cfg = em_iter_config(name, k, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(x);
    cfg.ninputs = 1;
    return em_iter_run(&cfg);
}

PyObject *em_impl_frexp(EmCall *c) {
    EmTensor *x = em_arg_tensor(c, 0), *om, *oe;
    if (!em_is_float(x->dtype)) {
        PyErr_SetString(PyExc_RuntimeError, "torch.frexp() only supports floating-point dtypes");
        return NULL;
    }
    if (frexp_out(c->args[1], (EmDType)x->dtype, &om, &oe) < 0) return NULL;
    EmTensor *m = run_unary("frexp", c->def->kernels, x);
    EmTensor *ef = m ? run_unary("frexp", &em_kernels_frexp_exponent, x) : NULL;
    EmTensor *e = ef ? em_to_dtype(ef, EM_INT32, true) : NULL;
    Py_XDECREF(ef);
    if (!e) {
        Py_XDECREF(m);
        return NULL;
    }
    if (om) {
        PyObject *a = em_index_into_out(om, m, true);
        PyObject *b = a ? em_index_into_out(oe, e, true) : (Py_DECREF(e), NULL);
        if (!b) {
            Py_XDECREF(a);
            return NULL;
        }
        em_bump_version(om);
        em_bump_version(oe);
        return em_return_pair("frexp", "mantissa", "exponent", a, b);
    }
    return em_return_pair("frexp", "mantissa", "exponent", (PyObject *)m, (PyObject *)e);
}
