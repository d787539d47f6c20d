/* dlpack.c — zero-copy exchange with other array libraries through DLPack
 * capsules (both the legacy "dltensor" and the versioned 1.x layout). The
 * structs below are the DLPack ABI, declared here from the specification. */
#include "../ember.h"
#include <stdlib.h>

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };
#define DLPACK_FLAG_READ_ONLY (1ULL << 0)

/* ------------------------------------------------------------ export */

/* One allocation holds the managed struct, the tensor reference and the
 * shape/strides arrays the consumer reads. */
typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    EmTensor *owner;
    int64_t dims[];
} Export;

static void release_owner(Export *e) {
    PyGILState_STATE st = PyGILState_Ensure();
    Py_XDECREF(e->owner);
    PyGILState_Release(st);
    free(e);
}
static void legacy_deleter(DLManagedTensor *m) { release_owner((Export *)m->manager_ctx); }
static void versioned_deleter(DLManagedTensorVersioned *m) { release_owner((Export *)m->manager_ctx); }

static void capsule_destructor(PyObject *cap) {
    /* only a capsule nobody consumed still owns the tensor; keep any error
     * the consumer is raising */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m->deleter) m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->deleter) m->deleter(m);
    }
    PyErr_Restore(et, ev, tb);
}

static DLDataType dl_dtype(EmDType d) {
    DLDataType t = {kDLFloat, (uint8_t)(8 * em_itemsize(d)), 1};
    if (d == EM_BOOL) t.code = kDLBool;
    else if (d == EM_UINT8 || em_is_wide_unsigned(d)) t.code = kDLUInt;
    else if (em_is_int(d)) t.code = kDLInt;
    else if (d == EM_BFLOAT16) t.code = kDLBfloat;
    else if (em_is_complex(d)) t.code = kDLComplex; /* bits: both parts together */
    return t;
}

PyObject *em_to_dlpack(EmTensor *t, bool versioned) {
    if (em_check_has_data(t, "export to DLPack a") < 0) return NULL;
    Export *e = calloc(1, sizeof(Export) + 2 * (size_t)(t->ndim ? t->ndim : 1) * sizeof(int64_t));
    if (!e) return PyErr_NoMemory();
    e->owner = (EmTensor *)Py_NewRef(t);
    memcpy(e->dims, t->sizes, t->ndim * sizeof(int64_t));
    memcpy(e->dims + t->ndim, t->strides, t->ndim * sizeof(int64_t));
    DLTensor dl = {
        .data = em_data(t),
        .device = {em_is_cpu(t) ? kDLCPU : kDLCUDA, em_is_cpu(t) ? 0 : em_device(t).index},
        .ndim = t->ndim,
        .dtype = dl_dtype((EmDType)t->dtype),
        .shape = e->dims,
        .strides = e->dims + t->ndim,
        .byte_offset = 0,
    };
    PyObject *cap;
    if (versioned) {
        e->m.versioned.version = (DLPackVersion){1, 0};
        e->m.versioned.manager_ctx = e;
        e->m.versioned.deleter = versioned_deleter;
        e->m.versioned.dl_tensor = dl;
        cap = PyCapsule_New(&e->m.versioned, "dltensor_versioned", capsule_destructor);
    } else {
        e->m.legacy.dl_tensor = dl;
        e->m.legacy.manager_ctx = e;
        e->m.legacy.deleter = legacy_deleter;
        cap = PyCapsule_New(&e->m.legacy, "dltensor", capsule_destructor);
    }
    if (!cap) {
        Py_DECREF(e->owner);
        free(e);
    }
    return cap;
}

/* ------------------------------------------------------------ import */

static void call_legacy_deleter(void *p) {
    DLManagedTensor *m = p;
    if (m->deleter) m->deleter(m);
}
static void call_versioned_deleter(void *p) {
    DLManagedTensorVersioned *m = p;
    if (m->deleter) m->deleter(m);
}

EmTensor *em_from_dlpack_capsule(PyObject *cap) {
    bool versioned = PyCapsule_IsValid(cap, "dltensor_versioned");
    if (!versioned && !PyCapsule_IsValid(cap, "dltensor")) {
        PyErr_SetString(PyExc_ValueError,
                        "from_dlpack received an invalid capsule. Note that DLTensor capsules can "
                        "be consumed only once, so you might have already constructed a tensor "
                        "from it once.");
        return NULL;
    }
    void *managed = PyCapsule_GetPointer(cap, versioned ? "dltensor_versioned" : "dltensor");
    DLTensor *dl = versioned ? &((DLManagedTensorVersioned *)managed)->dl_tensor
                             : &((DLManagedTensor *)managed)->dl_tensor;
    if (versioned && ((DLManagedTensorVersioned *)managed)->version.major > 1) {
        PyErr_Format(PyExc_BufferError, "DLPack version %u.x is newer than ember supports (1.x)",
                     ((DLManagedTensorVersioned *)managed)->version.major);
        return NULL;
    }
    EmDevice device = em_cpu();
    if (dl->device.device_type == kDLCUDA) { /* GPU memory: shared, as on the host */
        device = (EmDevice){EM_CUDA, (int8_t)(dl->device.device_id < 0 || dl->device.device_id > 127
                                                  ? 127 : dl->device.device_id)};
        if (em_cuda_resolve(&device) < 0) return NULL;
    } else if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost) {
        PyErr_Format(PyExc_RuntimeError, "from_dlpack: unsupported device type %d (ember has the CPU and CUDA)",
                     dl->device.device_type);
        return NULL;
    }
    EmDType dtype = EM_NUM_DTYPES;
    for (int d = 0; d < EM_NUM_DTYPES; d++) {
        DLDataType x = dl_dtype((EmDType)d);
        if (x.code == dl->dtype.code && x.bits == dl->dtype.bits) dtype = (EmDType)d;
    }
    if (dtype == EM_NUM_DTYPES || dl->dtype.lanes != 1) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: unsupported dtype (code %d, %d bits, %d lanes)",
                     dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
        return NULL;
    }
    if (dl->ndim < 0 || dl->ndim > EM_MAX_DIMS) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: bad number of dimensions %d", dl->ndim);
        return NULL;
    }
    int64_t strides[EM_MAX_DIMS], extent;
    if (dl->strides)
        memcpy(strides, dl->strides, dl->ndim * sizeof(int64_t));
    else
        em_contiguous_strides(dl->ndim, dl->shape, strides);
    for (int d = 0; d < dl->ndim; d++) {
        if (dl->shape[d] < 0 || strides[d] < 0) {
            PyErr_SetString(PyExc_BufferError, "from_dlpack: negative sizes or strides are not supported");
            return NULL;
        }
    }
    int64_t numel;
    if (em_numel_checked(dl->ndim, dl->shape, &numel) < 0 ||
        em_extent_checked(dl->ndim, dl->shape, strides, &extent) < 0)
        return NULL;
    int64_t nbytes = extent * em_itemsize(dtype);
    EmStorage *s = em_storage_wrap((char *)dl->data + dl->byte_offset, nbytes, device, NULL);
    if (!s) return NULL;
    EmTensor *t = em_tensor_alloc(&EmTensorType, s, 0, dl->ndim, dl->shape, strides, dtype);
    if (!t) {
        Py_DECREF(s); /* no deleter set yet: the capsule still owns the memory */
        return NULL;
    }
    s->deleter = versioned ? call_versioned_deleter : call_legacy_deleter;
    s->deleter_ctx = managed;
    Py_DECREF(s);
    PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor");
    return t;
}
