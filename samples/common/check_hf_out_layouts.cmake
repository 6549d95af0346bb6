# cmake -DPROGRAM=<gpt2|llama3> -DDATA=<tests/data/gpt2-tiny> -DMODEL_FLAGS="--flag|value|..."
#       -DLAUNCHER="mpirun|...|-np|N" -DEXTRA_FLAGS="--flag|value" -DWORK_DIR=<dir> -P check_hf_out_layouts.cmake
# --hf_out of one seed's starting model (--num_iteration 0) on one process and under LAUNCHER
# with EXTRA_FLAGS (a layout whose ranks each hold part of it, gathered for the export): the same
# config.json and model.safetensors, byte for byte.
string(REPLACE "|" ";" model_flags "${MODEL_FLAGS}")
string(REPLACE "|" ";" launcher "${LAUNCHER}")
string(REPLACE "|" ";" extra_flags "${EXTRA_FLAGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(common ${model_flags} --input_bin "${DATA}/train.bin" --batch_size 2 --sequence_length 16 --num_iteration 0)
execute_process(COMMAND "${PROGRAM}" ${common} --hf_out "${WORK_DIR}/one" RESULT_VARIABLE result ERROR_VARIABLE err
                OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} on one process failed (${result}): ${err}")
endif()
execute_process(COMMAND ${launcher} "${PROGRAM}" ${common} ${extra_flags} --hf_out "${WORK_DIR}/split"
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} ${PROGRAM} ${EXTRA_FLAGS} failed (${result}): ${err}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/same_files.cmake)
expect_same_files("${WORK_DIR}/one" "${WORK_DIR}/split" "from --hf_out with ${EXTRA_FLAGS} differs from one process's"
                  config.json model.safetensors)
