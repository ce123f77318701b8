"""`export-c --example`: an example application beside the model, to start a firmware from.

- main.c: fills a float input (a test pattern; replace `fill_input` with real data in the
  layout NAME_INPUT_DIMS gives), quantizes it with NAME_quantize_input, runs NAME_invoke, turns
  the output into floats with NAME_dequantize_output and prints them with the top class;
- CMakeLists.txt: the model as a static library NAME (C99) and the example executable;
- NAME.mk: a Makefile fragment listing the model's sources (NAME_SRCS) and flags (NAME_CFLAGS).

For a model with one input and one output, each int8 or int16 quantized per tensor (the
default `quantize` output), and no state; other models are refused in one line.
"""

from __future__ import annotations

from qconvert.errors import QConvertError

from .steps import DTYPES

PATTERN = "(float)(i % 17) / 16.0f"  # the test pattern main.c feeds (tests rebuild it)


def check_example(graph, state) -> None:
    """Refuse --example for a model main.c cannot drive."""
    from .io_helpers import is_quantized_tensor

    if state is not None:
        raise QConvertError("--example writes a main.c for a model without state; a "
                            "streaming model needs its NAME_init first (see NAME.h)")
    if len(graph.inputs) != 1 or len(graph.outputs) != 1 or not all(
            is_quantized_tensor(graph, n) for n in (*graph.inputs, *graph.outputs)):
        raise QConvertError("--example writes a main.c for a model with one input and one "
                            "output, quantized per tensor (int8 or int16); see NAME.h for the "
                            "helpers of this one")


def example_files(graph, name: str, sources: list, kernels: str) -> dict:
    """{file name: bytes} of main.c, CMakeLists.txt and NAME.mk; `sources` are the model's
    .c files (NAME.c and the kernels), in writing order."""
    upper = name.upper()
    in_t = DTYPES[graph.tensors[graph.inputs[0]].dtype][0]
    out_t = DTYPES[graph.tensors[graph.outputs[0]].dtype][0]
    main = f"""/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: an example application of the model {name} (written by qconvert export-c
 * --example; edit freely). It fills a float input (replace fill_input with your data, laid out
 * as {upper}_INPUT_DIMS says), quantizes it with {name}_quantize_input (the scale and zero
 * point of {name}.h), runs {name}_invoke, turns the output into floats with
 * {name}_dequantize_output and prints them with the top class.
 */
#include <stdio.h>

#include "{name}.h"

static float input_values[{upper}_INPUT_SIZE];
static {in_t} input[{upper}_INPUT_SIZE];
static {out_t} output[{upper}_OUTPUT_SIZE];
static float output_values[{upper}_OUTPUT_SIZE];

/* A test pattern: element i is (i % 17) / 16. */
static void fill_input(float *values)
{{
    int i;
    for (i = 0; i < {upper}_INPUT_SIZE; ++i) {{
        values[i] = {PATTERN};
    }}
}}

int main(void)
{{
    int i;
    int best = 0;
    int status;
    fill_input(input_values);
    {name}_quantize_input(input_values, input);
    status = {name}_invoke(input, output);
    if (status != 0) {{
        printf("{name}_invoke failed: %d\\n", status);
        return 1;
    }}
    {name}_dequantize_output(output, output_values);
    for (i = 0; i < {upper}_OUTPUT_SIZE; ++i) {{
        printf("output[%d] = %d (%.6f)\\n", i, (int)output[i], (double)output_values[i]);
        if (output_values[i] > output_values[best]) {{
            best = i;
        }}
    }}
    printf("top class: %d\\n", best);
    return 0;
}}
"""
    listed = " ".join(sources)
    cmsis = ("\n# CMSIS-NN kernels: point CMSIS_NN_DIR at a CMSIS-NN checkout and link its "
             "library\n# (add_subdirectory(${CMSIS_NN_DIR} cmsis-nn), then target "
             f"cmsis-nn).\ntarget_include_directories({name} PUBLIC ${{CMSIS_NN_DIR}}/Include)\n"
             if kernels == "cmsis-nn" else "")
    cmake = f"""# CMakeLists.txt: the model {name} as a C99 library and its example application
# (written by qconvert export-c --example).
#   cmake -S . -B build && cmake --build build && ./build/{name}_example
cmake_minimum_required(VERSION 3.13)
project({name}_example C)

add_library({name} STATIC {listed})
target_include_directories({name} PUBLIC ${{CMAKE_CURRENT_LIST_DIR}})
set_target_properties({name} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
{cmsis}
add_executable({name}_example main.c)
target_link_libraries({name}_example PRIVATE {name})
set_target_properties({name}_example PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
"""
    var = upper
    cmsis_include = " -I$(CMSIS_NN_DIR)/Include" if kernels == "cmsis-nn" else ""
    mk = f"""# {name}.mk: the model {name}'s sources for a Makefile (written by qconvert export-c
# --example). In your Makefile:
#   include path/to/{name}.mk
#   SRCS += $({var}_SRCS)
#   CFLAGS += $({var}_CFLAGS)
{var}_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
{var}_SRCS := $(addprefix $({var}_DIR)/,{listed})
{var}_CFLAGS := -std=c99 -I$({var}_DIR){cmsis_include}
"""
    return {"main.c": main.encode(), "CMakeLists.txt": cmake.encode(),
            f"{name}.mk": mk.encode()}
