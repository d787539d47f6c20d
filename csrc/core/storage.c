/* storage.c — EmStorage: the byte buffer tensors view. Owns its memory, or
 * keeps a foreign owner (NumPy array, DLPack producer) alive through `base`.
 * Holds the version counter (Note [version counter] in ember.h). */
#include "../ember.h"

#define STORAGE_FREELIST_MAX 128
static EmStorage *storage_freelist[STORAGE_FREELIST_MAX];
static int storage_freelist_n;

static EmStorage *storage_alloc(void) {
    EmStorage *s;
    if (storage_freelist_n > 0) {
        s = storage_freelist[--storage_freelist_n];
        PyObject_Init((PyObject *)s, &EmStorageType);
    } else {
        s = PyObject_New(EmStorage, &EmStorageType);
        if (!s) return NULL;
    }
    s->data = NULL;
    s->nbytes = 0;
    s->device = em_cpu();
    s->base = NULL;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    s->owns_data = false;
    s->version = 0;
    return s;
}

bool em_meta_used;

EmStorage *em_storage_new(int64_t nbytes, EmDevice device) {
    if (device.type != EM_CPU && em_cuda_resolve(&device) < 0) return NULL;
    if (nbytes < 0) {
        PyErr_Format(PyExc_RuntimeError, "Trying to create tensor with negative size (%lld bytes)",
                     (long long)nbytes);
        return NULL;
    }
    if (device.type == EM_META) { /* Note [meta device]: the size, never the memory */
        EmStorage *s = storage_alloc();
        if (!s) return NULL;
        s->nbytes = nbytes;
        s->device = em_meta();
        em_meta_used = true;
        return s;
    }
    if (device.type == EM_CUDA) {
        void *d = em_cuda_alloc(device.index, (size_t)nbytes);
        EmStorage *s = d ? storage_alloc() : NULL;
        if (!s) {
            if (d) em_cuda_free(device.index, d, (size_t)nbytes);
            return NULL;
        }
        s->data = d;
        s->nbytes = nbytes;
        s->device = device;
        s->owns_data = true;
        return s;
    }
    void *p = em_alloc_cpu((size_t)nbytes);
    if (!p) {
        PyErr_Format(PyExc_MemoryError,
                     "DefaultCPUAllocator: not enough memory: you tried to allocate %lld bytes.",
                     (long long)nbytes);
        return NULL;
    }
    EmStorage *s = storage_alloc();
    if (!s) {
        em_free_cpu(p, (size_t)nbytes);
        return NULL;
    }
    s->data = p;
    s->nbytes = nbytes;
    s->owns_data = true;
    return s;
}

EmStorage *em_storage_wrap(void *data, int64_t nbytes, EmDevice device, PyObject *base) {
    EmStorage *s = storage_alloc();
    if (!s) return NULL;
    s->data = data;
    s->nbytes = nbytes;
    s->device = device;
    s->base = Py_XNewRef(base);
    return s;
}

static void storage_dealloc(EmStorage *s) {
    if (s->deleter)
        s->deleter(s->deleter_ctx);
    else if (s->owns_data && s->device.type == EM_CUDA)
        em_cuda_free(s->device.index, s->data, (size_t)s->nbytes);
    else if (s->owns_data)
        em_free_cpu(s->data, (size_t)s->nbytes);
    Py_CLEAR(s->base);
    if (Py_TYPE(s) == &EmStorageType && storage_freelist_n < STORAGE_FREELIST_MAX)
        storage_freelist[storage_freelist_n++] = s;
    else
        Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *storage_nbytes(EmStorage *s, PyObject *u) { return PyLong_FromLongLong(s->nbytes); }
static PyObject *storage_data_ptr(EmStorage *s, PyObject *u) {
    return PyLong_FromVoidPtr(s->data);
}
static Py_ssize_t storage_len(EmStorage *s) { return (Py_ssize_t)s->nbytes; }
static PyObject *storage_device(EmStorage *s, void *c) { return em_device_object(s->device); }
static PyObject *storage_repr(EmStorage *s) {
    char buf[32];
    return PyUnicode_FromFormat("<ember.UntypedStorage of %lld bytes on %s>", (long long)s->nbytes,
                                em_device_str(s->device, buf, sizeof buf));
}

static PyMethodDef storage_methods[] = {
    {"nbytes", (PyCFunction)storage_nbytes, METH_NOARGS, "Size of the buffer in bytes."},
    {"size", (PyCFunction)storage_nbytes, METH_NOARGS, "Size of the buffer in bytes."},
    {"data_ptr", (PyCFunction)storage_data_ptr, METH_NOARGS, "Address of the first byte."},
    {NULL},
};
static PyGetSetDef storage_getset[] = {
    {"device", (getter)storage_device, NULL, NULL, NULL},
    {NULL},
};
static PySequenceMethods storage_as_seq = {.sq_length = (lenfunc)storage_len};

PyTypeObject EmStorageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.UntypedStorage",
    .tp_basicsize = sizeof(EmStorage),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)storage_dealloc,
    .tp_repr = (reprfunc)storage_repr,
    .tp_methods = storage_methods,
    .tp_getset = storage_getset,
    .tp_as_sequence = &storage_as_seq,
    .tp_doc = "The bytes behind one or more tensors.",
};

int em_init_storage(PyObject *m) {
    if (PyType_Ready(&EmStorageType) < 0) return -1;
    return PyModule_AddObjectRef(m, "UntypedStorage", (PyObject *)&EmStorageType);
}

int em_check_has_data(const EmTensor *t, const char *what) {
    if (!em_is_meta(t)) return 0;
    PyErr_Format(PyExc_NotImplementedError, "Cannot %s meta tensor; no data!", what);
    return -1;
}
