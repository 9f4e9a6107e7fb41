#!/usr/bin/env bash
# Multi-node behaviour on one machine: each run of GPN consecutive ranks acts as one node. Put in
# front of the command under mpirun, e.g. 2x2 on 4 GPUs (tp 2 inside a node, dp 2 across):
#   mpirun -np 4 tools/perf/emulate_nodes.sh 2 -- trident bench --config M.cfg --parallel.tp 2
# It sets NCCL_HOSTID to "<host>-node<rank / GPN>", so that NCCL sees GPN-rank hosts and carries
# the traffic between them over its network transport (IB loopback where the machine has HCAs,
# else sockets: set NCCL_IB_DISABLE=1 to force them, NCCL_SOCKET_IFNAME=lo where no other
# interface exists) while P2P/SHM stay inside a node; and for `trident train`, `bench` and `doctor`
# it appends --parallel.gpus_per_node GPN (unless given), so that trident places and plans for the
# same nodes and keeps its peer-to-peer fast paths inside them. Other commands run unchanged (pass
# the option yourself where it applies). The rank comes from the MPI launcher's environment.
set -euo pipefail
die() { echo "emulate_nodes.sh: error: $*" >&2; exit 2; }
[[ $# -ge 3 && $2 == "--" ]] || die "usage: emulate_nodes.sh GPN -- COMMAND [ARGS...] (under mpirun)"
gpn=$1
shift 2
[[ $gpn =~ ^[0-9]+$ && $gpn -ge 1 ]] || die "GPN = $gpn: must be a whole number of ranks per node, at least 1"
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-}}}}
[[ -n $rank ]] || die "no rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID): run it under mpirun"
export NCCL_HOSTID="$(hostname)-node$((rank / gpn))"

cmd=("$@")
if [[ $(basename "${cmd[0]}") == trident && ${#cmd[@]} -ge 2 && ${cmd[1]} =~ ^(train|bench|doctor)$ ]]; then
  given=0
  for arg in "${cmd[@]}"; do [[ $arg == --parallel.gpus_per_node* ]] && given=1; done
  [[ $given -eq 1 ]] || cmd+=(--parallel.gpus_per_node "$gpn")
fi
exec "${cmd[@]}"
