/* host_api.h — Note [host API]: what ember._C lends, through the capsule
 * `ember._C._host_api`, to a CUDA backend built as a separate extension
 * that runs its "device" work on host memory: the test double of Note
 * [fake CUDA] (csrc/testing/cuda_fake.c, ember._cuda_fake).
 *
 * ember._C exports no C symbol but PyInit__C (-fvisibility=hidden), so
 * another extension can reach the core only through a table, as the core
 * reaches a GPU through EmCudaBackend (cuda_backend.h). The double computes
 * with the core's own CPU kernels, casts and host tensors instead of a
 * second copy of them (compiling csrc/cpu and the iterators into it again
 * would double half of the C build, and the copy would have its own thread
 * count and default dtype); it finds the kernel table a launch names through
 * Note [kernel registry], so the backend ABI carries no CPU pointers.
 *
 * ember._cuda (the real backend) never uses this table. */
#ifndef EMBER_HOST_API_H
#define EMBER_HOST_API_H

#include "ember.h"
#include "cpu/attention.h"
#include "cpu/blas.h"
#include "cpu/cross_entropy.h"
#include "cpu/poolnorm.h"
#include "cpu/softmax.h"
#include "ops/fused_gpu.h"

/* Bumped whenever the table's layout changes: a consumer built for another
 * layout refuses to load. */
#define EM_HOST_API_ABI 1
#define EM_HOST_API_CAPSULE "ember._C._host_api"

typedef struct EmHostApi {
    int abi; /* EM_HOST_API_ABI */
    const EmDTypeInfo (*dtype_info)[EM_NUM_DTYPES];

    /* ---- host tensors: views of borrowed memory (kept alive by the caller),
     * new ones, and the core's dtype casts and copies between them */
    EmTensor *(*host_view)(void *data, int64_t nbytes, int64_t offset, int ndim, const int64_t *sizes,
                           const int64_t *strides, EmDType dtype);
    __typeof__(em_empty) *empty;
    __typeof__(em_zeros) *zeros;
    __typeof__(em_copy_) *copy_;
    __typeof__(em_to_dtype) *to_dtype;
    __typeof__(em_contiguous) *contiguous;
    __typeof__(em_extent_checked) *extent_checked;
    __typeof__(em_scalar_store) *scalar_store;

    /* ---- Note [kernel registry] and the prepared launches run on the CPU */
    __typeof__(em_kernels_find) *kernels_find;
    __typeof__(em_reduce_find) *reduce_find;
    __typeof__(em_iter_run_prepared) *iter_run_prepared;
    __typeof__(em_reduce_run_prepared) *reduce_run_prepared;

    /* ---- CPU kernels (csrc/cpu, ops/optim.c) */
    __typeof__(em_gemm_ex) *gemm_ex;
    __typeof__(em_cpu_softmax) *softmax;
    __typeof__(em_cpu_softmax_backward) *softmax_backward;
    __typeof__(em_cpu_nll_check) *nll_check;
    __typeof__(em_cpu_nll_forward) *nll_forward;
    __typeof__(em_cpu_nll_backward) *nll_backward;
    __typeof__(em_cpu_xent_forward) *xent_forward;
    __typeof__(em_cpu_xent_backward) *xent_backward;
    __typeof__(em_cpu_adam_step) *adam_step;
    __typeof__(em_cpu_attention_forward) *attention_forward;
    __typeof__(em_cpu_attention_backward) *attention_backward;
    __typeof__(em_cpu_index_offsets) *index_offsets;
    __typeof__(em_cpu_index_gather) *index_gather;
    __typeof__(em_cpu_index_put) *index_put;
    __typeof__(em_cpu_gather) *gather;
    __typeof__(em_cpu_scatter) *scatter;
    __typeof__(em_cpu_runs_sum) *runs_sum;
    __typeof__(em_cpu_runs_centered_ss) *runs_centered_ss;
    __typeof__(em_cpu_runs_dot) *runs_dot;
    __typeof__(em_cpu_runs_affine) *runs_affine;
    __typeof__(em_cpu_runs_affine2) *runs_affine2;
    __typeof__(em_cpu_max_pool2d) *max_pool2d;
    __typeof__(em_cpu_max_pool2d_backward) *max_pool2d_backward;
    __typeof__(em_cpu_avg_pool2d) *avg_pool2d;
    __typeof__(em_cpu_avg_pool2d_backward) *avg_pool2d_backward;
} EmHostApi;

/* Adds the capsule to ember._C (python/host_api.c). */
int em_init_host_api(PyObject *m);

#endif
