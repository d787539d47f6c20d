/* host_api.c — Note [host API] (csrc/host_api.h): the table ember._C lends
 * to a backend that runs on host memory, as the capsule ember._C._host_api.
 * It lives in the top layer because it names functions of every layer. */
#include "../host_api.h"

/* A CPU tensor over borrowed memory: `offset` elements from data, which
 * holds nbytes (strides NULL: contiguous). New reference. */
static EmTensor *host_view(void *data, int64_t nbytes, int64_t offset, int ndim, const int64_t *sizes,
                           const int64_t *strides, EmDType dtype) {
    EmStorage *st = em_storage_wrap(data, nbytes, em_cpu(), NULL);
    EmTensor *t = st ? em_tensor_alloc(&EmTensorType, st, offset, ndim, sizes, strides, dtype) : NULL;
    Py_XDECREF(st);
    return t;
}

static const EmHostApi host_api = {
    .abi = EM_HOST_API_ABI,
    .dtype_info = &em_dtype_info,
    .host_view = host_view,
    .empty = em_empty,
    .zeros = em_zeros,
    .copy_ = em_copy_,
    .to_dtype = em_to_dtype,
    .contiguous = em_contiguous,
    .extent_checked = em_extent_checked,
    .scalar_store = em_scalar_store,
    .kernels_find = em_kernels_find,
    .reduce_find = em_reduce_find,
    .iter_run_prepared = em_iter_run_prepared,
    .reduce_run_prepared = em_reduce_run_prepared,
    .gemm_ex = em_gemm_ex,
    .softmax = em_cpu_softmax,
    .softmax_backward = em_cpu_softmax_backward,
    .nll_check = em_cpu_nll_check,
    .nll_forward = em_cpu_nll_forward,
    .nll_backward = em_cpu_nll_backward,
    .xent_forward = em_cpu_xent_forward,
    .xent_backward = em_cpu_xent_backward,
    .adam_step = em_cpu_adam_step,
    .attention_forward = em_cpu_attention_forward,
    .attention_backward = em_cpu_attention_backward,
    .index_offsets = em_cpu_index_offsets,
    .index_gather = em_cpu_index_gather,
    .index_put = em_cpu_index_put,
    .gather = em_cpu_gather,
    .scatter = em_cpu_scatter,
    .runs_sum = em_cpu_runs_sum,
    .runs_centered_ss = em_cpu_runs_centered_ss,
    .runs_dot = em_cpu_runs_dot,
    .runs_affine = em_cpu_runs_affine,
    .runs_affine2 = em_cpu_runs_affine2,
    .max_pool2d = em_cpu_max_pool2d,
    .max_pool2d_backward = em_cpu_max_pool2d_backward,
    .avg_pool2d = em_cpu_avg_pool2d,
    .avg_pool2d_backward = em_cpu_avg_pool2d_backward,
};

int em_init_host_api(PyObject *m) {
    PyObject *cap = PyCapsule_New((void *)&host_api, EM_HOST_API_CAPSULE, NULL);
    if (!cap) return -1;
    if (PyModule_AddObject(m, "_host_api", cap) < 0) {
        Py_DECREF(cap);
        return -1;
    }
    return 0;
}
