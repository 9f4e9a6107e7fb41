# Shared by the job scripts in jobs/ (sourced, not run): the trident command line built from the
# job variables, the environment every rank gets, and a launcher wrapper that passes the
# scheduler's stop signals on to trident as SIGUSR1, on which it saves a checkpoint and exits 0.
# shellcheck shell=bash
#
# Job variables read here (each script lists them all at its top):
#   CONFIG          config files, space-separated (required)
#   TP, PP          parallel.tp, parallel.pp; unset: the config decides
#   COMMAND         trident subcommand: train (default) or doctor (same launch, checks the setup)
#   CHECKPOINT_DIR  checkpoint.dir; unset: the config decides
#   EXTRA_ARGS      more trident flags, space-separated, e.g. "--train.steps 500"
#   TRIDENT         the trident binary (default: build/trident of the repository)

# trident_command ROOT [ARG]...: sets the array TRIDENT_CMD to the trident command line; the
# arguments come last, so they override everything else.
trident_command() {
  local root=$1
  shift
  : "${CONFIG:?set CONFIG to one or more config files, e.g. CONFIG=inputs/models/gpt2-124m.cfg}"
  local configs extra file
  read -r -a configs <<<"$CONFIG"
  read -r -a extra <<<"${EXTRA_ARGS:-}"
  TRIDENT_CMD=("${TRIDENT:-$root/build/trident}" "${COMMAND:-train}")
  for file in "${configs[@]}"; do TRIDENT_CMD+=(--config "$file"); done
  if [[ -n ${TP:-} ]]; then TRIDENT_CMD+=(--parallel.tp "$TP"); fi
  if [[ -n ${PP:-} ]]; then TRIDENT_CMD+=(--parallel.pp "$PP"); fi
  if [[ -n ${CHECKPOINT_DIR:-} ]]; then TRIDENT_CMD+=(--checkpoint.dir "$CHECKPOINT_DIR"); fi
  TRIDENT_CMD+=("${extra[@]}" "$@")
}

# rank_environment THREADS: exports what every rank needs. NVLink SHARP (NCCL's multicast
# all-reduce) stays off unless NCCL_NVLS_ENABLE is set: it needs fabric-manager/IMEX support that
# shared nodes often lack, and a failing multicast setup can take a node's GPUs out of service.
rank_environment() {
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$1}
}

# mpirun_exports: sets the array MPIRUN_EXPORTS to Open MPI -x flags: NCCL_NVLS_ENABLE and
# OMP_NUM_THREADS with their values, and every NCCL_*, UCX_* and CUDA_* variable set here by name
# (mpirun, unlike srun, passes on only what it is told to). trident itself reads no environment
# variable: its settings are options.
mpirun_exports() {
  MPIRUN_EXPORTS=(-x "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE" -x "OMP_NUM_THREADS=$OMP_NUM_THREADS")
  local name
  while read -r name; do
    case $name in
      NCCL_NVLS_ENABLE) ;;
      NCCL_* | UCX_* | CUDA_*) MPIRUN_EXPORTS+=(-x "$name") ;;
    esac
  done < <(compgen -e)
}

# cores_per_rank RANKS: physical cores of this node divided among RANKS ranks (at least 1).
cores_per_rank() {
  local cores
  cores=$(lscpu -p=SOCKET,CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  [[ $cores -gt 0 ]] || cores=$(nproc)
  echo $((cores / $1 > 0 ? cores / $1 : 1))
}

# run_forwarding_signals CMD...: runs the launcher CMD in the background and, when this shell gets
# SIGUSR1 or SIGTERM, sends SIGUSR1 to the launcher; mpirun and srun forward it to every rank,
# where trident saves a checkpoint at the next step boundary and exits 0. SIGTERM itself must not
# reach mpirun: Open MPI answers it by killing the ranks odls_base_sigkill_timeout (1 s) after
# passing it on, before a step longer than that ends, and exits 1 even when they finished in time.
# So the launcher starts with SIGTERM blocked (perl's POSIX sets the mask, exec keeps it, mpirun
# leaves it, and the ranks start with a clear one): a scheduler that signals every process of the
# job (PBS at the walltime, SLURM at a time limit or preemption) reaches the ranks and this shell,
# not mpirun. Its final SIGKILL cannot be blocked. Sets STOP_SIGNAL to the signal that arrived, if
# any, and returns the launcher's exit status.
STOP_SIGNAL=
run_forwarding_signals() {
  local pid status
  perl -MPOSIX -e 'sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGTERM)); exec {$ARGV[0]} @ARGV or die "$ARGV[0]: $!\n"' \
    -- "$@" &
  pid=$!
  trap 'STOP_SIGNAL=USR1; kill -USR1 "$pid" 2>/dev/null || true' USR1
  trap 'STOP_SIGNAL=TERM; kill -USR1 "$pid" 2>/dev/null || true' TERM
  # `wait` returns early (status 128+n) when a trapped signal arrives: wait until the launcher
  # is gone, then once more for its own status, which bash keeps for an exited child.
  while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
  trap - USR1 TERM
  status=0
  wait "$pid" || status=$?
  return "$status"
}

# finish_job STATUS CMD...: exits with STATUS. When trident stopped cleanly on a signal (a
# checkpoint is saved), runs CMD first: the requeue or resubmission that continues the run, which
# resumes from the latest checkpoint (checkpoint.resume = auto).
finish_job() {
  local status=$1
  shift
  if [[ -n $STOP_SIGNAL && $status -eq 0 ]]; then
    echo "trident job: stopped on SIG$STOP_SIGNAL after saving a checkpoint; continuing with: $*"
    "$@" || echo "trident job: '$*' failed; resubmit the job by hand to continue" >&2
  fi
  exit "$status"
}
