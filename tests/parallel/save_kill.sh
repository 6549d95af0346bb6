#!/usr/bin/env bash
# SIGKILL of one rank during a distributed save leaves the previous checkpoint loadable:
# mpirun must fail, and the directory must still hold step 1 whole (save_kill_probe.cpp).
#   save_kill.sh <save_kill_probe> <work dir> <mpirun and its options...>
set -euo pipefail
probe=$1 dir=$2
shift 2
rm -rf "$dir"
set +e
timeout -s KILL 120 "$@" -np 2 "$probe" save "$dir" >"$dir.log" 2>&1
code=$?
set -e
if [ "$code" -eq 0 ]; then
  echo "mpirun exited 0: the save went on without rank 1"; cat "$dir.log"; exit 1
fi
"$probe" check "$dir"
rm -rf "$dir" "$dir.log"
