#!/usr/bin/env bash
# Failure behaviour: one rank of a 3-rank job exits (0 or 3), aborts, is SIGKILLed or
# SIGTERMed, hangs outside MPI, or launches a different collective. Every case must end
# with mpirun exiting non-zero within INFINI_COMM_TIMEOUT + 30 s, a message naming the
# operation (all_reduce #2 of group 'world'), and no process of the job left behind.
#   failure.sh <failure_probe> <mpirun and its options...>
set -euo pipefail
probe=$1
shift
timeout_s=5
limit=$((timeout_s + 30))
failed=0

run_case() {
  local mode=$1 pattern=$2
  shift 2
  local log start elapsed code
  log=$(mktemp)
  start=$(date +%s%N)
  set +e
  # The outer timeout only guards the test itself against a hang beyond the limit.
  env INFINI_COMM_TIMEOUT=$timeout_s "$@" timeout -s KILL $((limit + 30)) "${MPIRUN[@]}" -np 3 \
    -x INFINI_COMM_TIMEOUT -x INFINI_COMM_DEBUG "$probe" "$mode" >"$log" 2>&1
  code=$?
  set -e
  elapsed=$((($(date +%s%N) - start) / 1000000))  # ms
  local verdict=ok
  if [ "$code" -eq 0 ]; then verdict="mpirun exited 0"; fi
  if [ "$elapsed" -gt $((limit * 1000)) ]; then verdict="took ${elapsed} ms (limit ${limit} s)"; fi
  if ! grep -Eq "$pattern" "$log"; then verdict="no message matching /$pattern/"; fi
  sleep 1
  if pgrep -f "$probe $mode" >/dev/null; then
    verdict="processes left behind: $(pgrep -f "$probe $mode" | tr '\n' ' ')"
    pkill -KILL -f "$probe $mode" || true
  fi
  printf 'failure %-8s exit %3d after %6d ms: %s\n' "$mode" "$code" "$elapsed" "$verdict"
  if [ "$verdict" != ok ]; then
    failed=1
    sed 's/^/    | /' "$log" | tail -40
  fi
  rm -f "$log"
}

MPIRUN=("$@")
# Survivors either time out (CommError naming the operation) or are terminated by mpirun
# after a rank died (the flight recorder names the pending operation).
named='all_reduce( #2 group=world|: timed out after [0-9.]+ s: operation #2 of group .world.)'
run_case exit0 "$named" INFINI_COMM_DEBUG=0
run_case exit3 "$named" INFINI_COMM_DEBUG=0
run_case abort "$named" INFINI_COMM_DEBUG=0
run_case sigkill "$named" INFINI_COMM_DEBUG=0
run_case sigterm "$named" INFINI_COMM_DEBUG=0
# The hang case also writes the flight recorder into INFINI_FLIGHT_RECORDER_DIR.
recorder_dir=$(mktemp -d)
run_case hang "all_reduce: timed out after 5 s: operation #2 of group 'world'" INFINI_COMM_DEBUG=0 \
  INFINI_FLIGHT_RECORDER_DIR="$recorder_dir"
if grep -q "rank 0 all_reduce #2 group=world .*state=timed out" "$recorder_dir/rank_0.txt" 2>/dev/null &&
   grep -q "rank 1 all_reduce #1 group=world .*state=completed" "$recorder_dir/rank_1.txt" 2>/dev/null; then
  echo "failure hang     flight recorder files: ok"
else
  echo "failure hang     flight recorder files in INFINI_FLIGHT_RECORDER_DIR: missing or wrong"
  head -5 "$recorder_dir"/* || true
  failed=1
fi
rm -rf "$recorder_dir"
run_case call_timeout "all_reduce: timed out after 1 s: operation #2 of group 'world'" INFINI_COMM_DEBUG=0 \
  INFINI_COMM_TIMEOUT=600
run_case mismatch "all_reduce( #2 group=world|: timed out after [0-9.]+ s: operation #2 of group .world.)" INFINI_COMM_DEBUG=0
run_case mismatch "launched different collectives: rank [02] calls 'all_reduce #2 float32\[4\] all, sum' but rank 1 calls 'broadcast #2 float32\[4\] root 0'" INFINI_COMM_DEBUG=1
exit $failed
