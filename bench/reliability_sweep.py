"""The adversarial sweeps of issues 12 and 29, at scale: runs the reliability tests' generators with many
more examples than the suite does and prints, per class, how many cases were tried and whether
all ended the promised way (one line, exit 1, nothing written, inputs unchanged) or worked.

    python bench/reliability_sweep.py            # 100 examples per generator
    python bench/reliability_sweep.py --examples 300

A case is one generated example of a hypothesis test or one parametrized test case; a case of
the structure tests runs every command on its model, so the CLI runs are several times more.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ["tests/cli/test_reliability_outputs.py", "tests/cli/test_reliability_inputs.py",
         "tests/cli/test_reliability_misuse.py"]
CLASSES = {
    "1 data loss (outputs onto inputs, FIFOs, devices)": [
        "test_no_output_resolves_to_an_input", "test_other_commands_refuse_inputs_too",
        "test_char_device_output_is_written_into", "test_fifo_output_without_reader",
        "test_fifo_output_with_reader"],
    "2 partial outputs (full disk, SIGINT, SIGTERM)": [
        "test_full_disk_leaves_nothing", "test_signals_leave_all_or_nothing",
        "test_sigterm_during_a_large_onnx_write"],
    "3 structure (dims, outputs, inputs, codes, Loops, memory)": [
        "test_malformed_structure", "test_huge_dimensions", "test_nested_loops",
        "test_string_input", "test_outer_product", "test_relu_named_by_a_signature_def",
        "test_unknown_fused_activation_code"],
    "4 zip bombs, lying .npz members, FIFO inputs": ["test_zip_bomb", "test_fifo_inputs",
                                                     "test_npz_members_that_lie"],
    "5 calibration data (headers, bool, overflow)": [
        "test_npy_headers_that_lie", "test_malformed_npy_headers", "test_calibration_values",
        "test_huge_weights_overflow"],
    "6 int8 numerics (scales, multipliers, shifts)": ["test_written_int8_models_hold",
                                                       "test_weights_that_cancel"],
    "7 paths and names": ["test_long_output_names", "test_strange_file_names",
                          "test_header_name_is_checked", "test_usage_errors"],
    # issue 29 (tests/cli/test_reliability_misuse.py)
    "8 calibration data at the wrong scale": [
        "test_pixels_0_255", "test_image_folder_without", "test_correctly_scaled",
        "test_data_with_normalization", "test_an_int8_inputs", "test_export_c_warns",
        "test_scale_signature"],
    "9 names in reports and the terminal": [
        "test_json_", "test_inspect_json", "test_html_report", "test_control_characters",
        "test_any_layer_name", "test_written_paths"],
    "10 generated files that shadow headers": [
        "test_name_that_shadows", "test_every_reserved_name", "test_model_file_named",
        "test_names_that_shadow_nothing", "test_reserved_table"],
    "11 option bounds and tracebacks": [
        "test_huge_max_memory", "test_large_but_sane", "test_huge_input_shapes",
        "test_float_io_of", "test_scalar_input", "test_verify_n", "test_verify_bound",
        "test_absurd_normalization", "test_sane_normalization"],
    "12 folders, signals, batches, types": [
        "test_export_c_into", "test_export_c_folder", "test_engine_onnxruntime",
        "test_verify_takes_nan", "test_export_c_header_refuses", "test_non_utf8",
        "test_a_signal", "test_signals_during", "test_fixed_batch"],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=100)
    args = ap.parse_args(argv)
    env = dict(os.environ, QCONVERT_SWEEP_EXAMPLES=str(args.examples))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:warnings",
                           "-p", "no:cacheprovider", "--hypothesis-show-statistics", *FILES],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    out = proc.stdout
    examples: dict = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"tests/\S+::(\w+)", line)
        if m and line.rstrip().endswith(":"):
            current = m.group(1)
        m = re.search(r"(\d+) passing examples, (\d+) failing", line)
        if m and current:
            examples[current] = examples.get(current, 0) + int(m.group(1))
    passed, failed = {}, {}
    for line in out.splitlines():
        m = re.match(r"(PASSED|FAILED|ERROR) tests/\S+::(\w+)", line)
        if m:
            book = passed if m.group(1) == "PASSED" else failed
            book[m.group(2)] = book.get(m.group(2), 0) + 1
    print(f"{'class':58} {'cases':>7}  result")
    total = 0
    for label, prefixes in CLASSES.items():
        names = {n for n in set(passed) | set(failed) if any(n.startswith(p) for p in prefixes)}
        cases = sum(examples.get(n, passed.get(n, 0) + failed.get(n, 0)) for n in names)
        bad = sum(failed.get(n, 0) for n in names)
        total += cases
        print(f"{label:58} {cases:7d}  {'all clean' if not bad else f'{bad} FAILED'}")
    print(f"{'total':58} {total:7d}  ({args.examples} examples per generator; pytest exit "
          f"{proc.returncode})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
