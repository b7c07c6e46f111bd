#!/usr/bin/env bash
# Call 2 (2026-12-07): why the ops inside torch.compile fail on cuda with
# the compiled implementation on this machine kind (call 1: Triton's
# ConvertTritonGPUToLLVM fails on a plain x * 2 kernel in the processes
# that loaded the extension; the Python implementation passed): a probe
# (triton_probe.py) compiling x * k with the extension loaded before,
# after, or not at all, each in a fresh inductor/Triton cache, then with
# the extension rebuilt by each compiler found; then qcoll.torch's bench
# at 2 and 8 ranks beside PyTorch's NCCL backend on NCCL 2.32.6 and every
# other PyTorch GPU test (compiled and Python implementations) in the time
# left.
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-500}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s2
dl_nccl &
log build
JOBS=16 dl_build . build-gpu qcoll qcoll-run qcoll-perf
wait
dl_mps
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
{ for c in c++ g++ /usr/bin/g++ /opt/gcc/bin/g++; do echo "$c: $(command -v $c) $($c --version 2>/dev/null | head -1) libstdc++ $($c -print-file-name=libstdc++.so 2>/dev/null)"; done
  ls -la /opt/gcc* 2>&1 | head; echo "CXX=${CXX:-}"; } >$out/compilers.txt 2>&1
cat $out/compilers.txt >>$out/summary.log
export QCOLL_LIB=$PWD/build-gpu/libqcoll.so PYTHONPATH=$PWD/python QCOLL_TORCH_EXT_DIR=$PWD/build-torch-ext
probe() { # name, order, env...
  local name=$1 order=$2; shift 2
  log "probe $name ($order) $*"
  env TORCHINDUCTOR_CACHE_DIR=/tmp/ind-$name TRITON_CACHE_DIR=/tmp/tri-$name "$@" \
    timeout 100 python3 "$here/triton_probe.py" "$order" >$out/probe-$name.log 2>&1
  grep -E "^(extension|compile|mapped|env)" $out/probe-$name.log | cut -c1-900 | tee -a $out/summary.log
}
probe none none
probe before before QCOLL_TORCH_EXT=require MLIR_ENABLE_DIAGNOSTICS=warnings,remarks,stacktraces,operations
probe after after QCOLL_TORCH_EXT=require
probe libglobal lib-global
probe liblocal lib-local
log "torch tests: torch.compile"
OUT=$out TORCH_STEPS=test TORCH_TESTS="torch_compile and not cpu" TEST_LIMIT=150 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test-compile.out 2>&1
cp $out/torch-test.log $out/torch-test-compile.log
grep -E "PASSED|FAILED|ERROR|passed|failed" $out/torch-test-compile.log | tail -6 | tee -a $out/summary.log
log "torch bench 2 and 8 ranks"
OUT=$out TORCH_STEPS=bench BENCH_RANKS="2 8" BENCH_LIMIT=45 \
  TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 BENCH_ARGS="--nccl-max-bytes 65536" \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
sleep 2
for c in /usr/bin/g++ /opt/gcc/bin/g++; do
  [ -x $c ] || continue
  tag=$(echo $c | tr / _)
  probe "before$tag" before QCOLL_TORCH_EXT=require CXX=$c QCOLL_TORCH_EXT_DIR=/tmp/ext$tag
done
log "torch tests: the rest"
OUT=$out TORCH_STEPS=test TORCH_TESTS="not cpu and not torch_compile" TEST_LIMIT=$(( $(left) - 8 )) \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test-rest.out 2>&1
cp $out/torch-test.log $out/torch-test-rest.log
log done
