# cmake -DPROGRAM=<gpt2> -DDATA=<tests/data/gpt2-tiny> -DWORK_DIR=<dir> -DMPIRUN="mpirun|...options" -P check_profile.cmake
# --profile under mpirun -np 2 (pp = 2, 2 micro-batches of 16 tokens), step 1 recorded: each
# rank's file and the merged trace.json, a JSON document whose events
# include kernels, module forwards, backward nodes, 1F1B's F and B passes of both micro-batches,
# sends/receives with their bytes and waits, from both ranks (pids 0 and 1).
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ";" mpirun "${MPIRUN}")
execute_process(COMMAND ${mpirun} -np 2 "${PROGRAM}" --model custom --num_layers 2 --num_heads 2 --channels 32
                        --max_seq_len 64 --vocab_size 500 --input_bin "${DATA}/train.bin" --batch_size 1
                        --sequence_length 16 --total_batch_size 32 --num_iteration 3 --pipeline_parallel 2
                        --profile "${WORK_DIR}" --profile_steps 1
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "gpt2 --profile failed (${result}): ${err}")
endif()
if(NOT out MATCHES "profile: .*trace.json")
  message(FATAL_ERROR "gpt2 --profile did not say where the trace is:\n${out}")
endif()
foreach(file rank_0.json rank_1.json trace.json)
  if(NOT EXISTS "${WORK_DIR}/${file}")
    message(FATAL_ERROR "--profile wrote no ${file}")
  endif()
endforeach()
file(READ "${WORK_DIR}/trace.json" text)
string(JSON events LENGTH "${text}" traceEvents)  # a JSON document (an error otherwise)
if(events LESS 100)
  message(FATAL_ERROR "trace.json holds only ${events} events")
endif()
foreach(pattern "\"name\": \"process_name\", \"pid\": 0" "\"name\": \"process_name\", \"pid\": 1"
                "\"cat\": \"op\"" "\"cat\": \"module\"" "\"cat\": \"backward\"" "\"cat\": \"wait\""
                "\"name\": \"F 0.0\", \"cat\": \"pipeline\"" "\"name\": \"F 1.0\", \"cat\": \"pipeline\""
                "\"name\": \"B 0.0\", \"cat\": \"pipeline\"" "\"name\": \"B 1.0\", \"cat\": \"pipeline\""
                "\"cat\": \"comm\"[^\n]*\"bytes\": [1-9]")
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "trace.json has no event matching '${pattern}'")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
