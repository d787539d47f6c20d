/* args.c — torch-style argument binding for every op in the table.
 *
 * Each ops.def row carries a signature such as
 *   "add(TensorOrNumber input, TensorOrNumber other, *, Number alpha=1, Tensor out=None)"
 * parsed once at import into an EmSignature. em_bind_args then maps a
 * vectorcall's positional and keyword arguments onto it, checks each value's
 * type (TypeError naming the argument, like torch), fills defaults, and
 * accepts shapes given as varargs (x.view(2, 3) as well as x.view((2, 3))).
 */
#include "../ember.h"

static const struct {
    const char *name;
    EmArgType type;
} arg_types[] = {
    {"Tensor", EM_ARG_TENSOR}, {"TensorOrNumber", EM_ARG_TENSOR_OR_NUMBER},
    {"Number", EM_ARG_NUMBER}, {"int", EM_ARG_INT}, {"float", EM_ARG_FLOAT},
    {"bool", EM_ARG_BOOL}, {"str", EM_ARG_STR}, {"IntList", EM_ARG_INTLIST}, {"IntListOrDtype", EM_ARG_SHAPE_OR_DTYPE},
    {"TensorList", EM_ARG_TENSOR_LIST},
    {"dtype", EM_ARG_DTYPE}, {"device", EM_ARG_DEVICE}, {"Generator", EM_ARG_GENERATOR},
    {"object", EM_ARG_OBJECT},
};

static const char *type_desc(EmArgType t) {
    switch (t) {
    case EM_ARG_TENSOR: return "Tensor";
    case EM_ARG_TENSOR_OR_NUMBER: return "Tensor or Number";
    case EM_ARG_NUMBER: return "Number";
    case EM_ARG_INT: return "int";
    case EM_ARG_FLOAT: return "float";
    case EM_ARG_BOOL: return "bool";
    case EM_ARG_STR: return "str";
    case EM_ARG_INTLIST: return "tuple of ints";
    case EM_ARG_SHAPE_OR_DTYPE: return "tuple of ints or ember.dtype";
    case EM_ARG_TENSOR_LIST: return "tuple of Tensors";
    case EM_ARG_DTYPE: return "ember.dtype";
    case EM_ARG_DEVICE: return "ember.device";
    case EM_ARG_GENERATOR: return "ember.Generator";
    default: return "object";
    }
}

static PyObject *parse_default(const char *s, size_t n) {
    char buf[64];
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (!strcmp(buf, "None")) return Py_NewRef(Py_None);
    if (!strcmp(buf, "True")) return Py_NewRef(Py_True);
    if (!strcmp(buf, "False")) return Py_NewRef(Py_False);
    char *end;
    if (strpbrk(buf, ".eE")) return PyFloat_FromDouble(strtod(buf, &end));
    return PyLong_FromLongLong(strtoll(buf, &end, 10));
}

int em_signature_parse(const char *text, EmSignature *sig) {
    memset(sig, 0, sizeof *sig);
    sig->out_index = -1;
    const char *open = strchr(text, '('), *close = strrchr(text, ')');
    if (!open || !close) goto bad;
    snprintf(sig->fname, sizeof sig->fname, "%.*s", (int)(open - text), text);
    const char *p = open + 1;
    bool kwonly = false, inputs_done = false;
    while (p < close) {
        while (*p == ' ' || *p == ',') p++;
        if (p >= close) break;
        if (*p == '*') {
            kwonly = true;
            inputs_done = true;
            p++;
            continue;
        }
        if (sig->nparams >= EM_MAX_PARAMS) goto bad;
        EmParam *prm = &sig->params[sig->nparams];
        /* type */
        const char *t = p;
        while (*p != ' ' && *p != '?') p++;
        size_t tlen = (size_t)(p - t);
        bool found = false;
        for (size_t i = 0; i < sizeof arg_types / sizeof arg_types[0]; i++) {
            if (strlen(arg_types[i].name) == tlen && !strncmp(arg_types[i].name, t, tlen)) {
                prm->type = arg_types[i].type;
                found = true;
            }
        }
        if (!found) goto bad;
        if (*p == '?') {
            prm->optional = true;
            p++;
        }
        while (*p == ' ') p++;
        /* name */
        const char *nm = p;
        while (*p != '=' && *p != ',' && p < close) p++;
        prm->name = PyUnicode_FromStringAndSize(nm, p - nm);
        if (!prm->name) return -1;
        PyUnicode_InternInPlace(&prm->name);
        /* default */
        if (*p == '=') {
            const char *dv = ++p;
            while (*p != ',' && p < close) p++;
            prm->default_value = parse_default(dv, (size_t)(p - dv));
            if (!prm->default_value) return -1;
            if (prm->default_value == Py_None) prm->optional = true;
        }
        prm->kwonly = kwonly;
        if (!kwonly) sig->npositional++;
        bool is_input = prm->type == EM_ARG_TENSOR || prm->type == EM_ARG_TENSOR_OR_NUMBER;
        if (!is_input || prm->default_value) inputs_done = true;
        if (!inputs_done) sig->ninputs++;
        if (!PyUnicode_CompareWithASCIIString(prm->name, "out")) sig->out_index = sig->nparams;
        sig->nparams++;
    }
    return 0;
bad:
    PyErr_Format(PyExc_SystemError, "ember: bad op signature: %s", text);
    return -1;
}

/* ------------------------------------------------------------- checks */



static bool is_int(PyObject *o) {
    if (PyBool_Check(o)) return false;
    if (PyLong_Check(o)) return true;
    if (PyFloat_Check(o) || PyUnicode_Check(o)) return false;
    if (em_is_tensor(o)) {
        EmTensor *t = (EmTensor *)o;
        return t->numel == 1 && t->ndim == 0 && em_is_int((EmDType)t->dtype);
    }
    return PyIndex_Check(o);
}

static bool type_ok(const EmParam *p, PyObject *v) {
    if (v == Py_None) return p->optional || p->type == EM_ARG_OBJECT;
    switch (p->type) {
    case EM_ARG_TENSOR: return em_is_tensor(v);
    case EM_ARG_TENSOR_OR_NUMBER: return em_is_tensor(v) || em_is_number(v);
    case EM_ARG_NUMBER:
        return em_is_number(v) || (em_is_tensor(v) && ((EmTensor *)v)->numel == 1);
    case EM_ARG_INT: return is_int(v);
    case EM_ARG_FLOAT:
        return (em_is_number(v) && !PyBool_Check(v)) || (em_is_tensor(v) && ((EmTensor *)v)->numel == 1);
    case EM_ARG_BOOL: return PyBool_Check(v);
    case EM_ARG_STR: return PyUnicode_Check(v);
    case EM_ARG_SHAPE_OR_DTYPE:
        if (Py_TYPE(v) == &EmDTypeType) return true;
        /* fall through */
    case EM_ARG_INTLIST:
        if (is_int(v)) return true;
        if (!PyTuple_Check(v) && !PyList_Check(v)) return false;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++)
            if (!is_int(PySequence_Fast_ITEMS(v)[i])) return false;
        return true;
    case EM_ARG_TENSOR_LIST:
        if (!PyTuple_Check(v) && !PyList_Check(v)) return false;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++)
            if (!em_is_tensor(PySequence_Fast_ITEMS(v)[i])) return false;
        return true;
    case EM_ARG_DTYPE:
        return Py_TYPE(v) == &EmDTypeType || v == (PyObject *)&PyFloat_Type ||
               v == (PyObject *)&PyLong_Type || v == (PyObject *)&PyBool_Type;
    case EM_ARG_DEVICE:
        return Py_TYPE(v) == &EmDeviceType || PyUnicode_Check(v) ||
               (PyLong_Check(v) && !PyBool_Check(v));
    case EM_ARG_GENERATOR: return PyObject_TypeCheck(v, &EmGeneratorType);
    case EM_ARG_OBJECT: return true;
    }
    return false;
}

static int type_error(const EmSignature *sig, int i, PyObject *v, bool positional) {
    const EmParam *p = &sig->params[i];
    if (positional)
        PyErr_Format(PyExc_TypeError, "%s(): argument '%U' (position %d) must be %s, not %.100s",
                     sig->fname, p->name, i + 1, type_desc(p->type),
                     Py_TYPE(v)->tp_name);
    else
        PyErr_Format(PyExc_TypeError, "%s(): argument '%U' must be %s, not %.100s",
                     sig->fname, p->name, type_desc(p->type), Py_TYPE(v)->tp_name);
    return -1;
}

/* NumPy's keyword names, which torch accepts for every op: axis for dim,
 * keepdims for keepdim, x / a / x1 for input, x2 for other. The parameter
 * they stand for, or -1. */
static int numpy_alias(const EmSignature *sig, PyObject *key) {
    static const char *const alias[][2] = {{"axis", "dim"}, {"keepdims", "keepdim"}, {"x", "input"},
                                           {"a", "input"},  {"x1", "input"},        {"x2", "other"}};
    for (size_t k = 0; k < sizeof alias / sizeof alias[0]; k++) {
        if (PyUnicode_CompareWithASCIIString(key, alias[k][0])) continue;
        for (int i = 0; i < sig->nparams; i++)
            if (!PyUnicode_CompareWithASCIIString(sig->params[i].name, alias[k][1])) return i;
        return -1;
    }
    return -1;
}

int em_bind_args(const EmSignature *sig, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, EmCall *c) {
    const int np = sig->nparams;
    int next = 0;
    c->owned = NULL;
    c->owned_tensor = NULL;
    c->reflected = false;
    for (int i = 0; i < np; i++) c->args[i] = NULL;
    if (self) c->args[next++] = self;

    /* shapes as varargs: f(2, 3) for f((2, 3)) when the next param is IntList */
    if (next < np && nargs > 0 && is_int(args[0]) &&
        (sig->params[next].type == EM_ARG_INTLIST || sig->params[next].type == EM_ARG_SHAPE_OR_DTYPE)) {
        Py_ssize_t k = 0;
        while (k < nargs && is_int(args[k])) k++;
        if (k > 1 || (k == 1 && nargs > sig->npositional - next)) {
            PyObject *tup = PyTuple_New(k);
            if (!tup) return -1;
            for (Py_ssize_t j = 0; j < k; j++) PyTuple_SET_ITEM(tup, j, Py_NewRef(args[j]));
            c->owned = tup;
            c->args[next++] = tup;
            args += k;
            nargs -= k;
        }
    }
    if (nargs > sig->npositional - next) {
        PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument%s but %zd %s given",
                     sig->fname, sig->npositional,
                     sig->npositional == 1 ? "" : "s", nargs + next,
                     nargs + next == 1 ? "was" : "were");
        goto fail;
    }
    for (Py_ssize_t j = 0; j < nargs; j++, next++) {
        if (!type_ok(&sig->params[next], args[j])) {
            type_error(sig, next, args[j], true);
            goto fail;
        }
        c->args[next] = args[j];
    }
    if (kwnames) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t j = 0; j < nkw; j++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, j), *val = args[nargs + j];
            int idx = -1;
            for (int i = 0; i < np && idx < 0; i++)
                if (sig->params[i].name == key) idx = i;
            for (int i = 0; i < np && idx < 0; i++)
                if (PyUnicode_Compare(sig->params[i].name, key) == 0) idx = i;
            if (idx < 0) idx = numpy_alias(sig, key);
            if (idx < 0 || (self && idx == 0)) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'",
                             sig->fname, key);
                goto fail;
            }
            if (c->args[idx]) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'",
                             sig->fname, key);
                goto fail;
            }
            if (!type_ok(&sig->params[idx], val)) {
                type_error(sig, idx, val, false);
                goto fail;
            }
            c->args[idx] = val;
        }
    }
    for (int i = 0; i < np; i++) {
        if (c->args[i]) continue;
        if (!sig->params[i].default_value) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%U' (pos %d)",
                         sig->fname, sig->params[i].name, i + 1);
            goto fail;
        }
        c->args[i] = sig->params[i].default_value;
    }
    return 0;
fail:
    Py_CLEAR(c->owned);
    return -1;
}

/* ---------------------------------------------------------- accessors */

int em_arg_int(EmCall *c, int i, int64_t *out) {
    PyObject *v = c->args[i];
    if (em_is_tensor(v)) {
        EmScalar s;
        if (em_scalar_from_py(v, &s) < 0) return -1;
        *out = s.v.i;
        return 0;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

int em_arg_float(EmCall *c, int i, double *out) {
    if (em_is_tensor(c->args[i])) {
        EmScalar s;
        if (em_scalar_from_py(c->args[i], &s) < 0) return -1;
        *out = em_scalar_to_double(s);
        return 0;
    }
    double x = PyFloat_AsDouble(c->args[i]);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

int em_arg_bool(EmCall *c, int i, bool *out) {
    *out = c->args[i] == Py_True;
    return 0;
}

int em_arg_scalar(EmCall *c, int i, EmScalar *out) { return em_scalar_from_py(c->args[i], out); }

int em_arg_operand(EmCall *c, int i, EmOperand *out) {
    int r = em_to_operand(c->args[i], out);
    if (r > 0) {
        PyErr_Format(PyExc_TypeError, "expected a Tensor or a number, got %.100s",
                     Py_TYPE(c->args[i])->tp_name);
        return -1;
    }
    return r;
}

int em_arg_intlist(EmCall *c, int i, int *n, int64_t *vals) {
    return em_parse_intlist(c->args[i], c->def->name, n, vals);
}

int em_arg_dtype(EmCall *c, int i, EmDType *out) {
    if (c->args[i] == Py_None) return 1;
    return em_dtype_from_py(c->args[i], out);
}

/* ------------------------------------------- functions outside the table */

static PyObject *function_trampoline(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames) {
    const EmOpDef *def = PyCapsule_GetPointer(capsule, NULL);
    if (EM_UNLIKELY(em_tf_wanted_vector(NULL, args, nargs, kwnames))) /* Note [torch function] */
        return em_tf_dispatch_vector(PyCapsule_GetContext(capsule), NULL, args, nargs, kwnames);
    EmCall c;
    c.def = def;
    if (em_bind_args(&def->sig, NULL, args, nargs, kwnames, &c) < 0) return NULL;
    c.inplace = false;
    int oi = def->sig.out_index;
    c.out = oi >= 0 && c.args[oi] != Py_None ? (EmTensor *)c.args[oi] : NULL;
    /* factories: nothing to record; device='cuda' builds on the host and moves */
    PyObject *dev = NULL;
    for (int i = 0; i < def->sig.nparams; i++) {
        if (def->sig.params[i].type != EM_ARG_DEVICE) continue;
        /* set_default_device / `with ember.device(...)`: the device of factories that
         * build from nothing (not the *_like ones, whose input says where) */
        if (c.args[i] == Py_None && em_default_device_obj && def->sig.nparams > 0 &&
            def->sig.params[0].type != EM_ARG_TENSOR && def->sig.params[0].type != EM_ARG_TENSOR_OR_NUMBER)
            c.args[i] = em_default_device_obj; /* borrowed: the default holds it */
        dev = c.args[i];
    }
    PyObject *r = em_cuda_used || em_meta_used || (dev && dev != Py_None) ? em_device_dispatch(&c)
                                                                           : def->impl(&c);
    Py_XDECREF(c.owned);
    Py_XDECREF(c.owned_tensor);
    return r;
}

int em_register_functions(PyObject *m, EmOpDef *defs, int n) {
    PyObject *modname = PyModule_GetNameObject(m);
    if (!modname) return -1;
    for (int i = 0; i < n; i++) {
        if (em_signature_parse(defs[i].signature, &defs[i].sig) < 0) goto fail;
        PyMethodDef *md = PyMem_Calloc(1, sizeof(PyMethodDef)); /* lives as long as the module */
        if (!md) goto fail;
        md->ml_name = defs[i].name;
        md->ml_meth = (PyCFunction)(void (*)(void))function_trampoline;
        md->ml_flags = METH_FASTCALL | METH_KEYWORDS;
        md->ml_doc = defs[i].signature;
        PyObject *cap = PyCapsule_New(&defs[i], NULL, NULL);
        if (!cap) goto fail;
        PyObject *f = PyCFunction_NewEx(md, cap, modname);
        Py_DECREF(cap);
        /* the function itself, for __torch_function__ (borrowed: f owns the capsule) */
        if (f && PyCapsule_SetContext(cap, f) < 0) Py_CLEAR(f);
        if (!f || PyModule_AddObject(m, defs[i].name, f) < 0) {
            Py_XDECREF(f);
            goto fail;
        }
    }
    Py_DECREF(modname);
    return 0;
fail:
    Py_DECREF(modname);
    return -1;
}

PyObject *em_arg_named(EmCall *c, const char *name) {
    for (int i = 0; i < c->def->sig.nparams; i++)
        if (!PyUnicode_CompareWithASCIIString(c->def->sig.params[i].name, name)) return c->args[i];
    return NULL;
}
