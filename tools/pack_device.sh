#!/usr/bin/env bash
# Builds the device pack (design.md, "The device pack"): a Release build in build-pack/ linked
# statically against MLIR/LLVM 22, Abseil, zlib and zstd with -static-libstdc++ -static-libgcc
# (TILESEARCH_MLIR_SHARED=OFF), stripped, checked with ldd to need only glibc, then
#   dist/tilesearch-device.tar.xz  tilesearch/{bin/tilesearch, bin/cuda_runtime_test (when that
#                                  test target exists), lib/ (any non-glibc shared library, none
#                                  expected), licenses/, examples/schedules/, models/, bench/ (below), run,
#                                  MANIFEST}
#   dist/unpack.sh                 `bash dist/unpack.sh [DIR]`: unpacks to DIR (default
#                                  /tmp/tilesearch) and prints the path; then `DIR/run ARGS...`
#                                  runs `tilesearch ARGS...` (`DIR/run cuda_runtime_test ...` the
#                                  test binary).
#   dist/MANIFEST                  git revision, date, file sizes, shared libraries.
# Fails when the archive exceeds 40 MiB or a binary needs a library that cannot be packed. Then
# verifies the unpacked pack with an empty LD_LIBRARY_PATH: `tilesearch ops`, and the PTX of the
# example GPU matmul through `ptxas -arch=sm_90` where ptxas exists.
# bench/ in the pack: NOTES.md, suites/, schedules/, scripts/, and harness/ (score.py, the
# baselines, device_kernels.cu, cheats/; not the CPU-side tests) with the PTX that score.py loads generated
# here by bench/harness/cheats/build.py --ptx-only (device_kernels.ptx, cheats/<kernel>.ptx; the
# repository holds the CUDA sources only). Without nvcc the pack carries no PTX and score.py
# compiles it on the device.
# --mpi: the MPI build (-DTILESEARCH_MPI=ON) with the MPICH of the `mpich` wheel from PyPI (the
# device has no MPI and no internet): MPICH_WHEEL=PATH names the wheel (`pip download mpich
# --no-deps -d DIR`; it is not in git). Its hydra launcher (mpiexec.hydra, hydra_pmi_proxy) goes
# into mpi/bin, its libmpi.so.12 with the libraries it loads (lib/mpich/: libfabric, UCX) into
# mpi/lib, and mpi/lib/libmpich.so.12 -> libmpi.so.12 serves the binary, linked against Debian's
# MPICH (same ABI, libmpi.so.12 / libmpich.so.12, across MPICH versions); its licenses into
# licenses/mpich-wheel/. The pack then has `mpiexec`: `DIR/mpiexec -n N tilesearch tune ...` runs
# the wheel's hydra with the pack's bin/ on PATH and its libraries on LD_LIBRARY_PATH (hydra hands
# the environment to every rank). Verified with a 2-rank cpu tune of the unpacked pack.
# Usage: tools/pack_device.sh [--jobs N] [--no-verify] [--mpi]. The device has Ubuntu 24.04
# (glibc 2.39).
#        tools/pack_device.sh --stage-bench DIR: only stages bench/ (with its PTX) into DIR/bench
#        and exits (no build).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
jobs="$(nproc)"
verify=1
mpi=0
bench_only=""
while (($#)); do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --no-verify) verify=0; shift ;;
    --stage-bench) bench_only="${2:?--stage-bench needs a directory}"; shift 2 ;;
    --mpi) mpi=1; shift ;;
    *) echo "pack_device.sh: unknown argument '$1' (expected --jobs N, --no-verify," \
         "--stage-bench DIR, --mpi)" >&2; exit 2 ;;
  esac
done

readonly max_bytes=$((40 * 1024 * 1024))
readonly device_glibc=2.39
start=$(date +%s)
die() {
  echo "pack_device.sh: FAILED: $*" >&2
  exit 1
}
step() { echo "== $* ($(($(date +%s) - start)) s)"; }

# stage_bench DEST: the device-side benchmark files into DEST/bench (see the header), the PTX of
# the scoring harness compiled from its CUDA sources.
stage_bench() {
  local dest="$1/bench" nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
  mkdir -p "$dest/harness/cheats"
  cp bench/NOTES.md "$dest/"
  cp -r bench/suites bench/schedules bench/scripts "$dest/"
  cp bench/harness/score.py bench/harness/*_baseline.py bench/harness/profile_eager_kernels.py \
    bench/harness/device_kernels.cu "$dest/harness/"
  cp bench/harness/cheats/*.py bench/harness/cheats/*.cu bench/harness/cheats/*.cuh \
    bench/harness/cheats/*.json "$dest/harness/cheats/"
  if command -v "$nvcc" >/dev/null; then
    NVCC="$nvcc" python3 bench/harness/cheats/build.py --ptx-only "$dest/harness" ||
      die "generating the scoring harness's PTX (bench/harness/cheats/build.py --ptx-only)"
  else
    echo "note: no nvcc ($nvcc): the pack has no harness PTX; score.py compiles it on the device"
  fi
}
if [[ -n "$bench_only" ]]; then
  mkdir -p "$bench_only"
  stage_bench "$bench_only"
  echo "staged bench/ into $bench_only/bench"
  exit 0
fi

# --- The mpich wheel (--mpi), unpacked (a wheel is a zip) before anything is built. ---
wheel_data=""
wheel_dir=""
if ((mpi)); then
  [[ -n "${MPICH_WHEEL:-}" ]] ||
    die "--mpi needs MPICH_WHEEL=PATH, the mpich wheel from PyPI (pip download mpich --no-deps -d DIR)"
  [[ -f "$MPICH_WHEEL" ]] || die "MPICH_WHEEL='$MPICH_WHEEL' is not a file"
  command -v mpicc >/dev/null || die "--mpi builds against MPICH here: apt-get install mpich libmpich-dev"
  wheel_dir="$(mktemp -d)"
  python3 -m zipfile -e "$MPICH_WHEEL" "$wheel_dir" || die "cannot unzip $MPICH_WHEEL"
  wheel_data="$(find "$wheel_dir" -maxdepth 3 -type d -path '*/mpich-*.data/data' | head -n 1)"
  [[ -n "$wheel_data" && -f "$wheel_data/lib/libmpi.so.12" && -f "$wheel_data/bin/mpiexec.hydra" &&
    -f "$wheel_data/bin/hydra_pmi_proxy" ]] ||
    die "$MPICH_WHEEL holds no mpich-*.data/data/{lib/libmpi.so.12,bin/mpiexec.hydra,bin/hydra_pmi_proxy}"
fi

# --- Build. ---
step "configure build-pack"
mkdir -p build-pack
mpi_option=OFF
((mpi)) && mpi_option=ON
cmake -S . -B build-pack -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILESEARCH_MLIR_SHARED=OFF \
  -DTILESEARCH_BUILD_TESTS=ON -DTILESEARCH_MPI="$mpi_option" >build-pack/configure.log 2>&1 ||
  { cat build-pack/configure.log; die "cmake configure"; }
targets=(tilesearch)
# (The target list is read whole first: `grep -q` closing the pipe early would fail pipefail.)
if ninja -C build-pack -t targets all >build-pack/targets.txt &&
  grep -q '^cuda_runtime_test:' build-pack/targets.txt; then
  targets+=(cuda_runtime_test)
else
  echo "note: no cuda_runtime_test target yet; packing tilesearch only"
fi
step "build ${targets[*]} (-j$jobs)"
build_start=$(date +%s)
ninja -C build-pack -j"$jobs" "${targets[@]}"
build_s=$(($(date +%s) - build_start))

# --- Stage. ---
stage_root="$(mktemp -d)"
trap 'rm -rf "$stage_root" $wheel_dir' EXIT
stage="$stage_root/tilesearch"
mkdir -p "$stage/bin" "$stage/lib" "$stage/licenses" "$stage/examples"
step "strip into the stage"
strip -o "$stage/bin/tilesearch" build-pack/tools/tilesearch
if [[ " ${targets[*]} " == *" cuda_runtime_test "* ]]; then
  test_bin="$(find build-pack/tests -name cuda_runtime_test -type f -perm -u+x | head -n 1)"
  [[ -n "$test_bin" ]] || die "cuda_runtime_test was built but not found under build-pack/tests"
  strip -o "$stage/bin/cuda_runtime_test" "$test_bin"
fi
cp -r examples/schedules "$stage/examples/"
cp -r models "$stage/"  # the default cost models `tune` starts from (TILESEARCH_MODELS_DIR)
step "stage bench/ (scoring harness PTX generated)"
stage_bench "$stage"

# License of the Debian package that holds `file`, into licenses/<package>.copyright.
add_license() {
  local pkg candidate
  # Debian 12 merges /lib into /usr/lib, but dpkg records some files (libgcc_s) under /lib: ask
  # for the path as given, its /lib and /usr/lib spellings, and its resolved target.
  for candidate in "$1" "${1#/usr}" "/usr${1#/usr}" "$(readlink -f "$1")"; do
    pkg="$(dpkg -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1)" || true
    [[ -n "$pkg" ]] && break
  done
  [[ -n "$pkg" ]] || die "no Debian package owns $1 (cannot find its license)"
  local copyright="/usr/share/doc/$pkg/copyright"
  [[ -f "$copyright" ]] || die "$pkg (owner of $1) has no $copyright"
  cp "$copyright" "$stage/licenses/$pkg.copyright"
}
# Statically linked code keeps its licenses too.
for f in /usr/lib/llvm-22/lib/libLLVMCore.a /usr/lib/llvm-22/lib/libMLIRIR.a \
  "$(find /usr/lib/x86_64-linux-gnu -name 'libabsl_strings.a' | head -n 1)" \
  /usr/lib/x86_64-linux-gnu/libzstd.a /usr/lib/x86_64-linux-gnu/libz.a \
  "$(g++ -print-file-name=libstdc++.a)" /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp; do
  add_license "$(realpath "$f")"
done

if ((mpi)); then
  step "stage the mpich wheel's launcher and libraries into mpi/"
  mkdir -p "$stage/mpi/bin" "$stage/mpi/lib" "$stage/licenses/mpich-wheel"
  install -m 755 "$wheel_data/bin/mpiexec.hydra" "$wheel_data/bin/hydra_pmi_proxy" "$stage/mpi/bin/"
  cp "$wheel_data/lib/libmpi.so.12" "$stage/mpi/lib/"
  cp -r "$wheel_data/lib/mpich" "$stage/mpi/lib/"
  ln -s libmpi.so.12 "$stage/mpi/lib/libmpich.so.12"
  cp "$wheel_dir"/mpich-*.dist-info/licenses/* "$wheel_dir"/mpich-*.dist-info/METADATA \
    "$stage/licenses/mpich-wheel/"
fi

# --- Shared libraries: only the glibc family may stay; anything else is packed in lib/ (with
# --mpi, MPI resolves to the wheel's libraries in mpi/lib). ---
step "check shared libraries"
glibc_re='^(linux-vdso|libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so'
shared_report=""
for bin in "$stage"/bin/*; do
  while read -r name arrow path _; do
    [[ -z "$name" ]] && continue
    name="$(basename "$name")"  # the loader is listed by its path
    if [[ "$name" =~ $glibc_re ]]; then
      shared_report+="$(basename "$bin"): $name (glibc)"$'\n'
      continue
    fi
    [[ "$arrow" == "=>" && -f "$path" ]] || die "$(basename "$bin") needs $name, which ldd cannot resolve"
    if [[ "$path" == "$stage"/* ]]; then
      shared_report+="$(basename "$bin"): $name (${path#"$stage"/}, from the mpich wheel)"$'\n'
      continue
    fi
    echo "packing non-glibc library $name ($path)"
    cp -L "$path" "$stage/lib/$name"
    add_license "$(realpath "$path")"
    shared_report+="$(basename "$bin"): $name (packed in lib/)"$'\n'
  done < <(LD_LIBRARY_PATH="$stage/mpi/lib" ldd "$bin" | sed 's/^[[:space:]]*//')
  # The newest glibc symbol version each binary needs must exist on the device.
  need="$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)"
  newest="$(printf '%s\n%s\n' "$need" "$device_glibc" | sort -V | tail -n 1)"
  [[ "$newest" == "$device_glibc" ]] ||
    die "$(basename "$bin") needs glibc $need, newer than the device's $device_glibc"
  shared_report+="$(basename "$bin"): newest glibc symbol version GLIBC_$need"$'\n'
done
[[ -n "$(ls -A "$stage/lib")" ]] || rmdir "$stage/lib"

cat >"$stage/run" <<'EOF'
#!/usr/bin/env bash
# Runs a program of the tilesearch device pack: `run ARGS...` is `tilesearch ARGS...`,
# `run cuda_runtime_test ARGS...` the GPU test binary. Libraries in lib/ (if any) come first.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -d "$here/lib" ]] && export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d "$here/mpi/lib" ]] && export LD_LIBRARY_PATH="$here/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TILESEARCH_MODELS_DIR="${TILESEARCH_MODELS_DIR:-$here/models}"
prog=tilesearch
if (($#)) && [[ "$1" != tilesearch && "$1" != -* && -x "$here/bin/$1" ]]; then
  prog="$1"
  shift
elif (($#)) && [[ "$1" == tilesearch ]]; then
  shift
fi
exec "$here/bin/$prog" "$@"
EOF
chmod +x "$stage/run"
if ((mpi)); then
  cat >"$stage/mpiexec" <<'EOF'
#!/usr/bin/env bash
# `mpiexec -n N tilesearch tune|bench|tune-graph ...` with the pack's MPICH (the mpich wheel's
# hydra): bin/ first on PATH (so `tilesearch` is the packed binary), the pack's libraries on
# LD_LIBRARY_PATH and its default models; hydra hands this environment to every rank.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$here/bin:$here/mpi/bin:$PATH"
export LD_LIBRARY_PATH="$here/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d "$here/lib" ]] && export LD_LIBRARY_PATH="$here/lib:$LD_LIBRARY_PATH"
export TILESEARCH_MODELS_DIR="${TILESEARCH_MODELS_DIR:-$here/models}"
exec "$here/mpi/bin/mpiexec.hydra" "$@"
EOF
  chmod +x "$stage/mpiexec"
fi

rev="$(git rev-parse HEAD)"
git diff --quiet HEAD -- . 2>/dev/null || rev+=" (with uncommitted changes)"
manifest="$stage/MANIFEST"
{
  echo "tilesearch device pack"
  echo "git: $rev"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "built on: $(uname -m), $(ldd --version | head -n 1), $(g++ --version | head -n 1)"
  echo "link: static MLIR/LLVM 22, Abseil, zlib, zstd, libstdc++, libgcc; --gc-sections; stripped"
  echo
  echo "files (bytes):"
  (cd "$stage_root" && find tilesearch -type f ! -name MANIFEST -printf '%s %p\n' | sort -k2)
  echo
  echo "shared libraries:"
  printf '%s' "$shared_report"
} >"$manifest"

# --- Archive. ---
step "xz -9"
mkdir -p dist
rm -f dist/tilesearch-device.tar.xz
tar -C "$stage_root" --owner=0 --group=0 --numeric-owner -cf - tilesearch |
  xz -9 -T"$jobs" >dist/tilesearch-device.tar.xz
size=$(stat -c %s dist/tilesearch-device.tar.xz)
{
  cat "$manifest"
  echo
  echo "archive: tilesearch-device.tar.xz $size bytes ($(awk "BEGIN{printf \"%.1f\", $size/1048576}") MiB)"
} >dist/MANIFEST
if ((size > max_bytes)); then
  die "dist/tilesearch-device.tar.xz is $size bytes, over the 40 MiB limit ($max_bytes)"
fi

cat >dist/unpack.sh <<'EOF'
#!/usr/bin/env bash
# Unpacks the tilesearch device pack that sits beside this script into DIR (default
# /tmp/tilesearch, replaced if present) and prints DIR. Then: DIR/run ARGS... (tilesearch ARGS...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-/tmp/tilesearch}"
rm -rf "$dest"
mkdir -p "$dest"
tar -xJf "$here/tilesearch-device.tar.xz" -C "$dest" --strip-components=1
echo "$dest"
EOF
chmod +x dist/unpack.sh

# --- Verify the unpacked pack as the device will run it. ---
if ((verify)); then
  step "verify"
  check_dir="$(mktemp -d)"
  dir="$(bash dist/unpack.sh "$check_dir/tilesearch")"
  LD_LIBRARY_PATH= "$dir/run" ops >"$check_dir/ops.out" || die "'run ops' failed"
  grep -q matmul "$check_dir/ops.out" || die "'run ops' does not list matmul"
  LD_LIBRARY_PATH= "$dir/run" show --schedule "$dir/examples/schedules/matmul_cuda_sssrrsrs.json" \
    --emit ptx >"$check_dir/matmul.ptx" || die "'run show --emit ptx' failed"
  grep -q '^\.visible \.entry' "$check_dir/matmul.ptx" || die "the emitted PTX has no .entry"
  if command -v ptxas >/dev/null || [[ -x /usr/local/cuda/bin/ptxas ]]; then
    ptxas_bin="$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)"
    "$ptxas_bin" -arch=sm_90 "$check_dir/matmul.ptx" -o "$check_dir/matmul.cubin" ||
      die "ptxas -arch=sm_90 rejected the packed binary's PTX"
    echo "ptxas -arch=sm_90 accepts the PTX of examples/schedules/matmul_cuda_sssrrsrs.json"
  else
    echo "note: no ptxas here; PTX not assembled"
  fi
  python3 "$dir/bench/harness/score.py" --help >/dev/null || die "the packed score.py --help failed"
  if [[ -f "$dir/bench/harness/device_kernels.ptx" ]]; then
    grep -q '^\.visible \.entry fma_peak' "$dir/bench/harness/device_kernels.ptx" ||
      die "the packed bench/harness/device_kernels.ptx has no fma_peak entry"
  fi
  if [[ -x "$dir/bin/cuda_runtime_test" ]]; then
    LD_LIBRARY_PATH= "$dir/run" cuda_runtime_test --gtest_list_tests >/dev/null ||
      die "'run cuda_runtime_test --gtest_list_tests' failed"
  fi
  if ((mpi)); then
    # Two ranks from the unpacked pack's own launcher and libraries (none of this machine's MPI).
    LD_LIBRARY_PATH= "$dir/mpiexec" -n 2 tilesearch tune --op matmul --shape 64x64 --shape 64x64 \
      --target cpu --trials 8 --per-round 4 --log "$check_dir/mpi.jsonl" >"$check_dir/mpi.out" ||
      die "'mpiexec -n 2 tilesearch tune' from the pack failed"
    grep -q '^trials: 8 (8 measured now)$' "$check_dir/mpi.out" ||
      die "the 2-rank tune did not measure 8 trials: $(cat "$check_dir/mpi.out")"
    grep -q '"ranks":' "$check_dir/mpi.jsonl" || die "the 2-rank tune's round lines name no ranks"
    echo "verified: mpiexec -n 2 (the wheel's hydra and libmpi.so.12) tuned 8 trials on two ranks"
  fi
  rm -rf "$check_dir"
fi

echo
cat dist/MANIFEST
echo
echo "dist/tilesearch-device.tar.xz: $size bytes ($(awk "BEGIN{printf \"%.1f\", $size/1048576}") MiB)," \
  "build ${build_s} s, total $(($(date +%s) - start)) s"
echo "on the device: carry [\"dist\"], then: dir=\$(bash dist/unpack.sh) && \$dir/run ops"
