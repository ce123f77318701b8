"""Benchmark: firmware images on emulated Cortex-M, export-c against TensorFlow Lite Micro.

For each model of the set (bench/mcu_models.py) and board (Cortex-M4 on QEMU mps2-an386,
Cortex-M55 with MVE on mps3-an547), runs up to four firmware images built with the same
compiler (arm-none-eabi-gcc) and flags (-O2 -ffunction-sections -fdata-sections,
--gc-sections):
  tflm       TFLite Micro + CMSIS-NN kernels, default registrations  } prebuilt, read from
  tflm-int8  the same with Register_X_INT8() where TFLM has one      } --tflm-images
  cmsis-nn   `qconvert export-c --kernels cmsis-nn` (CMSIS-NN from --cmsis-nn)
  portable   `qconvert export-c --kernels portable`
  q7-legacy, q7-portable  `qconvert export-c --scheme q7 --kernels cmsis-nn-legacy / portable`
             (float models with calibration only: the CMSIS-NN paper's power-of-two q7; legacy
             CMSIS_5 kernels from --legacy), checked against qconvert's q7 executor instead
and reports per image: instructions per inference (QEMU -icount shift=0, the FPGAIO counter
read around the call, its rate measured per board on a loop of known length), TFLM's one-time
setup (GetModel .. AllocateTensors) apart, flash as code + weights (from the map file), RAM
(arena, static buffers, .data, .bss, stack high-water by painting), and whether the outputs
equal the TFLite Micro Python interpreter's on the same seeded inputs. Models export-c refuses
are listed with the reason. docs/bench_mcu.md says how the TFLM images are made.

    python bench/bench_mcu.py --tflm-images DIR [--models kws,resnet8] [--boards m4,m55]
        [--images tflm,tflm-int8,cmsis-nn,portable,q7-legacy,q7-portable] [--json FILE]
        [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mcu_export_c as exc  # noqa: E402
import mcu_firmware as fw  # noqa: E402
import mcu_models as mm  # noqa: E402
import mcu_size as size  # noqa: E402

ROOT = HERE.parent
IMAGES = ("tflm", "tflm-int8", "cmsis-nn", "portable")
Q7_IMAGES = ("q7-legacy", "q7-portable")
# the q7 average pool by board (legacy kernels and qconvert's portable ones alike): the DSP path
# on Cortex-M4, the plain C path on Cortex-M55 (taken under MVE)
Q7_AVGPOOL = {"m4": "dsp", "m55": "scalar"}
DEFAULT_CMSIS_NN = exc.DEFAULT_CMSIS_NN


def tflm_image(images: Path, model: str, board: str, variant: str, sha: str) -> dict:
    """A prebuilt TFLM image's files and metadata; ValueError if missing or built from other
    model bytes."""
    folder = images / model / board / variant
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        raise ValueError(f"no prebuilt image in {folder}")
    meta = json.loads(meta_file.read_text())
    if meta["model_sha256"] != sha:
        raise ValueError("prebuilt image embeds other model bytes (rebuild it)")
    return {"elf": folder / "image.elf", "map": folder / "image.map",
            "weights_objects": set(meta["weights_objects"]), "static_arena": meta["static_arena"],
            "meta": meta}


def measure(image: dict, board: fw.Board, rate: float, input_file: Path) -> dict:
    """Run one image; its figures (instructions, sizes, RAM) and raw outputs."""
    out = fw.parse_output(fw.run_image(image["elf"], board, input_file))
    v = out["values"]
    sizes = size.image_sizes(image["elf"], image["map"], image["weights_objects"])
    stack = max(v.get("setup_stack", 0), v.get("invoke_stack", 0))
    if "arena_used" in v:  # an interpreter: its static arena counted at what it used
        arena = v["arena_used"]
        bss = sizes["bss"] - image["static_arena"] + arena
    else:
        arena, bss = image["arena"], sizes["bss"]
    rec = {"rc": v.get("rc"), "instructions": round(v["invoke_ticks"] * rate),
           "setup_instructions": round(v["setup_ticks"] * rate) if "setup_ticks" in v else None,
           **{k: sizes[k] for k in ("flash", "code", "weights", "data")}, "bss": bss,
           "arena": arena, "io_buffers": image.get("io_bytes", 0), "stack": stack,
           "ram": sizes["data"] + bss + stack}
    return rec, out["outputs"]


def bench_model(name: str, source, boards: list, kinds: list, args, rates: dict) -> list:
    """Every image of one model on every board: a list of records."""
    work = args.work / name
    records = []
    base = {"model": name, "source": str(source.path.relative_to(ROOT))}
    try:
        model = mm.int8_model(source, args.work / "models")
    except RuntimeError as e:
        return [{**base, "status": "refused", "reason": str(e)}]
    work.mkdir(parents=True, exist_ok=True)
    arrays = mm.inputs_for(name, model)
    reference = mm.reference_outputs(model, arrays)
    input_file = mm.input_file(arrays, work / "input.bin")
    sha = mm.sha256(model)
    q7_reference = {}
    if any(k in Q7_IMAGES for k in kinds) and source.calibration is not None:
        try:
            q7_reference = mm.q7_reference_outputs(source, arrays)
        except Exception as e:  # noqa: BLE001 -- a refusal: the q7 images say so below
            q7_reference = {"error": str(e)}
    for board_name in boards:
        board = fw.BOARDS[board_name]
        for kind in kinds:
            rec = {**base, "board": board_name, "image": kind}
            try:
                if kind.startswith("tflm"):
                    image = tflm_image(args.tflm_images, name, board_name, kind, sha)
                elif kind in Q7_IMAGES:
                    image = exc.build(source.path, work / kind, board, kind, args.cmsis_nn,
                                      source.calibration, args.legacy)
                else:
                    image = exc.build(model, work / kind, board, kind, args.cmsis_nn)
                figures, outputs = measure(image, board, rates[board_name], input_file)
            except exc.Refused as e:
                rec.update(status="refused", reason=str(e))
            except (ValueError, RuntimeError) as e:
                reason = _reason(str(e))
                status = "missing" if "prebuilt" in reason else \
                    "too big" if "overflowed" in reason else "failed"
                rec.update(status=status, reason=reason)
            else:
                want = (q7_reference.get(Q7_AVGPOOL[board_name])
                        if kind in Q7_IMAGES else reference)
                rec.update(figures, status="ok" if figures["rc"] == 0 else "failed",
                           bit_exact=outputs == want)
                if figures["rc"] != 0:
                    rec["reason"] = f"invoke returned {figures['rc']}"
            records.append(rec)
            print(_line(rec), flush=True)
    return records


def _reason(text: str) -> str:
    """The telling line of a failure: a region overflow, else the first error, else the last
    line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()] or ["no message"]
    for key in ("overflowed", "error:", "Error"):
        hit = next((ln for ln in lines if key in ln), None)
        if hit:
            return hit[-300:]
    return lines[-1][-300:]


def _line(rec: dict) -> str:
    head = f"{rec['model']:<34} {rec.get('board', '-'):<4} {rec.get('image', '-'):<10}"
    if rec["status"] != "ok":
        return f"{head} {rec['status']}: {rec.get('reason', '')}"
    setup = f" setup {rec['setup_instructions']:,}" if rec.get("setup_instructions") else ""
    return (f"{head} {rec['instructions']:>12,} instr.{setup}  flash {rec['code']:,} code + "
            f"{rec['weights']:,} weights  RAM {rec['ram']:,} (arena {rec['arena']:,}, stack "
            f"{rec['stack']:,})  {'bit-exact' if rec['bit_exact'] else 'OUTPUTS DIFFER'}")


def _kb(n: int) -> str:
    return f"{n / 1024:.0f}"


def table(records: list) -> str:
    """The markdown table: one row per model and board."""
    rows = {}
    for r in records:
        if r["status"] == "ok":
            rows.setdefault((r["model"], r["board"]), {})[r["image"]] = r
    lines = ["| model | board | TFLM + CMSIS-NN (instr., setup) | export-c cmsis-nn | "
             "export-c portable | flash KB code+weights: TFLM / TFLM int8 / cmsis-nn / "
             "portable | RAM KB: TFLM / cmsis-nn / portable | outputs = TFLM Python |",
             "|---|---|---|---|---|---|---|---|"]
    for (model, board), imgs in rows.items():
        ref = imgs.get("tflm")

        def speed(kind):
            r = imgs.get(kind)
            if r is None:
                return "-"
            text = f"{r['instructions'] / 1e6:.2f} M"
            if kind == "tflm":
                return text + (f" ({r['setup_instructions'] / 1e3:.0f} K)"
                               if r.get("setup_instructions") else "")
            return text + (f" ({r['instructions'] / ref['instructions']:.2f}x)" if ref else "")

        flash = " / ".join(f"{_kb(imgs[k]['code'])}+{_kb(imgs[k]['weights'])}" if k in imgs
                           else "-" for k in IMAGES)
        ram = " / ".join(_kb(imgs[k]["ram"]) if k in imgs else "-"
                         for k in ("tflm", "cmsis-nn", "portable"))
        exact = "yes" if all(r["bit_exact"] for r in imgs.values()) else "NO: " + ", ".join(
            k for k, r in imgs.items() if not r["bit_exact"])
        lines.append(f"| {model} | {board} | {speed('tflm')} | {speed('cmsis-nn')} | "
                     f"{speed('portable')} | {flash} | {ram} | {exact} |")
    q7 = q7_table(records)
    if q7:
        lines += ["", *q7]
    others = [r for r in records if r["status"] != "ok"]
    if others:
        lines += ["", "Not measured:", ""]
        lines += [f"- {r['model']} {r.get('board', '')} {r.get('image', '')}: {r['status']}, "
                  f"{r.get('reason', '')}" for r in others]
    return "\n".join(lines)


def q7_table(records: list) -> list:
    """The s8 vs q7 table (lines): one row per model and board that has a q7 image."""
    rows = {}
    for r in records:
        if r["status"] == "ok":
            rows.setdefault((r["model"], r["board"]), {})[r["image"]] = r
    kinds = ("cmsis-nn", "portable", *Q7_IMAGES)
    lines = ["| model | board | instructions: s8 cmsis-nn / s8 portable / q7 legacy / q7 "
             "portable | flash KB code+weights (same order) | RAM KB (same order) | "
             "bit-exact |", "|---|---|---|---|---|---|"]
    for (model, board), imgs in rows.items():
        if not any(k in imgs for k in Q7_IMAGES):
            continue
        speed = " / ".join(f"{imgs[k]['instructions'] / 1e6:.2f} M" if k in imgs else "-"
                           for k in kinds)
        flash = " / ".join(f"{_kb(imgs[k]['code'])}+{_kb(imgs[k]['weights'])}" if k in imgs
                           else "-" for k in kinds)
        ram = " / ".join(_kb(imgs[k]["ram"]) if k in imgs else "-" for k in kinds)
        exact = "yes" if all(imgs[k]["bit_exact"] for k in kinds if k in imgs) else "NO"
        lines.append(f"| {model} | {board} | {speed} | {flash} | {ram} | {exact} |")
    return lines if len(lines) > 2 else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tflm-images", type=Path, default=None,
                    help="prebuilt TFLM images (MODEL/BOARD/VARIANT/image.elf, image.map, "
                         "meta.json); without it only the export-c images run")
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--boards", default="m4,m55")
    ap.add_argument("--images", default=",".join(IMAGES))
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument("--work", type=Path, default=Path("/tmp/qconvert-bench-mcu"))
    ap.add_argument("--cmsis-nn", type=Path, default=DEFAULT_CMSIS_NN)
    ap.add_argument("--legacy", type=Path, default=exc.DEFAULT_LEGACY,
                    help="CMSIS_5's legacy NN copy (the q7-legacy images)")
    args = ap.parse_args()
    sources = mm.model_set()
    names = args.models.split(",") if args.models else list(sources)
    unknown = [n for n in names if n not in sources]
    boards = args.boards.split(",")
    kinds = args.images.split(",")
    if unknown or any(b not in fw.BOARDS for b in boards) or any(k not in IMAGES + Q7_IMAGES for k in kinds):
        sys.exit(f"bench_mcu: unknown model, board or image (models: {', '.join(sources)}; "
                 f"boards: {', '.join(fw.BOARDS)}; images: {', '.join(IMAGES + Q7_IMAGES)})")
    if args.tflm_images is None:
        kinds = [k for k in kinds if not k.startswith("tflm")]
    args.work.mkdir(parents=True, exist_ok=True)
    rates = {b: fw.calibrate(fw.BOARDS[b], args.work) for b in boards}
    runtime = {b: size.image_sizes(args.work / f"calibrate_{b}" / "image.elf",
                                   args.work / f"calibrate_{b}" / "image.map", set())
               for b in boards}
    for b, r in rates.items():
        print(f"{b} ({fw.BOARDS[b].machine}): {r:.4f} instructions per FPGAIO counter tick "
              f"(loop of {2 * fw.CALIBRATE_LOOP + 1:,} instructions); the bench runtime alone "
              f"(startup, printf, semihosting): flash {runtime[b]['flash']:,}, .data "
              f"{runtime[b]['data']:,}, .bss {runtime[b]['bss']:,} bytes")
    started = time.time()
    records = []
    for name in names:
        records += bench_model(name, sources[name], boards, kinds, args, rates)
    print()
    print(table(records))
    if args.json:
        args.json.write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "seconds": round(time.time() - started),
            "rates": rates, "runtime_sizes": runtime, "qemu": _first_line("qemu-system-arm",
                                                                         "--version"),
            "gcc": _first_line("arm-none-eabi-gcc", "--version"),
            "qconvert_commit": _first_line("git", "-C", str(ROOT), "rev-parse", "HEAD"),
            "cmsis_nn": str(args.cmsis_nn), "cmsis_nn_version": _first_line(
                "head", "-1", str(args.cmsis_nn / "VERSION")),
            "command": " ".join(sys.argv), "records": records}, indent=1))


def _first_line(*cmd) -> str:
    """The first line a command prints (versions, commits), or '' if it fails."""
    import subprocess

    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (done.stdout.strip().splitlines() or [""])[0]


if __name__ == "__main__":
    main()
