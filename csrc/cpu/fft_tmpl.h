/* fft_tmpl.h — the recursive transform for one precision (included by fft.c
 * with T, SFX, TW and ROOTS defined). Arrays are interleaved complex. */

/* y[k + r m] for r = 0..p-1 from t[0..p) (the p inputs of butterfly k, after
 * their twiddles): y_r = sum_q t_q W_p^(q r) */
static inline void SFX(butterfly)(const EmFftPlan *pl, int l, int p, T *t, T *y, int64_t m, int sign) {
    if (p == 2) {
        T ar = t[0], ai = t[1], br = t[2], bi = t[3];
        y[0] = ar + br;
        y[1] = ai + bi;
        y[2 * m] = ar - br;
        y[2 * m + 1] = ai - bi;
    } else if (p == 4) {
        /* W_4 = sign i: X1 = (a0 - a2) + W (a1 - a3), X3 = (a0 - a2) - W (a1 - a3) */
        T s02r = t[0] + t[4], s02i = t[1] + t[5], d02r = t[0] - t[4], d02i = t[1] - t[5];
        T s13r = t[2] + t[6], s13i = t[3] + t[7], d13r = t[2] - t[6], d13i = t[3] - t[7];
        T wr = -sign * d13i, wi = sign * d13r; /* sign i (d13r + i d13i) */
        y[0] = s02r + s13r;
        y[1] = s02i + s13i;
        y[2 * m] = d02r + wr;
        y[2 * m + 1] = d02i + wi;
        y[4 * m] = s02r - s13r;
        y[4 * m + 1] = s02i - s13i;
        y[6 * m] = d02r - wr;
        y[6 * m + 1] = d02i - wi;
    } else if (p == 3) {
        const T h = (T)0.86602540378443864676; /* sqrt(3) / 2 */
        T sr = t[2] + t[4], si = t[3] + t[5], dr = t[2] - t[4], di = t[3] - t[5];
        T mr = t[0] - sr / 2, mi = t[1] - si / 2;
        T rr = -sign * h * di, ri = sign * h * dr; /* sign i h (dr + i di) */
        y[0] = t[0] + sr;
        y[1] = t[1] + si;
        y[2 * m] = mr + rr;
        y[2 * m + 1] = mi + ri;
        y[4 * m] = mr - rr;
        y[4 * m + 1] = mi - ri;
    } else if (p == 1) {
        y[0] = t[0];
        y[1] = t[1];
    } else {
        const T *w = pl->ROOTS[l]; /* W_p^j for the forward sign; conjugated for the inverse */
        for (int r = 0; r < p; r++) {
            T accr = 0, acci = 0;
            int j = 0; /* (q r) mod p */
            for (int q = 0; q < p; q++) {
                T wr = w[2 * j], wi = sign < 0 ? w[2 * j + 1] : -w[2 * j + 1];
                accr += t[2 * q] * wr - t[2 * q + 1] * wi;
                acci += t[2 * q] * wi + t[2 * q + 1] * wr;
                j += r;
                if (j >= p) j -= p;
            }
            y[2 * (int64_t)r * m] = accr;
            y[2 * (int64_t)r * m + 1] = acci;
        }
    }
}

/* y[0..len) = the transform of x[0], x[s], x[2s], ... at level l */
static void SFX(rec)(const EmFftPlan *pl, int l, const T *x, int64_t s, T *y, int sign) {
    const int p = pl->factor[l];
    const int64_t m = pl->len[l] / p;
    T t[2 * BLUESTEIN_PRIME + 2];
    if (m == 1) {
        for (int q = 0; q < p; q++) {
            t[2 * q] = x[2 * q * s];
            t[2 * q + 1] = x[2 * q * s + 1];
        }
        SFX(butterfly)(pl, l, p, t, y, 1, sign);
        return;
    }
    for (int q = 0; q < p; q++) SFX(rec)(pl, l + 1, x + 2 * q * s, s * p, y + 2 * q * m, sign);
    const T *tw = pl->TW[l];
    for (int64_t k = 0; k < m; k++) {
        t[0] = y[2 * k];
        t[1] = y[2 * k + 1];
        for (int q = 1; q < p; q++) {
            const T *w = tw + 2 * ((int64_t)(q - 1) * m + k);
            T wr = w[0], wi = sign < 0 ? w[1] : -w[1];
            T vr = y[2 * (q * m + k)], vi = y[2 * (q * m + k) + 1];
            t[2 * q] = vr * wr - vi * wi;
            t[2 * q + 1] = vr * wi + vi * wr;
        }
        SFX(butterfly)(pl, l, p, t, y + 2 * k, m, sign);
    }
}
