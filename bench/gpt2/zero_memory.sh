#!/usr/bin/env bash
# ZeRO's memory: GPT-2 d12 at dp = 4 (mpirun -np 4, one thread per rank), fp32 AdamW, one
# sequence of 64 tokens per rank and micro-batch, 2 micro-batches per step, 3 steps, with
# --zero_stage 0, 1, 2 and 3. Per rank, after the last step: allocated_bytes, i.e. what
# parameters, gradients, optimizer state and reducer buffers hold between steps (rank 0's; the
# ranks differ by a bucket's padding at most), the largest rank's peak, each against
# --zero_stage 0, and the mean step time after the first.
# MICRO_BATCHES=1 runs one micro-batch per step instead (256 tokens a step).
# With an argument p, the same under pipeline parallelism: dp = 4 / p x pp = p (1F1B), the same
# global batch (p times the micro-batches per data-parallel rank); each rank holds its stage's part.
#   bench/gpt2/zero_memory.sh [p]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
mpirun+=(--oversubscribe)
pp=${1:-1}
tokens=$((256 * ${MICRO_BATCHES:-2}))

for stage in 0 1 2 3; do
  "${mpirun[0]}" -np 4 "${mpirun[@]:3}" "$bin" --model d12 --input_bin tests/data/gpt2-tiny/train.bin --batch_size 1 \
    --sequence_length 64 --total_batch_size "$tokens" --num_iteration 3 --learning_rate 1e-4 --threads 1 \
    --zero_stage "$stage" --pipeline_parallel "$pp" --metrics_out "$work/zero$stage.jsonl" >/dev/null
done
python3 - "$work" <<'PY'
import json, sys
rows = {}
for stage in (0, 1, 2, 3):
    lines = [json.loads(l) for l in open(f"{sys.argv[1]}/zero{stage}.jsonl")]
    last = [l for l in lines if "allocated_bytes" in l][-1]
    summary = [l["summary"] for l in lines if "summary" in l][0]
    rows[stage] = (last["allocated_bytes"], summary["peak_bytes_max"], summary["mean_ms"])
for stage, (state, peak, ms) in rows.items():
    print(f"zero_stage {stage}: parameters + gradients + optimizer state + buffers {state / 2**20:8.1f} MiB = "
          f"{state / rows[0][0]:.3f}x | peak_bytes_max {peak / 2**20:8.1f} MiB = {peak / rows[0][1]:.3f}x | "
          f"{ms:8.1f} ms/step")
PY
