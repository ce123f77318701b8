/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_lstm.c: the integer UNIDIRECTIONAL_SEQUENCE_LSTM of qconvert_nn_lstm.h.
 * Shipped with qconvert (Apache-2.0). The LOGISTIC / TANH tables are qconvert_nn_s16.c's.
 */
#include "qconvert_nn_lstm.h"
#include "qconvert_nn_loops.h"

/* TFLite's MultiplyByQuantizedMultiplier (double rounding), whatever the build's rounding. */
static int32_t lstm_requantize(int32_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    return qconvert_rdbpot(qconvert_srdhm((int32_t)((uint32_t)acc << left), multiplier), right);
}

/* One fully connected row: sum (x[i] + offset) * w[i], + bias, into Q3.12, int16 range. */
static int32_t lstm_fc(const int8_t *x, const int8_t *w, int32_t n, int32_t offset, int32_t bias,
                       int32_t multiplier, int32_t shift)
{
    int32_t acc = 0, i;
    for (i = 0; i < n; ++i) {
        acc += (int32_t)w[i] * ((int32_t)x[i] + offset);
    }
    return qconvert_clamp(lstm_requantize(acc + bias, multiplier, shift), -32768, 32767);
}

/* int16 x int16 requantized, + offset, clamped to [lo, hi]. */
static int32_t lstm_mul(int32_t a, int32_t b, int32_t multiplier, int32_t shift, int32_t offset,
                        int32_t lo, int32_t hi)
{
    return qconvert_clamp(lstm_requantize(a * b, multiplier, shift) + offset, lo, hi);
}

/* The four gates of one batch row (x: its input, h: its hidden state) into gates[k * units]. */
static void lstm_gates(const int8_t *x, const int8_t *h, int16_t *gates,
                       const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    int32_t k, u;
    for (k = 0; k < 4; ++k) {
        int16_t *g = gates + k * n;
        for (u = 0; u < n; ++u) {
            const int32_t a = lstm_fc(x, p->w[k] + u * p->input_size, p->input_size,
                                      p->input_offset, p->bias[k][u], p->mult[k], p->shift[k]);
            const int32_t r = lstm_fc(h, p->w[4 + k] + u * n, n, p->hidden_offset, 0,
                                      p->mult[4 + k], p->shift[4 + k]);
            g[u] = (int16_t)qconvert_clamp(a + r, -32768, 32767);
        }
        if (k == 2) {
            qconvert_tanh_s16(g, g, n, 0, 0, p->sigmoid_table);
        } else {
            qconvert_logistic_s16(g, g, n, 0, 0, p->sigmoid_table);
        }
    }
}

void qconvert_lstm_s8(const int8_t *input, int8_t *output, int8_t *hidden, int16_t *cell,
                      int16_t *scratch, const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    /* the gates in TFLite's order, then tanh(c) */
    const int16_t *i = scratch, *f = scratch + n, *g = scratch + 2 * n, *o = scratch + 3 * n;
    int16_t *t = scratch + 4 * n;
    int32_t b, s, u;
    for (s = 0; s < p->steps; ++s) {
        for (b = 0; b < p->batch; ++b) {
            const int32_t row = p->time_major ? s * p->batch + b : b * p->steps + s;
            int8_t *h = hidden + b * n;
            int16_t *c = cell + b * n;
            lstm_gates(input + row * p->input_size, h, scratch, p);
            for (u = 0; u < n; ++u) {
                const int32_t kept = lstm_mul(f[u], c[u], p->forget_mult, p->forget_shift, 0,
                                              -32768, 32767);
                const int32_t added = lstm_mul(i[u], g[u], p->input_mult, p->input_shift, 0,
                                               -32768, 32767);
                int32_t v = qconvert_clamp(kept + added, -32768, 32767);
                if (p->cell_clip > 0) {
                    v = qconvert_clamp(v, -p->cell_clip, p->cell_clip);
                }
                c[u] = (int16_t)v;
            }
            qconvert_tanh_s16(c, t, n, p->tanh_multiplier, p->tanh_left_shift, p->sigmoid_table);
            for (u = 0; u < n; ++u) {
                h[u] = (int8_t)lstm_mul(t[u], o[u], p->hidden_mult, p->hidden_shift,
                                        p->hidden_zero_point, -128, 127);
                output[row * n + u] = h[u];
            }
        }
    }
}
