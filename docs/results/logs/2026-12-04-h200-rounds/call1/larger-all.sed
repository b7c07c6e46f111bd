src/coll/cuda/allreduce_quant.cu	s/return quant == QCOLL_QUANT_INT8 || quant == QCOLL_QUANT_FP8;/return true;/
