/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_lstm.c: the integer UNIDIRECTIONAL_SEQUENCE_LSTM of qconvert_nn_lstm.h (8-bit and
 * 16-bit activations). Shipped with qconvert (Apache-2.0). The LOGISTIC / TANH tables and the
 * 64-bit requantization are qconvert_nn_s16.c's.
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

/* One int8 fully connected row: sum (x[i] + offset) * w[i], + bias, into Q3.12, int16 range. */
static int32_t lstm_fc_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t offset,
                          int32_t bias, int32_t multiplier, int32_t shift)
{
    int32_t acc = 0, i;
    for (i = 0; i < n; ++i) {
        acc += (int32_t)w[i] * ((int32_t)x[i] + offset);
    }
    return qconvert_clamp(lstm_requantize(acc + bias, multiplier, shift), -32768, 32767);
}

/* One int16 fully connected row: the int64 sum + bias, TFLite's 64-bit requantization. */
static int32_t lstm_fc_s16(const int16_t *x, const int8_t *w, int32_t n, int32_t offset,
                           int64_t bias, int32_t multiplier, int32_t shift)
{
    int64_t acc = bias;
    int32_t i;
    for (i = 0; i < n; ++i) {
        acc += (int32_t)w[i] * ((int32_t)x[i] + offset);
    }
    return qconvert_clamp(qconvert_requantize64(acc, multiplier, shift), -32768, 32767);
}

/* int16 x int16 requantized, + offset, clamped to [lo, hi]. */
static int32_t lstm_mul(int32_t a, int32_t b, int32_t multiplier, int32_t shift, int32_t offset,
                        int32_t lo, int32_t hi)
{
    return qconvert_clamp(lstm_requantize(a * b, multiplier, shift) + offset, lo, hi);
}

/* The gate pre-activations of one int8 batch row (x: its input, h: its hidden state) into
 * gates[k * units + u]: the input and the recurrent fully connected rows, saturating add. */
static void lstm_pre_s8(const int8_t *x, const int8_t *h, int16_t *gates,
                        const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    int32_t k, u;
    for (k = 0; k < 4; ++k) {
        for (u = 0; u < n; ++u) {
            const int32_t a = lstm_fc_s8(x, p->w[k] + u * p->input_size, p->input_size,
                                         p->input_offset, p->bias[k][u], p->mult[k], p->shift[k]);
            const int32_t r = lstm_fc_s8(h, p->w[4 + k] + u * n, n, p->hidden_offset, 0,
                                         p->mult[4 + k], p->shift[4 + k]);
            gates[k * n + u] = (int16_t)qconvert_clamp(a + r, -32768, 32767);
        }
    }
}

/* lstm_pre_s8 of an int16 batch row (int64 biases). */
static void lstm_pre_s16(const int16_t *x, const int16_t *h, int16_t *gates,
                         const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    int32_t k, u;
    for (k = 0; k < 4; ++k) {
        for (u = 0; u < n; ++u) {
            const int32_t a = lstm_fc_s16(x, p->w[k] + u * p->input_size, p->input_size,
                                          p->input_offset, p->bias64[k][u], p->mult[k],
                                          p->shift[k]);
            const int32_t r = lstm_fc_s16(h, p->w[4 + k] + u * n, n, p->hidden_offset, 0,
                                          p->mult[4 + k], p->shift[4 + k]);
            gates[k * n + u] = (int16_t)qconvert_clamp(a + r, -32768, 32767);
        }
    }
}

/* The gates' nonlinearities (TANH for the cell gate, LOGISTIC for the others), the cell update
 * c = f * c + i * g (saturated, clipped) and tanh(c) into scratch[4 * units]. */
static void lstm_cell(int16_t *scratch, int16_t *c, const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    const int16_t *i = scratch, *f = scratch + n, *g = scratch + 2 * n;
    int32_t k, u;
    for (k = 0; k < 4; ++k) {
        int16_t *gate = scratch + k * n;
        if (k == 2) {
            qconvert_tanh_s16(gate, gate, n, 0, 0, p->sigmoid_table);
        } else {
            qconvert_logistic_s16(gate, gate, n, 0, 0, p->sigmoid_table);
        }
    }
    for (u = 0; u < n; ++u) {
        const int32_t kept = lstm_mul(f[u], c[u], p->forget_mult, p->forget_shift, 0, -32768,
                                      32767);
        const int32_t added = lstm_mul(i[u], g[u], p->input_mult, p->input_shift, 0, -32768,
                                       32767);
        int32_t v = qconvert_clamp(kept + added, -32768, 32767);
        if (p->cell_clip > 0) {
            v = qconvert_clamp(v, -p->cell_clip, p->cell_clip);
        }
        c[u] = (int16_t)v;
    }
    qconvert_tanh_s16(c, scratch + 4 * n, n, p->tanh_multiplier, p->tanh_left_shift,
                      p->sigmoid_table);
}

/* h = o * tanh(c), requantized with the hidden state's zero point, clamped to [lo, hi]. */
static int32_t lstm_hidden(const int16_t *scratch, int32_t u, const qconvert_lstm_params *p,
                           int32_t lo, int32_t hi)
{
    const int32_t n = p->units;
    return lstm_mul(scratch[4 * n + u], scratch[3 * n + u], p->hidden_mult, p->hidden_shift,
                    p->hidden_zero_point, lo, hi);
}

/* The input / output row of step s, batch b. */
static int32_t lstm_row(int32_t s, int32_t b, const qconvert_lstm_params *p)
{
    return p->time_major ? s * p->batch + b : b * p->steps + s;
}

void qconvert_lstm_s8(const int8_t *input, int8_t *output, int8_t *hidden, int16_t *cell,
                      int16_t *scratch, const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    int32_t b, s, u;
    for (s = 0; s < p->steps; ++s) {
        for (b = 0; b < p->batch; ++b) {
            const int32_t row = lstm_row(s, b, p);
            int8_t *h = hidden + b * n;
            lstm_pre_s8(input + row * p->input_size, h, scratch, p);
            lstm_cell(scratch, cell + b * n, p);
            for (u = 0; u < n; ++u) {
                h[u] = (int8_t)lstm_hidden(scratch, u, p, -128, 127);
                output[row * n + u] = h[u];
            }
        }
    }
}

void qconvert_lstm_s16(const int16_t *input, int16_t *output, int16_t *hidden, int16_t *cell,
                       int16_t *scratch, const qconvert_lstm_params *p)
{
    const int32_t n = p->units;
    int32_t b, s, u;
    for (s = 0; s < p->steps; ++s) {
        for (b = 0; b < p->batch; ++b) {
            const int32_t row = lstm_row(s, b, p);
            int16_t *h = hidden + b * n;
            lstm_pre_s16(input + row * p->input_size, h, scratch, p);
            lstm_cell(scratch, cell + b * n, p);
            for (u = 0; u < n; ++u) {
                h[u] = (int16_t)lstm_hidden(scratch, u, p, -32768, 32767);
                output[row * n + u] = h[u];
            }
        }
    }
}
