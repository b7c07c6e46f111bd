src/coll/cuda/ipc_sync.cuh	s/if (driver_launch(fn/if (false \&\& driver_launch(fn/
