#!/bin/sh
# The README's C example started the way mpirun (Open MPI) or srun (Slurm)
# start ranks on one host: only that launcher's variables are set, no
# QCOLL_* ones, and the program must run as written.
#   launcher_env.sh openmpi|slurm PROG
# Two ranks are started here with the variables each launcher sets; the
# job id (which also picks the rendezvous port) is unique to this run.
set -u
mode=$1
prog=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/launcher_env.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
job="qcoll-test-$$-$(date +%s)"
job_number="$$$(date +%s)"
# Whatever launcher runs this test, only the emulated one may be seen.
clean="env -u QCOLL_RANK -u QCOLL_WORLD_SIZE -u QCOLL_UNIQUE_ID -u QCOLL_ROOT_ADDR
  -u QCOLL_ROOT_PORT -u QCOLL_SECRET -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT
  -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS
  -u PMI_RANK -u PMI_SIZE"
pids=""
for r in 0 1; do
  case $mode in
    openmpi)
      $clean OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=$r \
        OMPI_COMM_WORLD_LOCAL_SIZE=2 PMIX_NAMESPACE="$job" "$prog" >"$tmp/out.$r" 2>&1 &
      ;;
    slurm)
      $clean SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_NNODES=1 \
        SLURM_JOB_ID="$job_number" "$prog" >"$tmp/out.$r" 2>&1 &
      ;;
    *) echo "unknown mode $mode"; exit 2 ;;
  esac
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
cat "$tmp/out.0" "$tmp/out.1"
[ $status -eq 0 ] || { echo "FAIL: a rank exited non-zero"; exit 1; }
grep -q "rank 1 of 2: sum = 3 (expected 3)" "$tmp/out.1" || { echo "FAIL: rank 1's sum"; exit 1; }
echo "PASS: $mode environment"
