#!/usr/bin/env bash
# multihost.sh <program> [args...]
#
# Runs `mpirun -np 4` of <program> on two simulated hosts (2 slots each) that share no filesystem with the
# build tree, and exits with mpirun's exit code (124 when MULTIHOST_TIMEOUT, default 300 s, runs out).
# Exits 77 with "multihost: skipped: <reason>" when it cannot simulate hosts (not root, no `ip netns`/`unshare`).
# MULTIHOST_MPIRUN_ARGS (word-split) adds mpirun options, e.g. "--debug-daemons" or "--mca plm_base_verbose 5".
#
# Layout (all of it private to this run; names carry $$, everything is removed on exit):
#
#     netns mh<pid>L  "launcher"  bridge mhbr<pid>, 10.213.N.1   <- mpirun runs here
#        |-- veth mhv<pid>a <-> mhe<pid>a  netns mh<pid>A  "fakehost1"  10.213.N.11  (2 slots)
#        '-- veth mhv<pid>b <-> mhe<pid>b  netns mh<pid>B  "fakehost2"  10.213.N.12  (2 slots)
#
# Why mpirun runs in its own launcher namespace, not on a fake host and not in the root namespace:
#   - In the root namespace it would need an address on the host's real network stack; the launcher namespace keeps
#     every address and every packet on the bridge between our namespaces.
#   - On a fake host it could not read the program (that host hides the build tree), and mpirun would treat that
#     host as local and start its ranks itself, so half the job would not go through the rsh agent and the
#     preload path this test is about.
#   The launcher sees the real filesystem (it is the "submit host"); it is not in the hostfile, so no rank runs there.
#
# How a fake host hides the shared disk: the rsh agent starts orted inside the host's network namespace and in new
# mount, UTS and PID namespaces with its own hostname, its own tmpfs /tmp and /dev/shm, and an empty tmpfs mounted
# over /work and over the program's directory. The ranks therefore get the executable only through --preload-binary and the
# shared libraries it loads from the hidden directories only through --preload-files; LD_LIBRARY_PATH points the
# loader at the directory those files land in.
# shellcheck disable=SC2317  # cleanup and its helpers run from the EXIT trap
set -euo pipefail

readonly timeout_s=${MULTIHOST_TIMEOUT:-300}
readonly id=$$
readonly net="10.213.$((id % 250 + 1))"  # private /24, used only inside our namespaces
readonly ns_launch="mh${id}L" ns_a="mh${id}A" ns_b="mh${id}B"
readonly bridge="mhbr${id}"
state_dir=""   # agent + hostfile; outside /tmp because every fake host has a private /tmp
launch_pid=""  # pid of the background job that runs mpirun, while it runs
mpirun_cmd=()  # the mpirun command line, built by build_mpirun_command

skip() { echo "multihost: skipped: $*"; exit 77; }
die() { echo "multihost: $*" >&2; exit 2; }

# Skips unless we can create network, mount and UTS namespaces and have what the run needs.
check_prerequisites() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
  local cmd
  for cmd in ip unshare mpirun timeout ldd; do
    command -v "$cmd" >/dev/null || skip "$cmd not found"
  done
  ip netns list >/dev/null 2>&1 || skip "'ip netns' is not supported"
  unshare --net --uts --pid --mount-proc true 2>/dev/null ||
    skip "unshare --net --uts --pid --mount-proc fails (no CAP_SYS_ADMIN?)"
}

# Removes everything this run created; runs on every exit (success, failure, timeout, signal).
# Each fake host and the launcher are PID namespaces (see write_agent and the launch in main), so once the launcher's
# PID 1 is gone the kernel has killed and reaped every orted and rank; this only has work left after a signal.
cleanup() {
  local ns
  for ns in "$ns_launch" "$ns_a" "$ns_b"; do
    [ -e "/run/netns/$ns" ] || continue
    stop_namespace_processes "$ns"
    ip netns delete "$ns" 2>/dev/null || true  # also destroys the veths and the bridge inside it
  done
  if [ -n "$launch_pid" ]; then wait "$launch_pid" 2>/dev/null || true; fi
  if [ -n "$state_dir" ]; then rm -rf "$state_dir"; fi
}

# Stops, by pid, what is left in network namespace NS; all of it was started by this run, since nothing else enters
# our namespaces. SIGTERM first (timeout passes it to mpirun, which then shuts the job down), SIGKILL after 3 s.
stop_namespace_processes() {
  local ns=$1 pids signal=TERM tick
  for tick in $(seq 60); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    if [ "$tick" -gt 30 ]; then signal=KILL; fi
    # shellcheck disable=SC2086  # one pid per word
    kill -"$signal" $pids 2>/dev/null || true
    sleep 0.1
  done
  echo "multihost: processes still in namespace $ns: $pids" >&2
}

# Creates the three namespaces, the bridge in the launcher namespace and one veth pair per fake host. What the
# kernel may lack (network namespaces, bridges, veths) is a skip, not a failure.
make_network() {
  local ns
  for ns in "$ns_launch" "$ns_a" "$ns_b"; do
    ip netns add "$ns" 2>/dev/null || skip "cannot create network namespace $ns"
    ip -n "$ns" link set lo up
  done
  ip -n "$ns_launch" link add "$bridge" type bridge 2>/dev/null || skip "no bridge support in the kernel"
  ip -n "$ns_launch" addr add "$net.1/24" dev "$bridge"
  ip -n "$ns_launch" link set "$bridge" up
  attach_host "$ns_a" a 11
  attach_host "$ns_b" b 12
}

# attach_host NS SUFFIX HOST_OCTET: veth from the launcher's bridge into NS, address $net.HOST_OCTET there.
attach_host() {
  local ns=$1 suffix=$2 octet=$3
  local outer="mhv${id}${suffix}" inner="mhe${id}${suffix}"
  ip -n "$ns_launch" link add "$outer" type veth peer name "$inner" netns "$ns" 2>/dev/null ||
    skip "no veth support in the kernel"
  ip -n "$ns_launch" link set "$outer" master "$bridge" up
  ip -n "$ns" addr add "$net.$octet/24" dev "$inner"
  ip -n "$ns" link set "$inner" up
}

# Prints the directories a fake host must not see: /work and the program's directory, minus nested duplicates.
# System directories are never hidden (orted lives there), nor is anything under /tmp (each fake host has an empty
# /tmp of its own already). The agent directory stays visible: orted checks that the plm_rsh_agent path it is passed
# exists, and dies if it does not, even with plm_rsh_no_tree_spawn.
hidden_dirs() {
  local program=$1 dir
  for dir in /work "$(dirname "$program")"; do
    [ -d "$dir" ] || continue
    case "$dir" in
      / | /usr | /usr/* | /bin | /bin/* | /sbin | /sbin/* | /lib* | /etc | /etc/* | /tmp | /tmp/*) ;;
      *) echo "$dir" ;;
    esac
  done | sort -u | awk 'NR == 1 || index($0 "/", last "/") != 1 { print; last = $0 }'
}

# Prints, comma-separated, the shared libraries of PROGRAM that a fake host cannot see (under a hidden directory or
# under /tmp), by the paths ldd shows, so that each shipped file keeps the soname the loader asks for.
libraries_to_ship() {
  local program=$1 hidden=$2 lib dir out=""
  for lib in $( (ldd "$program" 2>/dev/null || true) | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
    for dir in $hidden /tmp; do
      case "$lib" in "$dir"/*) out+="${out:+,}$lib"; break ;; esac
    done
  done
  echo "$out"
}

# Writes the rsh agent and the hostfile. mpirun calls the agent as `agent HOST_ADDRESS ORTED_COMMAND...`, like ssh;
# the command is shell syntax (assignments, quoted URIs), so the agent runs it with sh -c, as sshd would.
#
# OpenMPI 4.1 quirk the agent works around: with --preload-binary, orted stores the shipped files in its job-family
# session directory /tmp/ompi.<host>.<uid>/jf.<job family> (job family = ess_base_jobid >> 16), symlinks them into
# the directory each rank starts in, and renames the program to "./<name>"; but before forking it checks that
# "./<name>" is executable relative to orted's OWN cwd (orte_util_check_context_app), which fails everywhere else
# ("could not access or execute an executable"). orted recreates its session directories at start-up, so it cannot
# be started inside them; instead it starts in a private directory holding a symlink ./<name> -> the shipped file.
write_agent() {
  local hidden=$1 program_name=$2
  {
    echo '#!/bin/bash'
    echo "# rsh agent written by multihost.sh (pid $id); removed when that script exits."
    printf 'addr_a=%q ns_a=%q addr_b=%q ns_b=%q hidden=%q program_name=%q\n' \
      "$net.11" "$ns_a" "$net.12" "$ns_b" "$hidden" "$program_name"
    cat <<'AGENT'
set -eu
host=$1; shift
case "$host" in
  "$addr_a") ns=$ns_a; name=fakehost1 ;;
  "$addr_b") ns=$ns_b; name=fakehost2 ;;
  *) echo "multihost agent: unknown host $host" >&2; exit 255 ;;
esac
[[ "$*" =~ ess_base_jobid\ \"?([0-9]+) ]] || { echo "multihost agent: no ess_base_jobid in: $*" >&2; exit 255; }
shipped=/tmp/ompi.$name.$(id -u)/jf.$((BASH_REMATCH[1] >> 16))/$program_name
# New UTS, mount and PID namespaces: own hostname, private /tmp and /dev/shm, empty tmpfs mounts over the hidden
# directories, own /proc. The cd comes after the mounts, so no cwd still reaches into the hidden tree. orted is
# (or runs under) PID 1 of the fake host, so ranks orphaned by a dying orted are reaped there and killed with it
# (--kill-child also takes the host down when mpirun kills this agent). Like sshd, start from a fresh environment:
# nothing of mpirun's (TMPDIR, OMPI_*) reaches orted except through its command line.
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/root}" \
  ip netns exec "$ns" unshare --uts --mount --propagation private --pid --mount-proc --kill-child /bin/sh -c '
  set -e
  hostname "$1"
  mount -t tmpfs -o mode=1777 mhtmp /tmp
  mount -t tmpfs -o mode=1777 mhshm /dev/shm
  for d in $2; do mount -t tmpfs -o mode=0755,size=1m mhhidden "$d"; done
  mkdir -m 0700 /tmp/orted-cwd
  ln -s "$3" "/tmp/orted-cwd/$4"
  cd /tmp/orted-cwd
  exec /bin/sh -c "$5"' agent "$name" "$hidden" "$shipped" "$program_name" "$*"
AGENT
  } >"$state_dir/agent"
  chmod 755 "$state_dir/agent"
  printf '%s slots=2\n' "$net.11" "$net.12" >"$state_dir/hostfile"
}

# Builds mpirun_cmd: mpirun with 2 ranks on each fake host.
# Shipped files land flat (filem_raw_flatten_directory_trees) in the directory each rank starts in (its session
# directory under the fake host's /tmp), so LD_LIBRARY_PATH=. finds the shipped libraries there.
# --leave-session-attached keeps each orted a child of its agent (and so of mpirun) instead of letting it daemonize
# and be re-parented to init, where it could outlive this script as a zombie; orted's errors also reach our stderr.
build_mpirun_command() {
  local program=$1 libs=$2
  shift 2
  local preload=(--preload-binary) extra=()
  if [ -n "$libs" ]; then preload+=(--preload-files "$libs"); fi
  read -r -a extra <<<"${MULTIHOST_MPIRUN_ARGS:-}"
  # shellcheck disable=SC2054  # the commas are inside MCA values
  mpirun_cmd=(
    mpirun -np 4 --hostfile "$state_dir/hostfile"
    --mca plm_rsh_agent "$state_dir/agent" --mca plm_rsh_no_tree_spawn 1 --leave-session-attached
    --mca oob_tcp_if_include "$net.0/24"
    --mca pml ob1 --mca btl tcp,self,vader --mca btl_tcp_if_include "$net.0/24"
    --mca btl_vader_single_copy_mechanism none  # as in tests/parallel/CMakeLists.txt: containers may forbid CMA
    "${preload[@]}" --mca filem_raw_flatten_directory_trees 1
    -x OMP_NUM_THREADS=1 -x "LD_LIBRARY_PATH=.${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "${extra[@]}"
    "$program" "$@"
  )
}

main() {
  [ $# -ge 1 ] || { echo "usage: $0 <program> [args...]" >&2; exit 2; }
  check_prerequisites
  local program
  program=$(command -v "$1" || true)
  if [ -z "$program" ] || [ ! -x "$program" ]; then die "program not found: $1"; fi
  program=$(readlink -f "$program")
  shift

  trap cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  state_dir=$(mktemp -d /var/tmp/multihost.XXXXXX)
  local hidden libs
  hidden=$(hidden_dirs "$program" | tr '\n' ' ')
  libs=$(libraries_to_ship "$program" "$hidden")
  make_network
  write_agent "$hidden" "$(basename "$program")"
  echo "multihost: $program on fakehost1=$net.11 fakehost2=$net.12 (hidden: ${hidden% }; shipped libs: ${libs:-none})"

  # The launcher is a PID namespace whose PID 1 is timeout (which passes SIGTERM on to mpirun): when it exits, the
  # kernel kills and reaps everything still in it, fake hosts included, so no process outlives the run, not even
  # as a zombie waiting for init. TMPDIR puts mpirun's session directory in state_dir, so it is removed even when
  # mpirun is killed before it can clean up (the agent gives orted a fresh environment, so orted's stays /tmp).
  # The launch runs in the background plus `wait`, so that a signal to this script runs the traps at once.
  build_mpirun_command "$program" "$libs" "$@"
  mkdir "$state_dir/tmp"
  local rc=0
  TMPDIR="$state_dir/tmp" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$ns_launch" unshare --pid --mount-proc --kill-child \
    timeout -k 10 "$timeout_s" "${mpirun_cmd[@]}" &
  launch_pid=$!
  wait "$launch_pid" || rc=$?
  launch_pid=""
  if [ "$rc" -eq 124 ]; then echo "multihost: mpirun timed out after $timeout_s s" >&2; fi
  exit "$rc"
}

main "$@"
