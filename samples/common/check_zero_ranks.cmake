# cmake -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> -DMPIRUN="mpirun|...options" -P check_zero_ranks.cmake
# A ZeRO-1 checkpoint of 2 ranks: resuming it with 4 ranks, or without --zero_stage 1, fails
# before the first step with an error that says why; with the same 2 ranks it goes on.
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(common --model custom --num_layers 2 --num_heads 2 --channels 32 --max_seq_len 64 --vocab_size 500
           --input_bin "${DATA}/train.bin" --batch_size 1 --sequence_length 16 --total_batch_size 64
           --lr_schedule constant)

function(run ranks expect_ok pattern)
  execute_process(COMMAND ${mpirun} -np ${ranks} "${PROGRAM}" ${common} ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND NOT result EQUAL 0)
    message(FATAL_ERROR "-np ${ranks} ${ARGN} failed (${result}): ${err}")
  endif()
  if(NOT expect_ok AND result EQUAL 0)
    message(FATAL_ERROR "-np ${ranks} ${ARGN} succeeded; expected an error matching '${pattern}'")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "-np ${ranks} ${ARGN}: no output matching '${pattern}':\n${out}\n${err}")
  endif()
  if(NOT expect_ok AND "${out}" MATCHES "step 2/")
    message(FATAL_ERROR "-np ${ranks} ${ARGN} trained before failing:\n${out}")
  endif()
endfunction()

run(2 TRUE "saved step 2" --num_iteration 2 --zero_stage 1 --save "${WORK_DIR}/zero")
# Ranks 0-1 find shards of 2 ranks, ranks 2-3 none; whichever aborts the job first is printed.
run(4 FALSE "ZeRO-1 shards were written by 2 data-parallel ranks, this run has 4|has no ZeRO-1 shard for rank [23]"
    --num_iteration 4 --zero_stage 1 --load "${WORK_DIR}/zero")
run(2 FALSE "holds a ZeRO-1 checkpoint \\(one shard per rank\\): resume it with --zero_stage 1"
    --num_iteration 4 --load "${WORK_DIR}/zero")
run(2 TRUE "resumed from .* at step 2" --num_iteration 4 --zero_stage 1 --load "${WORK_DIR}/zero")
file(REMOVE_RECURSE "${WORK_DIR}")
