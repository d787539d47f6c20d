/* fft.h — discrete Fourier transforms of any length (csrc/cpu/fft.c).
 *
 * A plan holds what one length needs: its factors, twiddles and, for a
 * length with a large prime factor, Bluestein's chirp and its transform. A
 * plan is read-only once made, so threads share it. Arrays are interleaved
 * complex (re, im) and contiguous; `sign` is -1 for the forward transform
 * and +1 for the inverse one, unnormalized (the caller scales).
 * Depends on libc only. */
#ifndef EMBER_CPU_FFT_H
#define EMBER_CPU_FFT_H

#include <stddef.h>
#include <stdint.h>

typedef struct EmFftPlan EmFftPlan;

/* NULL when out of memory */
EmFftPlan *em_fft_plan_new(int64_t n);
void em_fft_plan_free(EmFftPlan *p);
int64_t em_fft_plan_length(const EmFftPlan *p);
/* bytes of scratch a transform of this plan needs (0 for most lengths) */
size_t em_fft_work_bytes(const EmFftPlan *p);

/* out[0..n) = sum_j in[j] exp(sign 2 pi i j k / n); in and out must not
 * overlap; work holds em_fft_work_bytes(p) bytes, 16-byte aligned. */
void em_fft_c2c_f64(const EmFftPlan *p, const double *in, double *out, int sign, void *work);
void em_fft_c2c_f32(const EmFftPlan *p, const float *in, float *out, int sign, void *work);

#endif
