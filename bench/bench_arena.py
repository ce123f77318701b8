"""`export-c`'s static arena against TensorFlow Lite Micro's, per model and kernel set.

    python bench/bench_arena.py [--cache DIR] [--models a,b] [--patches N]

Models: tests/models (kws_ref_model, ad01_int8, pretrainedResnet_quant, digits TFLite and ONNX
quantized by qconvert) and every model of the corpus manifest (tests/corpus/manifest.py) that
export-c accepts; float ones are quantized once with `qconvert quantize MODEL --calibration
MODEL_calib -o X.tflite` into the cache folder (kept between runs). Prints, per model: TFLM's
arena ('Arena allocation total' of its Python interpreter), export-c's arena with both kernel
sets, the ratio, and the CMSIS-NN convolutions run band by band (output overlapping input): the
output rows per band of each (0: none, every layer one whole call).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _models(cache: Path) -> dict:
    """{name: int8 TFLite path}, quantizing float models into `cache` once."""
    from click.testing import CliRunner

    from corpus.manifest import MODELS_TABLE
    from qconvert.cli.app import main

    models = ROOT / "tests" / "models"
    out = {m: models / f"{m}.tflite" for m in ("kws_ref_model", "ad01_int8",
                                                "pretrainedResnet_quant")}
    for name, src, calib in (("digits_tflite", "digits_cnn.tflite", "digits_calib_nhwc.npy"),
                             ("digits_onnx", "digits_cnn.onnx", "digits_calib_nchw.npy")):
        out[name] = (models / src, ROOT / "sample_models" / calib, {})
    seen = {str(models / f"{m}.tflite") for m in out}
    for m in MODELS_TABLE:
        if str(m.path) in seen or "streaming" in m.name:
            continue
        seen.add(str(m.path))
        out[m.name] = m.path if m.precision == "int8" else (m.path, m.calibration, m.shapes)
    cache.mkdir(parents=True, exist_ok=True)
    for name, value in list(out.items()):
        if not isinstance(value, tuple):
            continue
        src, calib, shapes = value
        target = cache / f"{name}.tflite"
        if not target.exists():
            args = ["quantize", str(src), "--calibration", str(calib), "-o", str(target)]
            for n, shape in (shapes or {}).items():
                args += ["--input-shape", f"{n}:{','.join(str(d) for d in shape)}"]
            result = CliRunner().invoke(main, args)
            if result.exit_code != 0:
                print(f"# {name}: quantize refused: {result.output.strip()[:120]}")
                del out[name]
                continue
        out[name] = target
    return out


def measure(path: Path, kernels: str, **extra) -> tuple:
    """(arena bytes, rows per band of each banded layer, "0" for none) of export-c with
    `kernels`."""
    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.c_export.model.prepare import prepare_model
    from qconvert.formats.model_io import load_model

    import re

    files, summary = render_model(prepare_model(load_model(path)), ModelOptions(
        "net", kernels, "1x4" if kernels == "portable" else "rowmajor", **extra))
    source = files["net.c"].decode()
    invoke = source[source.rindex("int net_invoke_with_arena("):]
    if "#if NET_HELIUM_BUILD" in invoke:  # the other (non-Helium) builds' body
        invoke = invoke[invoke.index("\n#else\n"):]  # the build switch, not a step's
    rows = re.findall(r"band by band: the output overlaps.*\n\s*for \(oy = 0; oy < \d+; "
                      r"oy \+= (\d+)\)", invoke)
    assert len(rows) == summary.banded, (rows, summary.banded)
    return summary.arena_size, ",".join(rows) if rows else "0"


def main() -> None:
    from helpers.export_c_harness import tflm_arena_bytes

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=str(ROOT / "bench" / "out" / "arena_models"))
    parser.add_argument("--models", default="")
    parser.add_argument("--patches", type=int, default=0, help="also export with --patches N")
    args = parser.parse_args()
    models = _models(Path(args.cache))
    wanted = [m for m in args.models.split(",") if m]
    print(f"{'model':34s} {'TFLM':>9s} {'portable':>9s} {'ratio':>6s} {'cmsis-nn':>9s} "
          f"{'ratio':>6s} {'band rows':>16s}" + ("  patched(p / c)" if args.patches else ""))
    for name, path in models.items():
        if wanted and name not in wanted:
            continue
        try:
            tflm = tflm_arena_bytes(path)
            p, _ = measure(path, "portable")
            c, banded = measure(path, "cmsis-nn")
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{name:34s} refused: {str(exc)[:80]}")
            continue
        line = (f"{name:34s} {tflm:9d} {p:9d} {p / tflm:6.3f} {c:9d} {c / tflm:6.3f} "
                f"{banded:>16s}")
        if args.patches:
            pp, _ = measure(path, "portable", patches=args.patches)
            pc, _ = measure(path, "cmsis-nn", patches=args.patches)
            line += f"  {pp:9d} {pc:9d}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
