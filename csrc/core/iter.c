/* iter.c — the one elementwise iterator (DESIGN.md §4).
 *
 * Given an op's inputs (tensors or weak Python scalars) and optional output,
 * it decides the dtypes (torch's promotion), broadcasts, checks or allocates
 * the output, rejects overlapping writes, orders and merges dimensions, and
 * runs the op's kernel over inner rows — converting dtypes through small
 * buffers when an operand's dtype differs from the kernel's, and splitting
 * the work across OpenMP threads when it is large. Kernels see only
 * (data, byte strides, n).
 */
#include "../ember.h"
#ifdef _OPENMP
#include <omp.h>
#endif

int em_num_threads = 1;

/* ------------------------------------------------------------ promotion */

/* Note [result type]: operands fall in three priority groups — tensors with
 * dims, 0-d tensors, Python scalars (weak). A lower-priority group only
 * matters when its category (bool < int < float) is higher than that of the
 * groups above it; then the two dtypes promote. */
#define UNDEF ((EmDType)EM_NUM_DTYPES)

static EmDType promote_skip_undef(EmDType a, EmDType b) {
    if (a == EM_DTYPE_ERROR || b == EM_DTYPE_ERROR) return EM_DTYPE_ERROR;
    if (a == UNDEF) return b;
    if (b == UNDEF) return a;
    return em_promote_types(a, b);
}

/* bool < integer < float < complex */
static int category(EmDType d) {
    return d == EM_BOOL ? 0 : em_is_int(d) ? 1 : em_is_complex(d) ? 3 : 2;
}

static EmDType combine_categories(EmDType higher, EmDType lower) {
    if (higher == EM_DTYPE_ERROR || lower == EM_DTYPE_ERROR) return EM_DTYPE_ERROR;
    if (higher == UNDEF) return lower;
    if (lower == UNDEF) return higher;
    if (category(lower) > category(higher)) {
        /* a float tensor with a complex scalar: the complex type of the
         * tensor's float width (float16 or bfloat16 take complex64) */
        if (em_is_complex(lower)) return em_is_float(higher) ? em_complex_of(higher) : lower;
        return em_promote_types(higher, lower);
    }
    return higher;
}

/* Promotion over the inputs whose bit is clear in skip_mask (bit i: input i). */
static EmDType result_type_masked(int n, const EmOperand *ops, unsigned skip_mask) {
    EmDType dim = UNDEF, zero = UNDEF, wrapped = UNDEF;
    for (int i = 0; i < n; i++) {
        if (skip_mask & (1u << i)) continue;
        if (ops[i].t) {
            EmDType d = (EmDType)ops[i].t->dtype;
            if (ops[i].t->ndim > 0)
                dim = promote_skip_undef(dim, d);
            else
                zero = promote_skip_undef(zero, d);
        } else {
            wrapped = promote_skip_undef(wrapped, em_scalar_dtype(ops[i].s));
        }
    }
    return combine_categories(dim, combine_categories(zero, wrapped));
}

EmDType em_result_type(int n, const EmOperand *ops) {
    EmDType r = result_type_masked(n, ops, 0);
    return r == UNDEF ? em_default_float : r;
}

/* -------------------------------------------------------------- the loop */

#define BUF_ELEMS 512
#define MAX_ITEMSIZE 16 /* complex128 */

typedef struct {
    int nops, ndim;
    int64_t numel;
    EmLoopFn fn;
    EmDType compute;
    EmDType kernel_dtype[EM_ITER_MAX_OPS]; /* compute, or bool for masked operands */
    bool any_cast;
    bool needs_cast[EM_ITER_MAX_OPS];
    EmDType dtype[EM_ITER_MAX_OPS];
    char *data[EM_ITER_MAX_OPS];
    int64_t shape[EM_MAX_DIMS]; /* dim 0 is the innermost */
    int64_t strides[EM_MAX_DIMS][EM_ITER_MAX_OPS];
    _Alignas(16) char scalar_buf[EM_ITER_MAX_OPS][MAX_ITEMSIZE];
    const EmStop *stop; /* Note [interrupts]: NULL when not armed */
} Iter;

/* One inner row of n elements; casts through buffers when dtypes differ. */
static void run_row(const Iter *it, char **ptr, int64_t n) {
    const int64_t *st = it->strides[0];
    if (!it->any_cast) {
        it->fn(ptr, st, n);
        return;
    }
    _Alignas(64) char bufs[EM_ITER_MAX_OPS][BUF_ELEMS * MAX_ITEMSIZE];
    char *p[EM_ITER_MAX_OPS];
    int64_t s[EM_ITER_MAX_OPS];
    for (int64_t i0 = 0; i0 < n; i0 += BUF_ELEMS) {
        int64_t m = n - i0 < BUF_ELEMS ? n - i0 : BUF_ELEMS;
        for (int op = 0; op < it->nops; op++) {
            char *src = ptr[op] + i0 * st[op];
            if (!it->needs_cast[op]) {
                p[op] = src;
                s[op] = st[op];
            } else if (op == 0) {
                p[0] = bufs[0];
                s[0] = em_itemsize(it->kernel_dtype[0]);
            } else if (st[op] == 0) { /* broadcast input: convert once */
                em_cast_fns[it->dtype[op]][it->kernel_dtype[op]](src, 0, bufs[op], 0, 1);
                p[op] = bufs[op];
                s[op] = 0;
            } else {
                int csize = em_itemsize(it->kernel_dtype[op]);
                em_cast_fns[it->dtype[op]][it->kernel_dtype[op]](src, st[op], bufs[op], csize, m);
                p[op] = bufs[op];
                s[op] = csize;
            }
        }
        it->fn(p, s, m);
        if (it->needs_cast[0])
            em_cast_fns[it->kernel_dtype[0]][it->dtype[0]](bufs[0], s[0], ptr[0] + i0 * st[0],
                                                           st[0], m);
    }
}

/* Linear indices [begin, end) in iteration order. */
static void run_range(const Iter *it, int64_t begin, int64_t end) {
    int64_t coord[EM_MAX_DIMS];
    char *ptr[EM_ITER_MAX_OPS];
    int64_t rem = begin;
    for (int op = 0; op < it->nops; op++) ptr[op] = it->data[op];
    for (int k = 0; k < it->ndim; k++) {
        coord[k] = rem % it->shape[k];
        rem /= it->shape[k];
        for (int op = 0; op < it->nops; op++) ptr[op] += coord[k] * it->strides[k][op];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[0] - coord[0];
        if (n > end - pos) n = end - pos;
        run_row(it, ptr, n);
        pos += n;
        coord[0] += n;
        for (int op = 0; op < it->nops; op++) ptr[op] += n * it->strides[0][op];
        for (int k = 0; k + 1 < it->ndim && coord[k] == it->shape[k]; k++) {
            coord[k] = 0;
            coord[k + 1]++;
            for (int op = 0; op < it->nops; op++)
                ptr[op] += it->strides[k + 1][op] - it->shape[k] * it->strides[k][op];
        }
    }
}

/* [begin, end) in blocks, stopping at an interrupt (Note [interrupts]) */
#define STOP_BLOCK ((int64_t)1 << 18)
static void run_blocks(const Iter *it, int64_t begin, int64_t end) {
    if (!it->stop) {
        run_range(it, begin, end);
        return;
    }
    for (int64_t b = begin; b < end && !em_stop_now(it->stop); b += STOP_BLOCK)
        run_range(it, b, end - b < STOP_BLOCK ? end : b + STOP_BLOCK);
}

static void run_all(const Iter *it) {
    int64_t numel = it->numel;
#ifdef _OPENMP
    int nt = em_num_threads;
    if (nt > 1 && numel >= 2 * EM_GRAIN) {
        if ((int64_t)nt > numel / EM_GRAIN) nt = (int)(numel / EM_GRAIN);
#pragma omp parallel num_threads(nt)
        {
            int tid = omp_get_thread_num(), T = omp_get_num_threads();
            int64_t chunk = (numel + T - 1) / T;
            chunk = (chunk + 63) & ~(int64_t)63; /* whole cache lines per thread */
            int64_t b = tid * chunk, e = b + chunk < numel ? b + chunk : numel;
            if (b < e) run_blocks(it, b, e);
        }
        return;
    }
#endif
    run_blocks(it, 0, numel);
}

/* ----------------------------------------------------------- checks */

static bool same_geometry(const EmTensor *a, const EmTensor *b) {
    if (a->ndim != b->ndim || em_data(a) != em_data(b)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d]))
            return false;
    return true;
}

static void byte_range(const EmTensor *t, char **lo, char **hi) {
    int64_t span = 0;
    for (int d = 0; d < t->ndim; d++) span += (t->sizes[d] - 1) * t->strides[d];
    *lo = em_data(t);
    *hi = *lo + (span + 1) * em_itemsize(t->dtype);
}

/* torch's assert_no_internal_overlap / assert_no_partial_overlap: only the
 * cases that can be decided cheaply (stride-0 writes; two dense tensors
 * whose byte ranges intersect without being the same view). */
static int check_overlap(const EmTensor *out, const EmTensor *in) {
    if (in->storage != out->storage || in->numel == 0 || out->numel == 0) return 0;
    if (same_geometry(in, out)) return 0;
    if (!em_is_non_overlapping_and_dense(in) || !em_is_non_overlapping_and_dense(out)) return 0;
    char *alo, *ahi, *blo, *bhi;
    byte_range(out, &alo, &ahi);
    byte_range(in, &blo, &bhi);
    if (alo < bhi && blo < ahi) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unsupported operation: some elements of the input tensor and the "
                        "written-to tensor refer to a single memory location. Please clone() the "
                        "tensor before performing the operation.");
        return -1;
    }
    return 0;
}

static int check_internal_overlap(const EmTensor *t) {
    if (em_is_non_overlapping_and_dense(t)) return 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] > 1 && t->strides[d] == 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "unsupported operation: more than one element of the written-to tensor "
                            "refers to a single memory location. Please clone() the tensor before "
                            "performing the operation.");
            return -1;
        }
    }
    return 0;
}

/* --------------------------------------------- Note [CUDA elementwise] */

PyObject *EmNoCudaKernel;

/* Hand the prepared loop to the GPU backend. Steals result. */
static EmTensor *launch_on_gpu(const Iter *it, const EmIterConfig *cfg, EmDevice device,
                               EmTensor *result) {
    EmCudaElementwise e;
    memset(&e, 0, sizeof e);
    e.kernel = cfg->kernels->name;
    e.compute_dtype = it->compute;
    e.nops = it->nops;
    e.ndim = it->ndim;
    e.numel = it->numel;
    for (int d = 0; d < it->ndim; d++) {
        e.shape[d] = it->shape[d];
        for (int op = 0; op < it->nops; op++) e.strides[d][op] = it->strides[d][op];
    }
    for (int op = 0; op < it->nops; op++) {
        e.dtype[op] = it->dtype[op];
        e.kernel_dtype[op] = it->kernel_dtype[op];
        if (it->data[op] == it->scalar_buf[op])
            memcpy(e.scalar[op], it->scalar_buf[op], 8);
        else
            e.data[op] = it->data[op];
    }
    if (em_cuda->elementwise(device.index, &e) < 0) {
        Py_DECREF(result);
        return em_cuda_error(cfg->name), NULL;
    }
    return result;
}

int em_iter_run_prepared(const EmKernels *k, const EmCudaElementwise *e) {
    if (!k || !k->fn[e->compute_dtype]) return -1;
    Iter it;
    memset(&it, 0, sizeof it);
    it.nops = e->nops;
    it.ndim = e->ndim;
    it.numel = e->numel;
    it.compute = (EmDType)e->compute_dtype;
    it.fn = k->fn[e->compute_dtype];
    for (int d = 0; d < e->ndim; d++) {
        it.shape[d] = e->shape[d];
        for (int op = 0; op < e->nops; op++) it.strides[d][op] = e->strides[d][op];
    }
    for (int op = 0; op < e->nops; op++) {
        it.dtype[op] = (EmDType)e->dtype[op];
        it.kernel_dtype[op] = (EmDType)e->kernel_dtype[op];
        if (e->data[op]) {
            it.data[op] = e->data[op];
        } else {
            memcpy(it.scalar_buf[op], e->scalar[op], 8);
            it.data[op] = it.scalar_buf[op];
        }
        it.needs_cast[op] = it.dtype[op] != it.kernel_dtype[op];
        it.any_cast |= it.needs_cast[op];
    }
    run_all(&it);
    return 0;
}

/* ------------------------------------------------------------- build */

/* Note [output layout]: a new output is laid out as torch's TensorIterator
 * lays it out, since scripts read its strides (is_contiguous, channels-last
 * models). When every input has the output's shape, the output is
 * contiguous if they all are, channels-last if they all are, and otherwise
 * takes their strides if they share dense ones; else the inputs' dim order
 * decides (em_empty_in_operand_order). A Python number is a 0-d operand, as
 * torch wraps it. */
static EmTensor *new_output(int ndim, const int64_t *shape, int nin, const EmOperand *in, EmDType dtype,
                            EmDevice device) {
    bool same_shape = true, contiguous = true;
    const EmTensor *first = NULL;
    for (int i = 0; i < nin && same_shape; i++) {
        const EmTensor *t = in[i].t;
        if (!t) {
            same_shape = ndim == 0;
            continue;
        }
        same_shape = t->ndim == ndim && memcmp(t->sizes, shape, ndim * sizeof(int64_t)) == 0;
        contiguous &= em_is_contiguous(t);
        if (!first) first = t;
    }
    if (same_shape && (contiguous || !first)) return em_empty(ndim, shape, dtype, device);
    if (same_shape) { /* the rarer layouts, tested only now */
        bool channels_last = ndim == 4, same_dense = true;
        for (int i = 0; i < nin; i++) {
            const EmTensor *t = in[i].t;
            if (!t) continue;
            channels_last = channels_last && em_is_contiguous_as(t, EM_CHANNELS_LAST);
            same_dense = same_dense && !memcmp(t->strides, first->strides, ndim * sizeof(int64_t)) &&
                         em_is_non_overlapping_and_dense(t);
        }
        if (channels_last) return em_empty_in_format(ndim, shape, dtype, device, EM_CHANNELS_LAST);
        if (same_dense) return em_empty_strided(ndim, shape, first->strides, dtype, device);
    }
    return em_empty_in_operand_order(ndim, shape, nin, in, dtype, device);
}

EmTensor *em_iter_run(const EmIterConfig *cfg) {
    Iter it;
    it.stop = NULL;
    EmTensor *out = cfg->out;
    EmTensor *result = NULL;
    const int nin = cfg->ninputs;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];

    /* devices: all on the CPU, or on one GPU (the dispatcher checked that
     * they agree) with 0-d CPU tensors read as scalars */
    EmDevice device = em_cpu();
    if (out && !em_is_cpu(out)) device = em_device(out);
    for (int i = 0; i < nin && device.type == EM_CPU; i++)
        if (cfg->inputs[i].t && !em_is_cpu(cfg->inputs[i].t)) device = em_device(cfg->inputs[i].t);
    const bool gpu = device.type == EM_CUDA;

    /* dtypes */
    EmDType common;
    if (cfg->common_dtype != EM_AUTO) {
        common = (EmDType)cfg->common_dtype;
    } else {
        common = result_type_masked(nin, cfg->inputs, cfg->bool_mask >> 1);
        if (common == EM_DTYPE_ERROR) return NULL;
        if (common == UNDEF) /* every input is read as bool */
            common = nin > 0 && (cfg->bool_mask >> 1) ? EM_BOOL : em_default_float;
    }
    if (cfg->promotion == EM_PROMOTE_INT_TO_FLOAT && !em_is_float(common)) common = em_default_float;
    EmDType res_dtype = cfg->promotion == EM_PROMOTE_BOOL_RESULT ? EM_BOOL : common;
    EmDType compute = cfg->compute_dtype != EM_AUTO ? (EmDType)cfg->compute_dtype
                                                    : em_compute_dtype(common);
    EmLoopFn fn = cfg->kernels->fn[compute];
    /* a launch's scalars travel in 8 bytes (EmCudaElementwise): complex128 ones would not fit */
    if (gpu && fn && (!em_cuda->has_elementwise || em_itemsize(compute) > 8 ||
                      !em_cuda->has_elementwise(cfg->kernels->name, compute))) {
        PyErr_Format(EmNoCudaKernel, "\"%s\" has no CUDA kernel for '%s'", cfg->kernels->name,
                     em_dtype_name(compute));
        return NULL;
    }
    if (!fn) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s_cpu\" not implemented for '%s'", cfg->name,
                     em_dtype_name(common));
        return NULL;
    }
    if (out && cfg->promotion != EM_PROMOTE_BOOL_RESULT &&
        !em_can_cast(res_dtype, (EmDType)out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "result type %s can't be cast to the desired output type %s",
                     em_dtype_name(res_dtype), em_dtype_name((EmDType)out->dtype));
        return NULL;
    }

    /* broadcast shape of the inputs (and of an in-place target, which the
     * inputs must broadcast to) */
    int ndim = 0;
    int64_t shape[EM_MAX_DIMS];
    if (out && cfg->inplace) {
        ndim = out->ndim;
        memcpy(shape, out->sizes, ndim * sizeof(int64_t));
    }
    for (int i = 0; i < nin; i++) {
        EmTensor *t = cfg->inputs[i].t;
        if (t && em_broadcast_shapes(ndim, shape, t->ndim, t->sizes, &ndim, shape) < 0) return NULL;
    }

    /* the output: check, resize or allocate */
    if (out) {
        bool same = out->ndim == ndim && memcmp(out->sizes, shape, ndim * sizeof(int64_t)) == 0;
        if (!same) {
            if (cfg->inplace) {
                PyErr_Format(PyExc_RuntimeError,
                             "output with shape %s doesn't match the broadcast shape %s",
                             em_shape_str(out->ndim, out->sizes, a, sizeof a),
                             em_shape_str(ndim, shape, b, sizeof b));
                return NULL;
            }
            if (em_tensor_resize(out, ndim, shape, true) < 0) return NULL;
        }
        if (!cfg->allow_self_overlap && check_internal_overlap(out) < 0) return NULL;
        for (int i = 0; i < nin; i++)
            if (cfg->inputs[i].t && check_overlap(out, cfg->inputs[i].t) < 0) return NULL;
        result = (EmTensor *)Py_NewRef(out);
    } else {
        result = new_output(ndim, shape, nin, cfg->inputs, res_dtype, device);
        if (!result) return NULL;
    }
    /* Note [meta device]: the shape, dtype and layout are all a meta call computes */
    if (result->numel == 0 || device.type == EM_META) return result;

    /* operands: output first, byte strides aligned to the broadcast shape */
    int64_t full[EM_ITER_MAX_OPS][EM_MAX_DIMS];
    it.nops = nin + 1;
    it.compute = compute;
    it.fn = fn;
    it.any_cast = false;
    for (int op = 0; op < it.nops; op++) {
        EmTensor *t = op == 0 ? result : cfg->inputs[op - 1].t;
        bool as_bool = ((cfg->bool_mask >> op) & 1) ||
                       (op == 0 && cfg->promotion == EM_PROMOTE_BOOL_RESULT);
        it.kernel_dtype[op] = as_bool ? EM_BOOL : compute;
        if (!t || (gpu && em_is_cpu(t))) { /* a weak scalar (or a 0-d CPU tensor with GPU
                                            * operands): converted once to the kernel's dtype */
            EmScalar v = t ? em_scalar_load(em_data(t), (EmDType)t->dtype) : cfg->inputs[op - 1].s;
            em_scalar_store(v, it.kernel_dtype[op], it.scalar_buf[op]);
            it.data[op] = it.scalar_buf[op];
            it.dtype[op] = it.kernel_dtype[op];
            for (int d = 0; d < ndim; d++) full[op][d] = 0;
        } else {
            int isz = em_itemsize(t->dtype), lead = ndim - t->ndim;
            it.data[op] = em_data(t);
            it.dtype[op] = (EmDType)t->dtype;
            for (int d = 0; d < ndim; d++) {
                int td = d - lead;
                full[op][d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td] * isz;
            }
        }
        it.needs_cast[op] = it.dtype[op] != it.kernel_dtype[op];
        it.any_cast |= it.needs_cast[op];
    }

    /* order dims innermost-first by the output's strides, drop size-1 dims,
     * then merge neighbours that are contiguous for every operand */
    int perm[EM_MAX_DIMS], k = 0;
    for (int d = ndim - 1; d >= 0; d--)
        if (shape[d] != 1) perm[k++] = d;
    for (int i = 1; i < k; i++) {
        int p = perm[i], j = i;
        while (j > 0 && full[0][perm[j - 1]] > full[0][p]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    it.ndim = 0;
    for (int i = 0; i < k; i++) {
        int d = perm[i];
        if (it.ndim > 0) {
            int m = it.ndim - 1;
            bool merge = true;
            for (int op = 0; op < it.nops && merge; op++)
                merge = full[op][d] == it.shape[m] * it.strides[m][op];
            if (merge) {
                it.shape[m] *= shape[d];
                continue;
            }
        }
        it.shape[it.ndim] = shape[d];
        for (int op = 0; op < it.nops; op++) it.strides[it.ndim][op] = full[op][d];
        it.ndim++;
    }
    if (it.ndim == 0) { /* a single element */
        it.ndim = 1;
        it.shape[0] = 1;
        for (int op = 0; op < it.nops; op++) it.strides[0][op] = 0;
    }
    it.numel = result->numel;
    if (gpu) return launch_on_gpu(&it, cfg, device, result);

    if (it.numel >= 65536) {
        EmStop stop = {false, 0};
        if (it.numel >= EM_STOP_WORK) {
            stop = em_stop_arm();
            it.stop = &stop;
        }
        Py_BEGIN_ALLOW_THREADS
        run_all(&it);
        Py_END_ALLOW_THREADS
        if (em_stop_check(&stop) < 0) {
            Py_DECREF(result);
            return NULL;
        }
    } else {
        run_all(&it);
    }
    return result;
}
