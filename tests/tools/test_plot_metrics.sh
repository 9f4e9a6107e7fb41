#!/usr/bin/env bash
# tools/plot_metrics.py turns the fixture metrics file (twice, as two overlaid runs) into a non-empty PNG
# with every series drawn, validation loss, MFU and peak memory included.
#   test_plot_metrics.sh REPO_ROOT
set -euo pipefail
root=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/a" "$out/b"
cp "$root/tests/fixtures/metrics_small.jsonl" "$out/a/metrics.jsonl"
cp "$root/tests/fixtures/metrics_small.jsonl" "$out/b/metrics.jsonl"
/usr/bin/python3 "$root/tools/plot_metrics.py" "$out/a/metrics.jsonl" "$out/b/metrics.jsonl" -o "$out/m.png" | tee "$out/log"
for series in "loss 60" "val_loss 6" "lr 60" "grad_norm 60" "tokens_per_s 60" "mfu 60" "peak_mem_gib 60"; do
  grep -q "[ (]$series[,)]" "$out/log" || { echo "FAIL: expected $series points plotted"; exit 1; }
done
[[ -s $out/m.png ]] || { echo "FAIL: no PNG written"; exit 1; }
[[ $(head -c 8 "$out/m.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || { echo "FAIL: not a PNG"; exit 1; }
echo "ok: $(stat -c %s "$out/m.png") byte PNG"
