#!/usr/bin/env bash
# Each command's --help lists the options it uses and none of the others: eval, generate, plan,
# doctor and bench do not list the training-only knobs, inspect lists its own options.
#   help.sh TRIDENT
set -uo pipefail
trident=$1
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# check COMMAND "present options..." "absent options..."
check() {
  local cmd=$1 key
  if ! "$trident" "$cmd" --help >"$out" 2>&1; then echo "FAIL: trident $cmd --help exited non-zero"; fail=1; return; fi
  for key in $2; do grep -qF -- "$key" "$out" || { echo "FAIL: trident $cmd --help lacks $key"; fail=1; }; done
  for key in $3; do grep -qF -- "$key" "$out" && { echo "FAIL: trident $cmd --help lists $key"; fail=1; }; done
  echo "ok: trident $cmd --help ($(wc -l <"$out") lines)"
}
check train "--config --train.lr --train.steps --data.train --checkpoint.dir --log.metrics --model.n_layer --parallel.zero
             --cuda.attention_kernels --cuda.sync_launches" ""
check eval "--checkpoint --config --data.val --data.split --train.eval_steps --train.global_batch_size --parallel.tp
            --cuda.attention_kernels" "--train.lr --train.steps --train.warmup_steps --checkpoint.dir --log.metrics --model."
check generate "--checkpoint --prompt --top-k --chat-template --parallel.tp --parallel.pp --cuda.attention_kernels" \
      "--train. --data. --model. --checkpoint. --log. --parallel.zero"
check plan "--gpus --gpu-memory-gib --hbm-gbps --model.n_layer --train.global_batch_size" \
      "--train.lr --train.steps --data. --checkpoint. --log. --cuda. --parallel.timeout_s"
check doctor "--allreduce-mib --io-mib --parallel.tp --checkpoint.dir --checkpoint.keep --cuda.sync_launches" \
      "--train.lr --train.steps --data. --log. --checkpoint.resume"
check bench "--bench.steps --bench.kernels --model.n_layer --parallel.tp --train.lr --cuda.gemm_autotune" \
      "--data. --checkpoint. --log. --train.eval_every --train.eval_steps"
check inspect "usage: trident inspect --checkpoint --help" "--train. --model. --parallel."
exit $fail
