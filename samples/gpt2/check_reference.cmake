# cmake -DPROGRAM=<gpt2> -DCOMPARE=<compare_losses> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir>
#       -DBATCH=<4|2|1> [-DDTYPE=bfloat16|float16 -DTOLERANCE=<abs>] [-DLAUNCHER="mpirun|...|-np|N"]
#       [-DEXTRA_FLAGS="--flag|value"] [-DHF_SCRIPT=<tests/nn/hf_reference.py>] -P check_reference.cmake
# llm.c's reference run (expected.json: 20 steps of B*T = 128 tokens) with micro-batches of
# BATCH sequences per rank, i.e. 4 / (BATCH * ranks) gradient-accumulation micro-steps: every
# loss within expected.json's tolerance, or TOLERANCE (for --dtype bfloat16 / float16, whose
# products round). LAUNCHER runs the program under mpirun (words separated by '|'). With
# HF_SCRIPT the run starts from a Hugging Face directory that script writes from model.bin
# (sharded), through --hf_model, instead of from model.bin.
if(NOT DTYPE)
  set(DTYPE float32)
endif()
string(REPLACE "|" ";" launcher "${LAUNCHER}")
string(REPLACE "|" ";" extra_flags "${EXTRA_FLAGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(model_flags --llmc_filepath "${DATA}/model.bin")
if(HF_SCRIPT)
  execute_process(COMMAND python3 "${HF_SCRIPT}" "${DATA}/model.bin" "${WORK_DIR}/hf" --shard_bytes 100000
                  RESULT_VARIABLE result ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${HF_SCRIPT} failed (${result}): ${err}")
  endif()
  set(model_flags --hf_model "${WORK_DIR}/hf")
endif()
execute_process(COMMAND ${launcher} "${PROGRAM}" ${extra_flags} ${model_flags} --input_bin "${DATA}/train.bin"
                        --batch_size ${BATCH} --sequence_length 32 --total_batch_size 128 --num_iteration 20
                        --learning_rate 3e-3 --weight_decay 0 --lr_schedule constant --warmup_steps 0 --grad_clip 0
                        --shuffle 0 --dtype ${DTYPE} --metrics_out "${WORK_DIR}/metrics.jsonl"
                RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} gpt2 --batch_size ${BATCH} ${EXTRA_FLAGS} failed (${result}): ${err}")
endif()
execute_process(COMMAND "${COMPARE}" "${DATA}/expected.json" "${WORK_DIR}/metrics.jsonl" ${TOLERANCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${LAUNCHER} --batch_size ${BATCH} ${EXTRA_FLAGS}: ${err}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
