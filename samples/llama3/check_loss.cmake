# cmake -DPROGRAM=<llama3> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> -P check_loss.cmake
# 60 steps of a tiny random-init LLaMA-3 (V 500, GQA with 4 query and 2 key/value heads,
# scaled RoPE) on the tokens of tests/data/gpt2-tiny, which follow a sparse bigram chain
# (about 8 successors per token). The first loss is about ln(500) = 6.21 (near-uniform logits
# at init) and the mean of the last 5 losses is at least 1.5 lower (about 3.5 in practice).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND "${PROGRAM}" --model custom --num_layers 2 --num_heads 4 --num_kv_heads 2 --channels 32
                        --max_seq_len 64 --vocab_size 500 --multiple_of 32 --input_bin "${DATA}/train.bin"
                        --batch_size 8 --sequence_length 64 --num_iteration 60 --learning_rate 1e-2
                        --lr_schedule constant --seed 3 --metrics_out "${WORK_DIR}/metrics.jsonl"
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "llama3 failed (${result}): ${err}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/../common/step_losses.cmake)
step_losses("${WORK_DIR}/metrics.jsonl" losses)
list(LENGTH losses count)
if(NOT count EQUAL 60)
  message(FATAL_ERROR "expected 60 step losses in ${WORK_DIR}/metrics.jsonl, got ${count}")
endif()

# math() is integer-only: losses in thousandths (truncated).
function(milli value out)
  if(NOT value MATCHES "^([0-9]+)(\\.([0-9]*))?$")
    message(FATAL_ERROR "unexpected loss value '${value}'")
  endif()
  set(whole ${CMAKE_MATCH_1})
  string(SUBSTRING "${CMAKE_MATCH_3}000" 0 3 fraction)
  math(EXPR result "${whole} * 1000 + 1${fraction} - 1000")  # the leading 1 keeps "012" decimal
  set(${out} ${result} PARENT_SCOPE)
endfunction()

list(GET losses 0 first_loss)
milli(${first_loss} first)
set(last_sum 0)
foreach(i RANGE 55 59)
  list(GET losses ${i} loss)
  milli(${loss} value)
  math(EXPR last_sum "${last_sum} + ${value}")
endforeach()
math(EXPR last "${last_sum} / 5")
message(STATUS "first loss ${first_loss}, mean of the last 5: ${last} / 1000")
if(first LESS 5710 OR first GREATER 6710)
  message(FATAL_ERROR "the first loss ${first_loss} is not near ln(500) = 6.21: the initialisation is off")
endif()
math(EXPR drop "${first} - ${last}")
if(drop LESS 1500)
  message(FATAL_ERROR "the loss fell only from ${first_loss} to ${last} / 1000 in 60 steps (expected a drop >= 1.5)")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
