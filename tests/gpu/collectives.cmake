# GPU tests of every collective on qcoll's CUDA IPC kernels
# (src/coll/cuda/collectives.cu), included by CMakeLists.txt of this
# directory.  Label "gpu"; each exits 77 ("skipped") and says why without a
# GPU.  NCCL is hidden (QCOLL_NCCL_LIB points nowhere), so every call runs on
# the IPC kernels even on a machine where NCCL would accept the ranks.
#
#   gpu.collectives.n2, .n3            default buffers (one launch per call)
#   gpu.collectives.small_ipc.n2, .n3  QCOLL_IPC_BYTES=1M, QCOLL_IPC_P2P_BYTES=64K:
#                                      large messages take many launches and
#                                      many send/recv steps
#   gpu.collectives.failure.n2         a missing sender: the recv gives up
#   gpu.collectives.forced_ipc.n2      NCCL visible but QCOLL_ALGO=ipc: with one
#                                      rank per GPU, where NCCL would serve, the
#                                      forced path still gives exact results
#   gpu.collectives.per_call.n3        every call through the _ex forms with a
#                                      per-call algorithm (ipc, host, auto in
#                                      turn; ipc in graphs) under
#                                      QCOLL_ALGO=host and QCOLL_CHECK=1, and the
#                                      per-call refusals
# The selection table's GPU rows, on the host (label unit, runs everywhere).
add_executable(test_select_ipc test_select_ipc.c)
target_link_libraries(test_select_ipc PRIVATE qcoll_internal cmocka::cmocka)
add_test(NAME unit.select_ipc COMMAND test_select_ipc)
set_tests_properties(unit.select_ipc PROPERTIES TIMEOUT 60 LABELS unit
                     ENVIRONMENT "QCOLL_DEBUG=NONE;QCOLL_DISABLE_CUDA=1")

# The IPC kernels run on the CPU (tests/gpu/emu): the real kernel code, so
# CI, which has no GPU, still tests their indexing and protocol.  Needs a
# C++ compiler; label unit, runs in every build.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(emu_out ${CMAKE_CURRENT_BINARY_DIR}/emu)
  set(emu_dir ${CMAKE_CURRENT_SOURCE_DIR}/emu)
  set(cuda_src ${PROJECT_SOURCE_DIR}/src/coll/cuda)
  add_custom_command(
    OUTPUT ${emu_out}/collectives_emu.cpp ${emu_out}/ipc_sync.cuh ${emu_out}/emu_status.h
    COMMAND ${CMAKE_COMMAND} -DSRC=${cuda_src} -DOUT=${emu_out} -P ${emu_dir}/prepare.cmake
    DEPENDS ${cuda_src}/collectives.cu ${cuda_src}/ipc_sync.cuh ${emu_dir}/prepare.cmake
            ${emu_dir}/primitives.inc
    COMMENT "Preparing the IPC kernels for the CPU emulation")
  add_executable(coll_emu ${emu_dir}/coll_emu.cpp ${emu_out}/collectives_emu.cpp
                 ${PROJECT_SOURCE_DIR}/src/coll/host/reduce.c)
  set_source_files_properties(${emu_dir}/coll_emu.cpp ${emu_out}/collectives_emu.cpp
                              PROPERTIES COMPILE_OPTIONS "-include;${emu_dir}/emu_shim.h"
                                         OBJECT_DEPENDS "${emu_out}/emu_status.h;${emu_out}/ipc_sync.cuh")
  target_include_directories(coll_emu BEFORE PRIVATE ${emu_out} ${emu_dir}/include ${cuda_src}
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  # -fno-strict-aliasing: the kernels read packs through element pointers,
  # as CUDA code does (nvcc gives that its meaning; host GCC at -O2 would not).
  target_compile_options(coll_emu PRIVATE -ffp-contract=off -fno-strict-aliasing
                         $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>)
  set_target_properties(coll_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(coll_emu PRIVATE Threads::Threads)
  # 2 and 3 ranks in the release build; 2 under the sanitizers (label
  # subset: a part of a nosan test, left out of the release build's run).
  add_test(NAME unit.coll_kernels_emu COMMAND coll_emu 2 3)
  set_tests_properties(unit.coll_kernels_emu PROPERTIES TIMEOUT 300 LABELS "unit;nosan"
                       SKIP_RETURN_CODE 77)
  add_test(NAME unit.coll_kernels_emu.n2 COMMAND coll_emu 2)
  set_tests_properties(unit.coll_kernels_emu.n2 PROPERTIES TIMEOUT 300 LABELS "unit;subset"
                       SKIP_RETURN_CODE 77)

  # The all-reduce kernels (allreduce.cu, allreduce_quant.cu) the same way,
  # in blocks of two warps (the quantised kernel deals its work to the warps
  # of a block, and its shuffles need whole warps) and with codec.h's
  # device functions (__CUDACC__).
  set(emu_ar ${CMAKE_CURRENT_BINARY_DIR}/emu_allreduce)
  add_custom_command(
    OUTPUT ${emu_ar}/allreduce_emu_kernels.cpp ${emu_ar}/allreduce_quant_emu.cpp
           ${emu_ar}/ipc_sync.cuh ${emu_ar}/emu_status.h
    COMMAND ${CMAKE_COMMAND} -DSRC=${cuda_src} -DOUT=${emu_ar} -DKERNEL=allreduce_quant
            -DTHREADS=64 -P ${emu_dir}/prepare.cmake
    COMMAND ${CMAKE_COMMAND} -DSRC=${cuda_src} -DOUT=${emu_ar} -DKERNEL=allreduce
            -DTHREADS=64 -P ${emu_dir}/prepare.cmake
    COMMAND ${CMAKE_COMMAND} -E rename ${emu_ar}/allreduce_emu.cpp ${emu_ar}/allreduce_emu_kernels.cpp
    DEPENDS ${cuda_src}/allreduce.cu ${cuda_src}/allreduce_quant.cu ${cuda_src}/ipc_sync.cuh
            ${emu_dir}/prepare.cmake ${emu_dir}/primitives.inc
    COMMENT "Preparing the all-reduce kernels for the CPU emulation")
  add_executable(allreduce_emu ${emu_dir}/allreduce_emu.cpp ${emu_ar}/allreduce_emu_kernels.cpp
                 ${emu_ar}/allreduce_quant_emu.cpp ${PROJECT_SOURCE_DIR}/tests/codec/ref_scheme.c)
  set_source_files_properties(
    ${emu_dir}/allreduce_emu.cpp ${emu_ar}/allreduce_emu_kernels.cpp ${emu_ar}/allreduce_quant_emu.cpp
    PROPERTIES COMPILE_OPTIONS "-include;${emu_dir}/emu_shim.h;-D__CUDACC__=1"
               OBJECT_DEPENDS "${emu_ar}/emu_status.h;${emu_ar}/ipc_sync.cuh")
  target_include_directories(allreduce_emu BEFORE PRIVATE ${emu_ar} ${emu_dir}/include ${cuda_src}
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/tests/codec)
  target_compile_options(allreduce_emu PRIVATE -ffp-contract=off -fno-strict-aliasing
                         $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>)
  set_target_properties(allreduce_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(allreduce_emu PRIVATE Threads::Threads m)
  # 1 to 5 ranks in the release build; 2 ranks under the sanitizers,
  # which slow the coroutines down many times.
  # 1 rank: the quantised kernel's phase 2 takes one contribution per batch.
  # 5 ranks: the quantised kernel's phase 2 then takes its contributions in
  # more than one batch of four.
  add_test(NAME unit.allreduce_kernels_emu COMMAND allreduce_emu 1 2 3 4 5)
  set_tests_properties(unit.allreduce_kernels_emu PROPERTIES TIMEOUT 600 LABELS "unit;nosan"
                       SKIP_RETURN_CODE 77)
  add_test(NAME unit.allreduce_kernels_emu.n2 COMMAND allreduce_emu 2)
  set_tests_properties(unit.allreduce_kernels_emu.n2 PROPERTIES TIMEOUT 600 LABELS "unit;subset"
                       SKIP_RETURN_CODE 77)

  # The push one-shot (allreduce_push.cu) the same way, in blocks of two
  # warps: values with signed zeros and NaNs, rotation over many calls,
  # world sizes 2-8, a missing peer.
  set(emu_push ${CMAKE_CURRENT_BINARY_DIR}/emu_push)
  add_custom_command(
    OUTPUT ${emu_push}/allreduce_push_emu.cpp ${emu_push}/ipc_sync.cuh ${emu_push}/emu_status.h
    COMMAND ${CMAKE_COMMAND} -DSRC=${cuda_src} -DOUT=${emu_push} -DKERNEL=allreduce_push
            -DTHREADS=64 -P ${emu_dir}/prepare.cmake
    DEPENDS ${cuda_src}/allreduce_push.cu ${cuda_src}/ipc_sync.cuh ${cuda_src}/elem_ops.cuh
            ${cuda_src}/push_launch.h ${emu_dir}/prepare.cmake ${emu_dir}/primitives.inc
    COMMENT "Preparing the push one-shot for the CPU emulation")
  add_executable(push_emu ${emu_dir}/push_emu.cpp ${emu_push}/allreduce_push_emu.cpp)
  set_source_files_properties(
    ${emu_dir}/push_emu.cpp ${emu_push}/allreduce_push_emu.cpp
    PROPERTIES COMPILE_OPTIONS "-include;${emu_dir}/emu_shim.h"
               OBJECT_DEPENDS "${emu_push}/emu_status.h;${emu_push}/ipc_sync.cuh")
  target_include_directories(push_emu BEFORE PRIVATE ${emu_push} ${emu_dir}/include ${cuda_src}
                             ${CMAKE_CURRENT_SOURCE_DIR}
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(push_emu PRIVATE -ffp-contract=off -fno-strict-aliasing
                         $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>)
  set_target_properties(push_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(push_emu PRIVATE Threads::Threads m)
  add_test(NAME unit.push_kernel_emu COMMAND push_emu 2 3 4 5 8)
  set_tests_properties(unit.push_kernel_emu PROPERTIES TIMEOUT 600 LABELS "unit;nosan"
                       SKIP_RETURN_CODE 77)
  add_test(NAME unit.push_kernel_emu.n2 COMMAND push_emu 2)
  set_tests_properties(unit.push_kernel_emu.n2 PROPERTIES TIMEOUT 600 LABELS "unit;subset"
                       SKIP_RETURN_CODE 77)

  # The codec kernels (codec_kernels.cu, included by the driver, launchers
  # and all) the same way, in blocks of one warp, against the CPU reference
  # of codec.h bit for bit: every variant and format.
  add_executable(codec_emu ${emu_dir}/codec_emu.cpp)
  set_source_files_properties(${emu_dir}/codec_emu.cpp PROPERTIES COMPILE_OPTIONS
                              "-include;${emu_dir}/emu_shim.h;-D__CUDACC__=1")
  target_include_directories(codec_emu BEFORE PRIVATE ${emu_dir}/include ${cuda_src}
                             ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/tests/codec)
  # -fsanitize=alignment: a word or float4 access at an address the GPU
  # would fault on stops the test here too (x86 would just do it).
  target_compile_options(codec_emu PRIVATE -ffp-contract=off -fno-strict-aliasing
                         -Wno-unknown-pragmas -fsanitize=alignment
                         -fno-sanitize-recover=alignment)
  target_link_options(codec_emu PRIVATE -fsanitize=alignment)
  set_target_properties(codec_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(codec_emu PRIVATE Threads::Threads m)
  add_test(NAME unit.codec_kernels_emu COMMAND codec_emu)
  set_tests_properties(unit.codec_kernels_emu PROPERTIES TIMEOUT 300 LABELS "unit;nosan")
  # Under the sanitizers: buffers up to 5000 values (every size class but
  # the two largest, which only repeat the same steps many times).
  add_test(NAME unit.codec_kernels_emu.small COMMAND codec_emu 5000)
  set_tests_properties(unit.codec_kernels_emu.small PROPERTIES TIMEOUT 300 LABELS "unit;subset")
else()
  message(STATUS "qcoll: no C++ compiler, the CPU emulation of the IPC kernels is not built")
endif()

set(QCOLL_COLL_TESTS collectives.n2 collectives.n3 collectives.small_ipc.n2
    collectives.small_ipc.n3 collectives.failure.n2 collectives.forced_ipc.n2
    collectives.per_call.n3)

if(NOT QCOLL_HAVE_CUDA)
  foreach(name ${QCOLL_COLL_TESTS})
    add_test(NAME gpu.${name} COMMAND gpu_skip)
    set_tests_properties(gpu.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endforeach()
  return()
endif()

add_executable(gpu_collectives gpu_collectives.c coll_test_kernels.cu gpu_test_comm.c)
target_link_libraries(gpu_collectives PRIVATE qcoll qcoll_gpu_test)

if(NOT TARGET qcoll-run)
  return() # CMakeLists.txt warns about it
endif()

set(QCOLL_COLL_TEST_ENV "QCOLL_TIMEOUT=60;QCOLL_DEBUG=WARN;QCOLL_NCCL_LIB=/nonexistent/libnccl.so.2")
foreach(n 2 3)
  add_test(NAME gpu.collectives.n${n}
           COMMAND $<TARGET_FILE:qcoll-run> -n ${n} $<TARGET_FILE:gpu_collectives>)
  set_tests_properties(gpu.collectives.n${n} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                       TIMEOUT 900 RUN_SERIAL TRUE ENVIRONMENT "${QCOLL_COLL_TEST_ENV}")
  add_test(NAME gpu.collectives.small_ipc.n${n}
           COMMAND $<TARGET_FILE:qcoll-run> -n ${n} $<TARGET_FILE:gpu_collectives>)
  set_tests_properties(gpu.collectives.small_ipc.n${n} PROPERTIES LABELS gpu
                       SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL TRUE ENVIRONMENT
                       "${QCOLL_COLL_TEST_ENV};QCOLL_IPC_BYTES=1M;QCOLL_IPC_P2P_BYTES=64K")
endforeach()
add_test(NAME gpu.collectives.forced_ipc.n2
         COMMAND $<TARGET_FILE:qcoll-run> -n 2 $<TARGET_FILE:gpu_collectives>)
set_tests_properties(gpu.collectives.forced_ipc.n2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     TIMEOUT 900 RUN_SERIAL TRUE ENVIRONMENT
                     "QCOLL_TIMEOUT=60;QCOLL_DEBUG=WARN;QCOLL_ALGO=ipc")
add_test(NAME gpu.collectives.per_call.n3
         COMMAND $<TARGET_FILE:qcoll-run> -n 3 $<TARGET_FILE:gpu_collectives> per-call)
set_tests_properties(gpu.collectives.per_call.n3 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     TIMEOUT 900 RUN_SERIAL TRUE ENVIRONMENT
                     "${QCOLL_COLL_TEST_ENV};QCOLL_ALGO=host;QCOLL_CHECK=1")
add_test(NAME gpu.collectives.failure.n2
         COMMAND $<TARGET_FILE:qcoll-run> -n 2 $<TARGET_FILE:gpu_collectives> failure)
set_tests_properties(gpu.collectives.failure.n2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     TIMEOUT 120 RUN_SERIAL TRUE ENVIRONMENT
                     "QCOLL_TIMEOUT=3;QCOLL_DEBUG=WARN;QCOLL_NCCL_LIB=/nonexistent/libnccl.so.2")
