/* device.c — `ember.device`: parsing 'cpu' / 'cuda' / 'cuda:1', equality,
 * repr. Whether a GPU can hold tensors is core/cuda.c's question. */
#include "../ember.h"

const char *em_device_str(EmDevice d, char *buf, size_t n) {
    const char *type = d.type == EM_CPU ? "cpu" : d.type == EM_META ? "meta" : "cuda";
    if (d.index < 0)
        snprintf(buf, n, "%s", type);
    else
        snprintf(buf, n, "%s:%d", type, d.index);
    return buf;
}

static int parse_device_string(PyObject *s, EmDevice *out) {
    const char *str = PyUnicode_AsUTF8(s);
    if (!str) return -1;
    const char *colon = strchr(str, ':');
    size_t tlen = colon ? (size_t)(colon - str) : strlen(str);
    if (tlen == 3 && strncmp(str, "cpu", 3) == 0)
        out->type = EM_CPU;
    else if (tlen == 4 && strncmp(str, "cuda", 4) == 0)
        out->type = EM_CUDA;
    else if (tlen == 4 && strncmp(str, "meta", 4) == 0)
        out->type = EM_META;
    else
        goto bad;
    out->index = -1;
    if (colon) {
        const char *p = colon + 1;
        if (!*p || (p[0] == '0' && p[1])) goto bad; /* no leading zeros */
        long idx = 0;
        for (; *p; p++) {
            if (*p < '0' || *p > '9') goto bad;
            idx = idx * 10 + (*p - '0');
            if (idx > 127) goto bad;
        }
        out->index = (int8_t)idx;
    }
    return 0;
bad:
    PyErr_Format(PyExc_RuntimeError,
                 "Invalid device string: '%s' (expected 'cpu', 'cuda', 'cuda:N' or 'meta')", str);
    return -1;
}

int em_device_from_py(PyObject *o, EmDevice *out) {
    if (Py_TYPE(o) == &EmDeviceType) {
        *out = ((EmDeviceObject *)o)->device;
        return 0;
    }
    if (PyUnicode_Check(o)) return parse_device_string(o, out);
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        long i = PyLong_AsLong(o);
        if (i == -1 && PyErr_Occurred()) return -1;
        if (i < 0 || i > 127) {
            PyErr_Format(PyExc_RuntimeError, "Device index must not be negative, got %ld", i);
            return -1;
        }
        out->type = EM_CUDA; /* torch: a bare int means a CUDA ordinal */
        out->index = (int8_t)i;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "expected a device (str, int or ember.device), not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

PyObject *em_device_object(EmDevice d) {
    EmDeviceObject *o = PyObject_New(EmDeviceObject, &EmDeviceType);
    if (o) o->device = d;
    return (PyObject *)o;
}

static PyObject *device_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"type", "index", NULL};
    PyObject *t, *idx = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:device", kwlist, &t, &idx)) return NULL;
    EmDevice d;
    if (em_device_from_py(t, &d) < 0) return NULL;
    if (idx != Py_None) {
        if (PyUnicode_Check(t) && strchr(PyUnicode_AsUTF8(t), ':')) {
            PyErr_SetString(PyExc_RuntimeError,
                            "type (string) must not include an index because index was passed explicitly");
            return NULL;
        }
        long i = PyLong_AsLong(idx);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || i > 127) {
            PyErr_Format(PyExc_RuntimeError, "Device index must not be negative, got %ld", i);
            return NULL;
        }
        d.index = (int8_t)i;
    }
    if (d.type == EM_CPU && d.index > 0) {
        PyErr_Format(PyExc_RuntimeError, "CPU device index must be -1 or zero, got %d", d.index);
        return NULL;
    }
    EmDeviceObject *o = (EmDeviceObject *)type->tp_alloc(type, 0);
    if (o) o->device = d;
    return (PyObject *)o;
}

static PyObject *device_repr(EmDeviceObject *self) {
    const char *t = self->device.type == EM_CPU ? "cpu" : self->device.type == EM_META ? "meta" : "cuda";
    if (self->device.index < 0) return PyUnicode_FromFormat("device(type='%s')", t);
    return PyUnicode_FromFormat("device(type='%s', index=%d)", t, self->device.index);
}

static PyObject *device_str(EmDeviceObject *self) {
    char buf[32];
    return PyUnicode_FromString(em_device_str(self->device, buf, sizeof buf));
}

static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != &EmDeviceType || Py_TYPE(b) != &EmDeviceType)
        Py_RETURN_NOTIMPLEMENTED;
    EmDevice x = ((EmDeviceObject *)a)->device, y = ((EmDeviceObject *)b)->device;
    bool eq = x.type == y.type && x.index == y.index;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t device_hash(EmDeviceObject *self) {
    return (Py_hash_t)(self->device.type * 1000 + self->device.index + 2);
}

static PyObject *device_type(EmDeviceObject *self, void *c) {
    return PyUnicode_FromString(self->device.type == EM_CPU ? "cpu" : self->device.type == EM_META ? "meta" : "cuda");
}
static PyObject *device_index(EmDeviceObject *self, void *c) {
    if (self->device.index < 0) Py_RETURN_NONE;
    return PyLong_FromLong(self->device.index);
}
static PyObject *device_reduce(EmDeviceObject *self, PyObject *unused) {
    PyObject *s = device_str(self);
    if (!s) return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)&EmDeviceType, s);
}
/* ---------------------------------------------- the default device */

PyObject *em_default_device_obj; /* NULL: the CPU */

/* Make d (a device object, or NULL for the CPU) the default; 0 / -1. */
static int set_default(PyObject *d) {
    if (d && ((EmDeviceObject *)d)->device.type == EM_CPU) d = NULL;
    if (d && em_device_unavailable(((EmDeviceObject *)d)->device) < 0) return -1;
    Py_XSETREF(em_default_device_obj, Py_XNewRef(d));
    return 0;
}

/* `with ember.device(d):` makes d the default device of factories inside the
 * block (torch's device context), nested blocks restoring the outer one. */
#define DEVICE_STACK_MAX 64
static PyObject *device_stack[DEVICE_STACK_MAX]; /* the defaults the open blocks replaced */
static int device_depth;

static PyObject *device_enter(EmDeviceObject *self, PyObject *unused) {
    if (device_depth == DEVICE_STACK_MAX) {
        PyErr_SetString(PyExc_RuntimeError, "ember.device: too many nested device contexts");
        return NULL;
    }
    PyObject *prev = Py_XNewRef(em_default_device_obj);
    if (set_default((PyObject *)self) < 0) {
        Py_XDECREF(prev);
        return NULL;
    }
    device_stack[device_depth++] = prev;
    return Py_NewRef(self);
}

static PyObject *device_exit(EmDeviceObject *self, PyObject *args) {
    if (device_depth > 0) {
        PyObject *prev = device_stack[--device_depth];
        Py_XSETREF(em_default_device_obj, prev);
    }
    Py_RETURN_NONE;
}

/* _C._set_default_device(device or None) */
static PyObject *py_set_default_device(PyObject *m, PyObject *arg) {
    PyObject *d = NULL;
    if (arg != Py_None) {
        EmDevice dv;
        if (em_device_from_py(arg, &dv) < 0 || em_cuda_resolve(&dv) < 0) return NULL;
        if (!(d = em_device_object(dv))) return NULL;
    }
    int r = set_default(d);
    Py_XDECREF(d);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

/* _C._get_default_device() -> the device factories use when given none */
static PyObject *py_get_default_device(PyObject *m, PyObject *u) {
    return em_default_device_obj ? Py_NewRef(em_default_device_obj) : em_device_object(em_cpu());
}

static PyMethodDef default_device_methods[] = {
    {"_set_default_device", py_set_default_device, METH_O, NULL},
    {"_get_default_device", py_get_default_device, METH_NOARGS, NULL},
    {NULL},
};

static PyGetSetDef device_getset[] = {
    {"type", (getter)device_type, NULL, NULL, NULL},
    {"index", (getter)device_index, NULL, NULL, NULL},
    {NULL},
};
static PyMethodDef device_methods[] = {
    {"__reduce__", (PyCFunction)device_reduce, METH_NOARGS, NULL},
    {"__enter__", (PyCFunction)device_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)device_exit, METH_VARARGS, NULL},
    {NULL},
};

PyTypeObject EmDeviceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.device",
    .tp_basicsize = sizeof(EmDeviceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = device_new,
    .tp_repr = (reprfunc)device_repr,
    .tp_str = (reprfunc)device_str,
    .tp_richcompare = device_richcompare,
    .tp_hash = (hashfunc)device_hash,
    .tp_getset = device_getset,
    .tp_methods = device_methods,
    .tp_doc = "device(type, index=None): where a tensor's memory lives ('cpu', 'cuda:N' or 'meta').",
};

int em_init_devices(PyObject *m) {
    if (PyType_Ready(&EmDeviceType) < 0 || PyModule_AddFunctions(m, default_device_methods) < 0) return -1;
    return PyModule_AddObjectRef(m, "device", (PyObject *)&EmDeviceType);
}
