#!/usr/bin/env bash
# ZeRO's memory: GPT-2 d12 at dp = 4 (mpirun -np 4, one thread per rank), fp32 AdamW, one
# sequence of 64 tokens per rank and micro-batch, 2 micro-batches per step, 2 steps, with
# --zero_stage 0, 1 and 2. Per rank, after the last step: allocated_bytes less the parameters'
# bytes, i.e. what gradients, optimizer state and reducer buffers hold between steps (rank 0's;
# the ranks differ by a bucket's padding at most), and the largest rank's peak; each against
# --zero_stage 0.
#   bench/gpt2/zero_memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
mpirun+=(--oversubscribe)

for stage in 0 1 2; do
  "${mpirun[0]}" -np 4 "${mpirun[@]:3}" "$bin" --model d12 --input_bin tests/data/gpt2-tiny/train.bin --batch_size 1 \
    --sequence_length 64 --total_batch_size 512 --num_iteration 2 --learning_rate 1e-4 --threads 1 \
    --zero_stage "$stage" --metrics_out "$work/zero$stage.jsonl" >/dev/null
done
python3 - "$work" <<'PY'
import json, sys
rows = {}
for stage in (0, 1, 2):
    lines = [json.loads(l) for l in open(f"{sys.argv[1]}/zero{stage}.jsonl")]
    last = [l for l in lines if "allocated_bytes" in l][-1]
    summary = [l["summary"] for l in lines if "summary" in l][0]
    state = last["allocated_bytes"] - 4 * summary["rank_parameters"][0]
    rows[stage] = (state, summary["peak_bytes_max"])
for stage, (state, peak) in rows.items():
    print(f"zero_stage {stage}: gradients + optimizer state + buffers {state / 2**20:8.1f} MiB = "
          f"{state / rows[0][0]:.3f}x | peak_bytes_max {peak / 2**20:8.1f} MiB = {peak / rows[0][1]:.3f}x")
PY
