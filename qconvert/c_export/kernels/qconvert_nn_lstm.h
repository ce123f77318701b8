/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_lstm.h: the integer UNIDIRECTIONAL_SEQUENCE_LSTM for whole-model C (`qconvert
 * export-c`): TFLite Micro's schemes with 16-bit gates and cell state, int8 weights and 8-bit
 * (qconvert_lstm_s8: int32 biases) or 16-bit (qconvert_lstm_s16, "16x8": int64 biases and
 * accumulators) activations, bit for bit with its reference kernel. Shipped with qconvert
 * (Apache-2.0). Plain C99: no allocation.
 *
 * Per step and batch row: each gate is two fully connected layers into int16 Q3.12 (the input
 * with its int32 / int64 bias, the previous hidden state without bias), added with int16
 * saturation, then TFLite's int16 LOGISTIC (input, forget, output gates) or TANH (cell gate);
 * the cell state c = f * c + i * g (int16, saturated, clipped when cell_clip > 0); the hidden
 * state h = o * tanh(c) requantized to int8 / int16 with its zero point, copied to the output.
 * Requantization is always TFLite's double rounding (TFLite Micro's LSTM;
 * -DQCONVERT_SINGLE_ROUNDING does not change it). The state (h, c) is the caller's: it carries
 * from one call to the next.
 */
#ifndef QCONVERT_NN_LSTM_H
#define QCONVERT_NN_LSTM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Weights and multipliers: index k = 0..3 the gates input, forget, cell, output; w[k] the
 * input-to-gate matrix [units][input_size], w[4 + k] the recurrent one [units][units];
 * (mult[j], shift[j]) requantize the fully connected layer of w[j] into Q3.12. */
typedef struct {
    int32_t batch, steps, input_size, units, time_major;
    int32_t input_offset, hidden_offset, hidden_zero_point;
    const int8_t *w[8];
    const int32_t *bias[4];   /* qconvert_lstm_s8's gate biases (NULL in a 16x8 LSTM) */
    const int64_t *bias64[4]; /* qconvert_lstm_s16's (NULL in an int8 LSTM) */
    int32_t mult[8], shift[8];
    int32_t forget_mult, forget_shift, input_mult, input_shift, hidden_mult, hidden_shift;
    int32_t tanh_multiplier, tanh_left_shift; /* the hidden state's TANH of the cell state */
    int32_t cell_clip;                        /* > 0: |c| <= cell_clip */
    const uint16_t *sigmoid_table;            /* TFLite's 256-entry sigmoid table */
} qconvert_lstm_params;

/* The sequence `input` ([steps][batch][input_size] when time_major, else
 * [batch][steps][input_size]) into `output` (same order, units per row); `hidden` [batch][units]
 * int8 and `cell` [batch][units] int16 are the state, read and updated. `scratch`: 5 * units
 * int16 values. */
void qconvert_lstm_s8(const int8_t *input, int8_t *output, int8_t *hidden, int16_t *cell,
                      int16_t *scratch, const qconvert_lstm_params *p);

/* The same with int16 input, output and hidden state (TFLite Micro's 16x8 LSTM): each fully
 * connected layer accumulates in int64 with the int64 bias64[k] and TFLite's 64-bit
 * requantization (qconvert_requantize64). */
void qconvert_lstm_s16(const int16_t *input, int16_t *output, int16_t *hidden, int16_t *cell,
                       int16_t *scratch, const qconvert_lstm_params *p);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_LSTM_H */
