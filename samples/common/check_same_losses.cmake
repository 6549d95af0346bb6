# cmake -DPROGRAM=<gpt2|llama3> -DCOMPARE=<compare_losses> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir>
#       -DMODEL_FLAGS="--model|custom|..." -DLAUNCHER="mpirun|...|-np|N" -DEXTRA_FLAGS="--flag|value"
#       [-DBATCH=<sequences per micro-batch, 4>] [-DRANK_PARAMETERS=<n0|n1|...>] [-DTOLERANCE=<5e-5>]
#       -P check_same_losses.cmake
# The same 20 steps (random init from one seed, sequential batches) on one process and under
# LAUNCHER with EXTRA_FLAGS (a parallel layout of the same global batch): every loss of the
# second run within TOLERANCE (5e-5) of the first's. A step is 4 sequences of 16 tokens, in micro-batches of
# BATCH per data-parallel rank. Both runs report the same whole-model parameter count, and with
# RANK_PARAMETERS each rank of the second holds exactly that many (its part of the model). Words
# of the lists are separated by '|'.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
string(REPLACE "|" ";" model_flags "${MODEL_FLAGS}")
string(REPLACE "|" ";" launcher "${LAUNCHER}")
string(REPLACE "|" ";" extra_flags "${EXTRA_FLAGS}")
if(NOT BATCH)
  set(BATCH 4)
endif()
if(NOT TOLERANCE)
  set(TOLERANCE 5e-5)
endif()
set(common ${model_flags} --input_bin "${DATA}/train.bin" --batch_size ${BATCH} --sequence_length 16
           --total_batch_size 64 --num_iteration 20
           --learning_rate 3e-3 --lr_schedule constant --weight_decay 0.1 --grad_clip 1.0 --shuffle 0 --seed 5)

execute_process(COMMAND "${PROGRAM}" ${common} --metrics_out "${WORK_DIR}/one.jsonl"
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} on one process failed (${result}): ${err}")
endif()
execute_process(COMMAND ${launcher} "${PROGRAM}" ${common} ${extra_flags} --metrics_out "${WORK_DIR}/split.jsonl"
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_FILE "${WORK_DIR}/split.log")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} ${PROGRAM} ${EXTRA_FLAGS} failed (${result}): ${err}")
endif()

# The one-process losses as compare_losses' expected file.
include(${CMAKE_CURRENT_LIST_DIR}/step_losses.cmake)
step_losses("${WORK_DIR}/one.jsonl" losses)
list(JOIN losses ", " joined)
file(WRITE "${WORK_DIR}/expected.json" "{\"losses\": [${joined}], \"tolerance_abs\": ${TOLERANCE}}\n")
execute_process(COMMAND "${COMPARE}" "${WORK_DIR}/expected.json" "${WORK_DIR}/split.jsonl"
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} ${EXTRA_FLAGS} against one process: ${err}")
endif()

# The summary's "parameters" (the whole model's) and "rank_parameters" ([n0, n1, ...]).
function(summary_field file key out)
  file(STRINGS "${file}" lines REGEX "\"summary\"")
  string(REGEX MATCH "\"${key}\": (\\[[^]]*\\]|[0-9]+)" match "${lines}")
  if(NOT match)
    message(FATAL_ERROR "${file}: no ${key} in the summary: ${lines}")
  endif()
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()
summary_field("${WORK_DIR}/one.jsonl" parameters whole_one)
summary_field("${WORK_DIR}/split.jsonl" parameters whole_split)
if(NOT whole_one STREQUAL whole_split)
  message(FATAL_ERROR "${EXTRA_FLAGS}: the whole model has ${whole_split} parameters, on one process ${whole_one}")
endif()
if(RANK_PARAMETERS)
  summary_field("${WORK_DIR}/split.jsonl" rank_parameters held)
  string(REPLACE "|" ", " expected "[${RANK_PARAMETERS}]")
  if(NOT held STREQUAL expected)
    message(FATAL_ERROR "${EXTRA_FLAGS}: the ranks hold ${held} parameters, expected ${expected}")
  endif()
  message(STATUS "parameters per rank: ${held} of ${whole_one}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
