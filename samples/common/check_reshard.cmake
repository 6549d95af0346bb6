# cmake -DPROGRAM=<gpt2> -DCOMPARE=<compare_losses> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir>
#       -DMPIRUN="mpirun|...options" -P check_reshard.cmake
# A checkpoint saved after 10 steps by dp 2 x tp 2 with ZeRO-1 resumes under other layouts: one
# process, pp 2, dp 4 with ZeRO-2, tp 2 x pp 2, dp 2 x pp 2 with ZeRO-1 and with ZeRO-3, and
# dp 2 x tp 2 with ZeRO-3 (parameters sharded). Each run's losses for steps 10-19 are within 5e-5 of those of one
# process that ran all 20 steps without stopping.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(common --model custom --num_layers 2 --num_heads 2 --channels 32 --max_seq_len 64 --vocab_size 500
           --input_bin "${DATA}/train.bin" --sequence_length 16 --total_batch_size 64 --learning_rate 1e-2
           --warmup_steps 12 --lr_schedule constant --weight_decay 0.1 --grad_clip 0.5 --seed 5)

function(run name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${name} failed (${result}): ${out}\n${err}")
  endif()
endfunction()

run(uninterrupted "${PROGRAM}" ${common} --batch_size 4 --num_iteration 20 --metrics_out "${WORK_DIR}/one.jsonl")
run(saved ${mpirun} -np 4 "${PROGRAM}" ${common} --batch_size 2 --num_iteration 10 --tensor_parallel 2 --zero_stage 1
    --save "${WORK_DIR}/ckpt")

include(${CMAKE_CURRENT_LIST_DIR}/step_losses.cmake)
step_losses("${WORK_DIR}/one.jsonl" losses)
list(SUBLIST losses 10 10 losses)
list(JOIN losses ", " joined)
file(WRITE "${WORK_DIR}/expected.json" "{\"losses\": [${joined}], \"tolerance_abs\": 5e-5}\n")

function(resume name ranks)
  set(launcher ${mpirun} -np ${ranks})
  if(ranks EQUAL 1)
    set(launcher)
  endif()
  run("${name}" ${launcher} "${PROGRAM}" ${common} --num_iteration 20 --load "${WORK_DIR}/ckpt"
      --metrics_out "${WORK_DIR}/${name}.jsonl" ${ARGN})
  execute_process(COMMAND "${COMPARE}" "${WORK_DIR}/expected.json" "${WORK_DIR}/${name}.jsonl"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "resumed as ${name}, against the uninterrupted run: ${err}")
  endif()
  message(STATUS "${name}: ${out}")
endfunction()
resume(one_process 1 --batch_size 4)
resume(pp2 2 --batch_size 4 --pipeline_parallel 2)
resume(dp4_zero2 4 --batch_size 1 --zero_stage 2)
resume(tp2_pp2 4 --batch_size 4 --tensor_parallel 2 --pipeline_parallel 2)
resume(dp2_pp2_zero1 4 --batch_size 2 --pipeline_parallel 2 --zero_stage 1)
resume(dp2_pp2_zero3 4 --batch_size 2 --pipeline_parallel 2 --zero_stage 3)
resume(dp2_tp2_zero3 4 --batch_size 2 --tensor_parallel 2 --zero_stage 3)
file(REMOVE_RECURSE "${WORK_DIR}")
