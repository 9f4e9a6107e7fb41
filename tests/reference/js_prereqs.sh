# Sourced by the tests against JavaScript reference encoders: skips (exit 77) without node and
# npm, fails without the fortunes corpus. Sets fortunes_dir.
fortunes_dir=/usr/share/games/fortunes
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIPPED: $tool not found; tools/install_deps.sh --test installs it"
    exit 77
  fi
done
if [[ ! -d $fortunes_dir ]]; then
  echo "FAIL: $fortunes_dir missing; install the fortunes package (tools/install_deps.sh)" >&2
  exit 1
fi
