/* storage.c — EmStorage: the byte buffer tensors view. Owns its memory, or
 * keeps a foreign owner (NumPy array, DLPack producer) alive through `base`.
 * Holds the version counter (Note [version counter] in ember.h). */
#include "../ember.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* storage[i]: the byte's value; storage[a:b]: a storage viewing those bytes
 * (it keeps this one alive), as torch's storage slicing. */
static PyObject *storage_subscript(EmStorage *s, PyObject *key) {
    if (PyIndex_Check(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0) i += (Py_ssize_t)s->nbytes;
        if (i < 0 || i >= (Py_ssize_t)s->nbytes)
            return PyErr_Format(PyExc_IndexError, "index %zd out of range for storage of size %lld",
                                i, (long long)s->nbytes);
        if (s->device.type != EM_CPU)
            return PyErr_Format(PyExc_NotImplementedError, "reading one byte of a storage on %s",
                                s->device.type == EM_META ? "meta" : "a GPU");
        return PyLong_FromLong(((const unsigned char *)s->data)[i]);
    }
    if (!PySlice_Check(key))
        return PyErr_Format(PyExc_TypeError, "storage indices must be integers or slices, not %.100s",
                            Py_TYPE(key)->tp_name);
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    if (step != 1)
        return PyErr_Format(PyExc_RuntimeError, "Trying to slice with a step of %zd, but only a step of 1 "
                            "is supported", step);
    Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)s->nbytes, &start, &stop, step);
    return (PyObject *)em_storage_wrap(s->data ? (char *)s->data + start : NULL, len, s->device, (PyObject *)s);
}

/* ----------------------------------------- UntypedStorage.from_file */

typedef struct {
    void *addr;
    size_t len;
} Mapping;

static void unmap(void *ctx) {
    Mapping *m = ctx;
    munmap(m->addr, m->len);
    PyMem_RawFree(m);
}

/* from_file(filename, shared=False, nbytes=0): nbytes of the file mapped into
 * memory. shared: writes go to the file (made or grown to nbytes); else the
 * pages are private copies and the file must hold nbytes. */
static PyObject *storage_from_file(PyObject *cls, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"filename", "shared", "nbytes", NULL};
    PyObject *path = NULL;
    int shared = 0;
    Py_ssize_t nbytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pn:from_file", kwlist, PyUnicode_FSConverter, &path, &shared,
                                     &nbytes))
        return NULL;
    const char *name = PyBytes_AS_STRING(path);
    EmStorage *st = NULL;
    int fd = -1;
    if (nbytes < 0) {
        PyErr_Format(PyExc_RuntimeError, "from_file: nbytes must be non-negative, got %zd", nbytes);
        goto done;
    }
    fd = open(name, shared ? O_RDWR | O_CREAT : O_RDONLY, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0) {
        PyErr_Format(PyExc_RuntimeError, "unable to open file <%s>: %s", name, strerror(errno));
        goto done;
    }
    if (sb.st_size < nbytes) {
        if (!shared) {
            PyErr_Format(PyExc_RuntimeError, "from_file: <%s> holds %lld bytes, fewer than the %zd asked for",
                         name, (long long)sb.st_size, nbytes);
            goto done;
        }
        if (ftruncate(fd, nbytes) < 0) {
            PyErr_Format(PyExc_RuntimeError, "unable to resize file <%s> to %zd bytes: %s", name, nbytes,
                         strerror(errno));
            goto done;
        }
    }
    if (nbytes == 0) {
        st = em_storage_new(0, em_cpu());
        goto done;
    }
    void *p = mmap(NULL, (size_t)nbytes, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    Mapping *m = p == MAP_FAILED ? NULL : PyMem_RawMalloc(sizeof(Mapping));
    if (!m) {
        if (p == MAP_FAILED)
            PyErr_Format(PyExc_RuntimeError, "unable to map file <%s>: %s", name, strerror(errno));
        else
            munmap(p, (size_t)nbytes), PyErr_NoMemory();
        goto done;
    }
    *m = (Mapping){p, (size_t)nbytes};
    if (!(st = em_storage_wrap(p, nbytes, em_cpu(), NULL))) {
        unmap(m);
        goto done;
    }
    st->deleter = unmap;
    st->deleter_ctx = m;
done:
    if (fd >= 0) close(fd);
    Py_DECREF(path);
    return (PyObject *)st;
}

static PyObject *storage_untyped(PyObject *s, PyObject *u) { return Py_NewRef(s); }

static PyMethodDef storage_methods[] = {
    {"from_file", (PyCFunction)(void (*)(void))storage_from_file, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "from_file(filename, shared=False, nbytes=0): a storage mapping nbytes of the file."},
    {"untyped", storage_untyped, METH_NOARGS, "This storage (it is untyped already)."},
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
static PyMappingMethods storage_as_mapping = {.mp_length = (lenfunc)storage_len,
                                              .mp_subscript = (binaryfunc)storage_subscript};

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
    .tp_as_mapping = &storage_as_mapping,
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
