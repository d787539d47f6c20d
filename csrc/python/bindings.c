/* bindings.c — the Python face of the op table. From each ops.def row come
 * a module function (ember.add), a Tensor method (t.add) and an in-place
 * method (t.add_), all thin vectorcall wrappers that bind arguments against
 * the row's signature and hand an EmCall to the row's impl. Nothing here is
 * written per op. */
#include "../ember.h"

/* impls and kernel tables named by the rows */
#define OP(name, sig, impl, kernels, variants) PyObject *em_impl_##impl(EmCall *c);
#include "../ops/ops.def"
#undef OP
extern const EmKernels em_kernels_none;
#define OP(name, sig, impl, kernels, variants) extern const EmKernels em_kernels_##kernels;
#include "../ops/ops.def"
#undef OP

#define F EM_VARIANT_FN
#define M EM_VARIANT_METHOD
#define I EM_VARIANT_INPLACE
EmOpDef em_op_defs[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants) \
    [EM_OP_##name] = {#name, sig, em_impl_##impl, &em_kernels_##kernels, variants},
#include "../ops/ops.def"
#undef OP
};
#undef F
#undef M
#undef I
const EmKernels em_kernels_none = {{0}, "none"};

/* Run a bound call: autograd's checks, the impl, the version bump of the
 * tensor it wrote (Note [when versions change]) and the graph node (Note
 * [autograd graph]). Every way of calling an op ends here. */
static PyObject *call_run(EmCall *c);

static PyObject *call_run_autocast(EmCall *c);

PyObject *em_call_run(EmCall *c) {
    if (EM_UNLIKELY(em_profiler_on)) return em_profiler_call(c, call_run_autocast); /* Note [profiler] */
    return call_run_autocast(c);
}

static PyObject *call_run_autocast(EmCall *c) {
    if (EM_LIKELY(!em_autocast_on) || em_autocast_suspend) return call_run(c);
    /* Note [autocast]: cast the arguments, then run with autocast suspended */
    EmCall cast = *c;
    PyObject *owned;
    if (em_autocast_args(&cast, &owned) < 0) {
        Py_XDECREF(owned);
        return NULL;
    }
    em_autocast_suspend++;
    PyObject *r = call_run(&cast);
    em_autocast_suspend--;
    Py_XDECREF(owned);
    return r;
}

static PyObject *call_run(EmCall *c) {
    const EmOpDef *def = c->def;
    EmTensor *written = c->out ? c->out : def->writes_self ? (EmTensor *)c->args[0] : NULL;
    EmAutogradPre pre;
    memset(&pre, 0, sizeof pre);
    bool grad = em_grad_enabled();
    if (grad && em_autograd_precheck(def, c, &pre) < 0) {
        em_autograd_pre_clear(&pre);
        return NULL;
    }
    PyObject *r = EM_UNLIKELY(em_cuda_used) ? em_device_dispatch(c) : def->impl(c);
    if (r && r != Py_NotImplemented) {
        if (written && def != &em_op_defs[EM_OP_detach]) em_bump_version(written); /* detach_ writes no data */
        if (grad) r = em_autograd_record(def, c, r, &pre);
    }
    em_autograd_pre_clear(&pre);
    return r;
}

static PyObject *op_from_c(EmOpId id, bool inplace, int nargs, PyObject *const *args) {
    EmCall c;
    c.def = &em_op_defs[id];
    if (em_bind_args(&c.def->sig, NULL, args, nargs, NULL, &c) < 0) return NULL;
    c.inplace = inplace;
    c.reflected = false;
    c.out = inplace ? (EmTensor *)c.args[0] : NULL;
    PyObject *r = em_call_run(&c);
    Py_XDECREF(c.owned);
    Py_XDECREF(c.owned_tensor);
    return r;
}

PyObject *em_op(EmOpId id, int nargs, PyObject *const *args) { return op_from_c(id, false, nargs, args); }
PyObject *em_op_inplace(EmOpId id, int nargs, PyObject *const *args) { return op_from_c(id, true, nargs, args); }

EmTensor *em_op_t(EmOpId id, int nargs, PyObject *const *args) {
    PyObject *r = em_op(id, nargs, args);
    if (r && !em_is_tensor(r)) {
        Py_DECREF(r);
        PyErr_Format(PyExc_SystemError, "ember: %s did not return a tensor", em_op_defs[id].name);
        return NULL;
    }
    return (EmTensor *)r;
}

enum { V_FN, V_METHOD, V_INPLACE };

static PyObject *op_call(EmOpId id, int variant, PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames) {
    const EmOpDef *def = &em_op_defs[id];
    EmCall c;
    c.def = def;
    if (em_bind_args(&def->sig, variant == V_FN ? NULL : self, args, nargs, kwnames, &c) < 0)
        return NULL;
    c.inplace = variant == V_INPLACE;
    c.reflected = false;
    c.out = NULL;
    int oi = def->sig.out_index;
    if (c.inplace) {
        if (oi >= 0 && c.args[oi] != Py_None) {
            Py_XDECREF(c.owned);
            PyErr_Format(PyExc_TypeError, "%s_() got an unexpected keyword argument 'out'", def->name);
            return NULL;
        }
        c.out = (EmTensor *)c.args[0];
    } else if (oi >= 0 && em_is_tensor(c.args[oi])) { /* not a tuple out (max(dim, out=(v, i))) */
        c.out = (EmTensor *)c.args[oi];
    }
    PyObject *r = em_call_run(&c);
    Py_XDECREF(c.owned);
    Py_XDECREF(c.owned_tensor);
    return r;
}

#define OP(name, sig, impl, kernels, variants)                                          \
    static PyObject *fn_##name(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) { \
        return op_call(EM_OP_##name, V_FN, NULL, a, n, k);                              \
    }                                                                                   \
    static PyObject *me_##name(PyObject *s, PyObject *const *a, Py_ssize_t n, PyObject *k) { \
        return op_call(EM_OP_##name, V_METHOD, s, a, n, k);                             \
    }                                                                                   \
    static PyObject *ip_##name(PyObject *s, PyObject *const *a, Py_ssize_t n, PyObject *k) { \
        return op_call(EM_OP_##name, V_INPLACE, s, a, n, k);                            \
    }
#include "../ops/ops.def"
#undef OP

typedef PyObject *(*FastKw)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
static const struct {
    FastKw fn, method, inplace;
    const char *inplace_name;
} wrappers[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants) \
    [EM_OP_##name] = {fn_##name, me_##name, ip_##name, #name "_"},
#include "../ops/ops.def"
#undef OP
};

static PyMethodDef module_defs[EM_NUM_OPS + 1];
static PyMethodDef method_defs[2 * EM_NUM_OPS + 1];

/* Parse every signature, add ember._C.<op> functions, and return the Tensor
 * methods (to be joined with the hand-written ones before PyType_Ready). */
int em_init_ops(PyObject *m, PyMethodDef **tensor_methods) {
    int nf = 0, nm = 0;
    for (int id = 0; id < EM_NUM_OPS; id++) {
        EmOpDef *def = &em_op_defs[id];
        if (em_signature_parse(def->signature, &def->sig) < 0) return -1;
        /* (ops whose first argument is a list, such as _fused_adamw_, bump their own versions) */
        def->writes_self = def->name[strlen(def->name) - 1] == '_' && def->sig.nparams > 0 &&
                           def->sig.params[0].type == EM_ARG_TENSOR;
        int flags = METH_FASTCALL | METH_KEYWORDS;
        if (def->variants & EM_VARIANT_FN)
            module_defs[nf++] = (PyMethodDef){def->name, (PyCFunction)(void (*)(void))wrappers[id].fn,
                                              flags, def->signature};
        if (def->variants & EM_VARIANT_METHOD)
            method_defs[nm++] = (PyMethodDef){def->name, (PyCFunction)(void (*)(void))wrappers[id].method,
                                              flags, def->signature};
        if (def->variants & EM_VARIANT_INPLACE)
            method_defs[nm++] = (PyMethodDef){wrappers[id].inplace_name,
                                              (PyCFunction)(void (*)(void))wrappers[id].inplace,
                                              flags, "In-place version of the op."};
    }
    module_defs[nf] = (PyMethodDef){NULL};
    method_defs[nm] = (PyMethodDef){NULL};
    if (PyModule_AddFunctions(m, module_defs) < 0) return -1;
    *tensor_methods = method_defs;
    return 0;
}

/* _C._op_names(): every op in the table, for the test that checks coverage. */
PyObject *em_op_names(PyObject *self, PyObject *unused) {
    PyObject *l = PyList_New(EM_NUM_OPS);
    if (!l) return NULL;
    for (int i = 0; i < EM_NUM_OPS; i++) {
        PyObject *s = PyUnicode_FromString(em_op_defs[i].name);
        if (!s) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, i, s);
    }
    return l;
}
