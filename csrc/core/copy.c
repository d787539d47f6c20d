/* copy.c — writing one tensor's elements into another, and a value into
 * every element: em_copy_ (copy_, .to(dtype), clone, contiguous), em_fill_
 * (fill_, zero_, the factories), through the elementwise iterator with
 * byte-copy kernels (the iterator casts between dtypes around them) or the
 * GPU backend's own copies. Python values become iterator operands here too
 * (em_to_operand). */
#include "../ember.h"
#include <string.h>

/* copy: dtype-agnostic by element size (the iterator casts around it) */
#define COPY_FN(W, T)                                                          \
    static void copy_##W(char **d, const int64_t *s, int64_t n) {              \
        if (s[0] == W && s[1] == W) {                                          \
            memmove(d[0], d[1], (size_t)(n * W));                              \
        } else if (s[0] == W && s[1] == 0) {                                   \
            T v = *(const T *)d[1], *o = (T *)d[0];                            \
            for (int64_t i = 0; i < n; i++) o[i] = v;                          \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++)                                    \
                *(T *)(d[0] + i * s[0]) = *(const T *)(d[1] + i * s[1]);       \
        }                                                                      \
    }
COPY_FN(1, uint8_t)
COPY_FN(2, uint16_t)
COPY_FN(4, uint32_t)
COPY_FN(8, uint64_t)
typedef struct { uint64_t lo, hi; } Bytes16;
COPY_FN(16, Bytes16)
const EmKernels em_kernels_copy = {{
    [EM_BOOL] = copy_1, [EM_UINT8] = copy_1, [EM_INT8] = copy_1, [EM_INT16] = copy_2,
    [EM_INT32] = copy_4, [EM_INT64] = copy_8, [EM_FLOAT16] = copy_2, [EM_BFLOAT16] = copy_2,
    [EM_FLOAT32] = copy_4, [EM_FLOAT64] = copy_8, [EM_COMPLEX64] = copy_8, [EM_COMPLEX128] = copy_16,
    [EM_UINT16] = copy_2, [EM_UINT32] = copy_4, [EM_UINT64] = copy_8,
}, "copy"};
EM_REGISTER_KERNELS(em_kernels_copy)

/* A Python number (bool, int, float, complex, NumPy scalar, anything with
 * __index__ or __float__ that is not a sequence), not a str or tensor. */
bool em_is_number(PyObject *o) {
    if (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o)) return true;
    if (PyUnicode_Check(o) || em_is_tensor(o)) return false;
    /* NumPy scalars and other numbers */
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    return nb && (nb->nb_index || nb->nb_float) && !PySequence_Check(o);
}

int em_to_operand(PyObject *o, EmOperand *out) {
    if (em_is_tensor(o)) {
        *out = em_opnd((EmTensor *)o);
        return 0;
    }
    if (!em_is_number(o)) return 1;
    EmScalar s;
    if (em_scalar_from_py(o, &s) < 0) return -1;
    *out = em_opnd_scalar(s);
    return 0;
}

/* ------------------------------------------------------ copy and fill */

/* Note [meta device]: copying into a meta tensor checks the shapes and
 * writes nothing; copying out of one is impossible. */
int em_meta_copy_(EmTensor *dst, EmTensor *src) {
    if (!em_is_meta(dst)) return em_check_has_data(src, "copy out of");
    int n;
    int64_t shape[EM_MAX_DIMS];
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (em_broadcast_shapes(dst->ndim, dst->sizes, src->ndim, src->sizes, &n, shape) < 0) return -1;
    if (n != dst->ndim || memcmp(shape, dst->sizes, (size_t)n * sizeof(int64_t))) {
        PyErr_Format(PyExc_RuntimeError, "output with shape %s doesn't match the broadcast shape %s",
                     em_shape_str(dst->ndim, dst->sizes, a, sizeof a), em_shape_str(n, shape, b, sizeof b));
        return -1;
    }
    return 0;
}

int em_copy_(EmTensor *dst, PyObject *src) {
    if (EM_UNLIKELY(em_meta_used)) {
        if (em_is_tensor(src) && (em_is_meta(dst) || em_is_meta((EmTensor *)src)))
            return em_meta_copy_(dst, (EmTensor *)src);
        if (em_is_meta(dst)) {
            EmScalar v;
            return em_scalar_from_py(src, &v);
        }
    }
    if (!em_is_cpu(dst) || (em_is_tensor(src) && !em_is_cpu((EmTensor *)src))) {
        if (em_is_tensor(src)) return em_cuda_copy_(dst, (EmTensor *)src, false);
        EmScalar v;
        if (em_scalar_from_py(src, &v) < 0) return -1;
        return em_cuda_fill_(dst, v);
    }
    EmIterConfig cfg = em_iter_config("copy_", &em_kernels_copy, EM_PROMOTE_NONE);
    if (em_to_operand(src, &cfg.inputs[0]) != 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "copy_(): argument 'src' must be Tensor, not %.100s",
                         Py_TYPE(src)->tp_name);
        return -1;
    }
    cfg.ninputs = 1;
    cfg.out = dst;
    cfg.inplace = true;
    cfg.common_dtype = dst->dtype;
    cfg.compute_dtype = dst->dtype; /* byte copies; the iterator casts the source */
    EmTensor *r = em_iter_run(&cfg);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

int em_fill_(EmTensor *dst, EmScalar value) {
    if (em_scalar_check_range(value, (EmDType)dst->dtype) < 0) return -1;
    if (em_is_meta(dst)) return 0; /* Note [meta device] */
    if (!em_is_cpu(dst)) return em_cuda_fill_(dst, value);
    EmIterConfig cfg = em_iter_config("fill_", &em_kernels_copy, EM_PROMOTE_NONE);
    cfg.allow_self_overlap = true;
    cfg.inputs[0] = em_opnd_scalar(value);
    cfg.ninputs = 1;
    cfg.out = dst;
    cfg.inplace = true;
    cfg.common_dtype = dst->dtype;
    cfg.compute_dtype = dst->dtype;
    EmTensor *r = em_iter_run(&cfg);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

EmTensor *em_to_dtype(EmTensor *t, EmDType dtype, bool copy) {
    if (t->dtype == dtype && !copy) return (EmTensor *)Py_NewRef(t);
    EmTensor *r = em_empty_like(t, dtype);
    if (!r) return NULL;
    if (em_copy_(r, (PyObject *)t) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

