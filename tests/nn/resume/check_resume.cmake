# cmake -DPROGRAM=<checkpoint_resume> -DWORK_DIR=<dir> -P check_resume.cmake
# 20 steps in one process must end in the same checkpoint, byte for byte, as 10 steps, a
# save, and 10 more steps in a new process that loads it.
file(REMOVE_RECURSE "${WORK_DIR}")

function(run_program)
  execute_process(COMMAND "${PROGRAM}" ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "checkpoint_resume ${ARGN}: ${out}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "checkpoint_resume ${ARGN} failed (${result}): ${err}")
  endif()
endfunction()

run_program(--steps 20 --save "${WORK_DIR}/straight")
run_program(--steps 10 --save "${WORK_DIR}/resumed")
run_program(--steps 10 --load "${WORK_DIR}/resumed" --save "${WORK_DIR}/resumed")

foreach(file manifest.json state-20-0.safetensors)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK_DIR}/straight/${file}" "${WORK_DIR}/resumed/${file}"
                  RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "${file} differs between the straight and the resumed run (see ${WORK_DIR})")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
