/* philox.h — Note [GPU random numbers]: the counter-based generator GPU
 * random fills use (Philox4x32-10, Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11), and the maps from its 32-bit words to each
 * distribution. Plain C usable from CUDA (__host__ __device__) and from the
 * core's fake backend, so both compute the very same numbers.
 *
 * Stream layout: one fill launch draws with key = the device generator's
 * seed and counter = {block j (64 bits), launch offset (64 bits)}; block j
 * gives the elements j*PER .. j*PER+PER-1, where PER is 4 for 32-bit draws
 * (float32/half uniforms, 32-bit integer ranges, float32 normals as two
 * Box-Muller pairs) and 2 for 64-bit draws. Each launch advances the
 * generator's offset by one, so launches never share counters, and any
 * element can be computed alone (no sequential state). */
#ifndef EMBER_PHILOX_H
#define EMBER_PHILOX_H
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define EM_HD __host__ __device__ __forceinline__
#else
#define EM_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} EmPhilox4;

EM_HD uint32_t em_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Philox4x32 with 10 rounds on counter c and key (k0, k1). */
EM_HD EmPhilox4 em_philox4x32_10(EmPhilox4 c, uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint32_t hi0, hi1;
        uint32_t lo0 = em_philox_mulhilo(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = em_philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1);
        EmPhilox4 n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
        c = n;
    }
    return c;
}

/* The four words of block j of a launch. */
EM_HD EmPhilox4 em_philox_block(uint64_t seed, uint64_t offset, uint64_t j) {
    EmPhilox4 c = {{(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)}};
    return em_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Uniforms in [0, 1): 24 bits for float32 (and the half types, rounded
 * after scaling), 53 bits from two words for float64. */
EM_HD float em_philox_u01f(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
EM_HD double em_philox_u01d(uint32_t lo, uint32_t hi) {
    uint64_t x = ((uint64_t)hi << 32 | lo) >> 11;
    return (double)x * (1.0 / 9007199254740992.0);
}

/* What a fill draws (EmCudaBackend.random_fill's `kind`). */
enum {
    EM_RANDOM_UNIFORM = 0,   /* a + (b - a) * U[0, 1) */
    EM_RANDOM_NORMAL = 1,    /* mean a, standard deviation b (Box-Muller) */
    EM_RANDOM_BERNOULLI = 2, /* 1 with probability a, else 0 */
    EM_RANDOM_INTEGER = 3,   /* a + (x mod b) for the range b (b == 0: the full 64 bits) */
    EM_RANDOM_EXPONENTIAL = 4, /* rate a */
};

/* Elements per Philox block for a draw of `kind` into dtype code `dtype`
 * (9 = float64, 5 = int64: 64-bit draws). */
EM_HD int em_philox_per_block(int kind, int dtype, uint64_t range) {
    if (kind == EM_RANDOM_INTEGER) return (range == 0 || range > 0xFFFFFFFFull) ? 2 : 4;
    return dtype == 9 ? 2 : 4;
}

/* Element i (0 <= i < per) of a block as a double (integer draws as an
 * exact int64 in *iv). */
EM_HD double em_philox_value(EmPhilox4 w, int i, int kind, int dtype, double a, double b,
                             uint64_t range, int64_t from, int64_t *iv) {
    const int wide = dtype == 9;
    switch (kind) {
    case EM_RANDOM_UNIFORM:
        return wide ? a + (b - a) * em_philox_u01d(w.v[2 * i], w.v[2 * i + 1])
                    : a + (b - a) * (double)em_philox_u01f(w.v[i]);
    case EM_RANDOM_BERNOULLI:
        return (wide ? em_philox_u01d(w.v[2 * i], w.v[2 * i + 1]) : (double)em_philox_u01f(w.v[i])) < a ? 1.0
                                                                                                      : 0.0;
    case EM_RANDOM_EXPONENTIAL: {
        double u = wide ? em_philox_u01d(w.v[2 * i], w.v[2 * i + 1]) : (double)em_philox_u01f(w.v[i]);
        return -log1p(-u) / a;
    }
    case EM_RANDOM_NORMAL: {
        /* Box-Muller on the pair (u1, u2): i even takes the cosine, odd the sine */
        double u1, u2;
        if (wide) {
            u1 = em_philox_u01d(w.v[0], w.v[1]);
            u2 = em_philox_u01d(w.v[2], w.v[3]);
        } else {
            int p = i & ~1;
            u1 = (double)em_philox_u01f(w.v[p]);
            u2 = (double)em_philox_u01f(w.v[p + 1]);
        }
        double r = sqrt(-2.0 * log(1.0 - u1)), t = 6.283185307179586 * u2;
        return a + b * ((i & 1) ? r * sin(t) : r * cos(t));
    }
    default: { /* EM_RANDOM_INTEGER */
        uint64_t x = (range == 0 || range > 0xFFFFFFFFull) ? ((uint64_t)w.v[2 * i + 1] << 32 | w.v[2 * i])
                                                           : w.v[i];
        *iv = range ? (int64_t)(x % range) + from : (int64_t)x;
        return (double)*iv;
    }
    }
}

#endif
