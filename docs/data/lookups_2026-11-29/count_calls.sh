#!/bin/bash
# Rank 0 under callgrind, counting only the instructions inside Window's methods (the calls
# themselves: lock, put, accumulate, unlock, fence, start, complete, flush, ...; not the awaits,
# whose event-loop turns depend on time, which valgrind stretches).  Other ranks run normally.
#   TAG=name mpiexec -n 2 -genv TAG name ./count_calls.sh python epochs.py lock 4000
#   grep Collected callgrind_name.log      -> instructions; divide by the count of epochs
if [ "$PMI_RANK" = 0 ]; then
  exec valgrind --tool=callgrind --callgrind-out-file="callgrind_$TAG.out" \
    --toggle-collect='CPyPy_window___Window___*' "$@" 2> "callgrind_$TAG.log"
else
  exec "$@"
fi
