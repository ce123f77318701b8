/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_concat.c: see qconvert_nn_concat.h. Shipped with qconvert (Apache-2.0). */
#include "qconvert_nn_concat.h"

#include <stddef.h>
#include <string.h>

void qconvert_concat_rows(const void *const *parts, const int32_t *row_bytes, int32_t count,
                          int32_t rows, void *output)
{
    unsigned char *out = (unsigned char *)output;
    int32_t r, k;
    for (r = 0; r < rows; ++r) {
        for (k = 0; k < count; ++k) {
            const size_t n = (size_t)row_bytes[k];
            const unsigned char *src = (const unsigned char *)parts[k] + (size_t)r * n;
            if (src != out) {
                memmove(out, src, n);
            }
            out += n;
        }
    }
}
