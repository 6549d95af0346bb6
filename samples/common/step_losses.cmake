# step_losses(FILE OUT): OUT = the "loss" of every step line of a trainer's --metrics_out file
# FILE, in order (the summary and validation lines have none).
function(step_losses file out)
  file(STRINGS "${file}" lines)
  set(losses)
  foreach(line IN LISTS lines)
    string(JSON loss ERROR_VARIABLE no_loss GET "${line}" loss)
    if(NOT no_loss)
      list(APPEND losses ${loss})
    endif()
  endforeach()
  set(${out} ${losses} PARENT_SCOPE)
endfunction()
