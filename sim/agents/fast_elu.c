/*
 * ELU (alpha = 1) forward and backward for float32 CPU tensors: the activation of the actor and the
 * critic (sim/agents/ppo_goto.py). torch's CPU ELU costs ~4 cycles per element on the reference
 * machine and was a fifth of the PPO update (benchmarks/README.md); this loop vectorizes with a
 * Cephes exp polynomial (1-3 ulp) and runs at ~1.
 *
 * forward: y = x > 0 ? x : exp(x) - 1; backward from the output: dy/dx = y > 0 ? 1 : y + 1 (= exp(x)).
 */
#include <stdint.h>

#include "vector_math.h" /* sim/envs/native/vector_math.h: exp_f */

#define PARALLEL_ABOVE 65536 /* elements: below, a second thread costs more than it saves */
#define CHUNK 16384

static void forward_range(const float *restrict x, float *restrict y, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        float v = x[i];
        float e = exp_f(v > 0.0f ? 0.0f : v) - 1.0f; /* NaN goes through exp_f: e is NaN */
        y[i] = v > 0.0f ? v : e;
    }
}

static void backward_range(const float *restrict grad, const float *restrict y, float *restrict grad_x, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        float v = y[i];
        grad_x[i] = grad[i] * (v > 0.0f ? 1.0f : v + 1.0f);
    }
}

/* (One thread runs the plain loop: with GCC 12, an OpenMP region whose if() clause is false ran ~15x slower
   than the loop itself.) */
void robot_hrl_elu_forward(const float *restrict x, float *restrict y, int64_t n, int threads) {
    if (threads <= 1 || n <= PARALLEL_ABOVE) {
        forward_range(x, y, 0, n);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t lo = 0; lo < n; lo += CHUNK) forward_range(x, y, lo, lo + CHUNK < n ? lo + CHUNK : n);
}

void robot_hrl_elu_backward(const float *restrict grad, const float *restrict y, float *restrict grad_x, int64_t n, int threads) {
    if (threads <= 1 || n <= PARALLEL_ABOVE) {
        backward_range(grad, y, grad_x, 0, n);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t lo = 0; lo < n; lo += CHUNK) backward_range(grad, y, grad_x, lo, lo + CHUNK < n ? lo + CHUNK : n);
}
