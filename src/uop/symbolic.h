/* symbolic.h — constant folding, value ranges and the simplification rules for index math. */
#ifndef TG_SYMBOLIC_H
#define TG_SYMBOLIC_H

#include "uop/rewrite.h"

/* Evaluate an ALU op on constant operands in dtype dt (C semantics: / and % truncate).
 * Values travel as double for floats and as int64 bits for ints. Returns false if the op
 * cannot be folded (e.g. integer division by zero). */
typedef union cval {
  double f;
  int64_t i;
} cval;
bool alu_eval(uop_op op, tg_dtype dt, tg_dtype src_dt, const cval *in, int n, cval *out);

/* Value range of an integer or bool node (cached). */
int64_t uop_vmin(uop *u);
int64_t uop_vmax(uop *u);

/* The rule table "symbolic": folding, identities, sum canonicalisation, div/mod by ranges. */
const rule_table *symbolic_rules(void);
/* Convenience: graph_rewrite(u, symbolic_rules()). */
uop *uop_simplify(uop *u);

/* An index sum taken apart: terms coef * base (appended to t from t[n]) plus a constant added
 * to *k, with mul applied to all. Returns the new number of terms, or -1 past cap terms or on
 * int64 overflow. */
typedef struct term {
  int64_t coef;
  uop *base;
} term;
int index_terms(uop *u, int64_t mul, term *t, int n, int cap, int64_t *k);
#endif
