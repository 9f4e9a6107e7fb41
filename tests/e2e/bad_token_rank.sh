#!/usr/bin/env bash
# A token id >= model.vocab_size that only one data-parallel rank reads: that rank must print the
# error (its rank, the file, the document) and the whole job must end with status 2, where it
# used to wait silently for the watchdog. The blend "1 good 1 bad" alternates datasets sample by
# sample, so with dp = 2 and one sample per rank and step, only rank 1 ever reads the bad one.
#   bad_token_rank.sh TRIDENT REPO_ROOT MPIRUN ARGS...
set -uo pipefail
trident=$1 root=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Megatron indexed dataset, uint16 tokens: document 0 is clean, document 1 holds id 60000 at token 10.
/usr/bin/python3 - "$work/bad" <<'PY'
import struct, sys
docs = [[65 + i % 26 for i in range(40)], [65 + i % 26 for i in range(40)]]
docs[1][10] = 60000
with open(sys.argv[1] + ".bin", "wb") as f:
    for d in docs: f.write(struct.pack(f"<{len(d)}H", *d))
sizes = [len(d) for d in docs]
pointers = [2 * sum(sizes[:i]) for i in range(len(docs))]
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack(f"<{len(docs)}i", *sizes) + struct.pack(f"<{len(docs)}q", *pointers))
    f.write(struct.pack(f"<{len(docs) + 1}q", *range(len(docs) + 1)))
PY
timeout 120 "$@" -np 2 "$trident" train --config "$root/inputs/models/tiny.cfg" --backend cpu \
  --data.train "1 $root/data/fortunes_byte 1 $work/bad" --model.seq_len 32 --model.n_layer 2 \
  --train.micro_batch_size 1 --train.global_batch_size 2 --train.steps 20 --parallel.timeout_s 30 \
  >"$work/out" 2>&1
rc=$?
cat "$work/out"
[[ $rc -eq 2 ]] || { echo "FAIL: exit status $rc, expected 2 (124 = hung)"; exit 1; }
grep -q "^\[rank 1 .*\] trident train: error: $work/bad.bin: token id 60000 (document 1, token 10) is outside model.vocab_size = 257" \
  "$work/out" || { echo "FAIL: no error line from rank 1 naming the file, the document and the token"; exit 1; }
grep -q "timeout:" "$work/out" && { echo "FAIL: the job waited for the watchdog"; exit 1; }
echo "ok: rank 1 reported the bad token and the job ended with status 2"
