/* autocast.c — Note [autocast]: mixed precision at the op boundary.
 *
 * Inside `ember.autocast(device_type, dtype)` every op call from user code
 * (em_call_run) first casts its floating-point tensor arguments on that
 * device type by the op's policy, as torch's autocast does:
 *   LOWER    matmul-like ops run in the autocast dtype (float16/bfloat16),
 *   FP32     ops that lose accuracy in half precision (exp, log, softmax,
 *            norms, losses, ...) run in float32,
 *   PROMOTE  ops mixing several tensors run in the widest of their dtypes.
 * float64 tensors are never cast, and tensors on another device type are
 * left alone. The casts are ordinary `_to_copy` calls, so autograd records
 * them and gradients return in the parameters' dtypes. While an op's impl
 * runs (and during backward), autocast is suspended: only the outermost call
 * casts, as torch's dispatcher applies autocast once above the kernels.
 * Each op's policy per device type is its row's autocast column, AC(cpu,
 * cuda), following torch's CUDA and CPU autocast policies for the ops ember
 * has (torch.amp docs, "Autocast Op Reference").
 */
#include "../ember.h"

enum { AC_CPU = EM_CAST_CPU, AC_CUDA = EM_CAST_CUDA };

static struct {
    bool enabled;
    EmDType dtype;
} state[2] = {{false, EM_BFLOAT16}, {false, EM_FLOAT16}};
bool em_autocast_on;     /* some device type has autocast enabled */
int em_autocast_suspend; /* > 0 inside an impl or a backward pass */

static bool eligible(PyObject *o, int dev) {
    if (!em_is_tensor(o)) return false;
    EmTensor *t = (EmTensor *)o;
    return em_is_float(t->dtype) && t->dtype != EM_FLOAT64 && (em_is_cpu(t) ? AC_CPU : AC_CUDA) == dev;
}

/* x cast to d through the op table (recorded), or x itself. New reference. */
static PyObject *cast(PyObject *x, EmDType d) {
    if (((EmTensor *)x)->dtype == d) return Py_NewRef(x);
    PyObject *args[2] = {x, em_dtype_object(d)};
    return em_op(EM_OP__to_copy, 2, args);
}

/* Apply f to every eligible tensor of an argument (one level into lists). */
static PyObject *cast_value(PyObject *o, int dev, EmDType d) {
    if (PyList_Check(o) || PyTuple_Check(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject *r = PyList_Check(o) ? PyList_New(n) : PyTuple_New(n);
        for (Py_ssize_t j = 0; r && j < n; j++) {
            PyObject *x = PySequence_Fast_ITEMS(o)[j];
            PyObject *y = eligible(x, dev) ? cast(x, d) : Py_NewRef(x);
            if (!y) Py_CLEAR(r);
            else if (PyList_Check(r)) PyList_SET_ITEM(r, j, y);
            else PyTuple_SET_ITEM(r, j, y);
        }
        return r;
    }
    return eligible(o, dev) ? cast(o, d) : Py_NewRef(o);
}

/* The device type the call runs on: that of its first tensor argument. */
static int call_device(EmCall *c) {
    for (int i = 0; i < c->def->sig.nparams; i++) {
        PyObject *a = c->args[i];
        if (PyList_Check(a) || PyTuple_Check(a)) a = PySequence_Fast_GET_SIZE(a) ? PySequence_Fast_ITEMS(a)[0] : NULL;
        if (a && em_is_tensor(a)) return em_is_cpu((EmTensor *)a) ? AC_CPU : AC_CUDA;
    }
    return -1;
}

static EmDType widest(EmCall *c, int dev) {
    EmDType w = EM_NUM_DTYPES;
    for (int i = 0; i < c->def->sig.nparams; i++) {
        PyObject *a = c->args[i];
        Py_ssize_t n = PyList_Check(a) || PyTuple_Check(a) ? PySequence_Fast_GET_SIZE(a) : 1;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *x = PyList_Check(a) || PyTuple_Check(a) ? PySequence_Fast_ITEMS(a)[j] : a;
            if (!eligible(x, dev)) continue;
            EmDType d = (EmDType)((EmTensor *)x)->dtype;
            w = w == EM_NUM_DTYPES ? d : em_promote_types(w, d);
        }
    }
    return w;
}

/* Cast c's arguments in place by the op's policy; the replaced arguments
 * are kept in *owned (a list) for the caller to release. 0 / -1. */
int em_autocast_args(EmCall *c, PyObject **owned) {
    *owned = NULL;
    int row = em_op_row(c->def);
    /* in-place and out= variants are other ops to torch's autocast: never cast */
    if (c->out || c->inplace || c->def->writes_self) return 0;
    int dev = row >= 0 ? call_device(c) : -1;
    if (dev < 0 || !state[dev].enabled || c->def->autocast[dev] == EM_CAST_NONE) return 0;
    EmCastPolicy p = (EmCastPolicy)c->def->autocast[dev];
    EmDType to = p == EM_CAST_LOWER ? state[dev].dtype : p == EM_CAST_FP32 ? EM_FLOAT32 : widest(c, dev);
    if (to == EM_NUM_DTYPES) return 0;
    if (!(*owned = PyList_New(0))) return -1;
    em_autocast_suspend++; /* the casts themselves are plain ops */
    int rc = 0;
    for (int i = 0; i < c->def->sig.nparams && rc == 0; i++) {
        EmArgType ty = c->def->sig.params[i].type;
        if (i == c->def->sig.out_index ||
            !(ty == EM_ARG_TENSOR || ty == EM_ARG_TENSOR_OR_NUMBER || ty == EM_ARG_TENSOR_LIST))
            continue;
        PyObject *v = cast_value(c->args[i], dev, to);
        if (!v || PyList_Append(*owned, v) < 0) rc = -1;
        else c->args[i] = v; /* owned by *owned */
        Py_XDECREF(v);
    }
    em_autocast_suspend--;
    return rc;
}

/* _C._set_autocast(device_type, enabled, dtype) -> (previous enabled, previous dtype) */
static PyObject *py_set_autocast(PyObject *m, PyObject *args) {
    const char *devtype;
    int enabled;
    PyObject *dt;
    if (!PyArg_ParseTuple(args, "spO", &devtype, &enabled, &dt)) return NULL;
    int dev = !strcmp(devtype, "cuda") ? AC_CUDA : !strcmp(devtype, "cpu") ? AC_CPU : -1;
    if (dev < 0) {
        PyErr_Format(PyExc_RuntimeError, "User specified an unsupported autocast device_type '%s'", devtype);
        return NULL;
    }
    EmDType d = state[dev].dtype;
    if (dt != Py_None && em_dtype_from_py(dt, &d) < 0) return NULL;
    PyObject *prev = Py_BuildValue("(OO)", state[dev].enabled ? Py_True : Py_False, em_dtype_object(state[dev].dtype));
    if (!prev) return NULL;
    state[dev].enabled = enabled;
    state[dev].dtype = d;
    em_autocast_on = state[AC_CPU].enabled || state[AC_CUDA].enabled;
    return prev;
}

static PyObject *py_get_autocast(PyObject *m, PyObject *arg) {
    const char *devtype = PyUnicode_AsUTF8(arg);
    if (!devtype) return NULL;
    int dev = !strcmp(devtype, "cuda") ? AC_CUDA : AC_CPU;
    return Py_BuildValue("(OO)", state[dev].enabled ? Py_True : Py_False, em_dtype_object(state[dev].dtype));
}

static PyMethodDef autocast_methods[] = {
    {"_set_autocast", py_set_autocast, METH_VARARGS, NULL},
    {"_get_autocast", py_get_autocast, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int em_init_autocast(PyObject *m) {
    return PyModule_AddFunctions(m, autocast_methods);
}
