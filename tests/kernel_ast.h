/* kernel_ast.h — for tests that look at one kernel's AST (test_fuse_rows.c, test_strided.c). */
#ifndef TG_TESTS_KERNEL_AST_H
#define TG_TESTS_KERNEL_AST_H

#include "schedule/schedule.h"
#include "tensor/tensor.h"

/* The one kernel AST of y's schedule (NULL if it has more), a reference of the caller's. */
static inline uop *only_ast(tg_tensor *y) {
  schedule sc;
  uop *u = y ? y->u : NULL, *ast = NULL;
  if (u && schedule_build(&u, 1, &sc) == 0) {
    if (sc.items.n == 1) ast = sc.items.v[0].ast, uop_incref(ast);
    schedule_free(&sc);
  }
  return ast;
}
#endif
