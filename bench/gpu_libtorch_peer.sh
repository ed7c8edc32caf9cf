#!/usr/bin/env bash
# Builds bench/gpu_libtorch_peer.cpp against the libtorch inside python3's torch wheel (which has
# CUDA, unlike Debian's libtorch-dev) and runs it. Skips, saying why, where python3 has no torch
# with CUDA or there is no C++ compiler. Usage: bench/gpu_libtorch_peer.sh [build folder]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/weft-libtorch-peer}
py=${PYTHON:-python3}
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "[libtorch-peer] $py has no torch with CUDA: no libtorch column"; exit 0
fi
cxx=${CXX:-g++}
command -v "$cxx" >/dev/null || { echo "[libtorch-peer] no C++ compiler ($cxx): no libtorch column"; exit 0; }
mapfile -t flags < <("$py" - <<'PY'
import torch
from torch.utils import cpp_extension as ce
for p in ce.include_paths(): print("-I" + p)
for p in ce.library_paths(): print("-L" + p); print("-Wl,-rpath," + p)
print("-D_GLIBCXX_USE_CXX11_ABI=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))
PY
)
mkdir -p "$out"
"$cxx" -O2 -std=c++17 "$here/gpu_libtorch_peer.cpp" "${flags[@]}" -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda \
  -o "$out/gpu_libtorch_peer" || { echo "[libtorch-peer] the build failed: no libtorch column"; exit 0; }
"$out/gpu_libtorch_peer"
