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
#define EM_CUDA_ABI 1
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
    const void *cpu_kernels; /* the CPU table: only the fake backend (Note [fake CUDA]) runs it */
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
    const void *cpu_kernel; /* the CPU kernel: only the fake backend (Note [fake CUDA]) runs it */
} EmCudaReduce;

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

    /* ---- cudared: reductions (Note [CUDA reduce]). has_reduce says whether
     * `op` has a kernel for in_dtype (the core falls back to the CPU when
     * not, or when these pointers are NULL); the launch returns when queued. */
    bool (*has_reduce)(const char *op, int in_dtype);
    int (*reduce)(int dev, const EmCudaReduce *r);
} EmCudaBackend;

#define EM_CUDA_CAPSULE "ember._cuda._backend"

#ifdef __cplusplus
}
#endif
#endif
