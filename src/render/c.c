/* c.c — render a linear program as C for the CPU compiler.
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

typedef struct renderer {
  strbuf out;
  ptrmap names; /* uop → malloc'd expression or variable name */
  int nvars, depth;
  bool uses_half;
} renderer;

static const char *ctype(tg_dtype dt) { return dtype_table[dt].cvalue; }
static bool is_f32_math(tg_dtype dt) { return dt == TG_FLOAT32 || dtype_is_half(dt); }

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
  char buf[96];
  if (u->op == OP_CONST) render_const(buf, sizeof buf, u);
  else if (u->op == OP_RANGE) snprintf(buf, sizeof buf, "r%lld", (long long)u->arg[0]);
  else if (u->op == OP_DEFINE_GLOBAL) snprintf(buf, sizeof buf, "d%lld", (long long)u->arg[0]);
  else snprintf(buf, sizeof buf, "v%d", r->nvars++);
  s = strdup(buf);
  ptrmap_put(&r->names, u, s);
  return s;
}

static void indent(renderer *r) { sb_printf(&r->out, "%*s", 2 * r->depth, ""); }

/* The expression for an ALU node, from its sources' names. */
static void alu_expr(renderer *r, uop *u, strbuf *e) {
  const char *a = name_of(r, u->src[0]);
  const char *b = u->nsrc > 1 ? name_of(r, u->src[1]) : "";
  const char *c = u->nsrc > 2 ? name_of(r, u->src[2]) : "";
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

static void render_value(renderer *r, uop *u) {
  strbuf e = {0};
  const char *g;
  switch (u->op) {
    case OP_LOAD: {
      tg_dtype dt = u->dtype;
      g = name_of(r, u->src[0]);
      const char *idx = name_of(r, u->src[1]);
      const char *conv = dt == TG_FLOAT16 ? "tg_h2f" : dt == TG_BFLOAT16 ? "tg_b2f" : "";
      if (u->nsrc > 2) sb_printf(&e, "(%s?%s(%s[%s]):0)", name_of(r, u->src[2]), conv, g, idx);
      else sb_printf(&e, "%s(%s[%s])", conv, g, idx);
      break;
    }
    default: alu_expr(r, u, &e); break;
  }
  const char *round = u->dtype == TG_FLOAT16 && u->op != OP_LOAD ? "tg_rh" : u->dtype == TG_BFLOAT16 && u->op != OP_LOAD ? "tg_rb" : "";
  indent(r);
  if (*round) sb_printf(&r->out, "%s %s = %s(%s);\n", ctype(u->dtype), name_of(r, u), round, e.s);
  else sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), e.s);
  sb_free(&e);
}

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

static void render_op(renderer *r, const lin_op *o) {
  uop *u = o->u;
  char buf[64];
  switch (o->kind) {
    case L_LOOP:
      indent(r);
      sb_printf(&r->out, "for (long long %s = 0; %s < %s; %s++) {\n", name_of(r, u), name_of(r, u),
                name_of(r, u->src[0]), name_of(r, u));
      r->depth++;
      break;
    case L_END:
      r->depth--;
      indent(r);
      sb_printf(&r->out, "}\n");
      break;
    case L_ACC_INIT:
      indent(r);
      sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), reduce_identity(u, buf, sizeof buf));
      break;
    case L_ACC_UPDATE: {
      const char *acc = name_of(r, u), *v = name_of(r, u->src[0]);
      const char *round = u->dtype == TG_FLOAT16 ? "tg_rh" : u->dtype == TG_BFLOAT16 ? "tg_rb" : "";
      indent(r);
      if (u->arg[0] == OP_MAX && dtype_is_float(u->dtype))
        sb_printf(&r->out, "%s = (%s>%s||%s!=%s)?%s:%s;\n", acc, acc, v, acc, acc, acc, v);
      else if (u->arg[0] == OP_MAX) sb_printf(&r->out, "%s = %s>%s?%s:%s;\n", acc, acc, v, acc, v);
      else sb_printf(&r->out, "%s = %s(%s %c %s);\n", acc, round, acc, u->arg[0] == OP_ADD ? '+' : '*', v);
      break;
    }
    case L_STORE: {
      tg_dtype dt = u->src[2]->dtype;
      const char *conv = dt == TG_FLOAT16 ? "tg_f2h" : dt == TG_BFLOAT16 ? "tg_f2b" : "";
      indent(r);
      sb_printf(&r->out, "%s[%s] = %s(%s);\n", name_of(r, u->src[0]), name_of(r, u->src[1]), conv, name_of(r, u->src[2]));
      break;
    }
    case L_VALUE: render_value(r, u); break;
  }
}

char *render_c(const lin_program *p, const kernel_info *info) {
  renderer r = {0};
  r.depth = 1;
  /* buffers: collect DEFINE_GLOBALs by slot */
  uop *globals[64] = {0};
  int nglob = 0;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i].u;
    for (int j = -1; j < u->nsrc; j++) {
      uop *s = j < 0 ? u : u->src[j];
      if (dtype_is_half(s->dtype)) r.uses_half = true;
      if (s->op == OP_DEFINE_GLOBAL && s->arg[0] < 64) {
        globals[s->arg[0]] = s;
        if (s->arg[0] + 1 > nglob) nglob = (int)s->arg[0] + 1;
      }
    }
  }
  strbuf body = r.out;
  r.out = (strbuf){0};
  sb_printf(&r.out, "%s%s", PRELUDE, r.uses_half ? HALF_HELPERS : "");
  sb_printf(&r.out, "void %s(void **args) {\n", info->name);
  for (int i = 0; i < nglob; i++) {
    if (!globals[i]) continue;
    const char *ct = dtype_table[globals[i]->dtype].ctype;
    sb_printf(&r.out, "  %s%s *restrict %s = (%s *)args[%d];\n", i ? "const " : "", ct, name_of(&r, globals[i]), ct, i);
  }
  sb_free(&body);
  for (int i = 0; i < p->n; i++) render_op(&r, &p->ops[i]);
  sb_printf(&r.out, "}\n");
  for (size_t i = 0; i < r.names.cap; i++)
    if (r.names.keys[i]) free(r.names.vals[i]);
  ptrmap_free(&r.names);
  return r.out.s;
}
