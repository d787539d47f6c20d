/* ember.h — the one internal header of ember's C core.
 *
 * Core objects (DESIGN.md §2): EmStorage owns bytes, EmTensor is a strided
 * view of a storage with a dtype, and the autograd fields. Dtypes and devices
 * are small enums with trait tables. Everything here is shared by the files
 * under csrc/; nothing outside the extension sees it.
 *
 * Reference conventions: functions returning PyObject* / EmTensor* return a
 * NEW reference unless their comment says "borrowed". On error they set a
 * Python exception and return NULL (or -1 for int returns).
 */
#ifndef EMBER_H
#define EMBER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

/* Note [EM_CHECK]: validate, set the exception torch raises, jump to the
 * function's single `fail:` label which releases what was acquired. */
#define EM_CHECK(cond, exc, ...)                                               \
    do {                                                                       \
        if (!(cond)) {                                                         \
            PyErr_Format(exc, __VA_ARGS__);                                    \
            goto fail;                                                         \
        }                                                                      \
    } while (0)
/* Set exc with a C printf-formatted message (supports %g, unlike PyErr_Format). */
void em_error(PyObject *exc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Propagate an error already set by a callee. */
#define EM_TRY(cond) do { if (!(cond)) goto fail; } while (0)

#define EM_LIKELY(x) __builtin_expect(!!(x), 1)
#define EM_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* An AVX2 build of a hot loop beside the plain one, chosen at load time, */
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define EM_CLONES __attribute__((target_clones("avx2", "default")))
/* and an AVX-512 build of the hottest loops, called when the CPU has it */
#define EM_AVX512 __attribute__((target("avx512f")))
#define EM_HAS_AVX512() __builtin_cpu_supports("avx512f")
#else
#define EM_CLONES
#endif

/* ------------------------------------------------------------------ dtypes */

/* The dtype list, in promotion-lattice order within each category; the wide
 * unsigned types come last (Note [wide unsigned dtypes]).
 * X(enum suffix, python name, C storage type, itemsize) */
#define EM_FOR_ALL_DTYPES(X)                                                   \
    X(BOOL, bool, bool, 1)                                                     \
    X(UINT8, uint8, uint8_t, 1)                                                \
    X(INT8, int8, int8_t, 1)                                                   \
    X(INT16, int16, int16_t, 2)                                                \
    X(INT32, int32, int32_t, 4)                                                \
    X(INT64, int64, int64_t, 8)                                                \
    X(FLOAT16, float16, uint16_t, 2)                                           \
    X(BFLOAT16, bfloat16, uint16_t, 2)                                         \
    X(FLOAT32, float32, float, 4)                                              \
    X(FLOAT64, float64, double, 8)                                             \
    X(COMPLEX64, complex64, float _Complex, 8)                                 \
    X(COMPLEX128, complex128, double _Complex, 16)                             \
    X(UINT16, uint16, uint16_t, 2)                                             \
    X(UINT32, uint32, uint32_t, 4)                                             \
    X(UINT64, uint64, uint64_t, 8)

typedef enum {
#define X(E, n, T, s) EM_##E,
    EM_FOR_ALL_DTYPES(X)
#undef X
    EM_NUM_DTYPES
} EmDType;

/* The dtypes kernels are written for. Half types compute in float32 and round
 * on store (the iterator converts around the kernel). X(enum suffix, C type) */
#define EM_FOR_COMPUTE_DTYPES(X)                                               \
    X(BOOL, bool) X(UINT8, uint8_t) X(INT8, int8_t) X(INT16, int16_t)          \
    X(INT32, int32_t) X(INT64, int64_t) X(FLOAT32, float) X(FLOAT64, double)

typedef struct {
    const char *name;       /* "float32" */
    const char *torch_name; /* "Float" — torch's ScalarType name, for errors */
    const char *ctype;      /* "float", "c10::Half" — the C++ type some torch messages name */
    int itemsize;
    bool is_float;
    bool is_signed;
    char buffer_format; /* struct-module format char */
    int npy_type;       /* NumPy type number, -1 when NumPy has none */
} EmDTypeInfo;

extern const EmDTypeInfo em_dtype_info[EM_NUM_DTYPES];

/* Float or complex (torch's isFloatingType || isComplexType): the dtypes that
 * keep their type through float-valued ops and may require grad. Real floats
 * alone are em_is_real_float; torch's is_floating_point() is that one. */
static inline bool em_is_float(EmDType d) { return d >= EM_FLOAT16 && d <= EM_COMPLEX128; }
static inline bool em_is_real_float(EmDType d) { return d >= EM_FLOAT16 && d <= EM_FLOAT64; }
static inline bool em_is_complex(EmDType d) { return d == EM_COMPLEX64 || d == EM_COMPLEX128; }
/* complex64 <-> float32, complex128 <-> float64 (torch's toRealValueType /
 * toComplexType; half types pair with complex64, as ember has no complex32) */
static inline EmDType em_complex_part(EmDType d) {
    return d == EM_COMPLEX128 ? EM_FLOAT64 : d == EM_COMPLEX64 ? EM_FLOAT32 : d;
}
static inline EmDType em_complex_of(EmDType d) {
    return em_is_complex(d) ? d : d == EM_FLOAT64 ? EM_COMPLEX128 : EM_COMPLEX64;
}
/* Note [wide unsigned dtypes]: uint16/uint32/uint64 are torch 2.x's "barebones"
 * unsigned types: storage, casts, creation, NumPy/DLPack/checkpoint interop,
 * and kernels for only the few ops torch has them for (a missing kernel is
 * torch's NotImplementedError). They promote only with themselves and with
 * floating types (em_promote_checked); a Python int or 0-dim integer tensor
 * keeps their type. uint8 is the old, fully supported unsigned type. */
static inline bool em_is_wide_unsigned(EmDType d) { return d >= EM_UINT16 && d <= EM_UINT64; }
static inline bool em_is_int(EmDType d) {
    return (d >= EM_UINT8 && d <= EM_INT64) || em_is_wide_unsigned(d);
}
static inline int em_itemsize(EmDType d) { return em_dtype_info[d].itemsize; }
static inline const char *em_dtype_name(EmDType d) { return em_dtype_info[d].torch_name; }
static inline const char *em_dtype_ctype(EmDType d) { return em_dtype_info[d].ctype; }
/* The dtype a kernel computes in: half types widen to float32. */
static inline EmDType em_compute_dtype(EmDType d) {
    return (d == EM_FLOAT16 || d == EM_BFLOAT16) ? EM_FLOAT32 : d;
}

extern EmDType em_default_float; /* get/set_default_dtype */

/* torch.promote_types. EM_DTYPE_ERROR, with RuntimeError set, for the pairs
 * torch refuses (Note [wide unsigned dtypes]); callers check. */
#define EM_DTYPE_ERROR ((EmDType)(EM_NUM_DTYPES + 1))
EmDType em_promote_types(EmDType a, EmDType b);
bool em_can_cast(EmDType from, EmDType to);

/* Cast n elements with byte strides from one dtype to another. */
typedef void (*EmCastFn)(const char *src, int64_t src_stride, char *dst,
                         int64_t dst_stride, int64_t n);
extern EmCastFn em_cast_fns[EM_NUM_DTYPES][EM_NUM_DTYPES];

/* Half-precision conversions (round to nearest even). */
static inline float em_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: value = mant * 2^-24 */
        float f = (float)mant * 5.9604644775390625e-08f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t em_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan (keep nan quiet) */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below 2^-14: subnormal half or zero */
        float a;
        memcpy(&a, &absx, 4);
        /* adding 0.5 aligns the subnormal half grid with float's ulp; the
         * FPU does the round-to-nearest-even for us */
        a += 0.5f;
        uint32_t b;
        memcpy(&b, &a, 4);
        return (uint16_t)(sign | (b - 0x3f000000u));
    }
    uint32_t mant_odd = (absx >> 13) & 1;
    absx += 0xc8000fffu + mant_odd; /* rebias exponent (-112<<23) and round */
    return (uint16_t)(sign | (absx >> 13));
}

static inline float em_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t em_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* Contiguous runs of float16 (bf false) or bfloat16 widened to float32
 * exactly, and rounded back to nearest even (NaN stays NaN): the casts'
 * fast path, and the kernels that compute half types in float32 a block at a
 * time (softmax, layer_norm) instead of on float32 copies of whole tensors. */
void em_half_to_f32_run(const uint16_t *h, float *f, int64_t n, bool bf);
void em_f32_to_half_run(const float *f, uint16_t *h, int64_t n, bool bf);

/* ----------------------------------------------------------------- devices */

/* Note [meta device]: EM_META tensors have sizes, strides and a dtype but no
 * data: their storage records nbytes and holds no memory. Ops whose row has
 * EM_RUNS_META (or EM_RUNS_ANY) compute their results' shapes and dtypes and
 * return meta tensors without running a kernel; every other op raises
 * NotImplementedError naming the op (ops/dispatch_device.c). */
typedef enum { EM_CPU = 0, EM_CUDA = 1, EM_META = 2 } EmDeviceKind;
typedef struct {
    int8_t type;  /* EmDeviceKind */
    int8_t index; /* -1: unspecified (only in ember.device objects) */
} EmDevice;

#include "cuda_backend.h"

static inline EmDevice em_cpu(void) { return (EmDevice){EM_CPU, -1}; }
static inline bool em_device_eq(EmDevice a, EmDevice b) {
    return a.type == b.type && (a.type != EM_CUDA || a.index == b.index);
}
static inline EmDevice em_meta(void) { return (EmDevice){EM_META, -1}; }
/* set_default_device / `with ember.device(d):` (core/device.c): the device
 * object factories without device= build on, or NULL for the CPU. Borrowed. */
extern PyObject *em_default_device_obj;
/* Writes "cpu" or "cuda:1" into buf; returns buf. */
const char *em_device_str(EmDevice d, char *buf, size_t n);

/* ------------------------------------------------------------------ scalars */

/* A Python number kept outside a tensor: weak in type promotion. */
typedef struct {
    /* 'b' bool, 'i' int, 'f' float, 'c' complex (v.f real part, im); 'u' an
     * int in [2**63, 2**64) that only uint64 holds (v.i its bits; code that
     * reads any other int kind sees it wrapped to int64, as torch does) */
    char kind;
    union {
        int64_t i;
        double f;
    } v;
    double im; /* the imaginary part of a 'c' scalar */
} EmScalar;

/* The real part for a complex scalar: callers that need both check kind. */
static inline double em_scalar_to_double(EmScalar s) {
    return s.kind == 'f' || s.kind == 'c' ? s.v.f : s.kind == 'u' ? (double)(uint64_t)s.v.i : (double)s.v.i;
}
/* The dtype a weak scalar contributes: bool, int64, the default float, or
 * for a Python complex the complex dtype matching the default float. */
static inline EmDType em_scalar_dtype(EmScalar s) {
    return s.kind == 'b' ? EM_BOOL : s.kind == 'i' || s.kind == 'u' ? EM_INT64 : s.kind == 'f' ? em_default_float
                                                                 : em_complex_of(em_default_float);
}
/* RuntimeError when a Python number does not fit an integer dtype (torch's
 * "value cannot be converted to type ... without overflow"); floats and bool
 * take any value. */
int em_scalar_check_range(EmScalar s, EmDType d);
/* Store the scalar as one element of dtype d at dst. */
void em_scalar_store(EmScalar s, EmDType d, void *dst);
/* Read one element of dtype d as a scalar. */
EmScalar em_scalar_load(const void *src, EmDType d);
/* Parse a Python bool/int/float (or 1-element tensor when allow_tensor) into
 * a scalar. Returns 0, or -1 with TypeError set. */
int em_scalar_from_py(PyObject *o, EmScalar *out);
PyObject *em_scalar_to_py(EmScalar s);

/* ----------------------------------------------------------------- storage */

/* Note [version counter]: in-place ops bump a tensor's version counter:
 * storage->version, unless the tensor has a counter of its own (t->vc).
 * Views and detach() share their source's counter; `.data` gets a fresh one
 * (torch: writes through .data are invisible to autograd); set_ and
 * `.data =` keep the tensor's counter while its storage changes. Autograd
 * compares the version a saved tensor had with the current one. */
typedef struct EmStorage {
    PyObject_HEAD
    char *data;
    int64_t nbytes;
    EmDevice device;
    PyObject *base; /* owner of foreign memory (NumPy array, DLPack capsule), or NULL */
    void (*deleter)(void *ctx); /* frees foreign memory that base does not own */
    void *deleter_ctx;
    bool owns_data; /* data came from em_alloc_cpu and is freed with the storage */
    int64_t version;
} EmStorage;

extern PyTypeObject EmStorageType;
/* New storage with nbytes of uninitialised CPU memory. */
EmStorage *em_storage_new(int64_t nbytes, EmDevice device);
/* Wrap foreign memory; `base` (may be NULL) is kept alive by the storage. */
EmStorage *em_storage_wrap(void *data, int64_t nbytes, EmDevice device, PyObject *base);

/* Allocator (core/alloc.c). */
void *em_alloc_cpu(size_t nbytes);
void em_free_cpu(void *p, size_t nbytes);
/* Note [CPU block cache] (core/alloc.c) */
void em_cpu_cache_clear(void);
void em_cpu_cache_stats(int64_t out[3]);

/* ------------------------------------------------------------------ tensor */

#define EM_MAX_DIMS 64
#define EM_SMALL_DIMS 5

/* A version counter not tied to a storage (Note [version counter]). */
typedef struct {
    int64_t refs;
    int64_t value;
} EmVersionCounter;

typedef struct EmTensor {
    PyObject_HEAD
    EmStorage *storage;
    EmVersionCounter *vc; /* own version counter, or NULL: storage->version */
    int64_t offset; /* in elements */
    int64_t numel;
    int64_t *sizes;   /* points at small[] or a heap array */
    int64_t *strides; /* in elements */
    int ndim;
    uint8_t dtype; /* EmDType */
    bool requires_grad;
    bool is_view; /* shares storage with view_base */
    int32_t output_nr;
    int64_t version_seen; /* storage version when grad_fn was set (Note [stale views]) */
    bool is_inference; /* made under inference_mode: never enters a graph */
    PyObject *view_base; /* the tensor this one is a view of, or NULL */
    PyObject *grad;
    PyObject *grad_fn;        /* the EmNode that produced it (non-leaf), or NULL */
    struct EmNode *grad_accumulator; /* leaf's AccumulateGrad node, not owned (Note [accumulator]) */
    PyObject *backward_hooks; /* list: Tensor.register_hook on a leaf, or NULL */
    PyObject *post_acc_hooks; /* list: register_post_accumulate_grad_hook, or NULL */
    PyObject *dict;
    PyObject *weakrefs;
    int64_t small[2 * EM_SMALL_DIMS];
} EmTensor;

extern PyTypeObject EmTensorType;
static inline bool em_is_tensor(PyObject *o) { return PyObject_TypeCheck(o, &EmTensorType); }
static inline char *em_data(const EmTensor *t) {
    return t->storage->data + t->offset * em_dtype_info[t->dtype].itemsize;
}
static inline EmDevice em_device(const EmTensor *t) { return t->storage->device; }
static inline bool em_is_cpu(const EmTensor *t) { return t->storage->device.type == EM_CPU; }
static inline bool em_is_meta(const EmTensor *t) { return t->storage->device.type == EM_META; }
/* Note [meta device]: a meta tensor was ever made, so op calls check their
 * devices (core/storage.c). */
extern bool em_meta_used;
/* NotImplementedError when t is a meta tensor: reading its data ("what")
 * is impossible. 0 / -1. */
int em_check_has_data(const EmTensor *t, const char *what);

/* Allocate a tensor object of `type` (EmTensorType uses a free list) viewing
 * `storage` (a new reference is taken). sizes/strides are copied; strides
 * NULL means contiguous. Returns NULL on error. */
EmTensor *em_tensor_alloc(PyTypeObject *type, EmStorage *storage, int64_t offset,
                          int ndim, const int64_t *sizes, const int64_t *strides,
                          EmDType dtype);
/* A fresh contiguous tensor with uninitialised data. */
EmTensor *em_empty(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device);
/* A fresh tensor with t's shape and dtype; dense with t's dim order when
 * t is dense and non-overlapping, otherwise contiguous. */
EmTensor *em_empty_like(const EmTensor *t, EmDType dtype);
/* Uninitialised, with the given strides (storage sized to what they address). */
EmTensor *em_empty_strided(int ndim, const int64_t *sizes, const int64_t *strides, EmDType dtype,
                           EmDevice device);
/* Zero-filled. */
EmTensor *em_zeros(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device);
/* A 0-d tensor holding a scalar. */
EmTensor *em_scalar_tensor(EmScalar s, EmDType dtype, EmDevice device);
/* A view of `base` (same storage and dtype) with new geometry. */
EmTensor *em_view_of(EmTensor *base, int ndim, const int64_t *sizes,
                     const int64_t *strides, int64_t offset);
/* Replace a tensor's geometry in place (used by resize and set_). */
int em_tensor_set_geometry(EmTensor *t, int ndim, const int64_t *sizes,
                           const int64_t *strides, int64_t offset);
int em_tensor_resize(EmTensor *t, int ndim, const int64_t *shape, bool warn);
bool em_is_contiguous(const EmTensor *t);
/* True when a tensor's elements occupy a gap-free block (any dim order). */
bool em_is_non_overlapping_and_dense(const EmTensor *t);
/* True when no two index tuples of the layout address the same element
 * (a sufficient test: sorted by stride, each stride is past the reach of the
 * smaller ones); gaps allowed. At most EM_MAX_DIMS + 1 dims. */
bool em_layout_non_overlapping(int ndim, const int64_t *sizes, const int64_t *strides);
/* A contiguous tensor with t's data: t itself (new reference) when already
 * contiguous, else a copy. */
EmTensor *em_contiguous(EmTensor *t);

/* memory_format= (core/memory_format.c): the ember.memory_format objects. */
typedef enum {
    EM_PRESERVE_FORMAT, EM_CONTIGUOUS_FORMAT, EM_CHANNELS_LAST, EM_CHANNELS_LAST_3D, EM_NUM_MEMORY_FORMATS
} EmMemoryFormat;
extern PyTypeObject EmMemoryFormatType;
/* o (None or NULL: dflt) as a format; -1 with TypeError for anything else. */
int em_memory_format_from_py(PyObject *o, EmMemoryFormat dflt, EmMemoryFormat *out);
PyObject *em_memory_format_object(EmMemoryFormat f); /* borrowed: ember.channels_last, ... */
/* Dense strides of `sizes` in format f (not preserve); -1 with RuntimeError for a wrong rank. */
int em_memory_format_strides(EmMemoryFormat f, int ndim, const int64_t *sizes, int64_t *strides);
/* torch's suggest_memory_format: channels_last(_3d) when t's strides are in
 * that order, contiguous_format otherwise (ambiguous cases included). */
EmMemoryFormat em_suggest_memory_format(const EmTensor *t);
bool em_is_contiguous_as(const EmTensor *t, EmMemoryFormat f);
/* Uninitialised, shaped like src, laid out as f on device (preserve: src's dim order). */
EmTensor *em_empty_format(const EmTensor *src, EmDType dtype, EmDevice device, EmMemoryFormat f);
/* Uninitialised, of `sizes`, laid out as f (not preserve; -1 and RuntimeError for a wrong rank). */
EmTensor *em_empty_in_format(int ndim, const int64_t *sizes, EmDType dtype, EmDevice device, EmMemoryFormat f);
int em_init_memory_formats(PyObject *m);
/* The tensor's version counter (Note [version counter]). */
static inline int64_t *em_version_slot(const EmTensor *t) { return t->vc ? &t->vc->value : &t->storage->version; }
static inline int64_t em_version(const EmTensor *t) { return *em_version_slot(t); }
/* Bump the version counter after an in-place write. */
static inline void em_bump_version(EmTensor *t) { ++*em_version_slot(t); }
/* Make t share src's counter (views, detach): 0, or -1 with MemoryError. */
void em_version_share(EmTensor *t, const EmTensor *src);
/* Give t a counter of its own starting at `value` (.data, set_). 0 / -1. */
int em_version_own(EmTensor *t, int64_t value);
/* Note [when versions change]: the op layer bumps the version of the tensor
 * a call writes into (out=, in-place variants, methods named `op_`,
 * __setitem__, in-place operators) once, after the op succeeded. Kernels and
 * internal copies into fresh tensors never do, so new tensors start at 0. */
/* Raise EmNoCudaKernel unless t is on the CPU: guards CPU kernels. An op
 * tried natively on a GPU that reaches one takes Note [CUDA fallback]. */
int em_check_cpu(const EmTensor *t, const char *opname);
/* RuntimeError unless device d can hold tensors now (CPU always can). */
int em_device_unavailable(EmDevice d);

/* ---------------------------------------------------------- CUDA (core/cuda.c) */

/* Note [CUDA backend] (cuda_backend.h): NULL until the first CUDA request. */
extern const EmCudaBackend *em_cuda;
/* A CUDA storage was ever made: op calls check their devices from then on. */
extern bool em_cuda_used;
/* The backend with at least one GPU, loading ember._cuda on first use;
 * NULL with a RuntimeError saying why there is none. Borrowed. */
const EmCudaBackend *em_cuda_get(void);
/* GPUs available now (0 when none or not built); -1 on error. */
int em_cuda_device_count(void);
/* Give a 'cuda' device its ordinal (the current device) and check it exists. */
int em_cuda_resolve(EmDevice *d);
/* RuntimeError "CUDA error: <what>: <backend message>"; returns -1. */
int em_cuda_error(const char *what);
void *em_cuda_alloc(int dev, size_t nbytes);
void em_cuda_free(int dev, void *p, size_t nbytes);
/* copy_ / fill_ where a GPU tensor takes part (em_copy_/em_fill_ route here). */
int em_cuda_copy_(EmTensor *dst, EmTensor *src, bool non_blocking);
int em_cuda_fill_(EmTensor *dst, EmScalar value);
/* dst <- src across any devices (non_blocking where a GPU takes part). */
int em_copy_device_(EmTensor *dst, EmTensor *src, bool non_blocking);
/* t on `device`: t itself (new reference) when already there, else a copy
 * with t's layout. */
EmTensor *em_to_device(EmTensor *t, EmDevice device, bool non_blocking);
/* Note [GPU random numbers]: the device generator's seed and the offset for
 * the next launch (which this advances). */
void em_cuda_generator_next(int dev, uint64_t *seed, uint64_t *offset);
int em_init_cuda(PyObject *m);

/* ------------------------------------------------------------------- shape */

/* Wrap a possibly negative dim into [0, ndim); IndexError like torch's. */
int em_wrap_dim(int64_t dim, int ndim, int *out);
/* Contiguous strides for sizes. */
void em_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
/* Product of sizes with overflow check (ValueError / RuntimeError). */
int em_numel_checked(int ndim, const int64_t *sizes, int64_t *numel);
/* Elements from the first to one past the last addressed by (sizes,
 * strides): 0 for empty tensors; RuntimeError on overflow or negative strides. */
int em_extent_checked(int ndim, const int64_t *sizes, const int64_t *strides, int64_t *extent);
/* Broadcast two shapes; RuntimeError naming both on mismatch. */
int em_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                        int *nout, int64_t *out);
/* Strides for viewing (sizes, strides) as new_sizes without copying;
 * returns false when impossible. */
bool em_compute_view_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                             int new_ndim, const int64_t *new_sizes, int64_t *new_strides);
/* Formats "[2, 3]" into buf. */
const char *em_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n);
#define EM_SHAPE_BUF 512

/* Parse a shape from Python (a Size/tuple/list of ints, or varargs of ints).
 * Sizes must be >= 0 unless allow_minus_one (exactly one -1 allowed for view).
 * Returns 0 / -1. */
int em_parse_shape(PyObject *obj, const char *fname, int *ndim, int64_t *sizes,
                   bool allow_minus_one);
/* Parse an int or a sequence of ints (any sign). */
int em_parse_intlist(PyObject *obj, const char *fname, int *n, int64_t *vals);
/* New ember.Size from sizes. */
PyObject *em_size_new(int ndim, const int64_t *sizes);
extern PyTypeObject *EmSizeType;

/* --------------------------------------------------------------- iterator */

/* Note [kernels]: an elementwise kernel gets the data pointers of its operands
 * (outputs first), their byte strides along the inner dimension and the
 * element count. It never sees shapes, dtypes or Python. */
typedef void (*EmLoopFn)(char **data, const int64_t *strides, int64_t n);

/* One kernel per compute dtype; NULL where the op does not support it. */
typedef struct {
    EmLoopFn fn[EM_NUM_DTYPES];
    const char *name; /* names the kernel to the CUDA backend (Note [CUDA elementwise]) */
} EmKernels;

/* Note [kernel registry]: every elementwise table (EM_TABLE, cpu/loops.h)
 * and reduction table (RED_KERNELS, cpu/reduce.c) also puts its address in
 * a linker section, so the table a GPU launch names (Note [CUDA
 * elementwise], [CUDA reduce]) can be found by that name without a list
 * kept by hand: a backend that runs launches on host memory (the test double
 * of Note [fake CUDA]) finds its CPU kernels this way. */
#define EM_REGISTER_KERNELS(table)                                                   \
    static const EmKernels *const table##_entry __attribute__((used, section("em_kernels"))) = &table;
#define EM_REGISTER_REDUCE(table)                                                    \
    static const struct EmReduceKernels *const table##_entry                         \
        __attribute__((used, section("em_reduce_kernels"))) = &table;
/* The table named `name` (EmKernels.name), or NULL (cpu/registry.c). */
const EmKernels *em_kernels_find(const char *name);

#define EM_ITER_MAX_OPS 6

/* How an op's result dtype follows from the common dtype (DESIGN.md §4). */
typedef enum {
    EM_PROMOTE_NONE = 0,     /* result in the common dtype */
    EM_PROMOTE_INT_TO_FLOAT, /* int/bool common dtype becomes the default float */
    EM_PROMOTE_BOOL_RESULT,  /* compute in the common dtype, output bool */
} EmPromotion;

typedef struct {
    EmTensor *t; /* NULL: this input is the scalar s */
    EmScalar s;
} EmOperand;
/* Uninitialised, dense in the dim order of the inputs `in` broadcast to shape
 * (Note [output layout], core/memory_format.c). */
EmTensor *em_empty_in_operand_order(int ndim, const int64_t *shape, int nin, const EmOperand *in, EmDType dtype,
                                   EmDevice device);

static inline EmOperand em_opnd(EmTensor *t) { EmOperand o = {t, {'i', {0}, 0}}; return o; }
static inline EmOperand em_opnd_scalar(EmScalar s) { EmOperand o = {NULL, s}; return o; }

#define EM_AUTO (-1)
typedef struct {
    const char *name; /* op name for errors */
    const EmKernels *kernels;
    EmPromotion promotion;
    int8_t common_dtype;  /* EM_AUTO: torch's result_type of the inputs */
    int8_t compute_dtype; /* EM_AUTO: the common dtype, float32 for halves */
    /* Operands the kernel reads or writes as bool whatever the compute dtype
     * (bit 0: the output, bit i: input i-1): where()'s condition, logical
     * ops. They take no part in type promotion. */
    unsigned bool_mask;
    int ninputs;
    EmOperand inputs[EM_ITER_MAX_OPS - 1];
    EmTensor *out; /* given output (out= or self for in-place), or NULL */
    bool inplace;  /* out is inputs[0]: its shape may not grow */
    bool allow_self_overlap; /* fill_: writing one value through stride 0 is harmless */
} EmIterConfig;
#define EM_BOOL_OUT 1u
#define EM_BOOL_IN(i) (2u << (i))

static inline EmIterConfig em_iter_config(const char *name, const EmKernels *k, EmPromotion p) {
    EmIterConfig c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.kernels = k;
    c.promotion = p;
    c.common_dtype = EM_AUTO;
    c.compute_dtype = EM_AUTO;
    return c;
}

/* Run an elementwise op: promote, broadcast, allocate or check the output,
 * then loop. Returns the output (new reference) or NULL. */
EmTensor *em_iter_run(const EmIterConfig *cfg);
/* Note [CUDA elementwise]: run a prepared launch with the CPU loops of the
 * table k (a backend on host memory: Note [fake CUDA]); -1 when k has no
 * loop for the launch's compute dtype. */
int em_iter_run_prepared(const EmKernels *k, const EmCudaElementwise *e);
/* Raised (a NotImplementedError subclass) when the GPU backend has no
 * kernel for an op: the dispatcher catches it and takes the CPU fallback. */
extern PyObject *EmNoCudaKernel;
/* torch.backends.cuda.matmul.allow_tf32: float32 GEMMs on the GPU may use TF32. */
extern bool em_allow_tf32;
/* Convenience: result dtype (torch's result_type) of operands; EM_DTYPE_ERROR
 * with RuntimeError set when torch refuses the promotion. */
EmDType em_result_type(int n, const EmOperand *ops);

/* Note [interrupts]: a long loop notices Ctrl-C within a block, instead of
 * when the whole op ends (core/interrupt.c). Its driver, with the GIL held and
 * before the work, takes `EmStop s = em_stop_arm()`; the loop (any thread)
 * stops taking blocks once em_stop_now(&s); the driver, with the GIL held
 * again, returns its error when em_stop_check(&s) < 0 (KeyboardInterrupt set,
 * the outputs left undefined, the inputs untouched). Armed only on the main
 * thread while Python's SIGINT handler is the default one. Code that cannot
 * arm (no GIL) reads em_stop_current, which a driver sets around calls it
 * makes on its own thread. */
typedef struct {
    bool on;
    sig_atomic_t seen;
} EmStop;
/* work from which drivers arm: below it an op ends within milliseconds anyway */
#define EM_STOP_WORK (1 << 22)
extern volatile sig_atomic_t em_sigint_count;
extern _Thread_local const EmStop *em_stop_current;
EmStop em_stop_arm(void);
static inline bool em_stop_now(const EmStop *s) { return s && s->on && em_sigint_count != s->seen; }
int em_stop_check(const EmStop *s);
/* armed when `work` (elements or multiply-adds / 64) reaches EM_STOP_WORK */
static inline EmStop em_stop_arm_for(double work) {
    EmStop s = {false, 0};
    return work >= (double)EM_STOP_WORK ? em_stop_arm() : s;
}
int em_init_interrupts(void);

/* Threading */
extern int em_num_threads;
#define EM_GRAIN 32768 /* elements per thread below which work stays serial */
/* Threads for `work` elements split over `items` independent pieces: one
 * when the work is under two grains or there is a single piece, else at
 * most one per piece. */
static inline int em_threads_for(int64_t items, double work) {
    if (em_num_threads <= 1 || items < 2 || work < 2.0 * EM_GRAIN) return 1;
    return em_num_threads < items ? em_num_threads : (int)items;
}
/* Lists of tensors (ops/foreach.c): fn(ctx, k, chunk, lo, hi) for the
 * EM_CHUNK-element pieces [lo, hi) of n arrays of sizes[k] elements, all in
 * one parallel region (the GIL released for large work); `chunk` numbers the
 * pieces across the arrays in order. The split does not depend on the thread
 * count. */
#define EM_CHUNK 8192
typedef void (*EmChunkFn)(void *ctx, Py_ssize_t k, int64_t chunk, int64_t lo, int64_t hi);
void em_parallel_chunks(Py_ssize_t n, const int64_t *sizes, EmChunkFn fn, void *ctx);
/* Sums of squares in double (the lanes of vector_norm's kernel). */
double em_cpu_sumsq_f32(const float *x, int64_t n);
double em_cpu_sumsq_f64(const double *x, int64_t n);

/* -------------------------------------------------------------- reductions */

/* Note [reduce kernels]: a reduction (csrc/core/reduce.c drives it, the
 * kernels are in csrc/cpu/reduce.c) folds the reduced elements of each output
 * into an op-defined accumulator of acc_size bytes. Per input dtype:
 *   init     k accumulators (seeded from a per-output float64 `aux` value when
 *            the op takes one: the mean for var's second pass, the max for
 *            logsumexp),
 *   step     fold a block of k outputs x n reduced elements into them; input
 *            byte strides `out_stride` between outputs and `red_stride` along
 *            the reduction, idx0 the block's first index along the reduced
 *            dim (for arg-reductions). The kernel picks the loop order:
 *            along the run when it is contiguous, across outputs otherwise,
 *   combine  merge the partial accumulators of a later range into an earlier
 *            one (threads splitting one reduction),
 *   finish   write k results as out_dtype[0] (int64 or float64) and, for two-
 *            output ops, k as out_dtype[1]; the iterator casts them to the
 *            outputs' dtypes.
 * Kernels never see shapes, output dtypes or Python. */
typedef struct {
    double p;       /* the norm order */
    double divisor; /* finish divides by it: mean's count, var's count - correction */
    bool root;      /* std: finish takes the square root */
} EmReduceParams;

typedef void (*EmReduceInitFn)(void *acc, int64_t k, const char *aux, int64_t aux_stride);
typedef void (*EmReduceStepFn)(void *acc, int64_t k, const char *in, int64_t out_stride, int64_t n,
                               int64_t red_stride, int64_t idx0, const EmReduceParams *p);
typedef void (*EmReduceCombineFn)(void *acc, const void *later, int64_t k);
typedef void (*EmReduceFinishFn)(char *out0, char *out1, const void *acc, int64_t k,
                                 const EmReduceParams *p);

typedef struct {
    int acc_size; /* bytes per output (at most EM_REDUCE_ACC_MAX) */
    int8_t out_dtype[2];
    EmReduceInitFn init;
    EmReduceStepFn step; /* NULL: the op does not support this input dtype */
    EmReduceCombineFn combine;
    EmReduceFinishFn finish;
    const char *name; /* the op's table name (em_reduce_<name>): GPU kernels are looked up by it */
} EmReduceKernel;
#define EM_REDUCE_ACC_MAX 32

/* One kernel per input dtype. */
typedef struct EmReduceKernels {
    EmReduceKernel k[EM_NUM_DTYPES];
} EmReduceKernels;
/* The reduction table whose kernels are named `name` (EmReduceKernel.name:
 * "sum", "argmax", ...), or NULL (Note [kernel registry]). */
const EmReduceKernels *em_reduce_find(const char *name);

typedef struct {
    const EmReduceKernel *kernel;
    EmTensor *in;
    uint64_t mask;    /* bit d: dim d of `in` is reduced */
    EmTensor *out[2]; /* outputs in the reduced shape (keepdim or not), or NULL */
    EmTensor *aux;    /* float64 in the outputs' shape, or NULL */
    EmReduceParams params;
} EmReduceConfig;

/* Run a reduction (releases the GIL and splits across threads when large):
 * over the outputs when there are many, else over the reduced elements with
 * per-thread partials that are then combined. 0 / -1. */
int em_reduce_run(const EmReduceConfig *cfg);
/* Note [CUDA reduce]: run a prepared launch with the CPU kernel k, on host
 * memory (a backend on host memory: Note [fake CUDA]). 0 / -1. */
int em_reduce_run_prepared(const EmReduceKernel *k, const EmCudaReduce *r);
/* `dim` as torch takes it (None, an int, or a sequence of ints; None and ()
 * mean every dim) to a mask over ndim dims: IndexError out of range,
 * RuntimeError for repeats. *all is set when every dim is reduced because
 * none was named. 0 / -1. */
int em_reduce_mask(PyObject *dim, int ndim, uint64_t *mask, bool *all);
/* The reduced shape; returns its ndim. */
int em_reduce_shape(const EmTensor *in, uint64_t mask, bool keepdim, int64_t *shape);
/* Number of elements each output folds (product of the reduced sizes). */
int64_t em_reduce_count(const EmTensor *in, uint64_t mask);

/* Note [line kernels]: scans and selections (cumsum, cummax, median, mode)
 * work on whole lines along one dim: fn gets each line's input and output
 * pointers with byte strides and the line length. */
typedef void (*EmLineFn)(char *out0, int64_t s0, char *out1, int64_t s1, const char *in,
                         int64_t si, int64_t n);
/* Call fn for every line of `in` along dim; out0/out1 (either may be NULL)
 * have in's shape, or in's shape without dim (keepdim false) for selections
 * that write one element per line (then their stride along dim is 0). */
int em_lines_run(EmLineFn fn, EmTensor *in, int dim, EmTensor *out0, EmTensor *out1);

/* --------------------------------------------------------------- generator */

typedef struct EmGenerator EmGenerator;
extern PyTypeObject EmGeneratorType;
EmGenerator *em_default_generator(void);
/* Borrowed: the generator object given (or the default when None/NULL). */
EmGenerator *em_generator_arg(PyObject *o);
uint32_t em_rng_u32(EmGenerator *g);
uint64_t em_rng_u64(EmGenerator *g);
/* the next n of em_rng_u32's values (the same stream), in one call */
void em_rng_fill_u32(EmGenerator *g, uint32_t *out, int64_t n);
/* torch-compatible uniform in [0,1) at float / double precision */
float em_rng_uniform_f(EmGenerator *g);
double em_rng_uniform_d(EmGenerator *g);
double em_rng_normal_d(EmGenerator *g);
void em_rng_seed(EmGenerator *g, uint64_t seed);
/* cpu, or the GPU a Generator(device='cuda') draws for */
EmDevice em_generator_device(const EmGenerator *g);
/* a CUDA generator's Philox (seed, offset) for its next launch; advances it */
void em_generator_philox_next(EmGenerator *g, uint64_t *seed, uint64_t *offset);

/* --------------------------------------------------------------- Python */

extern PyTypeObject EmDTypeType;
extern PyTypeObject EmDeviceType;
typedef struct {
    PyObject_HEAD
    EmDType dtype;
} EmDTypeObject;
typedef struct {
    PyObject_HEAD
    EmDevice device;
} EmDeviceObject;

/* Borrowed singletons. */
PyObject *em_dtype_object(EmDType d);
/* Parse ember.float32 / Python float, int, bool into a dtype; -1 on error. */
int em_dtype_from_py(PyObject *o, EmDType *out);
/* Parse 'cpu', 'cuda:1', ember.device, int. */
int em_device_from_py(PyObject *o, EmDevice *out);
PyObject *em_device_object(EmDevice d);

/* A named pair such as torch.return_types.max(values, indices): steals a
 * and b (NULL-safe: returns NULL if either is NULL). */
PyObject *em_return_pair(const char *name, const char *f0, const char *f1, PyObject *a, PyObject *b);

/* Python-side helpers looked up lazily from ember (e.g. repr). */
PyObject *em_py_helper(const char *name); /* borrowed */

/* ------------------------------------------------------------ op table */

typedef enum {
#define OP(name, ...) EM_OP_##name,
#include "ops/ops.def"
#undef OP
    EM_NUM_OPS
} EmOpId;

#define EM_MAX_PARAMS 16 /* torch's _scaled_dot_product_flash_attention_backward has 15 */

typedef enum {
    EM_ARG_TENSOR, EM_ARG_TENSOR_OR_NUMBER, EM_ARG_NUMBER, EM_ARG_INT, EM_ARG_FLOAT,
    EM_ARG_BOOL, EM_ARG_STR, EM_ARG_INTLIST, EM_ARG_SHAPE_OR_DTYPE, EM_ARG_DTYPE, EM_ARG_TENSOR_LIST, EM_ARG_DEVICE, EM_ARG_GENERATOR,
    EM_ARG_OBJECT,
} EmArgType;

typedef struct {
    PyObject *name; /* interned */
    EmArgType type;
    bool optional;  /* accepts None */
    bool kwonly;
    PyObject *default_value; /* NULL: required */
} EmParam;

/* A signature string from ops.def, parsed once at import (ops/args.c). */
typedef struct {
    char fname[40];
    int nparams, npositional;
    int ninputs;   /* leading Tensor / TensorOrNumber params: an elementwise op's inputs */
    int out_index; /* index of `out`, or -1 */
    EmParam params[EM_MAX_PARAMS];
} EmSignature;

typedef struct EmCall EmCall;
typedef PyObject *(*EmImplFn)(EmCall *c);

/* Note [op row]: what ops.def's columns say about an op beyond its
 * signature and impl. The dispatcher (ops/dispatch.c), autocast
 * (ops/autocast.c) and autograd read these and nothing else: no list of op
 * names lives anywhere outside the table. */

/* Note [device slot]: an op's front-end is per device, like its kernels.
 * The impl column names the CPU front-end, em_impl_<impl>; a devices column
 * with CUDA_IMPL says the op also has a CUDA front-end, em_impl_<impl>_cuda,
 * which the dispatcher (ops/dispatch_device.c) calls when the call's tensors
 * are on a GPU. Neither front-end tests the device: the CPU one only ever
 * sees CPU tensors (the GPU one's EmNoCudaKernel sends the call to Note
 * [CUDA fallback], which runs the CPU one on host copies), and meta tensors
 * go to the CPU one, whose shape logic they use. The table (ops/op_table.c)
 * fills the slot; a row with CUDA_IMPL whose front-end does not exist fails
 * to link. The CPU path stays a direct call: with no GPU storage ever made,
 * em_call_run calls em_impl_<impl> without looking at devices at all. */

/* The device column: where the impl may run. */
enum {
    EM_RUNS_CPU = 0,                /* CPU kernels only: GPU tensors take Note [CUDA fallback] */
    EM_RUNS_ANY = 1 << 0,           /* views and metadata, data only through em_copy_/em_fill_: any device as is */
    EM_RUNS_CUDA = 1 << 1,          /* launches the backend's kernel; EmNoCudaKernel (raised before
                                     * anything is written) sends the call to the fallback */
    EM_RUNS_MIXED = 1 << 2,         /* its tensors may live on different devices (copy_) */
    EM_RUNS_CPU_INDEX = 1 << 3,     /* CPU index tensors may index a GPU tensor */
    EM_RUNS_DEVICE_ARG = 1 << 4,    /* device= says where results go; the input only gives a shape */
    EM_RUNS_ANY_BASIC_KEY = 1 << 5, /* runs as is when its key only makes a view (x[1:, None]) */
    EM_RUNS_META = 1 << 6,          /* the impl runs on meta tensors: shapes, dtypes and strides only */
    EM_RUNS_CUDA_IMPL = 1 << 7,     /* with EM_RUNS_CUDA: GPU calls run the op's own CUDA front-end,
                                     * em_impl_<impl>_cuda (Note [device slot]) */
};
/* The tags column. */
enum {
    EM_TAG_VIEW = 1 << 0,      /* every tensor it returns views its input's storage */
    EM_TAG_INPLACE = 1 << 1,   /* writes into its first argument (a tensor or a list of them) */
    EM_TAG_WRITES = 1 << 2,    /* writes into other arguments too (batch norm's running statistics) */
    EM_TAG_GEOMETRY = 1 << 3,  /* its in-place variant changes only sizes and strides, no data (t_) */
    EM_TAG_POINTWISE = 1 << 4, /* elementwise through the iterator, with the row's kernels */
    EM_TAG_DETACHES = 1 << 5,  /* its in-place variant only takes self out of the graph (detach_):
                                * no data written, so no version bump and no node */
    EM_TAG_FORMAT = 1 << 6,    /* its results take the memory format its first argument suggests
                                * (channels-last in, channels-last out: Note [memory format]) */
};
/* The autocast column, AC(cpu policy, cuda policy): Note [autocast]. */
typedef enum { EM_CAST_NONE, EM_CAST_LOWER, EM_CAST_FP32, EM_CAST_PROMOTE } EmCastPolicy;
enum { EM_CAST_CPU = 0, EM_CAST_CUDA = 1 };

typedef struct {
    const char *name;
    const char *signature;
    EmImplFn impl;
    const EmKernels *kernels;
    unsigned variants;
    unsigned devices;       /* EM_RUNS_* */
    unsigned tags;          /* EM_TAG_* */
    uint8_t autocast[2];    /* EmCastPolicy by EM_CAST_CPU / EM_CAST_CUDA */
    EmSignature sig;
    bool writes_self; /* tagged in place with a tensor first: the method writes into self */
    EmImplFn cuda_impl; /* the CUDA front-end (devices column CUDA_IMPL), or NULL: Note [device slot] */
} EmOpDef;
enum { EM_VARIANT_FN = 1, EM_VARIANT_METHOD = 2, EM_VARIANT_INPLACE = 4 };
extern EmOpDef em_op_defs[EM_NUM_OPS];
/* The op's row, or -1 for a function outside the table (the factories). */
static inline int em_op_row(const EmOpDef *def) {
    return def >= em_op_defs && def < em_op_defs + EM_NUM_OPS ? (int)(def - em_op_defs) : -1;
}

/* One call of an op: arguments by parameter index (borrowed, defaults filled
 * in), and where the result goes. */
struct EmCall {
    const EmOpDef *def;
    PyObject *args[EM_MAX_PARAMS];
    PyObject *owned; /* a varargs tuple the parser built, released after the call */
    EmTensor *owned_tensor; /* a number an impl wrapped as a 0-d tensor, released after */
    EmTensor *out;   /* out= tensor, or self for in-place variants */
    bool inplace;
    bool reflected;  /* from a reflected operator (2 - t): torch names its node differently */
};

int em_signature_parse(const char *text, EmSignature *sig);
/* Bind Python arguments to sig's parameters and check their types. `self`
 * (may be NULL) fills parameter 0. Returns 0 / -1. */
int em_bind_args(const EmSignature *sig, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, EmCall *c);
/* Functions outside the op table (factories: zeros, arange, rand, ...) use
 * the same binder: register an array of EmOpDef with kernels NULL. */
int em_register_functions(PyObject *m, EmOpDef *defs, int n);
/* The argument named `name` (borrowed), or NULL when the signature has none. */
PyObject *em_arg_named(EmCall *c, const char *name);
/* Factories (ops/factory.c): the dtype=/device=/requires_grad= options, the
 * output (out= resized, or a new tensor), and the requires_grad finish. */
typedef struct {
    int dtype; /* EM_AUTO when not given */
    bool requires_grad;
} EmFactoryOpts;
int em_factory_opts(EmCall *c, EmFactoryOpts *o);
EmTensor *em_factory_out(EmCall *c, int ndim, const int64_t *shape, EmDType dtype);
PyObject *em_factory_finish(EmTensor *t, const EmFactoryOpts *o);
/* An empty tensor like src (shape; src's layout when on its device) of dtype on
 * the call's device= (src's device when not given). New reference. */
EmTensor *em_factory_like(EmCall *c, EmTensor *src, EmDType dtype);

/* Note [profiler] (core/profiler.c): while on, op calls and autograd nodes
 * record timed events. */
extern bool em_profiler_on;
int64_t em_profiler_now(void);
PyObject *em_profiler_call(EmCall *c, PyObject *(*run)(EmCall *));
void em_profiler_node(const char *name, int64_t t0);
PyObject *em_profiler_start(PyObject *m, PyObject *record_shapes);
PyObject *em_profiler_stop(PyObject *m, PyObject *unused);
/* Run a bound call through the whole op pipeline (ops/dispatch.c). */
PyObject *em_call_run(EmCall *c);
/* A FORMAT-tagged op's result laid out as its first argument suggests
 * (Note [memory format]); steals r, new reference or NULL. */
PyObject *em_result_in_format(EmCall *c, PyObject *r);
/* Note [CUDA fallback] (ops/dispatch_device.c): run a call whose tensors may
 * live on a GPU. */
PyObject *em_device_dispatch(EmCall *c);
int em_device_dispatch_init(void);
PyObject *em_cuda_fallback_counts(PyObject *m, PyObject *reset);
/* Note [autocast] (ops/autocast.c) */
extern bool em_autocast_on;
extern int em_autocast_suspend;
int em_autocast_args(EmCall *c, PyObject **owned);
int em_init_autocast(PyObject *m);

/* Argument accessors for impls (values were type-checked by em_bind_args). */
static inline EmTensor *em_arg_tensor(EmCall *c, int i) {
    return c->args[i] == Py_None ? NULL : (EmTensor *)c->args[i];
}
static inline bool em_arg_is_none(EmCall *c, int i) { return c->args[i] == Py_None; }
int em_arg_int(EmCall *c, int i, int64_t *out);
int em_arg_float(EmCall *c, int i, double *out);
int em_arg_bool(EmCall *c, int i, bool *out);
int em_arg_scalar(EmCall *c, int i, EmScalar *out);
int em_arg_operand(EmCall *c, int i, EmOperand *out);
int em_arg_intlist(EmCall *c, int i, int *n, int64_t *vals);
int em_arg_dtype(EmCall *c, int i, EmDType *out); /* 0 given, 1 None, -1 error */
/* A TensorList argument as a fast sequence (new reference) of tensors, or
 * NULL with TypeError; *n >= 0: it must have that length (RuntimeError),
 * else *n is set to it. */
PyObject *em_arg_tensor_list(EmCall *c, int i, Py_ssize_t *n);
/* A Python value as an elementwise operand (tensor or weak scalar); 1 when
 * it is neither (the number protocol then returns NotImplemented). core/copy.c */
int em_to_operand(PyObject *o, EmOperand *out);
bool em_is_number(PyObject *o);

/* Elementwise front-ends used by the number protocol (ops/elementwise.c). */

PyObject *em_binary_op(EmOpId op, PyObject *a, PyObject *b, EmTensor *out);
PyObject *em_unary_op(EmOpId op, EmTensor *a, EmTensor *out);

/* Views and copies other files build on (ops/shape_ops.c). */
EmTensor *em_reshape(EmTensor *t, int n, int64_t *shape); /* shape may hold one -1 */
EmTensor *em_transpose(EmTensor *t, int d0, int d1);
EmTensor *em_permute(EmTensor *t, int n, const int64_t *dims);
EmTensor *em_unsqueeze(EmTensor *t, int dim);
EmTensor *em_expand(EmTensor *t, int n, const int64_t *sizes);
EmTensor *em_narrow(EmTensor *t, int dim, int64_t start, int64_t length);
EmTensor *em_select(EmTensor *t, int dim, int64_t index);
EmTensor *em_clone(EmTensor *t); /* clone(): memory_format=preserve_format */
EmTensor *em_clone_as(EmTensor *t, EmMemoryFormat f);
EmTensor *em_detach(EmTensor *t);
EmTensor *em_sum_to(EmTensor *t, int ndim, const int64_t *shape); /* ops/sum_to.c */

/* Linear algebra (ops/linalg.c): products through BLAS, Note [batched gemm].
 * out may be NULL; they return a new reference. */
EmTensor *em_mm(EmTensor *a, EmTensor *b, EmTensor *out);
/* c[i] = a[i] @ b[i], the two products run side by side (Note [GEMM pairs],
 * ops/linalg.c): 0, 1 when it does not apply, -1 on error. */
int em_mm_pair(EmTensor *const a[2], EmTensor *const b[2], EmTensor *c[2]);
EmTensor *em_bmm(EmTensor *a, EmTensor *b, EmTensor *out);
EmTensor *em_matmul(EmTensor *a, EmTensor *b, EmTensor *out);
/* Sum over the dims whose mask is set; integer and bool inputs sum to int64
 * (torch's sum), float inputs keep their dtype. */
EmTensor *em_linalg_sum(EmTensor *t, const bool *mask, bool keepdim);

/* Python data <-> tensors (core/convert.c, core/numpy.c) */
EmTensor *em_tensor_from_data(PyObject *data, int dtype /* EM_AUTO or EmDType */);
/* Complex tensors (ops/complex.c): the float view with a last dim of the two
 * parts, and back; |z| (out may be NULL); sum/mean through the float view. */
EmTensor *em_view_as_real(EmTensor *t);
EmTensor *em_view_as_complex(EmTensor *t);
PyObject *em_complex_abs(EmTensor *t, EmTensor *out);
PyObject *em_complex_sum(EmCall *c, bool mean);
PyObject *em_tensor_tolist(EmTensor *t);
PyObject *em_tensor_item(EmTensor *t);
/* NumPy: 1 when o is an ndarray, 0 when not */
int em_is_ndarray(PyObject *o);
EmTensor *em_from_numpy(PyObject *arr, bool warn_readonly);
PyObject *em_to_numpy(EmTensor *t);
/* DLPack (core/dlpack.c) */
PyObject *em_to_dlpack(EmTensor *t, bool versioned);
EmTensor *em_from_dlpack_capsule(PyObject *capsule);

/* copy_: dst[...] = src (broadcast, dtype cast). Returns 0 / -1. */
int em_copy_(EmTensor *dst, PyObject *src);
/* copy_ where either side is a meta tensor (Note [meta device]). 0 / -1. */
int em_meta_copy_(EmTensor *dst, EmTensor *src);
/* fill_ with a scalar; 0 / -1 */
int em_fill_(EmTensor *dst, EmScalar value);
/* A tensor cast to dtype (a new tensor; t itself when copy is false and dtype matches). */
EmTensor *em_to_dtype(EmTensor *t, EmDType dtype, bool copy);

/* ---------------------------------------------------------------- indexing */
/* Advanced indexing, gather/scatter and the index_* / masked_* ops
 * (ops/index.c, ops/index_advanced.c, ops/scatter_gather.c, cpu/index.c). */

/* How a write combines with what is there (scatter reduce=, accumulate=). */
typedef enum { EM_RED_ASSIGN, EM_RED_SUM, EM_RED_PROD, EM_RED_MAX, EM_RED_MIN, EM_NUM_RED } EmReduceOp;

/* Note [indirect loops]: advanced indexing and the index_* ops address one
 * side, x (the tensor being indexed), through byte offsets off[j] computed
 * from the index tensors, and the other, d (the result, or the values),
 * directly:
 *     for p in P (outer dims), j < nj, a in A (inner dims):
 *         x[p·ps_x + off[j] + a·as_x]  <->  d[p·ps_d + doff(j) + a·as_d]
 * with doff(j) = dense_off ? dense_off[j] : j·dense_jstride. All strides in
 * bytes. Gathers read x, puts write it; puts visit j in order, so among
 * duplicate indices the last write wins. */
typedef EmCudaIndirect EmIndirect; /* cuda_backend.h: the GPU entries take the same description */
void em_cpu_index_gather(const EmIndirect *g, int itemsize);
/* outer_parallel: distinct p never write the same element (x is dense). */
void em_cpu_index_put(const EmIndirect *g, EmReduceOp op, EmDType dtype, bool outer_parallel);

/* Note [scatter loops]: gather/scatter along a dim walk the index tensor:
 * rows over nrow dims (rsize, byte strides rs_*), then n elements along the
 * index's last dim (strides xs, ys, is). The x element is at
 * x_row + k·xs + idx[k]·x_dim_stride (the indexed dim's own stride is 0 in
 * rs_x/xs); y (src, or gather's result) is at y_row + k·ys. Rows in one
 * `group` may write the same elements and stay on one thread. Scatters get
 * their index values checked beforehand (a failed scatter writes nothing). */
typedef EmCudaScatter EmScatterLoop; /* the fields: EmCudaScatter in cuda_backend.h */
/* false: an index was outside [0, size) (the result is then incomplete) */
bool em_cpu_gather(const EmScatterLoop *g, int itemsize);
void em_cpu_scatter(const EmScatterLoop *g, EmReduceOp op, EmDType dtype);

/* off[j] (= or +=) u·stride for the index values u of idx (int32/int64,
 * broadcast to bshape) after wrapping (off NULL: only check); returns -1,
 * or the position of the first value outside [0, size) with it in *bad. */
enum { EM_WRAP_NONE, EM_WRAP_NEG };
int64_t em_cpu_index_offsets(int64_t *off, bool accumulate, const EmTensor *idx, int nb,
                             const int64_t *bshape, int64_t size, int64_t stride, int wrap,
                             int64_t *bad);
/* nonzero in row-major order, split in chunks (threads): counts per chunk,
 * then coordinates ([n, ndim]) and/or byte offsets Σ c_d·ostrides[d]. */
int em_cpu_nonzero_chunks(const EmTensor *t);
void em_cpu_nonzero_count(const EmTensor *t, int nchunks, int64_t *counts);
void em_cpu_nonzero_fill(const EmTensor *t, int nchunks, const int64_t *counts, int64_t *coords,
                         int64_t *offs, const int64_t *ostrides);

/* Front-ends shared by the indexing files. idx has one entry per dim of
 * `view` (NULL: not indexed); a bool mask sits at its first dim. */
EmTensor *em_index_advanced(EmTensor *view, EmTensor **idx);
int em_index_put_(EmTensor *view, EmTensor **idx, EmTensor *values, bool accumulate);
EmTensor *em_nonzero(EmTensor *t);
PyObject *em_nonzero_tuple(EmTensor *t); /* nonzero(as_tuple=True), where(cond) */
/* r (a fresh result; stolen) copied into an op's out= tensor, resized. */
PyObject *em_index_into_out(EmTensor *out, EmTensor *r, bool warn);
/* masked_fill: in place (self) or a broadcast copy (out NULL: new tensor). */
EmTensor *em_masked_fill(EmTensor *self, EmTensor *mask, EmScalar value, bool inplace);
/* torch's overlap rules for an op writing `written` while reading `input`:
 * RuntimeError when they provably share elements, 1 when they share a
 * storage in a way too hard to decide (the caller reads a clone), else 0. */
int em_index_check_overlap(EmTensor *written, EmTensor *input);
/* RuntimeError when two elements of t share memory (stride 0). */
int em_index_check_internal_overlap(EmTensor *t);

/* ------------------------------------------ joining, sorting, searching */

/* Concatenate n tensors along dim (torch.cat's rules: promotion across all
 * inputs, legacy empty 1-D inputs skipped) into `out` (resized) or a new
 * tensor; `name` for errors (ops/join.c). */
EmTensor *em_cat(int n, EmTensor *const *ts, int64_t dim, EmTensor *out, const char *name);

/* Sorting and selection along one dim (cpu/sort.c). Note [sort keys] there. */
typedef enum { EM_SELECT_SORT, EM_SELECT_TOPK, EM_SELECT_KTH } EmSelectMode;
/* Per slice of `in` along dim: the sorted slice (SORT), its first k (TOPK),
 * or its k-th, 1-based (KTH). values (in's dtype) and indices (int64) may be
 * NULL; they have in's shape with dim of length n, k or 1, any strides, and
 * must not overlap `in`. 0, or -1 with MemoryError. */
int em_cpu_sort_select(EmTensor *in, int dim, EmSelectMode mode, int64_t k, bool descending,
                       EmTensor *values, EmTensor *indices);
/* Order-preserving keys of n elements of dtype d (8 * itemsize bits each). */
void em_cpu_sort_keys(const char *data, int64_t byte_stride, int64_t n, EmDType d,
                      bool descending, uint64_t *keys);
int em_sort_key_bits(EmDType d);

/* --------------------------------------------------------------- autograd */

/* Note [autograd graph]: each differentiable op call with an input that
 * requires grad makes an EmNode. Its `next` edges point at the nodes that
 * produced its tensor inputs (their grad_fn and output_nr), or at a leaf's
 * AccumulateGrad node. The engine (autograd/engine.c) runs nodes in
 * dependency order from the root; each node turns the gradients of its
 * outputs into gradients of its inputs. */
typedef struct EmNode EmNode;

typedef struct {
    EmNode *fn;   /* strong reference, or NULL: no gradient flows there */
    int input_nr; /* which output of fn this edge carries the gradient of */
} EmEdge;

/* A tensor a node keeps for its backward (torch's SavedVariable): a
 * detached alias plus what rebuilds its place in the graph on unpack, and
 * the version it had when saved (Note [version counter]). */
typedef struct {
    EmTensor *data;    /* detached alias, NULL when nothing was saved */
    EmTensor *leaf;    /* the saved tensor itself when it is a leaf requiring grad */
    EmNode *grad_fn;   /* its producer (strong), unless is_output */
    EmTensor *original; /* the saved non-leaf input itself: unpack refuses it once detach_()ed */
    int output_nr;
    int64_t version;
    bool is_output;    /* an output of the saving node: grad_fn is the node itself */
    PyObject *packed;  /* pack_hook's result when saved under saved_tensors_hooks (data is NULL then) */
    PyObject *unpack;  /* the matching unpack_hook */
} EmSaved;

/* Shape and dtype of a tensor an edge leads to / a node produced: gradients
 * are checked against it, summed to its shape and cast to its dtype. */
typedef struct {
    int ndim;
    uint8_t dtype;
    bool defined;
    EmDevice device; /* gradients move here (a copy across devices: ToCopyBackward0) */
    int64_t sizes[EM_SMALL_DIMS];
    int64_t *big; /* sizes when ndim > EM_SMALL_DIMS */
} EmMeta;

typedef int (*EmBackwardFn)(EmNode *n, EmTensor **grad_out, EmTensor **grad_in);

typedef enum { EM_NODE_OP, EM_NODE_ACCUMULATE, EM_NODE_PYTHON, EM_NODE_COPY_SLICES } EmNodeKind;

struct EmNode {
    PyObject_HEAD
    EmNodeKind kind;
    EmOpId op;              /* EM_NODE_OP: the op whose backward runs */
    EmBackwardFn backward;
    int64_t sequence_nr;    /* creation order: later nodes run first */
    int num_outputs;        /* forward outputs: gradients this node receives */
    int num_next;           /* forward tensor inputs: gradients it produces */
    EmEdge *next;
    EmMeta *in_meta;        /* [num_next] */
    EmMeta *out_meta;       /* [num_outputs] */
    EmSaved *saved;         /* [num_next] saved inputs (data NULL when unsaved) */
    EmSaved *saved_out;     /* [num_outputs] saved outputs, or NULL */
    PyObject *args;         /* the forward's bound arguments, tensors replaced by None */
    bool released;          /* saved tensors freed after a backward without retain_graph */
    EmTensor *variable;     /* EM_NODE_ACCUMULATE: the leaf (strong) */
    PyObject *ctx;          /* EM_NODE_PYTHON: the Function's ctx; COPY_SLICES: the view node */
    int64_t *view_geom;     /* COPY_SLICES: ndim, sizes, strides, offset of the view */
    PyObject *pre_hooks;    /* list of callables(grad_outputs) */
    PyObject *post_hooks;   /* list of callables(grad_inputs, grad_outputs) */
    PyObject *tensor_hooks; /* dict output_nr -> list (Tensor.register_hook on non-leaves) */
    PyObject *dict;
    PyObject *weakrefs;
};

extern PyTypeObject EmNodeType;
const char *em_node_name(const EmNode *n); /* "MulBackward0" */
static inline bool em_is_node(PyObject *o) { return PyObject_TypeCheck(o, &EmNodeType); }

/* Grad mode (thread-local, like torch). */
bool em_grad_enabled(void);
void em_set_grad_enabled(bool on);
bool em_inference_mode(void);

/* True when t takes part in autograd (requires grad or has a grad_fn). */
static inline bool em_requires_grad(const EmTensor *t) { return t->requires_grad || t->grad_fn; }

/* Node construction (autograd/node.c). */
EmNode *em_node_new(EmNodeKind kind, const char *type_name, int num_next, int num_outputs);
/* The leaf's AccumulateGrad node (created on demand; new reference). */
EmNode *em_grad_accumulator(EmTensor *leaf);
/* The edge a gradient for t travels along: its grad_fn, its accumulator, or none. */
int em_gradient_edge(EmTensor *t, EmEdge *e);
int em_meta_set(EmMeta *m, const EmTensor *t);
void em_meta_clear(EmMeta *m);
static inline const int64_t *em_meta_sizes(const EmMeta *m) { return m->big ? m->big : m->sizes; }
int em_saved_set(EmSaved *s, EmTensor *t, EmNode *owner, bool is_output);
/* The innermost (pack, unpack) of saved_tensors_hooks, borrowed; NULL when none
 * (or NULL with RuntimeError set while they are disabled). autograd/saved_hooks.c */
PyObject *em_saved_hooks_current(void);
int em_init_saved_hooks(PyObject *m);
/* True when a saved slot holds something (a tensor or a packed one). */
static inline bool em_saved_holds(const EmSaved *s) { return s->data != NULL || s->packed != NULL; }
/* Unpack a saved tensor: new reference, reconnected to the graph. */
EmTensor *em_saved_get(EmNode *n, EmSaved *s);
/* Note [saved tensor check]: every saved slot of n usable (0), or -1 with torch's error. */
int em_node_check_saved(EmNode *n);
int em_node_released_error(void); /* sets torch's "backward a second time" error, returns -1 */
void em_saved_clear(EmSaved *s);
void em_node_release(EmNode *n);

/* Recording (autograd/record.c): checks before an op writes in place (and
 * what the node will need of self's state before the write), and the node
 * that follows a differentiable op. */
typedef struct {
    EmTensor *saved_self; /* copy of self before an in-place op whose formula reads it */
    EmMeta self_meta;     /* self's shape before an in-place op (t_ changes it) */
} EmAutogradPre;
int em_autograd_precheck(const EmOpDef *def, EmCall *c, EmAutogradPre *pre);
PyObject *em_autograd_record(const EmOpDef *def, EmCall *c, PyObject *result, EmAutogradPre *pre);
void em_autograd_pre_clear(EmAutogradPre *pre);
/* Note [autograd hooks]: the dispatcher (ops/) runs autograd's checks and
 * records nodes, but autograd sits above ops (its formulas call ops), so the
 * dispatcher reaches it through these pointers, which em_init_autograd sets
 * (ops/dispatch.c defines them). */
typedef struct {
    int (*precheck)(const EmOpDef *def, EmCall *c, EmAutogradPre *pre);
    PyObject *(*record)(const EmOpDef *def, EmCall *c, PyObject *result, EmAutogradPre *pre);
    void (*pre_clear)(EmAutogradPre *pre);
} EmAutogradHooks;
extern EmAutogradHooks em_autograd_hooks;
/* Note [stale views]: a view whose storage was written in place since its
 * grad_fn was set gets a fresh grad_fn from its base. 0 / -1. */
int em_view_refresh(EmTensor *t);
/* t's history becomes a node whose backward raises torch's set_ error (Note [set_ under autograd]). */
int em_history_without_derivative(EmTensor *t, const char *node_name);
/* Call op `id` from C with positional arguments (recorded when grad mode is
 * on, so backward formulas are themselves differentiable). New reference. */
PyObject *em_op(EmOpId id, int nargs, PyObject *const *args);
EmTensor *em_op_t(EmOpId id, int nargs, PyObject *const *args); /* result must be a tensor */
PyObject *em_op_inplace(EmOpId id, int nargs, PyObject *const *args); /* the op_ variant: args[0] written */

/* Backward formulas (ops.def's backward column, built into this table by
 * autograd/derivative_table.c; the formulas live in autograd/derivatives*.c):
 * per op, which inputs (bit i) and outputs (EM_SAVE_OUT) the formula reads,
 * the formula, and torch's node name. */
#define EM_SAVE_IN(i) (1u << (i)) /* i < 29 */
#define EM_SAVE_ALL_IN (1u << 30) /* every tensor input (list ops: cat, einsum) */
#define EM_SAVE_OUT (1u << 31)
/* the outputs after the first only (a norm's mean and rstd): the result
 * itself may then be written in place before backward, as in torch */
#define EM_SAVE_AUX_OUT (1u << 29)
/* torch's node name where it depends on the call (sum() vs sum(dim), pow's overloads) */
typedef const char *(*EmNodeNameFn)(EmCall *c, PyObject *result);
typedef struct {
    EmBackwardFn fn;    /* NULL: NOGRAD or NO_FORMULA */
    unsigned saves;
    const char *name;   /* torch's node name, e.g. "MulBackward0" */
    EmNodeNameFn namer; /* or NULL: always `name` */
    const char *formula; /* the formula's C name ("bw_mul"), for _C._op_info */
    bool no_formula;     /* NO_FORMULA: torch differentiates it, ember has no formula yet */
    bool raises;         /* RAISES: the node's backward raises torch's "not implemented" */
} EmDerivative;
extern const EmDerivative em_derivatives[EM_NUM_OPS];
/* torch's node name for this call of the op's formula. */
static inline const char *em_derivative_node_name(const EmDerivative *d, EmCall *c, PyObject *result) {
    return d->namer ? d->namer(c, result) : d->name;
}
/* The node of a NOGRAD_IN_PLACE row's in-place form (torch's zero gradient
 * for x.eq_(y) on a graph tensor); {0} for every other row. */
extern const EmDerivative em_in_place_derivatives[EM_NUM_OPS];

/* The engine (autograd/engine.c). */
PyObject *em_run_backward(PyObject *m, PyObject *args, PyObject *kw);

/* Module-level helpers */
int em_init_dtypes(PyObject *m);
int em_init_devices(PyObject *m);
int em_init_storage(PyObject *m);
int em_init_tensor_type(PyObject *m);
int em_init_generator(PyObject *m);
int em_init_ops(PyObject *m, PyMethodDef **tensor_methods);
int em_init_size(PyObject *m);
int em_init_autograd(PyObject *m);
int em_init_numpy(void);

/* The __torch_function__ protocol at the Python entry points
 * (ops/torch_function.c, Note [torch function]). */
extern int em_tf_modes;    /* TorchFunctionModes on the stack */
extern int em_tf_disabled; /* 1: subclasses off; 2: everything off */
/* whether an override could take the call: a mode, or arguments to look at */
static inline bool em_tf_active(void) { return em_tf_disabled == 0 || (em_tf_disabled == 1 && em_tf_modes); }
bool em_tf_overrides(PyObject *o);
/* the argument types that never override, told apart without a call */
static inline bool em_tf_plain(PyObject *o) {
    PyTypeObject *tp = Py_TYPE(o);
    return tp == &EmTensorType || tp == &PyFloat_Type || tp == &PyLong_Type || o == Py_None;
}
static inline bool em_tf_wanted_vector(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames) {
    if (!em_tf_active()) return false;
    if (em_tf_modes) return true;
    if (self && !em_tf_plain(self) && em_tf_overrides(self)) return true;
    Py_ssize_t n = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!em_tf_plain(args[i]) && em_tf_overrides(args[i])) return true;
    return false;
}
bool em_tf_wanted_tuple(PyObject *self, PyObject *args, PyObject *kw);
PyObject *em_tf_dispatch_vector(PyObject *func, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *em_tf_dispatch_tuple(PyObject *func, PyObject *self, PyObject *args, PyObject *kw);
PyObject *em_tf_dispatch_method(const char *name, PyObject *self, PyObject *args, PyObject *kw);
PyObject *em_tf_dispatch_binary(const char *name, const char *rname, PyObject *a, PyObject *b);
int em_init_torch_function(PyObject *m);

#endif /* EMBER_H */
