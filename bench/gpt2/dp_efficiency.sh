#!/usr/bin/env bash
# Data-parallel efficiency on one machine: GPT-2 under `mpirun -np 2` (one thread per rank)
# against one process with 2 threads, the same global batch; prints both runs' tokens/s
# (the trainers' metrics summaries, steps after the first) and their ratio.
#   bench/gpt2/dp_efficiency.sh [steps] [model flags ...]
# Default model: 6 layers, 6 heads, 384 channels, GPT-2's vocabulary; 8 sequences of 64
# tokens per step (4 per rank).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/release/bin/gpt2
steps=${1:-10}
shift || true
model=("$@")
if [ ${#model[@]} -eq 0 ]; then
  model=(--model custom --num_layers 6 --num_heads 6 --channels 384 --max_seq_len 256 --vocab_size 50257)
fi
common=(--input_bin tests/data/gpt2-tiny/train.bin --sequence_length 64 --total_batch_size 512
        --num_iteration "$steps" --learning_rate 1e-4)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$bin" "${model[@]}" "${common[@]}" --batch_size 8 --threads 2 --metrics_out "$work/one.jsonl" >/dev/null
mpirun -np 2 --bind-to none --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none \
  -x OMP_NUM_THREADS=1 "$bin" "${model[@]}" "${common[@]}" --batch_size 4 --threads 1 \
  --metrics_out "$work/two.jsonl" >/dev/null

python3 - "$work/one.jsonl" "$work/two.jsonl" <<'PY'
import json, sys
def summary(path):
    for line in open(path):
        record = json.loads(line)
        if "summary" in record:
            return record["summary"]
one, two = summary(sys.argv[1]), summary(sys.argv[2])
print(json.dumps({"one_process_2_threads": {"layout": one["layout"], "tokens_per_s": one["tokens_per_s"], "mean_ms": one["mean_ms"]},
                  "mpirun_np2_1_thread": {"layout": two["layout"], "tokens_per_s": two["tokens_per_s"], "mean_ms": two["mean_ms"]},
                  "efficiency": round(two["tokens_per_s"] / one["tokens_per_s"], 3)}))
PY
