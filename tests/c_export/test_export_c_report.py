"""`qconvert export-c`: the generated glue (scratch checks run once, Helium-only kernel sums,
the per-layer profiling hook) and the export report (--report FILE.json, the printed table).

Oracles: TFLite Micro's Python interpreter for every output (the glue must not change a bit),
the model's own node list for the layers the hook reports, gcc's link-time symbol wrapping for
how often CMSIS-NN's size queries run, arm-none-eabi-gcc's object files (nm, objdump) for what
is linked on Cortex-M4 and Cortex-M55 and for the code without the hook, QEMU (mps2-an386) for
the hook on a Cortex-M4 reading the FPGAIO counter.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, STRICT, CMSIS_NN, build_cortex_m,
                                      build_host, cmsis_library, harness_source, io_layout, parse,
                                      run_qemu)
from helpers.int8_models import tflm

from qconvert.c_export.model import cmsis_lowering, cmsis_nn
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.c_export.model.steps import tensor_dims
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model, serialize

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"
KWS = MODELS / "kws_ref_model.tflite"
AD01 = MODELS / "ad01_int8.tflite"
NEEDS_ARM_GCC = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                                   reason="arm-none-eabi-gcc missing: Cortex-M objects not built")


def _export(path, folder, kernels, name="net"):
    files, summary = render_model(prepare_model(load_model(path)), ModelOptions(
        name=name, kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
    folder.mkdir(parents=True, exist_ok=True)
    for f, data in files.items():
        (folder / f).write_bytes(data)
    return files, summary


def _samples(graph, count=3):
    rng = np.random.default_rng(24)
    shape = tensor_dims(graph, graph.inputs[0])
    return [[rng.integers(-128, 128, size=shape).astype(np.int8)] for _ in range(count)]


def _assert_bit_exact(got, path, samples, label):
    data = Path(path).read_bytes()
    for k, (outs, sample) in enumerate(zip(got, samples)):
        refs = tflm(data, sample)
        for o, r in zip(outs, refs):
            r = np.asarray(r).reshape(-1)
            assert np.array_equal(o.view(np.uint8), r.view(np.uint8)), f"{label}: sample {k}"


def _layers_with_code(path):
    """(index, op) of the model's nodes that run code: all but the reshapes (aliases)."""
    graph = load_model(path).graph
    return [(k, n.op) for k, n in enumerate(graph.nodes) if n.op not in ("Reshape", "Squeeze")]


# -- CMSIS-NN's scratch sizes: checked once ---------------------------------------------------
SIZE_QUERIES = ("arm_convolve_wrapper_s8_get_buffer_size",
                "arm_depthwise_conv_wrapper_s8_get_buffer_size", "arm_avgpool_s8_get_buffer_size")


def _counting_main(name, ios, samples):
    """The harness's main, renamed, plus a main that runs it and prints how many times
    CMSIS-NN's size queries ran (wrapped at link time) after every invoke."""
    text = harness_source(name, ios, samples).replace("int main(void)", "static int run(void)")
    text = text.replace(
        '        printf("rc %d\\n", rc);',
        '        printf("rc %d\\n", rc);\n        printf("queries %ld\\n", queries);')
    wraps = []
    for fn in SIZE_QUERIES:
        args = "int32_t a, int32_t b" if "avgpool" in fn else \
            "const void *a, const void *b, const void *c, const void *d"
        call = "a, b" if "avgpool" in fn else "a, b, c, d"
        wraps += [f"int32_t __real_{fn}({args});", f"int32_t __wrap_{fn}({args});",
                  f"int32_t __wrap_{fn}({args}) {{ ++queries; return __real_{fn}({call}); }}"]
    head = ["static long queries;", *wraps, ""]
    return text.replace(f'#include "{name}.h"', f'#include "{name}.h"\n' + "\n".join(head)) + \
        "int main(void) { return run(); }\n"


@NEEDS_CMSIS
def test_cmsis_nn_size_queries_run_once_not_per_invoke(tmp_path, monkeypatch):
    """kws: banded convolutions, depthwise and an average pool. The first invoke runs the size
    queries (every band shape), the next ones none; every output stays bit-exact."""
    # CMSIS-NN's conv on every build (builds without Helium, as the host, would run qconvert's
    # fast conv and ask CMSIS-NN for no scratch size)
    monkeypatch.setattr(cmsis_lowering, "fast_conv_step", lambda *a: None)
    folder = tmp_path / "c"
    _export(KWS, folder, "cmsis-nn")
    graph = load_model(KWS).graph
    samples = _samples(graph)
    (folder / "main.c").write_text(_counting_main("net", io_layout(graph), samples))
    lib = cmsis_library("gcc", ["-O1"])
    wrap = ",".join(f"--wrap={fn}" for fn in SIZE_QUERIES)
    exe = tmp_path / "model"
    subprocess.run(["gcc", *STRICT, "-O1", f"-I{CMSIS_NN / 'Include'}",
                    *sorted(str(p) for p in folder.glob("*.c")), str(lib), f"-Wl,{wrap}",
                    "-o", str(exe)], check=True)
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("queries")]
    assert len(counts) == 3
    assert counts[0] > 0, "the first invoke checks the scratch sizes"
    assert counts[1] == counts[0] and counts[2] == counts[0], f"queries per invoke: {counts}"
    kept = "\n".join(line for line in out.splitlines() if not line.startswith("queries"))
    _assert_bit_exact(parse(kept, [np.dtype(np.int8)], 3), KWS, samples, "kws cmsis-nn")


@NEEDS_CMSIS
def test_scratch_reserved_too_small_makes_every_invoke_return_2_untouched(tmp_path,
                                                                          monkeypatch):
    """A plan whose conv scratch is smaller than the library asks for: invoke returns 2 every
    time, before any layer runs (the output keeps its bytes, the arena stays zero)."""
    monkeypatch.setattr(cmsis_nn, "conv_scratch", lambda *a: {"helium": 4, "other": 4})
    # CMSIS-NN's conv on every build (builds without Helium would run qconvert's fast conv,
    # and on the host the other layers' CMSIS-NN kernels ask for no scratch)
    monkeypatch.setattr(cmsis_lowering, "fast_conv_step", lambda *a: None)
    folder = tmp_path / "c"
    _export(KWS, folder, "cmsis-nn")
    main_c = "\n".join([
        "#include <string.h>", '#include "net.h"',
        "static int32_t arena[NET_ARENA_SIZE / 4 + 1];",
        "static int8_t x[NET_INPUT_SIZE], y[NET_OUTPUT_SIZE];",
        "int main(void) { int k; unsigned i; int zero = 1;",
        "  memset(x, 7, sizeof x); memset(y, 0x5a, sizeof y);",
        "  if (net_check() != 2) return 10;",
        "  for (k = 0; k < 3; ++k) {",
        "    if (net_invoke_with_arena(x, y, arena) != 2) return 11;",
        "    if (net_invoke(x, y) != 2) return 12; }",
        "  for (i = 0; i < sizeof y; ++i) if ((unsigned char)y[i] != 0x5a) return 13;",
        "  for (i = 0; i < sizeof arena / 4; ++i) zero &= arena[i] == 0;",
        "  return zero ? 0 : 14; }", ""])
    exe = build_host(folder, main_c, cmsis=True)
    done = subprocess.run([exe], capture_output=True, text=True)
    assert done.returncode == 0, f"exit {done.returncode}"


@NEEDS_CMSIS
def test_check_passes_when_the_reservation_fits(tmp_path):
    """The must-not side: with the plan's own reservations net_check returns 0."""
    folder = tmp_path / "c"
    _export(KWS, folder, "cmsis-nn")
    main_c = '#include "net.h"\nint main(void) { return net_check(); }\n'
    exe = build_host(folder, main_c, cmsis=True)
    assert subprocess.run([exe]).returncode == 0


# -- Helium kernel sums: only in Helium builds ------------------------------------------------
def _symbols(obj) -> dict:
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


@NEEDS_ARM_GCC
@NEEDS_CMSIS
def test_kernel_sums_are_linked_into_helium_builds_only(tmp_path):
    """ad01 (ten fully connected layers): the Cortex-M4 object has none of the arrays only
    CMSIS-NN's Helium kernels read (its fully connected layers run qconvert's fast kernel, which
    starts from the kernel sums), the Cortex-M55 (MVE) object has them, as many bytes as the
    summary says, and not the fast kernel's 1x4 weights."""
    folder = tmp_path / "c"
    _, summary = _export(AD01, folder, "cmsis-nn")
    assert summary.helium_constant_bytes > 0
    found = {}
    for board, cpu in (("m4", ["-mcpu=cortex-m4", "-mthumb"]),
                       ("m55", ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"])):
        obj = tmp_path / f"net_{board}.o"
        subprocess.run(["arm-none-eabi-gcc", *cpu, "-O2", *STRICT, f"-I{CMSIS_NN / 'Include'}",
                        "-c", str(folder / "net.c"), "-o", str(obj)], check=True)
        found[board] = _symbols(obj)
    def named(board, tail):
        return {k: v for k, v in found[board].items() if k.endswith(tail)}
    assert len(named("m4", "_kernel_sums")) == 10 and len(named("m55", "_kernel_sums")) == 10
    assert named("m4", "_weights") == {} and named("m4", "_bias") == {}
    assert len(named("m4", "_fweights")) == 10 and named("m55", "_fweights") == {}
    assert len(named("m55", "_weights")) == 10
    assert sum(named("m55", "_weights").values()) + sum(named("m55", "_bias").values()) == \
        summary.helium_constant_bytes


# -- the profiling hook -----------------------------------------------------------------------
HOOK_C = """\
#include <stdio.h>
#include "net.h"
void net_layer_hook(int index, const char *op, int phase)
{
    printf("hook %d %s %d\\n", index, op, phase);
}
"""


def _hook_calls(out):
    return [tuple(line.split()[1:]) for line in out.splitlines() if line.startswith("hook ")]


def _expected_calls(path, invokes):
    one = [c for k, op in _layers_with_code(path) for c in ((str(k), op, "0"),
                                                             (str(k), op, "1"))]
    return one * invokes


@pytest.mark.parametrize("kernels,define", [("portable", "-DQCONVERT_PROFILE"),
                                            pytest.param("cmsis-nn", "-DNET_PROFILE",
                                                         marks=NEEDS_CMSIS)])
def test_layer_hook_sees_every_layer_in_order_and_outputs_stay_exact(tmp_path, kernels,
                                                                     define):
    folder = tmp_path / "c"
    _export(KWS, folder, kernels)
    (folder / "hook.c").write_text(HOOK_C)
    graph = load_model(KWS).graph
    samples = _samples(graph, 2)
    exe = build_host(folder, harness_source("net", io_layout(graph), samples), [define],
                     cmsis=kernels == "cmsis-nn")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert _hook_calls(out) == _expected_calls(KWS, 2)
    kept = "\n".join(line for line in out.splitlines() if not line.startswith("hook "))
    _assert_bit_exact(parse(kept, [np.dtype(np.int8)], 2), KWS, samples, kernels)


def test_without_the_define_no_hook_is_called(tmp_path):
    """The must-not side: built without QCONVERT_PROFILE / NET_PROFILE, a hook the
    application defines is never called."""
    folder = tmp_path / "c"
    _export(KWS, folder, "portable")
    (folder / "hook.c").write_text(HOOK_C)
    graph = load_model(KWS).graph
    exe = build_host(folder, harness_source("net", io_layout(graph), _samples(graph, 1)))
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert _hook_calls(out) == [] and out.startswith("rc 0")


def _disassembly(obj) -> str:
    out = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(obj)],
                         capture_output=True, text=True, check=True).stdout
    return out.split("\n", 2)[2]  # without the file name line


@NEEDS_ARM_GCC
@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
def test_hook_costs_no_instruction_when_not_defined(tmp_path, kernels):
    """NAME.c built for Cortex-M4 -O2 without the define is the same machine code as NAME.c
    with every hook line deleted."""
    folder = tmp_path / "c"
    files, _ = _export(KWS, folder, kernels)
    text = files["net.c"].decode()
    assert text.count("QCONVERT_LAYER_HOOK(") > 2
    bare = re.sub(r"^ *QCONVERT_LAYER_HOOK\(\d+, \"\w+\", [01]\);\n", "", text, flags=re.M)
    assert "QCONVERT_LAYER_HOOK(0" not in bare
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "net.c").write_text(bare)
    objects = []
    for src in (folder / "net.c", tmp_path / "bare" / "net.c"):
        obj = src.with_suffix(".o")
        subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-O2", *STRICT,
                        f"-I{folder}", f"-I{CMSIS_NN / 'Include'}", "-c", str(src), "-o",
                        str(obj)], check=True)
        objects.append(_disassembly(obj))
    assert objects[0] == objects[1]


@NEEDS_CROSS
@NEEDS_CMSIS
def test_cortex_m4_layer_profile_reads_the_counter_per_layer(tmp_path):
    """On the emulated Cortex-M4 (mps2-an386): a hook reading the FPGAIO counter sees every
    layer in order with a counter that never goes back, and the outputs stay bit-exact."""
    folder = tmp_path / "c"
    _export(KWS, folder, "cmsis-nn")
    (folder / "hook.c").write_text(HOOK_C.replace(
        'printf("hook %d %s %d\\n", index, op, phase);',
        'printf("hook %d %s %d %lu\\n", index, op, phase, '
        '(unsigned long)*(volatile uint32_t *)0x40028018u);'))
    graph = load_model(KWS).graph
    samples = _samples(graph, 1)
    elf = build_cortex_m(folder, harness_source("net", io_layout(graph), samples), "m4",
                         defines=["-DQCONVERT_PROFILE"], cmsis=True)
    out = run_qemu(elf, "m4")
    calls = _hook_calls(out)
    assert [c[:3] for c in calls] == _expected_calls(KWS, 1)
    ticks = [int(c[3]) for c in calls]
    assert ticks == sorted(ticks)
    kept = "\n".join(line for line in out.splitlines() if not line.startswith("hook "))
    _assert_bit_exact(parse(kept, [np.dtype(np.int8)], 1), KWS, samples, "m4 profile")


# -- --report and the printed table -----------------------------------------------------------
def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _no_nan(value):
    raise ValueError(f"not JSON: {value}")


def test_report_is_valid_deterministic_json_with_the_layers_figures(tmp_path):
    reports = []
    for k in range(2):
        folder, report = tmp_path / f"c{k}", tmp_path / f"r{k}.json"
        result = _invoke(["export-c", KWS, "-o", folder, "--name", "kws", "--report", report])
        assert result.exit_code == 0, result.output
        reports.append(report.read_bytes())
    assert reports[0] == reports[1]
    doc = json.loads(reports[0], parse_constant=_no_nan)
    rows, totals = doc["layers"], doc["totals"]
    graph = load_model(KWS).graph
    assert [(r["index"], r["name"], r["op"]) for r in rows] == \
        [(k, n.name, n.op) for k, n in enumerate(graph.nodes)]
    # kws layer 0: 25x5 outputs x 64 channels x a 10x4 kernel on 1 channel (DS-CNN paper)
    assert rows[0]["macs"] == 25 * 5 * 64 * 10 * 4 and rows[0]["input_bytes"] == 49 * 10
    assert rows[0]["output_bytes"] == 25 * 5 * 64 and rows[0]["weight_bytes"] == 64 * 10 * 4
    assert rows[2]["macs"] == 25 * 5 * 64 * 64  # pointwise
    assert totals["macs"] == sum(r["macs"] for r in rows)
    assert totals["constant_bytes"] == sum(r["constant_bytes"] for r in rows)
    header = (tmp_path / "c0" / "kws.h").read_text()
    assert f"#define KWS_ARENA_SIZE {totals['arena_bytes']}\n" in header
    source = (tmp_path / "c0" / "kws.c").read_text()
    for r in rows:
        for fn in r["kernel"]:
            assert f"{fn}(" in source, fn
    assert [(str(r["index"]), r["op"]) for r in rows if r["kernel"]] == \
        [(str(k), op) for k, op in _layers_with_code(KWS)]
    assert rows[10]["op"] == "Reshape" and rows[10]["kernel"] == []  # an alias: no code
    assert doc["model"] == "kws_ref_model.tflite" and doc["kernels"] == "portable"


@NEEDS_CMSIS
def test_report_names_the_cmsis_nn_calls_and_their_scratch(tmp_path):
    report = tmp_path / "r.json"
    result = _invoke(["export-c", KWS, "-o", tmp_path / "c", "--kernels", "cmsis-nn",
                      "--report", report])
    assert result.exit_code == 0, result.output
    doc = json.loads(report.read_text(), parse_constant=_no_nan)
    rows = {r["index"]: r for r in doc["layers"]}
    # conv and fully connected: CMSIS-NN's call on Helium builds, qconvert's fast kernel on
    # the others (cmsis_fast); the depthwise layer likewise (fast_steps.KEEP_ON_DSP)
    assert rows[0]["kernel"] == ["arm_convolve_wrapper_s8", "qconvert_conv_fast_s8"]
    assert rows[1]["kernel"] == ["arm_depthwise_conv_wrapper_s8", "qconvert_dw_hwc_s8"]
    assert rows[11]["kernel"] == ["arm_fully_connected_s8", "qconvert_fc_fast_s8"]
    # scratch of the non-Helium builds: the fast conv's two int16 columns of the 10x4 kernel on
    # one channel and two int32 accumulators per output channel; none for the depthwise kernel
    assert rows[0]["scratch_bytes"] == 2 * 2 * 40 + 2 * 4 * 64
    assert rows[1]["scratch_bytes"] == 0
    # only Helium builds link CMSIS-NN's row-major weights and bias (the kernel sums are the
    # fast kernel's start values too)
    assert rows[11]["helium_constant_bytes"] == 64 * 12 + 4 * 12
    assert doc["totals"]["helium_constant_bytes"] == sum(r["helium_constant_bytes"]
                                                          for r in doc["layers"])


def test_printed_table_has_a_line_per_layer_with_escaped_names(tmp_path):
    """A layer name with a newline and a terminal escape is printed escaped, on one line."""
    m = load_model(KWS)
    g = m.graph
    node, new = g.nodes[0], "evil\nname\x1b[31m"  # a TFLite layer is named by its output
    old = node.outputs[0]
    tensor = g.tensors.pop(old)
    tensor.name = new
    g.tensors[new] = tensor
    g.replace_uses(old, new)
    g.set_outputs(node, [new])
    model = tmp_path / "odd.tflite"
    model.write_bytes(serialize(m))
    result = _invoke(["export-c", model, "-o", tmp_path / "c"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    lines = result.output.splitlines()
    row = next(line for line in lines if line.lstrip().startswith("0 "))
    assert "evil\\nname\\x1b[31m" in row and "qconvert_conv_fast_s8" in row
    for k, op in _layers_with_code(KWS):
        assert any(re.match(rf"\s*{k}\s.*\b{op}\b", line) for line in lines), (k, op)


def test_bad_report_path_is_refused_and_nothing_is_written(tmp_path):
    folder = tmp_path / "c"
    for report, words in ((tmp_path / "missing" / "r.json", "does not exist"),
                          (folder / "net.c", "same file")):
        result = CliRunner().invoke(main, ["export-c", str(KWS), "-o", str(folder), "--name",
                                           "net", "--report", str(report)])
        assert result.exit_code != 0
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], result.output
        assert not folder.exists() and not report.exists()


def test_report_inside_the_new_output_folder_is_written_with_it(tmp_path):
    folder = tmp_path / "c"
    result = _invoke(["export-c", AD01, "-o", folder, "--report", folder / "layers.json"])
    assert result.exit_code == 0, result.output
    doc = json.loads((folder / "layers.json").read_text(), parse_constant=_no_nan)
    assert len(doc["layers"]) == 10 and all(r["op"] == "FullyConnected" for r in doc["layers"])
