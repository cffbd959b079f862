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

/* The helpers every kernel may call, written once over a few per-flavor macros: TG_FN (a
 * helper function), tg_i64/tg_u64/tg_bool (types whose C spelling OpenCL lacks), tg_f2u/tg_u2f
 * (float bits), TG_RINTF (round half to even). */
static const char *HELPERS =
    "TG_FN tg_i64 tg_clampi(tg_i64 i,tg_i64 last){return i<0?0:i>last?last:i;}\n"
    "TG_FN tg_u64 tg_ipow(tg_u64 a,tg_i64 b,int sgn){"
    "if(b<0)return sgn&&(tg_i64)a==-1?((b&1)?a:1):a==1;tg_u64 r=1;"
    "while(b){if(b&1)r*=a;a*=a;b>>=1;}return r;}\n";

/* float16 <-> float32 as numpy converts: round to nearest even; a NaN keeps its sign and
 * payload (the top 10 bits of a float32's; 1 when none are set, so it stays a NaN), a
 * signalling NaN signalling. Where the C compiler targets F16C (CPU device, -march=native),
 * its instructions, which quiet signalling NaNs: the quiet bit is put back. */
static const char *HALF_HELPERS =
    "#if defined(__F16C__) && !defined(__OPENCL_VERSION__) && !defined(__CUDACC__)\n#include <immintrin.h>\n"
    "TG_FN float tg_h2f(unsigned short h){unsigned int b=tg_f2u(_cvtsh_ss(h));"
    "if((h&0x7fffu)>0x7c00u)b&=0xffbfffffu|((h&0x200u)<<13);return tg_u2f(b);}\n"
    "TG_FN unsigned short tg_f2h(float f){unsigned int x=tg_f2u(f),h=_cvtss_sh(f,0);"
    "if((x&0x7fffffffu)>0x7f800000u){h&=0xfdffu|((x>>13)&0x200u);if(!(h&0x3ffu))h|=1;}return (unsigned short)h;}\n"
    "#else\n"
    "TG_FN float tg_h2f(unsigned short h){unsigned int s=(unsigned int)(h>>15)<<31,e=(h>>10)&31,m=h&1023,b;"
    "if(e==31)b=s|0x7f800000u|(m<<13);else if(e)b=s|((e+112)<<23)|(m<<13);else if(!m)b=s;"
    "else b=tg_f2u((float)m*5.9604644775390625e-8f)|s;return tg_u2f(b);}\n"
    "TG_FN unsigned short tg_f2h(float f){unsigned int x=tg_f2u(f);unsigned int s=(x>>16)&0x8000,a=x&0x7fffffffu;"
    "if(a>0x7f800000u){unsigned int p=(a>>13)&1023;return (unsigned short)(s|0x7c00|(p?p:1));}if(a==0x7f800000u)return (unsigned short)(s|0x7c00);"
    "if(a>=0x477ff000u)return (unsigned short)(s|0x7c00);"
    "if(a<0x38800000u)return (unsigned short)(s|(unsigned int)TG_RINTF(tg_u2f(a)*16777216.0f));"
    "unsigned int r=a+0xfffu+((a>>13)&1u);return (unsigned short)(s|((r-0x38000000u)>>13));}\n#endif\n"
    "TG_FN float tg_b2f(unsigned short h){return tg_u2f((unsigned int)h<<16);}\n"
    "TG_FN unsigned short tg_f2b(float f){unsigned int x=tg_f2u(f);"
    "if((x&0x7fffffffu)>0x7f800000u)return (unsigned short)((x>>16)|((x>>16)&127?0:64));return (unsigned short)((x+0x7fffu+((x>>16)&1u))>>16);}\n"
    "TG_FN float tg_rh(float f){return tg_h2f(tg_f2h(f));}\n"
    "TG_FN float tg_rb(float f){return tg_b2f(tg_f2b(f));}\n";

/* What differs between the C the CPU compiler gets and the OpenCL C and CUDA C of GPU devices:
 * a small table, not a second renderer. GPU kernels take their buffers as typed parameters
 * after the work-item count, and compute one combination of the output loops each. */
typedef struct flavor {
  const char *prelude;    /* the macros and types HELPERS use, and what the dialect needs */
  bool gpu;               /* work-items (kernel signature, output loops from the work-item index) */
  const char *kernel;     /* what starts a kernel's definition */
  const char *global;     /* qualifier of a buffer pointer */
  const char *restrict_;  /* spelling of restrict */
  const char *gid;        /* the work-item index */
  const char *i64_suffix; /* of a 64-bit integer literal */
  const char *bool_mem;   /* type of a bool in memory */
  bool f32_math;          /* float functions are named with an f (expf): C and CUDA; OpenCL overloads */
  void (*bitcast)(strbuf *e, tg_dtype to, tg_dtype from, const char *value);
  const char *shared;     /* qualifier of a work-group's local array */
  const char *barrier;    /* a work-group barrier over local memory */
  const char *lid;        /* the work-item's index in its work-group */
  bool mma;               /* WMMA as PTX mma.sync (CUDA); else emulated through local memory */
} flavor;

static void bitcast_c(strbuf *e, tg_dtype to, tg_dtype from, const char *v) {
  sb_printf(e, "({%s t_=%s;%s o_;memcpy(&o_,&t_,sizeof o_);o_;})", dtype_table[from].ctype, v, dtype_table[to].ctype);
}
static void bitcast_cuda(strbuf *e, tg_dtype to, tg_dtype from, const char *v) {
  sb_printf(e, "tg_bitcast<%s>((%s)%s)", to == TG_BOOL ? "bool" : dtype_table[to].ctype, from == TG_BOOL ? "bool" : dtype_table[from].ctype, v);
}
static void bitcast_opencl(strbuf *e, tg_dtype to, tg_dtype from, const char *v) {
  static const char *const names[TG_DTYPE_COUNT] = {
      [TG_BOOL] = "uchar", [TG_INT8] = "char",   [TG_INT16] = "short", [TG_INT32] = "int",
      [TG_INT64] = "long", [TG_UINT8] = "uchar", [TG_UINT16] = "ushort", [TG_UINT32] = "uint",
      [TG_UINT64] = "ulong", [TG_FLOAT16] = "ushort", [TG_BFLOAT16] = "ushort", [TG_FLOAT32] = "float",
      [TG_FLOAT64] = "double"};
  sb_printf(e, "as_%s((%s)%s)", names[to], names[from], v);
}

static const flavor flavor_c = {
    .prelude = "#include <math.h>\n#include <string.h>\n"
               "#define restrict __restrict\n#define TG_FN static inline\n#define TG_RINTF nearbyintf\n"
               "typedef long long tg_i64;\ntypedef unsigned long long tg_u64;\ntypedef _Bool tg_bool;\n"
               "static const unsigned char tg_ones[16] = {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1};\n"
               "TG_FN unsigned int tg_f2u(float f){unsigned int u;memcpy(&u,&f,4);return u;}\n"
               "TG_FN float tg_u2f(unsigned int u){float f;memcpy(&f,&u,4);return f;}\n",
    .kernel = "void", .global = "", .bool_mem = "_Bool", .restrict_ = "restrict", .i64_suffix = "LL", .f32_math = true,
    .bitcast = bitcast_c};

static const flavor flavor_opencl = {
    .prelude = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
               "#define TG_FN static inline\n#define TG_RINTF rint\n#define tg_f2u as_uint\n#define tg_u2f as_float\n"
               "typedef long tg_i64;\ntypedef ulong tg_u64;\ntypedef bool tg_bool;\n",
    .gpu = true, .kernel = "__kernel void", .global = "__global ", .restrict_ = "restrict",
    .gid = "(tg_i64)get_global_id(0)", .bool_mem = "uchar", .i64_suffix = "L", .f32_math = false, .bitcast = bitcast_opencl,
    .shared = "__local", .barrier = "barrier(CLK_LOCAL_MEM_FENCE);", .lid = "(tg_i64)get_local_id(0)"};

static const flavor flavor_cuda = {
    .prelude = "#define TG_FN static __device__ inline\n#define TG_RINTF nearbyintf\n"
               "#define INFINITY __int_as_float(0x7f800000)\n#define NAN __int_as_float(0x7fffffff)\n"
               "typedef long long tg_i64;\ntypedef unsigned long long tg_u64;\ntypedef bool tg_bool;\n"
               "#define tg_f2u __float_as_uint\n#define tg_u2f __uint_as_float\n"
               "template <class T, class F> static __device__ inline T tg_bitcast(F f){T t;memcpy(&t,&f,sizeof t);return t;}\n",
    .gpu = true, .kernel = "extern \"C\" __global__ void", .global = "", .restrict_ = "__restrict__",
    .gid = "((tg_i64)blockIdx.x*blockDim.x+threadIdx.x)", .bool_mem = "bool", .i64_suffix = "LL", .f32_math = true,
    .bitcast = bitcast_cuda, .shared = "__shared__", .barrier = "__syncthreads();", .lid = "(tg_i64)threadIdx.x",
    .mma = true};

/* Vector nodes (vcount w, vectorize.c) are GCC vectors (typedef float tg_f32x16
 * __attribute__((vector_size(64)))). c_vector_forms says which vector ops render as vector
 * arithmetic (common ops on float32/64 and int32/64, bool masks, contiguous loads and stores);
 * devectorize splits the rest into scalar ops on the lanes (GEP) before they get here. */
typedef struct renderer {
  strbuf out;
  ptrmap names; /* uop → malloc'd expression or variable name */
  int nvars, depth;
  bool uses_half;
  unsigned vec_used[TG_DTYPE_COUNT]; /* bit k: a vector of 2^k lanes of this element type */
  char vtypes[8][32];                /* vector type spellings */
  int nvtypes;
  const flavor *fl;
  /* GPU: the output loops, outermost first, and each one's divisor of the work-item index */
  uop *gloop[KS_MAX_AXES];
  long long gdiv[KS_MAX_AXES];
  int ngloop;
  long long local;  /* work-items per work-group (0: no local loops) */
  strbuf shared;    /* the kernel's local arrays (declared at its top) */
  int nshared;
  const lin_program *prog; /* the program being rendered */
  ptrmap fused;            /* REDUCEs a WMMA accumulates into directly (their adds are skipped) */
  ptrmap seen;             /* uops of the ops rendered so far */
  ptrmap combined;         /* work-group combines rendered ahead with an earlier one */
} renderer;

/* The type a value of dt is computed in (every flavor's prelude defines the tg_ names). */
static const char *ctype(tg_dtype dt) {
  return dt == TG_BOOL ? "tg_bool" : dt == TG_INT64 ? "tg_i64" : dt == TG_UINT64 ? "tg_u64" : dtype_table[dt].cvalue;
}
/* The type an element of dt is stored as (bools: a byte; OpenCL has no bool in memory). */
static const char *mtype(const renderer *r, tg_dtype dt) {
  return dt == TG_BOOL ? r->fl->bool_mem : dtype_is_half(dt) ? dtype_table[dt].ctype : ctype(dt);
}
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

/* Vector arithmetic is used for these element types; others go lane by lane (8- and 16-bit
 * integers compute promoted to int in C, and their vectors would not). */
static bool fast_dtype(tg_dtype dt) {
  return dt == TG_FLOAT32 || dt == TG_FLOAT64 || dt == TG_INT32 || dt == TG_INT64 || dt == TG_UINT32 || dt == TG_UINT64;
}

/* ---------------------------------------------------------------- vector forms */

static bool load_checked(const uop *u) { return u->narg > 2 && u->arg[2]; }
/* The mask of a LOAD, or NULL. */
static uop *load_mask(const uop *u) { return u->nsrc > 2 ? u->src[2] : NULL; }

/* The bool-valued ops with a vector form: masks from comparisons, logic on masks. */
static bool bool_vector_form(const uop *u) {
  switch (u->op) {
    case OP_CMPLT: case OP_CMPNE: case OP_CMPEQ: case OP_CAST: return fast_dtype((tg_dtype)u->src[0]->dtype);
    case OP_AND: case OP_OR: case OP_XOR: case OP_NOT: return true;
    default: return false;
  }
}

/* A reduction's vector accumulator: + and * on fast types, max on floats. */
static bool reduce_vector_form(const uop *u) {
  tg_dtype dt = (tg_dtype)u->dtype;
  for (int i = 0; i < reduce_nbody(u); i++)
    if (u->src[i]->dtype != dt) return false;
  if (u->arg[0] == OP_MAX) return dt == TG_FLOAT32 || dt == TG_FLOAT64;
  return fast_dtype(dt);
}

/* Whether vector_expr (or the load, store and accumulator code) renders u as a vector. */
static bool c_vector_ok(const uop *u) {
  tg_dtype dt = (tg_dtype)u->dtype;
  bool fl = dtype_is_float(dt);
  switch (u->op) {
    case OP_LOAD: /* contiguous (a strided one goes lane by lane); a checked one gated per lane needs a fast type */
      return u->narg && load_lane_stride(u) == 1 && !(load_checked(u) && load_mask(u) && load_mask(u)->vcount && !fast_dtype(dt));
    case OP_STORE: return u->narg > 0;
    case OP_REDUCE: return reduce_vector_form(u);
    default: break;
  }
  if (dt == TG_BOOL) return bool_vector_form(u);
  if (!fast_dtype(dt)) return false;
  if (u->op == OP_BITCAST) /* a vector of the same size, reinterpreted */
    return fast_dtype((tg_dtype)u->src[0]->dtype) && tg_dtype_size(dt) == tg_dtype_size((tg_dtype)u->src[0]->dtype);
  for (int i = u->op == OP_WHERE; i < u->nsrc; i++)
    if (u->src[i]->dtype != dt && u->op != OP_CAST) return false;
  switch (u->op) {
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_NEG: case OP_WHERE: case OP_MAX: return true;
    case OP_FDIV: case OP_RECIP: return fl;
    case OP_AND: case OP_OR: case OP_XOR: case OP_SHL: case OP_SHR: case OP_NOT: return !fl;
    case OP_CAST: return fast_dtype((tg_dtype)u->src[0]->dtype) || u->src[0]->dtype == TG_BOOL;
    default: return false;
  }
}

const vector_forms c_vector_forms = {c_vector_ok};

/* ---------------------------------------------------------------- values */

static void render_const(char *buf, size_t n, uop *u, const char *ll) {
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
    case TG_UINT64: snprintf(buf, n, "%lluU%s", (unsigned long long)v, ll); break;
    case TG_UINT32: case TG_UINT16: case TG_UINT8: snprintf(buf, n, "%lluu", (unsigned long long)v); break;
    case TG_INT64:
      if (v == INT64_MIN) snprintf(buf, n, "(-9223372036854775807%s-1)", ll);
      else snprintf(buf, n, v < 0 ? "(%lld%s)" : "%lld%s", (long long)v, ll);
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
  if (u->op == OP_CONST) render_const(buf, sizeof buf, u, r->fl->i64_suffix);
  else if (u->op == OP_RANGE) snprintf(buf, sizeof buf, "r%lld", (long long)u->arg[0]);
  else if (u->op == OP_DEFINE_GLOBAL) snprintf(buf, sizeof buf, "d%lld", (long long)u->arg[0]);
  else snprintf(buf, sizeof buf, "v%d", r->nvars++);
  s = strdup(buf);
  ptrmap_put(&r->names, u, s);
  return s;
}

/* The signed integer vector type with dt's element size (comparison masks). */
static const char *mask_type(renderer *r, tg_dtype dt, int w) {
  return vtype(r, tg_dtype_size(dt) == 8 ? TG_INT64 : TG_INT32, w, V_VALUE);
}

static void indent(renderer *r) { sb_printf(&r->out, "%*s", 2 * r->depth, ""); }

/* The scalar expression for an ALU node from its operands' spellings. */
static void alu_expr(const renderer *r, uop *u, const char *const *o, strbuf *e) {
  const char *a = o[0], *b = o[1], *c = o[2];
  tg_dtype sdt = u->src[u->op == OP_WHERE ? 1 : 0]->dtype, dt = u->dtype;
  bool fl = dtype_is_float(sdt), un = dtype_is_unsigned(sdt) || sdt == TG_BOOL;
  switch (u->op) {
    case OP_CAST:
      if (dt == TG_BOOL && fl) sb_printf(e, "(%s!=0)", a); /* NaN → true */
      else sb_printf(e, "((%s)%s)", ctype(dt), a);
      return;
    case OP_BITCAST: { /* 16-bit floats are bitcast as their stored bits */
      const char *pre = sdt == TG_FLOAT16 ? "tg_f2h" : sdt == TG_BFLOAT16 ? "tg_f2b" : "";
      const char *post = dt == TG_FLOAT16 ? "tg_h2f" : dt == TG_BFLOAT16 ? "tg_b2f" : "";
      char v[224];
      snprintf(v, sizeof v, "%s(%s)", pre, a);
      sb_printf(e, "%s(", post);
      r->fl->bitcast(e, dt, sdt, v);
      sb_printf(e, ")");
      return;
    }
    case OP_NOT: sb_printf(e, sdt == TG_BOOL ? "(!%s)" : "((%s)~%s)", sdt == TG_BOOL ? a : ctype(dt), a); return;
    case OP_MAX:
      if (fl) sb_printf(e, "((%s>%s||%s!=%s)?%s:%s)", a, b, a, a, a, b);
      else sb_printf(e, "(%s>%s?%s:%s)", a, b, a, b);
      return;
    case OP_IDIV: case OP_MOD: {
      const char *op = u->op == OP_IDIV ? "/" : "%";
      if (fl) { sb_printf(e, is_f32_math(sdt) && r->fl->f32_math ? "fmodf(%s,%s)" : "fmod(%s,%s)", a, b); return; }
      bool safe = u->src[1]->op == OP_CONST && u->src[1]->arg[0] != 0 && (un || u->src[1]->arg[0] != -1);
      if (safe) sb_printf(e, "(%s%s%s)", a, op, b);
      else if (un) sb_printf(e, "(%s==0?0:%s%s%s)", b, a, op, b); /* x/0 is 0, never a trap */
      else if (u->op == OP_IDIV) sb_printf(e, "(%s==0?0:%s==-1?(%s)(0u-(tg_u64)%s):%s/%s)", b, b, ctype(dt), a, a, b);
      else sb_printf(e, "((%s==0||%s==-1)?0:%s%%%s)", b, b, a, b);
      return;
    }
    case OP_POW:
      if (fl) break;
      sb_printf(e, "((%s)tg_ipow((tg_u64)%s,(tg_i64)%s,%d))", ctype(dt), a, b, !un);
      return;
    default: break;
  }
  const alu_spelling *sp = &alu_c[u->op];
  const char *fmt = fl && is_f32_math(sdt) && r->fl->f32_math && sp->fmt_f32 ? sp->fmt_f32 : sp->fmt;
  if (u->op == OP_RECIP && !fl) fmt = "(1/%s)";
  sb_printf(e, fmt, a, b, c);
}

static const char *round_fn(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_rh" : dt == TG_BFLOAT16 ? "tg_rb" : ""; }
static const char *load_conv(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_h2f" : dt == TG_BFLOAT16 ? "tg_b2f" : ""; }
static const char *store_conv(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_f2h" : dt == TG_BFLOAT16 ? "tg_f2b" : ""; }

/* "x" for a scalar, "x[l]" for lane l of a vector (the fallback paths of checked accesses). */
static const char *lane_spelling(renderer *r, uop *u, int l, char *buf, size_t n) {
  if (!u->vcount) return name_of(r, u);
  snprintf(buf, n, "%s[%d]", name_of(r, u), l);
  return buf;
}

/* The scalar expression of u: a load, a lane of a vector, or an ALU op. */
static void scalar_expr(renderer *r, uop *u, strbuf *e) {
  if (u->op == OP_LOAD) {
    const char *g = name_of(r, u->src[0]), *idx = name_of(r, u->src[1]), *conv = load_conv(u->dtype);
    uop *m = load_mask(u);
    if (m) sb_printf(e, "(%s?%s(%s[%s]):0)", name_of(r, m), conv, g, idx);
    else sb_printf(e, "%s(%s[%s])", conv, g, idx);
    return;
  }
  if (u->op == OP_GEP) { sb_printf(e, "%s[%lld]", name_of(r, u->src[0]), (long long)u->arg[0]); return; }
  const char *o[3] = {"", "", ""};
  for (int i = 0; i < u->nsrc && i < 3; i++) o[i] = name_of(r, u->src[i]);
  alu_expr(r, u, o, e);
}

/* A contiguous vector load. A checked one reads the whole vector only when that stays inside
 * the buffer (arg[1] of the DEFINE_GLOBAL), zeroing lanes its mask turns off, and otherwise
 * reads lane by lane, each clamped into the buffer (a lane past it is padding). */
static void vector_load(renderer *r, uop *u, int w, strbuf *e) {
  tg_dtype dt = u->dtype;
  const char *vt = vtype(r, dt, w, V_VALUE), *g = name_of(r, u->src[0]), *base = name_of(r, u->src[1]);
  char load[256];
  snprintf(load, sizeof load, "(%s)*(const %s *)(%s + %s)", vt, vtype(r, dt, w, u->arg[1] ? V_ALIGNED : V_UNALIGNED), g, base);
  uop *m = load_mask(u);
  bool lane_mask = m && m->vcount;
  /* unchecked, or checked only for a padded dim's clamp: lane 0 is a real element (>= 0, in
   * bounds) and the buffer's slack covers the rest; the padded lanes' values are never used */
  if (!load_checked(u) || (!lane_mask && (size_t)w * tg_dtype_size(dt) <= BUFFER_SLACK)) {
    if (m) sb_printf(e, "(%s ? %s : (%s){})", name_of(r, m), load, vt);
    else sb_printf(e, "%s", load);
    return;
  }
  sb_printf(e, "((%s >= 0 && %s <= %lldLL) ? ", base, base, (long long)(u->src[0]->arg[1] - w));
  if (!m) sb_printf(e, "%s", load);
  else if (!lane_mask) sb_printf(e, "(%s ? %s : (%s){})", name_of(r, m), load, vt);
  else {
    const char *mt = mask_type(r, dt, w);
    sb_printf(e, "(%s)((%s)%s & -__builtin_convertvector(%s, %s))", vt, mt, load, name_of(r, m), mt);
  }
  sb_printf(e, " : (%s){", vt);
  long long last = (long long)u->src[0]->arg[1] - 1;
  for (int l = 0; l < w; l++) {
    char ml[224];
    sb_printf(e, "%s", l ? ", " : "");
    if (m) sb_printf(e, "%s ? ", lane_spelling(r, m, l, ml, sizeof ml));
    sb_printf(e, "%s(%s[tg_clampi(%s+%d, %lld%s)])", load_conv(dt), g, base, l, last, r->fl->i64_suffix);
    if (m) sb_printf(e, " : 0");
  }
  sb_printf(e, "})");
}

/* Bool lanes are bytes holding 0/1: comparisons of vectors give -1/0 masks, converted. */
static void vector_bool(renderer *r, uop *u, int w, strbuf *e) {
  uop *x = u->src[0];
  const char *bt = vtype(r, TG_BOOL, w, V_VALUE);
  switch (u->op) {
    case OP_CMPLT: case OP_CMPNE: case OP_CMPEQ: {
      const char *op = u->op == OP_CMPLT ? "<" : u->op == OP_CMPNE ? "!=" : "==";
      sb_printf(e, "__builtin_convertvector(-(%s %s %s), %s)", name_of(r, x), op, name_of(r, u->src[1]), bt);
      return;
    }
    case OP_AND: case OP_OR: case OP_XOR:
      sb_printf(e, "(%s %c %s)", name_of(r, x), u->op == OP_AND ? '&' : u->op == OP_OR ? '|' : '^', name_of(r, u->src[1]));
      return;
    case OP_NOT: sb_printf(e, "(%s ^ 1)", name_of(r, x)); return;
    default: /* CAST */ sb_printf(e, "__builtin_convertvector(-(%s != 0), %s)", name_of(r, x), bt); return;
  }
}

/* A VECTORIZE: w lanes from w scalars, or one scalar broadcast (s - 0 keeps -0.0 and NaN). */
static void vectorize_expr(renderer *r, uop *u, int w, strbuf *e) {
  const char *vt = vtype(r, u->dtype, w, V_VALUE);
  if (u->nsrc == 1) { sb_printf(e, "((%s)%s - (%s){})", dtype_table[vec_elem(u->dtype)].cvalue, name_of(r, u->src[0]), vt); return; }
  sb_printf(e, "(%s){", vt);
  for (int l = 0; l < u->nsrc; l++) sb_printf(e, l ? ", %s" : "%s", name_of(r, u->src[l]));
  sb_printf(e, "}");
}

/* Vector arithmetic for u (c_vector_ok(u) holds: devectorize split everything else). */
static void vector_expr(renderer *r, uop *u, int w, strbuf *e) {
  tg_dtype dt = u->dtype;
  if (u->op == OP_VECTORIZE) { vectorize_expr(r, u, w, e); return; }
  if (u->op == OP_LOAD) { vector_load(r, u, w, e); return; }
  if (dt == TG_BOOL) { vector_bool(r, u, w, e); return; }
  const char *vt = vtype(r, dt, w, V_VALUE), *a = name_of(r, u->src[0]), *b = u->nsrc > 1 ? name_of(r, u->src[1]) : "";
  switch (u->op) {
    case OP_ADD: sb_printf(e, "(%s+%s)", a, b); return;
    case OP_SUB: sb_printf(e, "(%s-%s)", a, b); return;
    case OP_MUL: sb_printf(e, "(%s*%s)", a, b); return;
    case OP_NEG: sb_printf(e, "(-%s)", a); return;
    case OP_NOT: sb_printf(e, "(~%s)", a); return;
    case OP_AND: sb_printf(e, "(%s&%s)", a, b); return;
    case OP_OR: sb_printf(e, "(%s|%s)", a, b); return;
    case OP_XOR: sb_printf(e, "(%s^%s)", a, b); return;
    case OP_SHL: sb_printf(e, "(%s<<%s)", a, b); return;
    case OP_SHR: sb_printf(e, "(%s>>%s)", a, b); return;
    case OP_FDIV: sb_printf(e, "(%s/%s)", a, b); return;
    case OP_RECIP: sb_printf(e, dt == TG_FLOAT32 ? "(1.0f/%s)" : "(1.0/%s)", a); return;
    case OP_CAST: sb_printf(e, "__builtin_convertvector(%s, %s)", a, vt); return;
    case OP_BITCAST: sb_printf(e, "((%s)%s)", vt, a); return;
    case OP_WHERE: { /* a scalar condition picks a whole vector */
      const char *va = name_of(r, u->src[1]), *vb = name_of(r, u->src[2]);
      if (!u->src[0]->vcount) { sb_printf(e, "(%s ? %s : %s)", a, va, vb); return; }
      const char *mt = mask_type(r, dt, w);
      sb_printf(e, "({%s m_ = -__builtin_convertvector(%s, %s); (%s)((m_ & (%s)%s) | (~m_ & (%s)%s));})", mt, a, mt, vt, mt,
                va, mt, vb);
      return;
    }
    default: { /* MAX; floats: a NaN in a wins, like the scalar spelling */
      const char *mt = mask_type(r, dt, w);
      sb_printf(e, "({%s a_ = %s, b_ = %s; %s m_ = (a_ > b_)%s; (%s)((m_ & (%s)a_) | (~m_ & (%s)b_));})", vt, a, b, mt,
                dtype_is_float(dt) ? " | (a_ != a_)" : "", vt, mt, mt);
      return;
    }
  }
}

static void render_wmma(renderer *r, uop *u, int at);

static void render_value(renderer *r, uop *u, int at) {
  int w = u->vcount;
  strbuf e = {0};
  if (u->op == OP_WMMA) { render_wmma(r, u, at); return; }
  indent(r);
  if (w) {
    vector_expr(r, u, w, &e);
    sb_printf(&r->out, "%s %s = %s;\n", vtype(r, u->dtype, w, V_VALUE), name_of(r, u), e.s);
  } else {
    bool exact = u->op == OP_LOAD || u->op == OP_GEP || u->op == OP_BITCAST; /* already a 16-bit value */
    const char *round = exact ? "" : round_fn(u->dtype);
    scalar_expr(r, u, &e);
    if (*round) sb_printf(&r->out, "%s %s = %s(%s);\n", ctype(u->dtype), name_of(r, u), round, e.s);
    else sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), e.s);
  }
  sb_free(&e);
}

/* STORE(g, idx, value[, gate]): scalar, or a contiguous vector at base idx (arg = [lanes,
 * aligned, checked]) whose gate may be per lane: one vector store when every lane is on,
 * else lane by lane. */
static void render_store(renderer *r, uop *u) {
  uop *val = u->src[2];
  tg_dtype dt = val->dtype;
  const char *g = name_of(r, u->src[0]), *idx = name_of(r, u->src[1]), *conv = store_conv(dt);
  int w = u->vcount;
  indent(r);
  if (!w) {
    if (u->nsrc > 3) sb_printf(&r->out, "if (%s) ", name_of(r, u->src[3]));
    sb_printf(&r->out, "%s[%s] = %s(%s);\n", g, idx, conv, name_of(r, val));
    return;
  }
  bool lane_gate = u->nsrc > 3 && u->src[3]->vcount;
  if (lane_gate) sb_printf(&r->out, "if (!__builtin_memcmp(&%s, tg_ones, %d)) ", name_of(r, u->src[3]), w);
  else if (u->nsrc > 3) sb_printf(&r->out, "if (%s) ", name_of(r, u->src[3]));
  sb_printf(&r->out, "*(%s *)(%s + %s) = %s;\n", vtype(r, dt, w, u->arg[1] ? V_ALIGNED : V_UNALIGNED), g, idx, name_of(r, val));
  if (!lane_gate) return;
  indent(r);
  sb_printf(&r->out, "else {");
  for (int l = 0; l < w; l++)
    sb_printf(&r->out, " if (%s[%d]) %s[%s+%d] = %s(%s[%d]);", name_of(r, u->src[3]), l, g, idx, l, conv, name_of(r, val), l);
  sb_printf(&r->out, " }\n");
}

/* PREFETCH(g, idx): a cache hint (host C only: a work-item device gets none, linearize.c). */
static void render_prefetch(renderer *r, uop *u) {
  if (r->fl->gpu) return;
  indent(r);
  sb_printf(&r->out, "__builtin_prefetch(%s + %s, 0, 2);\n", name_of(r, u->src[0]), name_of(r, u->src[1]));
}

/* ---------------------------------------------------------------- reductions */

static const char *reduce_identity(const renderer *r, uop *u, char *buf, size_t n) {
  tg_dtype dt = u->dtype;
  switch (u->arg[0]) {
    case OP_ADD: return "0";
    case OP_MUL: return "1";
    default: /* MAX */
      if (dtype_is_float(dt)) return "(-INFINITY)";
      if (dt == TG_INT64) return snprintf(buf, n, "(-9223372036854775807%s-1)", r->fl->i64_suffix), buf;
      if (dtype_is_unsigned(dt) || dt == TG_BOOL) return "0";
      snprintf(buf, n, "(%.0f)", dtype_table[dt].min);
      return buf;
  }
}

/* "a OP b" for a scalar accumulator. */
static void combine(strbuf *e, uop *u, const char *a, const char *b) {
  tg_dtype dt = u->dtype;
  if (u->arg[0] == OP_MAX && dtype_is_float(dt)) sb_printf(e, "((%s>%s||%s!=%s)?%s:%s)", a, b, a, a, a, b);
  else if (u->arg[0] == OP_MAX) sb_printf(e, "(%s>%s?%s:%s)", a, b, a, b);
  else sb_printf(e, "%s(%s %c %s)", round_fn(dt), a, u->arg[0] == OP_ADD ? '+' : '*', b);
}

static void render_acc_init(renderer *r, uop *u) {
  char buf[64];
  int w = u->vcount;
  const char *id = reduce_identity(r, u, buf, sizeof buf);
  indent(r);
  if (!w) { sb_printf(&r->out, "%s %s = %s;\n", ctype(u->dtype), name_of(r, u), id); return; }
  sb_printf(&r->out, "%s %s = {", vtype(r, u->dtype, w, V_VALUE), name_of(r, u));
  for (int l = 0; l < w; l++) sb_printf(&r->out, l ? ", %s" : "%s", id);
  sb_printf(&r->out, "};\n");
}

/* acc = acc OP body for each body (vector accumulators: reduce_vector_form). */
static void render_acc_update(renderer *r, uop *u) {
  if (ptrmap_has(&r->fused, u)) return; /* the WMMA added into it */
  int w = u->vcount;
  const char *acc = name_of(r, u);
  for (int i = 0; i < reduce_nbody(u); i++) {
    const char *body = name_of(r, u->src[i]);
    strbuf e = {0};
    indent(r);
    if (!w) {
      combine(&e, u, acc, body);
      sb_printf(&r->out, "%s = %s;\n", acc, e.s);
    } else if (u->arg[0] != OP_MAX) {
      sb_printf(&r->out, "%s = %s %c %s;\n", acc, acc, u->arg[0] == OP_ADD ? '+' : '*', body);
    } else {
      const char *vt = vtype(r, u->dtype, w, V_VALUE), *it = mask_type(r, u->dtype, w);
      sb_printf(&r->out, "{%s b_ = %s; %s m_ = (%s > b_) | (%s != %s); %s = (%s)((m_ & (%s)%s) | (~m_ & (%s)b_));}\n", vt,
                body, it, acc, acc, acc, acc, vt, it, acc, it);
    }
    sb_free(&e);
  }
}

/* On a GPU an output loop is not a loop: its index is a digit of the work-item's (the index of
 * u in r->gloop), -1 for loops that stay loops. */
static int gpu_loop(const renderer *r, uop *u) {
  for (int i = 0; i < r->ngloop; i++)
    if (r->gloop[i] == u) return i;
  return -1;
}

static bool is_output_loop(const lin_op *o) {
  return o->kind == L_LOOP && (o->u->arg[1] == RANGE_GLOBAL || o->u->arg[1] == RANGE_PARALLEL || o->u->arg[1] == RANGE_LOCAL);
}

/* The sizes of a program's output loops (their order in it), at most cap; -1 when there are
 * more or one is not a constant. */
static int output_loops(const lin_program *p, uop **loops, long long *sizes, int cap) {
  int n = 0;
  for (int i = 0; i < p->n; i++) {
    if (!is_output_loop(&p->ops[i])) continue;
    uop *size = p->ops[i].u->src[0];
    if (n == cap || size->op != OP_CONST) return -1;
    loops[n] = p->ops[i].u, sizes[n++] = (long long)uop_const_ivalue(size);
  }
  return n;
}

long long lin_work_items(const lin_program *p) {
  uop *loops[KS_MAX_AXES];
  long long sizes[KS_MAX_AXES], items = 1;
  int n = output_loops(p, loops, sizes, KS_MAX_AXES);
  for (int i = 0; i < n; i++) items *= sizes[i];
  return n < 0 ? -1 : items;
}

long long lin_local_size(const lin_program *p) {
  long long local = 0;
  for (int i = 0; i < p->n; i++)
    if (p->ops[i].kind == L_LOOP && p->ops[i].u->arg[1] == RANGE_LOCAL && p->ops[i].u->src[0]->op == OP_CONST)
      local = (local ? local : 1) * (long long)uop_const_ivalue(p->ops[i].u->src[0]);
  return local;
}

/* A REDUCE over a local range (a work-group combine, GPU flavors): every work-item stores its
 * partial into a local array at its index in the work-group, waits at a barrier, and combines
 * the partials of the work-items that differ from it only in the group digit, in order:
 *   tg_lds0[lid] = v; barrier; acc = id; for (k < G) acc = acc OP tg_lds0[lid + (k - g) * D]; barrier;
 * the second barrier keeps a combine inside a loop (several outputs per work-item) from having
 * its array stored again by a fast work-item while a slow one still reads it. Every work-item
 * combines (G reads each). Letting only group digit 0 combine (the others keep the identity)
 * gave wrong float16 mins on PoCL 3.1 (-0 for -4) before the second barrier existed, the
 * likely cause; it made sums over rows of 4096 412 -> 16 ms there: to try again.
 *
 * The combines that follow in the same block over the same group range, whose partials are
 * already computed (an UPCAST gives one per output element), share the array and the two
 * barriers: slot b of the batch at b * local. One pair of barriers per combine made an UPCAST
 * of 256 outputs with GROUPTOP 512 barriers, and PoCL's work-group compiler took minutes on
 * them (issue 14: test_opt's random sequences under TC_EMULATE=1 did not finish). */
enum { COMBINE_BATCH = 256 };

static int combine_batch(renderer *r, int at, uop **batch) {
  const lin_program *p = r->prog;
  uop *u = p->ops[at].u;
  int n = 0;
  batch[n++] = u;
  for (int j = at + 1; j < p->n && n < COMBINE_BATCH; j++) {
    const lin_op *o = &p->ops[j];
    if (o->kind == L_LOOP || o->kind == L_END) break; /* the same block only */
    uop *w = o->u;
    if (o->kind != L_VALUE || w->op != OP_REDUCE || w->nsrc != u->nsrc || w->src[1] != u->src[1] || w->dtype != u->dtype) continue;
    if (w->src[0]->op == OP_CONST || ptrmap_has(&r->seen, w->src[0])) batch[n++] = w; /* its partial is ready */
  }
  return n;
}

static void render_group_combine(renderer *r, uop *u, int at) {
  if (ptrmap_has(&r->combined, u)) return;
  uop *g = u->src[1], *batch[COMBINE_BATCH];
  int n = combine_batch(r, at, batch), digit = gpu_loop(r, g);
  const char *sm = r->fl->bool_mem;
  char id[64], arr[32], k[32], slot[160];
  tg_dtype dt = u->dtype;
  snprintf(arr, sizeof arr, "tg_lds%d", r->nshared);
  snprintf(k, sizeof k, "tg_k%d", r->nshared++);
  sb_printf(&r->shared, "  %s %s %s[%lld];\n", r->fl->shared, dt == TG_BOOL ? sm : ctype(dt), arr, r->local * n);
  snprintf(slot, sizeof slot, "tg_lid + (%s - %s) * %lld%s", k, name_of(r, g), digit >= 0 ? r->gdiv[digit] : 1, r->fl->i64_suffix);
  for (int b = 0; b < n; b++) {
    indent(r);
    sb_printf(&r->out, "%s[%lld + tg_lid] = %s;\n", arr, (long long)b * r->local, name_of(r, batch[b]->src[0]));
  }
  indent(r);
  sb_printf(&r->out, "%s\n", r->fl->barrier);
  for (int b = 0; b < n; b++) {
    const char *acc = name_of(r, batch[b]);
    indent(r);
    sb_printf(&r->out, "%s %s = %s;\n", ctype(dt), acc, reduce_identity(r, batch[b], id, sizeof id));
    indent(r);
    char item[256];
    snprintf(item, sizeof item, "((%s)%s[%lld + %s])", ctype(dt), arr, (long long)b * r->local, slot);
    strbuf e = {0};
    combine(&e, batch[b], acc, item);
    sb_printf(&r->out, "for (tg_i64 %s = 0; %s < %s; %s++) %s = %s;\n", k, k, name_of(r, g->src[0]), k, acc, e.s);
    sb_free(&e);
    if (b) ptrmap_put(&r->combined, batch[b], batch[b]);
  }
  indent(r); /* all have read before any work-item stores this array again (a combine in a loop) */
  sb_printf(&r->out, "%s\n", r->fl->barrier);
}

/* ---------------------------------------------------------------- tensor cores */

/* WMMA (codegen.h): this work-item's 4 elements of D = A B + C for its warp, as a float[4].
 * CUDA: mma.sync m16n8k16 on the fragments packed as .b32 pairs of 16-bit floats (the low half
 * the lower-numbered element; the values are exact 16-bit floats, so packing their bits back is
 * exact). OpenCL (TC_EMULATE=1): the warp's tiles meet in local memory, each element at the
 * position the PTX ISA gives it for the lane (tables below), then every work-item computes its
 * D elements from the whole tiles: a lowering that hands a lane the wrong elements gives wrong
 * numbers here too. */
static const int frag_a_row[WMMA_A] = {0, 0, 8, 8, 0, 0, 8, 8}; /* + groupID (lane / 4) */
static const int frag_a_col[WMMA_A] = {0, 1, 0, 1, 8, 9, 8, 9}; /* + 2 threadID_in_group (lane % 4) */
static const int frag_b_row[WMMA_B] = {0, 1, 8, 9};             /* + 2 threadID_in_group; column groupID */
static const int frag_c_row[WMMA_C] = {0, 0, 8, 8};             /* + groupID */
static const int frag_c_col[WMMA_C] = {0, 1, 0, 1};             /* + 2 threadID_in_group */

/* out[i]: where D element i goes; c[i]: C element i (the accumulators themselves when the WMMA
 * adds into them, lin_wmma_accs). */
static void render_mma(renderer *r, uop *u, char (*out)[64], char (*c)[64]) {
  const char *pack = u->arg[1] == TG_BFLOAT16 ? "tg_f2b" : "tg_f2h", *ty = u->arg[1] == TG_BFLOAT16 ? "bf16" : "f16";
  indent(r);
  sb_printf(&r->out, "{ unsigned tg_p[6];");
  for (int j = 0; j < 6; j++)
    sb_printf(&r->out, " tg_p[%d] = (unsigned)%s(%s) | (unsigned)%s(%s) << 16;", j, pack, name_of(r, u->src[2 * j]), pack,
              name_of(r, u->src[2 * j + 1]));
  sb_printf(&r->out, "\n");
  indent(r);
  sb_printf(&r->out, "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, "
                     "{%%8,%%9}, {%%10,%%11,%%12,%%13};\" : ", ty, ty);
  for (int j = 0; j < WMMA_C; j++) sb_printf(&r->out, "\"=f\"(%s)%s", out[j], j < 3 ? ", " : " : ");
  for (int j = 0; j < 6; j++) sb_printf(&r->out, "\"r\"(tg_p[%d]), ", j);
  for (int j = 0; j < WMMA_C; j++) sb_printf(&r->out, "\"f\"(%s)%s", c[j], j < 3 ? ", " : "); }\n");
}

static void render_mma_emulated(renderer *r, uop *u, char (*out)[64], char (*c)[64]) {
  int id = r->nshared++;
  long long warps = r->local / 32 > 0 ? r->local / 32 : 1;
  sb_printf(&r->shared, "  %s float tg_tca%d[%lld], tg_tcb%d[%lld], tg_tcc%d[%lld];\n", r->fl->shared, id, warps * 256, id, warps * 128,
            id, warps * 128);
  indent(r);
  sb_printf(&r->out, "{ tg_i64 tg_w = (tg_lid / 32) * 256, tg_g = tg_lid %% 32 / 4, tg_t = tg_lid %% 4;\n");
  for (int i = 0; i < WMMA_A; i++) {
    indent(r);
    sb_printf(&r->out, "  tg_tca%d[tg_w + (tg_g + %d) * 16 + 2 * tg_t + %d] = %s;\n", id, frag_a_row[i], frag_a_col[i], name_of(r, u->src[i]));
  }
  for (int i = 0; i < WMMA_B; i++) {
    indent(r);
    sb_printf(&r->out, "  tg_tcb%d[tg_w / 2 + (2 * tg_t + %d) * 8 + tg_g] = %s;\n", id, frag_b_row[i], name_of(r, u->src[WMMA_A + i]));
  }
  for (int i = 0; i < WMMA_C; i++) {
    indent(r);
    sb_printf(&r->out, "  tg_tcc%d[tg_w / 2 + (tg_g + %d) * 8 + 2 * tg_t + %d] = %s;\n", id, frag_c_row[i], frag_c_col[i], c[i]);
  }
  indent(r);
  sb_printf(&r->out, "  %s\n", r->fl->barrier);
  for (int i = 0; i < WMMA_C; i++) {
    indent(r);
    sb_printf(&r->out, "  float tg_s%d = tg_tcc%d[tg_w / 2 + (tg_g + %d) * 8 + 2 * tg_t + %d];", i, id, frag_c_row[i], frag_c_col[i]);
    sb_printf(&r->out, " for (int k = 0; k < 16; k++) tg_s%d += tg_tca%d[tg_w + (tg_g + %d) * 16 + k] * tg_tcb%d[tg_w / 2 + k * 8 + 2 * tg_t + %d];\n",
              i, id, frag_c_row[i], id, frag_c_col[i]);
  }
  indent(r); /* every lane has read the tiles before a next WMMA stores them again */
  sb_printf(&r->out, "  %s %s = tg_s0; %s = tg_s1; %s = tg_s2; %s = tg_s3; }\n", r->fl->barrier, out[0], out[1], out[2], out[3]);
}

/* D into a float[4] (GEP reads it), or straight into the accumulators that would add it. */
static void render_wmma(renderer *r, uop *u, int at) {
  const char *d = name_of(r, u);
  uop *acc[WMMA_C];
  bool fused = lin_wmma_accs(r->prog, at, acc) == 0;
  char out[WMMA_C][64], c[WMMA_C][64];
  for (int i = 0; i < WMMA_C; i++) {
    if (fused) ptrmap_put(&r->fused, acc[i], acc[i]);
    if (fused) snprintf(out[i], sizeof out[i], "%s", name_of(r, acc[i]));
    else snprintf(out[i], sizeof out[i], "%s[%d]", d, i);
    snprintf(c[i], sizeof c[i], "%s", name_of(r, fused ? acc[i] : u->src[WMMA_A + WMMA_B + i]));
  }
  indent(r);
  sb_printf(&r->out, "float %s[4];\n", d);
  if (r->fl->mma) render_mma(r, u, out, c);
  else render_mma_emulated(r, u, out, c);
  if (!fused) return;
  indent(r);
  sb_printf(&r->out, "%s[0] = %s; %s[1] = %s; %s[2] = %s; %s[3] = %s;\n", d, out[0], d, out[1], d, out[2], d, out[3]);
}

static void render_op(renderer *r, const lin_op *o) {
  uop *u = o->u;
  switch (o->kind) {
    case L_LOOP: {
      const char *v = name_of(r, u);
      indent(r);
      int g = gpu_loop(r, u);
      if (g >= 0) sb_printf(&r->out, "{ tg_i64 %s = tg_gid / %lld%s %% %s;\n", v, r->gdiv[g], r->fl->i64_suffix, name_of(r, u->src[0]));
      else if (u->arg[1] == RANGE_PARALLEL) sb_printf(&r->out, "for (tg_i64 %s = tg_start; %s < tg_end; %s++) {\n", v, v, v);
      else sb_printf(&r->out, "for (tg_i64 %s = 0; %s < %s; %s++) {\n", v, v, name_of(r, u->src[0]), v);
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
    case L_ACC_FINAL: break; /* the accumulator is the value */
    case L_STORE: u->op == OP_PREFETCH ? render_prefetch(r, u) : render_store(r, u); break;
    case L_VALUE:
      if (u->op == OP_REDUCE) render_group_combine(r, u, (int)(o - r->prog->ops));
      else render_value(r, u, (int)(o - r->prog->ops));
      break;
  }
}

/* ---------------------------------------------------------------- functions */

static bool render_function(renderer *r, const lin_program *p, const char *name, strbuf *dst) {
  uop *globals[66] = {0}, *scratch[ROW_SCRATCH_MAX] = {0};
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
      if (is_row_scratch(s) && s->arg[0] - ROW_SCRATCH_SLOT < ROW_SCRATCH_MAX) scratch[s->arg[0] - ROW_SCRATCH_SLOT] = s;
    }
  }
  r->out = (strbuf){0};
  r->shared = (strbuf){0};
  r->depth = 1;
  r->ngloop = 0;
  r->local = lin_local_size(p);
  r->prog = p;
  ptrmap_free(&r->fused);
  ptrmap_free(&r->seen);
  ptrmap_free(&r->combined);
  if (r->fl->gpu) { /* output loops become digits of the work-item index, the first slowest */
    r->ngloop = output_loops(p, r->gloop, r->gdiv, KS_MAX_AXES);
    if (r->ngloop < 0) return false;
    for (long long inner = 1, i = r->ngloop - 1; i >= 0; i--) {
      long long size = r->gdiv[i];
      r->gdiv[i] = inner, inner *= size;
    }
  }
  for (int i = 0; i < p->n; i++) {
    render_op(r, &p->ops[i]);
    ptrmap_put(&r->seen, p->ops[i].u, p->ops[i].u);
  }
  if (!r->fl->gpu) {
    sb_printf(dst, "void %s(void **args, long long tg_start, long long tg_end) {\n", name);
    sb_printf(dst, "  (void)tg_start, (void)tg_end;\n");
    for (int i = 0; i < nglob; i++) {
      if (!globals[i]) continue;
      const char *ct = mtype(r, globals[i]->dtype);
      sb_printf(dst, "  %s%s *restrict %s = (%s *)args[%d];\n", written[i] ? "" : "const ", ct, name_of(r, globals[i]), ct, i);
    }
    for (int k = 0; k < ROW_SCRATCH_MAX; k++) /* a row's kept values (linearize.c) */
      if (scratch[k])
        sb_printf(dst, "  %s %s[%lld] __attribute__((aligned(64)));\n", ctype(scratch[k]->dtype), name_of(r, scratch[k]),
                  (long long)scratch[k]->arg[1]);
  } else { /* every buffer up to the last one used is a parameter, in slot order */
    sb_printf(dst, "%s %s(tg_i64 tg_n", r->fl->kernel, name);
    for (int i = 0; i < nglob; i++) {
      const char *ct = globals[i] ? mtype(r, globals[i]->dtype) : "unsigned char";
      char unused[16];
      snprintf(unused, sizeof unused, "u%d", i);
      sb_printf(dst, ", %s%s%s *%s %s", r->fl->global, written[i] ? "" : "const ", ct, r->fl->restrict_,
                globals[i] ? name_of(r, globals[i]) : unused);
    }
    sb_printf(dst, ") {\n  tg_i64 tg_gid = %s;\n  if (tg_gid >= tg_n) return;\n", r->fl->gid);
    if (r->shared.s) sb_printf(dst, "  tg_i64 tg_lid = %s;\n%s", r->fl->lid, r->shared.s);
  }
  sb_printf(dst, "%s}\n", r->out.s ? r->out.s : "");
  sb_free(&r->out);
  sb_free(&r->shared);
  return true;
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

static char *render_flavor(const flavor *fl, const lin_program *progs, int n, const char *const *names) {
  renderer r = {.fl = fl};
  strbuf body = {0}, src = {0};
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    ok = render_function(&r, &progs[i], names[i], &body);
    for (size_t j = 0; j < r.names.cap; j++) /* names are per function */
      if (r.names.keys[j]) free(r.names.vals[j]);
    ptrmap_free(&r.names);
    ptrmap_free(&r.fused);
    ptrmap_free(&r.seen);
    ptrmap_free(&r.combined);
    r.nvars = 0;
  }
  sb_printf(&src, "%s%s%s", fl->prelude, HELPERS, r.uses_half ? HALF_HELPERS : "");
  render_typedefs(&r, &src);
  sb_printf(&src, "%s", body.s ? body.s : "");
  sb_free(&body);
  if (!ok) sb_free(&src), tg_set_error(TG_ERR_COMPILE, "render: an output loop of %s has no constant size", names[0]);
  return src.s;
}

char *render_c(const lin_program *progs, int n, const char *const *names) { return render_flavor(&flavor_c, progs, n, names); }
char *render_opencl(const lin_program *progs, int n, const char *const *names) {
  return render_flavor(&flavor_opencl, progs, n, names);
}
char *render_cuda(const lin_program *progs, int n, const char *const *names) { return render_flavor(&flavor_cuda, progs, n, names); }
