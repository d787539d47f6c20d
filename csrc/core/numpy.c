/* numpy.c — the NumPy bridge: from_numpy (zero copy: the storage keeps the
 * array alive), Tensor.numpy() (an ndarray viewing the tensor's memory), and
 * NumPy scalar dtypes. NumPy's C API is imported lazily, on first use, so
 * `import ember` does not pay for importing NumPy. */
#include "../ember.h"
#define PY_ARRAY_UNIQUE_SYMBOL EMBER_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

static int numpy_ready = 0;

/* Import NumPy's C API; -1 with ImportError when NumPy is missing. */
static int ensure_numpy(void) {
    if (numpy_ready) return 0;
    if (_import_array() < 0) return -1;
    numpy_ready = 1;
    return 0;
}

/* Is NumPy already imported by someone? Then objects may be arrays. */
static int numpy_loaded(void) {
    if (numpy_ready) return 1;
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *np = PyDict_GetItemString(mods, "numpy");
    if (!np) return 0;
    return ensure_numpy() < 0 ? -1 : 1;
}

int em_is_ndarray(PyObject *o) {
    int r = numpy_loaded();
    if (r <= 0) return r;
    return PyArray_Check(o) ? 1 : 0;
}

static int dtype_from_descr(PyArray_Descr *d, EmDType *out) {
    int size = (int)PyDataType_ELSIZE(d);
    switch (d->kind) {
    case 'b': if (size == 1) { *out = EM_BOOL; return 0; } break;
    case 'u':
        if (size == 1) { *out = EM_UINT8; return 0; }
        if (size == 2) { *out = EM_UINT16; return 0; }
        if (size == 4) { *out = EM_UINT32; return 0; }
        if (size == 8) { *out = EM_UINT64; return 0; }
        break;
    case 'i':
        if (size == 1) { *out = EM_INT8; return 0; }
        if (size == 2) { *out = EM_INT16; return 0; }
        if (size == 4) { *out = EM_INT32; return 0; }
        if (size == 8) { *out = EM_INT64; return 0; }
        break;
    case 'f':
        if (size == 2) { *out = EM_FLOAT16; return 0; }
        if (size == 4) { *out = EM_FLOAT32; return 0; }
        if (size == 8) { *out = EM_FLOAT64; return 0; }
        break;
    case 'c':
        if (size == 8) { *out = EM_COMPLEX64; return 0; }
        if (size == 16) { *out = EM_COMPLEX128; return 0; }
        break;
    }
    PyObject *tn = PyObject_GetAttrString((PyObject *)d->typeobj, "__name__");
    PyErr_Format(PyExc_TypeError,
                 "can't convert np.ndarray of type numpy.%S. The only supported types are: "
                 "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, uint32, "
                 "uint16, uint8, and bool.",
                 tn ? tn : Py_None);
    Py_XDECREF(tn);
    return -1;
}

int em_numpy_scalar_dtype(PyObject *o, EmDType *out) {
    int r = numpy_loaded();
    if (r <= 0) return r;
    if (!PyArray_IsScalar(o, Generic)) return 0;
    PyArray_Descr *d = PyArray_DescrFromScalar(o);
    if (!d) return -1;
    int rr = dtype_from_descr(d, out);
    Py_DECREF(d);
    return rr < 0 ? -1 : 1;
}

EmTensor *em_from_numpy(PyObject *obj, bool warn_readonly) {
    if (ensure_numpy() < 0) return NULL;
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %.100s)", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    EmDType dtype;
    if (dtype_from_descr(PyArray_DESCR(arr), &dtype) < 0) return NULL;
    if (!PyArray_ISNOTSWAPPED(arr)) {
        PyErr_SetString(PyExc_ValueError,
                        "given numpy array has byte order different from the native byte order. "
                        "Conversion between byte orders is currently not supported.");
        return NULL;
    }
    int nd = PyArray_NDIM(arr), isz = em_itemsize(dtype);
    if (nd > EM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "array has %d dimensions; ember supports at most %d", nd, EM_MAX_DIMS);
        return NULL;
    }
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], extent;
    for (int d = 0; d < nd; d++) {
        npy_intp st = PyArray_STRIDES(arr)[d];
        sizes[d] = PyArray_DIMS(arr)[d];
        if (st < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "At least one stride in the given numpy array is negative, and tensors "
                            "with negative strides are not currently supported. (You can probably "
                            "work around this by making a copy of your array  with array.copy().) ");
            return NULL;
        }
        if (st % isz != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "given numpy array strides not a multiple of the element byte size. "
                            "Copy the numpy array to reallocate the memory.");
            return NULL;
        }
        strides[d] = st / isz;
    }
    if (em_extent_checked(nd, sizes, strides, &extent) < 0) return NULL;
    if (warn_readonly && !PyArray_ISWRITEABLE(arr) &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "The given NumPy array is not writable, and ember does not support "
                     "non-writable tensors. This means writing to this tensor will result in "
                     "undefined behavior. You may want to copy the array to protect its data or "
                     "make it writable before converting it to a tensor.", 1) < 0)
        return NULL;
    int64_t nbytes = extent * isz;
    EmStorage *s = em_storage_wrap(PyArray_DATA(arr), nbytes, em_cpu(), obj);
    if (!s) return NULL;
    EmTensor *t = em_tensor_alloc(&EmTensorType, s, 0, nd, sizes, strides, dtype);
    Py_DECREF(s);
    return t;
}

PyObject *em_to_numpy(EmTensor *t) {
    if (ensure_numpy() < 0) return NULL;
    if (!em_is_cpu(t)) {
        char buf[32];
        PyErr_Format(PyExc_TypeError,
                     "can't convert %s device type tensor to numpy. Use Tensor.cpu() to copy the "
                     "tensor to host memory first.", em_device_str(em_device(t), buf, sizeof buf));
        return NULL;
    }
    int typenum = em_dtype_info[t->dtype].npy_type;
    if (typenum < 0) {
        PyErr_Format(PyExc_TypeError, "Got unsupported ScalarType %s", em_dtype_name((EmDType)t->dtype));
        return NULL;
    }
    npy_intp dims[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int isz = em_itemsize(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        dims[d] = t->sizes[d];
        strides[d] = t->strides[d] * isz;
    }
    PyObject *arr = PyArray_New(&PyArray_Type, t->ndim, dims, typenum, strides, em_data(t), isz,
                                NPY_ARRAY_WRITEABLE, NULL);
    if (!arr) return NULL;
    if (PyArray_SetBaseObject((PyArrayObject *)arr, Py_NewRef(t)) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}
