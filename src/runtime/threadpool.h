/* threadpool.h — a persistent pool of worker threads that runs the parallel axis of kernels.
 *
 * A kernel is compiled as fn(args, start, end): it computes the iterations [start, end) of its
 * outermost parallel axis. threadpool_run cuts [0, n) into a few contiguous chunks per thread,
 * which the threads (the calling thread is one) claim, their own first, and returns when every
 * chunk is done: fn must not depend on which thread runs a chunk or on how [0, n) is cut.
 * Threads are created once, on first use; THREADS=n overrides the default (the number of
 * online CPUs). */
#ifndef TG_THREADPOOL_H
#define TG_THREADPOOL_H

typedef void (*tp_kernel)(void **args, long long start, long long end);

/* Number of threads kernels run on (>= 1). */
int threadpool_size(void);
/* Run fn over [0, n) on up to threadpool_size() threads; at most max_threads if > 0. */
void threadpool_run(tp_kernel fn, void **args, long long n, int max_threads);
/* Which of the pool's threads runs this (0: the thread that started the job), in
 * [0, threadpool_size()): a kernel's per-thread scratch (engine/chunks.c). */
int threadpool_thread_index(void);
#endif
