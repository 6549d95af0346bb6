# cmake -DPROGRAM=<prepare_text> -DWORK_DIR=<dir> -P check_compact_vocab.cmake
# "Hello world Hello" is <|endoftext|>, "Hello", " world", " Hello": GPT-2 ids 50256 15496 995
# 18435. --compact_vocab renumbers them by increasing GPT-2 id (995 -> 0, 15496 -> 1,
# 18435 -> 2, 50256 -> 3), so train.bin holds 3 1 0 2, and tokenizer.bin holds just those
# four tokens in that order with <|endoftext|> (3) as its EOT token.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(WRITE "${WORK_DIR}/hello.txt" "Hello world Hello")
execute_process(COMMAND "${PROGRAM}" --input "${WORK_DIR}/hello.txt" --out_dir "${WORK_DIR}/out" --val_fraction 0
                        --compact_vocab
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "prepare_text failed (${result}): ${err}")
endif()

function(expect_hex file offset expected)
  file(READ "${WORK_DIR}/out/${file}" actual OFFSET ${offset} HEX)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${file} from byte ${offset}: expected ${expected}, got ${actual}")
  endif()
endfunction()
expect_hex(train.bin 1024 "0300010000000200")  # uint16 3 1 0 2
# magic 20240328, version 2, 4 tokens, EOT 3
file(READ "${WORK_DIR}/out/tokenizer.bin" header LIMIT 16 HEX)
if(NOT header STREQUAL "c8d73401020000000400000003000000")
  message(FATAL_ERROR "tokenizer.bin header: ${header}")
endif()
# length-prefixed " world", "Hello", " Hello", "<|endoftext|>"
expect_hex(tokenizer.bin 1024 "0620776f726c640548656c6c6f062048656c6c6f0d3c7c656e646f66746578747c3e")
file(READ "${WORK_DIR}/out/stats.json" stats)
if(NOT stats MATCHES "\"vocab_size\": 4,")
  message(FATAL_ERROR "stats.json should give vocab_size 4: ${stats}")
endif()
