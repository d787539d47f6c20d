/* memory_format.c — the `ember.memory_format` objects (contiguous_format,
 * preserve_format, channels_last, channels_last_3d) and the strides each one
 * asks for, so that clone / contiguous / is_contiguous / *_like / empty honour
 * memory_format= as torch does. channels_last orders a rank-4 (N, C, H, W)
 * tensor's dims N, H, W, C in memory: strides (H*W*C, 1, W*C, C); the 3-d
 * variant does the same for rank 5 (N, C, D, H, W). */
#include "../ember.h"

typedef struct {
    PyObject_HEAD
    EmMemoryFormat format;
} EmMemoryFormatObject;

static const char *format_names[EM_NUM_MEMORY_FORMATS] = {
    [EM_PRESERVE_FORMAT] = "preserve_format",
    [EM_CONTIGUOUS_FORMAT] = "contiguous_format",
    [EM_CHANNELS_LAST] = "channels_last",
    [EM_CHANNELS_LAST_3D] = "channels_last_3d",
};

static EmMemoryFormatObject format_objects[EM_NUM_MEMORY_FORMATS];

static PyObject *format_repr(EmMemoryFormatObject *self) {
    return PyUnicode_FromFormat("ember.%s", format_names[self->format]);
}

static PyObject *format_reduce(EmMemoryFormatObject *self, PyObject *unused) {
    return PyUnicode_FromString(format_names[self->format]); /* pickled as the global ember.<name> */
}

static PyMethodDef format_methods[] = {
    {"__reduce__", (PyCFunction)format_reduce, METH_NOARGS, NULL},
    {NULL},
};

PyTypeObject EmMemoryFormatType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.memory_format",
    .tp_basicsize = sizeof(EmMemoryFormatObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = (reprfunc)format_repr,
    .tp_methods = format_methods,
    .tp_doc = "How a tensor's dims are ordered in memory (ember.contiguous_format, ember.channels_last, ...).",
};

int em_memory_format_from_py(PyObject *o, EmMemoryFormat dflt, EmMemoryFormat *out) {
    if (o == NULL || o == Py_None) {
        *out = dflt;
        return 0;
    }
    if (Py_TYPE(o) != &EmMemoryFormatType) {
        PyErr_Format(PyExc_TypeError, "memory_format must be an ember.memory_format, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = ((EmMemoryFormatObject *)o)->format;
    return 0;
}

/* The strides of a dense tensor of `sizes` laid out as f (contiguous or a
 * channels-last order). 0, or -1 with torch's RuntimeError for a wrong rank. */
int em_memory_format_strides(EmMemoryFormat f, int ndim, const int64_t *sizes, int64_t *strides) {
    if (f == EM_CHANNELS_LAST || f == EM_CHANNELS_LAST_3D) {
        int want = f == EM_CHANNELS_LAST ? 4 : 5;
        if (ndim != want) {
            PyErr_Format(PyExc_RuntimeError, "required rank %d tensor to use %s format", want,
                         f == EM_CHANNELS_LAST ? "channels_last" : "channels_last_3d");
            return -1;
        }
        /* memory order: N, spatial dims..., C; torch multiplies by a size of
         * 0 here too (strides of 0 after it), unlike its contiguous strides */
        int64_t s = 1;
        strides[1] = s;
        s *= sizes[1];
        for (int d = ndim - 1; d >= 2; d--) {
            strides[d] = s;
            s *= sizes[d];
        }
        strides[0] = s;
        return 0;
    }
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= sizes[d] > 1 ? sizes[d] : 1;
    }
    return 0;
}

bool em_is_contiguous_as(const EmTensor *t, EmMemoryFormat f) {
    if (f != EM_CHANNELS_LAST && f != EM_CHANNELS_LAST_3D) return em_is_contiguous(t);
    if (t->ndim != (f == EM_CHANNELS_LAST ? 4 : 5)) return false;
    if (t->numel == 0) return true;
    int64_t strides[EM_MAX_DIMS];
    em_memory_format_strides(f, t->ndim, t->sizes, strides);
    for (int d = 0; d < t->ndim; d++) /* a dim of size 1 may have any stride */
        if (t->sizes[d] != 1 && t->strides[d] != strides[d]) return false;
    return true;
}

/* Whether the strides put a rank-4/5 tensor's channels last: walking dims
 * C, then the spatial dims from the innermost, then N, each stride must be at
 * least the extent of the dims before it. Ambiguous layouts (a dim of size 0,
 * C with stride 0, N whose stride equals C's: N111-like tensors) count as
 * contiguous, as in torch's is_channels_last_strides rule. */
static bool strides_channels_last(const EmTensor *t) {
    int order[5], n = 0;
    order[n++] = 1;
    for (int d = t->ndim - 1; d >= 2; d--) order[n++] = d;
    order[n++] = 0;
    if (t->strides[1] == 0) return false;
    int64_t min = 0;
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (t->sizes[d] == 0 || t->strides[d] < min) return false;
        if (d == 0 && min == t->strides[1]) return false;
        min = t->strides[d];
        if (t->sizes[d] > 1) min *= t->sizes[d];
    }
    return true;
}

EmMemoryFormat em_suggest_memory_format(const EmTensor *t) {
    if ((t->ndim == 4 || t->ndim == 5) && strides_channels_last(t))
        return t->ndim == 4 ? EM_CHANNELS_LAST : EM_CHANNELS_LAST_3D;
    return EM_CONTIGUOUS_FORMAT;
}

/* Dense strides in the inputs' dim order (torch's TensorIterator and
 * infer_dense_strides): the dims are sorted innermost-first by asking the
 * inputs in order; the first one whose strides for two dims differ (neither
 * broadcast, so neither 0) decides, and equal strides put the smaller dim
 * inside. Contiguous when the order is the default one. */
static int64_t operand_stride(const EmTensor *t, int ndim, const int64_t *shape, int d) {
    int td = d - (ndim - t->ndim);
    return td < 0 || (t->sizes[td] == 1 && shape[d] != 1) ? 0 : t->strides[td];
}

/* 1: dim a goes outside dim b, -1: inside, 0: the inputs do not say */
static int outer_than(int a, int b, int ndim, const int64_t *shape, int nin, const EmOperand *in) {
    for (int i = 0; i < nin; i++) {
        const EmTensor *t = in[i].t;
        if (!t) continue;
        int64_t sa = operand_stride(t, ndim, shape, a), sb = operand_stride(t, ndim, shape, b);
        if (sa == 0 || sb == 0) continue;
        if (sa != sb) return sa < sb ? -1 : 1;
        if (shape[a] > shape[b]) return 1;
    }
    return 0;
}

EmTensor *em_empty_in_operand_order(int ndim, const int64_t *shape, int nin, const EmOperand *in, EmDType dtype,
                                   EmDevice device) {
    int64_t strides[EM_MAX_DIMS];
    int perm[EM_MAX_DIMS]; /* innermost first */
    for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
    for (int i = 1; i < ndim; i++) /* insertion sort that steps over undecided pairs */
        for (int j = i - 1, k = i; j >= 0; j--) {
            int c = outer_than(perm[j], perm[k], ndim, shape, nin, in);
            if (c > 0) {
                int x = perm[j];
                perm[j] = perm[k];
                perm[k] = x;
                k = j;
            } else if (c < 0) {
                break;
            }
        }
    bool reversed = true;
    for (int i = 0; i < ndim; i++) reversed &= perm[i] == ndim - 1 - i;
    if (reversed) return em_empty(ndim, shape, dtype, device);
    int64_t s = 1;
    for (int i = 0; i < ndim; i++) {
        strides[perm[i]] = s;
        s *= shape[perm[i]];
    }
    return em_empty_strided(ndim, shape, strides, dtype, device);
}

/* A new uninitialised tensor shaped like src, laid out as f: preserve keeps
 * src's dim order when src is dense (em_empty_like), the others give their
 * own strides. New reference, or NULL with an exception set. */
EmTensor *em_empty_format(const EmTensor *src, EmDType dtype, EmDevice device, EmMemoryFormat f) {
    if (f == EM_PRESERVE_FORMAT) {
        if (em_device_eq(device, em_device(src))) return em_empty_like(src, dtype);
        f = EM_CONTIGUOUS_FORMAT;
    }
    return em_empty_in_format(src->ndim, src->sizes, dtype, device, f);
}

EmTensor *em_empty_in_format(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device, EmMemoryFormat f) {
    if (f == EM_CONTIGUOUS_FORMAT) return em_empty(ndim, sizes, dtype, device);
    int64_t strides[EM_MAX_DIMS];
    if (em_memory_format_strides(f, ndim, sizes, strides) < 0) return NULL;
    return em_empty_strided(ndim, sizes, strides, dtype, device);
}

PyObject *em_memory_format_object(EmMemoryFormat f) { return (PyObject *)&format_objects[f]; }

int em_init_memory_formats(PyObject *m) {
    if (PyType_Ready(&EmMemoryFormatType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "memory_format", (PyObject *)&EmMemoryFormatType) < 0) return -1;
    for (int f = 0; f < EM_NUM_MEMORY_FORMATS; f++) {
        PyObject_Init((PyObject *)&format_objects[f], &EmMemoryFormatType);
        format_objects[f].format = (EmMemoryFormat)f;
        if (PyModule_AddObjectRef(m, format_names[f], (PyObject *)&format_objects[f]) < 0) return -1;
    }
    return 0;
}
