/* llvm.c — render linear programs as LLVM IR (LLVM 14 text, typed pointers) for the LLVM
 * device (device/llvm.c compiles it in process).
 *
 * The same programs, signature and semantics as render/c.c: one function per program,
 * void name(void **args, long long tg_start, long long tg_end), which loads the buffer
 * pointers and calls name.body, whose pointer parameters are noalias (C's restrict). A node
 * that is a vector (vcount w, vectorize.c) is one LLVM vector (<16 x float>); every op works on
 * vectors natively, so devectorize splits only integer pow (llvm_vector_forms). Gathers, scatters and masked or
 * bounds-checked vector accesses are the llvm.masked.* intrinsics. Loop variables are phis;
 * accumulators are allocas that the optimizer's SROA turns into registers.
 *
 * C semantics kept (see alu_expr in c.c): a NaN-propagating max (llvm.maxnum is not), integer
 * division by 0 gives 0 and by -1 never traps, integer pow by squaring (tg_ipow), shifts of
 * 8- and 16-bit values promoted like C's, bool arithmetic computed in int and tested != 0,
 * bools stored as bytes, float16/bfloat16 stored as 16 bits and computed in float with a
 * round-to-nearest-even conversion after every op (float16 by F16C's instructions where the
 * device has them, render_llvm_caps; numpy's bits either way), and floating-point contraction (fma)
 * allowed as gcc's default -ffp-contract=fast allows it. A float out of an int's range
 * converts as on x86 (C: undefined; LLVM's fptosi: poison). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "device/llvm.h"
#include "runtime/helpers.h"
#include "uop/dtype.h"

typedef struct lr {
  strbuf out;           /* the function's body */
  strbuf allocas;       /* its entry block's allocas (accumulators) */
  VEC(char *) decls;    /* declarations the module needs (deduplicated) */
  VEC(char *) strs;     /* spellings owned until the function is done */
  ptrmap names;         /* uop → its current value's name or constant spelling */
  ptrmap accs;          /* REDUCE → its accumulator's alloca */
  VEC(int) loops;       /* open loops (ids) */
  int ntmp, nlabels, naccs;
  const char *cur;      /* the current block's label */
  bool uses_ipow;
  bool f16c;            /* the device converts float16 in hardware (device_caps.f16c) */
  ptrmap exact;         /* values whose NaN bits reach memory or a non-arithmetic op (exact_nans) */
  bool quiet_ok;        /* the value being rendered is not one: a quieted NaN is as good */
  int err;
} lr;

/* ---------------------------------------------------------------- spelling */

static const char *sf(lr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *sf(lr *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  if (!s || VEC_PUSH(r->strs, s) < 0) {
    free(s);
    r->err = TG_ERR_NOMEM;
    return "undef";
  }
  return s;
}

/* One instruction line. */
static void line(lr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(lr *r, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof buf) r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: an instruction of %d bytes", n);
  sb_printf(&r->out, "  %s\n", buf);
}

/* A new value: "%tN = <instruction>"; its name. */
static const char *ins(lr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *ins(lr *r, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof buf) r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: an instruction of %d bytes", n);
  const char *name = sf(r, "%%t%d", r->ntmp++);
  sb_printf(&r->out, "  %s = %s\n", name, buf);
  return name;
}

static void label(lr *r, const char *name) {
  sb_printf(&r->out, "%s:\n", name);
  r->cur = name;
}

static void declare(lr *r, const char *decl) {
  for (size_t i = 0; i < r->decls.n; i++)
    if (!strcmp(r->decls.v[i], decl)) return;
  char *d = strdup(decl);
  if (!d || VEC_PUSH(r->decls, d) < 0) free(d), r->err = TG_ERR_NOMEM;
}

/* Types: registers compute bools as i1 and 16-bit floats as float; memory holds bools as
 * bytes and 16-bit floats as their bits. */
static const char *const reg_elem[TG_DTYPE_COUNT] = {
    [TG_BOOL] = "i1",     [TG_INT8] = "i8",       [TG_UINT8] = "i8",      [TG_INT16] = "i16",
    [TG_UINT16] = "i16",  [TG_INT32] = "i32",     [TG_UINT32] = "i32",    [TG_INT64] = "i64",
    [TG_UINT64] = "i64",  [TG_FLOAT16] = "float", [TG_BFLOAT16] = "float", [TG_FLOAT32] = "float",
    [TG_FLOAT64] = "double",
};
static const char *const mem_elem[TG_DTYPE_COUNT] = {
    [TG_BOOL] = "i8",     [TG_INT8] = "i8",     [TG_UINT8] = "i8",     [TG_INT16] = "i16",
    [TG_UINT16] = "i16",  [TG_INT32] = "i32",   [TG_UINT32] = "i32",   [TG_INT64] = "i64",
    [TG_UINT64] = "i64",  [TG_FLOAT16] = "i16", [TG_BFLOAT16] = "i16", [TG_FLOAT32] = "float",
    [TG_FLOAT64] = "double",
};
/* Intrinsic name suffixes of the register and memory element types. */
static const char *const reg_mangle[TG_DTYPE_COUNT] = {
    [TG_BOOL] = "i1",     [TG_INT8] = "i8",     [TG_UINT8] = "i8",      [TG_INT16] = "i16",
    [TG_UINT16] = "i16",  [TG_INT32] = "i32",   [TG_UINT32] = "i32",    [TG_INT64] = "i64",
    [TG_UINT64] = "i64",  [TG_FLOAT16] = "f32", [TG_BFLOAT16] = "f32",  [TG_FLOAT32] = "f32",
    [TG_FLOAT64] = "f64",
};
static const char *const mem_mangle[TG_DTYPE_COUNT] = {
    [TG_BOOL] = "i8",     [TG_INT8] = "i8",     [TG_UINT8] = "i8",     [TG_INT16] = "i16",
    [TG_UINT16] = "i16",  [TG_INT32] = "i32",   [TG_UINT32] = "i32",   [TG_INT64] = "i64",
    [TG_UINT64] = "i64",  [TG_FLOAT16] = "i16", [TG_BFLOAT16] = "i16", [TG_FLOAT32] = "f32",
    [TG_FLOAT64] = "f64",
};

/* The register type of dt with w lanes (0: a scalar). */
static const char *ty(lr *r, tg_dtype dt, int w) { return w ? sf(r, "<%d x %s>", w, reg_elem[dt]) : reg_elem[dt]; }
static const char *mty(lr *r, tg_dtype dt, int w) { return w ? sf(r, "<%d x %s>", w, mem_elem[dt]) : mem_elem[dt]; }
static const char *mangle(lr *r, const char *elem, int w) { return w ? sf(r, "v%d%s", w, elem) : elem; }

static bool is_float(tg_dtype dt) { return dtype_is_float(dt); }
static bool is_unsigned(tg_dtype dt) { return dtype_is_unsigned(dt) || dt == TG_BOOL; }
/* Every vector op has a form but integer pow (a call per lane). */
static bool llvm_vector_ok(const uop *u) { return !(u->op == OP_POW && !is_float((tg_dtype)u->dtype)); }
const vector_forms llvm_vector_forms = {llvm_vector_ok};

/* ---------------------------------------------------------------- constants */

/* A scalar float constant as LLVM spells it: the bits of the double it is (a float is
 * widened exactly). */
static const char *fspell(lr *r, tg_dtype dt, double v) {
  double d = dt == TG_FLOAT64 ? v : (double)(float)v;
  uint64_t bits;
  memcpy(&bits, &d, 8);
  return sf(r, "0x%016llX", (unsigned long long)bits);
}

/* A scalar integer constant of dt's width, as a signed number. */
static const char *ispell(lr *r, tg_dtype dt, int64_t v) {
  switch (tg_dtype_size(dt)) {
    case 1: return dt == TG_BOOL ? (v ? "true" : "false") : sf(r, "%d", (int)(int8_t)v);
    case 2: return sf(r, "%d", (int)(int16_t)v);
    case 4: return sf(r, "%d", (int)(int32_t)v);
    default: return sf(r, "%lld", (long long)v);
  }
}

/* The scalar s broadcast as a constant vector of w lanes (w = 0: s itself). */
static const char *splat(lr *r, tg_dtype dt, int w, const char *s) {
  if (!w) return s;
  strbuf b = {0};
  sb_printf(&b, "<");
  for (int l = 0; l < w; l++) sb_printf(&b, "%s%s %s", l ? ", " : "", reg_elem[dt], s);
  sb_printf(&b, ">");
  const char *v = sf(r, "%s", b.s ? b.s : "");
  sb_free(&b);
  return v;
}

static const char *fconst(lr *r, tg_dtype dt, int w, double v) { return splat(r, dt, w, fspell(r, dt, v)); }
static const char *iconst(lr *r, tg_dtype dt, int w, int64_t v) { return splat(r, dt, w, ispell(r, dt, v)); }
static const char *zero(tg_dtype dt, int w) {
  return w ? "zeroinitializer" : is_float(dt) ? "0.0" : dt == TG_BOOL ? "false" : "0";
}
static const char *all_true(lr *r, int w) { return iconst(r, TG_BOOL, w, 1); }

static const char *const_spell(lr *r, uop *c) {
  if (is_float(c->dtype)) return fspell(r, c->dtype, uop_const_value(c));
  return ispell(r, c->dtype, c->arg[0]);
}

/* ---------------------------------------------------------------- operands */

/* The lanes' numbers: <i64 0, i64 1, ..., i64 w-1>. */
static const char *lane_numbers(lr *r, int w) {
  strbuf b = {0};
  sb_printf(&b, "<");
  for (int l = 0; l < w; l++) sb_printf(&b, "%si64 %d", l ? ", " : "", l);
  sb_printf(&b, ">");
  const char *v = sf(r, "%s", b.s ? b.s : "");
  sb_free(&b);
  return v;
}

/* A scalar value broadcast to w lanes. */
static const char *bcast(lr *r, tg_dtype dt, int w, const char *s) {
  const char *vt = ty(r, dt, w);
  const char *one = ins(r, "insertelement %s undef, %s %s, i32 0", vt, reg_elem[dt], s);
  return ins(r, "shufflevector %s %s, %s undef, <%d x i32> zeroinitializer", vt, one, vt, w);
}

/* Source s as a value of w lanes (0: scalar), in its own dtype: a scalar mask or condition
 * of a vector op is broadcast (the masked intrinsics take a mask per lane). */
static const char *opnd(lr *r, uop *s, int w) {
  if (s->op == OP_CONST) return splat(r, s->dtype, w, const_spell(r, s));
  const char *name = ptrmap_get(&r->names, s);
  if (!name) {
    r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: %s used before it is defined", uop_ops[s->op].name);
    return "undef";
  }
  return w && !s->vcount ? bcast(r, s->dtype, w, name) : name;
}

/* An intrinsic call on one or two values of type t (mangled m). */
static const char *call1(lr *r, const char *fn, const char *t, const char *m, const char *a) {
  declare(r, sf(r, "declare %s @llvm.%s.%s(%s)", t, fn, m, t));
  return ins(r, "call %s @llvm.%s.%s(%s %s)", t, fn, m, t, a);
}

static const char *call2(lr *r, const char *fn, const char *t, const char *m, const char *a, const char *b) {
  declare(r, sf(r, "declare %s @llvm.%s.%s(%s, %s)", t, fn, m, t, t));
  return ins(r, "call %s @llvm.%s.%s(%s %s, %s %s)", t, fn, m, t, a, t, b);
}

/* ---------------------------------------------------------------- 16-bit floats */

/* Bit manipulation on i32 (lanes w) values: op(a, constant). */
static const char *bitk(lr *r, const char *op, int w, const char *a, int64_t k) {
  return ins(r, "%s %s %s, %s", op, ty(r, TG_UINT32, w), a, iconst(r, TG_UINT32, w, k));
}
static const char *bits2(lr *r, const char *op, int w, const char *a, const char *b) {
  return ins(r, "%s %s %s, %s", op, ty(r, TG_UINT32, w), a, b);
}
static const char *pick(lr *r, int w, const char *c, const char *a, const char *b) {
  const char *t = ty(r, TG_UINT32, w);
  return ins(r, "select %s %s, %s %s, %s %s", ty(r, TG_BOOL, w), c, t, a, t, b);
}

/* float → IEEE half bits (in an i32), round to nearest even: tg_f2h of c.c. A NaN keeps its
 * sign and top 10 payload bits, signalling or quiet as they say (1 when none are set, so it
 * stays a NaN): numpy's rule. */
static const char *f2h_hw(lr *r, int w, const char *f);
static const char *f2h(lr *r, int w, const char *f) {
  if (r->f16c) return f2h_hw(r, w, f);
  const char *x = ins(r, "bitcast %s %s to %s", ty(r, TG_FLOAT32, w), f, ty(r, TG_UINT32, w));
  const char *s = bitk(r, "and", w, bitk(r, "lshr", w, x, 16), 0x8000), *a = bitk(r, "and", w, x, 0x7fffffff);
  const char *p = bitk(r, "and", w, bitk(r, "lshr", w, a, 13), 1023);
  const char *inf = bitk(r, "or", w, s, 0x7c00);
  const char *nan = bits2(r, "or", w, inf, pick(r, w, bitk(r, "icmp eq", w, p, 0), iconst(r, TG_UINT32, w, 1), p));
  const char *af = ins(r, "bitcast %s %s to %s", ty(r, TG_UINT32, w), a, ty(r, TG_FLOAT32, w));
  const char *sc = ins(r, "fmul %s %s, %s", ty(r, TG_FLOAT32, w), af, fconst(r, TG_FLOAT32, w, 16777216.0));
  const char *rn = call1(r, "roundeven", ty(r, TG_FLOAT32, w), mangle(r, "f32", w), sc);
  const char *sub = bits2(r, "or", w, s, ins(r, "fptoui %s %s to %s", ty(r, TG_FLOAT32, w), rn, ty(r, TG_UINT32, w)));
  const char *odd = bitk(r, "and", w, bitk(r, "lshr", w, a, 13), 1);
  const char *rounded = bits2(r, "add", w, bitk(r, "add", w, a, 0xfff), odd);
  const char *norm = bits2(r, "or", w, s, bitk(r, "lshr", w, bitk(r, "sub", w, rounded, 0x38000000), 13));
  const char *v = pick(r, w, bitk(r, "icmp ult", w, a, 0x38800000), sub, norm);
  v = pick(r, w, bitk(r, "icmp uge", w, a, 0x477ff000), inf, v);
  return pick(r, w, bitk(r, "icmp ugt", w, a, 0x7f800000), nan, v);
}

/* IEEE half bits (in an i32) → float: tg_h2f. The magnitude's bits moved into a float32's
 * place and scaled by 2^112 (exact for normal and subnormal halves); exponent 31 gives the
 * float32 infinity or NaN of the same bits, a NaN its payload, a signalling one signalling
 * (numpy's float16 → float32). 9 ops and a select. */
static const char *h2f_hw(lr *r, int w, const char *h);
static const char *h2f(lr *r, int w, const char *h) {
  if (r->f16c) return h2f_hw(r, w, h);
  const char *m = bitk(r, "shl", w, bitk(r, "and", w, h, 0x7fff), 13), *s = bitk(r, "shl", w, bitk(r, "and", w, h, 0x8000), 16);
  const char *f = ins(r, "bitcast %s %s to %s", ty(r, TG_UINT32, w), m, ty(r, TG_FLOAT32, w));
  f = ins(r, "fmul %s %s, %s", ty(r, TG_FLOAT32, w), f, fconst(r, TG_FLOAT32, w, 0x1p112)); /* exact: normal and subnormal */
  const char *fin = ins(r, "bitcast %s %s to %s", ty(r, TG_FLOAT32, w), f, ty(r, TG_UINT32, w));
  const char *v = pick(r, w, bitk(r, "icmp ult", w, m, 0x0f800000), fin, bitk(r, "or", w, m, 0x7f800000));
  return ins(r, "bitcast %s %s to %s", ty(r, TG_UINT32, w), bits2(r, "or", w, v, s), ty(r, TG_FLOAT32, w));
}

/* The same with the hardware's conversion (F16C's vcvtph2ps / vcvtps2ph: fpext and fptrunc
 * through half), which quiets a signalling NaN: the NaN's quiet bit is put back as the
 * software conversion gives it (a select per vector, off the values' path). */
static const char *h2f_hw(lr *r, int w, const char *h) {
  const char *hv = ins(r, "trunc %s %s to %s", ty(r, TG_UINT32, w), h, mty(r, TG_FLOAT16, w));
  const char *half = ins(r, "bitcast %s %s to %s", mty(r, TG_FLOAT16, w), hv, w ? sf(r, "<%d x half>", w) : "half");
  const char *f = ins(r, "fpext %s %s to %s", w ? sf(r, "<%d x half>", w) : "half", half, ty(r, TG_FLOAT32, w));
  if (r->quiet_ok) return f; /* only arithmetic follows, which quiets the NaN anyway */
  const char *nan = ins(r, "fcmp uno %s %s, %s", ty(r, TG_FLOAT32, w), f, f);
  const char *keep = bitk(r, "or", w, bitk(r, "shl", w, bitk(r, "and", w, h, 0x200), 13), 0xffbfffff);
  const char *bits = ins(r, "bitcast %s %s to %s", ty(r, TG_FLOAT32, w), f, ty(r, TG_UINT32, w));
  const char *fixed = bits2(r, "and", w, bits, pick(r, w, nan, keep, iconst(r, TG_UINT32, w, 0xffffffff)));
  return ins(r, "bitcast %s %s to %s", ty(r, TG_UINT32, w), fixed, ty(r, TG_FLOAT32, w));
}

static const char *f2h_hw(lr *r, int w, const char *f) {
  const char *ht = w ? sf(r, "<%d x half>", w) : "half";
  const char *half = ins(r, "fptrunc %s %s to %s", ty(r, TG_FLOAT32, w), f, ht);
  const char *hv = ins(r, "bitcast %s %s to %s", ht, half, mty(r, TG_FLOAT16, w));
  const char *hw = ins(r, "zext %s %s to %s", mty(r, TG_FLOAT16, w), hv, ty(r, TG_UINT32, w));
  const char *x = ins(r, "bitcast %s %s to %s", ty(r, TG_FLOAT32, w), f, ty(r, TG_UINT32, w));
  const char *q = bitk(r, "or", w, bitk(r, "and", w, bitk(r, "lshr", w, x, 13), 0x200), 0xfffffdff);
  const char *fixed = bits2(r, "and", w, hw, q); /* the quiet bit as the float had it */
  const char *none = bitk(r, "icmp eq", w, bitk(r, "and", w, fixed, 0x3ff), 0);
  fixed = bits2(r, "or", w, fixed, ins(r, "zext %s %s to %s", ty(r, TG_BOOL, w), none, ty(r, TG_UINT32, w)));
  return pick(r, w, ins(r, "fcmp uno %s %s, %s", ty(r, TG_FLOAT32, w), f, f), fixed, hw);
}

/* float → bfloat16 bits (in an i32), round to nearest even, NaN kept quiet: tg_f2b. */
static const char *f2b(lr *r, int w, const char *f) {
  const char *x = ins(r, "bitcast %s %s to %s", ty(r, TG_FLOAT32, w), f, ty(r, TG_UINT32, w));
  const char *hi = bitk(r, "lshr", w, x, 16);
  const char *quiet = pick(r, w, bitk(r, "icmp eq", w, bitk(r, "and", w, hi, 127), 0), iconst(r, TG_UINT32, w, 64), iconst(r, TG_UINT32, w, 0));
  const char *nan = bits2(r, "or", w, hi, quiet);
  const char *rounded = bitk(r, "lshr", w, bits2(r, "add", w, bitk(r, "add", w, x, 0x7fff), bitk(r, "and", w, hi, 1)), 16);
  return pick(r, w, bitk(r, "icmp ugt", w, bitk(r, "and", w, x, 0x7fffffff), 0x7f800000), nan, rounded);
}

static const char *b2f(lr *r, int w, const char *b) {
  return ins(r, "bitcast %s %s to %s", ty(r, TG_UINT32, w), bitk(r, "shl", w, b, 16), ty(r, TG_FLOAT32, w));
}

/* float → the 16-bit float's bits (i32) and back. */
static const char *to_bits16(lr *r, tg_dtype dt, int w, const char *f) { return dt == TG_FLOAT16 ? f2h(r, w, f) : f2b(r, w, f); }
static const char *from_bits16(lr *r, tg_dtype dt, int w, const char *b) { return dt == TG_FLOAT16 ? h2f(r, w, b) : b2f(r, w, b); }

/* A float rounded to dt when dt is a 16-bit float (after every op, as c.c's tg_rh/tg_rb). */
static const char *round16(lr *r, tg_dtype dt, int w, const char *v) {
  return dtype_is_half(dt) ? from_bits16(r, dt, w, to_bits16(r, dt, w, v)) : v;
}

/* ---------------------------------------------------------------- ALU */

/* An ALU op to emit: its sources' dtype (WHERE: the branches'), its dtype, lanes, operands. */
typedef struct alu_in {
  uop_op op;
  uop *u;       /* the node (NULL for a reduction's combine): a constant divisor needs no check */
  tg_dtype sdt, dt;
  int w;
  const char *o[3];
} alu_in;

typedef const char *(*alu_fn)(lr *r, const alu_in *a);

/* The instruction (or intrinsic) for signed, unsigned-or-bool and float sources. */
static const char *spelling(const alu_in *a, const char *const sp[3]) {
  return sp[is_float(a->sdt) ? 2 : is_unsigned(a->sdt) ? 1 : 0];
}

typedef struct alu_rule {
  alu_fn fn;
  const char *sp[3];  /* signed, unsigned/bool, float */
  bool bool_as_int;   /* on bools: computed in int32, then != 0 (C's promotion of _Bool) */
} alu_rule;
static const alu_rule alu_llvm[OP_COUNT];

static const char *emit_binary(lr *r, const alu_in *a) {
  const char *sp = spelling(a, alu_llvm[a->op].sp);
  return ins(r, "%s %s %s, %s", sp, ty(r, a->sdt, a->w), a->o[0], a->o[1]);
}

/* Floats: (a > b || a != a) ? a : b, so a NaN in either wins (c.c's spelling). */
static const char *emit_max(lr *r, const alu_in *a) {
  const char *t = ty(r, a->sdt, a->w), *bt = ty(r, TG_BOOL, a->w);
  const char *c = ins(r, "%s %s %s, %s", spelling(a, alu_llvm[OP_MAX].sp), t, a->o[0], a->o[1]);
  if (is_float(a->sdt)) c = ins(r, "or %s %s, %s", bt, c, ins(r, "fcmp uno %s %s, %s", t, a->o[0], a->o[0]));
  return ins(r, "select %s %s, %s %s, %s %s", bt, c, t, a->o[0], t, a->o[1]);
}

/* Integer a/b or a%b without traps: x/0 and x%0 are 0, x/-1 is -x (wrapping), x%-1 is 0. */
static const char *int_div(lr *r, const alu_in *a, bool safe) {
  const char *t = ty(r, a->sdt, a->w), *bt = ty(r, TG_BOOL, a->w), *sp = spelling(a, alu_llvm[a->op].sp);
  if (safe) return ins(r, "%s %s %s, %s", sp, t, a->o[0], a->o[1]);
  bool un = is_unsigned(a->sdt);
  const char *z = zero(a->sdt, a->w);
  const char *bz = ins(r, "icmp eq %s %s, %s", t, a->o[1], z), *bad = bz, *bm = NULL;
  if (!un) bm = ins(r, "icmp eq %s %s, %s", t, a->o[1], iconst(r, a->sdt, a->w, -1)), bad = ins(r, "or %s %s, %s", bt, bz, bm);
  const char *div = ins(r, "select %s %s, %s %s, %s %s", bt, bad, t, iconst(r, a->sdt, a->w, 1), t, a->o[1]);
  const char *q = ins(r, "%s %s %s, %s", sp, t, a->o[0], div);
  bool neg = !un && a->op == OP_IDIV; /* x / -1 */
  if (neg) q = ins(r, "select %s %s, %s %s, %s %s", bt, bm, t, ins(r, "sub %s %s, %s", t, z, a->o[0]), t, q);
  return ins(r, "select %s %s, %s %s, %s %s", bt, neg ? bz : bad, t, z, t, q);
}

static const char *emit_div(lr *r, const alu_in *a) {
  if (is_float(a->sdt)) return emit_binary(r, a);
  uop *d = a->u ? a->u->src[1] : NULL;
  bool safe = d && d->op == OP_CONST && d->arg[0] != 0 && (is_unsigned(a->sdt) || d->arg[0] != -1);
  return int_div(r, a, safe);
}

/* Shifts: 8- and 16-bit values are promoted to int first (as in C); the count is taken
 * modulo the width (x86's rule; C leaves larger counts undefined). */
static const char *emit_shift(lr *r, const alu_in *a) {
  tg_dtype dt = a->sdt;
  const char *sp = spelling(a, alu_llvm[a->op].sp), *t = ty(r, dt, a->w);
  if (tg_dtype_size(dt) >= 4) {
    const char *n = ins(r, "and %s %s, %s", t, a->o[1], iconst(r, dt, a->w, (int64_t)tg_dtype_size(dt) * 8 - 1));
    return ins(r, "%s %s %s, %s", sp, t, a->o[0], n);
  }
  const char *ext = is_unsigned(dt) ? "zext" : "sext", *it = ty(r, TG_INT32, a->w);
  const char *x = ins(r, "%s %s %s to %s", ext, t, a->o[0], it), *n = ins(r, "%s %s %s to %s", ext, t, a->o[1], it);
  n = ins(r, "and %s %s, %s", it, n, iconst(r, TG_INT32, a->w, 31));
  return ins(r, "trunc %s %s to %s", it, ins(r, "%s %s %s, %s", sp, it, x, n), t);
}

static const char *emit_intrinsic(lr *r, const alu_in *a) {
  const char *t = ty(r, a->sdt, a->w), *m = mangle(r, reg_mangle[a->sdt], a->w);
  return call1(r, alu_llvm[a->op].sp[2], t, m, a->o[0]);
}

/* tg_ipow: integer a**b by squaring; b < 0 gives 1/a truncated (1 for a == 1, ±1 for a == -1
 * when signed, else 0). Defined once per module. */
static const char *IPOW =
    "define internal i64 @tg_ipow(i64 %a0, i64 %b0, i1 %sgn) nounwind readnone {\n"
    "entry:\n  %neg = icmp slt i64 %b0, 0\n  br i1 %neg, label %negb, label %loop\n"
    "negb:\n  %am1 = icmp eq i64 %a0, -1\n  %c = and i1 %sgn, %am1\n  %bo = and i64 %b0, 1\n"
    "  %odd = icmp ne i64 %bo, 0\n  %v1 = select i1 %odd, i64 %a0, i64 1\n  %a1 = icmp eq i64 %a0, 1\n"
    "  %v2 = zext i1 %a1 to i64\n  %res = select i1 %c, i64 %v1, i64 %v2\n  ret i64 %res\n"
    "loop:\n  %r = phi i64 [1, %entry], [%r2, %body]\n  %a = phi i64 [%a0, %entry], [%a2, %body]\n"
    "  %b = phi i64 [%b0, %entry], [%b2, %body]\n  %done = icmp eq i64 %b, 0\n  br i1 %done, label %exit, label %body\n"
    "body:\n  %bit = and i64 %b, 1\n  %has = icmp ne i64 %bit, 0\n  %ra = mul i64 %r, %a\n"
    "  %r2 = select i1 %has, i64 %ra, i64 %r\n  %a2 = mul i64 %a, %a\n  %b2 = lshr i64 %b, 1\n  br label %loop\n"
    "exit:\n  ret i64 %r\n}\n";

/* One lane (or the scalar) of integer pow through tg_ipow. */
static const char *ipow_one(lr *r, const alu_in *a, const char *x, const char *y) {
  const char *t = reg_elem[a->sdt], *ext = is_unsigned(a->sdt) ? "zext" : "sext";
  bool wide = tg_dtype_size(a->sdt) == 8;
  if (!wide) x = ins(r, "%s %s %s to i64", ext, t, x), y = ins(r, "%s %s %s to i64", ext, t, y);
  const char *p = ins(r, "call i64 @tg_ipow(i64 %s, i64 %s, i1 %s)", x, y, is_unsigned(a->sdt) ? "false" : "true");
  return wide ? p : ins(r, "trunc i64 %s to %s", p, t);
}

static const char *emit_pow(lr *r, const alu_in *a) {
  if (is_float(a->sdt)) {
    const char *t = ty(r, a->sdt, a->w);
    return call2(r, "pow", t, mangle(r, reg_mangle[a->sdt], a->w), a->o[0], a->o[1]);
  }
  r->uses_ipow = true;
  return ipow_one(r, a, a->o[0], a->o[1]); /* scalar: devectorize splits vectors */
}

static const char *emit_neg(lr *r, const alu_in *a) {
  const char *t = ty(r, a->sdt, a->w);
  if (is_float(a->sdt)) return ins(r, "fneg %s %s", t, a->o[0]);
  return ins(r, "sub %s %s, %s", t, zero(a->sdt, a->w), a->o[0]);
}

static const char *emit_not(lr *r, const alu_in *a) {
  return ins(r, "xor %s %s, %s", ty(r, a->sdt, a->w), a->o[0], iconst(r, a->sdt, a->w, a->sdt == TG_BOOL ? 1 : -1));
}

static const char *emit_recip(lr *r, const alu_in *a) {
  const char *t = ty(r, a->sdt, a->w);
  if (is_float(a->sdt)) return ins(r, "fdiv %s %s, %s", t, fconst(r, a->sdt, a->w, 1.0), a->o[0]);
  alu_in d = *a;
  d.op = OP_IDIV, d.o[0] = iconst(r, a->sdt, a->w, 1), d.o[1] = a->o[0];
  return int_div(r, &d, false);
}

static const char *emit_where(lr *r, const alu_in *a) {
  const char *t = ty(r, a->dt, a->w);
  return ins(r, "select %s %s, %s %s, %s %s", ty(r, TG_BOOL, a->w), a->o[0], t, a->o[1], t, a->o[2]);
}

/* Casts by kind of source and destination (bool, signed, unsigned, float); between two ints
 * or two floats the sizes decide (equal: nothing; smaller: trunc/fptrunc). */
static int kind_of(tg_dtype dt) { return dt == TG_BOOL ? 0 : is_float(dt) ? 3 : is_unsigned(dt) ? 2 : 1; }
static const char *const cast_ins[4][4] = {
    /* to:  bool          signed    unsigned  float */
    /* bool */ {"",         "zext",   "zext",   "uitofp"},
    /* int  */ {"icmp ne",  "sext",   "sext",   "sitofp"},
    /* uint */ {"icmp ne",  "zext",   "zext",   "uitofp"},
    /* flt  */ {"fcmp une", "",       "",       "fpext"}, /* to ints: float_to_int */
};
/* Bytes of dt in a register (16-bit floats compute in float). */
static int reg_size(tg_dtype dt) { return dtype_is_half(dt) ? 4 : (int)tg_dtype_size(dt); }

/* float → int as x86 converts (docs/semantics.md; C leaves it undefined and LLVM's fptosi
 * gives poison, which spreads): truncated into int32 (int64 for 64-bit and uint32 targets),
 * NaN and values out of that range giving its minimum, then wrapped to the target's width;
 * uint64 takes [2^63, 2^64) exactly too. */
static const char *float_to_int(lr *r, const alu_in *a) {
  bool wide = tg_dtype_size(a->dt) == 8 || a->dt == TG_UINT32;
  tg_dtype via = wide ? TG_INT64 : TG_INT32;
  double lim = wide ? 0x1p63 : 0x1p31;
  const char *st = ty(r, a->sdt, a->w), *vt = ty(r, via, a->w), *bt = ty(r, TG_BOOL, a->w), *x = a->o[0];
  const char *sm = mangle(r, reg_mangle[a->sdt], a->w), *vm = mangle(r, reg_mangle[via], a->w);
  declare(r, sf(r, "declare %s @llvm.fptosi.sat.%s.%s(%s)", vt, vm, sm, st));
  const char *v = ins(r, "call %s @llvm.fptosi.sat.%s.%s(%s %s)", vt, vm, sm, st, x);
  const char *ok = ins(r, "and %s %s, %s", bt, ins(r, "fcmp oge %s %s, %s", st, x, fconst(r, a->sdt, a->w, -lim)),
                       ins(r, "fcmp olt %s %s, %s", st, x, fconst(r, a->sdt, a->w, lim)));
  v = ins(r, "select %s %s, %s %s, %s %s", bt, ok, vt, v, vt, iconst(r, via, a->w, wide ? INT64_MIN : INT32_MIN));
  if (a->dt == TG_UINT64) {
    declare(r, sf(r, "declare %s @llvm.fptoui.sat.%s.%s(%s)", vt, vm, sm, st));
    const char *hi = ins(r, "call %s @llvm.fptoui.sat.%s.%s(%s %s)", vt, vm, sm, st, x);
    const char *top = ins(r, "and %s %s, %s", bt, ins(r, "fcmp oge %s %s, %s", st, x, fconst(r, a->sdt, a->w, 0x1p63)),
                          ins(r, "fcmp olt %s %s, %s", st, x, fconst(r, a->sdt, a->w, 0x1p64)));
    v = ins(r, "select %s %s, %s %s, %s %s", bt, top, vt, hi, vt, v);
  }
  return via == a->dt || tg_dtype_size(a->dt) == tg_dtype_size(via) ? v : ins(r, "trunc %s %s to %s", vt, v, ty(r, a->dt, a->w));
}

static const char *emit_cast(lr *r, const alu_in *a) {
  int from = kind_of(a->sdt), to = kind_of(a->dt), fs = reg_size(a->sdt), ts = reg_size(a->dt);
  const char *op = cast_ins[from][to], *st = ty(r, a->sdt, a->w), *dt = ty(r, a->dt, a->w);
  if (to == 0 && from) return ins(r, "%s %s %s, %s", op, st, a->o[0], zero(a->sdt, a->w)); /* NaN → true */
  if (from == 3 && to != 3) return float_to_int(r, a);
  if ((from == 1 || from == 2) && (to == 1 || to == 2) && fs >= ts) op = fs == ts ? "" : "trunc";
  if (from == 3 && to == 3 && fs >= ts) op = fs == ts ? "" : "fptrunc";
  return *op ? ins(r, "%s %s %s to %s", op, st, a->o[0], dt) : a->o[0];
}

/* Same-size reinterpretation; 16-bit floats go through their bits, bools through a byte. */
static const char *emit_bitcast(lr *r, const alu_in *a) {
  tg_dtype s = a->sdt, d = a->dt;
  int w = a->w;
  const char *v = a->o[0];
  if (dtype_is_half(s) || dtype_is_half(d)) {
    const char *b32 = dtype_is_half(s) ? to_bits16(r, s, w, v) : ins(r, "zext %s %s to %s", ty(r, s, w), v, ty(r, TG_UINT32, w));
    if (dtype_is_half(d)) return from_bits16(r, d, w, b32);
    return ins(r, "trunc %s %s to %s", ty(r, TG_UINT32, w), b32, ty(r, d, w));
  }
  if (s == TG_BOOL) return d == TG_BOOL ? v : ins(r, "zext %s %s to %s", ty(r, s, w), v, ty(r, d, w));
  if (d == TG_BOOL) return ins(r, "icmp ne %s %s, %s", ty(r, s, w), v, zero(s, w));
  if (!strcmp(reg_elem[s], reg_elem[d])) return v;
  return ins(r, "bitcast %s %s to %s", ty(r, s, w), v, ty(r, d, w));
}

static const alu_rule alu_llvm[OP_COUNT] = {
    [OP_ADD] = {emit_binary, {"add", "add", "fadd contract"}, true},
    [OP_SUB] = {emit_binary, {"sub", "sub", "fsub contract"}, true},
    [OP_MUL] = {emit_binary, {"mul", "mul", "fmul contract"}, true},
    [OP_FDIV] = {emit_div, {"sdiv", "udiv", "fdiv"}, true},
    [OP_IDIV] = {emit_div, {"sdiv", "udiv", "frem"}, true},
    [OP_MOD] = {emit_div, {"srem", "urem", "frem"}, true},
    [OP_AND] = {emit_binary, {"and", "and", NULL}, false},
    [OP_OR] = {emit_binary, {"or", "or", NULL}, false},
    [OP_XOR] = {emit_binary, {"xor", "xor", NULL}, false},
    [OP_SHL] = {emit_shift, {"shl", "shl", NULL}, true},
    [OP_SHR] = {emit_shift, {"ashr", "lshr", NULL}, true},
    [OP_CMPLT] = {emit_binary, {"icmp slt", "icmp ult", "fcmp olt"}, false},
    [OP_CMPNE] = {emit_binary, {"icmp ne", "icmp ne", "fcmp une"}, false},
    [OP_CMPEQ] = {emit_binary, {"icmp eq", "icmp eq", "fcmp oeq"}, false},
    [OP_MAX] = {emit_max, {"icmp sgt", "icmp ugt", "fcmp ogt"}, false},
    [OP_POW] = {emit_pow, {NULL, NULL, "pow"}, true},
    [OP_EXP2] = {emit_intrinsic, {NULL, NULL, "exp2"}, false},
    [OP_LOG2] = {emit_intrinsic, {NULL, NULL, "log2"}, false},
    [OP_SIN] = {emit_intrinsic, {NULL, NULL, "sin"}, false},
    [OP_SQRT] = {emit_intrinsic, {NULL, NULL, "sqrt"}, false},
    [OP_TRUNC] = {emit_intrinsic, {NULL, NULL, "trunc"}, false},
    [OP_NEG] = {emit_neg, {NULL, NULL, NULL}, true},
    [OP_NOT] = {emit_not, {NULL, NULL, NULL}, false},
    [OP_RECIP] = {emit_recip, {NULL, NULL, NULL}, true},
    [OP_WHERE] = {emit_where, {NULL, NULL, NULL}, false},
    [OP_CAST] = {emit_cast, {NULL, NULL, NULL}, false},
    [OP_BITCAST] = {emit_bitcast, {NULL, NULL, NULL}, false},
};

/* Emit an ALU op: bools promoted where C promotes them, 16-bit floats rounded after. */
static const char *alu_apply(lr *r, alu_in a) {
  const alu_rule *rule = &alu_llvm[a.op];
  if (!rule->fn) {
    r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: no spelling for %s", uop_ops[a.op].name);
    return "undef";
  }
  if (rule->bool_as_int && a.sdt == TG_BOOL) {
    int n = uop_ops[a.op].nsrc;
    for (int i = 0; i < n; i++) a.o[i] = ins(r, "zext %s %s to %s", ty(r, TG_BOOL, a.w), a.o[i], ty(r, TG_INT32, a.w));
    alu_in wide = a;
    wide.sdt = wide.dt = TG_INT32;
    const char *v = rule->fn(r, &wide);
    return ins(r, "icmp ne %s %s, %s", ty(r, TG_INT32, a.w), v, zero(TG_INT32, a.w));
  }
  if (a.op == OP_BITCAST) return rule->fn(r, &a); /* a 16-bit float from its bits: nothing to round */
  return round16(r, a.dt, a.w, rule->fn(r, &a));
}

static const char *render_alu(lr *r, uop *u, int w) {
  alu_in a = {(uop_op)u->op, u, u->src[u->op == OP_WHERE ? 1 : 0]->dtype, u->dtype, w, {NULL, NULL, NULL}};
  for (int i = 0; i < u->nsrc && i < 3; i++) a.o[i] = opnd(r, u->src[i], w);
  return alu_apply(r, a);
}

/* ---------------------------------------------------------------- memory */

/* Memory value (w lanes) → register value: bools tested != 0, 16-bit floats widened. */
static const char *from_memory(lr *r, tg_dtype dt, int w, const char *v) {
  if (dt == TG_BOOL) return ins(r, "icmp ne %s %s, %s", mty(r, dt, w), v, zero(TG_UINT8, w));
  if (!dtype_is_half(dt)) return v;
  return from_bits16(r, dt, w, ins(r, "zext %s %s to %s", mty(r, dt, w), v, ty(r, TG_UINT32, w)));
}

static const char *to_memory(lr *r, tg_dtype dt, int w, const char *v) {
  if (dt == TG_BOOL) return ins(r, "zext %s %s to %s", ty(r, dt, w), v, mty(r, dt, w));
  if (!dtype_is_half(dt)) return v;
  return ins(r, "trunc %s %s to %s", ty(r, TG_UINT32, w), to_bits16(r, dt, w, v), mty(r, dt, w));
}

/* &g[idx] as a pointer to w elements (w = 0: one element). */
static const char *elem_ptr(lr *r, uop *g, const char *idx, int w) {
  tg_dtype dt = g->dtype;
  const char *p = ins(r, "getelementptr %s, %s* %s, i64 %s", mem_elem[dt], mem_elem[dt], opnd(r, g, 0), idx);
  return w ? ins(r, "bitcast %s* %s to %s*", mem_elem[dt], p, mty(r, dt, w)) : p;
}

static uop *load_mask(const uop *u) { return u->nsrc > 2 ? u->src[2] : NULL; }

/* w elements of g from base where mask (<w x i1>) is on, 0 elsewhere (llvm.masked.load). */
static const char *masked_load(lr *r, uop *g, tg_dtype dt, int w, const char *base, int align, const char *mask) {
  const char *vt = mty(r, dt, w), *mm = mangle(r, mem_mangle[dt], w);
  declare(r, sf(r, "declare %s @llvm.masked.load.%s.p0%s(%s*, i32, <%d x i1>, %s)", vt, mm, mm, vt, w, vt));
  return ins(r, "call %s @llvm.masked.load.%s.p0%s(%s* %s, i32 %d, <%d x i1> %s, %s zeroinitializer)", vt, mm, mm, vt,
             elem_ptr(r, g, base, w), align, w, mask, vt);
}

/* A gather: lane l reads g[idx[l]] where its mask is on, else 0. */
static const char *gather(lr *r, uop *u, int w) {
  tg_dtype dt = u->dtype;
  uop *g = u->src[0], *m = load_mask(u);
  const char *me = mem_elem[dt], *vt = mty(r, dt, w), *mm = mangle(r, mem_mangle[dt], w);
  const char *ptrs = ins(r, "getelementptr %s, %s* %s, <%d x i64> %s", me, me, opnd(r, g, 0), w, opnd(r, u->src[1], w));
  declare(r, sf(r, "declare %s @llvm.masked.gather.%s.v%dp0%s(<%d x %s*>, i32, <%d x i1>, %s)", vt, mm, w, mem_mangle[dt], w, me, w, vt));
  const char *v = ins(r, "call %s @llvm.masked.gather.%s.v%dp0%s(<%d x %s*> %s, i32 %d, <%d x i1> %s, %s zeroinitializer)", vt, mm, w,
                      mem_mangle[dt], w, me, ptrs, (int)tg_dtype_size(dt), w, m ? opnd(r, m, w) : all_true(r, w), vt);
  return from_memory(r, dt, w, v);
}

/* A scalar load; masked: (m ? g[idx] : 0), reading g[0] when m is off. */
static const char *scalar_load(lr *r, uop *u) {
  tg_dtype dt = u->dtype;
  uop *m = load_mask(u);
  const char *idx = opnd(r, u->src[1], 0), *mv = m ? opnd(r, m, 0) : NULL;
  if (m) idx = ins(r, "select i1 %s, i64 %s, i64 0", mv, idx);
  const char *v = ins(r, "load %s, %s* %s, align %d", mem_elem[dt], mem_elem[dt], elem_ptr(r, u->src[0], idx, 0), (int)tg_dtype_size(dt));
  v = from_memory(r, dt, 0, v);
  return m ? ins(r, "select i1 %s, %s %s, %s %s", mv, reg_elem[dt], v, reg_elem[dt], zero(dt, 0)) : v;
}

/* A contiguous vector load (arg = [lanes, aligned, checked]). A checked one whose lanes may
 * leave the buffer is a masked load of the lanes inside it (and on in its mask); a lane
 * outside is a padded position whose value is never used (see lower.c), so its 0 is as good
 * as c.c's clamped read. With a mask per lane and a vector within BUFFER_SLACK, the mask
 * alone does: a lane on in it is a valid index, or one past a padded dim's end, at most w-1
 * elements after a valid one (inside the slack). That spares a 64-bit index vector and two
 * compares per load (a padded depthwise conv has nine loads a step). */
static const char *vector_load(lr *r, uop *u, int w) {
  tg_dtype dt = u->dtype;
  uop *g = u->src[0], *m = load_mask(u);
  int size = (int)tg_dtype_size(dt), align = u->arg[1] ? w * size : size;
  const char *vt = mty(r, dt, w), *base = opnd(r, u->src[1], 0);
  bool checked = u->narg > 2 && u->arg[2];
  if (!checked || ((!m || !m->vcount) && w * size <= BUFFER_SLACK)) {
    const char *mv = m ? opnd(r, m, 0) : NULL;
    if (m) base = ins(r, "select i1 %s, i64 %s, i64 0", mv, base);
    const char *v = ins(r, "load %s, %s* %s, align %d", vt, vt, elem_ptr(r, g, base, w), align);
    return m ? ins(r, "select i1 %s, %s %s, %s zeroinitializer", mv, vt, v, vt) : v;
  }
  if (m && m->vcount && w * size <= BUFFER_SLACK) return masked_load(r, g, dt, w, base, align, opnd(r, m, w));
  const char *idx = ins(r, "add <%d x i64> %s, %s", w, bcast(r, TG_INT64, w, base), lane_numbers(r, w));
  const char *lo = ins(r, "icmp sge <%d x i64> %s, zeroinitializer", w, idx);
  const char *hi = ins(r, "icmp slt <%d x i64> %s, %s", w, idx, iconst(r, TG_INT64, w, g->arg[1]));
  const char *mask = ins(r, "and <%d x i1> %s, %s", w, lo, hi);
  if (m) mask = ins(r, "and <%d x i1> %s, %s", w, mask, opnd(r, m, w));
  return masked_load(r, g, dt, w, base, align, mask);
}

/* The constant vector <f(0), f(1), ..., f(n-1)> of i32 (shuffle indices) or i1 (masks). */
static const char *int_pattern(lr *r, const char *elem, int n, int (*f)(int, int), int k) {
  strbuf b = {0};
  sb_printf(&b, "<");
  for (int e = 0; e < n; e++) sb_printf(&b, "%s%s %d", e ? ", " : "", elem, f(e, k));
  sb_printf(&b, ">");
  const char *v = sf(r, "%s", b.s ? b.s : "");
  sb_free(&b);
  return v;
}
static int times(int e, int k) { return e * k; }
static int divided(int e, int k) { return e / k; }
static int multiple_of(int e, int k) { return e % k == 0; }

/* A strided vector load (arg[4] = s > 1: lane l reads base + s*l): the span of s*w elements
 * read at once, every s-th kept by a shuffle. Unchecked and unmasked, every lane is inside
 * the buffer and the span ends s-1 elements past the last one, inside its slack; otherwise a
 * masked load of the lanes' own elements, those inside the buffer (checked: lanes past a
 * padded dim's end may leave it) and on in the mask (0 elsewhere: padded positions, as in
 * vector_load). As there, a mask per lane alone does when the span fits in the slack: a lane
 * on in it is a valid index or a padded one at most (w-1)*s elements after a valid one (a
 * stride-2 depthwise conv: nine loads a step, each without a 64-bit index vector). */
static const char *strided_load(lr *r, uop *u, int w, int s) {
  tg_dtype dt = u->dtype;
  uop *g = u->src[0], *m = load_mask(u);
  int size = (int)tg_dtype_size(dt), span = w * s;
  const char *st = mty(r, dt, span), *base = opnd(r, u->src[1], 0), *wide;
  bool checked = u->narg > 2 && u->arg[2];
  if (!checked && !m) {
    wide = ins(r, "load %s, %s* %s, align %d", st, st, elem_ptr(r, g, base, span), size);
  } else {
    const char *lanes = m ? opnd(r, m, w) : all_true(r, w);
    if (checked && !(m && m->vcount && span * size <= BUFFER_SLACK)) {
      const char *step = ins(r, "mul <%d x i64> %s, %s", w, lane_numbers(r, w), iconst(r, TG_INT64, w, s));
      const char *idx = ins(r, "add <%d x i64> %s, %s", w, bcast(r, TG_INT64, w, base), step);
      const char *lo = ins(r, "icmp sge <%d x i64> %s, zeroinitializer", w, idx);
      const char *hi = ins(r, "icmp slt <%d x i64> %s, %s", w, idx, iconst(r, TG_INT64, w, g->arg[1]));
      lanes = ins(r, "and <%d x i1> %s, %s", w, lanes, ins(r, "and <%d x i1> %s, %s", w, lo, hi));
    }
    const char *mask = ins(r, "shufflevector <%d x i1> %s, <%d x i1> undef, <%d x i32> %s", w, lanes, w, span, int_pattern(r, "i32", span, divided, s));
    mask = ins(r, "and <%d x i1> %s, %s", span, mask, int_pattern(r, "i1", span, multiple_of, s));
    wide = masked_load(r, g, dt, span, base, size, mask);
  }
  const char *v = ins(r, "shufflevector %s %s, %s undef, <%d x i32> %s", st, wide, st, w, int_pattern(r, "i32", w, times, s));
  return from_memory(r, dt, w, v);
}

static const char *render_load(lr *r, uop *u, int w) {
  if (load_lane_stride(u) > 1) return strided_load(r, u, w, (int)load_lane_stride(u));
  if (u->narg) return vector_load(r, u, w);
  return w ? gather(r, u, w) : scalar_load(r, u);
}

/* Code under a scalar gate: open a block taken when gate is on; close_gate joins. */
static int open_gate(lr *r, const char *gate) {
  int id = r->nlabels++;
  line(r, "br i1 %s, label %%S%d, label %%S%d.x", gate, id, id);
  label(r, sf(r, "S%d", id));
  return id;
}

static void close_gate(lr *r, int id) {
  line(r, "br label %%S%d.x", id);
  label(r, sf(r, "S%d.x", id));
}

/* A store that streams past the caches (lower.c: arg[3], a buffer larger than the last-level
 * cache): !nontemporal. Such stores are weakly ordered, so the kernel ends with a fence before
 * the thread pool hands its results to other threads. */
static bool streams(const uop *u) { return u->op == OP_STORE && u->narg > 3 && u->arg[3]; }

/* STORE(g, idx, value[, gate]); arg = [lanes, aligned, checked(, streaming)] for a contiguous vector. */
static void render_store(lr *r, uop *u) {
  uop *g = u->src[0], *gate = u->nsrc > 3 ? u->src[3] : NULL;
  tg_dtype dt = u->src[2]->dtype;
  int w = u->vcount, size = (int)tg_dtype_size(dt);
  const char *v = to_memory(r, dt, w, opnd(r, u->src[2], w)), *vt = mty(r, dt, w), *mm = mangle(r, mem_mangle[dt], w);
  if (u->narg && u->narg > 2 && u->arg[2]) { /* a gate per lane */
    declare(r, sf(r, "declare void @llvm.masked.store.%s.p0%s(%s, %s*, i32, <%d x i1>)", mm, mm, vt, vt, w));
    line(r, "call void @llvm.masked.store.%s.p0%s(%s %s, %s* %s, i32 %d, <%d x i1> %s)", mm, mm, vt, v, vt,
         elem_ptr(r, g, opnd(r, u->src[1], 0), w), u->arg[1] ? w * size : size, w, opnd(r, gate, w));
    return;
  }
  if (!u->narg && w) { /* a scatter: lanes in order, so the last lane wins an address */
    const char *me = mem_elem[dt];
    const char *ptrs = ins(r, "getelementptr %s, %s* %s, <%d x i64> %s", me, me, opnd(r, g, 0), w, opnd(r, u->src[1], w));
    declare(r, sf(r, "declare void @llvm.masked.scatter.%s.v%dp0%s(%s, <%d x %s*>, i32, <%d x i1>)", mm, w, mem_mangle[dt], vt, w, me, w));
    line(r, "call void @llvm.masked.scatter.%s.v%dp0%s(%s %s, <%d x %s*> %s, i32 %d, <%d x i1> %s)", mm, w, mem_mangle[dt], vt, v, w,
         me, ptrs, size, w, gate ? opnd(r, gate, w) : all_true(r, w));
    return;
  }
  int id = gate ? open_gate(r, opnd(r, gate, 0)) : -1;
  const char *p = elem_ptr(r, g, opnd(r, u->src[1], 0), u->narg ? w : 0);
  line(r, "store %s %s, %s* %s, align %d%s", vt, v, vt, p, u->narg && u->arg[1] ? w * size : size,
       streams(u) ? ", !nontemporal !0" : "");
  if (gate) close_gate(r, id);
}

/* PREFETCH(g, idx): element idx's line into the caches (read, locality 2: the L2 and out, a
 * next row that must not push the current one out of the L1). */
static void render_prefetch(lr *r, uop *u) {
  const char *p = elem_ptr(r, u->src[0], opnd(r, u->src[1], 0), 0);
  const char *b = ins(r, "bitcast %s* %s to i8*", mem_elem[u->src[0]->dtype], p);
  declare(r, "declare void @llvm.prefetch.p0i8(i8* nocapture readonly, i32 immarg, i32 immarg, i32 immarg)");
  line(r, "call void @llvm.prefetch.p0i8(i8* %s, i32 0, i32 2, i32 1)", b);
}

/* ---------------------------------------------------------------- reductions */

static const char *identity(lr *r, uop *u, int w) {
  tg_dtype dt = u->dtype;
  switch (u->arg[0]) {
    case OP_ADD: return w ? "zeroinitializer" : zero(dt, 0);
    case OP_MUL: return is_float(dt) ? fconst(r, dt, w, 1.0) : iconst(r, dt, w, 1);
    default: /* MAX */
      if (is_float(dt)) return fconst(r, dt, w, -INFINITY);
      return iconst(r, dt, w, is_unsigned(dt) ? 0 : dt == TG_INT64 ? INT64_MIN : (int64_t)dtype_table[dt].min);
  }
}

/* acc OP body, as c.c's combine (a NaN-propagating max; 16-bit floats rounded). */
static const char *combine(lr *r, uop *u, int w, const char *acc, const char *body) {
  alu_in a = {(uop_op)u->arg[0], NULL, u->dtype, u->dtype, w, {acc, body, NULL}};
  return alu_apply(r, a);
}

static void render_acc_init(lr *r, uop *u) {
  int w = u->vcount;
  const char *t = ty(r, u->dtype, w), *acc = sf(r, "%%acc%d", r->naccs++);
  sb_printf(&r->allocas, "  %s = alloca %s\n", acc, t);
  line(r, "store %s %s, %s* %s", t, identity(r, u, w), t, acc);
  ptrmap_put(&r->accs, u, (void *)acc);
}

static void render_acc_update(lr *r, uop *u) {
  int w = u->vcount;
  const char *t = ty(r, u->dtype, w), *acc = ptrmap_get(&r->accs, u);
  for (int i = 0; i < reduce_nbody(u); i++) {
    const char *cur = ins(r, "load %s, %s* %s", t, t, acc);
    line(r, "store %s %s, %s* %s", t, combine(r, u, w, cur, opnd(r, u->src[i], w)), t, acc);
  }
}

/* The reduction's value: its accumulator's. */
static void render_acc_final(lr *r, uop *u) {
  const char *t = ty(r, u->dtype, u->vcount);
  ptrmap_put(&r->names, u, (void *)ins(r, "load %s, %s* %s", t, t, (const char *)ptrmap_get(&r->accs, u)));
}

/* ---------------------------------------------------------------- loops and ops */

/* A loop over [0, n) (or [tg_start, tg_end) for the parallel range): a phi in its header.
 * A loop of a known count >= 1 tests at its end (already rotated). */
static bool rotated(uop *range) {
  return range->arg[1] != RANGE_PARALLEL && range->src[0]->op == OP_CONST && uop_const_ivalue(range->src[0]) >= 1;
}
static const char *loop_end(lr *r, uop *range) {
  if (range->arg[1] != RANGE_PARALLEL && range->src[0]->op != OP_CONST) return opnd(r, range->src[0], 0); /* a variable's (docs/symbolic.md) */
  return range->arg[1] == RANGE_PARALLEL ? "%tg_end" : sf(r, "%lld", (long long)uop_const_ivalue(range->src[0]));
}

static void render_loop(lr *r, uop *u) {
  int id = r->nlabels++;
  const char *from = r->cur;
  line(r, "br label %%L%d", id);
  label(r, sf(r, "L%d", id));
  line(r, "%%r%d = phi i64 [ %s, %%%s ], [ %%r%d.n, %%L%d.latch ]", id, u->arg[1] == RANGE_PARALLEL ? "%tg_start" : "0", from, id, id);
  if (!rotated(u)) {
    line(r, "%%L%d.c = icmp slt i64 %%r%d, %s", id, id, loop_end(r, u));
    line(r, "br i1 %%L%d.c, label %%L%d.body, label %%L%d.exit", id, id, id);
    label(r, sf(r, "L%d.body", id));
  }
  ptrmap_put(&r->names, u, (void *)sf(r, "%%r%d", id));
  if (VEC_PUSH(r->loops, id) < 0) r->err = TG_ERR_NOMEM;
}

static void render_end(lr *r, uop *u) {
  if (!r->loops.n) { r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: END without a loop"); return; }
  int id = r->loops.v[--r->loops.n];
  line(r, "br label %%L%d.latch", id);
  label(r, sf(r, "L%d.latch", id));
  line(r, "%%r%d.n = add nuw nsw i64 %%r%d, 1", id, id);
  if (rotated(u)) {
    line(r, "%%L%d.c = icmp slt i64 %%r%d.n, %s", id, id, loop_end(r, u));
    line(r, "br i1 %%L%d.c, label %%L%d, label %%L%d.exit", id, id, id);
  } else {
    line(r, "br label %%L%d", id);
  }
  label(r, sf(r, "L%d.exit", id));
}

/* VECTORIZE: one scalar broadcast, or the lanes inserted in order. */
static const char *render_vectorize(lr *r, uop *u, int w) {
  if (u->nsrc == 1) return opnd(r, u->src[0], w);
  const char *t = ty(r, u->dtype, w), *v = "undef";
  for (int l = 0; l < u->nsrc; l++) v = ins(r, "insertelement %s %s, %s %s, i32 %d", t, v, reg_elem[u->dtype], opnd(r, u->src[l], 0), l);
  return v;
}

static void render_value(lr *r, uop *u) {
  int w = u->vcount;
  const char *v = u->op == OP_LOAD ? render_load(r, u, w)
                  : uop_is_alu(u) ? render_alu(r, u, w)
                  : u->op == OP_VECTORIZE ? render_vectorize(r, u, w)
                  : u->op == OP_GEP ? ins(r, "extractelement %s %s, i32 %lld", ty(r, u->dtype, u->src[0]->vcount), opnd(r, u->src[0], 0), (long long)u->arg[0])
                  : NULL;
  if (!v) { r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: cannot render %s", uop_ops[u->op].name); return; }
  ptrmap_put(&r->names, u, (void *)v);
}

/* Ops that give a quiet NaN for a NaN operand, signalling or not, with its sign and payload
 * (x86's addss/mulss/divss and their FMA: the first NaN operand, quieted), and ops that pass
 * a float value on unchanged (a float cast of a float: no instruction; lanes). */
static bool quiets(const uop *u) {
  return (u->op == OP_ADD || u->op == OP_SUB || u->op == OP_MUL || u->op == OP_FDIV) && dtype_is_float(u->dtype);
}
static bool passes(const uop *u) {
  return u->op == OP_VECTORIZE || u->op == OP_GEP ||
         (u->op == OP_CAST && u->dtype == TG_FLOAT32 && dtype_is_float(u->src[0]->dtype) && u->src[0]->dtype != TG_FLOAT64);
}

/* r->exact: the values of p whose NaN bits are seen as they are (stored, compared, selected,
 * bitcast, reduced). A float16 converted by F16C (which quiets a signalling NaN) needs its
 * quiet bit put back only there; where only quieting arithmetic follows, both give the same
 * result (a Q8_0 scale times its values). Uses come after their values: one backward walk. */
static void exact_nans(lr *r, const lin_program *p) {
  for (int i = p->n - 1; i >= 0 && !r->err; i--) {
    uop *u = p->ops[i].u;
    bool exact = p->ops[i].kind != L_VALUE || !(quiets(u) || (passes(u) && !ptrmap_get(&r->exact, u)));
    for (int j = 0; exact && j < u->nsrc; j++)
      if (ptrmap_put(&r->exact, u->src[j], (void *)1) < 0) r->err = TG_ERR_NOMEM;
  }
}

static void render_op(lr *r, const lin_op *o) {
  r->quiet_ok = o->kind == L_VALUE && !ptrmap_get(&r->exact, o->u);
  switch (o->kind) {
    case L_LOOP: render_loop(r, o->u); break;
    case L_END: render_end(r, o->u); break;
    case L_ACC_INIT: render_acc_init(r, o->u); break;
    case L_ACC_UPDATE: render_acc_update(r, o->u); break;
    case L_ACC_FINAL: render_acc_final(r, o->u); break;
    case L_STORE: o->u->op == OP_PREFETCH ? render_prefetch(r, o->u) : render_store(r, o->u); break;
    case L_VALUE: render_value(r, o->u); break;
  }
}

/* ---------------------------------------------------------------- functions */

#define MAX_SLOTS 66

/* A row's kept values (linearize.c, row scratch): arrays on the body's stack. */
static void declare_scratch(lr *r, const lin_program *p) {
  for (int i = 0; i < p->n; i++) {
    uop *g = p->ops[i].u->nsrc ? p->ops[i].u->src[0] : NULL;
    if (!g || !is_row_scratch(g) || ptrmap_get(&r->names, g)) continue;
    const char *name = sf(r, "%%s%lld", (long long)g->arg[0]);
    ptrmap_put(&r->names, g, (void *)name);
    sb_printf(&r->allocas, "  %s = alloca %s, i64 %lld, align 64\n", name, mem_elem[g->dtype], (long long)g->arg[1]);
  }
}

/* The wrapper with the kernel signature loads the buffer pointers and calls the body, whose
 * pointer parameters are noalias (C's restrict) and readonly where nothing is stored. */
static void render_function(lr *r, const lin_program *p, const char *name, strbuf *dst) {
  uop *globals[MAX_SLOTS] = {0};
  bool written[MAX_SLOTS] = {0}, streaming = false;
  int nglob = 0;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i].u;
    if (u->op == OP_STORE && u->src[0]->arg[0] < MAX_SLOTS) written[u->src[0]->arg[0]] = true;
    streaming |= streams(u);
    for (int j = -1; j < u->nsrc; j++) {
      uop *s = j < 0 ? u : u->src[j];
      if (s->op != OP_DEFINE_GLOBAL || s->arg[0] >= MAX_SLOTS) continue;
      globals[s->arg[0]] = s;
      if (s->arg[0] + 1 > nglob) nglob = (int)s->arg[0] + 1;
      ptrmap_put(&r->names, s, (void *)sf(r, "%%d%lld", (long long)s->arg[0]));
    }
  }
  r->out = (strbuf){0}, r->allocas = (strbuf){0};
  declare_scratch(r, p);
  r->cur = "entry";
  if (r->f16c) exact_nans(r, p);
  for (int i = 0; i < p->n && !r->err; i++) render_op(r, &p->ops[i]);
  strbuf params = {0}, args = {0};
  sb_printf(dst, "define void @\"%s\"(i8** nocapture readonly %%args, i64 %%tg_start, i64 %%tg_end) #0 {\nentry:\n", name);
  for (int i = 0; i < nglob; i++) {
    if (!globals[i]) continue;
    const char *me = mem_elem[globals[i]->dtype];
    sb_printf(dst, "  %%a%d = getelementptr inbounds i8*, i8** %%args, i64 %d\n  %%p%d = load i8*, i8** %%a%d, align 8\n", i, i, i, i);
    sb_printf(dst, "  %%d%d = bitcast i8* %%p%d to %s*\n", i, i, me);
    sb_printf(&params, "%s* noalias nocapture %s%%d%d, ", me, written[i] ? "" : "readonly ", i);
    sb_printf(&args, "%s* %%d%d, ", me, i);
  }
  sb_printf(dst, "  call void @\"%s.body\"(%si64 %%tg_start, i64 %%tg_end)\n%s  ret void\n}\n", name, args.s ? args.s : "",
            streaming ? "  fence seq_cst\n" : "");
  sb_printf(dst, "define internal void @\"%s.body\"(%si64 %%tg_start, i64 %%tg_end) #0 {\nentry:\n", name, params.s ? params.s : "");
  sb_printf(dst, "%s%s  ret void\n}\n", r->allocas.s ? r->allocas.s : "", r->out.s ? r->out.s : "");
  if (r->loops.n) r->err = tg_set_error(TG_ERR_COMPILE, "LLVM renderer: a loop left open");
  sb_free(&params), sb_free(&args), sb_free(&r->out), sb_free(&r->allocas);
}

static void reset_function(lr *r) {
  for (size_t i = 0; i < r->strs.n; i++) free(r->strs.v[i]);
  r->strs.n = 0;
  ptrmap_free(&r->names), ptrmap_free(&r->accs), ptrmap_free(&r->exact);
  r->loops.n = 0, r->ntmp = r->nlabels = r->naccs = 0;
}

char *render_llvm(const lin_program *progs, int n, const char *const *names) { return render_llvm_caps(progs, n, names, NULL); }

char *render_llvm_caps(const lin_program *progs, int n, const char *const *names, const device_caps *caps) {
  lr r = {.f16c = caps && caps->f16c};
  strbuf src = {0};
  for (int i = 0; i < n && !r.err; i++) {
    render_function(&r, &progs[i], names[i], &src);
    reset_function(&r);
  }
  if (r.uses_ipow) sb_printf(&src, "%s", IPOW);
  for (size_t i = 0; i < r.decls.n; i++) sb_printf(&src, "%s\n", r.decls.v[i]), free(r.decls.v[i]);
  /* no-builtins: LLVM 14's InstCombine rewrites exp2(uitofp x) of a vector into a scalar
   * ldexp call and breaks the module; kernels need no library-call rewrites */
  sb_printf(&src, "attributes #0 = { nounwind \"no-builtins\" }\n!0 = !{i32 1}\n");
  VEC_FREE(r.decls), VEC_FREE(r.strs), VEC_FREE(r.loops);
  if (r.err) {
    if (r.err == TG_ERR_NOMEM) tg_set_error(TG_ERR_NOMEM, "LLVM renderer: out of memory");
    sb_free(&src);
    return NULL;
  }
  return src.s;
}
