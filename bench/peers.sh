# The peers' programs, shared by bench/real and bench/overhead: bpftrace
# equivalents of syscount -L (count + latency per syscall) and of BCC's
# offwaketime (off-CPU time by the sleeper's stacks and the waker's).
# Sourced, never run. PRED: a bpftrace predicate naming the profiled
# threads where they switch out or enter a syscall.

bt_syscalls() { # PRED
    echo "tracepoint:raw_syscalls:sys_enter /$1/ { @start[tid] = nsecs; @calls[args->id] = count(); }
tracepoint:raw_syscalls:sys_exit /@start[tid]/ { \$d = nsecs - @start[tid]; @total_ns[args->id] = sum(\$d); @lat[args->id] = hist(\$d); delete(@start[tid]); }"
}

bt_offwake() { # PRED
    echo "tracepoint:sched:sched_switch /$1/ { @start[args->prev_pid] = nsecs; @ust[args->prev_pid] = ustack; @kst[args->prev_pid] = kstack; }
tracepoint:sched:sched_waking /@start[args->pid]/ { @wust[args->pid] = ustack; @wkst[args->pid] = kstack; }
tracepoint:sched:sched_switch /@start[args->next_pid]/ { \$p = args->next_pid; @off_ns[@kst[\$p], @ust[\$p], @wkst[\$p], @wust[\$p]] = sum(nsecs - @start[\$p]); delete(@start[\$p]); delete(@ust[\$p]); delete(@kst[\$p]); delete(@wust[\$p]); delete(@wkst[\$p]); }"
}

