"""Run a qconvert command on a corpus model and judge the result with an independent oracle.

Every (model, command) cell ends in one of three states:

- ``ok``: the command exited 0 and its output passed the oracle: float outputs within
  `TOLERANCE` of the source model's (onnxruntime with graph optimizations off, LiteRT with the
  reference kernels; a stateful model frame by frame on one interpreter, every tensor the two
  models share compared), int8 outputs equal bit for bit between the TFLite Micro interpreter
  and qconvert's integer executor (a stateful model: LiteRT's reference kernels, frame by
  frame; one with LSTM state: qconvert's integer executor, calls in a row with the state
  carried) with an output SQNR against the float model of at least `SQNR_FLOOR_DB`, a C header
  that gcc compiles with
  ``-Wall -Wextra -Werror -pedantic``, an inspect table with one row per operator of the model;
  and every ONNX / TFLite file written has unique node names, each value defined once and unique
  tensor names, an ONNX one passing `onnx.checker` with full_check (`_check_names`);
- ``refused``: exit status 1, exactly one stderr line ``qconvert: error: <model>: <cause>``, no
  traceback, nothing written, and the cause names ops or tensors that are in the model (every
  quoted name exists in it; every op type it names is one of the model's);
- ``FAIL``: anything else (a crash, a wrong output, a refusal that names nothing of the model);
  the test suite fails on it.

The commands run in-process through click's test runner, convert / fuse / quantize with
qconvert's own `--verify`, models with fixed shapes in the manifest with `--input-shape`;
results are cached per (model, command), so the test suite and `bench/model_coverage.py` each
run every cell once. The oracles, settings and model readers live in `oracles`, the refusal
checks and the coverage table of docs/results/coverage.md in `refusals` (both re-exported here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from helpers.written_names import onnx_name_problems, tflite_name_problems

from .manifest import BY_NAME, CorpusModel
from .oracles import (CFLAGS, SQNR_FLOOR_DB, TOLERANCE, VERIFY_SAMPLES, Cell,  # noqa: F401
                      _align, _by_name, _compare_float, _Fail, _fit, densify_count, dynamic_batch,
                      model_ops,
                      onnx_output_names, oracle_feeds, quantize, run_cli, run_litert,
                      run_litert_tensors, run_onnxruntime, run_tflm, sqnr_db, tflite_io,
                      tflite_ops)
from .refusals import (check_refusal_names, coverage_markdown, named_ops,  # noqa: F401
                       parse_coverage_markdown, summarize_refusal)


def _check_names(outputs: list) -> None:
    """Every written ONNX / TFLite model has unique node, value and tensor names and passes
    `onnx.checker` with full_check (`helpers.written_names`; the cell's oracle runs it)."""
    for p in outputs:
        if p.suffix == ".onnx":
            problems = onnx_name_problems(p.read_bytes(), run=False)
        elif p.suffix == ".tflite":
            problems = tflite_name_problems(p.read_bytes(), load=False)
        else:
            continue
        if problems:
            raise _Fail(f"{p.name}: {'; '.join(problems)}")


# -- the cells ------------------------------------------------------------------------------------
class CorpusRunner:
    """Runs and caches the cells; `workdir` receives every output."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._cells: dict = {}
        self._float: dict = {}
        self.stdout: dict = {}  # (model, command) -> what the command printed
        # model -> (int8 model, graph, input samples, TFLite Micro outputs) of export-c cells
        self.export_c_models: dict = {}

    def cell(self, model_name: str, command: str) -> Cell:
        key = (model_name, command)
        if key not in self._cells:
            model = BY_NAME[model_name]
            start = time.perf_counter()
            try:
                status, detail = getattr(self, "_" + command.replace("-", "_"))(model)
            except _Fail as exc:
                status, detail = "FAIL", str(exc)
            except Exception as exc:  # a runtime rejects qconvert's output
                status, detail = "FAIL", f"oracle could not run the output: {exc}"[:300]
            if status == "refused" and model.format == "onnx" and command in (
                    "quantize", "export-c-header", "export-c"):
                status, detail = self._names_what_conversion_refuses(model, command, detail)
            self._cells[key] = Cell(model_name, command, status, detail,
                                    time.perf_counter() - start)
        return self._cells[key]

    def _names_what_conversion_refuses(self, model: CorpusModel, command: str, cause: str):
        """`quantize` to TFLite and `export-c-header` of an ONNX model run the ONNX -> TFLite
        conversion: their refusal must name every op that conversion refuses."""
        conversion = self.cell(model.name, "to-tflite")
        if conversion.status != "refused":
            return "refused", cause
        missing = named_ops(model, conversion.detail) - named_ops(model, cause)
        if missing:
            return "FAIL", (f"refusal omits {sorted(missing)}, which the ONNX -> TFLite "
                            f"conversion it runs refuses: {cause[:200]}")
        return "refused", cause

    # -- shared steps
    def _out(self, model: CorpusModel, command: str, ext: str) -> Path:
        d = self.workdir / model.name
        d.mkdir(exist_ok=True)
        return d / f"{command}.{ext}"

    def _invoke(self, model: CorpusModel, command: str, args: list, outputs: list):
        """Run the command; returns (None, stdout) on exit 0, or the (status, detail) of a
        refusal (or a failure) when it did not succeed."""
        for p in outputs:
            if p.exists():
                p.unlink()
        code, out, err, crash = run_cli(args)
        self.stdout[(model.name, command)] = out
        if crash is not None:
            raise _Fail(f"crashed: {crash.strip().splitlines()[-1]}")
        if code == 0:
            missing = [p.name for p in outputs if not p.exists()]
            if missing:
                raise _Fail(f"exit 0 but wrote no {', '.join(missing)}")
            _check_names(outputs)
            return None, out
        return self._refusal(model, code, err, outputs), out

    def _refusal(self, model: CorpusModel, code: int, err: str, outputs: list) -> tuple:
        lines = [ln for ln in err.splitlines()
                 if ln.strip() and not ln.startswith("qconvert: warning:")]
        if code != 1:
            raise _Fail(f"exit status {code}: {err.strip()[:200]}")
        if len(lines) != 1 or "Traceback" in err:
            raise _Fail(f"refusal is not one line: {err.strip()[:300]}")
        prefix = f"qconvert: error: {model.path}: "
        if not lines[0].startswith(prefix):
            raise _Fail(f"refusal does not start with {prefix!r}: {lines[0][:200]}")
        written = [p.name for p in outputs if p.exists()]
        if written:
            raise _Fail(f"refused but wrote {', '.join(written)}")
        cause = lines[0][len(prefix):]
        check_refusal_names(model, cause)
        return "refused", cause

    def _float_reference(self, model: CorpusModel, batch2: bool = False) -> tuple:
        """(feeds, outputs per feed, output names) of the source model in its own oracle
        runtime (int8 sources: quantized feeds, TFLite Micro); `batch2` adds a feed of two
        samples for an ONNX model with a dynamic batch (outputs that keep it)."""
        batch2 = batch2 and dynamic_batch(model) and not model.shapes
        key = (model.name, batch2)
        if key not in self._float:
            feeds = oracle_feeds(model, batch2)
            if model.format == "onnx":
                outs, names = run_onnxruntime(model.path, feeds), onnx_output_names(model.path)
            elif model.precision == "int8":
                feeds = self._quantized_feeds(model.path, feeds)
                outs, names = run_tflm(model.path, feeds), None
            else:
                outs, names = run_litert(model.path, feeds)
            self._float[key] = (feeds, outs, names)
        return self._float[key]

    @staticmethod
    def _quantized_feeds(path: Path, feeds: list) -> list:
        ins, _ = tflite_io(path)
        out = []
        for feed in feeds:
            row = []
            for d, a in zip(ins, feed):
                a = _fit(a, d["shape"])
                if d["dtype"] != np.float32:
                    a = quantize(a, *d["quantization"], d["dtype"])
                row.append(a)
            out.append(row)
        return out

    @staticmethod
    def _verify_args() -> list:
        """qconvert's own check of what it writes (`--verify N`: convert, fuse, quantize)."""
        return ["--verify", str(VERIFY_SAMPLES)]

    @staticmethod
    def _shape_args(model: CorpusModel, command: str) -> list:
        """`--input-shape NAME:d0,...` for a model whose manifest fixes its dynamic dims."""
        if not model.shapes:
            return []
        out = []
        for name, shape in model.shapes.items():
            out += ["--input-shape", f"{name}:{','.join(str(d) for d in shape)}"]
        return out

    def _same_format_check(self, model: CorpusModel, path: Path, where: str) -> str:
        feeds, want, names = self._float_reference(model, batch2=True)
        if model.format == "onnx":
            got = _by_name(run_onnxruntime(path, feeds), onnx_output_names(path), names)
            err = _compare_float(want, got, where + " (onnxruntime)")
            batch = ", batch 1 and 2" if any(len(f[0]) == 2 for f in feeds) else ""
            return f"max rel err {err:.1e} (onnxruntime{batch})"
        if model.precision == "int8":
            got = run_tflm(path, feeds)
            for w, g in zip(want, got):
                if len(w) != len(g) or any(not np.array_equal(a, b) for a, b in zip(w, g)):
                    raise _Fail(f"{where}: int8 outputs differ from the source's (TFLite Micro)")
            if not model.frames:
                return "bit-exact (TFLite Micro)"
            shared = self._compare_state(model, path, feeds, where)
            return (f"bit-exact (TFLite Micro, {len(feeds)} frames; {shared} shared tensors "
                    "equal per frame in LiteRT)")
        got, got_names = run_litert(path, feeds)
        err = _compare_float(want, _by_name(got, got_names, names), where + " (LiteRT)")
        if not model.frames:
            return f"max rel err {err:.1e} (LiteRT)"
        shared = self._compare_state(model, path, feeds, where)
        return (f"max rel err {err:.1e} (LiteRT, {len(feeds)} frames, {shared} shared tensors "
                "compared per frame)")

    @staticmethod
    def _compare_state(model: CorpusModel, path: Path, feeds: list, where: str) -> int:
        """Every tensor the source and `path` share by name, frame by frame: float ones within
        `TOLERANCE`, integer ones equal; returns how many were compared."""
        want = run_litert_tensors(model.path, feeds)
        got = run_litert_tensors(path, feeds)
        names = sorted(set(want[0]) & set(got[0]))
        if not names:
            raise _Fail(f"{where}: no tensor in common with the source to compare state")
        for name in names:
            if want[0][name].dtype.kind == "f":
                _compare_float([[w[name]] for w in want], [[g[name]] for g in got],
                               f"{where}: tensor {name!r}")
            elif not all(np.array_equal(w[name], g[name]) for w, g in zip(want, got)):
                raise _Fail(f"{where}: tensor {name!r} differs from the source's in LiteRT")
        return len(names)

    # -- commands
    def _inspect(self, model: CorpusModel):
        import json

        refused, out = self._invoke(model, "inspect", ["inspect", model.path, "--json"], [])
        if refused:
            return refused
        report = json.loads(out)
        _, _, count = model_ops(model)
        layers = len(report["layers"])
        if model.format == "onnx":  # Constant nodes are values, not layers
            import onnx

            g = onnx.load(str(model.path), load_external_data=False).graph
            count -= sum(n.op_type == "Constant" for n in g.node)
        else:  # a DENSIFY of a sparse constant is a constant once read (densified on read)
            count -= densify_count(model.path)
        if layers != count:
            raise _Fail(f"inspect lists {layers} layers, the model has {count} operators")
        macs = sum(int(r.get("macs") or 0) for r in report["layers"])
        return "ok", f"{layers} layers, {macs / 1e6:.2f}M MACs"

    def _convert(self, model: CorpusModel):
        ext = "onnx" if model.format == "onnx" else "tflite"
        out = self._out(model, "convert", ext)
        refused, _ = self._invoke(model, "convert", ["convert", model.path, "-o", out,
                                                     *self._verify_args(),
                                                     *self._shape_args(model, "convert")], [out])
        return refused or ("ok", self._same_format_check(model, out, "convert"))

    def _fuse(self, model: CorpusModel):
        ext = "onnx" if model.format == "onnx" else "tflite"
        out = self._out(model, "fuse", ext)
        refused, stdout = self._invoke(model, "fuse", ["fuse", model.path, "-o", out,
                                                       *self._verify_args(),
                                                       *self._shape_args(model, "fuse")], [out])
        if refused:
            return refused
        nodes = re.search(r"nodes: (\d+) -> (\d+)", stdout)
        figure = self._same_format_check(model, out, "fuse")
        return "ok", (f"{nodes.group(1)} -> {nodes.group(2)} nodes, " if nodes else "") + figure

    def _to_tflite(self, model: CorpusModel):
        out = self._out(model, "to-tflite", "tflite")
        refused, stdout = self._invoke(model, "to-tflite", [
            "convert", model.path, "-o", out, *self._verify_args(),
            *self._shape_args(model, "convert")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model)
        tfeeds = self._to_tflite_layout(feeds, stdout)
        want = self._outputs_to_tflite_layout(want, names, stdout)
        got, got_names = run_litert(out, tfeeds)
        err = _compare_float(want, _by_name(got, got_names, names), "ONNX -> TFLite (LiteRT)")
        return "ok", f"max rel err {err:.1e} (LiteRT vs onnxruntime)"

    @staticmethod
    def _to_tflite_layout(feeds: list, stdout: str) -> list:
        """Feeds permuted as the conversion printed (`transpose ONNX data by (0, 2, 3, 1)`),
        one permutation per input in order; inputs without one stay as they are."""
        perms = []
        for line in stdout.splitlines():
            if line.startswith("input '"):
                m = re.search(r"transpose ONNX data by \(([\d, ]+)\)", line)
                perms.append(tuple(int(v) for v in m.group(1).split(",")) if m else None)
        out = []
        for feed in feeds:
            out.append([np.ascontiguousarray(np.transpose(a, perms[i]))
                        if i < len(perms) and perms[i] else a for i, a in enumerate(feed)])
        return out

    @staticmethod
    def _outputs_to_tflite_layout(outputs: list, names: list, stdout: str) -> list:
        """The ONNX model's outputs in the layout the conversion printed for each
        (`output 'p1': NHWC [...]`: channels moved last)."""
        nhwc = set(re.findall(r"^output '(.*)': NHWC", stdout, re.MULTILINE))
        return [[np.transpose(o, (0, *range(2, o.ndim), 1)) if n in nhwc else o
                 for o, n in zip(feed, names)] for feed in outputs]

    def _quantize(self, model: CorpusModel):
        out = self._out(model, "quantize", "tflite")
        refused, stdout = self._invoke(
            model, "quantize", ["quantize", model.path, *model.calibration_args,
                                "-o", out, *self._verify_args(),
                                *self._shape_args(model, "quantize")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model)
        if model.format == "onnx":
            feeds = self._to_tflite_layout(feeds, stdout)
            want = self._outputs_to_tflite_layout(want, names, stdout)
        qfeeds = self._quantized_feeds(out, feeds)
        tflm = run_tflm(out, qfeeds)
        lstm = "UNIDIRECTIONAL_SEQUENCE_LSTM" in tflite_ops(out)[0]
        if model.frames and not lstm:  # resource variables: LiteRT's reference kernels carry
            ref_int8, _ = run_litert(out, qfeeds)  # them frame by frame as TFLite Micro does
            exact, label, judged = ref_int8, "LiteRT reference", tflm
        else:
            # no state, or LSTM state (LiteRT's integer LSTM is another arithmetic):
            # qconvert's integer executor, on a stateful model as a stream carrying the LSTM
            # state from call to call as TFLite Micro's one interpreter does (run_tflm)
            from qconvert.executor.int_executor import run_int8
            from qconvert.formats.model_io import load_model

            graph = load_model(out).graph
            carry = {} if model.frames else None
            exact = []
            for feed in qfeeds:
                res = run_int8(graph, dict(zip(graph.inputs, feed)), carry=carry)
                exact.append([res[name] for name in graph.outputs])
            label = "qconvert's integer executor"
            judged = tflm
        for t, e in zip(judged, exact):
            if len(t) != len(e) or any(not np.array_equal(a, np.asarray(b).reshape(a.shape))
                                       for a, b in zip(t, e)):
                raise _Fail(f"int8 model: TFLite Micro and {label} differ")
        _, outs = tflite_io(out)
        deq = [[(o.astype(np.float64) - d["quantization"][1]) * d["quantization"][0]
                if o.dtype != np.float32 else o for o, d in zip(f, outs)] for f in tflm]
        deq = _by_name(deq, [d["name"] for d in outs], names)
        sq = self._sqnr(want, deq, "int8 TFLite")
        if model.frames and lstm:
            return "ok", (f"bit-exact TFLM (calls in a row, state carried), SQNR {sq:.1f} dB")
        return "ok", f"bit-exact TFLM, SQNR {sq:.1f} dB"

    def _sqnr(self, want: list, got: list, where: str) -> float:
        """Output SQNR over the calibration samples (the last feed, random, is left out: a
        trained model's output on noise says nothing of its quantization)."""
        want, got = want[:-1], got[:-1]
        ref = np.concatenate([_align(np.asarray(w), np.asarray(g), where).ravel()
                              for wf, gf in zip(want, got) for w, g in zip(wf, gf)])
        val = np.concatenate([np.asarray(g).ravel() for gf in got for g in gf])
        sq = sqnr_db(ref, val)
        if not sq >= SQNR_FLOOR_DB:
            raise _Fail(f"{where}: output SQNR {sq:.1f} dB is below the floor of "
                        f"{SQNR_FLOOR_DB} dB")
        return sq

    def _quantize_qdq(self, model: CorpusModel):
        out = self._out(model, "quantize-qdq", "onnx")
        refused, _ = self._invoke(
            model, "quantize-qdq", ["quantize", model.path, *model.calibration_args,
                                    "-o", out, *self._verify_args(),
                                    *self._shape_args(model, "quantize")], [out])
        if refused:
            return refused
        feeds, want, names = self._float_reference(model, batch2=True)
        got = _by_name(run_onnxruntime(out, feeds), onnx_output_names(out), names)
        sq = self._sqnr(want, got, "QDQ ONNX")
        return "ok", f"SQNR {sq:.1f} dB (onnxruntime)"

    def _export_c(self, model: CorpusModel):
        from .export_c_cell import export_c_cell

        def fail(message):
            raise _Fail(message)

        return export_c_cell(self, model, fail)

    def _export_c_header(self, model: CorpusModel):
        out = self._out(model, "export-c-header", "h")
        args = ["export-c-header", model.path, "-o", out, "--name", "corpus"]
        if model.precision == "float":
            args += model.calibration_args
        args += self._shape_args(model, "export-c-header")
        refused, stdout = self._invoke(model, "export-c-header", args, [out])
        if refused:
            return refused
        gcc = shutil.which("gcc")
        if gcc is None:
            raise _Fail("gcc is needed to check the header")
        src = out.with_name("include_header.c")
        src.write_text(f'#include "{out.name}"\nint corpus_main(void) {{ return 0; }}\n')
        done = subprocess.run([gcc, *CFLAGS, "-c", src.name, "-o", os.devnull], cwd=out.parent,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise _Fail(f"gcc rejects the header: {done.stderr.strip()[:300]}")
        layers = re.search(r"\((\d+) layers, (\d+) bytes\)", stdout)
        return "ok", (f"{layers.group(1)} layers, {int(layers.group(2)) // 1024} kB, "
                      if layers else "") + "gcc -Wall -Wextra -Werror ok"
