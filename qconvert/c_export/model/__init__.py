"""`qconvert export-c`: the whole int8 model as C (NAME.c / NAME.h with one static arena).

`steps` (with `steps_extra`, `steps_fast`, `steps_s16` and the `*_steps` families) lowers each
layer to one C kernel call; `cmsis_nn` (`cmsis_nn_s16`, `cmsis_fast`, `cmsis_1xn`) the calls of
`--kernels cmsis-nn`; `memory_plan` and `op_order` place every activation in the arena;
`pad_fold`, `patches` and `resource_state` / `state_source` shape the model before rendering;
`render` writes the source; `export_report` the `--report` figures.
"""
