#!/usr/bin/env bash
# parallel.gpus_per_node on 4 CPU ranks: two emulated nodes of 2 (given by tools/perf/emulate_nodes.sh)
# are reported with the axes inside and across them (tp 2 inside, dp 2 across), parallel.auto
# plans for 2 ranks per node, and values that do not divide the ranks or are negative stop with
# one line naming the option (exit 2).
#   gpus_per_node.sh TRIDENT REPO_ROOT MPIRUN ARGS... (ending in -np 4)
set -uo pipefail
trident=$1 root=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
train=("$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu --data.train "$root/data/fortunes_byte"
       --train.steps 1 --model.seq_len 32)
fail() { cat "$out"; echo "FAIL: $*"; exit 1; }

# Through the launcher, which passes --parallel.gpus_per_node 2 on (and sets NCCL_HOSTID, unused by CPU ranks).
"$@" "$root/tools/perf/emulate_nodes.sh" 2 -- "${train[@]}" --parallel.tp 2 >"$out" 2>&1 ||
  fail "tp 2 under emulate_nodes.sh 2 exited $?"
grep -qx "nodes: 2 of 2 ranks (parallel.gpus_per_node = 2, on 1 machine); tp inside a node, dp across nodes" "$out" ||
  fail "no node layout line with tp inside, dp across"

"$@" "${train[@]}" --parallel.auto true --parallel.gpus_per_node 2 >"$out" 2>&1 || fail "parallel.auto exited $?"
grep -q "^parallel.auto: .*, 2 ranks per node" "$out" || fail "parallel.auto did not plan for 2 ranks per node"
grep -q "^nodes: 2 of 2 ranks (parallel.gpus_per_node = 2" "$out" || fail "no node layout line under parallel.auto"

"$@" "${train[@]}" >"$out" 2>&1 || fail "the default exited $?"
grep -q "^nodes: 1 of 4 ranks (the machines); dp inside a node" "$out" || fail "the default is not one node of 4"

# trident plan takes the config's nodes where --gpus-per-node is not given.
"$trident" plan --config "$root/inputs/models/tiny.cfg" --gpus 4 --parallel.gpus_per_node 2 >"$out" 2>&1 ||
  fail "trident plan exited $?"
grep -q "^hardware: 4 GPUs, 2 per node" "$out" || fail "trident plan did not plan for 2 GPUs per node"

for bad in 3 -1; do
  "$@" "${train[@]}" --parallel.gpus_per_node "$bad" >"$out" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "gpus_per_node $bad: exit $rc, expected 2"
  [[ $(grep -c "error: parallel.gpus_per_node = $bad: must" "$out") -ge 1 ]] || fail "gpus_per_node $bad: no one-line error"
done
echo "ok: parallel.gpus_per_node reported, planned for and validated"
