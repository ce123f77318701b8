/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_resize.c: see qconvert_nn_resize.h. Shipped with qconvert (Apache-2.0). */
#include "qconvert_nn_resize.h"

#include <stddef.h>
#include <string.h>

void qconvert_resize_nearest(const void *input, void *output,
                             const qconvert_resize_nearest_params *p)
{
    const unsigned char *in = (const unsigned char *)input;
    unsigned char *out = (unsigned char *)output;
    const size_t pixel = (size_t)p->pixel_bytes;
    const size_t in_row = (size_t)p->in_w * pixel;
    const size_t out_row = (size_t)p->out_w * pixel;
    int32_t b, y, x;
    for (b = 0; b < p->batches; ++b) {
        const unsigned char *image = in + (size_t)b * (size_t)p->in_h * in_row;
        for (y = 0; y < p->out_h; ++y) {
            if (y > 0 && p->rows[y] == p->rows[y - 1]) {
                /* the previous output row: written, never the input's bytes any more */
                memcpy(out, out - out_row, out_row);
            } else {
                const unsigned char *row = image + (size_t)p->rows[y] * in_row;
                for (x = 0; x < p->out_w; ++x) {
                    const unsigned char *src = row + (size_t)p->cols[x] * pixel;
                    if (src != out + (size_t)x * pixel) {
                        memmove(out + (size_t)x * pixel, src, pixel);
                    }
                }
            }
            out += out_row;
        }
    }
}
