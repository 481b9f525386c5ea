#!/usr/bin/env bash
# Compiles every src/backend/cuda/*.cu for each release architecture (CMakeLists.txt's
# SYV_CUDA_ARCHS release list, "80;86;89;90a;120") with the flags the build uses, one file at a
# time, and lists what fails. Needs nvcc (12.8+ for sm_120), not a GPU. Run from the repository
# root:  tools/build/check_cuda_archs.sh [ARCH...] [-- FILE...]
# Environment: NVCC (default nvcc), PTXAS_O (ptxas -O level; default 3 as the build, 0 is faster
# and still reports every unsupported instruction), JOBS (parallel compiles; default 1).
set -u
archs=()
files=()
while [[ $# -gt 0 && $1 != "--" ]]; do archs+=("$1"); shift; done
if [[ $# -gt 0 ]]; then shift; files=("$@"); fi
[[ ${#archs[@]} -eq 0 ]] && archs=(80 86 89 90a 120)
[[ ${#files[@]} -eq 0 ]] && files=(src/backend/cuda/*.cu)
nvcc=${NVCC:-nvcc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
compile() {  # arch file
  local arch=$1 f=$2 log
  log="$out/$(basename "$f").$arch.log"
  if "$nvcc" -DSYV_HAVE_CUDA=1 -Isrc -O2 -DNDEBUG -std=c++17 --expt-relaxed-constexpr \
      -Xptxas "-O${PTXAS_O:-3}" --generate-code="arch=compute_${arch},code=sm_${arch}" \
      -x cu -c "$f" -o "$out/$(basename "$f").$arch.o" >"$log" 2>&1; then
    echo "ok    sm_$arch $f"
  else
    echo "FAIL  sm_$arch $f"
    sed -e 's/^/      /' "$log" | grep -v '^ *$' | head -20
    return 1
  fi
}
for arch in "${archs[@]}"; do
  for f in "${files[@]}"; do
    compile "$arch" "$f" || failed=$((failed + 1))
  done
done
echo "$failed failure(s)"
[[ $failed -eq 0 ]]
