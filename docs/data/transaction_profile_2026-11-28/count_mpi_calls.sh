#!/bin/bash
if [ "$PMI_RANK" = 0 ]; then exec perf stat -e 'probe_libmpi:*' -o mpi_calls_rank0.txt "$@"; else exec "$@"; fi
