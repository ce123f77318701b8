/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_concat.h: Concatenation for whole-model C (`qconvert export-c`), written so the
 * memory plan may put any input inside the output. Shipped with qconvert (Apache-2.0). Plain
 * C99: no allocation.
 *
 * A concatenation on any axis is, in memory, `rows` rows (the product of the dimensions before
 * the axis), row r of the output being row r of every part, one after the other (part k's row:
 * row_bytes[k] bytes). Memory order (the memory plan relies on it, see qconvert_nn.h): the
 * output is written in memory order, one part's row at a time, each row piece copied as by
 * memmove (it may overlap its own source) after every earlier piece is written; so a part's
 * input may sit inside the output wherever no piece overwrites a byte a later piece reads.
 */
#ifndef QCONVERT_NN_CONCAT_H
#define QCONVERT_NN_CONCAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* output = the `count` parts (parts[k]: rows x row_bytes[k] bytes) concatenated row by row. */
void qconvert_concat_rows(const void *const *parts, const int32_t *row_bytes, int32_t count,
                          int32_t rows, void *output);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_CONCAT_H */
