#!/usr/bin/env bash
# LoRA against full fine-tuning: GPT-2 d12 (random init: the cost does not depend on the
# weights) at B = 4, T = 64, one process, 6 steps of AdamW each, back to back in one run:
# full fine-tuning, then LoRA r = 8 on c_attn (PEFT's default for GPT-2) and on every linear
# layer of the blocks (c_attn, c_proj, c_fc). Prints per run the trainable parameters, the
# optimizer state's bytes (AdamW's two moments), the peak allocated bytes and the mean step time
# after the first.
#   bench/gpt2/lora.sh [threads]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
threads=${1:-0}

run() {
  local name=$1
  shift
  "$bin" --model d12 --input_bin tests/data/gpt2-tiny/train.bin --batch_size 4 --sequence_length 64 --num_iteration 6 \
    --learning_rate 1e-4 --threads "$threads" --metrics_out "$work/$name.jsonl" "$@" >"$work/$name.log"
}
run full
run lora_c_attn --lora_rank 8 --lora_alpha 16 --lora_targets c_attn
run lora_all --lora_rank 8 --lora_alpha 16 --lora_targets c_attn,c_proj,c_fc
python3 - "$work" <<'PY'
import json, re, sys
rows = {}
for name in ("full", "lora_c_attn", "lora_all"):
    summary = [json.loads(l)["summary"] for l in open(f"{sys.argv[1]}/{name}.jsonl") if "summary" in l][0]
    log = open(f"{sys.argv[1]}/{name}.log").read()
    m = re.search(r"(\d+) trainable parameters", log)
    trainable = int(m.group(1)) if m else summary["parameters"]
    rows[name] = (trainable, summary["optimizer_bytes"], summary["peak_bytes"], summary["mean_ms"])
full = rows["full"]
for name, (trainable, opt, peak, ms) in rows.items():
    print(json.dumps({"run": name, "trainable": trainable, "optimizer_bytes": opt,
                      "optimizer_vs_full": round(opt / full[1], 5), "peak_bytes": peak,
                      "peak_vs_full": round(peak / full[2], 3), "mean_ms": round(ms, 1),
                      "time_vs_full": round(ms / full[3], 3)}))
PY
