# cmake -P script: configure, build and run the consumer project, alone and as two ranks under
# MPIRUN (mpirun and its options, separated by |); fails on any error.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer: ${what} failed (${result})")
  endif()
endfunction()

file(REMOVE_RECURSE ${BINARY_DIR})
run_step(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
  -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
run_step(build ${CMAKE_COMMAND} --build ${BINARY_DIR} -j 2)
run_step(run ${BINARY_DIR}/consumer)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_step("run under mpirun -np 2" ${mpirun} -np 2 ${BINARY_DIR}/consumer)
