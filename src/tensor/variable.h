/* variable.h — symbolic variables inside the library (variable.c; docs/symbolic.md). */
#ifndef TG_VARIABLE_H
#define TG_VARIABLE_H

#include <stdbool.h>
#include <stdint.h>
#include "tg.h"
#include "uop/uop.h"

typedef struct device device;

/* The one-element int64 buffer holding variable id's bound value on dev (made on first use,
 * kept for good; tg_var_bind writes it), and the value in *value; NULL with "variable 'x' is
 * not bound" while it has none. */
uop *var_buffer(int id, const device *dev, int64_t *value);

/* v with its variable at the end of its range (hi: max, else min); plain v as it is. */
int64_t sym_end(int64_t v, bool hi);
/* Movement arguments args[0..n): no invalid encoding, at most one variable; out (if not NULL)
 * gets their layout values. False with an error naming op. */
bool sym_arg_check(const char *op, const int64_t *args, int n, int64_t *out);
/* True when axis (normalized) of u has a plain size; else false with "op: axis 1 has a variable
 * size (n+1, variable 'n'): not supported". */
bool sym_axis_plain(const char *op, const uop *u, int axis);
/* Dim i of u: its symbolic form where it has one, else its size. */
int64_t sym_dim(const uop *u, int i);
/* c (of x's layout shape) viewed with x's variable dims: SHRINK(c, [0, size)); c itself when x
 * has none. */
uop *sym_like(uop *c, const uop *x);
/* tg_to_host of a tensor with a variable dim: the elements at the bound values. */
int sym_to_host(tg_tensor *t, void *dst, size_t nbytes);
#endif
