#!/usr/bin/env bash
# Runs trident on this node under Open MPI's mpirun: one rank per GPU, ranks filled socket by
# socket and bound to their cores, NCCL_NVLS_ENABLE=0 exported to every rank. SIGTERM or SIGUSR1
# to this script (kill <pid>) stops the run cleanly: trident saves a checkpoint and the script exits 0.
#
#   CONFIG=inputs/models/gpt2-124m.cfg TP=2 jobs/local.sh [--section.key value]...
#   CONFIG=inputs/models/gpt2-124m.cfg COMMAND=doctor jobs/local.sh     # check the setup first
#
# Variables (arguments after the script name are appended to the trident command line):
#   CONFIG          config files, space-separated (required)
#   GPUS_PER_NODE   ranks to start (default: the GPUs nvidia-smi lists, 1 when there are none)
#   NODES           1 (several nodes: jobs/slurm/multinode.sbatch or jobs/pbs/train.pbs)
#   TP, PP          parallel.tp, parallel.pp; unset: the config decides (dp = ranks / (tp*pp))
#   COMMAND         trident subcommand: train (default) or doctor
#   CHECKPOINT_DIR  checkpoint.dir; unset: the config decides
#   EXTRA_ARGS      more trident flags, e.g. "--train.steps 500 --backend cpu"
#   TRIDENT         trident binary (default: build/trident next to this script's repository)
#   MPIRUN          the launcher (default: mpirun); MPIRUN_ARGS: more launcher flags, e.g.
#                   "--allow-run-as-root --oversubscribe" for CPU ranks in a container
#   MAP_BY          Open MPI --map-by value (default: ppr:<ranks per socket>:socket:PE=<cores
#                   per rank>, or slot:PE=<cores per rank> when ranks do not split evenly by socket)
#   BIND_TO         Open MPI --bind-to value (default: core; none to run more ranks than cores)
#   OMP_NUM_THREADS threads per rank (default: cores per rank)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=jobs/common.sh
source "$root/jobs/common.sh"

if [[ ${NODES:-1} -ne 1 ]]; then
  echo "jobs/local.sh runs on one node; for NODES=$NODES use jobs/slurm/multinode.sbatch or jobs/pbs/train.pbs" >&2
  exit 2
fi
if [[ -z ${GPUS_PER_NODE:-} ]]; then
  GPUS_PER_NODE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [[ $GPUS_PER_NODE -gt 0 ]] || GPUS_PER_NODE=1
fi
pe=$(cores_per_rank "$GPUS_PER_NODE")
sockets=$(lscpu -p=SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l)
[[ $sockets -gt 0 ]] || sockets=1
# GPUs 0..k-1 usually hang off socket 0: filling sockets in rank order keeps each rank near its GPU.
if ((GPUS_PER_NODE % sockets == 0)); then
  map_by=${MAP_BY:-ppr:$((GPUS_PER_NODE / sockets)):socket:PE=$pe}
else
  map_by=${MAP_BY:-slot:PE=$pe}
fi

rank_environment "$pe"
mpirun_exports
trident_command "$root" "$@"
read -r -a launcher_args <<<"${MPIRUN_ARGS:-}"
launch=("${MPIRUN:-mpirun}" -np "$GPUS_PER_NODE" --map-by "$map_by" --bind-to "${BIND_TO:-core}" --report-bindings
        "${MPIRUN_EXPORTS[@]}" "${launcher_args[@]}" "${TRIDENT_CMD[@]}")
echo "+ ${launch[*]}" >&2
status=0
run_forwarding_signals "${launch[@]}" || status=$?
[[ -z $STOP_SIGNAL ]] || echo "trident job: stopped on SIG$STOP_SIGNAL with status $status" >&2
exit "$status"
