# cmake -DTOOL=<checkpoint_tool> -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DMPIRUN="mpirun|..."
#       -DWORK_DIR=<dir> -P check_tool.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(model --model custom --num_layers 2 --num_heads 2 --channels 32 --max_seq_len 64 --vocab_size 500)

function(run out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE stdout ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${result}): ${stdout}\n${err}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()
function(expect text pattern)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "no line matching '${pattern}' in:\n${text}")
  endif()
endfunction()

run(out ${mpirun} -np 4 "${PROGRAM}" ${model} --input_bin "${DATA}/train.bin" --batch_size 2 --sequence_length 16
    --total_batch_size 64 --num_iteration 3 --tensor_parallel 2 --zero_stage 1 --save "${WORK_DIR}/ckpt")
run(listing "${TOOL}" inspect "${WORK_DIR}/ckpt" --sums)
expect("${listing}" "checkpoint [^\n]*: step 3, saved by 4 ranks")
expect("${listing}" "metadata layout: DP=2 TP=2 PP=1")
expect("${listing}" "4 files, [0-9]+ bytes")
# wte: the vocabulary padded to 512 rows, split over tp 2 into two chunks.
expect("${listing}" "  model/wte.weight  float32 \\[512, 32\\]  2 chunks  65536 bytes  sum ")
# Adam's moments of c_attn: q, k, v parts per tensor-parallel rank, cut into ZeRO-1 pieces.
expect("${listing}" "  optimizer/h.0.attn.c_attn.weight/exp_avg  float32 \\[96, 32\\]  [0-9]+ chunks")
expect("${listing}" "  scheduler/last_epoch  int64 \\[\\]  1 chunk  8 bytes  sum 3\n")

run(converted "${TOOL}" safetensors "${WORK_DIR}/ckpt" "${WORK_DIR}/model.safetensors")
run(sums "${TOOL}" sums "${WORK_DIR}/model.safetensors")
# Every tensor of the file has the sum the checkpoint's chunks give the same tensor.
string(REGEX MATCHALL "  [^ \n]+  [a-z0-9]+ \\[[0-9, ]*\\]  sum [^\n]+" entries "${sums}")
list(LENGTH entries count)
if(count LESS 20)
  message(FATAL_ERROR "only ${count} tensors in the converted file:\n${sums}")
endif()
foreach(entry IN LISTS entries)
  string(REGEX MATCH "  ([^ ]+)  ([^\n]+)  sum ([^\n]+)" _ "${entry}")
  set(name "${CMAKE_MATCH_1}")
  set(dtype_shape "${CMAKE_MATCH_2}")
  set(value "${CMAKE_MATCH_3}")
  string(REPLACE "[" "\\[" dtype_shape "${dtype_shape}")
  string(REPLACE "]" "\\]" dtype_shape "${dtype_shape}")
  string(REPLACE "." "\\." name "${name}")
  string(REPLACE "+" "\\+" value "${value}")
  expect("${listing}" "  model/${name}  ${dtype_shape}  [0-9]+ chunks?  [0-9]+ bytes  sum ${value}\n")
endforeach()

# One process writes the checkpoint's model as the llm.c file the 4-rank run exported.
run(out "${PROGRAM}" ${model} --load "${WORK_DIR}/ckpt" --export_llmc "${WORK_DIR}/one.bin")
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK_DIR}/ckpt/gpt2.bin" "${WORK_DIR}/one.bin"
                RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "--export_llmc of the checkpoint differs from the run's own export (see ${WORK_DIR})")
endif()
message(STATUS "${count} tensors converted with equal sums; the llm.c export is byte-identical")
file(REMOVE_RECURSE "${WORK_DIR}")
