# Prepares a kernel file of src/coll/cuda for the CPU emulation
# (coll_emu.cpp, allreduce_emu.cpp), at build time:
#   OUT/<KERNEL>_emu.cpp     a copy of <KERNEL>.cu
#   OUT/ipc_sync.cuh         ipc_sync.cuh with its memory-model primitives
#                            (PTX) replaced by C++ atomics, and blocks of
#                            THREADS threads
#   OUT/emu_status.h         QCOLL_EMU_SKIP "<why>" when that cannot be done
# Everything else, the barrier and the deadlines included, is the real code.
# Called as: cmake -DSRC=<src/coll/cuda> -DOUT=<dir> [-DKERNEL=collectives]
#            [-DTHREADS=8] -P prepare.cmake
if(NOT KERNEL)
  set(KERNEL collectives)
endif()
if(NOT THREADS)
  set(THREADS 8)
endif()
file(MAKE_DIRECTORY ${OUT})
file(READ ${SRC}/ipc_sync.cuh sync)
set(begin_marker "/* ---- memory-model primitives")
set(end_marker "/* ---- block state, barriers, deadlines")
string(FIND "${sync}" "${begin_marker}" begin)
string(FIND "${sync}" "${end_marker}" end)
string(FIND "${sync}" "constexpr int kThreads = 512;" threads)
if(begin EQUAL -1 OR end EQUAL -1 OR threads EQUAL -1 OR end LESS begin)
  file(WRITE ${OUT}/emu_status.h
       "#define QCOLL_EMU_SKIP \"ipc_sync.cuh no longer has the sections this emulation replaces (tests/gpu/emu/prepare.cmake)\"\n")
  file(WRITE ${OUT}/${KERNEL}_emu.cpp "/* not prepared: see emu_status.h */\n")
  file(WRITE ${OUT}/ipc_sync.cuh "")
  return()
endif()
string(SUBSTRING "${sync}" 0 ${begin} head)
string(SUBSTRING "${sync}" ${end} -1 tail)
file(READ ${CMAKE_CURRENT_LIST_DIR}/primitives.inc primitives)
string(REPLACE "constexpr int kThreads = 512;"
       "constexpr int kThreads = ${THREADS}; /* emulation: small blocks */"
       head "${head}")
file(WRITE ${OUT}/ipc_sync.cuh "${head}${primitives}\n${tail}")
file(READ ${SRC}/${KERNEL}.cu kernels)
file(WRITE ${OUT}/${KERNEL}_emu.cpp "${kernels}")
file(WRITE ${OUT}/emu_status.h "/* prepared */\n")
