# Sourced by the GPT-2 step-time scripts, from the repository root: the trainer, a scratch
# folder removed on exit, a two-rank mpirun with one OpenMP thread per rank, and
# `summary FILE RUN`, which prints a run's layout, mean step time and tokens/s from its
# --metrics_out file (the steps after the first).
bin=build/release/bin/gpt2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -np 2 --bind-to none --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none
        -x OMP_NUM_THREADS=1)

summary() {
  python3 -c 'import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if "summary" in l][0]
print(json.dumps({"run": sys.argv[2], "layout": s["layout"], "mean_ms": s["mean_ms"], "tokens_per_s": s["tokens_per_s"]}))' "$1" "$2"
}
