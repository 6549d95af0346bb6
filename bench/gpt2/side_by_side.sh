#!/usr/bin/env bash
# GPT-2 training speed, Infini against PyTorch on CPU: the same model (llm.c's GPT-2, random
# init), batch, AdamW and clipping, the same number of threads, in one run. Prints ms/step
# (mean after the first step) with the forward / backward / optimizer split, and the ratio.
#   bench/gpt2/side_by_side.sh [MODEL d12] [B 4] [T 64] [STEPS 10] [THREADS 2]
# Needs a release build (cmake --build --preset release --target gpt2) and Debian's PyTorch
# with a BLAS worth timing (apt-get install python3-torch libopenblas0-pthread: Debian builds
# torch against the system libblas, and the reference one is about 15x slower), importable from
# /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-d12} B=${2:-4} T=${3:-64} steps=${4:-10} threads=${5:-2}
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "side_by_side: PyTorch is missing: apt-get install python3-torch libopenblas0-pthread (for /usr/bin/python3)" >&2; exit 1; }
[ -x build/release/bin/gpt2 ] || { echo "side_by_side: build gpt2 first (cmake --build --preset release --target gpt2)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build/release/bin/gpt2 --model "$model" --input_bin tests/data/gpt2-tiny/train.bin --batch_size "$B" \
  --sequence_length "$T" --num_iteration "$steps" --learning_rate 6e-4 --beta2 0.95 --weight_decay 0.1 \
  --lr_schedule constant --grad_clip 1.0 --threads "$threads" --metrics_out "$work/infini.jsonl" >/dev/null
ours=$(awk -F'[:,}]' '/"loss"/ && NR > 1 { for (i = 1; i <= NF; i++) { gsub(/[ "{]/, "", $i) }
         for (i = 1; i < NF; i++) v[$i] = $(i + 1); n++; ms += v["ms"]; f += v["forward_ms"]; b += v["backward_ms"]; o += v["optimizer_ms"] }
       END { printf "%.1f %.1f %.1f %.1f", ms / n, f / n, b / n, o / n }' "$work/infini.jsonl")
theirs=$(/usr/bin/python3 bench/gpt2/gpt2_pytorch.py --model "$model" --batch_size "$B" --sequence_length "$T" \
  --steps "$steps" --threads "$threads" | tail -n1 |
  /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print('%.1f %.1f %.1f %.1f' % (d['ms'], d['forward_ms'], d['backward_ms'], d['optimizer_ms']))")
read -r ms f b o <<<"$ours"
read -r pms pf pb po <<<"$theirs"
echo "GPT-2 $model, B=$B, T=$T, $threads threads, mean of steps 1..$((steps - 1)):"
printf "  %-8s %9s ms/step (forward %s, backward %s, optimizer %s)\n" Infini "$ms" "$f" "$b" "$o" PyTorch "$pms" "$pf" "$pb" "$po"
awk -v a="$ms" -v b="$pms" 'BEGIN { printf "  Infini / PyTorch time: %.2f\n", a / b }'
