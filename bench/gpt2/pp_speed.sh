#!/usr/bin/env bash
# Pipeline-parallel step time on one machine: GPT-2 (default d12) under `mpirun -np 2` (one
# thread per rank) with --pipeline_parallel 2 and each schedule (gpipe, 1f1b, zb-h1), 8
# micro-batches of one 64-token sequence per step (9 blocks on the first stage, 3 with the
# LM head on the second), and on one process with 2 threads for comparison (the whole batch at
# once, and as 8 accumulated micro-batches like the pipeline's). Prints each run's layout,
# mean step time and tokens/s (the trainers' metrics summaries, steps after the first).
#   bench/gpt2/pp_speed.sh [steps] [model flags ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
steps=${1:-5}
shift || true
model=("$@")
if [ ${#model[@]} -eq 0 ]; then model=(--model d12); fi
common=(--input_bin tests/data/gpt2-tiny/train.bin --sequence_length 64 --total_batch_size 512
        --num_iteration "$steps" --learning_rate 1e-4)

"$bin" "${model[@]}" "${common[@]}" --batch_size 8 --threads 2 --metrics_out "$work/one.jsonl" >/dev/null
summary "$work/one.jsonl" "one process, 2 threads"
"$bin" "${model[@]}" "${common[@]}" --batch_size 1 --threads 2 --metrics_out "$work/accumulate.jsonl" >/dev/null
summary "$work/accumulate.jsonl" "one process, 2 threads, 8 accumulated micro-batches of 1"
for schedule in gpipe 1f1b zb-h1; do
  "${mpirun[@]}" "$bin" "${model[@]}" "${common[@]}" --batch_size 1 --threads 1 --pipeline_parallel 2 --pipeline_blocks 9,3 \
    --pp_schedule "$schedule" --metrics_out "$work/$schedule.jsonl" >/dev/null
  summary "$work/$schedule.jsonl" "mpirun -np 2, pipeline parallel, $schedule"
done
