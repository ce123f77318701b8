"""Oracles and readers shared by the C-header tests (`test_export_c_header`): the compiled header
read back through ctypes (`CHeader`), qconvert's FC kernel and the scalar C layer references run
on its arrays, TFLite Micro with every tensor an output, a loop transcription of design.md's 1x4
order, the raw flatbuffer read with the `tflite` package (`Flatbuffer`), and the clamps and SAME
pads as TFLite derives them."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import ClassVar

import numpy as np
from click.testing import CliRunner
from helpers.oracles import ROOT, random_inputs
from helpers.int8_models import tflm

from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.formats.model_io import load_model, serialize

KERNEL_DIR = ROOT / "qconvert" / "c_export" / "kernels"
C_TESTS = Path(__file__).resolve().parents[1] / "c"
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
INT8_MODELS = ["ad01_int8.tflite", "kws_ref_model.tflite", "pretrainedResnet_quant.tflite"]
LAYER_OPS = ("Conv2D", "DepthwiseConv2D", "FullyConnected")


def invoke_header_cli(args):
    """Run `qconvert export-c-header ARGS` in-process; the click result."""
    return CliRunner().invoke(main, ["export-c-header"] + [str(a) for a in args])


def export_header(tmp_path, model, *args, name="model_weights.h"):
    """Export MODEL's header into tmp_path (must succeed); its path."""
    out = tmp_path / name
    result = invoke_header_cli([model, "-o", out, *args])
    assert result.exit_code == 0, result.output
    return out


def run_gcc(args, cwd=None):
    """Run the host gcc with ARGS (must succeed); the completed process."""
    gcc = shutil.which("gcc")
    assert gcc, "gcc is needed"
    done = subprocess.run([gcc, *args], capture_output=True, text=True, cwd=cwd, check=False)
    assert done.returncode == 0, done.stderr
    return done


# -- the compiled header, read back through ctypes ------------------------------------------
_ARRAY = re.compile(r"static const (int8_t|int32_t) (\w+)\[(\w+)\] = \{")
_DEFINE = re.compile(r"^#define (\w+)[ \t]+(\S.*)$", re.MULTILINE)
_FLOAT = re.compile(r"^\(?-?[0-9.]+(e-?[0-9]+)?f\)?$")
_NP = {"int8_t": np.int8, "int32_t": np.int32}


class CHeader:
    """A generated header compiled (with the kernel and the C references) into a library:
    `ints`, `floats`, `shapes` hold every macro's value, `arrays` every array (copied out),
    `address` every array's address, `align` its declared alignment."""

    def __init__(self, header: Path, build: Path, defines=()):
        text = header.read_text()
        prefix = re.search(r"^#ifndef (\w+)_WEIGHTS_H$", text, re.MULTILINE).group(1)
        macros = [(n, v) for n, v in _DEFINE.findall(text) if n.startswith(prefix + "_")]
        ints = [n for n, v in macros if not v.startswith("{") and not _FLOAT.match(v)]
        floats = [n for n, v in macros if _FLOAT.match(v)]
        shapes = [n for n, v in macros if v.startswith("{")]
        arrays = _ARRAY.findall(text)
        src = [f'#include "{header.name}"', "#include <stdint.h>",
               "const int64_t qc_ints[] = {" + ", ".join(f"(int64_t)({n})" for n in ints)
               + ", 0};",
               "const double qc_floats[] = {" + ", ".join(floats + ["0"]) + "};"]
        src += [f"const int32_t qc_shape_{i}[] = {n};" for i, n in enumerate(shapes)]
        src += ["const int32_t *const qc_shapes[] = {"
                + ", ".join([f"qc_shape_{i}" for i in range(len(shapes))] + ["0"]) + "};",
                "const void *const qc_arrays[] = {"
                + ", ".join([n for _, n, _ in arrays] + ["0"]) + "};",
                "const int32_t qc_align[] = {"
                + ", ".join([f"(int32_t)__alignof__({n})" for _, n, _ in arrays] + ["0"])
                + "};"]
        (build / "accessor.c").write_text("\n".join(src) + "\n")
        lib = build / "header.so"
        run_gcc([*CFLAGS, "-O1", "-shared", "-fPIC", *defines, f"-I{header.parent}",
              f"-I{KERNEL_DIR}", f"-I{C_TESTS}", str(build / "accessor.c"),
              str(KERNEL_DIR / "qconvert_fc_1x4.c"), str(C_TESTS / "layer_reference.c"),
              "-o", str(lib), "-lm"])
        self.lib = ctypes.CDLL(str(lib))
        self.text = text
        iv = (ctypes.c_int64 * (len(ints) + 1)).in_dll(self.lib, "qc_ints")
        self.ints = {n: int(iv[i]) for i, n in enumerate(ints)}
        fv = (ctypes.c_double * (len(floats) + 1)).in_dll(self.lib, "qc_floats")
        self.floats = {n: float(fv[i]) for i, n in enumerate(floats)}
        sp = (ctypes.c_void_p * (len(shapes) + 1)).in_dll(self.lib, "qc_shapes")
        self.shapes = {}
        for i, n in enumerate(shapes):
            rank = self.ints[n[:-len("_SHAPE")] + "_RANK"]
            self.shapes[n] = tuple(np.ctypeslib.as_array(
                ctypes.cast(sp[i], ctypes.POINTER(ctypes.c_int32)), (rank,)).tolist())
        ap = (ctypes.c_void_p * (len(arrays) + 1)).in_dll(self.lib, "qc_arrays")
        al = (ctypes.c_int32 * (len(arrays) + 1)).in_dll(self.lib, "qc_align")
        self.arrays, self.address, self.align = {}, {}, {}
        for i, (ctype, n, length) in enumerate(arrays):
            count = self.ints[length]
            ptype = ctypes.POINTER(ctypes.c_int8 if ctype == "int8_t" else ctypes.c_int32)
            self.address[n] = ap[i]
            self.align[n] = al[i]
            self.arrays[n] = np.ctypeslib.as_array(ctypes.cast(ap[i], ptype), (count,)).copy()
        self.layers = {v: n[:-len("_OP_INDEX")] for n, v in self.ints.items()
                       if n.endswith("_OP_INDEX")}

    def int(self, stem, suffix):
        return self.ints[f"{stem}_{suffix}"]

    def array(self, stem, suffix):
        return self.arrays[f"{stem}_{suffix}".lower()]

    def pointer(self, stem, suffix):
        name = f"{stem}_{suffix}".lower()
        return ctypes.c_void_p(self.address[name]) if name in self.address else None


def compile_header(header: Path, tmp_path: Path, defines=()) -> CHeader:
    """Compile HEADER into a shared library under tmp_path, read back as a CHeader."""
    build = tmp_path / f"build_{header.stem}{'_'.join(defines)}"
    build.mkdir()
    return CHeader(header, build, defines)


class FcQuant(ctypes.Structure):
    """ctypes mirror of qconvert_fc_quant (qconvert_fc_1x4.h)."""

    _fields_ = [("input_offset", ctypes.c_int32), ("weights_offset", ctypes.c_int32),
                ("output_offset", ctypes.c_int32), ("activation_min", ctypes.c_int32),
                ("activation_max", ctypes.c_int32), ("multiplier", ctypes.c_void_p),
                ("shift", ctypes.c_void_p), ("per_channel", ctypes.c_int)]


def c_pointer(a: np.ndarray):
    """A ctypes void pointer to the data of array A."""
    return a.ctypes.data_as(ctypes.c_void_p)


def run_fc_kernel(h: CHeader, stem: str, x: np.ndarray) -> np.ndarray:
    """qconvert_fc_1x4_s8 on the header's arrays for the layer `stem`; x holds whole inputs."""
    depth, rows = h.int(stem, "ACCUM_DEPTH"), h.int(stem, "OUTPUT_DEPTH")
    x = np.ascontiguousarray(x, dtype=np.int8).reshape(-1)
    batches = x.size // depth
    out = np.zeros(batches * rows, np.int8)
    quant = FcQuant(h.int(stem, "INPUT_OFFSET"), h.int(stem, "WEIGHTS_OFFSET"),
                    h.int(stem, "OUTPUT_OFFSET"), h.int(stem, "ACTIVATION_MIN"),
                    h.int(stem, "ACTIVATION_MAX"), h.pointer(stem, "multiplier"),
                    h.pointer(stem, "shift"), h.int(stem, "PER_CHANNEL"))
    h.lib.qconvert_fc_1x4_s8(c_pointer(x), h.pointer(stem, "weights"), h.pointer(stem, "bias"),
                             c_pointer(out), ctypes.c_int32(batches), ctypes.c_int32(depth),
                             ctypes.c_int32(rows), ctypes.byref(quant))
    return out.reshape(batches, rows)


def run_reference(h: CHeader, stem: str, op: str, x: np.ndarray, single=False) -> np.ndarray:
    """tests/c/layer_reference.c on the header's numbers for one conv / depthwise / FC layer
    (FC weights must be row-major: a --fc-layout rowmajor header)."""
    names = ["BATCHES", "IN_H", "IN_W", "IN_C", "OUT_H", "OUT_W", "OUT_C", "KERNEL_H", "KERNEL_W",
             "STRIDE_H", "STRIDE_W", "DILATION_H", "DILATION_W", "PAD_TOP", "PAD_LEFT",
             "INPUT_OFFSET", "OUTPUT_OFFSET", "ACT_MIN", "ACT_MAX", "PER_CHANNEL", "SINGLE",
             "WEIGHTS_OFFSET"]
    assert h.lib.ref_geometry_count() == len(names)
    g = dict.fromkeys(names, 0)
    g.update(INPUT_OFFSET=h.int(stem, "INPUT_OFFSET"), OUTPUT_OFFSET=h.int(stem, "OUTPUT_OFFSET"),
             ACT_MIN=h.int(stem, "ACTIVATION_MIN"), ACT_MAX=h.int(stem, "ACTIVATION_MAX"),
             PER_CHANNEL=h.int(stem, "PER_CHANNEL"), SINGLE=int(single))
    if op == "FullyConnected":
        assert h.int(stem, "WEIGHTS_1X4") == 0
        g.update(IN_C=h.int(stem, "ACCUM_DEPTH"), OUT_C=h.int(stem, "OUTPUT_DEPTH"),
                 WEIGHTS_OFFSET=h.int(stem, "WEIGHTS_OFFSET"))
        g["BATCHES"] = x.size // g["IN_C"]
        out_size = g["BATCHES"] * g["OUT_C"]
        fn = h.lib.ref_fully_connected
    else:
        for key, suffix in (("IN_H", "INPUT_H"), ("IN_W", "INPUT_W"), ("IN_C", "INPUT_C"),
                            ("OUT_H", "OUTPUT_H"), ("OUT_W", "OUTPUT_W"), ("OUT_C", "OUTPUT_C"),
                            ("KERNEL_H", "KERNEL_H"), ("KERNEL_W", "KERNEL_W"),
                            ("STRIDE_H", "STRIDE_H"), ("STRIDE_W", "STRIDE_W"),
                            ("DILATION_H", "DILATION_H"), ("DILATION_W", "DILATION_W"),
                            ("PAD_TOP", "PAD_TOP"), ("PAD_LEFT", "PAD_LEFT")):
            g[key] = h.int(stem, suffix)
        g["BATCHES"] = x.size // (g["IN_H"] * g["IN_W"] * g["IN_C"])
        out_size = g["BATCHES"] * g["OUT_H"] * g["OUT_W"] * g["OUT_C"]
        fn = h.lib.ref_conv if op == "Conv2D" else h.lib.ref_depthwise
    geometry = np.asarray([g[n] for n in names], np.int32)
    x = np.ascontiguousarray(x, dtype=np.int8)
    out = np.zeros(out_size, np.int8)
    fn(c_pointer(x), h.pointer(stem, "weights"), h.pointer(stem, "bias"),
       h.pointer(stem, "multiplier"), h.pointer(stem, "shift"), c_pointer(geometry), c_pointer(out))
    return out


# -- oracles --------------------------------------------------------------------------------
def tflm_every_tensor(model_path: Path, seeds=(0, 1)) -> list:
    """[{tensor name: array}] per seed: TFLite Micro's value of every graph input and every
    tensor a node produces (all made graph outputs), for random int8 inputs."""
    model = load_model(model_path)
    g = model.graph
    g.outputs = [o for n in g.nodes for o in n.outputs]
    data = serialize(model)
    runs = []
    for seed in seeds:
        feeds = random_feeds(g, 1, seed)[0]
        values = dict(feeds)
        values.update(zip(g.outputs, tflm(data, [feeds[n] for n in g.inputs])))
        runs.append(values)
    return runs


def random_feeds(graph, count, seed) -> list:
    """`count` feeds of random int8 inputs (a dynamic batch dimension taken as 1)."""
    details = [(graph.tensors[n].shape, graph.tensors[n].dtype) for n in graph.inputs]
    return [dict(zip(graph.inputs, random_inputs(details, seed * 100 + k)))
            for k in range(count)]


def observed(graph, feeds, rounding="double") -> dict:
    seen = {}
    run_int8(graph, feeds, rounding=rounding, observe=lambda n, a: seen.__setitem__(n, a))
    return seen


def design_md_1x4(w: np.ndarray) -> np.ndarray:
    """The 1x4 order written out as design.md's pseudocode, loop for loop."""
    rows, cols = w.shape
    r4, c4 = rows - rows % 4, cols - cols % 4
    out = []
    for rb in range(0, r4, 4):
        for cb in range(0, c4, 4):
            for ca, cb2 in ((cb, cb + 2), (cb + 1, cb + 3)):
                for ra, rb2 in ((rb, rb + 1), (rb + 2, rb + 3)):
                    out += [w[ra][ca], w[rb2][ca], w[ra][cb2], w[rb2][cb2]]
        for c in range(c4, cols):
            out += [w[rb][c], w[rb + 1][c], w[rb + 2][c], w[rb + 3][c]]
    for r in range(r4, rows):
        out += list(w[r])
    return np.asarray(out, dtype=w.dtype).reshape(-1)


class Flatbuffer:
    """The raw model, read with the `tflite` package (not qconvert's reader)."""

    CODES: ClassVar[dict] = {3: "Conv2D", 4: "DepthwiseConv2D", 9: "FullyConnected"}
    OPTIONS: ClassVar[dict] = {"Conv2D": "Conv2DOptions",
                               "DepthwiseConv2D": "DepthwiseConv2DOptions",
                               "FullyConnected": "FullyConnectedOptions"}

    def __init__(self, path: Path):
        import tflite

        self.tflite = tflite
        self.buf = path.read_bytes()
        self.model = tflite.Model.GetRootAsModel(self.buf, 0)
        self.sub = self.model.Subgraphs(0)

    def ops(self):
        """(operator index, op name, operator) of every conv / depthwise / FC operator."""
        for i in range(self.sub.OperatorsLength()):
            op = self.sub.Operators(i)
            code = self.model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            if builtin in self.CODES:
                yield i, self.CODES[builtin], op

    def tensor(self, op, slot, output=False):
        t = self.sub.Tensors(op.Outputs(slot) if output else op.Inputs(slot))
        q = t.Quantization()
        data = self.model.Buffers(t.Buffer()).DataAsNumpy()
        return {"shape": tuple(int(d) for d in t.ShapeAsNumpy()),
                "scale": q.ScaleAsNumpy().astype(np.float32),
                "zero_point": q.ZeroPointAsNumpy().astype(np.int64),
                "bytes": None if isinstance(data, int) else np.asarray(data, np.uint8)}

    def options(self, op, name):
        table = op.BuiltinOptions()
        opt = getattr(self.tflite, self.OPTIONS[name])()
        opt.Init(table.Bytes, table.Pos)
        return opt


def _round_half_away(x) -> int:
    return int(Decimal(float(x)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def expected_clamps(activation: int, s_out, z_out) -> tuple:
    """TFLite's fused-activation clamps, from the ActivationFunctionType code (NONE 0, RELU 1,
    RELU_N1_TO_1 2, RELU6 3), with the float32 division of TFLite's Quantize()."""
    def q(limit):
        return z_out + _round_half_away(np.float32(limit) / np.float32(s_out))

    lo, hi = {0: (None, None), 1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}[activation]
    return (-128 if lo is None else max(-128, q(lo)), 127 if hi is None else min(127, q(hi)))


def tflite_same_pads(size, kernel, stride, dilation):
    """(before, after) of TFLite's SAME padding along one axis."""
    out = -(-size // stride)
    eff = (kernel - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2
