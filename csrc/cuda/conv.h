/* conv.h — the GPU kernels behind the "convolution and upsampling"
 * entries of EmCudaBackend (cuda_backend.h). Each em_cuda_<name>
 * has exactly the signature of its table entry.
 *
 * Note [CUDA im2col]: the GPU convolution (the front-end in ops/conv.c) is
 * the CPU's plan (cpu/conv.c): im2col, then cuBLAS GEMMs, and col2im for the
 * input gradient. im2col writes one column element per thread; col2im runs
 * one thread per IMAGE element that gathers the column elements reading it
 * (no atomics), in the CPU's order (ki, then kj), so its sums are
 * deterministic and equal the CPU's in float32 and float64. The column
 * layout is strided per image (col_n) and per row (col_row): (N, C*kh*kw,
 * L) for the forward and the input gradient, (C*kh*kw, N*L) for the weight
 * gradient, whose one GEMM then sums over the images. The index math is
 * conv_math.h, shared with the fake backend. */
#ifndef EMBER_CUDA_CONV_H
#define EMBER_CUDA_CONV_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_im2col(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *x, void *cols, int64_t col_n,
                   int64_t col_row);
int em_cuda_col2im(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *cols, int64_t col_n,
                   int64_t col_row, void *x);

#ifdef __cplusplus
}
#endif
#endif
