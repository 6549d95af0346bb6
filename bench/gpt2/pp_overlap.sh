#!/usr/bin/env bash
# How much of the data-parallel gradient reduction a pipeline hides in its cool-down: GPT-2 d12
# at dp = 2 x pp = 2 (mpirun -np 4, one thread per rank), 1F1B, 4 micro-batches of one
# 64-token sequence per data-parallel rank, fp32. Step 1 is recorded with --profile; for each
# rank, the share of its data-parallel collectives' time (launch to completion, group "dp...")
# that lies before the end of its last pipeline pass, i.e. under the pipeline's own work, and how
# long after that pass the last one completed (the reduction's exposed time).
#   bench/gpt2/pp_overlap.sh [schedule]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/gpt2/common.sh
mpirun+=(--oversubscribe)
schedule=${1:-1f1b}
"${mpirun[0]}" -np 4 "${mpirun[@]:3}" "$bin" --model d12 --input_bin tests/data/gpt2-tiny/train.bin --batch_size 1 \
  --sequence_length 64 --total_batch_size 512 --num_iteration 2 --learning_rate 1e-4 --threads 1 \
  --pipeline_parallel 2 --pp_schedule "$schedule" --profile "$work/profile" --profile_steps 1 >/dev/null
python3 - "$work/profile/trace.json" "$schedule" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
for pid in sorted({e["pid"] for e in events if e["ph"] != "M"}):
    mine = [e for e in events if e["pid"] == pid]
    passes = [e for e in mine if e.get("cat") == "pipeline"]
    end_of_passes = max(e["ts"] + e["dur"] for e in passes)
    begins = {e["id"]: e for e in mine if e["ph"] == "b" and e["args"].get("group", "").startswith("dp")}
    ends = {e["id"]: e["ts"] for e in mine if e["ph"] == "e" and e["id"] in begins}
    total = hidden = 0
    for i, b in begins.items():
        start, stop = b["ts"], ends[i]
        total += stop - start
        hidden += max(0, min(stop, end_of_passes) - start)
    name = [e["args"]["name"] for e in events if e["ph"] == "M" and e["pid"] == pid][0]
    exposed = max(0, max(ends.values()) - end_of_passes)
    print(f"{sys.argv[2]} {name}: {len(begins)} dp collectives, {total / 1000:.1f} ms from launch to completion, "
          f"{hidden / max(total, 1):.0%} of it before the last pipeline pass ended; the last completed "
          f"{exposed / 1000:.1f} ms after it")
PY
