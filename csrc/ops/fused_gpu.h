/* fused_gpu.h — what the GPU branches of the fused nn front-ends share
 * (ops/softmax.c, norm.c, cross_entropy.c, optim.c, nn.c): operands made
 * ready for a backend kernel, and the EmNoCudaKernel raised when the backend
 * lacks one (Note [CUDA fallback] then runs the op on the CPU). The entries
 * themselves: "fused nn kernels" in cuda_backend.h. */
#ifndef EMBER_OPS_FUSED_GPU_H
#define EMBER_OPS_FUSED_GPU_H

#include "../ember.h"

/* t as a contiguous tensor of dtype dt on dev (new reference). A 0-d CPU
 * tensor (allowed beside GPU tensors as a scalar) is moved to the device. */
static inline EmTensor *em_fused_operand(EmTensor *t, EmDType dt, EmDevice dev) {
    EmTensor *a = em_to_device(t, dev, false), *b = NULL, *c = NULL;
    if (a) b = em_to_dtype(a, dt, false);
    if (b) c = em_contiguous(b);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return c;
}

/* Raised before anything is allocated or written; NULL. */
static inline void *em_fused_no_kernel(const char *name) {
    PyErr_Format(EmNoCudaKernel, "\"%s\" has no CUDA kernel in this backend", name);
    return NULL;
}

/* Embedding's weight gradient [num_weights, dim] on the GPU from g
 * [..., dim] and the forward's indices (ops/nn.c; autograd/derivatives_nn.c
 * uses it when the gradient is not differentiated again). New reference, or
 * NULL: with an exception on failure, without one when the backend has no
 * kernel (the formula's composition runs then). */
PyObject *em_embedding_backward_gpu(EmTensor *g, EmTensor *idx, int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq);

/* One parameter's Adam/AdamW step on host memory (ops/optim.c): what the
 * fake backend (Note [fake CUDA]) runs for the `adam` entry. */
void em_cpu_adam_step(int dtype, void *p, const void *g, void *m, void *v, void *vmax, int64_t n, double lr,
                      double beta1, double beta2, double weight_decay, double eps, double step, bool maximize,
                      bool decoupled);

#endif
