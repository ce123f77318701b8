"""`qconvert export-c` under the sanitizers, and the alignment of everything it places.

Oracles: gcc's AddressSanitizer and UndefinedBehaviorSanitizer (`-fsanitize=address,undefined
-fno-sanitize-recover=all`: any out-of-bounds access, misaligned typed load or store, signed
overflow or bad shift aborts the run) on ONE binary per kernel set holding every export-c test
model (the int8 models of the `models` fixture, tests/c_export/conftest.py; the 16x8 and
mixed models of `S16_MODELS` and `built16_models`, tests/helpers; digits, ResNet-8 and a 1-D
KWS CNN quantized 16x8 and mixed by qconvert; the streaming model of
test_export_c_streaming.py frame by frame), CMSIS-NN compiled with the same sanitizers; the
same image on an emulated Cortex-M4 that faults on every unaligned access as a Cortex-M0 does
(qemu-system-arm); the outputs stay TFLite Micro's bit for bit. Models and kernel files are
picked up from what the export writes, so new kernels are covered without listing them here.
The element sizes of the graph's dtypes for the memory plan's offsets (every one a multiple
of its element size), on the test models and on hypothesis-generated plans; gcc's
`__alignof__` for the const arrays.
"""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, build_cortex_m, build_host,
                                      image_source, io_layout, parse, run_qemu, split_image_output)
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.export_c_checks import S16_MODELS, int8_samples, s16_samples
from helpers.int8_models import tflm
from helpers.int16_models import built16_models
from helpers.int16_models import tflm as tflm16
from helpers.oracles import TEST_MODELS, stream_frames, tflm_frames

import qconvert.c_export.model.memory_plan as memory_plan
from qconvert.c_export.model.memory_plan import ALIGN, PlanStep, plan_memory
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.formats.model_io import load_model

SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g",
            "-fno-omit-frame-pointer"]
# CMSIS-NN's own code (never changed here) left-shifts negative values, which C99 leaves
# undefined and gcc defines as arithmetic (arm_nnsupportfunctions.h:
# arm_nn_exp_on_negative_values, from arm_softmax_s8): that one check, shift-base, is off for
# CMSIS-NN's objects only
CMSIS_EXCLUDED = ["-fno-sanitize=shift-base"]
KERNELS = ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)]
# the streaming model of test_export_c_streaming.py, fed this many frames as one stream
STREAMING_MODEL = TEST_MODELS / "streaming_kws_int8.tflite"
STREAM_FRAMES = 20
# (model, calibration, options) quantized by qconvert: the 16x8 digits example of docs/commands/export-c.md, and
# the corpus models whose 16x8 / mixed exports the plan before 4-byte displacements put int16
# tensors at odd offsets (keras_resnet8: 7 and 2 tensors, kws_conv1d: 3; portable kernels)
QUANTIZED_16X8 = {
    "digits_int16": ("digits_cnn.tflite", "digits_calib_nhwc.npy", ["--activations", "int16"]),
    "digits_auto": ("digits_cnn.tflite", "digits_calib_nhwc.npy", ["--int16-layers", "auto"]),
    "digits_int16_1": ("digits_cnn.tflite", "digits_calib_nhwc.npy", ["--int16-layers", "1"]),
    "resnet8_int16": ("corpus/keras_resnet8.tflite", "corpus/keras_resnet8_calib.npy",
                      ["--activations", "int16"]),
    "resnet8_auto": ("corpus/keras_resnet8.tflite", "corpus/keras_resnet8_calib.npy",
                     ["--int16-layers", "auto"]),
    "kws_conv1d_int16": ("corpus/kws_conv1d.onnx", "corpus/kws_conv1d_calib.npy",
                         ["--activations", "int16"]),
}


@pytest.fixture(scope="module")
def quantized16(tmp_path_factory) -> dict:
    """{name: path}: the models of QUANTIZED_16X8 quantized by qconvert, 16x8 and mixed."""
    from click.testing import CliRunner
    from helpers.oracles import SAMPLE_MODELS

    from qconvert.cli.app import main

    folder = tmp_path_factory.mktemp("quantized16")
    out = {}
    for name, (model, calib, option) in QUANTIZED_16X8.items():
        out[name] = folder / f"{name}.tflite"
        data = (TEST_MODELS if "/" in calib else SAMPLE_MODELS) / calib
        result = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / model),
                                           "--calibration", str(data), *option, "-o",
                                           str(out[name])])
        assert result.exit_code == 0, result.output
    return out


def _every_model(models, quantized16, tmp_path) -> dict:
    """{C name: (path, samples, expected outputs per sample)} of every export-c test model."""
    out = {}
    for name, path in models.items():
        graph = load_model(path).graph
        samples = int8_samples(graph, name, 2)
        out[name] = (path, samples, [tflm(path.read_bytes(), s) for s in samples])
    built = built16_models(tmp_path / "built")
    for path in [*S16_MODELS, *quantized16.values(), *built]:
        graph = load_model(path).graph
        samples = built.get(path) or s16_samples(graph, 2)
        out[path.stem] = (path, samples, [tflm16(path.read_bytes(), s) for s in samples])
    graph = load_model(STREAMING_MODEL).graph
    from qconvert.c_export.model.steps import tensor_dims

    frames = stream_frames(list(tensor_dims(graph, graph.inputs[0])), np.int8, STREAM_FRAMES)
    # one stream: NAME_invoke frame after frame, one TFLite Micro interpreter likewise
    out["streaming_kws"] = (STREAMING_MODEL, [[f] for f in frames],
                            tflm_frames(STREAMING_MODEL.read_bytes(), frames,
                                        len(graph.outputs)))
    return out


def _image(models, quantized16, tmp_path, kernels) -> tuple:
    """(folder holding every test model's export, named m_<model>, image_source entries,
    {name: (graph, samples, TFLite Micro's outputs)})."""
    folder = tmp_path / "image"
    folder.mkdir()
    entries, expected = [], {}
    for stem, (path, samples, refs) in _every_model(models, quantized16, tmp_path).items():
        name = "m_" + re.sub(r"\W", "_", stem)
        files, _ = render_model(prepare_model(load_model(path)), ModelOptions(
            name=name, kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
        for f, data in files.items():  # kernel files are the same for every model
            if (folder / f).exists():
                assert (folder / f).read_bytes() == data, f
            else:
                (folder / f).write_bytes(data)
        graph = load_model(path).graph
        entries.append((name, io_layout(graph), samples))
        expected[name] = (graph, samples, refs)
    return folder, entries, expected


def _assert_image_output(text, expected, label) -> None:
    blocks = split_image_output(text)
    assert sorted(blocks) == sorted(expected)
    for name, (graph, samples, refs) in expected.items():
        got = parse(blocks[name], [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                    len(samples))
        for k, (outs, ref) in enumerate(zip(got, refs)):
            for j, (o, r) in enumerate(zip(outs, ref)):
                r = np.asarray(r).reshape(-1)
                assert np.array_equal(o.view(np.uint8), r.view(np.uint8)), (
                    f"{name} ({label}): sample {k} output {j}: "
                    f"{np.count_nonzero(o != r)} of {r.size} differ from TFLite Micro")


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_export_runs_clean_under_asan_and_ubsan(models, quantized16, tmp_path,
                                                      kernels):
    """Every export-c test model in one binary per kernel set, built with ASan + UBSan (gcc,
    strict C99, -O1; CMSIS-NN too): no sanitizer finding, and TFLite Micro's outputs."""
    folder, entries, expected = _image(models, quantized16, tmp_path, kernels)
    exe = build_host(folder, image_source(entries), defines=SANITIZE, cmsis=kernels == "cmsis-nn",
                     cmsis_extra=CMSIS_EXCLUDED)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    done = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0 and "runtime error" not in done.stderr \
        and "Sanitizer" not in done.stderr, done.stderr[-4000:]
    _assert_image_output(done.stdout, expected, f"{kernels}, ASan + UBSan")


def test_the_sanitizer_build_reports_a_misaligned_int16_load(tmp_path):
    """Must not pass silently: the same flags on a misaligned int16 load end the run with
    UBSan's "misaligned address" line and a non-zero status (an aligned one runs)."""
    (tmp_path / "main.c").write_text("\n".join([
        "#include <stdio.h>", "#include <stdint.h>",
        "static const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};",
        "int main(int argc, char **argv)", "{",
        "    const int16_t *p = (const int16_t *)(const void *)(bytes + 2 * (argc > 1));",
        "    (void)argv;",
        "    p = (const int16_t *)(const void *)((const uint8_t *)p + (argc > 2));",
        '    printf("%d\\n", *p);', "    return 0;", "}", ""]))
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c99", "-O1", *SANITIZE, str(tmp_path / "main.c"), "-o",
                    str(exe)], check=True)
    ok = subprocess.run([exe, "a"], capture_output=True, text=True, check=False)
    bad = subprocess.run([exe, "a", "b"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "runtime error" not in ok.stderr, ok.stderr
    assert bad.returncode != 0 and "misaligned address" in bad.stderr, bad.stderr


@NEEDS_CROSS
@pytest.mark.parametrize("kernels", KERNELS)
def test_every_export_runs_on_a_cortex_m_that_traps_unaligned_accesses(
        models, quantized16, tmp_path, kernels):
    """A Cortex-M0's rule on the emulated Cortex-M4 (mps2-an386): CCR.UNALIGN_TRP on, gcc
    -mno-unaligned-access, a HardFault handler that reports and exits 1 (QEMU's micro:bit,
    the one Cortex-M0 board, has 16 KB of RAM: too small for these models). Every test model,
    one firmware per kernel set: no fault, TFLite Micro's outputs."""
    folder, entries, expected = _image(models, quantized16, tmp_path, kernels)
    elf = build_cortex_m(folder, image_source(entries), "m4", cmsis=kernels == "cmsis-nn",
                         trap_unaligned=True)
    _assert_image_output(run_qemu(elf, "m4", timeout=600), expected, f"{kernels}, trapping m4")


@NEEDS_CROSS
def test_the_trapping_firmware_faults_on_a_misaligned_int16_load(tmp_path):
    """Must not pass silently: an int16 load from an odd address ends the run with the
    handler's line and status 1 (the trap works), the same load from an even one runs."""
    main_c = "\n".join([
        "#include <stdio.h>", "#include <stdint.h>",
        "static const uint8_t bytes[8] __attribute__((aligned(4))) = {1, 2, 3, 4, 5, 6, 7, 8};",
        "volatile int where = WHERE; /* unknown to the compiler: a real LDRH */",
        "static int load(const int16_t *p) __attribute__((noinline));",
        "static int load(const int16_t *p) { return *p; }",
        "int main(void)", "{",
        '    printf("value %d\\n", load((const int16_t *)(const void *)(bytes + where)));',
        "    return 0;", "}", ""])
    for where in (2, 1):
        folder = tmp_path / f"at{where}"
        folder.mkdir()
        elf = build_cortex_m(folder, main_c, "m4", defines=[f"-DWHERE={where}"],
                             trap_unaligned=True)
        done = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic",
                               "-semihosting", "-monitor", "none", "-serial", "none",
                               "-kernel", str(elf)], capture_output=True, text=True,
                              timeout=60, check=False)
        text = done.stdout + done.stderr
        if where == 2:
            assert done.returncode == 0 and "value 1027" in text, text  # 0x0403
        else:
            assert done.returncode == 1 and "HardFault" in text and "value" not in text, text


# -- alignment of the plan --------------------------------------------------------------------
def _recorded_plans(monkeypatch) -> list:
    """Every (plan, sizes) the planner checks from now on (op_order's candidates too)."""
    seen = []
    check = memory_plan._check

    def spy(plan, sizes, *args, **kwargs):
        seen.append((plan, dict(sizes)))
        return check(plan, sizes, *args, **kwargs)

    monkeypatch.setattr(memory_plan, "_check", spy)
    return seen


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_16x8_plan_puts_tensors_at_multiples_of_their_element_size(
        quantized16, tmp_path, monkeypatch, kernels):
    """int16 tensors at even offsets, int32 / float at multiples of 4 (a Cortex-M0 faults on
    a misaligned halfword or word), scratch at multiples of 4, on every 16x8 / mixed model and
    the streaming model (its state variables too)."""
    paths = [*S16_MODELS, *quantized16.values(), *built16_models(tmp_path / "built"),
             STREAMING_MODEL]
    for path in paths:
        seen = _recorded_plans(monkeypatch)
        model = load_model(path)
        files, _ = render_model(prepare_model(model), ModelOptions(
            name="net", kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
        graph = model.graph
        assert seen, path.stem
        for plan, sizes in seen:
            for name, offset in plan.offset.items():
                size = np.dtype(graph.tensors[name].dtype).itemsize if name in graph.tensors \
                    else 1
                assert offset % size == 0, (path.stem, name, offset, size)
            assert all(o % ALIGN == 0 for o in plan.scratch.values()), path.stem
        source = files["net.c"].decode()
        for offset in re.findall(r"state_s8 \+ (\d+)", source):
            assert int(offset) % ALIGN == 0, (path.stem, offset)


@st.composite
def _plans(draw):
    """A random chain-with-branches of steps over tensors of random element sizes, each step
    offering random overlaps (element-wise, by reads, by bands)."""
    n = draw(st.integers(2, 7))
    # the arena's element sizes: int8, int16, int32 / float (steps.DTYPES; no wider one)
    itemsize = {f"t{k}": draw(st.sampled_from([1, 2, 4])) for k in range(n + 1)}
    sizes = {t: itemsize[t] * draw(st.integers(1, 40)) for t in itemsize}
    steps = []
    for k in range(n):
        out = f"t{k + 1}"
        srcs = [f"t{k}"] + ([f"t{draw(st.integers(0, k))}"] if k and draw(st.booleans()) else [])
        srcs = list(dict.fromkeys(srcs))
        overlap = []
        kind = draw(st.sampled_from(["none", "same", "reads", "bands"]))
        x, y = sizes[srcs[0]], sizes[out]
        if kind == "same":
            overlap.append(("same", 0))
        elif kind == "reads":
            # output element i first reads about input byte i + shift (a depthwise layer's
            # output may start `shift` bytes before its input): any displacement, odd ones too
            shift = draw(st.integers(-12, 12))
            noise = np.array(draw(st.lists(st.integers(0, 3), min_size=y, max_size=y)))
            minread = np.maximum.accumulate(np.clip(np.arange(y) + shift + noise, 0, x - 1))
            overlap.append(("reads", 0, minread.astype(np.int64)))
        elif kind == "bands":
            bands = draw(st.integers(1, min(y, 5)))
            ends = np.array([y * (b + 1) // bands for b in range(bands)], np.int64)
            reads = np.array([x * b // bands for b in range(bands)], np.int64)
            overlap.append(("bands", 0, ends, reads, 1))
        steps.append(PlanStep(srcs, [out], overlap=overlap or None,
                              scratch=draw(st.sampled_from([0, 0, 3, 10]))))
    return sizes, itemsize, steps


@settings(max_examples=300, deadline=None)
@given(_plans())
def test_random_plans_keep_every_offset_a_multiple_of_its_element_size(case):
    sizes, itemsize, steps = case
    plan = plan_memory(sizes, steps, ["t0"], [f"t{len(steps)}"])
    for name, offset in plan.offset.items():
        assert offset % itemsize[name] == 0 and offset % ALIGN == 0, (name, offset)
    assert all(o % ALIGN == 0 for o in plan.scratch.values())
    # plan_memory ran its own _check; independently: two tensors alive together share bytes
    # only as an overlap the plan lists, at an aligned displacement
    root = {n: n for n in sizes}
    start, end = memory_plan._lifetimes(root, steps, ["t0"], [f"t{len(steps)}"])
    listed = {(x, y): d for _, x, y, d in plan.overlapped}
    assert all(d % ALIGN == 0 for d in listed.values()), listed
    names = sorted(sizes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            oa, ob = plan.offset[a], plan.offset[b]
            if start[a] <= end[b] and start[b] <= end[a] and oa < ob + sizes[b] \
                    and ob < oa + sizes[a]:
                assert listed.get((a, b)) == ob - oa or listed.get((b, a)) == oa - ob, (a, b)


def test_plan_check_refuses_a_misaligned_offset(monkeypatch):
    """Must not: a placement at an odd offset is an internal error, never written."""
    monkeypatch.setattr(memory_plan, "_lowest_free", lambda busy, size, best_fit=False:
                        1 + max([hi for _, hi in busy] + [0]))
    with pytest.raises(RuntimeError, match="misaligned"):
        plan_memory({"x": 8, "y": 8}, [PlanStep(["x"], ["y"])], ["x"], ["y"])


# -- alignment of the const arrays ------------------------------------------------------------
@pytest.mark.parametrize("kernels", KERNELS)
def test_const_arrays_keep_at_least_their_natural_alignment(tmp_path, kernels):
    """`aligned(4)` must not lower an int64 bias array or a struct holding pointers below its
    type's alignment (8 on a 64-bit host): gcc's own __alignof__ of every const array and
    struct of a 16x8 model with int64 biases, checked by static assertions in the C."""
    path = next(p for p in S16_MODELS if p.stem == "conv_16x8")
    files, _ = render_model(prepare_model(load_model(path)), ModelOptions(
        name="net", kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
    for f, data in files.items():
        (tmp_path / f).write_bytes(data)
    # and export-c-header's arrays of the same model
    from click.testing import CliRunner

    from qconvert.cli.app import main

    result = CliRunner().invoke(main, ["export-c-header", str(path), "-o",
                                       str(tmp_path / "w.h"), "--name", "w"])
    assert result.exit_code == 0, result.output
    from helpers.export_c_harness import CMSIS_NN

    flags = [f"-I{CMSIS_NN / 'Include'}"] if kernels == "cmsis-nn" else []
    for c_file, text in (("net.c", files["net.c"].decode()), ("w.c", (tmp_path / "w.h")
                                                            .read_text())):
        found = re.findall(r"^QCONVERT_\w+ static const (\w+) (\w+)(\[|\s*=)", text,
                           re.MULTILINE)
        assert any(t == "int64_t" for t, _, _ in found), f"{c_file}: no int64 bias"
        assert c_file != "net.c" or any(not t.endswith("_t") for t, _, _ in found)  # structs
        checks = [f'_Static_assert(__alignof__({name}) >= __alignof__({ctype}), "{name}");'
                  for ctype, name, _ in found]
        checks += [f'_Static_assert(__alignof__({name}) >= 4, "{name} 4");'
                   for ctype, name, _ in found if ctype in ("int8_t", "int16_t", "uint8_t")]
        (tmp_path / c_file).write_text(text + "\n" + "\n".join(checks) + "\n")
        done = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-c", *flags,
                               str(tmp_path / c_file), "-o", str(tmp_path / "x.o")],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
