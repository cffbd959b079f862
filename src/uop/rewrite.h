/* rewrite.h — the pattern matcher and graph_rewrite.
 *
 * Rules are data: a table of {pattern text, callback}. Patterns are s-expressions parsed once:
 *   x                 any node, captured as x (a single lowercase letter; repeated = same node)
 *   (ADD x y)         op and ordered sources; commutative ops also try the swapped order
 *   (ADD|MUL x y)     one of several ops
 *   (REDUCE x ...)    "..." allows further sources
 *   #c                a CONST, captured as c
 *   0  1  -1  2.5     a CONST of that value;  true / false  bool CONSTs
 *   x=(MUL a b)       capture the node matched by a sub-pattern
 *   suffix :int :float :bool :index on an atom or op list restricts the dtype
 * A callback gets the captures (cap['x'-'a']) and returns a replacement or NULL (no match). */
#ifndef TG_REWRITE_H
#define TG_REWRITE_H

#include "uop/uop.h"

typedef uop *(*rule_fn)(void *ctx, uop *root, uop **cap);

typedef struct rule {
  const char *pattern;
  rule_fn fn;
} rule;

typedef struct rule_table rule_table;

/* Compile a NULL-terminated rule list (pattern == NULL ends it) into a table indexed by op.
 * A malformed pattern is a programming error: reported on stderr and NULL returned. */
rule_table *rule_table_compile(const char *name, const rule *rules);
/* The table of a static rule list, compiled by the first caller in the process (any thread)
 * and kept: `static rule_table *_Atomic t; ... rule_table_once(&t, "name", list)`. */
rule_table *rule_table_once(rule_table *_Atomic *slot, const char *name, const rule *rules);
/* Several tables merged into one (first rules first). */
rule_table *rule_table_merge(const char *name, rule_table *const *tables, int n);
const char *rule_table_name(const rule_table *t);
/* Free a table (NULL is a no-op). A merged table borrows its parts' patterns: free it first. */
void rule_table_free(rule_table *t);

/* Rewrite bottom-up to a fixed point with memoization. The result belongs to the pool. */
uop *graph_rewrite(uop *root, const rule_table *rules, void *ctx);

/* Same, choosing the order: top_down applies a node's rules before visiting its sources. */
uop *graph_rewrite_ex(uop *root, const rule_table *rules, void *ctx, bool top_down);

/* Rewrite once at the root only (first matching rule), NULL if none matched. */
uop *rule_apply(const rule_table *rules, void *ctx, uop *u);
#endif
