/* bindings.c — the Python face of the op table. From each ops.def row come
 * a module function (ember.add), a Tensor method (t.add) and an in-place
 * method (t.add_), all thin vectorcall wrappers that bind arguments against
 * the row's signature and hand an EmCall to the row's impl. Nothing here is
 * written per op. */
#include "../ember.h"

enum { V_FN, V_METHOD, V_INPLACE };

static PyObject *fn_objects[EM_NUM_OPS]; /* ember._C.<op>, the func a __torch_function__ override sees */
static PyObject *torch_function(EmOpId id, int variant, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);

static PyObject *op_call(EmOpId id, int variant, PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames) {
    const EmOpDef *def = &em_op_defs[id];
    if (EM_UNLIKELY(em_tf_wanted_vector(self, args, nargs, kwnames))) /* Note [torch function] */
        return torch_function(id, variant, self, args, nargs, kwnames);
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

#define OP(name, ...)                                                                   \
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
#define OP(name, ...) \
    [EM_OP_##name] = {fn_##name, me_##name, ip_##name, #name "_"},
#include "../ops/ops.def"
#undef OP
};

/* The call as torch's handle_torch_function sees it: func is ember.<op> or
 * Tensor.<op>(_), args start with self for methods. */
static PyObject *torch_function(EmOpId id, int variant, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    if (variant == V_FN) return em_tf_dispatch_vector(fn_objects[id], NULL, args, nargs, kwnames);
    PyObject *func = PyObject_GetAttrString((PyObject *)&EmTensorType,
                                            variant == V_INPLACE ? wrappers[id].inplace_name : em_op_defs[id].name);
    if (!func) return NULL;
    PyObject *r = em_tf_dispatch_vector(func, self, args, nargs, kwnames);
    Py_DECREF(func);
    return r;
}

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
        def->writes_self = (def->tags & EM_TAG_INPLACE) && def->sig.nparams > 0 &&
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
    for (int id = 0; id < EM_NUM_OPS; id++)
        if ((em_op_defs[id].variants & EM_VARIANT_FN) && !(fn_objects[id] = PyObject_GetAttrString(m, em_op_defs[id].name)))
            return -1;
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

static int list_append_str(PyObject *l, const char *s) {
    PyObject *o = PyUnicode_FromString(s);
    int r = o ? PyList_Append(l, o) : -1;
    Py_XDECREF(o);
    return r;
}

/* _C._op_info(name): the row's columns (Note [op row]) as Python values, for
 * the test that checks each column against the op's behaviour. */
PyObject *em_op_info(PyObject *self, PyObject *name) {
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return NULL;
    int id = 0;
    while (id < EM_NUM_OPS && strcmp(em_op_defs[id].name, s)) id++;
    if (id == EM_NUM_OPS) return PyErr_Format(PyExc_KeyError, "no op named '%s' in the op table", s);
    const EmOpDef *def = &em_op_defs[id];
    static const struct { unsigned bit; const char *name; } runs[] = {
        {EM_RUNS_ANY, "any"}, {EM_RUNS_CUDA, "cuda"}, {EM_RUNS_MIXED, "mixed"},
        {EM_RUNS_CPU_INDEX, "cpu_index"}, {EM_RUNS_DEVICE_ARG, "device_arg"},
        {EM_RUNS_ANY_BASIC_KEY, "any_basic_key"}, {EM_RUNS_META, "meta"},
        {EM_RUNS_CUDA_IMPL, "cuda_impl"}};
    static const struct { unsigned bit; const char *name; } tags[] = {
        {EM_TAG_VIEW, "view"}, {EM_TAG_INPLACE, "inplace"}, {EM_TAG_WRITES, "writes"},
        {EM_TAG_GEOMETRY, "geometry"}, {EM_TAG_POINTWISE, "pointwise"}, {EM_TAG_DETACHES, "detaches"}, {EM_TAG_FORMAT, "format"}};
    static const char *const casts[] = {"none", "lower", "fp32", "promote"};
    PyObject *d = PyList_New(0), *t = PyList_New(0), *r = NULL;
    if (!d || !t) goto done;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        if ((def->devices & runs[i].bit) && list_append_str(d, runs[i].name) < 0) goto done;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if ((def->tags & tags[i].bit) && list_append_str(t, tags[i].name) < 0) goto done;
    /* the backward column: the formula's C name and torch's node name (None
     * when a function of the call names it), or why there is none */
    const EmDerivative *bw = &em_derivatives[id];
    const char *grad = bw->raises ? "raises" : bw->fn ? (bw->namer ? "named" : "formula")
                       : bw->no_formula ? "no_formula" : "nograd";
    r = Py_BuildValue("{s:s,s:s,s:O,s:O,s:{s:s,s:s},s:i,s:s,s:z,s:z,s:I}", "impl_kernels", def->kernels->name,
                      "signature", def->signature, "devices", d, "tags", t, "autocast",
                      "cpu", casts[def->autocast[EM_CAST_CPU]], "cuda", casts[def->autocast[EM_CAST_CUDA]],
                      "variants", (int)def->variants, "grad", grad, "backward", bw->formula, "node", bw->name,
                      "saves", bw->saves);
done:
    Py_XDECREF(d);
    Py_XDECREF(t);
    return r;
}
