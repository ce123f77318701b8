/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_depthwise_hwc.c: qconvert_dw_hwc_s8 of qconvert_nn_fast.h, qconvert_dw_s8's source
 * compiled for the weights in TFLite's [kh][kw][C] order and TFLite's shifts (the arrays
 * CMSIS-NN's depthwise call reads, so --kernels cmsis-nn needs one copy). Shipped with qconvert
 * (Apache-2.0).
 */
#define QCONVERT_DW_HWC 1
#include "qconvert_nn_depthwise.c"
