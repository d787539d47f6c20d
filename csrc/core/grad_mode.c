/* grad_mode.c — whether ops record graphs: grad mode and inference mode,
 * thread-local as in torch (a thread starts with grad mode on). */
#include "../ember.h"

static _Thread_local int grad_disabled;  /* 0 means enabled, so new threads start enabled */
static _Thread_local int inference_depth;

bool em_grad_enabled(void) { return !grad_disabled; }
void em_set_grad_enabled(bool on) { grad_disabled = !on; }
bool em_inference_mode(void) { return inference_depth > 0; }

static PyObject *is_grad_enabled(PyObject *m, PyObject *u) { return PyBool_FromLong(em_grad_enabled()); }

static PyObject *set_grad_enabled(PyObject *m, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    em_set_grad_enabled(on);
    Py_RETURN_NONE;
}

static PyObject *is_inference_mode_enabled(PyObject *m, PyObject *u) {
    return PyBool_FromLong(em_inference_mode());
}

/* _C._enter_inference_mode(enabled) -> previous grad mode; _exit_(prev) */
static PyObject *enter_inference_mode(PyObject *m, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    PyObject *prev = PyBool_FromLong(em_grad_enabled());
    if (on) {
        inference_depth++;
        em_set_grad_enabled(false);
    }
    return prev;
}

static PyObject *exit_inference_mode(PyObject *m, PyObject *args) {
    PyObject *prev, *was_on;
    if (!PyArg_ParseTuple(args, "OO", &prev, &was_on)) return NULL;
    if (PyObject_IsTrue(was_on) && inference_depth > 0) inference_depth--;
    em_set_grad_enabled(PyObject_IsTrue(prev));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"is_grad_enabled", is_grad_enabled, METH_NOARGS, "Whether ops record autograd graphs."},
    {"_set_grad_enabled", set_grad_enabled, METH_O, NULL},
    {"is_inference_mode_enabled", is_inference_mode_enabled, METH_NOARGS, NULL},
    {"_enter_inference_mode", enter_inference_mode, METH_O, NULL},
    {"_exit_inference_mode", exit_inference_mode, METH_VARARGS, NULL},
    {NULL},
};

int em_init_grad_mode(PyObject *m) { return PyModule_AddFunctions(m, methods); }
