/* codegen.h — per kernel: choose optimizations, lower the AST to loops and index math,
 * linearize, render, compile.
 *
 *   kernel AST  SINK(expr over PARAMs; arg = output shape)            (schedule.c)
 *      │ opt.c        shape state: the kernel's axes; actions (UPCAST, UNROLL, THREAD, GROUP,
 *      │              PADTO, SWAP, LOCAL, TC) rewrite it; heuristics or BEAM (search.c) pick them
 *      │ lower.c      INDEX pushed through views → LOAD/STORE, RANGE, REDUCE, following the
 *      │              axes: loops, unrolled copies, vector lanes, the parallel axis
 *      │ symbolic.c   index math simplified
 *      │ linearize.c  ordered program: loops opened late, invariants hoisted
 *      │ render/c.c   C source (GCC vector types for lanes)
 *      ▼ device/cpu.c compiled (memory + disk cache), dlopen'd, launched on the thread pool
 *
 * See docs/optimizer.md. */
#ifndef TG_CODEGEN_H
#define TG_CODEGEN_H

#include "runtime/helpers.h"
#include "uop/uop.h"

/* What codegen may know about the device a kernel is for: its capabilities record (filled by
 * the device, src/device/device.h). Nothing else about the device reaches codegen. */
typedef struct device_caps {
  int vector_bytes;     /* bytes in one vector register (16, 32, 64) */
  int vector_registers; /* vector registers the register tile may use */
  int64_t l2_bytes;     /* cache a block reused by a loop should fit in */
  int64_t llc_bytes;    /* last-level cache: a store to a larger buffer streams past it (0: never) */
  int threads;          /* cores the parallel axis is split over */
  int64_t local_bytes;  /* shared/local memory of a workgroup (0: none) */
  int max_local_size;   /* work-items in a workgroup (1: no workgroups) */
  int warp;             /* SIMD width of hardware threads (1 for a CPU) */
  int tc;               /* tensor-core shapes the device multiplies (TC_* bits; 0: none) */
  bool f16c;            /* float16 <-> float32 conversion instructions (x86 F16C): the LLVM
                         * renderer uses them (render_llvm_caps); the results are the same bits */
  int load_stride;      /* a vector load's lanes may lie up to this many elements apart: one
                         * wide load and a shuffle (the LLVM renderer); 0 or 1: contiguous only */
} device_caps;

/* Tensor-core shapes (device_caps.tc, the TC action's amount): warp-level D = A*B + C tiles.
 * m16n8k16: A 16x16 and B 16x8 of float16 or bfloat16, C and D 16x8 float32 (PTX mma.sync,
 * sm_80+). */
enum { TC_M16N8K16 = 1 };

/* Lanes of one vector register for elements of elem_bytes, 2 to 16 (the widths the renderer
 * has vector types for). */
int caps_lanes(const device_caps *c, size_t elem_bytes);

/* ---------------------------------------------------------------- shape state (opt.c) */

/* Range kinds (RANGE arg[1]). A lane range is not a loop: it is the vector lane index. */
enum { RANGE_GLOBAL = 0, RANGE_REDUCE = 1, RANGE_LANE = 2, RANGE_PARALLEL = 3, RANGE_LOCAL = 4 };
/* RANGE_LOCAL (work-group devices only): a digit of the work-item's index inside its work-group
 * (the LOCAL axes, and a GROUP axis on a work-group device). A REDUCE whose ranges are local
 * ranges combines its source across those work-items through local memory (the renderers'
 * work-group combine: store, barrier, read back). */

/* What an axis becomes in the generated code. */
typedef enum axis_kind {
  AX_GLOBAL,  /* loop over output elements */
  AX_THREAD,  /* outermost output loop, split among the threads */
  AX_REDUCE,  /* reduction loop */
  AX_GROUP,   /* reduction split among the threads; a second stage combines the partials */
  AX_UPCAST,  /* output axis unrolled in registers (a vector lane axis when contiguous) */
  AX_UNROLL,  /* reduction axis unrolled (vector partial sums when it is the lane axis) */
  AX_LOCAL,   /* output axis split among a work-group's work-items (work-group devices) */
  AX_TC,      /* the reduction's 16 of a tensor-core tile: inside the WMMA op, no loop */
} axis_kind;

/* The roles of a tensor-core tile's axes (kaxis.tc; 0: none). For m16n8k16, lane = 4g + t:
 * M = 16 outer + 8 mhi + g, N = 8 outer + 2 t + nlo (the C/D fragment layout of the PTX ISA),
 * K = 16 outer + the K axis (each operand's fragment picks its own k per element). */
enum { TC_ROLE_NONE, TC_ROLE_MHI, TC_ROLE_G, TC_ROLE_T, TC_ROLE_NLO, TC_ROLE_K };

typedef enum opt_kind {
  OPT_UPCAST, OPT_UNROLL, OPT_THREAD, OPT_GROUP, OPT_GROUPTOP, OPT_PADTO, OPT_SWAP, OPT_LOCAL, OPT_TC, OPT_COUNT
} opt_kind;

/* An action on the axis at index `axis` (at the time it is applied). amount: the split factor;
 * for THREAD an amount equal to the axis size makes the whole axis parallel; for PADTO the
 * multiple; for SWAP the other axis. TC(c, shape): `axis` picks one of the kernel's (M, N, K)
 * dim triples (kshape.tc_cand), amount a TC_* shape. */
typedef struct opt_action {
  opt_kind kind;
  int axis;
  int64_t amount;
} opt_action;

typedef struct kaxis {
  int64_t size;   /* iterations */
  int64_t stride; /* contribution to its dim's index per iteration */
  int dim;        /* 0..nout-1 output dims, nout.. reduce dims */
  axis_kind kind;
  int tc;         /* its role in a tensor-core tile (TC_ROLE_*), 0 for none */
} kaxis;

/* A (M, N, K) dim triple a tensor-core tile can take: A moves along M and K, not N; B along N
 * and K, not M; a (0/1) says which source of the MUL is A. */
typedef struct tc_dims {
  int m, n, k, a;
} tc_dims;
#define KS_MAX_TC 32

#define KS_MAX_DIMS 128
#define KS_MAX_AXES (KS_MAX_DIMS + 32)
#define KS_MAX_ACTIONS 24
#define KS_MAX_UPCAST 256 /* unrolled copies: product of unrolled sizes but the lanes */

/* The kernel's shape state: its dims (output dims, then the reduce dims of its first
 * reduction) and the axes they are split into, in loop order (parallel axis first, then the
 * loops, then the unrolled axes). The index of a dim is sum(axis value * stride). */
typedef struct kshape {
  int nout, nred;
  int64_t size[KS_MAX_DIMS];   /* true sizes */
  int64_t padded[KS_MAX_DIMS]; /* after PADTO */
  int reduce_op;               /* op of the first reduction (OP_ADD/MUL/MAX), -1 if none */
  int nreduces;                /* REDUCE_AXIS nodes in the kernel */
  bool group_ok;               /* one reduction reached only through ALU ops and reshapes */
  /* Output dims (bit d) the kernel's reductions are broadcast along: a row's max or sum fused
   * into the kernel that normalizes the row (docs/architecture.md, "Fusion policy"). Their
   * loops stay inside the others (no THREAD, no SWAP past them), so each reduction runs once
   * per row; their lane may be the reduction's lane too (kshape_row_lane_axis). */
  uint64_t row_dims;
  tg_dtype out_dtype;
  kaxis ax[KS_MAX_AXES];
  int nax;
  opt_action applied[KS_MAX_ACTIONS];
  int napplied;
  bool scalar; /* no vector lanes: unrolled axes are scalar copies (devices without vector types) */
  /* Work-group devices (kshape_use_workgroups): the most work-items in a work-group and the
   * bytes of local memory one may use; local_max <= 1 on host devices (no LOCAL; GROUP means
   * threads and a second stage there). */
  int local_max;
  int64_t local_bytes;
  int64_t stream_bytes; /* stores to a buffer larger than this stream past the caches (0: none) */
  /* The kernel runs a few images at a time, its inputs in the cache (a chain's, engine/
   * chunks.c): the heuristics size a load's extent per image (its dim 0 left out). */
  bool per_image;
  int64_t prefetch_bytes; /* a row kernel prefetches the next row of a buffer larger than this (0: never; host devices) */
  int load_stride;        /* lanes of a vector load at most this far apart (caps.load_stride; <= 1: contiguous) */
  tg_dtype red_dtype; /* dtype of the first reduction (its partials in local memory) */
  /* Tensor cores: the device's shapes (caps.tc; 0 on host devices and without a warp of 32),
   * the dim triples a tile can take (tc_match: a float32 sum of products of two 16-bit float
   * operands), and the shape applied (0: none) with its triple. */
  int tc_caps;
  tg_dtype tc_in; /* the operands' dtype (TG_FLOAT16, TG_BFLOAT16) */
  tc_dims tc_cand[KS_MAX_TC];
  int ntc_cand;
  int tc;
  tc_dims tc_at;
} kshape;

/* The state of an unoptimized kernel (one loop per dim of size > 1). */
int kshape_init(kshape *ks, uop *ast);
/* The tensor-core dim triples of a kernel (lower.c): a kernel whose only reduction is a float32
 * sum over MUL(a, b), each operand a 16-bit float (or a cast from one), reached from the output
 * through ALU ops and reshapes that keep its dims; fills ks->tc_cand. */
void tc_match(kshape *ks, uop *ast);
/* Make the state one for a work-group device (caps.max_local_size > 1): scalar code, LOCAL
 * allowed, GROUP/GROUPTOP split a reduction across a work-group, within the device's limits. */
void kshape_use_workgroups(kshape *ks, const device_caps *caps);
/* Work-items in one work-group (1 without LOCAL or work-group GROUP axes). */
int64_t kshape_local_size(const kshape *ks);
/* Bytes of local memory the kernel uses for work-group partials (0 without a GROUP axis). */
int64_t kshape_local_bytes(const kshape *ks);
/* Whether a GROUPed reduction runs as two stages (host devices: threads, then a combine). */
bool kshape_two_stages(const kshape *ks);
/* Apply an action: 0, or a negative status with a message if it is not valid here (on a
 * work-group device also when the kernel would exceed its work-items or local memory). */
int kshape_apply(kshape *ks, opt_action a);
/* Every action valid in this state (at most cap). */
int kshape_candidates(const kshape *ks, opt_action *out, int cap);
/* The default optimizations (hand-coded heuristics); NOOPT=1 leaves the state as it is. */
void kshape_optimize(kshape *ks, uop *ast, const device_caps *caps);
/* Index of the axis rendered as vector lanes, or -1: a stride-1 axis of 2..16 (power of two)
 * lanes, preferring an upcast of the last output dim (contiguous stores), then an unrolled
 * reduce axis (the last reduce dim's), then any other upcast. */
int kshape_lane_axis(const kshape *ks);
/* In a kernel with row dims: an unrolled axis of the other class (reduce vs output) that shares
 * the lane axis's vector lanes (the same size, stride 1: one row's reduction runs along the
 * lanes the row's outputs are stored in), or -1. */
int kshape_row_lane_axis(const kshape *ks);
/* The dims of u's shape the values of the reductions under it move along (bit d; up to 63). */
uint64_t reduce_moving_dims(uop *u);
/* The parallel axis (THREAD or GROUP) index, or -1. */
int kshape_parallel_axis(const kshape *ks);
/* Text of the applied actions, e.g. "UPCAST(1,16) THREAD(0,64)". */
void kshape_describe(const kshape *ks, char *buf, size_t n);
const char *opt_name(opt_kind k);

/* ---------------------------------------------------------------- lowering (lower.c) */

/* A lowered kernel: SINK(STORE…) plus facts for naming and cost. */
typedef struct kernel_info {
  char name[96];
  int nbufs;            /* PARAM slots (slot 0 is the output) */
  uint64_t flops;       /* ALU ops executed (estimate) */
  uint64_t bytes;       /* bytes of all buffers touched */
  bool row_scratch;     /* the linearizer may keep a row reduction's operand for the row's
                           output loop in a local array (host devices: output loops are loops) */
  int64_t prefetch_bytes; /* ... and prefetch the next row of a buffer larger than this where a
                           loop reads a row again (0: never) */
} kernel_info;

/* Row scratch (linearize.c): a local array of the kernel function is a DEFINE_GLOBAL with arg
 * [ROW_SCRATCH_SLOT + k, elements, 1], declared by the renderer, not passed in; at most
 * ROW_SCRATCH_MAX arrays of ROW_SCRATCH_BYTES together (a row of 16384 floats: L2-resident,
 * small on a thread's stack), each for a value of at least ROW_SCRATCH_MIN_OPS ALU ops. */
enum { ROW_SCRATCH_SLOT = 100, ROW_SCRATCH_MAX = 8, ROW_SCRATCH_BYTES = 64 << 10, ROW_SCRATCH_MIN_OPS = 4 };
static inline bool is_row_scratch(const uop *g) { return g->op == OP_DEFINE_GLOBAL && g->narg > 2 && g->arg[2] == 1; }

/* Stages: a kernel runs as one stage, or as two when a reduction is GROUPed: stage 1 writes
 * per-group partial results to a scratch buffer (slot nbufs), stage 2 combines them. */
enum { STAGE_ONLY = 0, STAGE_PARTIAL = 1, STAGE_COMBINE = 2 };

/* Lower a kernel AST under a shape state (NULL: unoptimized); the result belongs to the pool. */
uop *lower_kernel(uop *ast, const kshape *ks, int stage, kernel_info *info);
/* How a buffer access of the unoptimized kernel moves with each dim: the coefficient of the
 * dim's index in the element index (0: independent, -1: not linear). */
typedef struct kaccess {
  int slot;
  bool store;
  tg_dtype dtype;
  int64_t coef[KS_MAX_DIMS];
} kaccess;
/* The accesses (loads and stores) of a kernel, at most cap; -1 on error. */
int kernel_accesses(uop *ast, kaccess *out, int cap);

/* ---------------------------------------------------------------- vector lanes (vectorize.c) */

/* Lanes as types: every node of a lowered kernel that depends on the lane range gets vcount =
 * its lanes; broadcasts (VECTORIZE(x)) and horizontal reductions (GEP) become explicit.
 * lower_kernel runs it last. */
uop *vectorize(uop *sink);
/* Which vector nodes a renderer renders as vectors (ok NULL: none); the renderer's table. */
typedef struct vector_forms {
  bool (*ok)(const uop *u);
} vector_forms;
/* Split, lane by lane, every vector node forms has no vector form for. */
uop *devectorize(uop *sink, const vector_forms *forms);
extern const vector_forms c_vector_forms, llvm_vector_forms; /* render/c.c, render/llvm.c */

/* ---------------------------------------------------------------- programs */

/* A linear program: the kernel's nodes in execution order with loop markers. */
typedef enum { L_VALUE, L_LOOP, L_END, L_ACC_INIT, L_ACC_UPDATE, L_ACC_FINAL, L_STORE } lin_kind;
typedef struct lin_op {
  lin_kind kind;
  uop *u;
} lin_op;
typedef struct lin_program {
  lin_op *ops;
  int n;
} lin_program;

/* Order the lowered SINK; 0 or a negative status. Caller frees prog->ops. */
int linearize(uop *sink, lin_program *prog, kernel_info *info);
/* Check the program spec: loops balanced, every value defined before use. */
int program_spec_check(const lin_program *prog);
/* REDUCE: src = bodies, then its ranges (loops; before vectorize also the lane range when it
 * reduces lanes); arg = [op, number of bodies, lanes to combine (when the others are padding)].
 * Number of REDUCE bodies (a REDUCE unrolled n times accumulates n bodies per iteration). */
static inline int reduce_nbody(const uop *u) { return u->narg > 1 ? (int)u->arg[1] : 1; }

/* Render C source for the CPU: one function per program,
 * void names[i](void **args, long long start, long long end) (caller frees). */
char *render_c(const lin_program *progs, int n, const char *const *names);
/* WMMA (a tensor-core multiply-accumulate of one warp, vcount 4 float32: this work-item's D
 * elements): sources the A fragment (8 values), B (4) and C (4), in the PTX ISA's m16n8k16
 * order; arg = [TC_* shape, the operands' dtype]. GEP(wmma, i) is D element i. The renderers
 * give it mma.sync (PTX, CUDA C) or, in OpenCL, an exchange through local memory (the
 * emulation, TC_EMULATE=1). */
enum { WMMA_A = 8, WMMA_B = 4, WMMA_C = 4 };
/* The accumulators the WMMA at prog->ops[at] can multiply-add into directly (linearize.c): for
 * each D element i the one REDUCE(ADD) over float32 whose only body is GEP(wmma, i), set up
 * before it, and a zero C. 0 with accs[0..3] (the renderers then give mma.sync C = D = them and
 * skip their adds), or -1 (C as it is, D added by the REDUCEs). */
int lin_wmma_accs(const lin_program *prog, int at, uop **accs);

/* The GPU flavors of the same renderer: each program a kernel
 *   OpenCL: __kernel void name(long tg_n, __global T0 *b0, __global T1 *b1, ...)
 *   CUDA:   extern "C" __global__ void name(long long tg_n, T0 *b0, T1 *b1, ...)
 * whose work-item g < tg_n takes the g-th combination of the program's output loops, in
 * order, the first slowest (lin_work_items); local loops are the innermost digits (one
 * work-group: lin_local_size), and a REDUCE over local ranges combines the work-group's
 * partials through a local array and a barrier. Buffers up to the highest one used. */
char *render_opencl(const lin_program *progs, int n, const char *const *names);
char *render_cuda(const lin_program *progs, int n, const char *const *names);
/* The same kernels as PTX for sm_<sm> (render/ptx.c; CUDA_PTX=1), or NULL with the error set. */
char *render_ptx(const lin_program *progs, int n, const char *const *names, int sm);
/* Work-items of a program rendered for a GPU: the product of its output loops' sizes. */
long long lin_work_items(const lin_program *prog);
/* Its work-group size: the product of its local loops' sizes (RANGE_LOCAL, the innermost
 * digits of the work-item index), 0 when it has none (the device picks). */
long long lin_local_size(const lin_program *prog);

/* A compiled kernel: one or two stages, each run over [0, parallel) of its parallel axis by
 * its device's launch. */
typedef void (*kernel_fn)(void **args, long long start, long long end);
typedef struct device device; /* src/device/device.h */
typedef struct program_stage {
  kernel_fn fn;
  long long parallel; /* iterations of the parallel axis (1: serial); GPU devices: work-items */
  long long local;    /* GPU devices: work-items per work-group (0: the device's choice) */
} program_stage;
typedef struct program {
  kernel_info info;
  char *src;
  program_stage stage[2];
  int nstages;
  size_t scratch_bytes; /* GROUP partials */
  kshape ks;            /* the optimizations it was built with */
  const device *dev;    /* the device it is compiled for */
  /* engine/chunks.c: the images (dim 0 of its output: chunk_batch of them) each parallel
   * iteration computes when a part of them can run alone (else 0), and the PARAM slots it
   * reads other than image by image */
  int64_t chunk_per, chunk_batch;
  uint64_t chunk_unaligned;
  struct program *_Atomic chained; /* program_chained's variant, built once */
} program;

/* The compiled program of a kernel AST for a device (cached by device + AST, and by source);
 * NULL on error. src/engine/program.c. */
program *program_get(const device *dev, uop *ast);
/* The cached program of an AST for a device, or NULL (nothing is built). */
program *program_find(const device *dev, uop *ast);
/* Whether programs may be built on several threads at once (not while BEAM times candidates,
 * nor under the test hook). */
bool program_build_in_parallel(void);
/* Build (uncached) the program for an AST under a given shape state. */
program *program_build(const device *dev, uop *ast, const kshape *ks);
/* The unoptimized shape state of an AST for a device (work-groups and their limits on GPU
 * devices; streaming stores past the last-level cache on host devices); 0 or negative. */
int program_shape_init(const device *dev, uop *ast, kshape *ks);
void program_free(program *p);
/* p built again to run in a chain (engine/chunks.c), a group of images at a time with its
 * inputs and output in scratch blocks in the cache: its actions chosen per image (kshape
 * per_image; OPTS and BEAM's choices kept) and its stores through the cache, where p streams
 * them past it. Built once and kept with p; p itself where that changes nothing or the
 * variant would run other images per iteration; NULL on error. */
program *program_chained(program *p, uop *ast);
int program_run(program *p, void **args);
/* Count a run of p that took `seconds` from t0 in `parts` calls over groups of its images
 * (engine/chunks.c runs them). */
void program_count_run(program *p, double t0, double seconds, uint64_t parts);
/* Run without stats or DEBUG output (for timing candidates); 0 or negative status. */
int program_exec(program *p, void **args);

/* Test hook: while set, every kernel is built uncached with the shape state fn makes from
 * the unoptimized one (a negative return fails the kernel); programs built this way are
 * freed when the hook is set again (NULL: back to normal). */
typedef int (*opt_hook_fn)(uop *ast, kshape *ks, void *ctx);
void program_set_opt_hook(opt_hook_fn fn, void *ctx);
/* Test hook: while on, programs built split every vector node lane by lane (devectorize with
 * no vector forms), as for a renderer without vectors. */
void program_set_lane_by_lane(bool on);

/* Readable bytes past the end of every buffer a kernel gets (buffers, BEAM and GROUP
 * scratch): 16 lanes of 8 bytes. A vector load whose first lane is in bounds stays inside
 * the allocation, so lowering needs no bounds check for lanes past a padded dim's end. */
#define BUFFER_SLACK 128
/* The distance between the lanes of a vector LOAD (arg = [lanes, aligned, checked, 0,
 * stride]; lower.c vector_access): 1 for a contiguous one. */
static inline int64_t load_lane_stride(const uop *u) { return u->op == OP_LOAD && u->narg > 4 ? u->arg[4] : 1; }
/* Free the blocks cached for reuse by freed buffers (src/device/buffer.c; also at exit). */
void buffer_cache_clear(void);

/* BEAM search (search.c): the best shape state for an AST, found by timing candidate action
 * sequences (beam of the given width) on scratch buffers; cached on disk by AST + device.
 * 0 or a negative status (then the caller falls back to the heuristics). */
int beam_search(const device *dev, uop *ast, int width, kshape *best);
extern _Atomic uint64_t tg_beam_searches, tg_beam_cache_hits; /* searches run, answers from the disk cache */
/* Milliseconds one run of ast takes, built as the engine builds it (program_get), best of a
 * few runs on scratch buffers; INFINITY when it does not build (layout_search.c). */
double beam_time_kernel(const device *dev, uop *ast);
#endif
