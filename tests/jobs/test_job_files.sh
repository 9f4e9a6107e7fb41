#!/usr/bin/env bash
# The job files in jobs/ launched with stub srun/mpirun/sbatch/qsub/nvidia-smi/scontrol first on
# PATH: each stub records its argv, and the launched command (rank count, binary, configs, layout
# flags, NCCL_NVLS_ENABLE=0) is checked; a stop signal reaches the launcher and requeues the job
# (tests/jobs/job_signals.sh runs the same stops under the real mpirun).
# Also bash -n and shellcheck on every job file.
#   test_job_files.sh REPO_ROOT
set -uo pipefail
root=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stubs=$work/bin log=$work/log
mkdir -p "$stubs" "$log"
fail=0

check() {   # description, command...: the command must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
# shellcheck disable=SC2317  # called through check()
has() { grep -qF -- "$2" "$1"; }   # file, fixed string
not_has() { ! grep -qF -- "$2" "$1"; }   # file, fixed string that must be absent
wait_for() {   # file: up to 10 s for it to appear
  local i
  for ((i = 0; i < 100; ++i)); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
}

# ---- stubs. A launcher stub records "argv" and its rank environment; with STUB_WAIT set it
# waits for SIGUSR1/SIGTERM, records it and exits 0, as trident does after saving a checkpoint.
cat >"$stubs/launcher" <<'EOF'
#!/usr/bin/env bash
name=$(basename "$0")
{ printf '%s\n' "$*"; echo "env NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"; } >"$STUB_LOG/$name.log"
[[ -n ${STUB_WAIT:-} ]] || exit 0
trap 'echo "signal USR1" >>"$STUB_LOG/$name.log"; exit 0' USR1
trap 'echo "signal TERM" >>"$STUB_LOG/$name.log"; exit 0' TERM
touch "$STUB_LOG/$name.waiting"
while :; do sleep 1 & wait $!; done
EOF
cat >"$stubs/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
for ((i = 0; i < ${STUB_GPUS:-4}; ++i)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-stub-$i)"; done
EOF
cat >"$stubs/scontrol" <<'EOF'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$STUB_LOG/scontrol.log"
EOF
# sbatch: the allocation its #SBATCH lines (or options before the script) ask for, as SLURM_*
# variables; then the script runs in this process, so the caller's $! is the batch shell.
cat >"$stubs/sbatch" <<'EOF'
#!/usr/bin/env bash
opts=()
while [[ $1 == --* ]]; do opts+=("$1"); shift; done
script=$1
shift
value() { local v; v=$(printf '%s\n' "${opts[@]}" $(sed -n 's/^#SBATCH //p' "$script") | sed -n "s/^--$1=//p" | head -1); echo "$v"; }
export SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR=$PWD SLURM_CPUS_ON_NODE=64
export SLURM_JOB_NUM_NODES=$(value nodes) SLURM_NTASKS_PER_NODE=$(value ntasks-per-node) SLURM_GPUS_ON_NODE=$(value gpus-per-node)
exec bash "$script" "$@"
EOF
# qsub: inside a job it only records (a resubmission); otherwise it builds $PBS_NODEFILE from the
# select line (chunks x mpiprocs) and runs the script in this process.
cat >"$stubs/qsub" <<'EOF'
#!/usr/bin/env bash
if [[ -n ${PBS_JOBID:-} ]]; then printf '%s\n' "$*" >>"$STUB_LOG/qsub.log"; exit 0; fi
script=${!#}
select=$(sed -n 's/^#PBS -l select=//p' "$script")
chunks=${select%%:*} procs=$(echo "$select" | sed -n 's/.*mpiprocs=\([0-9]*\).*/\1/p')
export PBS_NODEFILE=$STUB_LOG/nodefile PBS_JOBID=77.stub PBS_O_WORKDIR=$PWD
: >"$PBS_NODEFILE"
for ((n = 0; n < chunks; ++n)); do for ((p = 0; p < procs; ++p)); do echo "node$n" >>"$PBS_NODEFILE"; done; done
exec bash "$script"
EOF
chmod +x "$stubs"/*
ln -s launcher "$stubs/srun"
ln -s launcher "$stubs/mpirun"
export PATH=$stubs:$PATH STUB_LOG=$log TRIDENT=/opt/trident/bin/trident
unset TP PP NODES GPUS_PER_NODE COMMAND CHECKPOINT_DIR EXTRA_ARGS LAUNCHER NCCL_NVLS_ENABLE OMP_NUM_THREADS
cd "$root" || exit 1
configs="inputs/models/tiny.cfg inputs/runs/quickstart.cfg"
trident_part="/opt/trident/bin/trident train --config inputs/models/tiny.cfg --config inputs/runs/quickstart.cfg"

# ---- jobs/local.sh: ranks from nvidia-smi, mpirun with binding and -x NCCL_NVLS_ENABLE=0.
CONFIG=$configs TP=2 PP=2 EXTRA_ARGS="--train.steps 7" jobs/local.sh --log.every 3 >"$work/out" 2>&1
check "local.sh exits 0" test $? -eq 0
m=$log/mpirun.log
check "local.sh: 4 ranks from nvidia-smi" has "$m" "-np 4 "
check "local.sh: bound to cores" has "$m" "--bind-to core"
check "local.sh: mapped by socket" grep -qE -- "--map-by (ppr:[0-9]+:socket|slot):PE=[0-9]+" "$m"
check "local.sh: -x NCCL_NVLS_ENABLE=0" has "$m" "-x NCCL_NVLS_ENABLE=0"
check "local.sh: binary and configs" has "$m" "$trident_part"
check "local.sh: layout and extra flags" has "$m" "--parallel.tp 2 --parallel.pp 2 --train.steps 7 --log.every 3"
# trident reads no TRIDENT_* variable: the job's own (TRIDENT, TRIDENT_HOME) and test ones stay home.
TRIDENT_HOME=$root TRIDENT_TEST_STALL=0:1 CONFIG=$configs jobs/local.sh >"$work/out" 2>&1
check "local.sh: passes no TRIDENT_* variable to the ranks" not_has "$m" "-x TRIDENT"
GPUS_PER_NODE=2 CONFIG=inputs/models/tiny.cfg COMMAND=doctor jobs/local.sh >"$work/out" 2>&1
check "local.sh: GPUS_PER_NODE and COMMAND=doctor" has "$m" "-np 2 "
check "local.sh: doctor command" has "$m" "trident doctor --config inputs/models/tiny.cfg"
jobs/local.sh >"$work/out" 2>&1
check "local.sh without CONFIG fails, naming CONFIG" test $? -ne 0 -a "$(grep -c CONFIG "$work/out")" -gt 0

# ---- jobs/slurm/train.sbatch: srun with PMIx, 8 ranks of the #SBATCH defaults.
rm -f "$log"/*
CONFIG=$configs TP=4 CHECKPOINT_DIR=/scratch/ckpt sbatch jobs/slurm/train.sbatch --train.steps 9 >"$work/out" 2>&1
check "train.sbatch exits 0" test $? -eq 0
s=$log/srun.log
check "train.sbatch: srun --mpi=pmix" has "$s" "--mpi=pmix"
check "train.sbatch: 1 node x 8 ranks" has "$s" "--nodes=1 --ntasks-per-node=8 --ntasks=8"
check "train.sbatch: binary, configs, layout" has "$s" "$trident_part --parallel.tp 4 --checkpoint.dir /scratch/ckpt --train.steps 9"
check "train.sbatch: ranks see NCCL_NVLS_ENABLE=0" has "$s" "env NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=8"
check "train.sbatch: no requeue after a normal end" test ! -e "$log/scontrol.log"
check "train.sbatch: USR1 120 s before the limit, to the batch shell" grep -q "^#SBATCH --signal=B:USR1@120" jobs/slurm/train.sbatch
check "train.sbatch: requeueable" grep -q "^#SBATCH --requeue" jobs/slurm/train.sbatch

# A stop signal to the batch shell reaches srun as SIGUSR1 (SIGTERM would make mpirun kill the
# ranks), and the job requeues itself after trident's clean exit.
stop_test() {   # job file, signal, launcher name
  rm -f "$log"/*
  STUB_WAIT=1 CONFIG=$configs sbatch "$1" >"$work/out" 2>&1 &
  local job=$!
  wait_for "$log/$3.waiting"
  kill -"$2" "$job"
  wait "$job"
  check "$(basename "$1"): SIG$2 exits 0" test $? -eq 0
  check "$(basename "$1"): SIG$2 reaches $3 as SIGUSR1" has "$log/$3.log" "signal USR1"
  check "$(basename "$1"): SIG$2 requeues the job" has "$log/scontrol.log" "requeue 4242"
}
stop_test jobs/slurm/train.sbatch USR1 srun
stop_test jobs/slurm/train.sbatch TERM srun

# ---- jobs/slurm/multinode.sbatch: sbatch options override the #SBATCH lines; srun or mpirun.
rm -f "$log"/*
CONFIG=$configs TP=8 PP=2 sbatch --nodes=4 jobs/slurm/multinode.sbatch >"$work/out" 2>&1
check "multinode.sbatch exits 0" test $? -eq 0
check "multinode.sbatch: 4 nodes x 8 ranks by srun" has "$log/srun.log" "--mpi=pmix --nodes=4 --ntasks-per-node=8 --ntasks=32"
check "multinode.sbatch: layout" has "$log/srun.log" "$trident_part --parallel.tp 8 --parallel.pp 2"
LAUNCHER=mpirun CONFIG=$configs NCCL_IB_HCA=mlx5_0 sbatch --nodes=2 jobs/slurm/multinode.sbatch >"$work/out" 2>&1
check "multinode.sbatch LAUNCHER=mpirun: 16 ranks, 8 per node" has "$log/mpirun.log" "-np 16 --map-by ppr:8:node:PE=8"
check "multinode.sbatch LAUNCHER=mpirun: -x NCCL_NVLS_ENABLE=0" has "$log/mpirun.log" "-x NCCL_NVLS_ENABLE=0"
check "multinode.sbatch LAUNCHER=mpirun: exports NCCL_IB_HCA" has "$log/mpirun.log" "-x NCCL_IB_HCA"
stop_test jobs/slurm/multinode.sbatch USR1 srun

# ---- jobs/pbs/train.pbs: mpirun over $PBS_NODEFILE (2 chunks x 8 mpiprocs); resubmits after a stop.
rm -f "$log"/*
CONFIG=$configs PP=2 qsub -V jobs/pbs/train.pbs >"$work/out" 2>&1
check "train.pbs exits 0" test $? -eq 0
check "train.pbs: 16 ranks from the node file" has "$log/mpirun.log" "-np 16 --hostfile $log/nodefile --map-by ppr:8:node"
check "train.pbs: -x NCCL_NVLS_ENABLE=0" has "$log/mpirun.log" "-x NCCL_NVLS_ENABLE=0"
check "train.pbs: binary, configs, layout" has "$log/mpirun.log" "$trident_part --parallel.pp 2"
rm -f "$log"/*
STUB_WAIT=1 CONFIG=$configs qsub -V jobs/pbs/train.pbs >"$work/out" 2>&1 &
job=$!
wait_for "$log/mpirun.waiting"
kill -TERM "$job"
wait "$job"
check "train.pbs: SIGTERM exits 0" test $? -eq 0
check "train.pbs: SIGTERM reaches mpirun as SIGUSR1" has "$log/mpirun.log" "signal USR1"
check "train.pbs: resubmits itself" has "$log/qsub.log" "-V $root/jobs/pbs/train.pbs"

# ---- syntax and lint of every job file.
mapfile -t files < <(find jobs -type f | sort)
for f in "${files[@]}"; do check "bash -n $f" bash -n "$f"; done
if command -v shellcheck >/dev/null; then
  check "shellcheck jobs/" shellcheck -x "${files[@]}"
else
  echo "FAIL shellcheck is not installed (tools/install_deps.sh --test)"
  fail=1
fi
exit $fail
