src/coll/cuda/ipc_sync.cuh	s/\.sys\.global/.gpu.global/g
