#!/usr/bin/env bash
# Tensor-parallel step time on one machine: GPT-2 (default d12) on one process with 2 threads,
# then under `mpirun -np 2` (one thread per rank) with --tensor_parallel 2, without and with
# --sequence_parallel 1, and with plain data parallelism for comparison; the same global batch
# of 4 sequences of 64 tokens. Prints each run's layout, mean step time and tokens/s (the
# trainers' metrics summaries, steps after the first).
#   bench/gpt2/tp_speed.sh [steps] [model flags ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
steps=${1:-5}
shift || true
model=("$@")
if [ ${#model[@]} -eq 0 ]; then model=(--model d12); fi
common=(--input_bin tests/data/gpt2-tiny/train.bin --sequence_length 64 --total_batch_size 256
        --num_iteration "$steps" --learning_rate 1e-4)

"$bin" "${model[@]}" "${common[@]}" --batch_size 4 --threads 2 --metrics_out "$work/one.jsonl" >/dev/null
summary "$work/one.jsonl" "one process, 2 threads"
"${mpirun[@]}" "$bin" "${model[@]}" "${common[@]}" --batch_size 4 --threads 1 --tensor_parallel 2 \
  --metrics_out "$work/tp.jsonl" >/dev/null
summary "$work/tp.jsonl" "mpirun -np 2, tensor parallel"
"${mpirun[@]}" "$bin" "${model[@]}" "${common[@]}" --batch_size 4 --threads 1 --tensor_parallel 2 \
  --sequence_parallel 1 --metrics_out "$work/sp.jsonl" >/dev/null
summary "$work/sp.jsonl" "mpirun -np 2, tensor + sequence parallel"
"${mpirun[@]}" "$bin" "${model[@]}" "${common[@]}" --batch_size 2 --threads 1 --metrics_out "$work/dp.jsonl" >/dev/null
summary "$work/dp.jsonl" "mpirun -np 2, data parallel"
