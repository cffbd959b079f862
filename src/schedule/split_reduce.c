/* split_reduce.c — a layout rule (layout.c's rules[]): a reduction over an axis that a RESHAPE
 * of a computed value merged from several axes is rewritten to reduce over those axes.
 *
 * Example: GGUF's Q8_0 dequantization computes (rows * blocks, 32) values and reshapes them to
 * the matrix (rows, cols); a matrix-vector product sums over cols. Lowered as one axis, each
 * value's index splits back into (block, value) by div/mod and its block's fields are gathered
 * per value. Summed over (blocks, 32) instead, the 32 values are a contiguous run along the
 * inner reduce axis (vector loads) and a block's scale one load per block: the optimizer sees
 * the block structure.
 *
 *   REDUCE(s, axis a)  →  RESHAPE(REDUCE(RESHAPE(s, a split into p1..pk), axes a..a+k-1), shape)
 *
 * Where: the reduce's source is walked through elementwise ops, PERMUTEs (to the axis a is),
 * EXPANDs, SHRINKs, PADs and FLIPs that keep axis a's size, and RESHAPEs that keep axis a whole
 * (followed to the input axis it is); the first RESHAPE that makes axis a from pieces of k > 1 input axes (row-major boundaries that nest) whose input is
 * computed (not a view of a buffer or a constant, which the lowering indexes with plain strides
 * anyway) gives p1..pk, and a part that is a whole input axis is split further by the reshapes
 * below it (Q4_K: cols -> (blocks, 256) -> (blocks, 8, 32)). An elementwise op's sources are
 * each walked and their splits united where the cuts nest (x's heads (12, 64) times W's
 * blocks (24, 32): (12, 2, 32)), else the first one kept. The value is the same reduction,
 * the terms visited in the same order (the merged axis' order is the parts' row-major order).
 * Not for symbolic or empty sizes. Any split gives the same value (the terms keep their order);
 * the walk only chooses one the lowering can index without div/mod. */
#include <string.h>

#include "schedule/schedule.h"
#include "schedule/layout.h"

#include "tensor/tensor.h"

/* The walk remembers the (node, axis) pairs that gave no split (graphs share nodes: a random
 * generator's hash rounds, GELU's uses of x; walking every path would be exponential) and
 * visits at most WALK_MAX_NODES nodes. */
enum { WALK_MAX_NODES = 4096, MAX_PARTS = TG_MAX_DIMS };

typedef struct walk {
  int budget;
  ptrmap failed; /* node → bit (1 << axis) set for each axis that gave no split (axes < 64) */
} walk;

typedef struct split {
  int axis;                /* the reduced axis of the reduce's source */
  int nparts;
  int64_t parts[MAX_PARTS];
} split;

/* Product of shape[0..n). */
static int64_t prefix(const int64_t *shape, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= shape[i];
  return p;
}

static bool symbolic(const uop *u) {
  for (int i = 0; u->sym && i < uop_ndim(u); i++)
    if (u->sym[i]) return true;
  return false;
}

/* Whether x, through movement ops, is a buffer's or a constant's view (not computed). */
static bool plain_view(uop *x) {
  while (uop_is_movement(x)) x = x->src[0];
  return x->op == OP_BUFFER || x->op == OP_CONST || x->op == OP_IOTA || x->op == OP_VALUE;
}

/* How RESHAPE r makes its axis a from its input's axes. Row-major, a reshape keeps the flat
 * order, so axis a (the values between outer counts lo = prod(shape[0..a)) and hi = lo *
 * shape[a]) splits at every input boundary (a prefix product of the input's shape) strictly
 * inside (lo, hi), when each divides the next. Returns the parts (k > 1) in parts[], with in
 * ax[] the input axis each part is exactly (-1 for a part that is a piece of one); 1 when no
 * boundary is inside (ax[0]: the input axis that is exactly axis a, or -1); 0 when the
 * boundaries do not nest or there are too many. */
static int parts_of(uop *r, int a, int64_t *parts, int *ax) {
  const uop *in = r->src[0];
  int64_t lo = prefix(uop_shape(r), a), hi = lo * uop_shape(r)[a], last = lo, p = 1;
  int n = 0, exact = -1; /* the input axis from boundary `last` to the next, if it starts there */
  if (hi == 0) return 0;
  for (int i = 0; i < uop_ndim(in); i++) {
    if (p == last && uop_shape(in)[i] > 1) exact = i;
    p *= uop_shape(in)[i];
    if (p <= lo || p >= hi) continue;
    if (p % last || n == MAX_PARTS - 1) return 0;
    ax[n] = exact >= 0 && uop_shape(in)[exact] == p / last ? exact : -1;
    parts[n++] = p / last, last = p, exact = -1;
  }
  ax[n] = exact >= 0 && uop_shape(in)[exact] == hi / last ? exact : -1;
  if (hi % last) return 0;
  parts[n++] = hi / last;
  return n;
}

/* The parts of axis a found under x (see the header): k > 1 parts in parts[], each refined by
 * the reshapes further down where it is an axis of their input; 1 when there is no split (or
 * the walk's budget of nodes ran out). */
static int find_split_at(uop *x, int a, walk *w, int64_t *parts);

static int find_split(uop *x, int a, walk *w, int64_t *parts) {
  uint64_t seen = (uint64_t)(uintptr_t)ptrmap_get(&w->failed, x), bit = a < 64 ? UINT64_C(1) << a : 0;
  if (seen & bit) return 1;
  int n = find_split_at(x, a, w, parts);
  if (n == 1 && bit) ptrmap_put(&w->failed, x, (void *)(uintptr_t)(seen | bit)); /* out of memory: walked again */
  return n;
}

/* The inner sizes at which parts p[0..n) cut their axis (prod p[i+1..n), i < n-1) into cut[]. */
static int cuts_of(const int64_t *p, int n, int64_t *cut) {
  int64_t inner = 1;
  for (int i = n - 1; i > 0; i--) inner *= p[i], cut[i - 1] = inner;
  return n - 1;
}

/* Parts p[0..n) refined by another split q[0..m) of the same size: both cut sets, united,
 * when each cut divides the next (the refinement keeps the row-major order, so the terms keep
 * theirs); p unchanged (returns n) when they do not nest. */
static int refine(int64_t *p, int n, const int64_t *q, int m, int64_t total) {
  int64_t cut[2 * MAX_PARTS + 1];
  int k = cuts_of(p, n, cut), kq = cuts_of(q, m, cut + k);
  k += kq;
  for (int i = 1; i < k; i++) /* insertion sort, descending: the outermost cut first */
    for (int j = i; j > 0 && cut[j] > cut[j - 1]; j--) { int64_t t = cut[j]; cut[j] = cut[j - 1], cut[j - 1] = t; }
  int u = 0;
  for (int i = 0; i < k; i++)
    if (!u || cut[i] != cut[u - 1]) cut[u++] = cut[i];
  if (u + 1 > MAX_PARTS) return n;
  for (int i = 0; i < u; i++)
    if ((i ? cut[i - 1] : total) % cut[i]) return n;
  for (int i = 0; i <= u; i++) p[i] = (i ? cut[i - 1] : total) / (i < u ? cut[i] : 1);
  return u + 1;
}

/* An elementwise op: the split of the first source that has one, refined by the other
 * sources' splits where they nest. x*W with x's merged heads (12, 64) and W's Q8_0 blocks
 * (24, 32) sums over (12, 2, 32): the heads' order and whole blocks both. */
static int alu_split(uop *x, int a, walk *w, int64_t *parts) {
  int n = 1;
  for (int i = 0; i < x->nsrc; i++) {
    int64_t more[MAX_PARTS];
    int m = find_split(x->src[i], a, w, n == 1 ? parts : more);
    if (n == 1) n = m;
    else if (m > 1) n = refine(parts, n, more, m, uop_shape(x)[a]);
  }
  return n;
}

static int find_split_at(uop *x, int a, walk *w, int64_t *parts) {
  if (--w->budget < 0 || symbolic(x)) return 1;
  if (uop_is_alu(x)) return alu_split(x, a, w, parts);
  if (x->op == OP_PERMUTE) return find_split(x->src[0], (int)x->arg[a], w, parts); /* axis a is input axis arg[a] */
  if (x->op == OP_EXPAND || x->op == OP_SHRINK || x->op == OP_PAD || x->op == OP_FLIP) /* views that keep the rank */
    return uop_shape(x->src[0])[a] == uop_shape(x)[a] ? find_split(x->src[0], a, w, parts) : 1;
  int ax[MAX_PARTS];
  int64_t mine[MAX_PARTS];
  int n = x->op == OP_RESHAPE && uop_shape(x)[a] > 1 ? parts_of(x, a, mine, ax) : 0;
  if (n == 1) return ax[0] >= 0 ? find_split(x->src[0], ax[0], w, parts) : 1; /* axis a is an input axis */
  if (n < 2 || plain_view(x->src[0])) return 1;
  int k = 0;
  for (int i = 0; i < n; i++) { /* each part, refined below where it is an input axis */
    int64_t sub[MAX_PARTS];
    int m = ax[i] >= 0 ? find_split(x->src[0], ax[i], w, sub) : 1;
    if (m == 1) sub[0] = mine[i];
    if (k + m > MAX_PARTS) return 1;
    memcpy(parts + k, sub, sizeof(int64_t) * (size_t)m), k += m;
  }
  return k;
}

/* The split of reduction u, if it has one: its first reduced axis that splits. */
static bool split_of(uop *u, split *s) {
  uop *src = u->src[0];
  if (symbolic(u) || symbolic(src) || shape_numel(uop_shape(src), uop_ndim(src)) == 0) return false; /* empty: nothing to split */
  for (int i = 1; i < u->narg; i++) {
    s->axis = (int)u->arg[i];
    walk w = {.budget = WALK_MAX_NODES};
    s->nparts = find_split(src, s->axis, &w, s->parts);
    ptrmap_free(&w.failed);
    if (s->nparts > 1 && uop_ndim(src) + s->nparts - 1 <= TG_MAX_DIMS) return true;
  }
  return false;
}

/* One choice (1: split) when the rule applies, none otherwise. */
int split_reduce_choices(const device_caps *caps, uop *u, int64_t *out) {
  (void)caps;
  split s;
  if (!split_of(u, &s)) return 0;
  out[0] = 1;
  return 1;
}

uop *split_reduce_apply(const device_caps *caps, uop *u, int64_t choice) {
  (void)caps;
  split s;
  if (choice != 1 || !split_of(u, &s)) return NULL;
  uop *src = u->src[0];
  int nd = uop_ndim(src), k = s.nparts, axes[TG_MAX_DIMS], na = 0;
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, uop_shape(src), sizeof(int64_t) * (size_t)s.axis);
  memcpy(shape + s.axis, s.parts, sizeof(int64_t) * (size_t)k);
  memcpy(shape + s.axis + k, uop_shape(src) + s.axis + 1, sizeof(int64_t) * (size_t)(nd - s.axis - 1));
  for (int i = 1; i < u->narg; i++) {
    int r = (int)u->arg[i];
    if (r < s.axis) axes[na++] = r;
    else if (r > s.axis) axes[na++] = r + k - 1;
    else
      for (int j = 0; j < k; j++) axes[na++] = s.axis + j;
  }
  uop *x = ushape_reshape(src, shape, nd + k - 1);
  uop *red = x ? ureduce(x, (uop_op)u->arg[0], axes, na) : NULL;
  return red ? ushape_reshape(red, uop_shape(u), nd) : NULL;
}
