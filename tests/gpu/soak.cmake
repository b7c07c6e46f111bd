# GPU soak (gpu_soak.c), included by CMakeLists.txt of this directory:
# two captured all-reduces (two-shot f32, one-shot bf16, 64 Ki elements)
# replayed 100 000 times each with new inputs on every replay, every result
# exact, VmRSS, GPU memory and descriptors flat, no asynchronous error.
# A few seconds on an H200 with MPS (scripts/gpu-tests.sh starts it), so it
# carries the plain "gpu" label; the program stops itself, saying why, when
# its pace would not finish within 180 s.  Exits 77 without a GPU.
#
#   gpu.soak.n2    qcoll-run -n 2 gpu_soak 100000 1000
if(NOT QCOLL_HAVE_CUDA)
  add_test(NAME gpu.soak.n2 COMMAND gpu_skip)
  set_tests_properties(gpu.soak.n2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  return()
endif()

add_executable(gpu_soak gpu_soak.c gpu_soak_kernels.cu gpu_test_comm.c)
target_link_libraries(gpu_soak PRIVATE qcoll qcoll_gpu_test)

if(NOT TARGET qcoll-run)
  return() # CMakeLists.txt warns about it
endif()

add_test(NAME gpu.soak.n2
         COMMAND $<TARGET_FILE:qcoll-run> -n 2 $<TARGET_FILE:gpu_soak> 100000 1000)
set_tests_properties(gpu.soak.n2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
                     RUN_SERIAL TRUE ENVIRONMENT "${QCOLL_GPU_TEST_ENV}")
