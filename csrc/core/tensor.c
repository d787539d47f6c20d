/* tensor.c — EmTensor objects: allocation (with a free list so small ops
 * don't pay malloc + GC setup per result), geometry, views, contiguity, and
 * the lifetime slots (dealloc / traverse / clear) the Python type uses. */
#include "../ember.h"
#include <stddef.h>

#define TENSOR_FREELIST_MAX 256
static EmTensor *tensor_freelist[TENSOR_FREELIST_MAX];
static int tensor_freelist_n;

/* Point sizes/strides at the inline array or a heap block big enough for ndim. */
static int set_ndim(EmTensor *t, int ndim) {
    if (ndim > EM_MAX_DIMS) {
        PyErr_Format(PyExc_RuntimeError, "number of dimensions %d exceeds the maximum of %d", ndim,
                     EM_MAX_DIMS);
        return -1;
    }
    bool heap = t->sizes != t->small;
    if (ndim <= EM_SMALL_DIMS) {
        if (heap) PyMem_Free(t->sizes);
        t->sizes = t->small;
        t->strides = t->small + EM_SMALL_DIMS;
    } else if (!heap || ndim > t->ndim) {
        int64_t *p = PyMem_Malloc(2 * sizeof(int64_t) * ndim);
        if (!p) {
            PyErr_NoMemory();
            return -1;
        }
        if (heap) PyMem_Free(t->sizes);
        t->sizes = p;
        t->strides = p + ndim;
    } else {
        /* reuse the heap block but keep strides right after the sizes */
        t->strides = t->sizes + ndim;
    }
    t->ndim = ndim;
    return 0;
}

int em_tensor_set_geometry(EmTensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                           int64_t offset) {
    int64_t tmp[2 * EM_MAX_DIMS]; /* sizes/strides may alias t's own arrays */
    if (ndim > EM_MAX_DIMS) return set_ndim(t, ndim); /* its error, before tmp overflows */
    if (ndim > 0) memcpy(tmp, sizes, ndim * sizeof(int64_t)); /* sizes may be NULL for 0-d */
    if (strides && ndim > 0)
        memcpy(tmp + ndim, strides, ndim * sizeof(int64_t));
    else if (!strides)
        em_contiguous_strides(ndim, sizes, tmp + ndim);
    int64_t n;
    if (em_numel_checked(ndim, tmp, &n) < 0 || set_ndim(t, ndim) < 0) return -1;
    memcpy(t->sizes, tmp, ndim * sizeof(int64_t));
    memcpy(t->strides, tmp + ndim, ndim * sizeof(int64_t));
    t->numel = n;
    t->offset = offset;
    return 0;
}

/* ------------------------------------------------- version counters */

static void version_release(EmTensor *t) {
    if (t->vc && --t->vc->refs == 0) PyMem_Free(t->vc);
    t->vc = NULL;
}

void em_version_share(EmTensor *t, const EmTensor *src) {
    if (t->vc == src->vc) return;
    version_release(t);
    if (src->vc) {
        src->vc->refs++;
        t->vc = src->vc;
    }
}

int em_version_own(EmTensor *t, int64_t value) {
    EmVersionCounter *vc = PyMem_Malloc(sizeof *vc);
    if (!vc) {
        PyErr_NoMemory();
        return -1;
    }
    vc->refs = 1;
    vc->value = value;
    version_release(t);
    t->vc = vc;
    return 0;
}

EmTensor *em_tensor_alloc(PyTypeObject *type, EmStorage *storage, int64_t offset, int ndim,
                          const int64_t *sizes, const int64_t *strides, EmDType dtype) {
    EmTensor *t;
    bool from_freelist = type == &EmTensorType && tensor_freelist_n > 0;
    if (from_freelist) {
        t = tensor_freelist[--tensor_freelist_n];
        PyObject_Init((PyObject *)t, &EmTensorType);
    } else { /* tp_alloc zero-fills and starts GC tracking */
        t = (EmTensor *)type->tp_alloc(type, 0);
        if (!t) return NULL;
        t->sizes = t->small;
    }
    t->storage = (EmStorage *)Py_NewRef(storage);
    t->vc = NULL;
    t->ndim = 0;
    t->dtype = (int8_t)dtype;
    t->requires_grad = false;
    t->is_view = false;
    t->is_inference = em_inference_mode();
    t->output_nr = 0;
    t->version_seen = 0;
    t->view_base = NULL;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->grad_accumulator = NULL;
    t->backward_hooks = NULL;
    t->post_acc_hooks = NULL;
    t->dict = NULL;
    t->weakrefs = NULL;
    if (em_tensor_set_geometry(t, ndim, sizes, strides, offset) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    if (from_freelist) PyObject_GC_Track(t);
    return t;
}

void em_tensor_dealloc(EmTensor *t) {
    PyObject_GC_UnTrack(t);
    if (t->weakrefs) PyObject_ClearWeakRefs((PyObject *)t);
    Py_CLEAR(t->storage);
    version_release(t);
    Py_CLEAR(t->view_base);
    Py_CLEAR(t->grad);
    Py_CLEAR(t->grad_fn);
    Py_CLEAR(t->backward_hooks);
    Py_CLEAR(t->post_acc_hooks);
    Py_CLEAR(t->dict);
    if (t->sizes != t->small) {
        PyMem_Free(t->sizes);
        t->sizes = t->small;
    }
    PyTypeObject *type = Py_TYPE(t);
    if (type == &EmTensorType && tensor_freelist_n < TENSOR_FREELIST_MAX) {
        tensor_freelist[tensor_freelist_n++] = t;
        return;
    }
    /* for Python subclasses, subtype_dealloc drops the type reference */
    type->tp_free((PyObject *)t);
}

int em_tensor_traverse(EmTensor *t, visitproc visit, void *arg) {
    Py_VISIT(t->view_base);
    Py_VISIT(t->grad);
    Py_VISIT(t->grad_fn);
    Py_VISIT(t->backward_hooks);
    Py_VISIT(t->post_acc_hooks);
    Py_VISIT(t->dict);
    return 0;
}

int em_tensor_clear(EmTensor *t) {
    Py_CLEAR(t->grad);
    Py_CLEAR(t->grad_fn);
    Py_CLEAR(t->backward_hooks);
    Py_CLEAR(t->post_acc_hooks);
    Py_CLEAR(t->dict);
    return 0;
}

/* Resize to `shape` with contiguous strides, as torch's resize_ does for an
 * out= tensor of the wrong shape; new storage only when the old is too small.
 * Warns when a tensor that held elements is resized (torch deprecates it). */
int em_tensor_resize(EmTensor *t, int ndim, const int64_t *shape, bool warn) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (warn && t->numel != 0 &&
        PyErr_WarnFormat(PyExc_UserWarning, 1,
                         "An output with one or more elements was resized since it had shape %s, "
                         "which does not match the required output shape %s. This behavior is "
                         "deprecated; resize the output to 0 elements first to silence this.",
                         em_shape_str(t->ndim, t->sizes, a, sizeof a),
                         em_shape_str(ndim, shape, b, sizeof b)) < 0)
        return -1;
    int64_t numel, need, nbytes;
    if (em_numel_checked(ndim, shape, &numel) < 0) return -1;
    int isz = em_itemsize(t->dtype);
    if (__builtin_mul_overflow(numel, (int64_t)isz, &nbytes) ||
        __builtin_add_overflow(nbytes, t->offset * isz, &need)) {
        PyErr_SetString(PyExc_RuntimeError, "resize: storage size calculation overflowed");
        return -1;
    }
    if (need > t->storage->nbytes) {
        /* the tensor keeps its version counter on the new storage (Note [version counter]) */
        if (!t->vc && em_version_own(t, t->storage->version) < 0) return -1;
        EmStorage *s = em_storage_new(nbytes, em_device(t));
        if (!s) return -1;
        Py_SETREF(t->storage, s);
        t->offset = 0;
    }
    return em_tensor_set_geometry(t, ndim, shape, NULL, t->offset);
}

/* ------------------------------------------------------------ creation */

EmTensor *em_empty(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device) {
    int64_t numel, nbytes;
    if (em_numel_checked(ndim, sizes, &numel) < 0) return NULL;
    if (__builtin_mul_overflow(numel, (int64_t)em_itemsize(dtype), &nbytes)) {
        char buf[EM_SHAPE_BUF];
        PyErr_Format(PyExc_RuntimeError, "Storage size calculation overflowed with sizes=%s",
                     em_shape_str(ndim, sizes, buf, sizeof buf));
        return NULL;
    }
    EmStorage *s = em_storage_new(nbytes, device);
    if (!s) return NULL;
    EmTensor *t = em_tensor_alloc(&EmTensorType, s, 0, ndim, sizes, NULL, dtype);
    Py_DECREF(s);
    return t;
}

EmTensor *em_empty_strided(int ndim, const int64_t *sizes, const int64_t *strides, EmDType dtype,
                           EmDevice device) {
    int64_t extent;
    if (em_extent_checked(ndim, sizes, strides, &extent) < 0) return NULL;
    EmTensor *base = em_empty(1, &extent, dtype, device); /* storage for exactly the extent */
    if (!base) return NULL;
    EmTensor *t = em_tensor_alloc(&EmTensorType, base->storage, 0, ndim, sizes, strides, dtype);
    Py_DECREF(base);
    return t;
}

EmTensor *em_zeros(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device) {
    EmTensor *t = em_empty(ndim, sizes, dtype, device);
    if (t && device.type != EM_CPU) { /* device memory: the backend fills it */
        EmScalar zero = {'i', {0}};
        if (em_fill_(t, zero) < 0) Py_CLEAR(t);
        return t;
    }
    if (t) memset(t->storage->data, 0, (size_t)t->storage->nbytes);
    return t;
}

/* torch's empty_like(memory_format=preserve): a dense source's own strides,
 * otherwise dense ones in its dim order. */
EmTensor *em_empty_like(const EmTensor *src, EmDType dtype) {
    EmDevice dev = em_device(src);
    if (em_is_contiguous(src)) return em_empty(src->ndim, src->sizes, dtype, dev);
    if (em_is_non_overlapping_and_dense(src))
        return em_empty_strided(src->ndim, src->sizes, src->strides, dtype, dev);
    EmOperand self = {.t = (EmTensor *)src};
    return em_empty_in_operand_order(src->ndim, src->sizes, 1, &self, dtype, dev);
}

EmTensor *em_scalar_tensor(EmScalar s, EmDType dtype, EmDevice device) {
    if (device.type != EM_CPU) { /* written on the host, then copied over */
        EmTensor *h = em_scalar_tensor(s, dtype, em_cpu());
        EmTensor *g = h ? em_to_device(h, device, false) : NULL;
        Py_XDECREF(h);
        return g;
    }
    EmTensor *t = em_empty(0, NULL, dtype, device);
    if (t) em_scalar_store(s, dtype, em_data(t));
    return t;
}

EmTensor *em_view_of(EmTensor *base, int ndim, const int64_t *sizes, const int64_t *strides,
                     int64_t offset) {
    EmTensor *t = em_tensor_alloc(&EmTensorType, base->storage, offset, ndim, sizes, strides,
                                  (EmDType)base->dtype);
    if (!t) return NULL;
    em_version_share(t, base);
    t->is_view = true;
    /* views of views point at the root, as torch's ._base does */
    PyObject *root = base->is_view && base->view_base ? base->view_base : (PyObject *)base;
    t->view_base = Py_NewRef(root);
    return t;
}

/* -------------------------------------------------------------- layout */

bool em_is_contiguous(const EmTensor *t) {
    if (t->numel < 2) return true;
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] == 1) continue;
        if (t->strides[d] != expected) return false;
        expected *= t->sizes[d];
    }
    return true;
}

bool em_is_non_overlapping_and_dense(const EmTensor *t) {
    if (t->numel < 2) return true;
    int nd = t->ndim, perm[EM_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++)
        if (t->sizes[d] != 1) perm[k++] = d;
    for (int i = 1; i < k; i++) {
        int p = perm[i], j = i;
        while (j > 0 && t->strides[perm[j - 1]] > t->strides[p]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    int64_t expected = 1;
    for (int i = 0; i < k; i++) {
        if (t->strides[perm[i]] != expected) return false;
        expected *= t->sizes[perm[i]];
    }
    return true;
}

bool em_layout_non_overlapping(int ndim, const int64_t *sizes, const int64_t *strides) {
    int perm[EM_MAX_DIMS + 1], k = 0;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) return true; /* no elements */
        if (sizes[d] != 1) perm[k++] = d;
    }
    for (int i = 1; i < k; i++) { /* ascending strides */
        int p = perm[i], j = i;
        while (j > 0 && strides[perm[j - 1]] > strides[p]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    /* each stride steps past everything the smaller ones reach */
    int64_t reach = 0;
    for (int i = 0; i < k; i++) {
        if (strides[perm[i]] <= reach) return false;
        reach += (sizes[perm[i]] - 1) * strides[perm[i]];
    }
    return true;
}

EmTensor *em_contiguous(EmTensor *t) {
    if (em_is_contiguous(t)) return (EmTensor *)Py_NewRef(t);
    EmTensor *c = em_empty(t->ndim, t->sizes, (EmDType)t->dtype, em_device(t));
    if (!c) return NULL;
    if (em_copy_(c, (PyObject *)t) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}

int em_check_cpu(const EmTensor *t, const char *opname) {
    if (EM_LIKELY(em_is_cpu(t))) return 0;
    char buf[32];
    /* a path without a GPU kernel: the dispatcher takes the CPU fallback */
    PyErr_Format(EmNoCudaKernel, "ember: %s has no kernel for tensors on %s", opname,
                 em_device_str(em_device(t), buf, sizeof buf));
    return -1;
}

/* ----------------------------------------------------- the type object */

/* The tensor type's layout and lifetime. python/tensor_type.c gives it its
 * Python face (constructor, operators, methods, repr) before readying it:
 * the core allocates and frees tensors without knowing about either. */
PyTypeObject EmTensorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.Tensor",
    .tp_basicsize = sizeof(EmTensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)em_tensor_dealloc,
    .tp_traverse = (traverseproc)em_tensor_traverse,
    .tp_clear = (inquiry)em_tensor_clear,
    .tp_dictoffset = offsetof(EmTensor, dict),
    .tp_weaklistoffset = offsetof(EmTensor, weakrefs),
    .tp_doc = "A multi-dimensional array of one dtype, on one device.",
};

/* ------------------------------------------------------- Python helpers */

/* Functions written in Python that C code calls (repr, linalg helpers),
 * registered by ember/__init__.py through _C._set_helpers. */
static PyObject *helpers; /* dict set by ember/__init__.py: repr, ... */

PyObject *em_py_helper(const char *name) {
    PyObject *f = helpers ? PyDict_GetItemString(helpers, name) : NULL;
    if (!f) PyErr_Format(PyExc_RuntimeError, "ember: Python helper '%s' is not registered", name);
    return f;
}

PyObject *em_set_helpers(PyObject *mod, PyObject *d) {
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict");
        return NULL;
    }
    if (!helpers && !(helpers = PyDict_New())) return NULL;
    if (PyDict_Update(helpers, d) < 0) return NULL;
    Py_RETURN_NONE;
}

