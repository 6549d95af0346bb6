# cmake -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DSTEPS=<n> -DWORK_DIR=<dir>
#       [-DLAUNCHER="mpirun|...|-np|N"] -P check_flat_memory.cmake
# A long run of a small GPT-2 whose resident memory stays flat: the largest rss_bytes of the
# steps after step 100 is within 2% of step 100's (a leak of a tensor, a graph or a cache
# entry per step grows it step by step; the allocator's caches are warm by then).
string(REPLACE "|" ";" launcher "${LAUNCHER}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND ${launcher} "${PROGRAM}" --llmc_filepath "${DATA}/model.bin" --input_bin "${DATA}/train.bin"
                        --batch_size 4 --sequence_length 32 --num_iteration ${STEPS} --learning_rate 1e-4
                        --metrics_out "${WORK_DIR}/metrics.jsonl"
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "gpt2 failed (${result}):\n${err}")
endif()
file(STRINGS "${WORK_DIR}/metrics.jsonl" lines)
set(at_100 "")
set(largest 0)
set(largest_step -1)
set(steps 0)
foreach(line IN LISTS lines)
  string(JSON step ERROR_VARIABLE no_step GET "${line}" step)
  string(JSON rss ERROR_VARIABLE no_rss GET "${line}" rss_bytes)
  if(no_step OR no_rss)
    continue()
  endif()
  math(EXPR steps "${steps} + 1")
  if(step EQUAL 100)
    set(at_100 ${rss})
  elseif(step GREATER 100 AND rss GREATER largest)
    set(largest ${rss})
    set(largest_step ${step})
  endif()
endforeach()
if(NOT steps EQUAL STEPS OR at_100 STREQUAL "" OR at_100 LESS_EQUAL 0)
  message(FATAL_ERROR "expected ${STEPS} steps with rss_bytes (step 100 > 0), got ${steps}:\n${err}")
endif()
math(EXPR limit "${at_100} + ${at_100} / 50")
math(EXPR growth_kib "(${largest} - ${at_100}) / 1024")
message(STATUS "resident memory: ${at_100} bytes at step 100, at most ${largest} after it (step ${largest_step}, "
               "${growth_kib} KiB more)")
if(largest GREATER limit)
  message(FATAL_ERROR "resident memory grew more than 2% after step 100: ${at_100} bytes at step 100, "
                      "${largest} at step ${largest_step}")
endif()
