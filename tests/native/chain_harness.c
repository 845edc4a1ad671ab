/*
 * Test harness of the generated C (sim/envs/native/codegen.py): each generated function of
 * "step_tables.h" over n environments, on structure-of-arrays buffers (row r of environment e at
 * r * n + e), so tests/test_actuator_chain.py can compare it with the same Python run on numpy and torch.
 */
#include <stdint.h>

#include "vector_math.h"
#include "counter_random.h"
#include "step_tables.h"

#define AT(buf, r) ((buf)[(int64_t)(r) * n + e])

void h_derive(int64_t n, const float *param, float *derived) {
    for (int64_t e = 0; e < n; e++) {
        float p[CHAIN_PARAM_ROWS], d[CHAIN_DERIVED];
        for (int i = 0; i < CHAIN_PARAM_ROWS; i++) p[i] = AT(param, i);
        chain_derive(p, d);
        for (int i = 0; i < CHAIN_DERIVED; i++) AT(derived, i) = d[i];
    }
}

void h_command(int64_t n, const float *wrench, const float *state, const float *derived, float *command) {
    for (int64_t e = 0; e < n; e++) {
        float w[NUM_ACTIONS], s[CHAIN_STATE_ROWS], d[CHAIN_DERIVED], c[CHAIN_COMMANDS];
        for (int i = 0; i < NUM_ACTIONS; i++) w[i] = AT(wrench, i);
        for (int i = 0; i < CHAIN_STATE_ROWS; i++) s[i] = AT(state, i);
        for (int i = 0; i < CHAIN_DERIVED; i++) d[i] = AT(derived, i);
        chain_command(w, s, d, c);
        for (int i = 0; i < CHAIN_COMMANDS; i++) AT(command, i) = c[i];
    }
}

void h_substep(int64_t n, const float *state, const float *command, const float *derived, float *state_out, float *wrench_out) {
    for (int64_t e = 0; e < n; e++) {
        float s[CHAIN_STATE_ROWS], c[CHAIN_COMMANDS], d[CHAIN_DERIVED], so[CHAIN_STATE_ROWS], w[4];
        for (int i = 0; i < CHAIN_STATE_ROWS; i++) s[i] = AT(state, i);
        for (int i = 0; i < CHAIN_COMMANDS; i++) c[i] = AT(command, i);
        for (int i = 0; i < CHAIN_DERIVED; i++) d[i] = AT(derived, i);
        chain_substep(s, c, d, so, w);
        for (int i = 0; i < CHAIN_STATE_ROWS; i++) AT(state_out, i) = so[i];
        for (int i = 0; i < 4; i++) AT(wrench_out, i) = w[i];
    }
}

void h_initial_state(int64_t n, const float *weight, const float *derived, float *state_out) {
    for (int64_t e = 0; e < n; e++) {
        float d[CHAIN_DERIVED], so[CHAIN_STATE_ROWS];
        for (int i = 0; i < CHAIN_DERIVED; i++) d[i] = AT(derived, i);
        chain_initial_state(weight[e], d, so);
        for (int i = 0; i < CHAIN_STATE_ROWS; i++) AT(state_out, i) = so[i];
    }
}

void h_draw_parameters(int64_t n, int32_t key, float *params) {
    for (int64_t e = 0; e < n; e++) {
        float p[PARAM_ROWS];
        draw_parameters((uint32_t)e * RESET_UNIFORMS, (uint32_t)key, p);
        for (int i = 0; i < PARAM_ROWS; i++) AT(params, i) = p[i];
    }
}

void h_privileged(int64_t n, const float *param, const float *chain_state, const float *latency, float dist_scale, float *out) {
    for (int64_t e = 0; e < n; e++) {
        float p[PARAM_ROWS], s[CHAIN_STATE_ROWS], o[PRIVILEGED];
        for (int i = 0; i < PARAM_ROWS; i++) p[i] = AT(param, i);
        for (int i = 0; i < CHAIN_STATE_ROWS; i++) s[i] = AT(chain_state, i);
        privileged_columns(p, s, latency[e], dist_scale, o);
        for (int i = 0; i < PRIVILEGED; i++) AT(out, i) = o[i];
    }
}
