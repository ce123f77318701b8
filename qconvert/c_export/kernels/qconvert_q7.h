/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_q7.h: qconvert's portable kernels for the CMSIS-NN paper's power-of-two q7 scheme
 * (qconvert export-c --scheme q7 --kernels portable).
 *
 * Every tensor is q7 (int8) with a power-of-two scale. A linear layer computes
 * acc = bias * 2^bias_shift + 2^out_shift / 2 + sum(w * x) in 32 bits and writes
 * sat8(floor(acc / 2^out_shift)): the results of CMSIS_5's legacy q7 kernels, bit for bit,
 * on every build (the average pool, whose legacy result depends on the build, follows the
 * same rule: see qconvert_q7.c). Images are
 * HWC; a convolution's weights OHWI, a depthwise one's HWC (multiplier 1), a fully connected
 * layer's in the 1x4-interleaved order of arm_fully_connected_q7_opt. No scratch memory.
 */
#ifndef QCONVERT_Q7_H
#define QCONVERT_Q7_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry of a 2-D window layer: input h, w, c; output h, w, c; kernel, stride and
 * top / left zero padding (y, x). */
typedef struct {
    int in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, s_h, s_w, p_h, p_w;
} qconvert_q7_geom;

void qconvert_q7_conv(const int8_t *in, const qconvert_q7_geom *g, const int8_t *weights,
                      const int8_t *bias, int bias_shift, int out_shift, int8_t *out);
void qconvert_q7_depthwise(const int8_t *in, const qconvert_q7_geom *g, const int8_t *weights,
                           const int8_t *bias, int bias_shift, int out_shift, int8_t *out);
void qconvert_q7_fc_1x4(const int8_t *in, int cols, const int8_t *weights, int rows,
                        const int8_t *bias, int bias_shift, int out_shift, int8_t *out);
void qconvert_q7_maxpool(const int8_t *in, const qconvert_q7_geom *g, int8_t *out);
void qconvert_q7_avgpool(const int8_t *in, const qconvert_q7_geom *g, int8_t *out);
void qconvert_q7_relu(int8_t *data, int size);
void qconvert_q7_softmax(const int8_t *in, int size, int8_t *out);
void qconvert_q7_table(int8_t *data, int size, int in_frac, const int8_t table[256]);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_Q7_H */
