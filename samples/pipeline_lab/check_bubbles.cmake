# cmake -DPROGRAM=<pipeline_lab> [-DLAUNCHER="mpirun|...|-np|4"] -P check_bubbles.cmake
# Every schedule with p = 4, m = 8 (interleaved: v = 2). Simulated (no LAUNCHER): the bubble
# equals theory to 1e-9. Real (under LAUNCHER, sleeping compute): the run completes and
# reports a step and a bubble in [0, 1) (timings are for benchmarks, not tests).
string(REPLACE "|" ";" launcher "${LAUNCHER}")
foreach(run "gpipe;1" "1f1b;1" "interleaved;2" "zb-h1;1")
  list(GET run 0 schedule)
  list(GET run 1 chunks)
  execute_process(COMMAND ${launcher} "${PROGRAM}" --schedule ${schedule} --stages 4 --virtual_stages ${chunks}
                          --micro_batches 8 --forward_ms 2 --backward_ms 2 --weight_ms 1 --steps 1
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "pipeline_lab --schedule ${schedule} failed (${result}): ${err}")
  endif()
  string(REGEX MATCH "{\"summary\": [^\n]*" line "${out}")
  if(NOT line)
    message(FATAL_ERROR "no summary from pipeline_lab --schedule ${schedule}:\n${out}")
  endif()
  string(JSON bubble GET "${line}" summary bubble)
  string(JSON theory GET "${line}" summary theory)
  string(JSON step GET "${line}" summary step_ms)
  message(STATUS "${schedule}: step ${step} ms, bubble ${bubble}, theory ${theory}")
  if(LAUNCHER)
    if(NOT step GREATER 0 OR bubble LESS 0 OR NOT bubble LESS 1)
      message(FATAL_ERROR "${schedule}: step ${step} ms and bubble ${bubble} are not a real run's")
    endif()
  else()
    if(NOT bubble STREQUAL theory)
      message(FATAL_ERROR "${schedule}: simulated bubble ${bubble} differs from theory ${theory}")
    endif()
  endif()
endforeach()
