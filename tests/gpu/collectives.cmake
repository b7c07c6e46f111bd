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
set(QCOLL_COLL_TESTS collectives.n2 collectives.n3 collectives.small_ipc.n2
    collectives.small_ipc.n3 collectives.failure.n2)

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
add_test(NAME gpu.collectives.failure.n2
         COMMAND $<TARGET_FILE:qcoll-run> -n 2 $<TARGET_FILE:gpu_collectives> failure)
set_tests_properties(gpu.collectives.failure.n2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     TIMEOUT 120 RUN_SERIAL TRUE ENVIRONMENT
                     "QCOLL_TIMEOUT=3;QCOLL_DEBUG=WARN;QCOLL_NCCL_LIB=/nonexistent/libnccl.so.2")
