"""Instructions per multiply-accumulate of export-c's C on Cortex-M cores,
measured by bench/bench_mcu.py (docs/bench_mcu.json) and derived by
bench/mcu_rates.py (generated: do not edit; rerun it after a new benchmark).

Benchmark of 2026-11-28: bench/bench_mcu.py --tflm-images /work/bench-mcu-tflm/images --models k
ws,resnet8,ad01,vww_tflc,vww_qc,digits_tflite,digits_onnx,streaming_kws_int8,corpus_keras_ds_cnn
,corpus_keras_ds_cnn_int8_tflc,corpus_keras_mobilenet_v2,corpus_keras_mobilenet_v3_minimal,corpu
s_keras_mobilenet_v3_small,corpus_keras_resnet8,corpus_streaming_kws_tflite,corpus_kws_conv1d,co
rpus_mobilenet_v2_paddle,corpus_mobilenet_v3_small,corpus_regnet_small,corpus_resnext_small,corp
us_shufflenet_v2,corpus_streaming_kws_onnx,corpus_tiny_transformer,corpus_unet_small --json
/tmp/m55_bench_full3.json --work /tmp/m55-bench (QEMU emulator version 7.2.22 (Debian
1:7.2+dfsg-7+deb12u18+b3); arm-none-eabi-gcc (15:12.2.rel1-1) 12.2.1 20221205).
Per core and kernel set: (median, lowest, highest) over the benchmark's models, and
the number of models."""

BENCHMARK = 'docs/bench_mcu.json of 2026-11-28 (qconvert b285a28)'

RATES = {
    'Cortex-M4': {
        'portable': (3.48, 1.64, 8.34, 24),
        'cmsis-nn': (3.48, 1.64, 9.01, 24),
    },
    'Cortex-M55': {
        'portable': (3.47, 1.68, 8.07, 24),
        'cmsis-nn': (1.3, 0.39, 6.47, 24),
    },
}
