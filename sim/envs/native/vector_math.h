/*
 * Float functions written so that GCC vectorizes the loops that call them (no libm calls, no
 * branches): Cephes single-precision polynomials (S. L. Moshier), 1-3 ulp. Shared by
 * control_step.c (the native simulator step) and sim/agents/fast_elu.c.
 *
 * No -ffast-math is assumed: NaN goes through (exp_f, sincos_f) as torch's functions pass it.
 */
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float as_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t as_int(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline float clampf(float x, float lo, float hi) { x = x < lo ? lo : x; return x > hi ? hi : x; } /* NaN stays NaN */
/* (fmaxf has NaN semantics no vector instruction has, so GCC does not vectorize it without -ffast-math) */
static inline float maxf(float a, float b) { return a > b ? a : b; }
/* torch.maximum / torch.minimum: NaN in either argument gives NaN (the generated chain's xp.maximum, xp.minimum) */
/* (written as two selects of one comparison each: GCC 12 vectorizes that, not a nested or or-ed condition) */
static inline float max_nan_f(float a, float b) { float m = a > b ? a : b; return a != a ? a : m; }
static inline float min_nan_f(float a, float b) { float m = a < b ? a : b; return a != a ? a : m; }

static inline float exp_f(float x) {
    float c = x > 88.3762626647949f ? 88.3762626647949f : x;
    c = c < -87.3365447505531f ? -87.3365447505531f : c;
    float fx = floorf(c * 1.44269504088896341f + 0.5f);
    float r = c - fx * 0.693359375f + fx * 2.12194440e-4f;
    float z = r * r;
    float y = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r
                + 1.6666665459e-1f) * r + 5.0000001201e-1f) * z + r + 1.0f;
    float res = y * as_float(((int32_t)fx + 127) << 23);
    return x != x ? x : res;
}

/* natural log of a positive, normal float */
static inline float log_f(float x) {
    int32_t bits = as_int(x);
    float e = (float)(((bits >> 23) & 0xff) - 126);
    float m = as_float((bits & 0x807fffff) | 0x3f000000); /* [0.5, 1) */
    int below = m < 0.707106781186547524f;
    e = below ? e - 1.0f : e;
    m = below ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m - 1.2420140846e-1f) * m
                  + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m + 2.0000714765e-1f) * m - 2.4999993993e-1f) * m
               + 3.3333331174e-1f) * m * z;
    y += -2.12194440e-4f * e;
    y += -0.5f * z;
    return m + y + 0.693359375f * e;
}

/* sin and cos of one angle (|x| up to ~8e3 rad with full accuracy) */
static inline void sincos_f(float x, float *s_out, float *c_out) {
    float ax = fabsf(x);
    int32_t j = (int32_t)(ax * 1.27323954473516f); /* 4 / pi */
    j = (j + 1) & ~1;
    float y = (float)j;
    float r = ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
    float z = r * r;
    float sp = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
    float cp = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
    int32_t q = (j >> 1) & 3; /* x = q pi/2 + r */
    float s = (q & 1) ? cp : sp;
    float c = (q & 1) ? sp : cp;
    s = (q & 2) ? -s : s;
    c = ((q + 1) & 2) ? -c : c;
    s = x < 0.0f ? -s : s;
    *s_out = x != x ? x : s;
    *c_out = x != x ? x : c;
}

static inline float sin_f(float x) { float s, c; sincos_f(x, &s, &c); return s; }
static inline float cos_f(float x) { float s, c; sincos_f(x, &s, &c); return c; }
