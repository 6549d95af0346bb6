# cmake -DPROGRAM=<llama3> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> -P check_resume.cmake
# As samples/gpt2/check_resume.cmake, for LLaMA-3: 20 steps equal 10 steps + --save + --load
# in a new process + 10 steps, bit for bit (training state and llm.c export byte-identical).
# Random init, shuffled batches, a warmup that spans the save, decay and clipping.
file(REMOVE_RECURSE "${WORK_DIR}")
set(common --model custom --num_layers 2 --num_heads 4 --num_kv_heads 2 --channels 32 --max_seq_len 64
           --vocab_size 500 --multiple_of 32 --input_bin "${DATA}/train.bin" --batch_size 2 --sequence_length 16
           --total_batch_size 64 --learning_rate 1e-2 --warmup_steps 12 --lr_schedule constant
           --weight_decay 0.1 --grad_clip 0.5 --shuffle 1)

function(run)
  execute_process(COMMAND "${PROGRAM}" ${common} ${ARGN} RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "llama3 ${ARGN} failed (${result}): ${err}")
  endif()
endfunction()

run(--num_iteration 20 --seed 7 --save "${WORK_DIR}/straight")
run(--num_iteration 10 --seed 7 --save "${WORK_DIR}/resumed")
# Another seed: the resumed run must take its batch order and RNG state from the checkpoint.
run(--num_iteration 20 --seed 8 --load "${WORK_DIR}/resumed" --save "${WORK_DIR}/resumed")
foreach(file manifest.json state-20-0.safetensors llama3.bin)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK_DIR}/straight/${file}" "${WORK_DIR}/resumed/${file}"
                  RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "${file} differs between the straight and the resumed run (see ${WORK_DIR})")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
