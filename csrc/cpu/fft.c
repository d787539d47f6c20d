/* fft.c — mixed-radix FFT of any length, Bluestein's algorithm for lengths
 * with a large prime factor (fft.h).
 *
 * Why ember's own: the well-kept BSD-licensed FFTs are C++ headers meant to be
 * vendored (pocketfft) or reachable only through Python (NumPy's copy of
 * it), FFTW is GPL and MKL is a 200 MB x86-only download; a transform of
 * moderate speed in one short file fits the project better.
 *
 * The transform is recursive decimation in time: a length n = p m splits
 * into p interleaved transforms of length m (stride p), whose results are
 * combined by radix-p butterflies after a twiddle W_n^(qk). Radices 4, 2
 * and 3 have their own butterflies, other primes a general one of O(p) per
 * element; a prime factor above BLUESTEIN_PRIME makes the length a
 * convolution of a power of two (Bluestein), O(n log n) throughout. */
#include "fft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 64
#define BLUESTEIN_PRIME 61 /* largest prime a general butterfly handles */
#define TWO_PI 6.283185307179586476925286766559

struct EmFftPlan {
    int64_t n;
    int levels;
    int factor[MAX_LEVELS];
    int64_t len[MAX_LEVELS]; /* the transform length at each level */
    double *tw64[MAX_LEVELS]; /* W_len^(q k), q = 1..p-1, k = 0..m-1: (p-1) m complex */
    float *tw32[MAX_LEVELS];
    double *roots64[MAX_LEVELS]; /* W_p^j, j = 0..p-1, for general radices */
    float *roots32[MAX_LEVELS];
    /* Bluestein: chirp w_k = exp(-i pi k^2 / n), and the forward transform
     * of length m of the conjugate chirp laid out for a circular convolution */
    EmFftPlan *sub;
    int64_t m;
    double *chirp, *kernel_hat;
};

static int64_t largest_prime(int64_t n) {
    int64_t best = 1;
    for (int64_t p = 2; p * p <= n; p++)
        while (n % p == 0) {
            best = p;
            n /= p;
        }
    return n > 1 ? n : best;
}

/* exp(-2 pi i num / den), num reduced modulo den first for accuracy */
static void unit_root(int64_t num, int64_t den, double *re, double *im) {
    num %= den;
    double a = -TWO_PI * (double)num / (double)den;
    *re = cos(a);
    *im = sin(a);
}

static int64_t pow2_at_least(int64_t n) {
    int64_t m = 1;
    while (m < n) m <<= 1;
    return m;
}

void em_fft_plan_free(EmFftPlan *p) {
    if (!p) return;
    for (int l = 0; l < p->levels; l++) {
        free(p->tw64[l]);
        free(p->tw32[l]);
        free(p->roots64[l]);
        free(p->roots32[l]);
    }
    em_fft_plan_free(p->sub);
    free(p->chirp);
    free(p->kernel_hat);
    free(p);
}

int64_t em_fft_plan_length(const EmFftPlan *p) { return p->n; }

size_t em_fft_work_bytes(const EmFftPlan *p) {
    if (!p->sub) return 0;
    return (size_t)(2 * p->m) * 2 * sizeof(double) + em_fft_work_bytes(p->sub);
}

static int add_level(EmFftPlan *pl, int f, int64_t len) {
    int l = pl->levels++;
    pl->factor[l] = f;
    pl->len[l] = len;
    int64_t m = len / f;
    size_t ntw = (size_t)(f - 1) * (size_t)m;
    pl->tw64[l] = malloc(2 * ntw * sizeof(double) + 1);
    pl->tw32[l] = malloc(2 * ntw * sizeof(float) + 1);
    if (!pl->tw64[l] || !pl->tw32[l]) return -1;
    for (int q = 1; q < f; q++)
        for (int64_t k = 0; k < m; k++) {
            size_t i = (size_t)(q - 1) * (size_t)m + (size_t)k;
            unit_root((int64_t)q * k, len, &pl->tw64[l][2 * i], &pl->tw64[l][2 * i + 1]);
            pl->tw32[l][2 * i] = (float)pl->tw64[l][2 * i];
            pl->tw32[l][2 * i + 1] = (float)pl->tw64[l][2 * i + 1];
        }
    if (f != 2 && f != 3 && f != 4) {
        pl->roots64[l] = malloc(2 * (size_t)f * sizeof(double));
        pl->roots32[l] = malloc(2 * (size_t)f * sizeof(float));
        if (!pl->roots64[l] || !pl->roots32[l]) return -1;
        for (int j = 0; j < f; j++) {
            unit_root(j, f, &pl->roots64[l][2 * j], &pl->roots64[l][2 * j + 1]);
            pl->roots32[l][2 * j] = (float)pl->roots64[l][2 * j];
            pl->roots32[l][2 * j + 1] = (float)pl->roots64[l][2 * j + 1];
        }
    }
    return 0;
}

static void c2c_direct_f64(const EmFftPlan *p, const double *in, double *out, int sign);

EmFftPlan *em_fft_plan_new(int64_t n) {
    if (n < 1) return NULL;
    EmFftPlan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->n = n;
    if (largest_prime(n) > BLUESTEIN_PRIME) {
        pl->m = pow2_at_least(2 * n - 1);
        pl->sub = em_fft_plan_new(pl->m);
        pl->chirp = malloc(2 * (size_t)n * sizeof(double));
        double *b = calloc(2 * (size_t)pl->m, sizeof(double));
        pl->kernel_hat = malloc(2 * (size_t)pl->m * sizeof(double));
        if (!pl->sub || !pl->chirp || !b || !pl->kernel_hat) {
            free(b);
            em_fft_plan_free(pl);
            return NULL;
        }
        for (int64_t k = 0; k < n; k++) {
            /* exp(-i pi k^2 / n) = W_{2n}^(k^2), k^2 reduced mod 2n exactly */
            int64_t k2 = (int64_t)(((unsigned __int128)k * (unsigned __int128)k) % (unsigned __int128)(2 * n));
            unit_root(k2, 2 * n, &pl->chirp[2 * k], &pl->chirp[2 * k + 1]);
            b[2 * k] = pl->chirp[2 * k];
            b[2 * k + 1] = -pl->chirp[2 * k + 1];
            if (k) {
                b[2 * (pl->m - k)] = b[2 * k];
                b[2 * (pl->m - k) + 1] = b[2 * k + 1];
            }
        }
        c2c_direct_f64(pl->sub, b, pl->kernel_hat, -1);
        free(b);
        return pl;
    }
    /* factors: 4s, then 2, 3 and the other primes ascending */
    int64_t rest = n, len = n;
    while (rest % 4 == 0) {
        if (add_level(pl, 4, len) < 0) goto fail;
        len /= 4;
        rest /= 4;
    }
    for (int64_t f = 2; rest > 1; f++) {
        while (rest % f == 0) {
            if (add_level(pl, (int)f, len) < 0) goto fail;
            len /= f;
            rest /= f;
        }
    }
    if (n == 1 && add_level(pl, 1, 1) < 0) goto fail;
    return pl;
fail:
    em_fft_plan_free(pl);
    return NULL;
}

#define T double
#define SFX(name) name##_f64
#define TW tw64
#define ROOTS roots64
#include "fft_tmpl.h"
#undef T
#undef SFX
#undef TW
#undef ROOTS

#define T float
#define SFX(name) name##_f32
#define TW tw32
#define ROOTS roots32
#include "fft_tmpl.h"
#undef T
#undef SFX
#undef TW
#undef ROOTS

static void c2c_direct_f64(const EmFftPlan *p, const double *in, double *out, int sign) {
    rec_f64(p, 0, in, 1, out, sign);
}

/* Bluestein in double: X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), the sum a
 * circular convolution of length m done by three power-of-two transforms.
 * The inverse transform is conj(forward(conj(x))). */
static void bluestein(const EmFftPlan *p, const void *in, void *out, int sign, void *work, int single) {
    const int64_t n = p->n, m = p->m;
    double *a = work, *b = a + 2 * m;
    void *sub_work = b + 2 * m;
    const double cj = sign > 0 ? -1.0 : 1.0;
    for (int64_t k = 0; k < n; k++) {
        double xr = single ? ((const float *)in)[2 * k] : ((const double *)in)[2 * k];
        double xi = cj * (single ? ((const float *)in)[2 * k + 1] : ((const double *)in)[2 * k + 1]);
        double wr = p->chirp[2 * k], wi = p->chirp[2 * k + 1];
        a[2 * k] = xr * wr - xi * wi;
        a[2 * k + 1] = xr * wi + xi * wr;
    }
    memset(a + 2 * n, 0, (size_t)(m - n) * 2 * sizeof(double));
    em_fft_c2c_f64(p->sub, a, b, -1, sub_work);
    for (int64_t k = 0; k < m; k++) {
        double br = b[2 * k], bi = b[2 * k + 1], hr = p->kernel_hat[2 * k], hi = p->kernel_hat[2 * k + 1];
        b[2 * k] = br * hr - bi * hi;
        b[2 * k + 1] = br * hi + bi * hr;
    }
    em_fft_c2c_f64(p->sub, b, a, 1, sub_work);
    const double scale = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
        double yr = a[2 * k] * scale, yi = a[2 * k + 1] * scale;
        double wr = p->chirp[2 * k], wi = p->chirp[2 * k + 1];
        double re = yr * wr - yi * wi, im = cj * (yr * wi + yi * wr);
        if (single) {
            ((float *)out)[2 * k] = (float)re;
            ((float *)out)[2 * k + 1] = (float)im;
        } else {
            ((double *)out)[2 * k] = re;
            ((double *)out)[2 * k + 1] = im;
        }
    }
}

void em_fft_c2c_f64(const EmFftPlan *p, const double *in, double *out, int sign, void *work) {
    if (p->sub)
        bluestein(p, in, out, sign, work, 0);
    else
        rec_f64(p, 0, in, 1, out, sign);
}

void em_fft_c2c_f32(const EmFftPlan *p, const float *in, float *out, int sign, void *work) {
    if (p->sub)
        bluestein(p, in, out, sign, work, 1);
    else
        rec_f32(p, 0, in, 1, out, sign);
}
