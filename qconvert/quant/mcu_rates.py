"""Instructions per multiply-accumulate of export-c's C on Cortex-M cores,
measured by bench/bench_mcu.py (docs/bench_mcu.json) and derived by
bench/mcu_rates.py (generated: do not edit; rerun it after a new benchmark).

Benchmark of 2026-11-28: bench/bench_mcu.py --tflm-images /work/bench-mcu-tflm/images --json
docs/bench_mcu.json (QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3); arm-none-
eabi-gcc (15:12.2.rel1-1) 12.2.1 20221205).
Per core and kernel set: (median, lowest, highest) over the benchmark's models, and
the number of models."""

BENCHMARK = 'docs/bench_mcu.json of 2026-11-28 (qconvert a1d4665)'

RATES = {
    'Cortex-M4': {
        'portable': (3.59, 1.64, 15.18, 24),
        'cmsis-nn': (3.63, 1.64, 15.85, 24),
    },
    'Cortex-M55': {
        'portable': (3.69, 1.68, 14.9, 24),
        'cmsis-nn': (1.51, 0.39, 13.29, 24),
    },
}
