/* c.c — render linear programs as C for the CPU compiler.
 * ALU spellings live in one table; dtype spellings in dtype_table. 16-bit floats are stored
 * as uint16 and computed in float, rounded back after every op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "uop/dtype.h"

/* printf formats for ALU ops: %1$s.. are the sources; 'f' suffix variants for float32 math */
typedef struct alu_spelling {
  const char *fmt;     /* for double and integer operands */
  const char *fmt_f32; /* for float (float32 and 16-bit floats); NULL = same as fmt */
} alu_spelling;

static const alu_spelling alu_c[OP_COUNT] = {
    [OP_NEG] = {"(-%s)", NULL},           [OP_EXP2] = {"exp2(%s)", "exp2f(%s)"},
    [OP_LOG2] = {"log2(%s)", "log2f(%s)"}, [OP_SIN] = {"sin(%s)", "sinf(%s)"},
    [OP_SQRT] = {"sqrt(%s)", "sqrtf(%s)"}, [OP_RECIP] = {"(1.0/%s)", "(1.0f/%s)"},
    [OP_TRUNC] = {"trunc(%s)", "truncf(%s)"},
    [OP_ADD] = {"(%s+%s)", NULL},         [OP_SUB] = {"(%s-%s)", NULL},
    [OP_MUL] = {"(%s*%s)", NULL},         [OP_FDIV] = {"(%s/%s)", NULL},
    [OP_AND] = {"(%s&%s)", NULL},         [OP_OR] = {"(%s|%s)", NULL},
    [OP_XOR] = {"(%s^%s)", NULL},         [OP_SHL] = {"(%s<<%s)", NULL},
    [OP_SHR] = {"(%s>>%s)", NULL},        [OP_POW] = {"pow(%s,%s)", "powf(%s,%s)"},
    [OP_CMPLT] = {"(%s<%s)", NULL},       [OP_CMPNE] = {"(%s!=%s)", NULL},
    [OP_CMPEQ] = {"(%s==%s)", NULL},      [OP_WHERE] = {"(%s?%s:%s)", NULL},
};

static const char *PRELUDE =
    "#include <math.h>\n#include <string.h>\n"
    "#define restrict __restrict\n"
    "static const unsigned char tg_ones[16] = {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1};\n"
    "static inline long long tg_clampi(long long i,long long last){return i<0?0:i>last?last:i;}\n"
    "static inline unsigned long long tg_ipow(unsigned long long a,long long b,int sgn){"
    "if(b<0)return sgn&&(long long)a==-1?((b&1)?a:1):a==1;unsigned long long r=1;"
    "while(b){if(b&1)r*=a;a*=a;b>>=1;}return r;}\n";

static const char *HALF_HELPERS =
    "static inline float tg_h2f(unsigned short h){unsigned int s=(unsigned int)(h>>15)<<31,e=(h>>10)&31,m=h&1023,b;"
    "if(e==31)b=s|0x7f800000u|(m<<13);else if(e)b=s|((e+112)<<23)|(m<<13);else if(!m)b=s;"
    "else{float f=(float)m*5.9604644775390625e-8f;memcpy(&b,&f,4);b|=s;}float f;memcpy(&f,&b,4);return f;}\n"
    "static inline unsigned short tg_f2h(float f){unsigned int x;memcpy(&x,&f,4);unsigned int s=(x>>16)&0x8000,a=x&0x7fffffffu;"
    "if(a>0x7f800000u){unsigned int p=(a>>13)&1023;return (unsigned short)(s|0x7c00|(p?p:0x200));}if(a==0x7f800000u)return (unsigned short)(s|0x7c00);"
    "if(a>=0x477ff000u)return (unsigned short)(s|0x7c00);"
    "if(a<0x38800000u){float v;memcpy(&v,&a,4);return (unsigned short)(s|(unsigned int)nearbyintf(v*16777216.0f));}"
    "unsigned int r=a+0xfffu+((a>>13)&1u);return (unsigned short)(s|((r-0x38000000u)>>13));}\n"
    "static inline float tg_b2f(unsigned short h){unsigned int b=(unsigned int)h<<16;float f;memcpy(&f,&b,4);return f;}\n"
    "static inline unsigned short tg_f2b(float f){unsigned int x;memcpy(&x,&f,4);"
    "if((x&0x7fffffffu)>0x7f800000u)return (unsigned short)((x>>16)|((x>>16)&127?0:64));return (unsigned short)((x+0x7fffu+((x>>16)&1u))>>16);}\n"
    "static inline float tg_rh(float f){return tg_h2f(tg_f2h(f));}\n"
    "static inline float tg_rb(float f){return tg_b2f(tg_f2b(f));}\n";

/* Vector lanes: a node that depends on the lane range holds W values in a GCC vector
 * (typedef float tg_f32x16 __attribute__((vector_size(64)))). Common ops on float32/64 and
 * int32/64 use vector arithmetic; anything else is computed lane by lane from the same scalar
 * spelling, so every op works on lanes. Loads and stores marked contiguous by lowering
 * (arg = [lanes, aligned]) are single vector accesses. */
typedef struct renderer {
  strbuf out;
  ptrmap names; /* uop → malloc'd expression or variable name */
  ptrmap lanes; /* uop_lanes memo */
  int nvars, depth;
  bool uses_half;
  unsigned vec_used[TG_DTYPE_COUNT]; /* bit k: a vector of 2^k lanes of this element type */
  char tmp[8][192];                  /* operand spellings */
  int ntmp;
  char vtypes[8][32];                /* vector type spellings */
  int nvtypes;
} renderer;

static const char *ctype(tg_dtype dt) { return dtype_table[dt].cvalue; }
static bool is_f32_math(tg_dtype dt) { return dt == TG_FLOAT32 || dtype_is_half(dt); }

/* The element type of a vector of dt: bools are bytes, 16-bit floats compute in float. */
static tg_dtype vec_elem(tg_dtype dt) {
  return dt == TG_BOOL ? TG_UINT8 : dtype_is_half(dt) ? TG_FLOAT32 : dt;
}
static const char *const vec_names[TG_DTYPE_COUNT] = {
    [TG_INT8] = "i8",   [TG_INT16] = "i16",  [TG_INT32] = "i32",  [TG_INT64] = "i64",
    [TG_UINT8] = "u8",  [TG_UINT16] = "u16", [TG_UINT32] = "u32", [TG_UINT64] = "u64",
    [TG_FLOAT32] = "f32", [TG_FLOAT64] = "f64",
};

/* Vector access kinds: a value, an aligned memory access, an unaligned one. */
enum { V_VALUE, V_ALIGNED, V_UNALIGNED };

/* "tg_f32x16" (memory accesses: "tg_f32x16a", "tg_f32x16u"); records the typedefs. */
static const char *vtype(renderer *r, tg_dtype dt, int w, int access) {
  tg_dtype e = vec_elem(dt);
  r->vec_used[e] |= 1u << __builtin_ctz((unsigned)w);
  char *b = r->vtypes[r->nvtypes++ & 7];
  snprintf(b, 32, "tg_%sx%d%s", vec_names[e], w, access == V_ALIGNED ? "a" : access == V_UNALIGNED ? "u" : "");
  return b;
}

/* Vector arithmetic is used for these element types; others go lane by lane. */
static bool fast_dtype(tg_dtype dt) { return dt == TG_FLOAT32 || dt == TG_FLOAT64 || dt == TG_INT32 || dt == TG_INT64; }

static int lanes_of(renderer *r, uop *u) { return uop_lanes(&r->lanes, u); }
static bool is_lane_range(const uop *u) { return u->op == OP_RANGE && u->arg[1] == RANGE_LANE; }

static void render_const(char *buf, size_t n, uop *u) {
  tg_dtype dt = u->dtype;
  if (dtype_is_float(dt)) {
    double v = uop_const_value(u);
    const char *suf = dt == TG_FLOAT64 ? "" : "f";
    if (isnan(v)) snprintf(buf, n, "NAN");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "INFINITY" : "(-INFINITY)");
    else {
      char num[64];
      snprintf(num, sizeof num, dt == TG_FLOAT64 ? "%.17g" : "%.9g", v);
      bool plain = !strpbrk(num, ".e");
      snprintf(buf, n, "%s%s%s%s", v < 0 ? "(" : "", num, plain ? ".0" : "", suf);
      if (v < 0) strncat(buf, ")", n - strlen(buf) - 1);
    }
    return;
  }
  int64_t v = u->arg[0];
  switch (dt) {
    case TG_BOOL: snprintf(buf, n, "%d", v != 0); break;
    case TG_UINT64: snprintf(buf, n, "%lluULL", (unsigned long long)v); break;
    case TG_UINT32: case TG_UINT16: case TG_UINT8: snprintf(buf, n, "%lluu", (unsigned long long)v); break;
    case TG_INT64:
      if (v == INT64_MIN) snprintf(buf, n, "(-9223372036854775807LL-1)");
      else snprintf(buf, n, v < 0 ? "(%lldLL)" : "%lldLL", (long long)v);
      break;
    default:
      if (v == INT32_MIN) snprintf(buf, n, "(-2147483647-1)");
      else snprintf(buf, n, v < 0 ? "(%lld)" : "%lld", (long long)v);
  }
}

static const char *name_of(renderer *r, uop *u) {
  char *s = ptrmap_get(&r->names, u);
  if (s) return s;
  char buf[400];
  if (u->op == OP_CONST) render_const(buf, sizeof buf, u);
  else if (is_lane_range(u)) {
    int w = (int)uop_const_ivalue(u->src[0]), len = snprintf(buf, sizeof buf, "((%s){", vtype(r, TG_INT64, w, V_VALUE));
    for (int l = 0; l < w; l++) len += snprintf(buf + len, sizeof buf - (size_t)len, l ? ",%d" : "%d", l);
    snprintf(buf + len, sizeof buf - (size_t)len, "})");
  } else if (u->op == OP_RANGE) snprintf(buf, sizeof buf, "r%lld", (long long)u->arg[0]);
  else if (u->op == OP_DEFINE_GLOBAL) snprintf(buf, sizeof buf, "d%lld", (long long)u->arg[0]);
  else snprintf(buf, sizeof buf, "v%d", r->nvars++);
  s = strdup(buf);
  ptrmap_put(&r->names, u, s);
  return s;
}

static void rename_node(renderer *r, uop *u, const char *name) {
  free(ptrmap_get(&r->names, u));
  ptrmap_put(&r->names, u, strdup(name));
}

static char *tmp_buf(renderer *r) { return r->tmp[r->ntmp++ & 7]; }

/* A source as an operand: for lane >= 0 a vector source is read at that lane. */
static const char *operand(renderer *r, uop *u, int lane) {
  if (lane < 0 || !lanes_of(r, u)) return name_of(r, u);
  char *b = tmp_buf(r);
  if (is_lane_range(u)) snprintf(b, 192, "%dLL", lane);
  else snprintf(b, 192, "%s[%d]", name_of(r, u), lane);
  return b;
}

/* A source as a vector of w lanes of dt (a scalar is broadcast: s - 0 keeps -0.0 and NaN). */
static const char *as_vector(renderer *r, uop *u, tg_dtype dt, int w) {
  if (lanes_of(r, u)) return name_of(r, u);
  char *b = tmp_buf(r);
  snprintf(b, 192, "((%s)%s - (%s){})", dtype_table[vec_elem(dt)].cvalue, name_of(r, u), vtype(r, dt, w, V_VALUE));
  return b;
}

/* The signed integer vector type with dt's element size (comparison masks). */
static const char *mask_type(renderer *r, tg_dtype dt, int w) {
  return vtype(r, tg_dtype_size(dt) == 8 ? TG_INT64 : TG_INT32, w, V_VALUE);
}

static void indent(renderer *r) { sb_printf(&r->out, "%*s", 2 * r->depth, ""); }

/* The scalar expression for an ALU node from its operands' spellings. */
static void alu_expr(uop *u, const char *const *o, strbuf *e) {
  const char *a = o[0], *b = o[1], *c = o[2];
  tg_dtype sdt = u->src[u->op == OP_WHERE ? 1 : 0]->dtype, dt = u->dtype;
  bool fl = dtype_is_float(sdt), un = dtype_is_unsigned(sdt) || sdt == TG_BOOL;
  switch (u->op) {
    case OP_CAST:
      if (dt == TG_BOOL && fl) sb_printf(e, "(%s!=0)", a); /* NaN → true */
      else sb_printf(e, "((%s)%s)", ctype(dt), a);
      return;
    case OP_BITCAST: {
      const char *to = dtype_table[dt].ctype, *from = dtype_table[sdt].ctype;
      const char *pre = sdt == TG_FLOAT16 ? "tg_f2h" : sdt == TG_BFLOAT16 ? "tg_f2b" : "";
      const char *post = dt == TG_FLOAT16 ? "tg_h2f" : dt == TG_BFLOAT16 ? "tg_b2f" : "";
      sb_printf(e, "%s(({%s t_=%s(%s);%s o_;memcpy(&o_,&t_,sizeof o_);o_;}))", post, from, pre, a, to);
      return;
    }
    case OP_NOT: sb_printf(e, sdt == TG_BOOL ? "(!%s)" : "((%s)~%s)", sdt == TG_BOOL ? a : ctype(dt), a); return;
    case OP_MAX:
      if (fl) sb_printf(e, "((%s>%s||%s!=%s)?%s:%s)", a, b, a, a, a, b);
      else sb_printf(e, "(%s>%s?%s:%s)", a, b, a, b);
      return;
    case OP_IDIV: case OP_MOD: {
      const char *op = u->op == OP_IDIV ? "/" : "%";
      if (fl) { sb_printf(e, is_f32_math(sdt) ? "fmodf(%s,%s)" : "fmod(%s,%s)", a, b); return; }
      bool safe = u->src[1]->op == OP_CONST && u->src[1]->arg[0] != 0 && (un || u->src[1]->arg[0] != -1);
      if (safe) sb_printf(e, "(%s%s%s)", a, op, b);
      else if (un) sb_printf(e, "(%s==0?0:%s%s%s)", b, a, op, b); /* x/0 is 0, never a trap */
      else if (u->op == OP_IDIV) sb_printf(e, "(%s==0?0:%s==-1?(%s)(0u-(unsigned long long)%s):%s/%s)", b, b, ctype(dt), a, a, b);
      else sb_printf(e, "((%s==0||%s==-1)?0:%s%%%s)", b, b, a, b);
      return;
    }
    case OP_POW:
      if (fl) break;
      sb_printf(e, "((%s)tg_ipow((unsigned long long)%s,(long long)%s,%d))", ctype(dt), a, b, !un);
      return;
    default: break;
  }
  const alu_spelling *sp = &alu_c[u->op];
  const char *fmt = fl && is_f32_math(sdt) && sp->fmt_f32 ? sp->fmt_f32 : sp->fmt;
  if (u->op == OP_RECIP && !fl) fmt = "(1/%s)";
  sb_printf(e, fmt, a, b, c);
}

static const char *round_fn(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_rh" : dt == TG_BFLOAT16 ? "tg_rb" : ""; }
static const char *load_conv(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_h2f" : dt == TG_BFLOAT16 ? "tg_b2f" : ""; }
static const char *store_conv(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_f2h" : dt == TG_BFLOAT16 ? "tg_f2b" : ""; }

static bool load_checked(const uop *u) { return u->narg > 2 && u->arg[2]; }
/* The mask of a LOAD, or NULL. */
static uop *load_mask(const uop *u) { return u->nsrc > 2 ? u->src[2] : NULL; }

/* The scalar expression of a LOAD (for lane >= 0: that lane, of a gather or of a vector load). */
static void load_expr(renderer *r, uop *u, int lane, strbuf *e) {
  const char *g = name_of(r, u->src[0]), *idx = operand(r, u->src[1], lane), *conv = load_conv(u->dtype);
  char at[224];
  if (u->narg && lane >= 0) { /* a checked lane past the buffer is a padded one: any element will do */
    long long last = (long long)u->src[0]->arg[1] - 1;
    if (load_checked(u)) snprintf(at, sizeof at, "tg_clampi(%s+%d, %lldLL)", idx, lane, last), idx = at;
    else snprintf(at, sizeof at, "%s+%d", idx, lane), idx = at;
  }
  uop *m = load_mask(u);
  if (m) sb_printf(e, "(%s?%s(%s[%s]):0)", operand(r, m, lane), conv, g, idx);
  else sb_printf(e, "%s(%s[%s])", conv, g, idx);
}

/* The scalar expression of u (for lane >= 0: of that lane). */
static void scalar_expr(renderer *r, uop *u, int lane, strbuf *e) {
  if (u->op == OP_LOAD) { load_expr(r, u, lane, e); return; }
  const char *o[3] = {"", "", ""};
  for (int i = 0; i < u->nsrc && i < 3; i++) o[i] = operand(r, u->src[i], lane);
  alu_expr(u, o, e);
}

/* A lane-by-lane vector constructor {expr(0), …, expr(w-1)}. */
static void lanes_expr(renderer *r, uop *u, int w, strbuf *e) {
  sb_printf(e, "(%s){", vtype(r, u->dtype, w, V_VALUE));
  for (int l = 0; l < w; l++) {
    strbuf one = {0};
    scalar_expr(r, u, l, &one);
    sb_printf(e, "%s%s(%s)", l ? ", " : "", u->op == OP_LOAD ? "" : round_fn(u->dtype), one.s);
    sb_free(&one);
  }
  sb_printf(e, "}");
}

/* A contiguous vector load. A checked one reads the whole vector only when that stays inside
 * the buffer (arg[1] of the DEFINE_GLOBAL), zeroing lanes its mask turns off, and otherwise
 * gathers lane by lane. */
static bool vector_load(renderer *r, uop *u, int w, strbuf *e) {
  tg_dtype dt = u->dtype;
  const char *vt = vtype(r, dt, w, V_VALUE), *g = name_of(r, u->src[0]), *base = name_of(r, u->src[1]);
  char load[256];
  snprintf(load, sizeof load, "(%s)*(const %s *)(%s + %s)", vt, vtype(r, dt, w, u->arg[1] ? V_ALIGNED : V_UNALIGNED), g, base);
  uop *m = load_mask(u);
  if (!load_checked(u)) {
    if (m) sb_printf(e, "(%s ? %s : (%s){})", name_of(r, m), load, vt);
    else sb_printf(e, "%s", load);
    return true;
  }
  if (m && lanes_of(r, m) && !fast_dtype(dt)) return false;
  if ((!m || !lanes_of(r, m)) && (size_t)w * tg_dtype_size(dt) <= BUFFER_SLACK) {
    /* checked only for a padded dim's clamp: lane 0 is a real element (>= 0, in bounds) and
     * the buffer's slack covers the rest; the padded lanes' values are never used */
    if (m) sb_printf(e, "(%s ? %s : (%s){})", name_of(r, m), load, vt);
    else sb_printf(e, "%s", load);
    return true;
  }
  sb_printf(e, "((%s >= 0 && %s <= %lldLL) ? ", base, base, (long long)(u->src[0]->arg[1] - w));
  if (!m) sb_printf(e, "%s", load);
  else if (!lanes_of(r, m)) sb_printf(e, "(%s ? %s : (%s){})", name_of(r, m), load, vt);
  else {
    const char *mt = mask_type(r, dt, w);
    sb_printf(e, "(%s)((%s)%s & -__builtin_convertvector(%s, %s))", vt, mt, load, name_of(r, m), mt);
  }
  sb_printf(e, " : ");
  lanes_expr(r, u, w, e);
  sb_printf(e, ")");
  return true;
}

/* Bool lanes are bytes holding 0/1: comparisons of vectors give -1/0 masks, converted. */
static bool vector_bool(renderer *r, uop *u, int w, strbuf *e) {
  uop *x = u->src[0];
  const char *bt = vtype(r, TG_BOOL, w, V_VALUE);
  switch (u->op) {
    case OP_CMPLT: case OP_CMPNE: case OP_CMPEQ: {
      if (!fast_dtype(x->dtype)) return false;
      const char *op = u->op == OP_CMPLT ? "<" : u->op == OP_CMPNE ? "!=" : "==";
      sb_printf(e, "__builtin_convertvector(-(%s %s %s), %s)", as_vector(r, x, x->dtype, w), op,
                as_vector(r, u->src[1], x->dtype, w), bt);
      return true;
    }
    case OP_AND: case OP_OR: case OP_XOR:
      sb_printf(e, "(%s %c %s)", as_vector(r, x, TG_BOOL, w), u->op == OP_AND ? '&' : u->op == OP_OR ? '|' : '^',
                as_vector(r, u->src[1], TG_BOOL, w));
      return true;
    case OP_NOT: sb_printf(e, "(%s ^ 1)", name_of(r, x)); return true;
    case OP_CAST:
      if (!fast_dtype(x->dtype)) return false;
      sb_printf(e, "__builtin_convertvector(-(%s != 0), %s)", name_of(r, x), bt);
      return true;
    default: return false;
  }
}

/* Vector arithmetic for u, or false if it must go lane by lane. */
static bool vector_expr(renderer *r, uop *u, int w, strbuf *e) {
  tg_dtype dt = u->dtype;
  if (u->op == OP_LOAD) return u->narg && vector_load(r, u, w, e);
  if (dt == TG_BOOL) return vector_bool(r, u, w, e);
  if (!fast_dtype(dt)) return false;
  int first = u->op == OP_WHERE ? 1 : 0;
  bool from_bool = u->op == OP_CAST && u->src[0]->dtype == TG_BOOL;
  for (int i = first; i < u->nsrc; i++)
    if (u->src[i]->dtype != dt && u->op != OP_CAST) return false;
  const char *vt = vtype(r, dt, w, V_VALUE);
  const char *a = u->nsrc > first ? name_of(r, u->src[first]) : "", *b = u->nsrc > first + 1 ? name_of(r, u->src[first + 1]) : "";
  bool fl = dtype_is_float(dt);
  switch (u->op) {
    case OP_ADD: sb_printf(e, "(%s+%s)", a, b); return true;
    case OP_SUB: sb_printf(e, "(%s-%s)", a, b); return true;
    case OP_MUL: sb_printf(e, "(%s*%s)", a, b); return true;
    case OP_NEG: sb_printf(e, "(-%s)", a); return true;
    case OP_FDIV: if (!fl) return false; sb_printf(e, "(%s/%s)", a, b); return true;
    case OP_RECIP: if (!fl) return false; sb_printf(e, dt == TG_FLOAT32 ? "(1.0f/%s)" : "(1.0/%s)", a); return true;
    case OP_CAST:
      if (!fast_dtype(u->src[0]->dtype) && !from_bool) return false;
      sb_printf(e, "__builtin_convertvector(%s, %s)", a, vt);
      return true;
    case OP_WHERE: {
      const char *va = as_vector(r, u->src[1], dt, w), *vb = as_vector(r, u->src[2], dt, w);
      if (!lanes_of(r, u->src[0])) { sb_printf(e, "(%s ? %s : %s)", name_of(r, u->src[0]), va, vb); return true; }
      const char *mt = mask_type(r, dt, w);
      sb_printf(e, "({%s m_ = -__builtin_convertvector(%s, %s); (%s)((m_ & (%s)%s) | (~m_ & (%s)%s));})", mt,
                name_of(r, u->src[0]), mt, vt, mt, va, mt, vb);
      return true;
    }
    case OP_MAX: { /* floats: a NaN in a wins, like the scalar spelling */
      const char *mt = mask_type(r, dt, w), *va = as_vector(r, u->src[0], dt, w), *vb = as_vector(r, u->src[1], dt, w);
      sb_printf(e, "({%s a_ = %s, b_ = %s; %s m_ = (a_ > b_)%s; (%s)((m_ & (%s)a_) | (~m_ & (%s)b_));})",
                vt, va, vb, mt, fl ? " | (a_ != a_)" : "", vt, mt, mt);
      return true;
    }
    default: return false;
  }
}

static void render_value(renderer *r, uop *u) {
  int w = lanes_of(r, u);
  strbuf e = {0};
  const char *round = u->op == OP_LOAD ? "" : round_fn(u->dtype);
  indent(r);
  if (!w) {
    scalar_expr(r, u, -1, &e);
    if (*round) sb_printf(&r->out, "%s %s = %s(%s);\n", ctype(u->dtype), name_of(r, u), round, e.s);
    else sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), e.s);
  } else if (vector_expr(r, u, w, &e)) {
    sb_printf(&r->out, "%s %s = %s;\n", vtype(r, u->dtype, w, V_VALUE), name_of(r, u), e.s);
  } else { /* lane by lane: a vector built from one scalar expression per lane */
    lanes_expr(r, u, w, &e);
    sb_printf(&r->out, "%s %s = %s;\n", vtype(r, u->dtype, w, V_VALUE), name_of(r, u), e.s);
  }
  sb_free(&e);
}

static void render_store(renderer *r, uop *u) {
  uop *val = u->src[2];
  tg_dtype dt = val->dtype;
  const char *g = name_of(r, u->src[0]), *conv = store_conv(dt);
  int w = lanes_of(r, u);
  indent(r);
  bool checked = u->narg > 2 && u->arg[2];
  if (u->narg) { /* contiguous vector store; a gate per lane: when all lanes are on */
    if (checked) sb_printf(&r->out, "if (!__builtin_memcmp(&%s, tg_ones, %d)) ", name_of(r, u->src[3]), w);
    else if (u->nsrc > 3) sb_printf(&r->out, "if (%s) ", name_of(r, u->src[3]));
    sb_printf(&r->out, "*(%s *)(%s + %s) = %s;\n", vtype(r, dt, w, u->arg[1] ? V_ALIGNED : V_UNALIGNED), g, name_of(r, u->src[1]),
              as_vector(r, val, dt, w));
    if (!checked) return;
    indent(r);
    sb_printf(&r->out, "else ");
  }
  for (int l = w ? 0 : -1; l < w; l++) { /* lane by lane (or once, scalar) */
    char at[224];
    const char *idx = operand(r, u->src[1], l);
    if (u->narg) snprintf(at, sizeof at, "%s+%d", idx, l), idx = at;
    if (u->nsrc > 3) sb_printf(&r->out, "if (%s) ", operand(r, u->src[3], l));
    sb_printf(&r->out, "%s[%s] = %s(%s);%s", g, idx, conv, operand(r, val, l), l + 1 < w ? " " : "\n");
  }
}

/* ---------------------------------------------------------------- reductions */

static const char *reduce_identity(uop *u, char *buf, size_t n) {
  tg_dtype dt = u->dtype;
  switch (u->arg[0]) {
    case OP_ADD: return "0";
    case OP_MUL: return "1";
    default: /* MAX */
      if (dtype_is_float(dt)) return "(-INFINITY)";
      if (dt == TG_INT64) return "(-9223372036854775807LL-1)";
      if (dtype_is_unsigned(dt) || dt == TG_BOOL) return "0";
      snprintf(buf, n, "(%.0f)", dtype_table[dt].min);
      return buf;
  }
}

/* Lanes of a REDUCE's accumulator: its value's, or the lane count when it reduces lanes. */
static int acc_lanes(renderer *r, uop *u) {
  for (int i = reduce_nbody(u); i < u->nsrc; i++)
    if (is_lane_range(u->src[i])) return (int)uop_const_ivalue(u->src[i]->src[0]);
  return lanes_of(r, u);
}

/* "a OP b" for one lane (or a scalar). */
static void combine(strbuf *e, uop *u, const char *a, const char *b) {
  tg_dtype dt = u->dtype;
  if (u->arg[0] == OP_MAX && dtype_is_float(dt)) sb_printf(e, "((%s>%s||%s!=%s)?%s:%s)", a, b, a, a, a, b);
  else if (u->arg[0] == OP_MAX) sb_printf(e, "(%s>%s?%s:%s)", a, b, a, b);
  else sb_printf(e, "%s(%s %c %s)", round_fn(dt), a, u->arg[0] == OP_ADD ? '+' : '*', b);
}

static void render_acc_init(renderer *r, uop *u) {
  char buf[64];
  int w = acc_lanes(r, u);
  const char *id = reduce_identity(u, buf, sizeof buf);
  indent(r);
  if (!w) { sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), id); return; }
  sb_printf(&r->out, "%s %s = {", vtype(r, u->dtype, w, V_VALUE), name_of(r, u));
  for (int l = 0; l < w; l++) sb_printf(&r->out, l ? ", %s" : "%s", id);
  sb_printf(&r->out, "};\n");
}

static void render_acc_update(renderer *r, uop *u) {
  int w = acc_lanes(r, u);
  const char *acc = name_of(r, u);
  for (int i = 0; i < reduce_nbody(u); i++) {
    uop *body = u->src[i];
    strbuf e = {0};
    indent(r);
    if (!w) {
      combine(&e, u, acc, name_of(r, body));
      sb_printf(&r->out, "%s = %s;\n", acc, e.s);
    } else if (fast_dtype(u->dtype) && u->arg[0] != OP_MAX && body->dtype == u->dtype) {
      sb_printf(&r->out, "%s = %s %c %s;\n", acc, acc, u->arg[0] == OP_ADD ? '+' : '*', name_of(r, body));
    } else if (u->arg[0] == OP_MAX && (u->dtype == TG_FLOAT32 || u->dtype == TG_FLOAT64) && body->dtype == u->dtype) {
      const char *vt = vtype(r, u->dtype, w, V_VALUE), *it = mask_type(r, u->dtype, w);
      sb_printf(&r->out, "{%s b_ = %s; %s m_ = (%s > b_) | (%s != %s); %s = (%s)((m_ & (%s)%s) | (~m_ & (%s)b_));}\n", vt,
                as_vector(r, body, u->dtype, w), it, acc, acc, acc, acc, vt, it, acc, it);
    } else { /* lane by lane */
      sb_printf(&r->out, "%s = (%s){", acc, vtype(r, u->dtype, w, V_VALUE));
      for (int l = 0; l < w; l++) {
        char al[160];
        snprintf(al, sizeof al, "%s[%d]", acc, l);
        strbuf one = {0};
        combine(&one, u, al, operand(r, body, l));
        sb_printf(&r->out, "%s%s", l ? ", " : "", one.s);
        sb_free(&one);
      }
      sb_printf(&r->out, "};\n");
    }
    sb_free(&e);
  }
}

/* A reduction over lanes ends with a horizontal combine into a scalar (of the first arg[2]
 * lanes when the rest are padding). */
static void render_acc_final(renderer *r, uop *u) {
  int w = acc_lanes(r, u);
  if (!w || lanes_of(r, u)) return;
  if (u->narg > 2 && u->arg[2] > 0 && u->arg[2] < w) w = (int)u->arg[2];
  char acc[64], name[32], al[96];
  snprintf(acc, sizeof acc, "%s", name_of(r, u));
  snprintf(name, sizeof name, "v%d", r->nvars++);
  indent(r);
  sb_printf(&r->out, "%s %s = %s[0];", ctype(u->dtype), name, acc);
  for (int l = 1; l < w; l++) {
    strbuf e = {0};
    snprintf(al, sizeof al, "%s[%d]", acc, l);
    combine(&e, u, name, al);
    sb_printf(&r->out, " %s = %s;", name, e.s);
    sb_free(&e);
  }
  sb_printf(&r->out, "\n");
  rename_node(r, u, name);
}

static void render_op(renderer *r, const lin_op *o) {
  uop *u = o->u;
  switch (o->kind) {
    case L_LOOP: {
      const char *v = name_of(r, u);
      indent(r);
      if (u->arg[1] == RANGE_PARALLEL) sb_printf(&r->out, "for (long long %s = tg_start; %s < tg_end; %s++) {\n", v, v, v);
      else sb_printf(&r->out, "for (long long %s = 0; %s < %s; %s++) {\n", v, v, name_of(r, u->src[0]), v);
      r->depth++;
      break;
    }
    case L_END:
      r->depth--;
      indent(r);
      sb_printf(&r->out, "}\n");
      break;
    case L_ACC_INIT: render_acc_init(r, u); break;
    case L_ACC_UPDATE: render_acc_update(r, u); break;
    case L_ACC_FINAL: render_acc_final(r, u); break;
    case L_STORE: render_store(r, u); break;
    case L_VALUE: render_value(r, u); break;
  }
}

/* ---------------------------------------------------------------- functions */

static void render_function(renderer *r, const lin_program *p, const char *name, strbuf *dst) {
  uop *globals[66] = {0};
  bool written[66] = {0};
  int nglob = 0;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i].u;
    if (u->op == OP_STORE && u->src[0]->arg[0] < 66) written[u->src[0]->arg[0]] = true;
    for (int j = -1; j < u->nsrc; j++) {
      uop *s = j < 0 ? u : u->src[j];
      if (dtype_is_half(s->dtype)) r->uses_half = true;
      if (s->op == OP_DEFINE_GLOBAL && s->arg[0] < 66) {
        globals[s->arg[0]] = s;
        if (s->arg[0] + 1 > nglob) nglob = (int)s->arg[0] + 1;
      }
    }
  }
  r->out = (strbuf){0};
  r->depth = 1;
  for (int i = 0; i < p->n; i++) render_op(r, &p->ops[i]);
  sb_printf(dst, "void %s(void **args, long long tg_start, long long tg_end) {\n", name);
  sb_printf(dst, "  (void)tg_start, (void)tg_end;\n");
  for (int i = 0; i < nglob; i++) {
    if (!globals[i]) continue;
    const char *ct = dtype_table[globals[i]->dtype].ctype;
    sb_printf(dst, "  %s%s *restrict %s = (%s *)args[%d];\n", written[i] ? "" : "const ", ct, name_of(r, globals[i]), ct, i);
  }
  sb_printf(dst, "%s}\n", r->out.s ? r->out.s : "");
  sb_free(&r->out);
}

static void render_typedefs(renderer *r, strbuf *dst) {
  for (int dt = 0; dt < TG_DTYPE_COUNT; dt++) {
    for (int k = 0; k < 8; k++) {
      if (!(r->vec_used[dt] >> k & 1)) continue;
      int w = 1 << k, size = w * (int)tg_dtype_size((tg_dtype)dt);
      const char *ct = dtype_table[dt].cvalue, *nm = vec_names[dt];
      sb_printf(dst, "typedef %s tg_%sx%d __attribute__((vector_size(%d)));\n", ct, nm, w, size);
      sb_printf(dst, "typedef %s tg_%sx%da __attribute__((vector_size(%d), may_alias));\n", ct, nm, w, size);
      sb_printf(dst, "typedef %s tg_%sx%du __attribute__((vector_size(%d), aligned(%d), may_alias));\n", ct, nm, w,
                size, (int)tg_dtype_size((tg_dtype)dt));
    }
  }
}

char *render_c(const lin_program *progs, int n, const char *const *names) {
  renderer r = {0};
  strbuf body = {0}, src = {0};
  for (int i = 0; i < n; i++) {
    render_function(&r, &progs[i], names[i], &body);
    for (size_t j = 0; j < r.names.cap; j++) /* names are per function */
      if (r.names.keys[j]) free(r.names.vals[j]);
    ptrmap_free(&r.names);
    r.nvars = 0;
  }
  sb_printf(&src, "%s%s", PRELUDE, r.uses_half ? HALF_HELPERS : "");
  render_typedefs(&r, &src);
  sb_printf(&src, "%s", body.s ? body.s : "");
  sb_free(&body);
  ptrmap_free(&r.lanes);
  return src.s;
}
