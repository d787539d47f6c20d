/* module.cpp — ember._cuda: the real CUDA backend (Note [CUDA backend] in
 * csrc/cuda_backend.h). The module holds one thing, the capsule
 * `_backend` with the EmCudaBackend table the core takes at its first CUDA
 * request. Importing it calls nothing in CUDA, so it imports on a machine
 * with no GPU or driver, where device_count() is 0.
 *
 * Files: error.cpp (messages), device.cpp (devices, streams, events),
 * allocator.cpp (caching allocator, pinned memory), memcpy.cpp (copies),
 * copy_strided.cu (the strided copy-and-cast kernel), gemm.cpp (cuBLAS),
 * elementwise.cu (Note [CUDA elementwise]), random.cu (Note [GPU random
 * numbers]), reduce.cu (Note [CUDA reduce]), nn_fused.cu (softmax, layer/rms
 * norm, cross-entropy, Adam, embedding), index.cu (Note [CUDA indexing]),
 * sort.cu (Note [CUDA sort]), shape.cu (Note [CUDA shape kernels]), attention.cu
 * (Note [CUDA attention]), nn_kernels.cu (dropout, NLL, batch / group norm runs, pools),
 * randperm.cu, unique_dim.cu (unique along a dim), gemm_lt.cpp (cuBLASLt epilogues),
 * nccl.cpp (the nccl backend of ember.distributed: _NcclComm, libnccl loaded at run time). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "attention.h"
#include "conv.h"
#include "elementwise.h"
#include "index.h"
#include "nn_fused.h"
#include "nn_kernels.h"
#include "reduce.h"
#include "runtime.h"
#include "shape.h"
#include "sort.h"
#include "randperm.h"
#include "unique_dim.h"
#include "gemm_lt.h"
#include "upsample.h"

int emc_nccl_init_module(PyObject *m); /* nccl.cpp: the nccl backend's _NcclComm */

static const EmCudaBackend backend = {
    EM_CUDA_ABI,
    "cuda",
    emc_last_error,
    emc_device_count,
    emc_current_device,
    emc_set_device,
    emc_device_props,
    emc_synchronize,
    emc_alloc,
    emc_free,
    emc_memory_stats,
    emc_reset_peak_stats,
    emc_empty_cache,
    emc_host_alloc,
    emc_host_free,
    emc_memcpy,
    emc_stream_create,
    emc_stream_destroy,
    emc_stream_synchronize,
    emc_stream_query,
    emc_current_stream,
    emc_set_current_stream,
    emc_stream_wait_event,
    emc_event_create,
    emc_event_destroy,
    emc_event_record,
    emc_event_synchronize,
    emc_event_query,
    emc_event_elapsed_ms,
    emc_copy_strided,
    emc_gemm,
    em_cuda_has_elementwise,
    em_cuda_elementwise,
    emc_random_fill,
    em_cuda_softmax,
    em_cuda_softmax_backward,
    em_cuda_layer_norm,
    em_cuda_layer_norm_backward,
    em_cuda_cross_entropy,
    em_cuda_cross_entropy_backward,
    em_cuda_adam,
    em_cuda_embedding,
    em_cuda_embedding_backward,
    em_cuda_has_reduce,
    em_cuda_reduce,
    emc_record_stream,
    em_cuda_index_offsets,
    em_cuda_index_gather,
    em_cuda_index_put,
    em_cuda_scatter_gather,
    em_cuda_nonzero_scan,
    em_cuda_nonzero_fill,
    /* sort and scan */
    em_cuda_sort_rows,
    em_cuda_select_rows,
    em_cuda_scan,
    em_cuda_search,
    em_cuda_unique,
    /* shape kernels */
    em_cuda_arange_fill,
    em_cuda_linspace_fill,
    em_cuda_tri_mask,
    em_cuda_repeat_interleave,
    /* attention */
    em_cuda_attention_forward,
    em_cuda_attention_backward,
    /* dropout, NLL, norm runs, 2-d pools */
    em_cuda_dropout,
    em_cuda_nll_loss,
    em_cuda_nll_loss_backward,
    em_cuda_norm_runs_stats,
    em_cuda_norm_runs_affine,
    em_cuda_max_pool2d,
    em_cuda_max_pool2d_backward,
    em_cuda_avg_pool2d,
    /* attention with a mask, dropout and the efficient path */
    em_cuda_attention_forward_ex,
    em_cuda_attention_backward_ex,
    /* randperm, unique along a dim, the cuBLASLt bias epilogue */
    em_cuda_randperm,
    em_cuda_unique_dim,
    emc_gemm_bias,
    /* convolution and upsampling */
    em_cuda_im2col,
    em_cuda_col2im,
    em_cuda_interp_nearest,
    em_cuda_interp,
    /* runtime (lead) */
    emc_mem_get_info,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ember._cuda",
    "ember's CUDA backend: the EmCudaBackend table in the capsule _backend (see "
    "csrc/cuda_backend.h). Loaded by ember's core at the first CUDA request.",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__cuda(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *cap = PyCapsule_New((void *)&backend, EM_CUDA_CAPSULE, NULL);
    if (!cap || PyModule_AddObject(m, "_backend", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    if (emc_nccl_init_module(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* build facts for tests and bug reports: constants, no CUDA call */
    if (PyModule_AddIntConstant(m, "cuda_runtime_version", CUDART_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
