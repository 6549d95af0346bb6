# cmake -DPREPARE=<prepare_text> -DLLAMA3=<llama3> -DSCRIPT=<tests/nn/tokenizer/reference.mjs>
#       -DDATA_DIR=<scripts/fetch_data's folder> -DWORK_DIR=<dir> -P check_tokenizer_json.cmake
# Hugging Face tokenizers in the samples (the files come from reference.mjs):
#  - prepare_text --tokenizer with GPT-2's tokenizer.json writes Moby-Dick's token and
#    tokenizer files byte for byte as with OpenAI's files;
#  - with LLaMA-3's it writes LLaMA-3's token file: <|begin_of_text|> (128000), then the ids
#    of "This is a test sentence." that the LLaMA-3 repository's test gives;
#  - llama3 --tokenizer prints a generated sample through it, and refuses a tokenizer whose
#    vocabulary is not the model's.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(book "${DATA_DIR}/moby-dick/data/data.txt")
if(NOT EXISTS "${book}" OR NOT EXISTS "${DATA_DIR}/llama3-tokenizer-js/package.json")
  message(FATAL_ERROR "scripts/fetch_data has not filled ${DATA_DIR}")
endif()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${result}): ${out} ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(node "${SCRIPT}" "${DATA_DIR}" "${WORK_DIR}/tokenizers")
run("${PREPARE}" --input "${book}" --out_dir "${WORK_DIR}/openai")
run("${PREPARE}" --input "${book}" --out_dir "${WORK_DIR}/hf" --tokenizer "${WORK_DIR}/tokenizers/gpt2")
include(${CMAKE_CURRENT_LIST_DIR}/../common/same_files.cmake)
expect_same_files("${WORK_DIR}/openai" "${WORK_DIR}/hf" "from GPT-2's tokenizer.json differs from OpenAI's files'"
                  train.bin val.bin tokenizer.bin stats.json)

file(WRITE "${WORK_DIR}/test.txt" "This is a test sentence.")
run("${PREPARE}" --input "${WORK_DIR}/test.txt" --out_dir "${WORK_DIR}/llama" --val_fraction 0
    --tokenizer "${WORK_DIR}/tokenizers/llama3/tokenizer.json")
file(READ "${WORK_DIR}/llama/train.bin" header LIMIT 12 HEX)
if(NOT header STREQUAL "a1d934010700000007000000")  # magic 20240801, version 7, 7 tokens
  message(FATAL_ERROR "train.bin header: ${header}")
endif()
file(READ "${WORK_DIR}/llama/train.bin" tokens OFFSET 1024 HEX)
# uint32 128000 2028 374 264 1296 11914 13
if(NOT tokens STREQUAL "00f40100ec0700007601000008010000100500008a2e00000d000000")
  message(FATAL_ERROR "train.bin tokens: ${tokens}")
endif()

set(model --model custom --num_layers 1 --num_heads 2 --num_kv_heads 1 --channels 16 --max_seq_len 16 --multiple_of 16)
set(train --input_bin "${WORK_DIR}/llama/train.bin" --batch_size 1 --sequence_length 4 --num_iteration 1
          --sample_every 1 --text_length 6 --tokenizer "${WORK_DIR}/tokenizers/llama3")
run("${LLAMA3}" ${model} --vocab_size 128256 ${train})
if(NOT out MATCHES "\n---\n[^\n]+\n---\n")
  message(FATAL_ERROR "llama3 --tokenizer printed no sample: ${out}")
endif()
execute_process(COMMAND "${LLAMA3}" ${model} --vocab_size 500 ${train} RESULT_VARIABLE result ERROR_VARIABLE err
                OUTPUT_QUIET)
if(result EQUAL 0 OR NOT err MATCHES "has 128256 tokens, more than the model's vocabulary of 500")
  message(FATAL_ERROR "llama3 should refuse a tokenizer of a larger vocabulary (${result}): ${err}")
endif()
