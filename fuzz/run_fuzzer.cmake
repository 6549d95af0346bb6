# Runs a libFuzzer target for a bounded time on a fresh copy of a seed corpus (libFuzzer
# adds the inputs it finds to that copy, never to the seeds):
#   cmake -DFUZZER=<exe> -DSEEDS=<dir> -DWORK_DIR=<dir> -DSECONDS=<n> -P run_fuzzer.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(COPY ${SEEDS}/ DESTINATION ${WORK_DIR}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${result}); the input that failed is in ${WORK_DIR}/")
endif()
