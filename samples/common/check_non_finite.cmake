# cmake -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> [-DLAUNCHER="mpirun|...|-np|N"]
#       [-DEXTRA_FLAGS="--flag|value"] -P check_non_finite.cmake
# A run whose updates blow up (--learning_rate 1e35 after step 0): every step with a NaN or
# infinite loss or gradient norm is skipped on every rank (metrics: "skipped": true, the loss
# null), said on stderr, and the third in a row (--max_skipped_steps 3) stops the run with an
# error naming it. A run whose first update makes the weights infinite refuses to save them.
string(REPLACE "|" ";" launcher "${LAUNCHER}")
string(REPLACE "|" ";" extra_flags "${EXTRA_FLAGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND ${launcher} "${PROGRAM}" ${extra_flags} --llmc_filepath "${DATA}/model.bin" --input_bin "${DATA}/train.bin"
                        --batch_size 4 --sequence_length 32 --num_iteration 10 --learning_rate 1e35
                        --lr_schedule constant --warmup_steps 0 --grad_clip 0 --max_skipped_steps 3
                        --metrics_out "${WORK_DIR}/metrics.jsonl"
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} gpt2 --learning_rate 1e35 exited 0:\n${out}\n${err}")
endif()
if(NOT err MATCHES "3 steps in a row had a non-finite loss or gradient norm \\(--max_skipped_steps 3\\)")
  message(FATAL_ERROR "the run did not stop for its non-finite steps (exit ${result}):\n${err}")
endif()
if(NOT err MATCHES "is not finite: the update is skipped on every rank \\(1 in a row")
  message(FATAL_ERROR "no skipped step was said on stderr:\n${err}")
endif()
file(STRINGS "${WORK_DIR}/metrics.jsonl" lines)
set(skipped 0)
set(last_saved -1)
foreach(line IN LISTS lines)
  string(JSON step ERROR_VARIABLE no_step GET "${line}" step)
  string(JSON was_skipped ERROR_VARIABLE no_field GET "${line}" skipped)
  if(no_step OR no_field)
    continue()
  endif()
  if(was_skipped)
    math(EXPR skipped "${skipped} + 1")
    string(JSON loss_type TYPE "${line}" loss)
    if(NOT loss_type STREQUAL "NULL")
      message(FATAL_ERROR "step ${step} was skipped with a finite loss: ${line}")
    endif()
  elseif(skipped GREATER 0)
    message(FATAL_ERROR "an update was applied after a skipped step: ${line}")
  endif()
endforeach()
if(NOT skipped EQUAL 3)
  message(FATAL_ERROR "expected 3 skipped steps in the metrics, got ${skipped}:\n${lines}")
endif()
# Run B: --learning_rate 1e39 makes step 0's update itself infinite (its loss and norm were
# finite): the save after it refuses, and nothing is written.
execute_process(COMMAND ${launcher} "${PROGRAM}" ${extra_flags} --llmc_filepath "${DATA}/model.bin" --input_bin "${DATA}/train.bin"
                        --batch_size 4 --sequence_length 32 --num_iteration 3 --learning_rate 1e39
                        --lr_schedule constant --warmup_steps 0 --grad_clip 0
                        --save "${WORK_DIR}/ckpt_b" --save_interval 1
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0 OR NOT err MATCHES "after step 0 the weights are not finite .*not saving them over the last checkpoint")
  message(FATAL_ERROR "gpt2 --learning_rate 1e39 --save did not refuse to save infinite weights (exit ${result}):\n${err}")
endif()
if(EXISTS "${WORK_DIR}/ckpt_b/gpt2.bin")
  message(FATAL_ERROR "a checkpoint was written from infinite weights")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
