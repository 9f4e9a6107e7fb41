#!/usr/bin/env bash
# The job files of jobs/ under the real mpirun and trident on CPU ranks, each step made longer
# than Open MPI's 1 s kill timeout (test hook TRIDENT_TEST_SLOW_STEP_MS): a stop signal, sent the
# way each scheduler sends it, must end the job with a checkpoint, status 0 and the job's requeue
# or resubmission. Only scontrol and qsub are stubs (they record), and srun, not installed here,
# is stood in for by mpirun behind the same trap.
#   job_signals.sh TRIDENT_TEST REPO_ROOT   (trident_test: the build with the test hooks)
set -uo pipefail
trident=$(realpath "$1") root=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stubs=$work/bin
mkdir -p "$stubs"
fail=0
check() {   # description, command...: the command must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

cat >"$stubs/scontrol" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$STUB_LOG/scontrol.log"
STUB
cat >"$stubs/qsub" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$STUB_LOG/qsub.log"
STUB
cat >"$stubs/srun" <<'STUB'
#!/usr/bin/env bash
# srun stand-in: the same number of ranks, started by the real mpirun.
n=1
while [[ $1 == --* ]]; do
  [[ $1 == --ntasks=* ]] && n=${1#--ntasks=}
  shift
done
exec mpirun -np "$n" "$@"
STUB
chmod +x "$stubs"/*
export PATH=$stubs:$PATH STUB_LOG=$work
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export TRIDENT=$trident TRIDENT_TEST_SLOW_STEP_MS=2000 OMP_NUM_THREADS=1 GPUS_PER_NODE=2 NODES=1
export CONFIG=inputs/models/tiny.cfg
args=(--backend cpu --data.train "$root/data/fortunes_byte" --model.seq_len 32 --model.n_layer 2
      --train.micro_batch_size 2 --train.global_batch_size 4 --train.steps 1000 --checkpoint.every 1000)
export EXTRA_ARGS="${args[*]}"
unset TP PP COMMAND LAUNCHER
cd "$root" || exit 1

# stop_job NAME HOW JOB...: starts JOB as its own process group and session, waits for trident's
# first step (in the metrics file: the log is buffered), sends SIGTERM to the job shell (HOW = shell) or to every process of the job (HOW =
# group, as PBS at the walltime and SLURM at a time limit do), then checks the outcome.
stop_job() {
  local name=$1 how=$2
  shift 2
  local log=$work/$name.log i status
  export CHECKPOINT_DIR=$work/ck_$name
  EXTRA_ARGS="$EXTRA_ARGS --log.metrics $work/$name.jsonl" setsid "$@" >"$log" 2>&1 &
  local job=$!
  for ((i = 0; i < 1200; ++i)); do
    [[ -s $work/$name.jsonl ]] && break
    sleep 0.1
  done
  if [[ $how == group ]]; then kill -TERM -- "-$job"; else kill -TERM "$job"; fi
  wait "$job"
  status=$?
  check "$name: SIGTERM to the $how ends the job with status 0 (got $status)" test "$status" -eq 0
  check "$name: trident saved on the stop signal" grep -q "stop signal received: checkpoint saved" "$log"
  local latest
  latest=$(cat "$CHECKPOINT_DIR/latest" 2>/dev/null)
  check "$name: latest names a checkpoint ($latest)" test -n "$latest" -a -f "$CHECKPOINT_DIR/$latest"
  check "$name: no partial checkpoint left" test -z "$(find "$CHECKPOINT_DIR" -name '*.tmp' 2>/dev/null)"
  [[ $fail -eq 0 ]] || cat "$log"
}

stop_job local shell jobs/local.sh
check "local.sh: says it stopped on SIGTERM" grep -q "stopped on SIGTERM with status 0" "$work/local.log"

SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR=$root SLURM_CPUS_ON_NODE=2 stop_job train_sbatch shell bash jobs/slurm/train.sbatch
check "train.sbatch: requeued" grep -q "^requeue 4242$" "$work/scontrol.log"
rm -f "$work/scontrol.log"
SLURM_JOB_ID=4343 SLURM_SUBMIT_DIR=$root SLURM_CPUS_ON_NODE=2 LAUNCHER=mpirun \
  stop_job multinode_sbatch group bash jobs/slurm/multinode.sbatch
check "multinode.sbatch (mpirun): requeued" grep -q "^requeue 4343$" "$work/scontrol.log"

printf 'localhost\nlocalhost\n' >"$work/nodefile"
PBS_NODEFILE=$work/nodefile PBS_JOBID=77.test PBS_O_WORKDIR=$root stop_job train_pbs group bash jobs/pbs/train.pbs
check "train.pbs: resubmitted" grep -q -- "-V $root/jobs/pbs/train.pbs" "$work/qsub.log"
exit $fail
