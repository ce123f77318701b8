/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_resize.h: ResizeNearest (TFLite RESIZE_NEAREST_NEIGHBOR) for whole-model C
 * (`qconvert export-c`), int8 and int16 alike (it copies bytes). Shipped with qconvert
 * (Apache-2.0). Plain C99: no allocation.
 *
 * The source row of every output row and the source column of every output column are given
 * (out_h + out_w entries, computed at export time exactly as TFLite Micro computes them); the
 * kernel copies whole pixels (`pixel_bytes`: channels x element size). Memory order (the
 * memory plan relies on it, see qconvert_nn.h): the output is written in memory order, pixel
 * after pixel, each pixel copied as by memmove after its bytes are read; an output row whose
 * source row is the previous output row's is copied from that output row (it reads no input).
 * So the input may sit inside the output wherever no pixel overwrites an input byte a later
 * pixel reads.
 */
#ifndef QCONVERT_NN_RESIZE_H
#define QCONVERT_NN_RESIZE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batches, in_h, in_w, out_h, out_w;
    int32_t pixel_bytes;       /* channels x bytes per element */
    const int32_t *rows;       /* out_h source rows, each in [0, in_h) */
    const int32_t *cols;       /* out_w source columns, each in [0, in_w) */
} qconvert_resize_nearest_params;

/* output (batches x out_h x out_w pixels) = input (batches x in_h x in_w pixels) at
 * (rows[y], cols[x]). */
void qconvert_resize_nearest(const void *input, void *output,
                             const qconvert_resize_nearest_params *p);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_RESIZE_H */
