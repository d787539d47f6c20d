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

/* ------------------------------------------------------------------ dtypes */

/* The dtype list, in promotion-lattice order within each category.
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
    X(FLOAT64, float64, double, 8)

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
    int itemsize;
    bool is_float;
    bool is_signed;
    char buffer_format; /* struct-module format char */
    int npy_type;       /* NumPy type number, -1 when NumPy has none */
} EmDTypeInfo;

extern const EmDTypeInfo em_dtype_info[EM_NUM_DTYPES];

static inline bool em_is_float(EmDType d) { return d >= EM_FLOAT16; }
static inline bool em_is_int(EmDType d) { return d >= EM_UINT8 && d <= EM_INT64; }
static inline int em_itemsize(EmDType d) { return em_dtype_info[d].itemsize; }
static inline const char *em_dtype_name(EmDType d) { return em_dtype_info[d].torch_name; }
/* The dtype a kernel computes in: half types widen to float32. */
static inline EmDType em_compute_dtype(EmDType d) {
    return (d == EM_FLOAT16 || d == EM_BFLOAT16) ? EM_FLOAT32 : d;
}

extern EmDType em_default_float; /* get/set_default_dtype */

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

/* ----------------------------------------------------------------- devices */

typedef enum { EM_CPU = 0, EM_CUDA = 1 } EmDeviceKind;
typedef struct {
    int8_t type;  /* EmDeviceKind */
    int8_t index; /* -1: unspecified (only in ember.device objects) */
} EmDevice;

static inline EmDevice em_cpu(void) { return (EmDevice){EM_CPU, -1}; }
static inline bool em_device_eq(EmDevice a, EmDevice b) {
    return a.type == b.type && (a.type == EM_CPU || a.index == b.index);
}
/* Writes "cpu" or "cuda:1" into buf; returns buf. */
const char *em_device_str(EmDevice d, char *buf, size_t n);

/* ------------------------------------------------------------------ scalars */

/* A Python number kept outside a tensor: weak in type promotion. */
typedef struct {
    char kind; /* 'b' bool, 'i' int, 'f' float */
    union {
        int64_t i;
        double f;
    } v;
} EmScalar;

static inline double em_scalar_to_double(EmScalar s) {
    return s.kind == 'f' ? s.v.f : (double)s.v.i;
}
/* The dtype a weak scalar contributes: bool, int64 or the default float. */
static inline EmDType em_scalar_dtype(EmScalar s) {
    return s.kind == 'b' ? EM_BOOL : s.kind == 'i' ? EM_INT64 : em_default_float;
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

/* Note [version counter]: in-place ops bump storage->version. Views and
 * detach() share the storage and so the counter; autograd compares the
 * version a saved tensor had with the current one. */
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

/* ------------------------------------------------------------------ tensor */

#define EM_MAX_DIMS 64
#define EM_SMALL_DIMS 5

typedef struct EmTensor {
    PyObject_HEAD
    EmStorage *storage;
    int64_t offset; /* in elements */
    int64_t numel;
    int64_t *sizes;   /* points at small[] or a heap array */
    int64_t *strides; /* in elements */
    int ndim;
    uint8_t dtype; /* EmDType */
    bool requires_grad;
    bool is_view; /* shares storage with view_base */
    int32_t output_nr;
    PyObject *view_base; /* the tensor this one is a view of, or NULL */
    PyObject *grad;
    PyObject *grad_fn;
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
/* A contiguous tensor with t's data: t itself (new reference) when already
 * contiguous, else a copy. */
EmTensor *em_contiguous(EmTensor *t);
/* Bump the version counter after an in-place write. */
static inline void em_bump_version(EmTensor *t) { t->storage->version++; }
/* Note [when versions change]: the op layer bumps the version of the tensor
 * a call writes into (out=, in-place variants, methods named `op_`,
 * __setitem__, in-place operators) once, after the op succeeded. Kernels and
 * internal copies into fresh tensors never do, so new tensors start at 0. */
/* Raise unless t is on the CPU (the only device of this build so far). */
int em_check_cpu(const EmTensor *t, const char *opname);
/* Error for a device ember cannot allocate on. */
int em_device_unavailable(EmDevice d);

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
} EmKernels;

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

static inline EmOperand em_opnd(EmTensor *t) { EmOperand o = {t, {'i', {0}}}; return o; }
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
/* Convenience: result dtype (torch's result_type) of operands. */
EmDType em_result_type(int n, const EmOperand *ops);

/* Threading */
extern int em_num_threads;
#define EM_GRAIN 32768 /* elements per thread below which work stays serial */

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
} EmReduceKernel;
#define EM_REDUCE_ACC_MAX 32

/* One kernel per input dtype. */
typedef struct {
    EmReduceKernel k[EM_NUM_DTYPES];
} EmReduceKernels;

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
/* torch-compatible uniform in [0,1) at float / double precision */
float em_rng_uniform_f(EmGenerator *g);
double em_rng_uniform_d(EmGenerator *g);
double em_rng_normal_d(EmGenerator *g);
void em_rng_seed(EmGenerator *g, uint64_t seed);

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

#define EM_MAX_PARAMS 12
typedef enum {
    EM_ARG_TENSOR, EM_ARG_TENSOR_OR_NUMBER, EM_ARG_NUMBER, EM_ARG_INT, EM_ARG_FLOAT,
    EM_ARG_BOOL, EM_ARG_STR, EM_ARG_INTLIST, EM_ARG_SHAPE_OR_DTYPE, EM_ARG_DTYPE, EM_ARG_DEVICE, EM_ARG_GENERATOR,
    EM_ARG_OBJECT,
} EmArgType;

typedef struct {
    PyObject *name; /* interned */
    EmArgType type;
    bool optional;  /* accepts None */
    bool kwonly;
    PyObject *default_value; /* NULL: required */
} EmParam;

/* A signature string from ops.def, parsed once at import (python/args.c). */
typedef struct {
    char fname[40];
    int nparams, npositional;
    int ninputs;   /* leading Tensor / TensorOrNumber params: an elementwise op's inputs */
    int out_index; /* index of `out`, or -1 */
    EmParam params[EM_MAX_PARAMS];
} EmSignature;

typedef struct EmCall EmCall;
typedef PyObject *(*EmImplFn)(EmCall *c);

typedef struct {
    const char *name;
    const char *signature;
    EmImplFn impl;
    const EmKernels *kernels;
    unsigned variants;
    EmSignature sig;
    bool writes_self; /* name ends in '_': the method writes into self */
} EmOpDef;
enum { EM_VARIANT_FN = 1, EM_VARIANT_METHOD = 2, EM_VARIANT_INPLACE = 4 };
extern EmOpDef em_op_defs[EM_NUM_OPS];

/* One call of an op: arguments by parameter index (borrowed, defaults filled
 * in), and where the result goes. */
struct EmCall {
    const EmOpDef *def;
    PyObject *args[EM_MAX_PARAMS];
    PyObject *owned; /* a varargs tuple the parser built, released after the call */
    EmTensor *owned_tensor; /* a number an impl wrapped as a 0-d tensor, released after */
    EmTensor *out;   /* out= tensor, or self for in-place variants */
    bool inplace;
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
/* A Python value as an elementwise operand (tensor or weak scalar); 1 when
 * it is neither (the number protocol then returns NotImplemented). */
int em_to_operand(PyObject *o, EmOperand *out);

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
EmTensor *em_clone(EmTensor *t);
EmTensor *em_detach(EmTensor *t);

/* Python data <-> tensors (python/convert.c, python/numpy.c) */
EmTensor *em_tensor_from_data(PyObject *data, int dtype /* EM_AUTO or EmDType */);
PyObject *em_tensor_tolist(EmTensor *t);
PyObject *em_tensor_item(EmTensor *t);
/* NumPy: 1 when o is an ndarray, 0 when not */
int em_is_ndarray(PyObject *o);
EmTensor *em_from_numpy(PyObject *arr, bool warn_readonly);
PyObject *em_to_numpy(EmTensor *t);
/* DLPack (python/dlpack.c) */
PyObject *em_to_dlpack(EmTensor *t, bool versioned);
EmTensor *em_from_dlpack_capsule(PyObject *capsule);

/* copy_: dst[...] = src (broadcast, dtype cast). Returns 0 / -1. */
int em_copy_(EmTensor *dst, PyObject *src);
/* fill_ with a scalar; 0 / -1 */
int em_fill_(EmTensor *dst, EmScalar value);
/* A tensor cast to dtype (a new tensor; t itself when copy is false and dtype matches). */
EmTensor *em_to_dtype(EmTensor *t, EmDType dtype, bool copy);

/* Module-level helpers */
int em_init_dtypes(PyObject *m);
int em_init_devices(PyObject *m);
int em_init_storage(PyObject *m);
int em_init_tensor_type(PyObject *m);
int em_init_generator(PyObject *m);
int em_init_ops(PyObject *m, PyMethodDef **tensor_methods);
int em_init_size(PyObject *m);
int em_init_numpy(void);

#endif /* EMBER_H */
