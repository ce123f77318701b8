/* Scalar int8 layer references for tests/c_export/test_export_c_header.py: the behavioural check of a
 * generated C header's numbers against TFLite Micro's outputs.
 *
 * Written from TFLite's reference_integer_ops (ConvPerChannel, DepthwiseConvPerChannel,
 * FullyConnected with row-major weights): one output value at a time, every tap of the window
 * checked against the image bounds, no reordering. Requantization is quant_oracle.c's (included
 * below), independent of qconvert's shipped kernel. Every entry point takes its geometry and
 * quantization as one int32 array `g` indexed by the G_* constants, so Python passes plain
 * numpy arrays through ctypes.
 *
 * Build: gcc -std=c99 -O1 -shared -fPIC layer_reference.c -lm (quant_oracle.c beside it)
 */
#include "quant_oracle.c"

enum {
    G_BATCHES, G_IN_H, G_IN_W, G_IN_C, G_OUT_H, G_OUT_W, G_OUT_C, G_KERNEL_H, G_KERNEL_W,
    G_STRIDE_H, G_STRIDE_W, G_DILATION_H, G_DILATION_W, G_PAD_TOP, G_PAD_LEFT,
    G_INPUT_OFFSET, G_OUTPUT_OFFSET, G_ACT_MIN, G_ACT_MAX, G_PER_CHANNEL, G_SINGLE_ROUNDING,
    G_WEIGHTS_OFFSET, G_COUNT
};

int32_t ref_geometry_count(void) { return G_COUNT; }

static int8_t finish(int64_t acc, int32_t channel, const int32_t *bias, const int32_t *mult,
                     const int32_t *shift, const int32_t *g)
{
    const int32_t q = g[G_PER_CHANNEL] ? channel : 0;
    int32_t out;
    if (bias)
        acc += bias[channel];
    out = g[G_SINGLE_ROUNDING] ? mbqm_single((int32_t)acc, mult[q], shift[q])
                               : mbqm_double((int32_t)acc, mult[q], shift[q]);
    out += g[G_OUTPUT_OFFSET];
    if (out < g[G_ACT_MIN])
        out = g[G_ACT_MIN];
    if (out > g[G_ACT_MAX])
        out = g[G_ACT_MAX];
    return (int8_t)out;
}

/* input NHWC, weights OHWI [out_c][kh][kw][in_c], output NHWC */
void ref_conv(const int8_t *input, const int8_t *weights, const int32_t *bias,
              const int32_t *mult, const int32_t *shift, const int32_t *g, int8_t *output)
{
    for (int32_t b = 0; b < g[G_BATCHES]; ++b)
        for (int32_t oy = 0; oy < g[G_OUT_H]; ++oy)
            for (int32_t ox = 0; ox < g[G_OUT_W]; ++ox)
                for (int32_t oc = 0; oc < g[G_OUT_C]; ++oc) {
                    int64_t acc = 0;
                    for (int32_t ky = 0; ky < g[G_KERNEL_H]; ++ky)
                        for (int32_t kx = 0; kx < g[G_KERNEL_W]; ++kx) {
                            const int32_t iy = oy * g[G_STRIDE_H] - g[G_PAD_TOP]
                                               + ky * g[G_DILATION_H];
                            const int32_t ix = ox * g[G_STRIDE_W] - g[G_PAD_LEFT]
                                               + kx * g[G_DILATION_W];
                            if (iy < 0 || iy >= g[G_IN_H] || ix < 0 || ix >= g[G_IN_W])
                                continue;
                            for (int32_t ic = 0; ic < g[G_IN_C]; ++ic) {
                                const int32_t x = input[((b * g[G_IN_H] + iy) * g[G_IN_W] + ix)
                                                        * g[G_IN_C] + ic];
                                const int32_t w = weights[((oc * g[G_KERNEL_H] + ky)
                                                           * g[G_KERNEL_W] + kx) * g[G_IN_C]
                                                          + ic];
                                acc += (int64_t)w * (x + g[G_INPUT_OFFSET]);
                            }
                        }
                    output[((b * g[G_OUT_H] + oy) * g[G_OUT_W] + ox) * g[G_OUT_C] + oc] =
                        finish(acc, oc, bias, mult, shift, g);
                }
}

/* input NHWC, weights [1][kh][kw][out_c] with out_c = in_c * depth multiplier: output channel
 * oc reads input channel oc / multiplier */
void ref_depthwise(const int8_t *input, const int8_t *weights, const int32_t *bias,
                   const int32_t *mult, const int32_t *shift, const int32_t *g, int8_t *output)
{
    const int32_t m = g[G_OUT_C] / g[G_IN_C];
    for (int32_t b = 0; b < g[G_BATCHES]; ++b)
        for (int32_t oy = 0; oy < g[G_OUT_H]; ++oy)
            for (int32_t ox = 0; ox < g[G_OUT_W]; ++ox)
                for (int32_t oc = 0; oc < g[G_OUT_C]; ++oc) {
                    int64_t acc = 0;
                    for (int32_t ky = 0; ky < g[G_KERNEL_H]; ++ky)
                        for (int32_t kx = 0; kx < g[G_KERNEL_W]; ++kx) {
                            const int32_t iy = oy * g[G_STRIDE_H] - g[G_PAD_TOP]
                                               + ky * g[G_DILATION_H];
                            const int32_t ix = ox * g[G_STRIDE_W] - g[G_PAD_LEFT]
                                               + kx * g[G_DILATION_W];
                            if (iy < 0 || iy >= g[G_IN_H] || ix < 0 || ix >= g[G_IN_W])
                                continue;
                            const int32_t x = input[((b * g[G_IN_H] + iy) * g[G_IN_W] + ix)
                                                    * g[G_IN_C] + oc / m];
                            const int32_t w = weights[(ky * g[G_KERNEL_W] + kx) * g[G_OUT_C]
                                                      + oc];
                            acc += (int64_t)w * (x + g[G_INPUT_OFFSET]);
                        }
                    output[((b * g[G_OUT_H] + oy) * g[G_OUT_W] + ox) * g[G_OUT_C] + oc] =
                        finish(acc, oc, bias, mult, shift, g);
                }
}

/* row-major weights [out_c][in_c] (what arm_fully_connected_s8 reads); G_IN_C is the
 * accumulation depth, G_OUT_C the output depth, G_BATCHES the rows of the input */
void ref_fully_connected(const int8_t *input, const int8_t *weights, const int32_t *bias,
                         const int32_t *mult, const int32_t *shift, const int32_t *g,
                         int8_t *output)
{
    for (int32_t b = 0; b < g[G_BATCHES]; ++b)
        for (int32_t r = 0; r < g[G_OUT_C]; ++r) {
            int64_t acc = 0;
            for (int32_t c = 0; c < g[G_IN_C]; ++c)
                acc += (int64_t)(weights[r * g[G_IN_C] + c] + g[G_WEIGHTS_OFFSET])
                       * (input[b * g[G_IN_C] + c] + g[G_INPUT_OFFSET]);
            output[b * g[G_OUT_C] + r] = finish(acc, r, bias, mult, shift, g);
        }
}
