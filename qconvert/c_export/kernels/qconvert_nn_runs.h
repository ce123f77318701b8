/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_runs.h: a gather as runs of consecutive bytes, for whole-model C
 * (`qconvert export-c`): a data movement that is no set of box copies but copies long stretches
 * of consecutive input (a Gather of whole rows) keeps two int32 per stretch instead of one per
 * element. Any element type (it copies bytes). Shipped with qconvert (Apache-2.0). Plain C99.
 *
 * Memory order (the memory plan relies on it, see qconvert_nn.h): the output is written in
 * memory order, run after run, each run copied as by memmove after every earlier run is
 * written; so the input may sit inside the output wherever no run overwrites a byte a later
 * run reads, as for an element-by-element gather.
 */
#ifndef QCONVERT_NN_RUNS_H
#define QCONVERT_NN_RUNS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* output = the `count` runs one after the other; run k is runs[2k + 1] bytes of the input
 * from byte runs[2k]. */
void qconvert_gather_runs(const void *input, void *output, int32_t count, const int32_t *runs);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_RUNS_H */
