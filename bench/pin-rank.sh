#!/bin/sh
# Run "$@" bound to one CPU chosen by the rank's index on this host
# (QCOLL_LOCAL_RANK, set by qcoll-run), as mpirun binds its ranks to cores
# when there are no more ranks than cores.  Used to compare the two
# libraries with the same placement.
exec taskset -c "$((${QCOLL_LOCAL_RANK:?not started by qcoll-run} % $(nproc --all)))" "$@"
