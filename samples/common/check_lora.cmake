# cmake -DPROGRAM=<gpt2|llama3> -DCOMPARE=<compare_losses> -DDATA=<tests/data/gpt2-tiny> -DMODEL_FLAGS="--flag|value|..."
#       -DTARGETS=<a,b,...> -DKEY=<a PEFT key the adapters must hold> -DWORK_DIR=<dir> -P check_lora.cmake
# LoRA through the trainer's flags, from one seed's random model:
#  1. 8 steps of --lora_rank 4 on TARGETS write the adapters (--lora_out) and the merged model
#     (--hf_out); the adapter file holds KEY and adapter_config.json PEFT's keys;
#  2. --lora_in (the same base, the adapters loaded) and --hf_model on the merged directory give
#     the same first loss (merged = base + adapters), which differs from the base's.
string(REPLACE "|" ";" model_flags "${MODEL_FLAGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/step_losses.cmake)
set(data --input_bin "${DATA}/train.bin" --batch_size 4 --sequence_length 32 --shuffle 0 --seed 7)

function(run name)
  execute_process(COMMAND "${PROGRAM}" ${data} ${ARGN} --metrics_out "${WORK_DIR}/${name}.jsonl"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} (${name}) failed (${result}): ${out} ${err}")
  endif()
  step_losses("${WORK_DIR}/${name}.jsonl" losses)
  list(GET losses 0 first)
  set(${name}_loss ${first} PARENT_SCOPE)
  set(${name}_out "${out}" PARENT_SCOPE)
endfunction()

run(train ${model_flags} --num_iteration 8 --learning_rate 3e-2 --lora_rank 4 --lora_alpha 8 --lora_targets ${TARGETS}
    --lora_out "${WORK_DIR}/adapter" --hf_out "${WORK_DIR}/merged")
if(NOT train_out MATCHES "LoRA: [0-9]+ adapters, [0-9]+ trainable parameters")
  message(FATAL_ERROR "the LoRA run did not report its adapters: ${train_out}")
endif()
file(READ "${WORK_DIR}/adapter/adapter_model.safetensors" header LIMIT 4096)
string(FIND "${header}" "\"${KEY}\"" at)
if(at EQUAL -1)
  message(FATAL_ERROR "adapter_model.safetensors holds no ${KEY}")
endif()
file(READ "${WORK_DIR}/adapter/adapter_config.json" config)
foreach(field peft_type r lora_alpha target_modules)
  string(JSON value ERROR_VARIABLE missing GET "${config}" ${field})
  if(missing)
    message(FATAL_ERROR "adapter_config.json has no ${field}: ${config}")
  endif()
endforeach()

run(base ${model_flags} --num_iteration 1 --learning_rate 0)
run(adapted ${model_flags} --num_iteration 1 --learning_rate 0 --lora_in "${WORK_DIR}/adapter")
run(merged --hf_model "${WORK_DIR}/merged" --num_iteration 1 --learning_rate 0)
# compare_losses: the merged model's first loss within 1e-5 of the adapted model's, the base's
# not within 1e-3 of it (the adapters changed the model).
file(WRITE "${WORK_DIR}/adapted.json" "{\"losses\": [${adapted_loss}], \"tolerance_abs\": 1e-5}\n")
execute_process(COMMAND "${COMPARE}" "${WORK_DIR}/adapted.json" "${WORK_DIR}/merged.jsonl" RESULT_VARIABLE result
                ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the merged model against base + adapters: ${err}")
endif()
file(WRITE "${WORK_DIR}/far.json" "{\"losses\": [${adapted_loss}], \"tolerance_abs\": 1e-3}\n")
execute_process(COMMAND "${COMPARE}" "${WORK_DIR}/far.json" "${WORK_DIR}/base.jsonl" RESULT_VARIABLE result
                OUTPUT_QUIET ERROR_QUIET)
if(result EQUAL 0)
  message(FATAL_ERROR "the adapters change nothing: first losses ${base_loss} (base) and ${adapted_loss}")
endif()
message(STATUS "first losses: base ${base_loss}, with the adapters ${adapted_loss}, merged ${merged_loss}")
