/* codegen.h — per kernel: lower the AST to loops and index math, linearize, render, compile.
 *
 *   kernel AST  SINK(expr over PARAMs; arg = output shape)            (schedule.c)
 *      │ lower.c      INDEX pushed through views → LOAD/STORE, RANGE, REDUCE
 *      │ symbolic.c   index math simplified
 *      │ linearize.c  ordered program: loops opened late, invariants hoisted
 *      │ render/c.c   C source
 *      ▼ device/cpu.c compiled (memory + disk cache), dlopen'd, launched */
#ifndef TG_CODEGEN_H
#define TG_CODEGEN_H

#include "uop/uop.h"

/* A lowered kernel: SINK(STORE…) plus facts for naming and cost. */
typedef struct kernel_info {
  char name[96];
  int nbufs;            /* PARAM slots (slot 0 is the output) */
  uint64_t flops;       /* ALU ops executed (estimate) */
  uint64_t bytes;       /* bytes of all buffers touched */
} kernel_info;

/* Lower a kernel AST; the result belongs to the uop pool. */
uop *lower_kernel(uop *ast, kernel_info *info);

/* A linear program: the kernel's nodes in execution order with loop markers. */
typedef enum { L_VALUE, L_LOOP, L_END, L_ACC_INIT, L_ACC_UPDATE, L_STORE } lin_kind;
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

/* Render C source for the CPU (caller frees). */
char *render_c(const lin_program *prog, const kernel_info *info);

/* A compiled kernel. */
typedef struct program {
  kernel_info info;
  char *src;
  void (*fn)(void **args);
} program;

/* The compiled program for a kernel AST (cached by AST and by source); NULL on error. */
program *program_get(uop *ast);
int program_run(program *p, void **args);

/* CPU compiler: compile C source defining `name`; returns the function or NULL (error set). */
void *cpu_compile(const char *src, const char *name);
#endif
