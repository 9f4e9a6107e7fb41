#!/usr/bin/env bash
# Installs the Debian packages trident needs, and only those that are missing.
#   tools/install_deps.sh            build + run dependencies
#   tools/install_deps.sh --test     also the test dependencies (PyTorch and jinja2 references, Node.js, clang's
#                                    libFuzzer and sanitizers for the fuzz targets)
#   tools/install_deps.sh --check    list what is missing, install nothing (exit 1 if anything is)
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
            libboost-program-options-dev nlohmann-json3-dev fortunes python3-matplotlib)
test_pkgs=(googletest libgtest-dev python3-torch python3-numpy python3-jinja2 nodejs npm shellcheck clang-14 libclang-rt-14-dev
           libomp-14-dev)

want=("${build_pkgs[@]}")
check_only=0
for arg in "$@"; do
  case "$arg" in
    --test) want+=("${test_pkgs[@]}") ;;
    --check) check_only=1 ;;
    *) echo "install_deps.sh: unknown argument '$arg' (use --test or --check)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
# npm may come from outside Debian (e.g. a Node.js install); accept any working npm.
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == npm || "$p" == nodejs ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all dependencies present"
  exit 0
fi
echo "install_deps: missing: ${missing[*]}"
[[ $check_only -eq 1 ]] && exit 1

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install_deps: not root and sudo is not available; ask an administrator to run:" >&2
  echo "  apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${missing[*]}"
