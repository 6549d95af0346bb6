# cmake -DPROGRAM=<gpt2|llama3> -DMODEL_FLAGS="--model|custom|..." -DEXPORT=<gpt2.bin|llama3.bin>
#       -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> [-DLAUNCHER="mpirun|...|-np|N"]
#       [-DEXTRA_FLAGS="--flag|value"] [-DFILES="checkpoint.json|shard-20-0-1.safetensors|..."] -P check_resume.cmake
# 20 steps equal 10 steps + --save + --load in a new process + 10 steps, bit for bit: the final
# checkpoints (training state and llm.c export) are byte-identical. Random init, shuffled
# batches, a warmup that spans the save, decay and clipping: every part of the state matters.
# (A cosine schedule's length is --num_iteration, so the first half could not use it.)
# MODEL_FLAGS, EXTRA_FLAGS, LAUNCHER (runs each process under mpirun) and FILES (what to
# compare; by default the manifest, rank 0's shard file and EXPORT) separate their words with '|'.
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ";" model_flags "${MODEL_FLAGS}")
string(REPLACE "|" ";" launcher "${LAUNCHER}")
string(REPLACE "|" ";" extra_flags "${EXTRA_FLAGS}")
if(FILES)
  string(REPLACE "|" ";" files "${FILES}")
else()
  set(files checkpoint.json shard-20-0-0.safetensors ${EXPORT})
endif()
set(common ${model_flags} --input_bin "${DATA}/train.bin" --batch_size 2 --sequence_length 16 --total_batch_size 64
           --learning_rate 1e-2 --warmup_steps 12 --lr_schedule constant --weight_decay 0.1 --grad_clip 0.5 --shuffle 1
           ${extra_flags})

function(run)
  execute_process(COMMAND ${launcher} "${PROGRAM}" ${common} ${ARGN} RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${ARGN} failed (${result}): ${err}")
  endif()
endfunction()

run(--num_iteration 20 --seed 7 --save "${WORK_DIR}/straight")
run(--num_iteration 10 --seed 7 --save "${WORK_DIR}/resumed")
# Another seed: the resumed run must take its batch order and RNG state from the checkpoint.
run(--num_iteration 20 --seed 8 --load "${WORK_DIR}/resumed" --save "${WORK_DIR}/resumed")
foreach(file ${files})
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK_DIR}/straight/${file}" "${WORK_DIR}/resumed/${file}"
                  RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "${file} differs between the straight and the resumed run (see ${WORK_DIR})")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
