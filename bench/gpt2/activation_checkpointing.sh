#!/usr/bin/env bash
# Activation checkpointing's trade: GPT-2 d12 on one process, fp32 AdamW, 4 sequences of 256
# tokens per step, 3 steps (or [steps]), with --activation_checkpointing none, selective and full. Prints
# each run's activation_bytes (what the forward pass left allocated for backward: saved
# activations and the logits), its peak bytes and its mean step time after the first, and the
# ratios of selective and full to none.
#   bench/gpt2/activation_checkpointing.sh [threads] [sequence_length] [steps]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
threads=${1:-0}

for mode in none selective full; do
  "$bin" --model d12 --input_bin tests/data/gpt2-tiny/train.bin --batch_size 4 --sequence_length "${2:-256}" --num_iteration "${3:-3}" \
    --learning_rate 1e-4 --threads "$threads" --activation_checkpointing "$mode" --metrics_out "$work/$mode.jsonl" >/dev/null
done
python3 - "$work/none.jsonl" "$work/selective.jsonl" "$work/full.jsonl" <<'PY'
import json, sys
runs = {}
for name, path in zip(["none", "selective", "full"], sys.argv[1:]):
    lines = [json.loads(l) for l in open(path)]
    steps = [l for l in lines if "activation_bytes" in l]
    summary = [l["summary"] for l in lines if "summary" in l][0]
    runs[name] = (max(s["activation_bytes"] for s in steps), summary["peak_bytes"], summary["mean_ms"])
for name, (act, peak, ms) in runs.items():
    print(f"{name:>9}: activation_bytes {act / 2**20:8.1f} MiB | peak {peak / 2**20:8.1f} MiB | {ms:8.1f} ms/step")
a0, p0, m0 = runs["none"]
for name in ["selective", "full"]:
    a1, p1, m1 = runs[name]
    print(f"{name} / none: activations {a1 / a0:.3f}x, peak {p1 / p0:.3f}x, step time {m1 / m0:.3f}x")
PY
