"""`qconvert export-c`: the whole int8 model as C (NAME.c / NAME.h with one static arena).

`lowering` (one table op -> lowering function) lowers each layer to one C kernel call, the
families in their own modules (`steps` with its helpers and the portable int8 layers,
`steps_fast`, `steps_s16` and the `*_steps` modules); `cmsis_lowering` chooses the calls of
`--kernels cmsis-nn` (`cmsis_nn`, `cmsis_nn_s16`, `cmsis_fast`, `cmsis_1xn`); `memory_plan` and `op_order` place every activation in the arena;
`pad_fold`, `patches` and `resource_state` / `state_source` shape the model before rendering;
`render` writes the source; `export_report` the `--report` figures.
"""
