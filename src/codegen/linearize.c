/* linearize.c — order a lowered kernel into a program with explicit loops.
 *
 * Every node depends on a set of ranges (bitmask; a REDUCE closes its own). A node is emitted
 * as soon as all its ranges are open: output loops are opened first; a REDUCE first emits the
 * parts of its body that do not depend on its ranges (hoisting invariants), then opens its
 * loops, emits the rest, and closes them. Deterministic: sources in order. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"

typedef struct lin_ctx {
  ptrmap range_bit; /* RANGE → bit index + 1 */
  ptrmap deps;      /* node → mask (stored +1 so 0 means absent) */
  ptrmap emitted;
  VEC(lin_op) ops;
  uint64_t open;
  int64_t trips;    /* iterations of the currently open loops */
  kernel_info *info;
  int err;
} lin_ctx;

static uint64_t deps_of(lin_ctx *c, uop *u) {
  void *v = ptrmap_get(&c->deps, u);
  if (v) return (uint64_t)(uintptr_t)v - 1;
  uint64_t m = 0;
  if (u->op == OP_RANGE) {
    uintptr_t bit = (uintptr_t)ptrmap_get(&c->range_bit, u);
    if (!bit) {
      bit = c->range_bit.count + 1;
      if (bit > 63) c->err = tg_set_error(TG_ERR_DEVICE, "kernel has more than 63 loops");
      ptrmap_put(&c->range_bit, u, (void *)bit);
    }
    m = 1ull << ((bit - 1) & 63);
  }
  for (int i = 0; i < u->nsrc; i++) m |= deps_of(c, u->src[i]);
  if (u->op == OP_REDUCE)
    for (int i = 1; i < u->nsrc; i++) m &= ~deps_of(c, u->src[i]);
  ptrmap_put(&c->deps, u, (void *)(uintptr_t)(m + 1));
  return m;
}

static void push(lin_ctx *c, lin_kind k, uop *u) {
  if (VEC_PUSH(c->ops, ((lin_op){k, u})) < 0) c->err = TG_ERR_NOMEM;
}

static bool inline_node(const uop *u) {
  return u->op == OP_CONST || u->op == OP_RANGE || u->op == OP_DEFINE_GLOBAL;
}

static void emit(lin_ctx *c, uop *u);

/* Emit the nodes under u that need no range beyond the open ones (stops at emitted nodes). */
static void hoist(lin_ctx *c, uop *u) {
  if (ptrmap_has(&c->emitted, u) || inline_node(u)) return;
  if ((deps_of(c, u) & ~c->open) == 0) { emit(c, u); return; }
  if (u->op == OP_REDUCE) { hoist(c, u->src[0]); return; }
  for (int i = 0; i < u->nsrc; i++) hoist(c, u->src[i]);
}

static void emit_reduce(lin_ctx *c, uop *u) {
  hoist(c, u->src[0]);
  push(c, L_ACC_INIT, u);
  uint64_t saved = c->open;
  int64_t saved_trips = c->trips;
  for (int i = 1; i < u->nsrc; i++) {
    if (u->src[i]->op != OP_RANGE) continue; /* a size-1 range folded to 0 */
    push(c, L_LOOP, u->src[i]);
    c->open |= deps_of(c, u->src[i]);
    c->trips *= uop_const_ivalue(u->src[i]->src[0]);
  }
  emit(c, u->src[0]);
  push(c, L_ACC_UPDATE, u);
  c->info->flops += (uint64_t)c->trips;
  for (int i = u->nsrc - 1; i >= 1; i--)
    if (u->src[i]->op == OP_RANGE) push(c, L_END, u->src[i]);
  c->open = saved, c->trips = saved_trips;
}

static void emit(lin_ctx *c, uop *u) {
  if (c->err || ptrmap_has(&c->emitted, u)) return;
  ptrmap_put(&c->emitted, u, u);
  if (inline_node(u)) return;
  if (u->op == OP_REDUCE) { emit_reduce(c, u); return; }
  for (int i = 0; i < u->nsrc; i++) emit(c, u->src[i]);
  if (u->op == OP_SINK) return;
  if (uop_is_alu(u) && u->dtype != TG_INT64) c->info->flops += (uint64_t)c->trips;
  push(c, u->op == OP_STORE ? L_STORE : L_VALUE, u);
}

int linearize(uop *sink, lin_program *prog, kernel_info *info) {
  lin_ctx c = {.info = info, .trips = 1};
  /* output loops: every kind-0 RANGE, opened in id order around everything */
  uop **order;
  int n = uop_toposort(sink, &order);
  if (n < 0) return tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
  VEC(uop *) outer = {0};
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_RANGE && order[i]->arg[1] == 0) VEC_PUSH(outer, order[i]);
  free(order);
  for (size_t i = 1; i < outer.n; i++) /* insertion sort by range id */
    for (size_t j = i; j > 0 && outer.v[j - 1]->arg[0] > outer.v[j]->arg[0]; j--) {
      uop *t = outer.v[j];
      outer.v[j] = outer.v[j - 1], outer.v[j - 1] = t;
    }
  for (size_t i = 0; i < outer.n; i++) {
    push(&c, L_LOOP, outer.v[i]);
    c.open |= deps_of(&c, outer.v[i]);
    c.trips *= uop_const_ivalue(outer.v[i]->src[0]);
  }
  emit(&c, sink);
  for (size_t i = outer.n; i > 0; i--) push(&c, L_END, outer.v[i - 1]);
  VEC_FREE(outer);
  ptrmap_free(&c.range_bit);
  ptrmap_free(&c.deps);
  ptrmap_free(&c.emitted);
  if (c.err) { VEC_FREE(c.ops); return c.err; }
  prog->ops = c.ops.v, prog->n = (int)c.ops.n;
  return 0;
}

/* Program spec: loops nest properly and every source is defined (emitted, inline, or an open
 * loop variable) before it is used. */
int program_spec_check(const lin_program *p) {
  ptrmap defined = {0};
  VEC(uop *) loops = {0};
  int rc = 0;
  for (int i = 0; i < p->n && !rc; i++) {
    const lin_op *o = &p->ops[i];
    uop *u = o->u;
    if (o->kind == L_LOOP) { VEC_PUSH(loops, u); ptrmap_put(&defined, u, u); continue; }
    if (o->kind == L_END) {
      if (!loops.n || loops.v[loops.n - 1] != u) rc = tg_set_error(TG_ERR_DEVICE, "program spec: unbalanced loop");
      else loops.n--;
      continue;
    }
    int first = o->kind == L_ACC_UPDATE ? 0 : o->kind == L_ACC_INIT ? u->nsrc : 0;
    int last = o->kind == L_ACC_UPDATE ? 1 : u->nsrc;
    for (int j = first; j < last && !rc; j++) {
      uop *s = u->src[j];
      if (!ptrmap_has(&defined, s) && s->op != OP_CONST && s->op != OP_DEFINE_GLOBAL)
        rc = tg_set_error(TG_ERR_DEVICE, "program spec: %s used before definition", uop_ops[s->op].name);
    }
    if (o->kind != L_ACC_INIT) ptrmap_put(&defined, u, u);
  }
  if (!rc && loops.n) rc = tg_set_error(TG_ERR_DEVICE, "program spec: loop left open");
  VEC_FREE(loops);
  ptrmap_free(&defined);
  return rc;
}
