# cmake -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> [-DLAUNCHER="mpirun|...|-np|N"]
#       [-DRANKS=<n>] -P check_dump_numerics.cmake
# --dump_numerics: two runs of 2 steps with the same seed write the same statistics, line for
# line (what comparing runs relies on), one file per rank, with every module's output and
# every parameter's gradient of each step.
string(REPLACE "|" ";" launcher "${LAUNCHER}")
if(NOT RANKS)
  set(RANKS 1)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
foreach(run a b)
  execute_process(COMMAND ${launcher} "${PROGRAM}" --llmc_filepath "${DATA}/model.bin" --input_bin "${DATA}/train.bin"
                          --batch_size 4 --sequence_length 32 --num_iteration 2 --dump_numerics "${WORK_DIR}/${run}"
                  RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "gpt2 --dump_numerics failed (${result}):\n${err}")
  endif()
endforeach()
math(EXPR last_rank "${RANKS} - 1")
foreach(rank RANGE ${last_rank})
  file(READ "${WORK_DIR}/a/rank_${rank}.tsv" a)
  file(READ "${WORK_DIR}/b/rank_${rank}.tsv" b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "two runs with the same seed dumped different statistics on rank ${rank}")
  endif()
  foreach(expected "^step\tkind\tname\tdtype\tshape\tnumel\tnan\tinf\tmin\tmax\tmean\trms\n"
                   "\n0\tforward\th\\.0\\.attn\\.c_attn\tfloat32\t\\[[0-9]+, 32, 192\\]\t"
                   "\n1\tforward\th\\.1\\.attn\\.c_proj\tfloat32\t"
                   "\n0\tgrad\th\\.0\\.mlp\\.c_fc\\.weight\tfloat32\t\\[256, 64\\]\t16384\t0\t0\t"
                   "\n1\tgrad\th\\.1\\.ln_2\\.bias\tfloat32\t\\[64\\]\t64\t0\t0\t")
    if(NOT a MATCHES "${expected}")
      message(FATAL_ERROR "rank_${rank}.tsv has no line matching '${expected}':\n${a}")
    endif()
  endforeach()
endforeach()
