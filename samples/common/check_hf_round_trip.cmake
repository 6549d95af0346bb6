# cmake -DPROGRAM=<gpt2|llama3> -DDATA=<tests/data/gpt2-tiny> -DMODEL_FLAGS="--flag|value|..."
#       -DWORK_DIR=<dir> [-DHF_SCRIPT=<tests/nn/hf_reference.py> -DLLMC_MODEL=<model.bin>]
#       -P check_hf_round_trip.cmake
# --hf_out writes the starting model (MODEL_FLAGS) as a Hugging Face directory; a second run
# starts from it (--hf_model) and writes it again: both directories' config.json and
# model.safetensors are the same bytes. With HF_SCRIPT, the first directory's weights are also
# byte for byte what that script (transformers' conventions) writes from LLMC_MODEL.
string(REPLACE "|" ";" model_flags "${MODEL_FLAGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(run_flags --input_bin "${DATA}/train.bin" --batch_size 4 --sequence_length 32 --num_iteration 0)
foreach(pass first second)
  if(pass STREQUAL "first")
    set(start ${model_flags})
  else()
    set(start --hf_model "${WORK_DIR}/first")
  endif()
  execute_process(COMMAND "${PROGRAM}" ${start} ${run_flags} --hf_out "${WORK_DIR}/${pass}"
                  RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} (${pass} pass) failed (${result}): ${err}")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/same_files.cmake)
expect_same_files("${WORK_DIR}/first" "${WORK_DIR}/second" "changed through --hf_model and --hf_out"
                  config.json model.safetensors)
if(HF_SCRIPT)
  execute_process(COMMAND python3 "${HF_SCRIPT}" "${LLMC_MODEL}" "${WORK_DIR}/reference" RESULT_VARIABLE result
                  ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${HF_SCRIPT} failed (${result}): ${err}")
  endif()
  expect_same_files("${WORK_DIR}/first" "${WORK_DIR}/reference" "from --hf_out differs from ${HF_SCRIPT}'s"
                    model.safetensors)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
