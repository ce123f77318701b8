/* qconvert_nn_add.c: element-wise ADD (int8, same shapes) of qconvert_nn_fast.h, TFLite Micro's
 * reference kernel bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Each input's rescale is one table load (the exporter computed it for all 256 values); the sum
 * is requantized once, in the short form when the exporter found it exact for the layer.
 * The int32 sum wraps as the device's (it cannot overflow for TFLite's parameters).
 */
#include "qconvert_nn_simd.h"

#include "qconvert_fc_1x4.h"

void qconvert_add_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_add_params *p)
{
    const int32_t *const t1 = p->table1 + 128, *const t2 = p->table2 + 128;
    const int32_t n = p->size, m = p->output_multiplier, s = p->output_shift;
    const int32_t off = p->output_offset, lo = p->activation_min, hi = p->activation_max;
    int32_t i;
    if (p->fast_requantize) {
        for (i = 0; i < n; ++i) {
            const int32_t sum = (int32_t)((uint32_t)t1[a[i]] + (uint32_t)t2[b[i]]);
            output[i] = (int8_t)qconvert_clamp_fast(qconvert_requantize_fast(sum, m, s) + off,
                                                    lo, hi);
        }
    } else {
        for (i = 0; i < n; ++i) {
            const int32_t sum = (int32_t)((uint32_t)t1[a[i]] + (uint32_t)t2[b[i]]);
            output[i] = (int8_t)qconvert_clamp_fast(qconvert_requantize(sum, m, s) + off, lo, hi);
        }
    }
}
