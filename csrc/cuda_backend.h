/* cuda_backend.h — the table of functions through which the core (ember._C)
 * reaches a GPU. Plain C, no Python: it is compiled both into the core and
 * into ember._cuda (nvcc / the C++ host compiler).
 *
 * Note [CUDA backend]: ember._C never links a CUDA library. At the first
 * CUDA request it imports ember._cuda, which hands over one EmCudaBackend
 * through the capsule `ember._cuda._backend` (DESIGN.md §8). Everything the
 * core asks of a GPU — devices, the caching allocator, copies, streams,
 * events, kernels — goes through this table, so a machine without CUDA
 * imports ember untouched and `ember.cuda.is_available()` is False.
 *
 * Conventions: device ordinals are >= 0; `-1` as a copy endpoint means host
 * memory. Functions returning int give 0 on success and -1 on failure, with
 * a message in the backend's error buffer (`last_error`): the core turns it
 * into a Python RuntimeError, so no CUDA error ever aborts the process.
 * Kernels take raw device pointers, sizes and strides in elements: they
 * never see Python or EmTensor. */
#ifndef EMBER_CUDA_BACKEND_H
#define EMBER_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the table's layout changes: the core refuses a backend
 * built for another layout instead of calling through stale pointers. */
#define EM_CUDA_ABI 5
#define EM_CUDA_MAX_DIMS 64

#define EM_CUDA_MAX_OPS 6 /* operands of one elementwise kernel, output first */

/* Note [CUDA elementwise]: one elementwise kernel launch, prepared by the
 * core's iterator (csrc/core/iter.c) exactly as for its CPU loops: the
 * broadcast shape with size-1 dims dropped and mergeable dims merged,
 * innermost first, and each operand's byte strides (0 where it broadcasts).
 * Operand 0 is the output. Each operand is read (written) in its own dtype
 * and converted to/from `kernel_dtype[op]` (the compute dtype, or bool for
 * masks) around the per-element math, which the kernel named `kernel`
 * defines: the name of the CPU kernel table (em_kernels_<name>: "add",
 * "mul", "exp", "copy", "where", ...), so both devices compute the same
 * function. A scalar operand (data NULL) is passed by value in `scalar`,
 * already stored as its kernel_dtype. */
typedef struct {
    const char *kernel;
    int compute_dtype;
    int nops;
    int ndim;
    int64_t numel;
    int64_t shape[EM_CUDA_MAX_DIMS];
    int64_t strides[EM_CUDA_MAX_DIMS][EM_CUDA_MAX_OPS];
    void *data[EM_CUDA_MAX_OPS];
    int dtype[EM_CUDA_MAX_OPS];
    int kernel_dtype[EM_CUDA_MAX_OPS];
    unsigned char scalar[EM_CUDA_MAX_OPS][8];
} EmCudaElementwise;

/* Note [CUDA reduce]: one reduction launch, prepared by the core's reduce
 * iterator (csrc/core/reduce.c) exactly as for its CPU kernels (Note [reduce
 * kernels] in ember.h). The input's dims are split into kept dims (one per
 * output element) and reduced dims, size-1 dims dropped, each group ordered
 * innermost-first by the input's strides and mergeable neighbours merged.
 * Byte strides: kept_strides[d] = {input, out[0], out[1], aux} (0 where an
 * output does not move along d), red_strides[d] for the input. `op` names
 * the CPU kernel table (em_reduce_<op>: "sum", "nansum", "nanmean", "prod",
 * "count_nonzero", "all", "any", "amax", "amin", "aminmax", "argmax",
 * "argmin", "norm0", "norm1", "norm2", "normp", "norminf", "normninf",
 * "sqdev", "lse"); its semantics, accumulator widths and tie rules are the
 * CPU kernels' (csrc/cpu/reduce.c). The kernel writes out[i] (when not
 * NULL) in out_dtype[i], converting from its result dtype: the CPU kernel's
 * `result_dtype[i]` (int64 or float64). Arg-reductions number the reduced
 * elements 0.. in this order (innermost first); the core only asks them
 * over one reduced dim. aux (NULL or float64, one per output, at the kept
 * strides' 4th column) seeds two-pass ops: sqdev's mean, lse's max. An
 * empty reduction (red_numel 0) writes each output's identity/finish. */
typedef struct {
    const char *op;
    int in_dtype;
    int out_dtype[2];    /* the output tensors' dtypes (-1 when absent) */
    int result_dtype[2]; /* what the op computes per output: EM_INT64 or EM_FLOAT64 codes */
    int nkept, nred;     /* >= 1 each (a single size-1 dim when there is none) */
    int64_t out_numel;   /* product of kept sizes */
    int64_t red_numel;   /* product of reduced sizes (elements per output) */
    int64_t kept_shape[EM_CUDA_MAX_DIMS];
    int64_t kept_strides[EM_CUDA_MAX_DIMS][4];
    int64_t red_shape[EM_CUDA_MAX_DIMS];
    int64_t red_strides[EM_CUDA_MAX_DIMS];
    const void *in;
    void *out[2];
    const void *aux;
    double p;       /* the norm order (normp) */
    double divisor; /* sums divide float results by it (mean: the count; 1 else); sqdev's N - correction */
    bool root;      /* sqdev: finish takes the square root (std) */
} EmCudaReduce;

/* Note [CUDA indexing] (csrc/cuda/index.h): the loop descriptions of the
 * CPU's indexing kernels (Note [indirect loops] and Note [scatter loops] in
 * ember.h, which names these types EmIndirect and EmScatterLoop), with
 * device pointers in place of host ones. All strides in bytes. */
typedef struct {
    char *x, *d;
    int np, na;
    int64_t psize[EM_CUDA_MAX_DIMS], ps_x[EM_CUDA_MAX_DIMS], ps_d[EM_CUDA_MAX_DIMS];
    int64_t asize[EM_CUDA_MAX_DIMS], as_x[EM_CUDA_MAX_DIMS], as_d[EM_CUDA_MAX_DIMS];
    int64_t nj;
    const int64_t *off;
    const int64_t *dense_off;
    int64_t dense_jstride;
} EmCudaIndirect;

typedef struct {
    char *x, *y;
    const char *idx; /* int64 */
    int nrow;
    int64_t rsize[EM_CUDA_MAX_DIMS], rs_x[EM_CUDA_MAX_DIMS], rs_y[EM_CUDA_MAX_DIMS], rs_i[EM_CUDA_MAX_DIMS];
    int64_t n, xs, ys, is, x_dim_stride, group;
    int64_t size;
} EmCudaScatter;

typedef struct {
    char name[256];
    int64_t total_memory; /* bytes */
    int major, minor;     /* compute capability */
    int multi_processor_count;
    int64_t l2_cache_size;
    int warp_size;
} EmCudaDeviceProps;

/* Memory counters of one device, in bytes (torch.cuda.memory_stats' names). */
typedef struct {
    int64_t allocated, max_allocated; /* handed out to tensors */
    int64_t reserved, max_reserved;   /* held from cudaMalloc, cached blocks included */
    int64_t num_alloc_retries, num_ooms;
} EmCudaMemoryStats;

/* An opaque stream or event handle (cudaStream_t / cudaEvent_t). NULL is
 * the device's default stream. */
typedef void *EmCudaStream;
typedef void *EmCudaEvent;

/* One fused Adam/AdamW step over n parameters (Note [CUDA fused nn]). Host arrays of n
 * entries each; the tensors (device pointers) are contiguous with numels[k]
 * elements of dtypes[k]; max_exp_avg_sqs is NULL unless amsgrad. steps[k]:
 * the parameter's step count, already incremented and rounded to float32. */
typedef struct EmCudaAdam {
    int n;
    const int *dtypes;
    void *const *params;
    const void *const *grads;
    void *const *exp_avgs;
    void *const *exp_avg_sqs;
    void *const *max_exp_avg_sqs;
    const int64_t *numels;
    const double *steps;
    double lr, beta1, beta2, weight_decay, eps;
    bool maximize, decoupled; /* decoupled: AdamW */
} EmCudaAdam;

/* One fused attention problem (Note [CUDA attention] in
 * csrc/cuda/attention.h): q (B, H, L, D), k and v (B, Hkv, S, D) with H a
 * multiple of Hkv (query head h reads key/value head h / (H / Hkv)), each
 * read through element strides {batch, head, row} with unit stride along D;
 * out and dout (B, H, L, D) likewise. dtype: float16, bfloat16 or float32
 * (halves compute in float32). lse: (B, H, L) float32, contiguous: the
 * natural-log log-sum-exp of each row's scaled scores (-inf for a row that
 * sees no key). causal: torch's top-left alignment, query i sees keys j <= i.
 * The backward writes dq (B, H, L, D), dk and dv (B, Hkv, S, D), contiguous,
 * in dtype. D <= 256. */
typedef struct EmCudaAttention {
    int dtype;
    int64_t B, H, Hkv, L, S, D;
    double scale;
    bool causal;
    const void *q, *k, *v;
    void *out;        /* written by the forward, read by the backward */
    const void *dout; /* backward only */
    int64_t sq[3], sk[3], sv[3], so[3], sdo[3];
    float *lse;
    void *dq, *dk, *dv;
} EmCudaAttention;
/* Attention with the extras (Note [CUDA attention]): the problem
 * `a` plus an optional mask, dropout inside the kernel, the layout of the
 * logsumexp rows and of the gradients.
 *   mask_kind 0: none; 1: bool (true takes part); 2: additive, of a.dtype.
 *     Element (b, h, i, j) of the broadcast (B, H, L, S) mask is at
 *     mask[b*sm[0] + h*sm[1] + i*sm[2] + j*sm[3]] (0 strides broadcast).
 *   dropout_p > 0: P is multiplied by keep / (1 - dropout_p) where keep of
 *     element (b·H + h, i, j) is the Bernoulli(1 - dropout_p) draw
 *     random_fill(EM_RANDOM_BERNOULLI, float32) makes for element
 *     ((b·H + h)·L + i)·S + j of the Philox stream (seed, offset), so the
 *     backward (and a test) regenerates it; lse is that of the undropped P.
 *   lse: row (b, h) at lse + (b·H + h)·lse_ld (lse_ld >= L).
 *   The backward writes dq, dk, dv through element strides sdq / sdk / sdv
 *     {batch, head, row} (unit along D) of dense, non-overlapping layouts.
 * D <= 256. A row that no key takes part in gives out 0, lse -inf. */
typedef struct EmCudaAttentionEx {
    EmCudaAttention a;
    int mask_kind;
    const void *mask;
    int64_t sm[4];
    double dropout_p;
    uint64_t seed, offset;
    int64_t lse_ld;
    int64_t sdq[3], sdk[3], sdv[3];
} EmCudaAttentionEx;
/* A 2-d pool's geometry (the layout of EmPool2d, cpu/poolnorm.h). */
typedef struct EmCudaPool2d {
    int64_t planes, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} EmCudaPool2d;

/* Sliding kh x kw windows over N images of C planes H x W (the
 * layout of EmConvGeom, cpu/conv.h): window (oy, ox) of oh x ow reads rows
 * oy*sh - ph + ki*dh and columns ox*sw - pw + kj*dw, zeros outside. */
typedef struct EmCudaConvGeom {
    int64_t C, H, W;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t oh, ow;
} EmCudaConvGeom;
/* One spatial axis of an upsampling (Note [interp layout] in
 * cpu/interp.h, with device arrays): output position o reads input
 * positions idx[o*taps + k] with weights w[o*taps + k] (float32, or float64
 * for float64 data; NULL for nearest copies). Its inverse, for the
 * backward's gathers: the taps t = o*taps + k with idx[t] == i are
 * inv[inv_off[i] .. inv_off[i + 1]), ascending. */
typedef struct EmCudaInterpAxis {
    int taps;
    int64_t in, out;
    const int64_t *idx;
    const void *w;
    const int64_t *inv_off; /* [in + 1] */
    const int64_t *inv;     /* [out * taps] */
} EmCudaInterpAxis;

typedef struct EmCudaBackend {
    int abi;            /* EM_CUDA_ABI */
    const char *name;   /* "cuda" (ember._cuda) or "fake" (the test double) */
    const char *(*last_error)(void); /* message of the latest failure */

    /* ---- devices */
    int (*device_count)(void); /* GPUs usable now; 0 without a driver or GPU (never fails) */
    int (*current_device)(void);
    int (*set_device)(int dev);
    int (*device_props)(int dev, EmCudaDeviceProps *out);
    int (*synchronize)(int dev); /* wait for all work on the device */

    /* ---- the caching allocator (Note [CUDA caching allocator] in csrc/cuda) */
    void *(*alloc)(int dev, size_t nbytes, EmCudaStream stream); /* NULL: out of memory / error */
    void (*free)(int dev, void *ptr, size_t nbytes, EmCudaStream stream);
    void (*memory_stats)(int dev, EmCudaMemoryStats *out);
    void (*reset_peak_stats)(int dev);
    int (*empty_cache)(void);
    /* page-locked host memory for pin_memory() and non_blocking copies */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *ptr);

    /* ---- copies of nbytes contiguous bytes; a device of -1 is the host.
     * non_blocking: asynchronous on the current stream (the host side must
     * be pinned for it to overlap); otherwise the call returns when done. */
    int (*memcpy)(void *dst, int dst_dev, const void *src, int src_dev, size_t nbytes,
                  bool non_blocking);

    /* ---- streams and events (per device; the current stream is per thread
     * in torch, per device here) */
    int (*stream_create)(int dev, int priority, EmCudaStream *out);
    void (*stream_destroy)(int dev, EmCudaStream s);
    int (*stream_synchronize)(int dev, EmCudaStream s);
    int (*stream_query)(int dev, EmCudaStream s); /* 1 done, 0 busy, -1 error */
    EmCudaStream (*current_stream)(int dev);
    int (*set_current_stream)(int dev, EmCudaStream s);
    int (*stream_wait_event)(int dev, EmCudaStream s, EmCudaEvent e);
    int (*event_create)(int dev, bool enable_timing, EmCudaEvent *out);
    void (*event_destroy)(int dev, EmCudaEvent e);
    int (*event_record)(int dev, EmCudaEvent e, EmCudaStream s);
    int (*event_synchronize)(int dev, EmCudaEvent e);
    int (*event_query)(int dev, EmCudaEvent e); /* 1 done, 0 busy, -1 error */
    int (*event_elapsed_ms)(int dev, EmCudaEvent start, EmCudaEvent end, float *ms);

    /* ---- kernels (all on `dev`'s current stream) */
    /* dst[i] = (dst dtype) src[i] over an ndim index space: the strided copy
     * and dtype cast every device-side .to()/.contiguous()/copy_ needs.
     * dtypes are EmDType codes; strides in elements. */
    int (*copy_strided)(int dev, int ndim, const int64_t *sizes, void *dst, int dst_dtype,
                        const int64_t *dst_strides, const void *src, int src_dtype,
                        const int64_t *src_strides);
    /* C = alpha * op(A) @ op(B) + beta * C for `batch` matrices, column-major
     * as in BLAS (the core passes row-major operands swapped), through
     * cuBLAS(Lt). dtype: float32/float64/float16/bfloat16 (halves accumulate
     * in float32); allow_tf32: float32 may use TF32 tensor cores. Strides
     * between batch matrices in elements (0: the same matrix for all). */
    int (*gemm)(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc, int64_t stride_c,
                int64_t batch, bool allow_tf32);
    /* Note [CUDA elementwise]: has_elementwise says whether `kernel` exists
     * for compute_dtype (the core falls back to the CPU when not); the launch
     * returns when queued. */
    bool (*has_elementwise)(const char *kernel, int compute_dtype);
    int (*elementwise)(int dev, const EmCudaElementwise *e);
    /* Note [GPU random numbers] (csrc/cuda/philox.h): fill numel contiguous
     * elements of dtype with draws of `kind` (EM_RANDOM_*) from the Philox
     * stream (seed, offset); a, b: the distribution's parameters; from,
     * range: integer draws. */
    int (*random_fill)(int dev, int kind, int dtype, void *out, int64_t numel, uint64_t seed,
                       uint64_t offset, double a, double b, int64_t from, uint64_t range);

    /* ---- fused nn kernels (Note [CUDA fused nn] in csrc/cuda/nn_fused.h).
     * Every operand is contiguous. `dtype` is the data's dtype (float16,
     * bfloat16, float32, float64); halves compute in float32. "ct" below is
     * the statistics' dtype: float64 for float64 data, else float32. Entries
     * that index with data the core has not looked at (class targets,
     * embedding indices) check bounds on the device and return 1 with the
     * offending value in *bad (a host int64), having written nothing the
     * core keeps; that costs one small device-to-host read. */
    /* out = softmax(in) or log_softmax(in) along n of a [outer, n, inner] block */
    int (*softmax)(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n,
                   int64_t inner, bool log);
    /* gi = y * (g - sum(g * y)) (softmax) or g - exp(y) * sum(g) (log), y the forward's output */
    int (*softmax_backward)(int dev, int dtype, void *gi, const void *g, const void *y,
                            int64_t outer, int64_t n, int64_t inner, bool log);
    /* rows x n: y = (x - mean) * rstd * w + b. mean NULL: rms norm (no centring).
     * w, b (n, ct) may be NULL; mean, rstd (rows, ct). */
    int (*layer_norm)(int dev, int dtype, void *y, void *mean, void *rstd, const void *x,
                      const void *w, const void *b, int64_t rows, int64_t n, double eps);
    /* layer norm's backward: dx (rows x n, dtype) from g, x (dtype), mean, rstd (ct), w (n, ct,
     * may be NULL); dw, db (n, ct) = sums over rows of g * xhat and g. */
    int (*layer_norm_backward)(int dev, int dtype, void *dx, void *dw, void *db, const void *g,
                               const void *x, const void *mean, const void *rstd, const void *w,
                               int64_t rows, int64_t n);
    /* Note [fused cross-entropy] (cpu/cross_entropy.h) on logits x [N, C, inner] (dtype),
     * int64 target [N, inner], weight [C] (ct) or NULL. lse [N, inner] (ct). reduction 0:
     * loss [N, inner] (ct); 1 (mean) / 2 (sum): one ct element. work: device float64 scratch of
     * 2 * N * inner + 2 elements. Returns 1 with *bad = a target outside [0, C) that is not
     * `ignore`. */
    int (*cross_entropy)(int dev, int dtype, void *loss, void *lse, const void *x,
                         const int64_t *target, const void *weight, int64_t N, int64_t C,
                         int64_t inner, int64_t ignore, double smoothing, int reduction,
                         double *work, int64_t *bad);
    /* gi [N, C, inner] (dtype) from the saved lse; grad (ct) holds N * inner values for
     * reduction 0, else one. work: device float64 scratch of 4 elements. Bounds as above. */
    int (*cross_entropy_backward)(int dev, int dtype, void *gi, const void *grad, const void *x,
                                  const int64_t *target, const void *weight, const void *lse,
                                  int64_t N, int64_t C, int64_t inner, int64_t ignore,
                                  double smoothing, int reduction, double *work, int64_t *bad);
    /* Adam / AdamW over a list of parameters (the update of ops/optim.c) */
    int (*adam)(int dev, const EmCudaAdam *a);
    /* out [n_idx, dim] = weight [num_weights, dim] rows picked by indices (int64 or int32:
     * idx_dtype). Returns 1 with *bad = an index outside [0, num_weights). */
    int (*embedding)(int dev, int dtype, void *out, const void *weight, const void *indices,
                     int idx_dtype, int64_t n_idx, int64_t num_weights, int64_t dim, int64_t *bad);
    /* gw [num_weights, dim] (dtype; float32 accumulation) = sum of the rows of g [n_idx, dim]
     * at their indices, skipping padding_idx (< 0: none); scale_grad_by_freq divides each by
     * its index's count. Indices are trusted (the forward checked them). */
    int (*embedding_backward)(int dev, int dtype, void *gw, const void *g, const void *indices,
                              int idx_dtype, int64_t n_idx, int64_t num_weights, int64_t dim,
                              int64_t padding_idx, bool scale_grad_by_freq);

    /* ---- reductions (Note [CUDA reduce]). has_reduce says whether
     * `op` has a kernel for in_dtype (the core falls back to the CPU when
     * not, or when these pointers are NULL); the launch returns when queued. */
    bool (*has_reduce)(const char *op, int in_dtype);
    int (*reduce)(int dev, const EmCudaReduce *r);

    /* ---- Note [record_stream] (csrc/cuda/allocator.cpp): the block at ptr
     * (an address alloc returned) is in use on `stream` too; its free waits
     * for the work queued there. */
    int (*record_stream)(int dev, void *ptr, EmCudaStream stream);

    /* ---- indexing (Note [CUDA indexing] in csrc/cuda/index.h).
     * Each is the GPU twin of a CPU loop of cpu/index.c, on `dev`'s current
     * stream; host arrays (shapes, strides) are read during the call. op:
     * EmReduceOp (0 assign, 1 sum, 2 prod, 3 amax, 4 amin); dtype: EmDType.
     * Entries that look at index values return 1 when one is out of range
     * (reading that back costs one sync), having written nothing the core
     * keeps. */
    /* off[j] (= or, accumulate, +=) u * stride for the values u of idx
     * (int32/int64 by idx_dtype) broadcast to bshape (nb dims; idx_strides in
     * bytes, 0 where broadcast), wrap 1: negatives count from the end. off
     * NULL: only check. 1: *bad_pos (row-major) is the first value outside
     * [0, size), *bad_val that value. */
    int (*index_offsets)(int dev, int64_t *off, bool accumulate, const void *idx, int idx_dtype, int nb,
                         const int64_t *bshape, const int64_t *idx_strides, int64_t size, int64_t stride,
                         int wrap, int64_t *bad_pos, int64_t *bad_val);
    /* Note [indirect loops]: d <- x (itemsize bytes per element) */
    int (*index_gather)(int dev, const EmCudaIndirect *g, int itemsize);
    /* Note [indirect loops]: x op= d; duplicates in off combine atomically */
    int (*index_put)(int dev, const EmCudaIndirect *g, int op, int dtype);
    /* Note [scatter loops]: gather (y <- x; 1 when an index is outside
     * [0, g->size)), or scatter (x op= y; indices checked before) */
    int (*scatter_gather)(int dev, const EmCudaScatter *g, int op, int dtype, bool gather);
    /* nonzero over a strided tensor (sizes, strides in elements; ndim 0: one
     * element): scan[i] = nonzero elements among the first i + 1 in
     * row-major order (numel int64 of device scratch), *count the total. */
    int (*nonzero_scan)(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                        const int64_t *strides, int64_t *scan, int64_t *count);
    /* ... then the k-th nonzero element's coordinates into coords [k, ndim]
     * and/or the byte offset sum(c_d * ostrides[d]) into offs[k] (NULL: skip) */
    int (*nonzero_fill)(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                        const int64_t *strides, const int64_t *scan, int64_t *coords, int64_t *offs,
                        const int64_t *ostrides);

    /* ---- sort and scan (Note [CUDA sort] in csrc/cuda/sort.h).
     * Operands contiguous; dtype an EmDType code; the launch returns when
     * queued. NULL entries make the front-ends take Note [CUDA fallback]. */
    /* Each of `rows` rows of n elements sorted stably (NaN largest, -0.0 ==
     * 0.0, descending flips the order but keeps ties in index order): the
     * first m of each row into values [rows, m] (dtype; NULL: not wanted) and
     * indices [rows, m] (int64; NULL: not wanted). sort: m = n; topk: m = k. */
    int (*sort_rows)(int dev, int dtype, const void *in, int64_t rows, int64_t n, bool descending,
                     int64_t m, void *values, int64_t *indices);
    /* One value and index per row (n >= 1): kind 0 median, 1 nanmedian, 2
     * mode (cpu/scan.c's rules), 3 kthvalue (the k-th smallest, 1-based, with
     * torch's index among ties: Note [kthvalue ties] in cpu/sort.c). */
    int (*select_rows)(int dev, int kind, int dtype, const void *in, int64_t rows, int64_t n, int64_t k,
                       void *values, int64_t *indices);
    /* op 0 cumsum, 1 cumprod, 2 cummax, 3 cummin along n of [outer, n, inner]:
     * out has in's dtype (the core casts first); indices (int64, same shape)
     * for cummax/cummin. */
    int (*scan)(int dev, int op, int dtype, const void *in, void *out, int64_t *indices, int64_t outer,
                int64_t n, int64_t inner);
    /* searchsorted: nval values (dtype: uint8..int64, float32, float64), each
     * searched in its row of `rows` x L boundaries (per_row values a row; 0:
     * one row) through sorter (int64 [rows, L] or NULL); out int32 or int64.
     * Returns 1 (and writes nothing) when a sorter index is outside [0, L). */
    int (*search)(int dev, int dtype, const void *boundaries, const int64_t *sorter, int64_t rows, int64_t L,
                  const void *values, int64_t nval, int64_t per_row, bool right, bool out_int32, void *out);
    /* unique / unique_consecutive with dim=None over n >= 1 elements in
     * `sorted` (sorted stably, or as given for unique_consecutive); perm:
     * each one's original position (int64; NULL: the identity). Equal
     * neighbours form a group (NaNs are all distinct): vals[g] (dtype) the
     * first of group g, inverse[perm[i]] (int64; NULL: not wanted) the group
     * of element i, counts[g] (int64; NULL: not wanted) its size; vals and
     * counts hold room for n. *groups (host) = the number of groups: the call
     * waits for the stream to read it. */
    int (*unique)(int dev, int dtype, const void *sorted, const int64_t *perm, int64_t n, void *vals,
                  int64_t *inverse, int64_t *counts, int64_t *groups);

    /* ---- shape kernels (Note [CUDA shape kernels] in csrc/cuda/shape.h).
     * Fills and masks for the ops a strided copy cannot express; each
     * writes its elements in `dtype` (an EmDType code) exactly as the CPU
     * (csrc/ops/factory.c, shape_ops.c, join.c) computes them, and returns
     * when queued. out[i * stride] for i < n: arange's values, integer math
     * (start + i * step, int64) when int_math, else xs + i * xt in float64. */
    int (*arange_fill)(int dev, int dtype, void *out, int64_t n, int64_t stride, bool int_math,
                       int64_t start, int64_t step, double xs, double xt);
    /* out[i * stride] for i < steps: torch's symmetric linspace from xs to xe
     * (float arithmetic for the 16/32-bit float dtypes, double else), then
     * pow(base, v) when log (logspace). */
    int (*linspace_fill)(int dev, int dtype, void *out, int64_t steps, int64_t stride, double xs,
                         double xe, bool log, double base);
    /* tril (lower) / triu in place: zero every element of data (ndim >= 2
     * dims of `sizes`, element strides) whose column j and row i of the last
     * two dims break j - i <= k (tril) or j - i >= k (triu). */
    int (*tri_mask)(int dev, int dtype, void *data, int ndim, const int64_t *sizes,
                    const int64_t *strides, int64_t k, bool lower);
    /* repeat_interleave with per-index counts: in contiguous (outer, n,
     * inner), out contiguous (outer, total, inner), cum a device int64 array
     * of n + 1 running totals (cum[0] = 0, cum[n] = total): out[o, j, :] =
     * in[o, i, :] for cum[i] <= j < cum[i + 1]. Elements are moved as bits. */
    int (*repeat_interleave)(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n,
                             int64_t inner, const int64_t *cum, int64_t total);

    /* ---- attention: flash attention (Note [CUDA attention]);
     * the launch returns when queued. The backward allocates its float32
     * scratch (dq accumulator, rowsum(dout * out)) from the caching allocator. */
    int (*attention_forward)(int dev, const EmCudaAttention *a);
    int (*attention_backward)(int dev, const EmCudaAttention *a);

    /* ---- dropout, NLL, norm-run and 2-d pool kernels (Note [CUDA nn kernels] in csrc/cuda/nn_kernels.h).
     * Contiguous operands; entries the core lacks (NULL) make the op take
     * Note [CUDA fallback]. */
    /* _native_dropout: numel elements of dtype (a float type); mask[i] is the
     * Bernoulli(keep) draw random_fill(EM_RANDOM_BERNOULLI, dtype, a = keep)
     * makes for element i of the Philox stream (seed, offset); out[i] =
     * (in[i] * mask[i]) * scale, in float32 for the halves. */
    int (*dropout)(int dev, int dtype, void *out, bool *mask, const void *in, int64_t numel, double keep,
                   double scale, uint64_t seed, uint64_t offset);
    /* Note [nll layout] on x [N, C, inner] and weight [C] (NULL: none), both of
     * dtype float32 or float64, int64 target [N, inner]. reduction 0: loss
     * [N, inner] (0 where ignored); 1 / 2: loss[0] = the sum over the kept
     * weight / the sum. work: device float64 scratch of 4. Returns 1 with *bad
     * = a target outside [0, C) that is not `ignore`. */
    int (*nll_loss)(int dev, int dtype, void *loss, const void *x, const int64_t *target, const void *weight,
                    int64_t N, int64_t C, int64_t inner, int64_t ignore, int reduction, double *work,
                    int64_t *bad);
    /* gi [N, C, inner] (all written): -weight[t] * grad (grad [N, inner] for
     * reduction 0, else one element; / the kept weight for 'mean') at each
     * kept target, 0 elsewhere. work and bounds as nll_loss. */
    int (*nll_loss_backward)(int dev, int dtype, void *gi, const void *grad, const int64_t *target,
                             const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                             int reduction, double *work, int64_t *bad);
    /* Note [norm runs] (cpu/poolnorm.h) on [R, S] data of dtype float32 /
     * float64; center, out1, out2: device float64 [R]. g NULL: out1 = per-run
     * sum of x (center NULL) or of (x - center)^2; else out1 = sum of g,
     * out2 = sum of g * (x - center). */
    int (*norm_runs_stats)(int dev, int dtype, const void *g, const void *x, int64_t R, int64_t S,
                           const double *center, double *out1, double *out2);
    /* y = a[r] * g + b[r] * x + c[r] (g NULL: b[r] * x + c[r]), in dtype with
     * the float64 coefficients [R] rounded to it (as cpu/poolnorm.c) */
    int (*norm_runs_affine)(int dev, int dtype, void *y, const void *g, const void *x, int64_t R, int64_t S,
                            const double *a, const double *b, const double *c);
    /* 2-d pools over [planes, H, W] -> [planes, OH, OW] (Note [pool planes],
     * cpu/poolnorm.h), dtype float32 / float64. max_pool2d: NaN wins, the first
     * maximum among ties; idx gets positions h * W + w. */
    int (*max_pool2d)(int dev, int dtype, const EmCudaPool2d *g, const void *in, void *out, int64_t *idx);
    /* gi [planes, H, W] (all written) = the sum of grad at idx (g's kernel
     * fields unused); work: device scratch of 2 int64. Returns 1 with *bad = an
     * index outside [0, H * W). */
    int (*max_pool2d_backward)(int dev, int dtype, const EmCudaPool2d *g, const void *grad, const int64_t *idx,
                               void *gi, int64_t *work, int64_t *bad);
    /* Average windows (device arrays): win = h0[OH], h1[OH], w0[OW], w1[OW]
     * (row oh covers [h0, h1), each bound nondecreasing), div [OH * OW]
     * float64. Forward: out [planes, OH, OW] = the window's sum / div;
     * backward: out [planes, H, W] (all written) = the sum of in / div over
     * the windows holding each position; both summed in the CPU's order. */
    int (*avg_pool2d)(int dev, int dtype, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                      const int64_t *win, const double *div, const void *in, void *out, bool backward);

    /* ---- attention with a mask, dropout and the efficient path: flash attention
     * with a mask, dropout, float32 and the layouts of EmCudaAttentionEx
     * (Note [CUDA attention]); the backward's scratch as attention_backward's. */
    int (*attention_forward_ex)(int dev, const EmCudaAttentionEx *a);
    int (*attention_backward_ex)(int dev, const EmCudaAttentionEx *a);
    /* ---- randperm, unique along a dim and the cuBLASLt bias epilogue:
     * csrc/cuda/randperm.h, unique_dim.h, gemm_lt.cpp; NULL entries make the
     * front-ends take Note [CUDA fallback] (gemm_bias: the plain gemm). */
    /* randperm: out (n contiguous elements of dtype) = a permutation of
     * 0..n-1, Note [GPU randperm] (csrc/cuda/randperm.h): key i is the 64-bit
     * integer draw i of the Philox stream (seed, offset) (random_fill's
     * EM_RANDOM_INTEGER with range 0); the indices sorted stably by key. */
    int (*randperm)(int dev, int dtype, void *out, int64_t n, uint64_t seed, uint64_t offset);
    /* unique / unique_consecutive along a dim, Note [CUDA unique dim] (csrc/cuda/unique_dim.h):
     * x contiguous [m, rl] (m >= 1 rows of rl >= 1 elements of dtype), its rows
     * sorted stably and lexicographically by sort key when `sorted`, taken in
     * order otherwise; equal neighbours (NaN never equal) form a group:
     * vals [g, rl] (room for m rows) the first row of each group, inverse[i]
     * (int64 [m]; NULL: not wanted) the group of row i, counts [g] (int64,
     * room for m; NULL: not wanted). *groups (host) = g: the call waits for
     * the stream to read it. */
    int (*unique_dim)(int dev, int dtype, const void *x, int64_t m, int64_t rl, bool sorted, void *vals,
                      int64_t *inverse, int64_t *counts, int64_t *groups);
    /* C = op(A) @ op(B) + bias through cuBLASLt's bias epilogue
     * (CUBLASLT_EPILOGUE_BIAS), column-major as `gemm`: C is m x n (ldc),
     * bias (m elements of dtype, contiguous) added to every column. dtype:
     * float32 (TF32 when allow_tf32), float16, bfloat16 (float32 accumulation,
     * one rounding). Returns 1, having written nothing, when cuBLASLt offers
     * no algorithm for the problem (the caller takes the plain gemm path). */
    int (*gemm_bias)(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *c,
                     int64_t ldc, bool allow_tf32);
    /* ---- convolution and upsampling (Note [CUDA im2col] in csrc/cuda/conv.h).
     * dtype: float16, bfloat16, float32 or float64 (halves sum in float32);
     * image operands contiguous (N, C, H, W); the launch returns when queued. */
    /* im2col: column element (n, row, l) = cols[n * col_n + row * col_row + l],
     * row = (c*kh + ki)*kw + kj < C*kh*kw, l = oy*ow + ox: the image element
     * its window reads, 0 in the padding. Every column element is written. */
    int (*im2col)(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *x, void *cols,
                  int64_t col_n, int64_t col_row);
    /* col2im, im2col's adjoint: every x element (all written) = the sum of the
     * column elements that read it, in the CPU's order (ki, then kj). */
    int (*col2im)(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *cols, int64_t col_n,
                  int64_t col_row, void *x);
    /* nearest upsampling of planes [planes, h.in, w.in] -> [planes, h.out, w.out]:
     * elements of itemsize bytes (1, 2, 4 or 8) copied from (h.idx[o], w.idx[q]) */
    int (*interp_nearest)(int dev, int itemsize, int64_t planes, const EmCudaInterpAxis *h,
                          const EmCudaInterpAxis *w, const void *x, void *y);
    /* the separable weighted upsampling (backward false: one thread per output,
     * the CPU's order: the width taps, then the height taps) or its adjoint
     * (backward true: out [planes, h.in, w.in], all written, one thread per
     * input element gathering through the inverse maps in the CPU's order) */
    int (*interp)(int dev, int dtype, int64_t planes, const EmCudaInterpAxis *h, const EmCudaInterpAxis *w,
                  const void *in, void *out, bool backward);
    /* ---- runtime (lead): the device's free and total memory in bytes, as
     * cudaMemGetInfo (torch.cuda.mem_get_info) */
    int (*mem_get_info)(int dev, int64_t *free_bytes, int64_t *total_bytes);
} EmCudaBackend;

#define EM_CUDA_CAPSULE "ember._cuda._backend"

#ifdef __cplusplus
}
#endif
#endif
