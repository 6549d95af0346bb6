# expect_same_files(DIR_A DIR_B WHAT FILE...): each FILE is the same bytes in DIR_A and DIR_B;
# otherwise a fatal error "<FILE> <WHAT>".
function(expect_same_files a b what)
  foreach(file ${ARGN})
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${a}/${file}" "${b}/${file}" RESULT_VARIABLE differ)
    if(differ)
      message(FATAL_ERROR "${file} ${what}")
    endif()
  endforeach()
endfunction()
