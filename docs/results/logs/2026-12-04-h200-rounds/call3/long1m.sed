src/coll/cuda/launch.h	s/#define QCOLL_IPC_LONG_QUANT_BYTES ((size_t)4 << 20)/#define QCOLL_IPC_LONG_QUANT_BYTES ((size_t)1 << 20)/
