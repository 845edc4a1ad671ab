/*
 * Counter-based random numbers: the C twin of sim/envs/counter_random.py (_hash32, unit_interval).
 * A 32-bit integer hash ("lowbias32", C. Wellons) of (per-draw key, counter). Shared by control_step.c
 * and the generated parameter draws of step_tables.h.
 */
#pragma once
#include <stdint.h>

static inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
    return x;
}

/* uniform in [0, 1), 24 bits (as torch.rand) */
static inline float unit_interval(uint32_t counter, uint32_t key) {
    return (float)((hash32(hash32(counter) ^ key) >> 8) & 0xFFFFFFu) * (1.0f / 16777216.0f);
}
