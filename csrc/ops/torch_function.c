/* torch_function.c — the __torch_function__ protocol (Note [torch function]),
 * the dispatcher's first step for calls from Python.
 *
 * Note [torch function]: torch lets a Tensor subclass, or any object whose
 * type defines __torch_function__, take over a call of a torch function or
 * Tensor method that it is an argument of; a TorchFunctionMode on the mode
 * stack takes over every call. ember checks at its Python entry points (the
 * op table's functions and methods in bindings.c, the number, comparison and
 * indexing slots and the hand-written methods that return tensors in
 * tensor_type.c, the factories) and nowhere below: C code calling ops
 * (em_op) is inside an implementation already, as aten is in torch.
 *
 * The check costs a type comparison per argument when nothing overrides: an
 * exact Tensor, a number, None or a string never overrides; any other type
 * is looked up once per call in its MRO (CPython's method cache answers).
 * nn.Parameter and nn.Buffer set __torch_function__ to
 * _disabled_torch_function_impl, which does not count. When something does
 * override, the call goes to ember/overrides.py (handle_torch_function), which
 * runs the modes, then the overriding types, in torch's order.
 *
 * State: em_tf_modes is the length of the mode stack ember/overrides.py
 * keeps; em_tf_disabled is 1 under DisableTorchFunctionSubclass (modes
 * still run) and 2 under DisableTorchFunction (nothing runs). Both are
 * process-wide, as ember's grad mode is. */
#include "../ember.h"

int em_tf_modes;
int em_tf_disabled;

static PyObject *handler;       /* ember.overrides._handle_from_c(func, args, kwargs) */
static PyObject *disabled_impl; /* _C._disabled_torch_function_impl */
static PyObject *str_tf;        /* "__torch_function__" */

static bool type_overrides(PyTypeObject *tp) {
    if (tp == &EmTensorType || tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type ||
        tp == Py_TYPE(Py_None) || tp == &PyUnicode_Type || tp == &PyComplex_Type)
        return false;
    /* the last type found not to override (nn.Parameter, mostly), while its
     * attributes are unchanged (CPython bumps the version tag on a change) */
    static PyTypeObject *plain;
    static unsigned int plain_tag;
    if (tp == plain && tp->tp_version_tag == plain_tag && plain_tag) return false;
    PyObject *f = _PyType_Lookup(tp, str_tf); /* borrowed */
    if (f && f != disabled_impl) return true;
    plain = tp;
    plain_tag = tp->tp_version_tag;
    return false;
}

bool em_tf_overrides(PyObject *o) {
    PyTypeObject *tp = Py_TYPE(o);
    if (tp == &PyTuple_Type || tp == &PyList_Type) { /* TensorList arguments: one level, as torch */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        for (Py_ssize_t i = 0; i < n; i++)
            if (type_overrides(Py_TYPE(items[i]))) return true;
        return false;
    }
    return type_overrides(tp);
}

bool em_tf_wanted_tuple(PyObject *self, PyObject *args, PyObject *kw) {
    if (!em_tf_active()) return false;
    if (em_tf_modes) return true;
    if (self && em_tf_overrides(self)) return true;
    for (Py_ssize_t i = 0; args && i < PyTuple_GET_SIZE(args); i++)
        if (em_tf_overrides(PyTuple_GET_ITEM(args, i))) return true;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (kw && PyDict_Next(kw, &pos, &k, &v))
        if (em_tf_overrides(v)) return true;
    return false;
}

static PyObject *call_handler(PyObject *func, PyObject *args, PyObject *kwargs) {
    if (!handler) {
        PyErr_SetString(PyExc_RuntimeError, "ember: the __torch_function__ handler is not registered");
        return NULL;
    }
    PyObject *call[3] = {func, args, kwargs};
    return PyObject_Vectorcall(handler, call, 3, NULL);
}

PyObject *em_tf_dispatch_vector(PyObject *func, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    Py_ssize_t lead = self ? 1 : 0;
    PyObject *tup = PyTuple_New(lead + nargs), *kw = PyDict_New(), *r = NULL;
    if (!tup || !kw) goto done;
    if (self) PyTuple_SET_ITEM(tup, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tup, lead + i, Py_NewRef(args[i]));
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++)
        if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) goto done;
    r = call_handler(func, tup, kw);
done:
    Py_XDECREF(tup);
    Py_XDECREF(kw);
    return r;
}

PyObject *em_tf_dispatch_tuple(PyObject *func, PyObject *self, PyObject *args, PyObject *kw) {
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    PyObject *tup = PyTuple_New(n + (self ? 1 : 0)), *kwd = kw ? PyDict_Copy(kw) : PyDict_New(), *r = NULL;
    if (tup && kwd) {
        if (self) PyTuple_SET_ITEM(tup, 0, Py_NewRef(self));
        for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tup, i + (self ? 1 : 0), Py_NewRef(PyTuple_GET_ITEM(args, i)));
        r = call_handler(func, tup, kwd);
    }
    Py_XDECREF(tup);
    Py_XDECREF(kwd);
    return r;
}

PyObject *em_tf_dispatch_method(const char *name, PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *func = PyObject_GetAttrString((PyObject *)&EmTensorType, name);
    if (!func) return NULL;
    PyObject *r = em_tf_dispatch_tuple(func, self, args, kw);
    Py_DECREF(func);
    return r;
}

/* Tensor.__op__(a, b) for a number slot; the reflected method when the
 * tensor is the right operand (1 + t: Tensor.__radd__(t, 1)). */
PyObject *em_tf_dispatch_binary(const char *name, const char *rname, PyObject *a, PyObject *b) {
    bool reflected = !em_is_tensor(a) && rname;
    PyObject *pair = reflected ? PyTuple_Pack(1, a) : PyTuple_Pack(1, b);
    if (!pair) return NULL;
    PyObject *r = em_tf_dispatch_method(reflected ? rname : name, reflected ? b : a, pair, NULL);
    Py_DECREF(pair);
    return r;
}

/* ------------------------------------------------------------ _C functions */

/* What nn.Parameter's __torch_function__ is: "do not override". Called
 * directly it runs func without the protocol, as torch's does. */
static PyObject *disabled_torch_function_impl(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) {
    if (n < 2 || n > 4 || k) {
        PyErr_SetString(PyExc_TypeError, "_disabled_torch_function_impl(func, types, args=(), kwargs=None)");
        return NULL;
    }
    PyObject *args = n > 2 && a[2] != Py_None ? Py_NewRef(a[2]) : PyTuple_New(0);
    PyObject *kwargs = n > 3 && a[3] != Py_None ? a[3] : NULL;
    if (!args) return NULL;
    PyObject *targs = PySequence_Tuple(args);
    Py_DECREF(args);
    if (!targs) return NULL;
    int prev = em_tf_disabled;
    if (em_tf_disabled < 1) em_tf_disabled = 1;
    PyObject *r = PyObject_Call(a[0], targs, kwargs);
    em_tf_disabled = prev;
    Py_DECREF(targs);
    return r;
}

static PyObject *set_handler(PyObject *m, PyObject *f) {
    if (!PyCallable_Check(f)) {
        PyErr_SetString(PyExc_TypeError, "_set_torch_function_handler: expected a callable");
        return NULL;
    }
    Py_XSETREF(handler, Py_NewRef(f));
    Py_RETURN_NONE;
}

/* _C._set_torch_function_state(modes, disabled) -> the previous (modes, disabled) */
static PyObject *set_state(PyObject *m, PyObject *args) {
    int modes, disabled;
    if (!PyArg_ParseTuple(args, "ii:_set_torch_function_state", &modes, &disabled)) return NULL;
    if (modes < 0 || disabled < 0 || disabled > 2) {
        PyErr_Format(PyExc_ValueError, "_set_torch_function_state: bad state (%d, %d)", modes, disabled);
        return NULL;
    }
    PyObject *prev = Py_BuildValue("(ii)", em_tf_modes, em_tf_disabled);
    em_tf_modes = modes;
    em_tf_disabled = disabled;
    return prev;
}

static PyObject *get_state(PyObject *m, PyObject *u) { return Py_BuildValue("(ii)", em_tf_modes, em_tf_disabled); }

/* _C._has_torch_function(iterable): whether any element (or element of a
 * list/tuple element) overrides, or a mode is active. */
static PyObject *has_torch_function(PyObject *m, PyObject *seq) {
    if (!em_tf_active()) Py_RETURN_FALSE;
    if (em_tf_modes) Py_RETURN_TRUE;
    PyObject *fast = PySequence_Fast(seq, "has_torch_function: expected a sequence");
    if (!fast) return NULL;
    bool any = false;
    for (Py_ssize_t i = 0; !any && i < PySequence_Fast_GET_SIZE(fast); i++)
        any = em_tf_overrides(PySequence_Fast_GET_ITEM(fast, i));
    Py_DECREF(fast);
    return PyBool_FromLong(any);
}

static PyObject *has_torch_function_unary(PyObject *m, PyObject *o) {
    return PyBool_FromLong(em_tf_active() && (em_tf_modes || em_tf_overrides(o)));
}

static PyObject *has_torch_function_variadic(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    if (!em_tf_active()) Py_RETURN_FALSE;
    if (em_tf_modes) Py_RETURN_TRUE;
    for (Py_ssize_t i = 0; i < n; i++)
        if (em_tf_overrides(a[i])) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyMethodDef tf_methods[] = {
    {"_disabled_torch_function_impl", (PyCFunction)(void (*)(void))disabled_torch_function_impl,
     METH_FASTCALL | METH_KEYWORDS, "The __torch_function__ of types that do not override (nn.Parameter)."},
    {"_set_torch_function_handler", set_handler, METH_O, "Register ember.overrides' dispatcher."},
    {"_set_torch_function_state", set_state, METH_VARARGS,
     "Set (mode stack length, disabled level); returns the previous pair."},
    {"_get_torch_function_state", get_state, METH_NOARGS, "(mode stack length, disabled level)."},
    {"_has_torch_function", has_torch_function, METH_O, "Whether an argument overrides (or a mode is on)."},
    {"_has_torch_function_unary", has_torch_function_unary, METH_O, "has_torch_function for one argument."},
    {"_has_torch_function_variadic", (PyCFunction)(void (*)(void))has_torch_function_variadic, METH_FASTCALL,
     "has_torch_function for the arguments given."},
    {NULL},
};

int em_init_torch_function(PyObject *m) {
    if (!(str_tf = PyUnicode_InternFromString("__torch_function__"))) return -1;
    if (PyModule_AddFunctions(m, tf_methods) < 0) return -1;
    disabled_impl = PyObject_GetAttrString(m, "_disabled_torch_function_impl");
    return disabled_impl ? 0 : -1;
}
