src/coll/cuda/allreduce.cu	s/reads_done_barrier(v, 1, \&s)/block_barrier(v, 1, \&s)/
src/transport/cuda_ipc.c	s|resident / (2 \* sharing) : resident|resident / sharing : resident|
