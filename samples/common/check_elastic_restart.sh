#!/usr/bin/env bash
# scripts/elastic_run brings a job back after a rank dies: gpt2 on gpt2-tiny under mpirun -np 2
# (data parallel) saving every 5 steps; one rank is SIGKILLed once the first run is past step
# 12; the launcher says why it restarts, the restart resumes from the newest checkpoint, and
# every step it runs has the loss of an uninterrupted run (bit-identical resume).
#   check_elastic_restart.sh ELASTIC_RUN GPT2 DATA_DIR WORK_DIR MPIRUN [MPIRUN_ARGS...]
set -euo pipefail
elastic=$1 gpt2=$2 data=$3 work=$4
shift 4
mpirun=("$@")
rm -rf "$work"
mkdir -p "$work"
flags=(--llmc_filepath "$data/model.bin" --input_bin "$data/train.bin" --batch_size 2 --sequence_length 32
       --total_batch_size 128 --num_iteration 150 --learning_rate 3e-3 --lr_schedule constant --warmup_steps 0
       --grad_clip 0)

"${mpirun[@]}" -np 2 "$gpt2" "${flags[@]}" --metrics_out "$work/plain.jsonl" > /dev/null

"$elastic" --max_restarts 2 -- "${mpirun[@]}" -np 2 "$gpt2" "${flags[@]}" --save "$work/ckpt" --save_interval 5 \
  --metrics_out "$work/elastic.jsonl" > "$work/out.txt" 2> "$work/err.txt" &
launcher=$!

# Past step 12 of the first run: SIGKILL one of its ranks (a gpt2 process of this work dir).
killed=""
for _ in $(seq 600); do
  if [ -f "$work/elastic.jsonl" ] && [ "$(grep -c '"step"' "$work/elastic.jsonl")" -gt 12 ]; then
    for pid in $(pgrep -x gpt2 || true); do
      if tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | grep -q -- "--save $work/ckpt"; then killed=$pid; fi
    done
    [ -n "$killed" ] && kill -9 "$killed"
    break
  fi
  sleep 0.05
done
status=0
wait "$launcher" || status=$?
fail() { echo "check_elastic_restart: $*" >&2; cat "$work/err.txt" >&2; exit 1; }
[ -n "$killed" ] || fail "the first run ended before a rank could be killed"
[ "$status" -eq 0 ] || fail "elastic_run exited $status"
grep -q "elastic_run: the job failed (exit [0-9]*); restart 1 of 2 from $work/ckpt at step [0-9]*" "$work/err.txt" ||
  fail "the launcher did not say why and from where it restarted"
grep -q "resumed from $work/ckpt at step" "$work/out.txt" || fail "the restart did not resume from the checkpoint"

# step -> loss of each run (the restart's lines last, so they win).
losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/p' "$1" | sort -n -k1,1 -s | awk '{l[$1] = $2} END {for (s in l) print s, l[s]}' | sort -n; }
losses "$work/plain.jsonl" > "$work/plain.txt"
losses "$work/elastic.jsonl" > "$work/elastic.txt"
[ "$(wc -l < "$work/elastic.txt")" -gt 0 ] || fail "no steps in the restarted run's metrics"
[ "$(tail -1 "$work/elastic.txt" | cut -d' ' -f1)" = 149 ] || fail "the restarted run did not reach the last step"
if ! join "$work/plain.txt" "$work/elastic.txt" | awk '$2 != $3 {print; bad = 1} END {exit bad}'; then
  fail "steps whose loss differs from the uninterrupted run's (step, uninterrupted, restarted) above"
fi
echo "check_elastic_restart: killed pid $killed; restarted and matched $(wc -l < "$work/elastic.txt") steps"
rm -rf "$work"
