# Sourced by scripts/gpu_check and scripts/gpu_multi_check on the GPU machine, from the
# repository root: `source scripts/gpu_common.sh SECONDS`. Unpacks .gpu/gpu.tgz (an unpacked
# .gpu works too), points the loader at the staged libraries and the GPU machine's CUDA ones,
# and defines `step` under a deadline of SECONDS for the whole script.
OUT=${OUT:-gpu_check_logs}
mkdir -p "$OUT"
SP=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$SP/nvidia/cu13/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# The tests find their data at the path they were built with (/work/main/tests/data).
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
[ -f .gpu/gpu.tgz ] && tar xzf .gpu/gpu.tgz
bin=.gpu/bin

deadline=$1

step() {  # step NAME SECONDS COMMAND...: its output in $OUT/NAME.log, a verdict line in summary.log
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  (( limit > deadline - SECONDS )) && limit=$((deadline - SECONDS))
  if (( limit < 10 )); then echo "$name skipped: out of time" | tee -a "$OUT/summary.log"; return; fi
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - start)) s" | tee -a "$OUT/summary.log"
}
