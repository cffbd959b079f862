/* rewrite.c — pattern language parser, matcher, and graph_rewrite. */
#include "uop/rewrite.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"
#include "uop/dtype.h"

enum { DT_ANY, DT_INT, DT_FLOAT, DT_BOOL, DT_INDEX };

typedef struct upat upat;
struct upat {
  uint64_t ops;  /* bitmask of allowed ops; 0 = any */
  int dtclass;   /* DT_* */
  int capture;   /* capture slot or -1 */
  int nsrc;      /* -1: sources unconstrained */
  bool more;     /* "..." after the listed sources */
  bool has_value;
  double value;  /* literal constant */
  upat *src[4];
};

typedef struct crule {
  upat *pat;
  rule_fn fn;
} crule;

struct rule_table {
  const char *name;
  crule *rules;
  int nrules;
  bool owns_patterns; /* false for merged tables: the parts own them */
  int *index[OP_COUNT]; /* per op: rule numbers, -1 terminated */
};

/* ---------------------------------------------------------------- parser */

typedef struct parser {
  const char *s, *src;
  bool failed;
} parser;

static void skip_ws(parser *p) {
  while (isspace((unsigned char)*p->s)) p->s++;
}

static upat *new_pat(void) {
  upat *q = calloc(1, sizeof *q);
  if (q) q->capture = -1, q->nsrc = -1;
  return q;
}

static int parse_op(const char *name, size_t n) {
  for (int i = 0; i < OP_COUNT; i++)
    if (strlen(uop_ops[i].name) == n && !strncmp(uop_ops[i].name, name, n)) return i;
  return -1;
}

static void parse_dtclass(parser *p, upat *q) {
  if (*p->s != ':') return;
  static const char *names[] = {"any", "int", "float", "bool", "index"};
  p->s++;
  for (int i = 0; i < 5; i++) {
    size_t n = strlen(names[i]);
    if (!strncmp(p->s, names[i], n) && !isalnum((unsigned char)p->s[n])) {
      q->dtclass = i, p->s += n;
      return;
    }
  }
  p->failed = true;
}

static upat *parse_pat(parser *p) {
  skip_ws(p);
  upat *q = new_pat();
  if (!q) return p->failed = true, NULL;
  const char *s = p->s;
  if (*s == '(') {
    p->s++;
    for (;;) { /* OP|OP|... */
      const char *b = p->s;
      while (isupper((unsigned char)*p->s) || *p->s == '_' || isdigit((unsigned char)*p->s)) p->s++;
      int op = parse_op(b, (size_t)(p->s - b));
      if (op < 0) return p->failed = true, q;
      q->ops |= 1ull << op;
      if (*p->s != '|') break;
      p->s++;
    }
    parse_dtclass(p, q);
    q->nsrc = 0;
    for (;;) {
      skip_ws(p);
      if (*p->s == ')') { p->s++; break; }
      if (!strncmp(p->s, "...", 3)) { q->more = true, p->s += 3; continue; }
      if (q->nsrc == 4 || !*p->s) return p->failed = true, q;
      q->src[q->nsrc++] = parse_pat(p);
      if (p->failed) return q;
    }
  } else if (*s == '#') {
    p->s++;
    q->ops = 1ull << OP_CONST;
    if (!islower((unsigned char)*p->s)) return p->failed = true, q;
    q->capture = *p->s++ - 'a';
  } else if (islower((unsigned char)s[0]) && !isalnum((unsigned char)s[1])) {
    q->capture = *p->s++ - 'a';
    if (*p->s == '=') {
      p->s++;
      int cap = q->capture;
      free(q);
      q = parse_pat(p);
      if (q) q->capture = cap;
      return q;
    }
  } else if (!strncmp(s, "true", 4) || !strncmp(s, "false", 5)) {
    q->ops = 1ull << OP_CONST, q->has_value = true, q->value = s[0] == 't';
    q->dtclass = DT_BOOL;
    p->s += s[0] == 't' ? 4 : 5;
  } else if (isdigit((unsigned char)*s) || *s == '-') {
    char *end;
    q->value = strtod(s, &end);
    if (end == s) return p->failed = true, q;
    q->ops = 1ull << OP_CONST, q->has_value = true;
    p->s = end;
  } else {
    return p->failed = true, q;
  }
  parse_dtclass(p, q);
  return q;
}


/* ---------------------------------------------------------------- tables */

static void free_pat(upat *q) {
  if (!q) return;
  for (int i = 0; i < q->nsrc; i++) free_pat(q->src[i]);
  free(q);
}

void rule_table_free(rule_table *t) {
  if (!t) return;
  for (int op = 0; op < OP_COUNT; op++) free(t->index[op]);
  if (t->owns_patterns)
    for (int r = 0; r < t->nrules; r++) free_pat(t->rules[r].pat);
  free(t->rules);
  free(t);
}

static int build_index(rule_table *t) {
  for (int op = 0; op < OP_COUNT; op++) {
    int n = 0;
    t->index[op] = malloc(sizeof(int) * (size_t)(t->nrules + 1));
    if (!t->index[op]) return -1;
    for (int r = 0; r < t->nrules; r++)
      if (!t->rules[r].pat->ops || (t->rules[r].pat->ops >> op & 1)) t->index[op][n++] = r;
    t->index[op][n] = -1;
  }
  return 0;
}

rule_table *rule_table_compile(const char *name, const rule *rules) {
  int n = 0;
  while (rules[n].pattern) n++;
  rule_table *t = calloc(1, sizeof *t);
  if (!t || !(t->rules = calloc((size_t)n + 1, sizeof *t->rules))) return free(t), NULL;
  t->name = name, t->nrules = n, t->owns_patterns = true;
  for (int i = 0; i < n; i++) {
    parser p = {rules[i].pattern, rules[i].pattern, false};
    t->rules[i].pat = parse_pat(&p);
    skip_ws(&p);
    t->rules[i].fn = rules[i].fn;
    if (p.failed || *p.s) {
      fprintf(stderr, "tg: bad pattern in %s: \"%s\" near \"%s\"\n", name, p.src, p.s);
      rule_table_free(t);
      return NULL; /* programming error; tables are static */
    }
  }
  if (build_index(t) < 0) return rule_table_free(t), NULL;
  return t;
}

rule_table *rule_table_once(rule_table *_Atomic *slot, const char *name, const rule *rules) {
  rule_table *t = atomic_load_explicit(slot, memory_order_acquire);
  if (t) return t;
  rule_table *mine = rule_table_compile(name, rules), *none = NULL;
  if (atomic_compare_exchange_strong_explicit(slot, &none, mine, memory_order_acq_rel, memory_order_acquire)) return mine;
  rule_table_free(mine); /* another thread was first */
  return none;
}

rule_table *rule_table_merge(const char *name, rule_table *const *tables, int n) {
  int total = 0;
  for (int i = 0; i < n; i++) {
    if (!tables[i]) return NULL;
    total += tables[i]->nrules;
  }
  rule_table *t = calloc(1, sizeof *t);
  if (!t || !(t->rules = calloc((size_t)total + 1, sizeof *t->rules))) return free(t), NULL;
  t->name = name;
  for (int i = 0; i < n; i++)
    for (int r = 0; r < tables[i]->nrules; r++) t->rules[t->nrules++] = tables[i]->rules[r];
  if (build_index(t) < 0) return rule_table_free(t), NULL;
  return t;
}

const char *rule_table_name(const rule_table *t) { return t->name; }

/* ---------------------------------------------------------------- matching */

static bool dtype_ok(int cls, tg_dtype dt) {
  switch (cls) {
    case DT_INT: return dtype_is_int(dt);
    case DT_FLOAT: return dtype_is_float(dt);
    case DT_BOOL: return dt == TG_BOOL;
    case DT_INDEX: return dt == TG_INT64;
    default: return true;
  }
}

static bool match(const upat *q, uop *u, uop **cap) {
  if (q->ops && !(q->ops >> u->op & 1)) return false;
  if (!dtype_ok(q->dtclass, u->dtype)) return false;
  if (q->has_value && uop_const_value(u) != q->value) return false;
  if (q->capture >= 0) {
    if (cap[q->capture] && cap[q->capture] != u) return false;
    cap[q->capture] = u;
  }
  if (q->nsrc < 0) return true;
  if (q->more ? u->nsrc < q->nsrc : u->nsrc != q->nsrc) return false;
  if (q->nsrc == 2 && (uop_flags(u) & UOP_FLAG_COMMUTATIVE)) {
    uop *saved[26];
    memcpy(saved, cap, sizeof saved);
    if (match(q->src[0], u->src[0], cap) && match(q->src[1], u->src[1], cap)) return true;
    memcpy(cap, saved, sizeof saved);
    return match(q->src[0], u->src[1], cap) && match(q->src[1], u->src[0], cap);
  }
  for (int i = 0; i < q->nsrc; i++)
    if (!match(q->src[i], u->src[i], cap)) return false;
  return true;
}

uop *rule_apply(const rule_table *t, void *ctx, uop *u) {
  for (const int *r = t->index[u->op]; *r >= 0; r++) {
    uop *cap[26] = {0};
    const crule *cr = &t->rules[*r];
    if (!match(cr->pat, u, cap)) continue;
    uop *out = cr->fn(ctx, u, cap);
    if (out && out != u) return out;
  }
  return NULL;
}

/* ---------------------------------------------------------------- graph_rewrite */

typedef struct rewriter {
  const rule_table *rules;
  void *ctx;
  ptrmap memo;
  int depth;
  bool top_down;
} rewriter;

static uop *rewrite_node(rewriter *rw, uop *u) {
  uop *done = ptrmap_get(&rw->memo, u);
  if (done) return done;
  if (++rw->depth > 200000) return NULL; /* pathological recursion guard */
  if (rw->top_down) { /* rules first: a replaced node's old sources are never visited */
    uop *next = rule_apply(rw->rules, rw->ctx, u);
    if (next) {
      uop *out = rewrite_node(rw, next);
      rw->depth--;
      if (out && ptrmap_put(&rw->memo, u, out) < 0) return NULL;
      return out;
    }
  }
  uop *srcs_small[8], **srcs = srcs_small;
  if (u->nsrc > 8 && !(srcs = malloc(sizeof(uop *) * (size_t)u->nsrc))) return NULL;
  bool changed = false;
  uop *cur = u;
  for (int i = 0; i < u->nsrc; i++) {
    srcs[i] = rewrite_node(rw, u->src[i]);
    if (!srcs[i]) { cur = NULL; break; }
    changed |= srcs[i] != u->src[i];
  }
  if (cur && changed) cur = uop_replace_src(u, srcs, u->nsrc);
  if (srcs != srcs_small) free(srcs);
  if (cur) {
    uop *next = rule_apply(rw->rules, rw->ctx, cur);
    if (next) cur = rewrite_node(rw, next);
  }
  rw->depth--;
  if (cur && ptrmap_put(&rw->memo, u, cur) < 0) return NULL;
  return cur;
}

uop *graph_rewrite(uop *root, const rule_table *rules, void *ctx) {
  return graph_rewrite_ex(root, rules, ctx, false);
}

uop *graph_rewrite_ex(uop *root, const rule_table *rules, void *ctx, bool top_down) {
  if (!root || !rules) return NULL;
  rewriter rw = {rules, ctx, {0}, 0, top_down};
  uop *out = rewrite_node(&rw, root);
  ptrmap_free(&rw.memo);
  return out;
}
