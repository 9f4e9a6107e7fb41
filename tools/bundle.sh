#!/usr/bin/env bash
# Packs trident for a GPU cluster that lacks the build dependencies: the binaries plus the shared
# libraries they need that such a node may not have (Boost, HDF5-openmpi and their
# dependencies). Left out on purpose, because the node provides them and they must match its
# driver and system: the CUDA driver and runtime, NCCL, cuBLAS, glibc, libstdc++/libgcc, and
# OpenMPI (use the node's mpirun; --with-mpi also packs Debian's OpenMPI runtime).
#   tools/bundle.sh BUILD_DIR OUT_DIR [--with-tests] [--with-mpi] [--tar]
# Run with OUT_DIR/trident (a launcher that sets LD_LIBRARY_PATH), e.g.
#   mpirun -np 2 -x NCCL_NVLS_ENABLE=0 OUT_DIR/trident train --config ...
set -euo pipefail
build=${1:?usage: bundle.sh BUILD_DIR OUT_DIR [--with-tests] [--with-mpi] [--tar]}
out=${2:?usage: bundle.sh BUILD_DIR OUT_DIR [--with-tests] [--with-mpi] [--tar]}
shift 2
with_tests=0 with_mpi=0 tar=0
for a in "$@"; do
  case $a in
    --with-tests) with_tests=1 ;;
    --with-mpi) with_mpi=1 ;;
    --tar) tar=1 ;;
    *) echo "bundle.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
[[ -x $build/trident ]] || { echo "bundle.sh: $build/trident not found; run 'make' first" >&2; exit 2; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$build/trident")
if (( with_tests )); then
  for t in "$build"/tests/*; do [[ -f $t && -x $t ]] && bins+=("$t"); done
fi
cp "${bins[@]}" "$out/bin/"
# The CUPTI kernel tracer (tools/perf/kernel_trace), where it was built: lib/, with what it links.
traced=()
if [[ -f $build/libtrident_kernel_trace.so ]]; then
  cp "$build/libtrident_kernel_trace.so" "$out/lib/"
  traced=("$build/libtrident_kernel_trace.so")
fi

# Provided by the GPU node (driver-matched or system libraries), never packed.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libresolv\.|libutil\.|libnsl\.|libanl\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcublasLt|libnccl|libnvidia)'
mpi='^(libmpi|libopen-pal|libopen-rte|libhwloc|libevent|libpmix|libucp|libucs|libuct|libfabric|libpsm|libibverbs|librdmacm|libnl-)'
for b in "${bins[@]}" "${traced[@]}"; do
  ldd "$b" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  if [[ $name =~ $mpi ]] && (( ! with_mpi )); then continue; fi
  cp -L "$path" "$out/lib/$name"
done

if (( with_mpi )); then
  prefix=$(dirname "$(dirname "$(readlink -f "$(command -v mpirun)")")")
  mkdir -p "$out/openmpi"
  cp -rL "$prefix/lib/x86_64-linux-gnu/openmpi" "$out/openmpi/lib" 2>/dev/null || true
  cp -rL /usr/share/openmpi "$out/openmpi/share" 2>/dev/null || true
fi

cat >"$out/trident" <<'LAUNCH'
#!/usr/bin/env bash
# Runs the bundled trident with its libraries first, then the node's CUDA and system libraries.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d $here/openmpi ]] && export OPAL_PREFIX="$here/openmpi"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
exec "$here/bin/${TRIDENT_BUNDLE_BIN:-trident}" "$@"
LAUNCH
chmod +x "$out/trident"
du -sh "$out" | awk '{print "bundle: " $2 " (" $1 "):"}'
find "$out/lib" -maxdepth 1 -type f -printf '  lib/%f\n' | sort
if (( tar )); then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
  echo "bundle: $out.tar.gz"
fi
