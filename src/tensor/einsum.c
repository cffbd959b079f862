/* einsum.c — tg_einsum: Einstein summation over labelled axes (torch.einsum / numpy.einsum).
 *
 * The equation is parsed into one label per axis (letters, and the axes an ellipsis stands
 * for, right-aligned like broadcasting). Each operand first takes the diagonal of a repeated
 * label and sums the labels no one else needs; then the operands are contracted left to right,
 * each pair as one batched matmul: (batch, a-only, contracted) @ (batch, contracted, b-only),
 * so a contraction gets the matmul's kernel (register tiles, packed panels). Everything is a
 * composite of views, sums and matmul: gradients come for free. */
#include <stdlib.h>
#include <string.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"

enum { LETTERS = 52, MAX_LABELS = LETTERS + TG_MAX_DIMS };

/* A parsed term: the label of each axis. */
typedef struct term {
  int n, ell_at, ell_n; /* labels; where the ellipsis starts (-1: none) and how many axes it covers */
  int label[TG_MAX_DIMS];
} term;

static int letter_id(char c) { /* torch's order: 'A'..'Z' then 'a'..'z' */
  return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -1;
}

/* Parse the letters and at most one "..." of s[0..len) into t (ellipsis axes filled later). */
static bool parse_term(const char *s, size_t len, term *t) {
  t->n = 0, t->ell_at = -1, t->ell_n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ') continue;
    if (s[i] == '.') {
      if (t->ell_at >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') return false;
      t->ell_at = t->n, i += 2;
      continue;
    }
    int id = letter_id(s[i]);
    if (id < 0 || t->n >= TG_MAX_DIMS) return false;
    t->label[t->n++] = id;
  }
  return true;
}

/* Insert the ellipsis axes of a term whose operand has rank nd: labels LETTERS + (ell - e) + i. */
static bool expand_ellipsis(term *t, int nd, int ell) {
  int e = nd - t->n;
  if (t->ell_at < 0) return e == 0;
  if (e < 0 || e > ell || t->n + e > TG_MAX_DIMS) return false;
  memmove(t->label + t->ell_at + e, t->label + t->ell_at, sizeof(int) * (size_t)(t->n - t->ell_at));
  for (int i = 0; i < e; i++) t->label[t->ell_at + i] = LETTERS + (ell - e) + i;
  t->n += e, t->ell_n = e;
  return true;
}

/* The parsed equation: one term per operand and the output's. */
typedef struct equation {
  term in[TG_MAX_DIMS], out;
  int ell; /* axes the ellipsis covers (the most of any operand) */
} equation;

static bool parse_equation(const char *eq, tg_tensor **ops, int n, equation *e) {
  const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq), *p = eq;
  e->ell = 0;
  for (int i = 0; i < n; i++) {
    const char *comma = memchr(p, ',', (size_t)(end - p)), *stop = comma ? comma : end;
    if ((i < n - 1) != (comma != NULL)) return tensor_error("einsum: \"%s\" has not %d operand terms", eq, n), false;
    if (!parse_term(p, (size_t)(stop - p), &e->in[i])) return tensor_error("einsum: invalid term in \"%s\"", eq), false;
    int extra = tg_ndim(ops[i]) - e->in[i].n;
    if (e->in[i].ell_at >= 0 && extra > e->ell) e->ell = extra;
    p = stop + 1;
  }
  for (int i = 0; i < n; i++)
    if (!expand_ellipsis(&e->in[i], tg_ndim(ops[i]), e->ell))
      return tensor_error("einsum: term %d of \"%s\" does not match operand %d of rank %d", i, eq, i, tg_ndim(ops[i])),
             false;
  int count[MAX_LABELS] = {0};
  for (int i = 0; i < n; i++)
    for (int k = 0; k < e->in[i].n; k++) count[e->in[i].label[k]]++;
  if (arrow) {
    if (!parse_term(arrow + 2, strlen(arrow + 2), &e->out) || e->out.n + e->ell > TG_MAX_DIMS)
      return tensor_error("einsum: invalid output term in \"%s\"", eq), false;
    bool seen[MAX_LABELS] = {0};
    for (int k = 0; k < e->out.n; k++) {
      int id = e->out.label[k];
      if (seen[id] || !count[id])
        return tensor_error("einsum: output label '%c' of \"%s\" is repeated or in no operand",
                            id < 26 ? 'A' + id : 'a' + id - 26, eq), false;
      seen[id] = true;
    }
    expand_ellipsis(&e->out, e->out.n + (e->out.ell_at >= 0 ? e->ell : 0), e->ell);
  } else { /* implicit: the ellipsis axes, then the letters used once, in label order */
    e->out.n = 0, e->out.ell_at = -1;
    for (int i = 0; i < e->ell; i++) e->out.label[e->out.n++] = LETTERS + i;
    for (int id = 0; id < LETTERS; id++)
      if (count[id] == 1) e->out.label[e->out.n++] = id;
  }
  return true;
}

/* An operand or intermediate with its labels. */
typedef struct labelled {
  tg_tensor *t;
  int n, label[TG_MAX_DIMS];
} labelled;

static int find(const labelled *x, int id) {
  for (int k = 0; k < x->n; k++)
    if (x->label[k] == id) return k;
  return -1;
}

/* Take the diagonal of every repeated label (the diagonal's axis goes last). */
static bool take_diagonals(labelled *x) {
  for (int p = 0; p < x->n; p++)
    for (int q = p + 1; q < x->n; q++) {
      if (x->label[p] != x->label[q]) continue;
      int64_t a = tg_dim(x->t, p), b = tg_dim(x->t, q);
      if (a != b) return tensor_error("einsum: repeated label has sizes %lld and %lld", (long long)a, (long long)b), false;
      int id = x->label[p], k = 0;
      x->t = tg_diagonal(x->t, 0, p, q);
      for (int i = 0; i < x->n; i++)
        if (i != p && i != q) x->label[k++] = x->label[i];
      x->label[k++] = id, x->n = k, p = -1; /* start over: positions moved */
      break;
    }
  return x->t != NULL;
}

/* Sum the axes whose labels are not in need[]. */
static void sum_unneeded(labelled *x, const bool *need) {
  int axes[TG_MAX_DIMS], na = 0, k = 0;
  for (int i = 0; i < x->n; i++)
    if (!need[x->label[i]]) axes[na++] = i;
  if (!na || !x->t) return;
  x->t = tg_sum(x->t, axes, na, false);
  for (int i = 0; i < x->n; i++)
    if (need[x->label[i]]) x->label[k++] = x->label[i];
  x->n = k;
}

/* Permute x to the label order ids[0..n) (all present) and reshape to the given group sizes. */
static tg_tensor *arrange(const labelled *x, const int *ids, int n, const int64_t *sizes, const int64_t *groups, int ng) {
  int order[TG_MAX_DIMS];
  int64_t full[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) order[i] = find(x, ids[i]), full[i] = sizes[ids[i]];
  tg_tensor *t = tg_permute(x->t, order, n);
  t = t ? tg_expand(t, full, n) : NULL; /* a size-1 axis broadcasts to the other operand's size */
  return t ? tg_reshape(t, groups, ng) : NULL;
}

/* a · b over their shared labels that keep[] does not need afterwards: one batched matmul. */
static labelled contract(const labelled *a, const labelled *b, const bool *keep) {
  int bat[TG_MAX_DIMS], ao[TG_MAX_DIMS], con[TG_MAX_DIMS], bo[TG_MAX_DIMS], nb = 0, na = 0, nc = 0, no = 0;
  int64_t size[MAX_LABELS], g[4] = {1, 1, 1, 1}; /* batch, a-only, contracted, b-only */
  labelled r = {NULL, 0, {0}};
  for (int i = 0; i < MAX_LABELS; i++) size[i] = 1;
  for (int i = 0; i < a->n; i++) size[a->label[i]] = tg_dim(a->t, i);
  for (int i = 0; i < b->n; i++) {
    int64_t s = tg_dim(b->t, i), *have = &size[b->label[i]];
    if (find(a, b->label[i]) >= 0 && *have != s && *have != 1 && s != 1)
      return tensor_error("einsum: a label has sizes %lld and %lld", (long long)*have, (long long)s), r;
    if (*have == 1 || find(a, b->label[i]) < 0) *have = s;
  }
  for (int i = 0; i < a->n; i++) {
    int id = a->label[i];
    if (find(b, id) < 0) ao[na++] = id, g[1] *= size[id];
    else if (keep[id]) bat[nb++] = id, g[0] *= size[id];
    else con[nc++] = id, g[2] *= size[id];
  }
  for (int i = 0; i < b->n; i++)
    if (find(a, b->label[i]) < 0) bo[no++] = b->label[i], g[3] *= size[b->label[i]];
  int ia[TG_MAX_DIMS * 3], ib[TG_MAX_DIMS * 3], ka = 0, kb = 0; /* (batch, a-only, contracted), (batch, contracted, b-only) */
  for (int i = 0; i < nb; i++) ia[ka++] = ib[kb++] = bat[i];
  for (int i = 0; i < na; i++) ia[ka++] = ao[i];
  for (int i = 0; i < nc; i++) ia[ka++] = ib[kb++] = con[i];
  for (int i = 0; i < no; i++) ib[kb++] = bo[i];
  tg_tensor *m = tg_matmul(arrange(a, ia, a->n, size, (int64_t[]){g[0], g[1], g[2]}, 3),
                           arrange(b, ib, b->n, size, (int64_t[]){g[0], g[2], g[3]}, 3)); /* (batch, I, J) */
  int64_t out[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) r.label[r.n] = bat[i], out[r.n++] = size[bat[i]];
  for (int i = 0; i < na; i++) r.label[r.n] = ao[i], out[r.n++] = size[ao[i]];
  for (int i = 0; i < no; i++) r.label[r.n] = bo[i], out[r.n++] = size[bo[i]];
  r.t = m ? tg_reshape(m, out, r.n) : NULL;
  return r;
}

/* need[] = the output's labels and those of operands from..n-1. */
static void needed(const equation *e, const labelled *x, int from, int n, bool *need) {
  memset(need, 0, sizeof(bool) * MAX_LABELS);
  for (int k = 0; k < e->out.n; k++) need[e->out.label[k]] = true;
  for (int i = from; i < n; i++)
    for (int k = 0; k < x[i].n; k++) need[x[i].label[k]] = true;
}

static tg_tensor *einsum_run(const equation *e, tg_tensor **ops, int n) {
  labelled *x = calloc((size_t)n, sizeof *x);
  bool need[MAX_LABELS];
  if (!x) return tensor_error("einsum: out of memory");
  for (int i = 0; i < n; i++) {
    x[i].t = ops[i], x[i].n = e->in[i].n;
    memcpy(x[i].label, e->in[i].label, sizeof(int) * (size_t)x[i].n);
  }
  bool ok = true;
  for (int i = 0; ok && i < n; i++) ok = take_diagonals(&x[i]);
  for (int i = 0; ok && i < n; i++) { /* labels only this operand has and the output does not */
    labelled self = x[i];
    x[i].n = 0;
    needed(e, x, 0, n, need);
    x[i] = self;
    sum_unneeded(&x[i], need);
    ok = x[i].t != NULL;
  }
  labelled r = ok ? x[0] : (labelled){NULL, 0, {0}};
  for (int i = 1; ok && r.t && i < n; i++) {
    needed(e, x, i + 1, n, need);
    r = contract(&r, &x[i], need);
  }
  free(x);
  if (!r.t) return NULL;
  needed(e, NULL, 0, 0, need);
  sum_unneeded(&r, need); /* left only by a single operand whose label repeats in none */
  int order[TG_MAX_DIMS];
  for (int k = 0; k < e->out.n; k++) order[k] = find(&r, e->out.label[k]);
  return r.t ? tg_permute(r.t, order, e->out.n) : NULL;
}

tg_tensor *tg_einsum(const char *equation_, tg_tensor **operands, int n) {
  if (!equation_ || !operands || n < 1 || n > TG_MAX_DIMS)
    return tensor_error("einsum: needs an equation and 1..%d operands", TG_MAX_DIMS);
  for (int i = 0; i < n; i++)
    if (!operands[i]) return null_arg("einsum");
  equation *e = malloc(sizeof *e);
  if (!e) return tensor_error("einsum: out of memory");
  tg_tensor *r = NULL;
  if (parse_equation(equation_, operands, n, e)) {
    tg_scope *s = tg_scope_begin();
    r = tg_keep(einsum_run(e, operands, n));
    tg_scope_end(s);
  }
  free(e);
  return r;
}
