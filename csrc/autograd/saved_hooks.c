/* saved_hooks.c — torch.autograd.graph.saved_tensors_hooks: a stack of
 * (pack_hook, unpack_hook) pairs. While one is on the stack, every tensor a
 * node saves for backward (em_saved_set, and autograd.Function's
 * save_for_backward) is stored as pack_hook(tensor), and unpack_hook(packed)
 * gives the tensor back when the backward formula reads it (em_saved_get).
 * The innermost pair applies. disable_saved_tensors_hooks makes pushing (and
 * saving under existing hooks) raise its message. One stack per process
 * (torch's is per thread); it is only touched with the GIL held. */
#include "../ember.h"

static PyObject *hooks_stack;      /* list of (pack, unpack) tuples */
static PyObject *disabled_message; /* str while disabled, else NULL */

PyObject *em_saved_hooks_current(void) {
    if (!hooks_stack || PyList_GET_SIZE(hooks_stack) == 0) return NULL;
    if (disabled_message) {
        PyErr_SetObject(PyExc_RuntimeError, disabled_message);
        return NULL;
    }
    return PyList_GET_ITEM(hooks_stack, PyList_GET_SIZE(hooks_stack) - 1);
}

/* _C._saved_tensors_hooks_push(pack, unpack) */
static PyObject *hooks_push(PyObject *mod, PyObject *args) {
    PyObject *pack, *unpack;
    if (!PyArg_ParseTuple(args, "OO:_saved_tensors_hooks_push", &pack, &unpack)) return NULL;
    if (disabled_message) {
        PyErr_SetObject(PyExc_RuntimeError, disabled_message);
        return NULL;
    }
    if (!PyCallable_Check(pack) || !PyCallable_Check(unpack)) {
        PyErr_SetString(PyExc_TypeError, "saved_tensors_hooks: pack_hook and unpack_hook must be callable");
        return NULL;
    }
    if (!hooks_stack && !(hooks_stack = PyList_New(0))) return NULL;
    PyObject *pair = PyTuple_Pack(2, pack, unpack);
    if (!pair) return NULL;
    int r = PyList_Append(hooks_stack, pair);
    Py_DECREF(pair);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *hooks_pop(PyObject *mod, PyObject *unused) {
    Py_ssize_t n = hooks_stack ? PyList_GET_SIZE(hooks_stack) : 0;
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError, "saved_tensors_hooks: no hooks to pop");
        return NULL;
    }
    if (PyList_SetSlice(hooks_stack, n - 1, n, NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

/* _C._saved_tensors_hooks_current() -> (pack, unpack) or None */
static PyObject *hooks_get(PyObject *mod, PyObject *unused) {
    PyObject *top = em_saved_hooks_current();
    if (!top) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return Py_NewRef(top);
}

/* _C._saved_tensors_hooks_set_disabled(message or None) -> the previous message or None */
static PyObject *hooks_set_disabled(PyObject *mod, PyObject *msg) {
    if (msg != Py_None && !PyUnicode_Check(msg)) {
        PyErr_SetString(PyExc_TypeError, "disable_saved_tensors_hooks: the error message must be a str");
        return NULL;
    }
    PyObject *prev = disabled_message ? disabled_message : Py_NewRef(Py_None);
    disabled_message = msg == Py_None ? NULL : Py_NewRef(msg);
    return prev; /* the reference the global held */
}

static PyMethodDef methods[] = {
    {"_saved_tensors_hooks_push", hooks_push, METH_VARARGS, NULL},
    {"_saved_tensors_hooks_pop", hooks_pop, METH_NOARGS, NULL},
    {"_saved_tensors_hooks_current", hooks_get, METH_NOARGS, NULL},
    {"_saved_tensors_hooks_set_disabled", hooks_set_disabled, METH_O, NULL},
    {NULL},
};

int em_init_saved_hooks(PyObject *m) { return PyModule_AddFunctions(m, methods); }
