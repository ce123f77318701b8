/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_runs.c: see qconvert_nn_runs.h. Shipped with qconvert (Apache-2.0). */
#include "qconvert_nn_runs.h"

#include <stddef.h>
#include <string.h>

void qconvert_gather_runs(const void *input, void *output, int32_t count, const int32_t *runs)
{
    const unsigned char *in = (const unsigned char *)input;
    unsigned char *out = (unsigned char *)output;
    int32_t k;
    for (k = 0; k < count; ++k) {
        const unsigned char *src = in + (size_t)runs[2 * k];
        const size_t n = (size_t)runs[2 * k + 1];
        if (src != out) {
            memmove(out, src, n);
        }
        out += n;
    }
}
