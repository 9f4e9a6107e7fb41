# shellcheck shell=bash disable=SC2034   # the variables are the sourcing script's
# The start the e2e training scripts share (source it with no arguments, before anything reads
# "$@"): TRIDENT and REPO_ROOT from the first two arguments (the launcher and its arguments stay in
# "$@"), the byte-level fortunes corpus as $data, and a scratch directory $out removed on exit.
trident=$1 root=$2
shift 2
data=$root/data/fortunes_byte
[[ -f $data.bin ]] || { echo "missing $data.bin: run 'make data' first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
