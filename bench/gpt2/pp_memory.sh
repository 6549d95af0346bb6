#!/usr/bin/env bash
# Pipeline parallelism's memory: the largest rank's peak bytes (the trainers' peak_bytes_max:
# parameters, gradients, AdamW's state and activations) under --pipeline_parallel 2 and 4
# against one process, for GPT-2 d12 and a 16-layer GPT-2 of d12's width whose blocks
# dominate. fp32 AdamW, 4 sequences of 64 tokens per step (4 micro-batches of one under the
# pipeline, 1F1B), one thread per rank, 2 steps. The block split accounts for the embedding and
# head as Megatron's first/last-stage layer options do: fewer blocks on the first stage (the
# embedding and its AdamW state) and, at pp = 4, on the last (the head and its logits). Prints each run's peak_bytes_max, its ratio to one process's, and every rank's
# parameters and peak.
#   bench/gpt2/pp_memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
mpirun+=(--oversubscribe)
common=(--input_bin tests/data/gpt2-tiny/train.bin --sequence_length 64 --total_batch_size 256 --num_iteration 2
        --learning_rate 1e-4 --weight_decay 0.1)

peak() {
  python3 -c 'import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if "summary" in l][0]
print(s["peak_bytes_max"], s["parameters"], str(s["rank_parameters"]).replace(" ", ""), str([round(b / 2**20) for b in s["rank_peak_bytes"]]).replace(" ", ""))' "$1"
}

run() {  # name, model flags (one word, '|'-separated), blocks of each stage ("" for one process)
  local name=$1 model blocks=$3 ranks
  IFS='|' read -r -a model <<< "$2"
  if [ -z "$blocks" ]; then
    "$bin" "${model[@]}" "${common[@]}" --batch_size 4 --threads 1 --metrics_out "$work/$name.jsonl" >/dev/null
  else
    ranks=$(tr ',' '\n' <<< "$blocks" | wc -l)
    "${mpirun[0]}" -np "$ranks" "${mpirun[@]:3}" "$bin" "${model[@]}" "${common[@]}" --batch_size 1 --threads 1 \
      --pipeline_parallel "$ranks" --pipeline_blocks "$blocks" --metrics_out "$work/$name.jsonl" >/dev/null
  fi
}

report() {  # name, baseline name
  read -r bytes params ranks peaks < <(peak "$work/$1.jsonl")
  read -r base _ _ _ < <(peak "$work/$2.jsonl")
  python3 -c "import sys; print(f'{sys.argv[1]:>10}: peak_bytes_max {int(sys.argv[2]) / 2**20:8.1f} MiB = {int(sys.argv[2]) / int(sys.argv[3]):.3f}x one process; parameters {sys.argv[4]} of {sys.argv[5]}; rank peaks {sys.argv[6]} MiB')" \
    "$1" "$bytes" "$base" "$ranks" "$params" "$peaks"
}

d12=--model\|d12
d16=--model\|custom\|--num_layers\|16\|--num_heads\|12\|--channels\|768\|--max_seq_len\|1024\|--vocab_size\|50257
run d12_pp1 "$d12" ""
run d12_pp2 "$d12" 5,7
run d12_pp4 "$d12" 1,5,5,1
report d12_pp1 d12_pp1
report d12_pp2 d12_pp1
report d12_pp4 d12_pp1
run d16_pp1 "$d16" ""
run d16_pp2 "$d16" 7,9
run d16_pp4 "$d16" 2,6,6,2
report d16_pp1 d16_pp1
report d16_pp2 d16_pp1
report d16_pp4 d16_pp1
