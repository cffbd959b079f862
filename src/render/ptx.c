/* ptx.c — render linear programs straight to PTX (CUDA_PTX=1, issue 14 item 2): the kernels
 * render_cuda writes as CUDA C (render/c.c), with the same signature and semantics, as NVIDIA's
 * virtual assembly, which the driver JIT-compiles (cuModuleLoadData) or ptxas assembles.
 *
 *   .visible .entry NAME(.param .u64 tg_n, .param .u64 b0, ...)
 *   work-item g = ctaid.x*ntid.x+tid.x; g >= tg_n returns; output loops are digits of g (the
 *   first slowest; local loops, the work-group's digits, innermost), reduce loops are loops,
 *   every value one virtual register. A work-group combine (a REDUCE over a local range)
 *   stores each work-item's partial in a .shared array at tid.x, waits at bar.sync 0, and
 *   reduces the partials of its group digit in order (as render_c's flavors do).
 *
 * Values live in registers by dtype (ptypes): bool in predicates, 8/16/32-bit integers in
 * 32-bit registers kept sign- or zero-extended from their width after every op (C's promote
 * and truncate), 64-bit integers in 64-bit ones, 16-bit floats in f32 registers rounded back to
 * their format after every op (as render_c does), f32 and f64 in their own. Buffers hold bools
 * as bytes and 16-bit floats as their bits. ALU ops expand rules from a table indexed by op and
 * type class (alu_rules); casts likewise (cast_rules). GPU programs carry no vector lanes: a
 * value with lanes is a render error.
 *
 * Precision: + - * / sqrt and reciprocals are IEEE (.rn). PTX has no f64 exp2/log2/sin and
 * only approximate f32 ones, so: f32 exp2 is ex2.approx (about 2 ulp, denormals kept); f64
 * exp2, log2 and sin are polynomials here (EXP2_F64, LOG2_F64, SIN_F64: range reduction, then
 * Taylor/atanh series and fdlibm's kernels); f32 log2, sin and pow are computed in f64 and
 * rounded (lg2.approx's absolute error would be large relative to log2(x) near 1, sin.approx's
 * near multiples of pi). Float pow is exp2(b*log2|a|) with C's signs and special cases; fmod
 * (C's float % and //) is fma(-trunc(a/b), b, a). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "uop/dtype.h"

/* ---------------------------------------------------------------- types */

typedef enum { RC_PRED, RC_B16, RC_B32, RC_B64, RC_F32, RC_F64, RC_COUNT } reg_class;
static const char *const rc_prefix[RC_COUNT] = {"%p", "%h", "%r", "%rd", "%f", "%fd"};
static const char *const rc_decl[RC_COUNT] = {"pred", "b16", "b32", "b64", "f32", "f64"};

/* Type classes: the columns of the rule tables. */
typedef enum { TC_PRED, TC_SINT, TC_UINT, TC_F32, TC_F64, TC_COUNT } type_class;

typedef struct ptx_type {
  reg_class rc;
  type_class tc;
  const char *t;      /* arithmetic type */
  const char *s;      /* signed type of the register's width (neg) */
  const char *w;      /* bits type of the register (mov, and/or/xor) */
  const char *mem;    /* ld/st type */
  const char *narrow; /* cvt type an 8/16-bit integer is kept to after every op, or NULL */
  const char *half;   /* cvt type of a 16-bit float, or NULL */
} ptx_type;

static const ptx_type ptypes[TG_DTYPE_COUNT] = {
    [TG_BOOL] = {RC_PRED, TC_PRED, "pred", "pred", "pred", "u8", NULL, NULL},
    [TG_INT8] = {RC_B32, TC_SINT, "s32", "s32", "b32", "s8", "s8", NULL},
    [TG_INT16] = {RC_B32, TC_SINT, "s32", "s32", "b32", "s16", "s16", NULL},
    [TG_INT32] = {RC_B32, TC_SINT, "s32", "s32", "b32", "s32", NULL, NULL},
    [TG_INT64] = {RC_B64, TC_SINT, "s64", "s64", "b64", "s64", NULL, NULL},
    [TG_UINT8] = {RC_B32, TC_UINT, "u32", "s32", "b32", "u8", "u8", NULL},
    [TG_UINT16] = {RC_B32, TC_UINT, "u32", "s32", "b32", "u16", "u16", NULL},
    [TG_UINT32] = {RC_B32, TC_UINT, "u32", "s32", "b32", "u32", NULL, NULL},
    [TG_UINT64] = {RC_B64, TC_UINT, "u64", "s64", "b64", "u64", NULL, NULL},
    [TG_FLOAT16] = {RC_F32, TC_F32, "f32", "f32", "b32", "b16", NULL, "f16"},
    [TG_BFLOAT16] = {RC_F32, TC_F32, "f32", "f32", "b32", "b16", NULL, "bf16"},
    [TG_FLOAT32] = {RC_F32, TC_F32, "f32", "f32", "b32", "f32", NULL, NULL},
    [TG_FLOAT64] = {RC_F64, TC_F64, "f64", "f64", "b64", "f64", NULL, NULL},
};

/* Immediates of a type class: zero, one, 0.5, NaN, the lowest value (MAX's identity). */
typedef struct tc_imm {
  const char *zero, *one, *half, *nan, *lowest;
} tc_imm;
static const tc_imm imms[TC_COUNT] = {
    [TC_PRED] = {"0", "1", NULL, NULL, "0"},
    [TC_SINT] = {"0", "1", NULL, NULL, NULL}, /* lowest: per dtype (dtype_table's min) */
    [TC_UINT] = {"0", "1", NULL, NULL, "0"},
    [TC_F32] = {"0f00000000", "0f3F800000", "0f3F000000", "0f7FFFFFFF", "0fFF800000"},
    [TC_F64] = {"0d0000000000000000", "0d3FF0000000000000", "0d3FE0000000000000", "0d7FFFFFFFFFFFFFFF", "0dFFF0000000000000"},
};

/* ---------------------------------------------------------------- rules
 * Instructions separated by newlines, with placeholders: $d the result, $a $b $c the sources,
 * $t the arithmetic type (of the sources for comparisons), $s its signed type, $w its bits type,
 * $0 $1 $h $n zero, one, 0.5 and NaN of that type, $k source b as a u32 register (shift
 * amounts), $x $y $z $v $u temporaries of the sources' register class, $p $q $o predicate
 * temporaries, $I $J b32 and $E $G b64 temporaries, $L0..$L9 labels. The result is written by
 * the last instruction only (an accumulator is both $d and $a). "=f64": computed in f64 and
 * rounded back (f32 log2, sin and pow, as accurate as f64's); "=pow": composed (alu_pow). */

#define VIA_F64 "=f64"
#define VIA_POW "=pow" /* exp2(b * log2|a|), then POW_FIX */
/* exp2: x clamped to [-1100, 1100] (beyond, 0 or inf), x = q + f with q = rint(x); 2^f by its
 * Taylor series (14 terms, |f| <= 1/2); 2^q applied as 2^(q>>1) * 2^(q-(q>>1)), both normal
 * numbers, so a denormal result rounds once; NaN passes through. */
#define EXP2_F64                                                                                      \
  "max.f64 $x, $a, 0dC091300000000000;\nmin.f64 $x, $x, 0d4091300000000000;\n"                       \
  "cvt.rni.f64.f64 $y, $x;\nsub.f64 $x, $x, $y;\nmov.f64 $v, 0d3D7816193166D0F7;\n"                  \
  "fma.rn.f64 $v, $v, $x, 0d3DBC3BD650FC2983;\nfma.rn.f64 $v, $v, $x, 0d3DFE8CAC7351BB22;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3E3E4CF5158B8EC7;\nfma.rn.f64 $v, $v, $x, 0d3E7B5253D395E7C1;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3EB62C0223A5C822;\nfma.rn.f64 $v, $v, $x, 0d3EEFFCBFC588B0C5;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3F2430912F86C786;\nfma.rn.f64 $v, $v, $x, 0d3F55D87FE78A6730;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3F83B2AB6FBA4E77;\nfma.rn.f64 $v, $v, $x, 0d3FAC6B08D704A0BF;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3FCEBFBDFF82C58E;\nfma.rn.f64 $v, $v, $x, 0d3FE62E42FEFA39EF;\n"         \
  "fma.rn.f64 $v, $v, $x, 0d3FF0000000000000;\ncvt.rzi.s32.f64 $I, $y;\nshr.s32 $J, $I, 1;\n"       \
  "sub.s32 $I, $I, $J;\nadd.s32 $J, $J, 1023;\ncvt.u64.u32 $E, $J;\nshl.b64 $E, $E, 52;\n"          \
  "mov.b64 $z, $E;\nmul.f64 $v, $v, $z;\nadd.s32 $I, $I, 1023;\ncvt.u64.u32 $E, $I;\n"              \
  "shl.b64 $E, $E, 52;\nmov.b64 $z, $E;\nmul.f64 $v, $v, $z;\nsetp.nan.f64 $p, $a, $a;\n"           \
  "selp.f64 $d, $a, $v, $p;"
/* log2: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) from the bits (denormals scaled by 2^64
 * first); log2(m) = 2 atanh(s) / ln 2 with s = (m-1)/(m+1), |s| < 0.172, 12 odd terms; then
 * log2(0) = -inf, log2(x < 0) = NaN, log2(inf) = inf, NaN passes through. */
#define LOG2_F64                                                                                      \
  "setp.lt.f64 $p, $a, 0d0010000000000000;\nmul.f64 $x, $a, 0d43F0000000000000;\n"                  \
  "selp.f64 $x, $x, $a, $p;\nmov.b64 $E, $x;\nshr.u64 $G, $E, 52;\ncvt.u32.u64 $I, $G;\n"           \
  "and.b32 $I, $I, 2047;\nsub.s32 $I, $I, 1023;\nand.b64 $E, $E, 0x000FFFFFFFFFFFFF;\n"               \
  "or.b64 $E, $E, 0x3FF0000000000000;\nmov.b64 $y, $E;\nsetp.gt.f64 $q, $y, 0d3FF6A09E667F3BCD;\n"  \
  "mul.f64 $z, $y, 0d3FE0000000000000;\nselp.f64 $y, $z, $y, $q;\nselp.s32 $J, 1, 0, $q;\n"         \
  "add.s32 $I, $I, $J;\nselp.s32 $J, 64, 0, $p;\nsub.s32 $I, $I, $J;\ncvt.rn.f64.s32 $z, $I;\n"      \
  "add.f64 $v, $y, 0d3FF0000000000000;\nsub.f64 $x, $y, 0d3FF0000000000000;\ndiv.rn.f64 $x, $x, $v;\n" \
  "mul.f64 $y, $x, $x;\nmov.f64 $v, 0d3FA642C8590B2164;\nfma.rn.f64 $v, $v, $y, 0d3FA8618618618618;\n" \
  "fma.rn.f64 $v, $v, $y, 0d3FAAF286BCA1AF28;\nfma.rn.f64 $v, $v, $y, 0d3FAE1E1E1E1E1E1E;\n"         \
  "fma.rn.f64 $v, $v, $y, 0d3FB1111111111111;\nfma.rn.f64 $v, $v, $y, 0d3FB3B13B13B13B14;\n"         \
  "fma.rn.f64 $v, $v, $y, 0d3FB745D1745D1746;\nfma.rn.f64 $v, $v, $y, 0d3FBC71C71C71C71C;\n"         \
  "fma.rn.f64 $v, $v, $y, 0d3FC2492492492492;\nfma.rn.f64 $v, $v, $y, 0d3FC999999999999A;\n"         \
  "fma.rn.f64 $v, $v, $y, 0d3FD5555555555555;\nfma.rn.f64 $v, $v, $y, 0d3FF0000000000000;\n"         \
  "mul.f64 $v, $v, $x;\nfma.rn.f64 $v, $v, 0d40071547652B82FE, $z;\n"                                \
  "setp.eq.f64 $p, $a, 0d0000000000000000;\nselp.f64 $v, 0dFFF0000000000000, $v, $p;\n"               \
  "setp.lt.f64 $p, $a, 0d0000000000000000;\nselp.f64 $v, 0d7FFFFFFFFFFFFFFF, $v, $p;\n"               \
  "setp.eq.f64 $p, $a, 0d7FF0000000000000;\nselp.f64 $v, $a, $v, $p;\n"                              \
  "setp.nan.f64 $p, $a, $a;\nselp.f64 $d, $a, $v, $p;"
/* sin: x = k pi/2 + r, k = rint(2x/pi), r by fdlibm's three-part pi/2 in fma steps (exact
 * enough below about 2^20 pi/2); fdlibm's sin and cos polynomials of r, picked and signed by
 * k mod 4; sin(±0) = ±0, inf and NaN give NaN. */
#define SIN_F64                                                                                       \
  "mul.f64 $y, $a, 0d3FE45F306DC9C883;\ncvt.rni.f64.f64 $y, $y;\n"                                   \
  "fma.rn.f64 $x, $y, 0dBFF921FB54400000, $a;\nfma.rn.f64 $x, $y, 0dBDD0B4611A600000, $x;\n"         \
  "fma.rn.f64 $x, $y, 0dBBA3198A2E000000, $x;\ncvt.rzi.s64.f64 $E, $y;\ncvt.u32.u64 $I, $E;\n"      \
  "mul.f64 $z, $x, $x;\nmov.f64 $v, 0d3DE5D93A5ACFD57C;\nfma.rn.f64 $v, $v, $z, 0dBE5AE5E68A2B9CEB;\n" \
  "fma.rn.f64 $v, $v, $z, 0d3EC71DE357B1FE7D;\nfma.rn.f64 $v, $v, $z, 0dBF2A01A019C161D5;\n"         \
  "fma.rn.f64 $v, $v, $z, 0d3F8111111110F8A6;\nfma.rn.f64 $v, $v, $z, 0dBFC5555555555549;\n"         \
  "mul.f64 $v, $v, $z;\nfma.rn.f64 $v, $v, $x, $x;\nmov.f64 $u, 0dBDA8FAE9BE8838D4;\n"              \
  "fma.rn.f64 $u, $u, $z, 0d3E21EE9EBDB4B1C4;\nfma.rn.f64 $u, $u, $z, 0dBE927E4F809C52AD;\n"         \
  "fma.rn.f64 $u, $u, $z, 0d3EFA01A019CB1590;\nfma.rn.f64 $u, $u, $z, 0dBF56C16C16C15177;\n"         \
  "fma.rn.f64 $u, $u, $z, 0d3FA555555555554C;\nmul.f64 $u, $u, $z;\nmul.f64 $u, $u, $z;\n"          \
  "fma.rn.f64 $u, $z, 0dBFE0000000000000, $u;\nadd.f64 $u, $u, 0d3FF0000000000000;\n"               \
  "and.b32 $J, $I, 1;\nsetp.ne.u32 $p, $J, 0;\nselp.f64 $v, $u, $v, $p;\nand.b32 $J, $I, 2;\n"      \
  "setp.ne.u32 $p, $J, 0;\nneg.f64 $u, $v;\nselp.f64 $v, $u, $v, $p;\n"                              \
  "setp.eq.f64 $p, $a, 0d0000000000000000;\nselp.f64 $d, $a, $v, $p;"
/* C's signed division: x/0 is 0, x/-1 is -x (no overflow trap) */
#define SDIV                                                                                  \
  "div.$t $x, $a, $b;\nneg.$t $y, $a;\nsetp.eq.$t $p, $b, -1;\nselp.$t $x, $y, $x, $p;\n"   \
  "setp.eq.$t $p, $b, 0;\nselp.$t $d, 0, $x, $p;"
#define UDIV "div.$t $x, $a, $b;\nsetp.eq.$t $p, $b, 0;\nselp.$t $d, 0, $x, $p;"
#define SREM                                                                                  \
  "rem.$t $x, $a, $b;\nsetp.eq.$t $p, $b, 0;\nsetp.eq.$t $q, $b, -1;\nor.pred $p, $p, $q;\n" \
  "selp.$t $d, 0, $x, $p;"
#define UREM "rem.$t $x, $a, $b;\nsetp.eq.$t $p, $b, 0;\nselp.$t $d, 0, $x, $p;"
/* fmod (C uses it for float % and //): a - trunc(a/b)*b, the product exact in the fma */
#define FMOD "div.rn.$t $x, $a, $b;\ncvt.rzi.$t.$t $x, $x;\nneg.$t $x, $x;\nfma.rn.$t $d, $x, $b, $a;"
/* C's max: a NaN a wins (a > b || a != a ? a : b) */
#define FMAX "setp.gt.$t $p, $a, $b;\nsetp.nan.$t $q, $a, $a;\nor.pred $p, $p, $q;\nselp.$t $d, $a, $b, $p;"
/* tg_ipow: square and multiply over the bits of b; b < 0 gives a==1 (and ±1 for a==-1) */
#define IPOW_LOOP                                                                             \
  "$L0:\nsetp.eq.$t $p, $z, 0;\n@$p bra $L2;\nand.$w $v, $z, 1;\nsetp.ne.$t $q, $v, 0;\n"    \
  "@$q mul.lo.$t $x, $x, $y;\nmul.lo.$t $y, $y, $y;\nshr.$t $z, $z, 1;\nbra.uni $L0;\n"
#define SPOW                                                                                  \
  "mov.$w $x, 1;\nmov.$w $y, $a;\nmov.$w $z, $b;\nsetp.lt.$t $p, $z, 0;\n@$p bra $L1;\n" IPOW_LOOP \
  "$L1:\nsetp.eq.$t $p, $a, -1;\nand.$w $v, $z, 1;\nsetp.ne.$t $q, $v, 0;\nand.pred $q, $q, $p;\n" \
  "selp.$t $x, -1, 1, $q;\nsetp.eq.$t $q, $a, 1;\nor.pred $p, $p, $q;\nselp.$t $x, $x, 0, $p;\n" \
  "$L2:\nmov.$w $d, $x;"
#define UPOW "mov.$w $x, 1;\nmov.$w $y, $a;\nmov.$w $z, $b;\n" IPOW_LOOP "$L2:\nmov.$w $d, $x;"
/* C's pow from c = |a|^b (exp2(b*log2|a|)): a negative a gives -c for an odd b, NaN for a
 * non-integer b; b == 0 or a == 1 gives 1 */
#define POW_FIX                                                                                 \
  "cvt.rzi.$t.$t $y, $b;\nsetp.neu.$t $p, $y, $b;\nmul.$t $z, $b, $h;\ncvt.rzi.$t.$t $v, $z;\n" \
  "setp.neu.$t $q, $v, $z;\nsetp.lt.$t $o, $a, $0;\nand.pred $q, $q, $o;\nneg.$t $y, $c;\n"    \
  "selp.$t $x, $y, $c, $q;\nand.pred $p, $p, $o;\nselp.$t $x, $n, $x, $p;\n"                  \
  "setp.eq.$t $p, $b, $0;\nsetp.eq.$t $q, $a, $1;\nor.pred $p, $p, $q;\nselp.$t $d, $1, $x, $p;"

/* [op][type class]: NULL where the op does not exist for that class. */
static const char *const alu_rules[OP_COUNT][TC_COUNT] = {
    [OP_NEG] = {"mov.pred $d, $a;", "neg.$s $d, $a;", "neg.$s $d, $a;", "neg.f32 $d, $a;", "neg.f64 $d, $a;"},
    [OP_EXP2] = {[TC_F32] = "ex2.approx.f32 $d, $a;", [TC_F64] = EXP2_F64},
    [OP_LOG2] = {[TC_F32] = VIA_F64, [TC_F64] = LOG2_F64},
    [OP_SIN] = {[TC_F32] = VIA_F64, [TC_F64] = SIN_F64},
    [OP_SQRT] = {[TC_F32] = "sqrt.rn.f32 $d, $a;", [TC_F64] = "sqrt.rn.f64 $d, $a;"},
    [OP_RECIP] = {[TC_F32] = "rcp.rn.f32 $d, $a;", [TC_F64] = "rcp.rn.f64 $d, $a;"},
    [OP_TRUNC] = {"mov.pred $d, $a;", "mov.$w $d, $a;", "mov.$w $d, $a;", "cvt.rzi.f32.f32 $d, $a;", "cvt.rzi.f64.f64 $d, $a;"},
    [OP_NOT] = {"not.pred $d, $a;", "not.$w $d, $a;", "not.$w $d, $a;"},
    [OP_ADD] = {"or.pred $d, $a, $b;", "add.$t $d, $a, $b;", "add.$t $d, $a, $b;", "add.f32 $d, $a, $b;", "add.f64 $d, $a, $b;"},
    [OP_SUB] = {"xor.pred $d, $a, $b;", "sub.$t $d, $a, $b;", "sub.$t $d, $a, $b;", "sub.f32 $d, $a, $b;", "sub.f64 $d, $a, $b;"},
    [OP_MUL] = {"and.pred $d, $a, $b;", "mul.lo.$t $d, $a, $b;", "mul.lo.$t $d, $a, $b;", "mul.f32 $d, $a, $b;", "mul.f64 $d, $a, $b;"},
    [OP_FDIV] = {[TC_F32] = "div.rn.f32 $d, $a, $b;", [TC_F64] = "div.rn.f64 $d, $a, $b;"},
    [OP_IDIV] = {NULL, SDIV, UDIV, FMOD, FMOD},
    [OP_MOD] = {NULL, SREM, UREM, FMOD, FMOD},
    [OP_MAX] = {"or.pred $d, $a, $b;", "max.$t $d, $a, $b;", "max.$t $d, $a, $b;", FMAX, FMAX},
    [OP_AND] = {"and.pred $d, $a, $b;", "and.$w $d, $a, $b;", "and.$w $d, $a, $b;"},
    [OP_OR] = {"or.pred $d, $a, $b;", "or.$w $d, $a, $b;", "or.$w $d, $a, $b;"},
    [OP_XOR] = {"xor.pred $d, $a, $b;", "xor.$w $d, $a, $b;", "xor.$w $d, $a, $b;"},
    [OP_SHL] = {NULL, "shl.$w $d, $a, $k;", "shl.$w $d, $a, $k;"},
    [OP_SHR] = {NULL, "shr.$t $d, $a, $k;", "shr.$t $d, $a, $k;"},
    [OP_POW] = {NULL, SPOW, UPOW, VIA_F64, VIA_POW},
    [OP_CMPLT] = {"not.pred $p, $a;\nand.pred $d, $p, $b;", "setp.lt.$t $d, $a, $b;", "setp.lt.$t $d, $a, $b;",
                  "setp.lt.f32 $d, $a, $b;", "setp.lt.f64 $d, $a, $b;"},
    [OP_CMPNE] = {"xor.pred $d, $a, $b;", "setp.ne.$t $d, $a, $b;", "setp.ne.$t $d, $a, $b;", "setp.neu.f32 $d, $a, $b;",
                  "setp.neu.f64 $d, $a, $b;"},
    [OP_CMPEQ] = {"xor.pred $p, $a, $b;\nnot.pred $d, $p;", "setp.eq.$t $d, $a, $b;", "setp.eq.$t $d, $a, $b;",
                  "setp.eq.f32 $d, $a, $b;", "setp.eq.f64 $d, $a, $b;"},
    [OP_WHERE] = {"and.pred $p, $a, $b;\nnot.pred $q, $a;\nand.pred $q, $q, $c;\nor.pred $d, $p, $q;", "selp.$t $d, $b, $c, $a;",
                  "selp.$t $d, $b, $c, $a;", "selp.f32 $d, $b, $c, $a;", "selp.f64 $d, $b, $c, $a;"},
};

/* Casts [from][to]; $t is the result's type, $S the source's. Integer to integer and float to
 * unsigned are cast_int's (they depend on the widths). */
static const char *const cast_rules[TC_COUNT][TC_COUNT] = {
    [TC_PRED] = {"mov.pred $d, $a;", "selp.$t $d, 1, 0, $a;", "selp.$t $d, 1, 0, $a;", "selp.f32 $d, 0f3F800000, 0f00000000, $a;",
                 "selp.f64 $d, 0d3FF0000000000000, 0d0000000000000000, $a;"},
    [TC_SINT] = {"setp.ne.$S $d, $a, 0;", NULL, NULL, "cvt.rn.f32.$S $d, $a;", "cvt.rn.f64.$S $d, $a;"},
    [TC_UINT] = {"setp.ne.$S $d, $a, 0;", NULL, NULL, "cvt.rn.f32.$S $d, $a;", "cvt.rn.f64.$S $d, $a;"},
    [TC_F32] = {"setp.neu.f32 $d, $a, 0f00000000;", "cvt.rzi.$t.f32 $d, $a;", NULL, "mov.f32 $d, $a;", "cvt.f64.f32 $d, $a;"},
    [TC_F64] = {"setp.neu.f64 $d, $a, 0d0000000000000000;", "cvt.rzi.$t.f64 $d, $a;", NULL, "cvt.rn.f32.f64 $d, $a;",
                "mov.f64 $d, $a;"},
};

/* ---------------------------------------------------------------- the renderer */

typedef struct ptx_r {
  strbuf body, consts;
  ptrmap regs;  /* uop → packed register + 1 */
  int nreg[RC_COUNT], nlabel;
  int base[66];  /* register of each buffer's address (packed), -1 if unused */
  int gid;       /* register of the work-item index */
  uop *gloop[KS_MAX_AXES];
  long long gdiv[KS_MAX_AXES];
  int ngloop;
  uop *loop[64]; /* open reduce loops */
  int loop_label[64], nloop;
  const char *kernel;
  int err;
  int lid;            /* register of tid.x (u64), for work-group combines */
  long long local;    /* work-items per work-group (0: no local loops) */
  strbuf shared;      /* the kernel's .shared arrays */
  int nshared;
  ptrmap fused;       /* REDUCEs a WMMA accumulates into directly (their adds are skipped) */
} ptx_r;

static int new_reg(ptx_r *r, reg_class rc) { return (int)rc << 24 | r->nreg[rc]++; }
static void reg_name(char *buf, size_t n, int packed) { snprintf(buf, n, "%s%d", rc_prefix[packed >> 24], packed & 0xffffff); }

static int fail(ptx_r *r, const char *what, const uop *u) {
  if (!r->err)
    r->err = tg_set_error(TG_ERR_COMPILE, "render_ptx: kernel %s: %s (%s of %s)", r->kernel, what, uop_ops[u->op].name,
                          dtype_table[u->dtype].name);
  return r->err;
}

static void line(ptx_r *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(ptx_r *r, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  sb_printf(&r->body, "\t%s\n", buf);
}

/* A constant as a PTX immediate of its register class. */
static void const_imm(const uop *u, char *buf, size_t n) {
  tg_dtype dt = u->dtype;
  const ptx_type *p = &ptypes[dt];
  if (p->rc == RC_F64) {
    double v = uop_const_value(u);
    uint64_t bits;
    memcpy(&bits, &v, 8);
    snprintf(buf, n, "0d%016llX", (unsigned long long)bits);
  } else if (p->rc == RC_F32) {
    float v = (float)uop_const_value(u);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    snprintf(buf, n, "0f%08X", bits);
  } else if (p->rc == RC_PRED) snprintf(buf, n, "%d", u->arg[0] != 0);
  else if (p->rc == RC_B64) snprintf(buf, n, "0x%016llX", (unsigned long long)u->arg[0]);
  else snprintf(buf, n, "0x%08X", (uint32_t)u->arg[0]);
}

/* The register holding u: constants are moved into one at the kernel's start, on first use. */
static int reg_of(ptx_r *r, uop *u) {
  uintptr_t v = (uintptr_t)ptrmap_get(&r->regs, u);
  if (v) return (int)(v - 1);
  if (u->op == OP_DEFINE_GLOBAL && u->arg[0] < 66 && r->base[u->arg[0]] >= 0) return r->base[u->arg[0]];
  if (u->op != OP_CONST) { fail(r, "a value used before it is defined", u); return 0; }
  int reg = new_reg(r, ptypes[u->dtype].rc);
  char name[16], imm[40];
  reg_name(name, sizeof name, reg), const_imm(u, imm, sizeof imm);
  sb_printf(&r->consts, "\tmov.%s %s, %s;\n", ptypes[u->dtype].w, name, imm);
  ptrmap_put(&r->regs, u, (void *)(uintptr_t)(reg + 1));
  return reg;
}

static void src_name(ptx_r *r, uop *u, char *buf, size_t n) { reg_name(buf, n, reg_of(r, u)); }

static int define(ptx_r *r, uop *u) {
  int reg = new_reg(r, ptypes[u->dtype].rc);
  ptrmap_put(&r->regs, u, (void *)(uintptr_t)(reg + 1));
  return reg;
}

/* What a rule's placeholders stand for in one expansion. */
typedef struct expansion {
  const char *d, *a, *b, *c, *k;
  const ptx_type *ty, *src_ty; /* the rule's type; the source's for casts ($S) */
  type_class tc;
  char temp[12][16]; /* TEMPS, filled on first use */
  int label0;
} expansion;

/* Temporaries: their letters and register classes (-1: the rule type's). */
static const char TEMPS[] = "xyzvupqoIJEG";
static const int temp_class[12] = {-1, -1, -1, -1, -1, RC_PRED, RC_PRED, RC_PRED, RC_B32, RC_B32, RC_B64, RC_B64};

static const char *temp(ptx_r *r, expansion *e, char which) {
  int i = (int)(strchr(TEMPS, which) - TEMPS);
  if (!e->temp[i][0]) reg_name(e->temp[i], sizeof e->temp[i], new_reg(r, temp_class[i] < 0 ? e->ty->rc : (reg_class)temp_class[i]));
  return e->temp[i];
}

/* The text for placeholder c, or NULL for an unknown one. */
static const char *placeholder(ptx_r *r, expansion *e, char c, char *lbl, size_t n) {
  const tc_imm *im = &imms[e->tc];
  switch (c) {
    case 'd': return e->d;
    case 'a': return e->a;
    case 'b': return e->b;
    case 'c': return e->c;
    case 'k': return e->k;
    case 't': return e->ty->t;
    case 's': return e->ty->s;
    case 'w': return e->ty->w;
    case 'S': return e->src_ty ? e->src_ty->t : e->ty->t;
    case '0': return im->zero;
    case '1': return im->one;
    case 'h': return im->half;
    case 'n': return im->nan;
    case 'L': return snprintf(lbl, n, "L%d_", e->label0), lbl; /* the digit follows */
    default: return c && strchr(TEMPS, c) ? temp(r, e, c) : NULL;
  }
}

/* Append a rule's instructions with its placeholders filled in. */
static void expand(ptx_r *r, const char *rule, expansion *e) {
  e->label0 = r->nlabel++;
  strbuf out = {0};
  sb_printf(&out, "\t");
  for (const char *s = rule; *s; s++) {
    char lbl[24];
    if (*s == '\n') { sb_printf(&out, "\n\t"); continue; }
    if (*s != '$') { sb_printf(&out, "%c", *s); continue; }
    const char *v = placeholder(r, e, *++s, lbl, sizeof lbl);
    if (!v) { sb_printf(&out, "$%c", *s); continue; } /* ptxas will say */
    sb_printf(&out, "%s", v);
  }
  sb_printf(&r->body, "%s\n", out.s);
  sb_free(&out);
}

/* Keep a result in its dtype: 8/16-bit integers re-extended from their width, 16-bit floats
 * rounded to their format (round to nearest even) and back. */
static void normalize(ptx_r *r, tg_dtype dt, const char *d) {
  const ptx_type *p = &ptypes[dt];
  if (p->narrow) line(r, "cvt.%s.%s %s, %s;", p->t, p->narrow, d, d);
  if (!p->half) return;
  char h[16], b[16];
  reg_name(h, sizeof h, new_reg(r, RC_B16));
  line(r, "cvt.rn.%s.f32 %s, %s;", p->half, h, d);
  if (dt == TG_FLOAT16) { line(r, "cvt.f32.f16 %s, %s;", d, h); return; }
  reg_name(b, sizeof b, new_reg(r, RC_B32)); /* bfloat16: the high half of an f32 */
  line(r, "cvt.u32.u16 %s, %s;", b, h);
  line(r, "shl.b32 %s, %s, 16;", b, b);
  line(r, "mov.b32 %s, %s;", d, b);
}

static void alu(ptx_r *r, uop *u, uop_op op, tg_dtype sdt, const char *d, const char *const *o, const char *k);

/* Float pow: c = exp2(b * log2|a|), then C's signs and special cases (POW_FIX). */
static void alu_pow(ptx_r *r, uop *u, tg_dtype sdt, const char *d, const char *const *o) {
  const ptx_type *ty = &ptypes[sdt];
  char t[3][16];
  for (int i = 0; i < 3; i++) reg_name(t[i], sizeof t[i], new_reg(r, ty->rc));
  line(r, "abs.%s %s, %s;", ty->t, t[0], o[0]);
  alu(r, u, OP_LOG2, sdt, t[1], (const char *const[]){t[0], "", ""}, "");
  line(r, "mul.%s %s, %s, %s;", ty->t, t[1], t[1], o[1]);
  alu(r, u, OP_EXP2, sdt, t[2], (const char *const[]){t[1], "", ""}, "");
  expansion e = {.d = d, .a = o[0], .b = o[1], .c = t[2], .ty = ty, .tc = ty->tc};
  expand(r, POW_FIX, &e);
}

/* An ALU op into register d from the sources' registers (operand names). */
static void alu(ptx_r *r, uop *u, uop_op op, tg_dtype sdt, const char *d, const char *const *o, const char *k) {
  const ptx_type *ty = &ptypes[sdt];
  const char *rule = alu_rules[op][ty->tc];
  if (!rule) { fail(r, "no PTX rule for this op and type", u); return; }
  if (!strcmp(rule, VIA_F64)) { /* f32 through f64 */
    char fo[3][16] = {{0}}, fd[16];
    const char *fp[3] = {fo[0], fo[1], fo[2]};
    for (int i = 0; i < 3 && o[i][0]; i++) {
      reg_name(fo[i], sizeof fo[i], new_reg(r, RC_F64));
      line(r, "cvt.f64.f32 %s, %s;", fo[i], o[i]);
    }
    reg_name(fd, sizeof fd, new_reg(r, RC_F64));
    alu(r, u, op, TG_FLOAT64, fd, fp, k);
    line(r, "cvt.rn.f32.f64 %s, %s;", d, fd);
    return;
  }
  if (!strcmp(rule, VIA_POW)) { alu_pow(r, u, sdt, d, o); return; }
  expansion e = {.d = d, .a = o[0], .b = o[1], .c = o[2], .k = k, .ty = ty, .tc = ty->tc};
  expand(r, rule, &e);
}

/* ---------------------------------------------------------------- values */

static void render_cast(ptx_r *r, uop *u, const char *d, const char *a) {
  tg_dtype from = u->src[0]->dtype, to = u->dtype;
  const ptx_type *f = &ptypes[from], *t = &ptypes[to];
  bool fint = f->tc == TC_SINT || f->tc == TC_UINT, tint = t->tc == TC_SINT || t->tc == TC_UINT;
  if (fint && tint) { /* widths: extend by the source's signedness, truncate */
    if (f->rc == t->rc) line(r, "mov.%s %s, %s;", t->w, d, a);
    else if (t->rc == RC_B64) line(r, "cvt.%s64.%s %s, %s;", f->tc == TC_SINT ? "s" : "u", f->t, d, a);
    else line(r, "cvt.u32.u64 %s, %s;", d, a);
    return;
  }
  if ((f->tc == TC_F32 || f->tc == TC_F64) && t->tc == TC_UINT) {
    if (t->rc == RC_B64) { line(r, "cvt.rzi.u64.%s %s, %s;", f->t, d, a); return; }
    char w[16]; /* narrower: through int64 and truncated, as x86's conversions do */
    reg_name(w, sizeof w, new_reg(r, RC_B64));
    line(r, "cvt.rzi.s64.%s %s, %s;", f->t, w, a);
    line(r, "cvt.u32.u64 %s, %s;", d, w);
    return;
  }
  expansion e = {.d = d, .a = a, .ty = t, .src_ty = f, .tc = t->tc};
  expand(r, cast_rules[f->tc][t->tc], &e);
}

/* The raw bits of a value of dt (16-bit floats: a b16 register) into bits; its class. */
static reg_class bits_of(ptx_r *r, tg_dtype dt, const char *v, char *bits, size_t n) {
  const ptx_type *p = &ptypes[dt];
  if (p->half) {
    reg_name(bits, n, new_reg(r, RC_B16));
    line(r, "cvt.rn.%s.f32 %s, %s;", p->half, bits, v);
    return RC_B16;
  }
  snprintf(bits, n, "%s", v);
  return p->rc == RC_F32 ? RC_B32 : p->rc == RC_F64 ? RC_B64 : p->rc;
}

static void render_bitcast(ptx_r *r, uop *u, const char *d, const char *a) {
  tg_dtype to = u->dtype;
  const ptx_type *t = &ptypes[to];
  char bits[16], h[16];
  if (tg_dtype_size(to) != tg_dtype_size(u->src[0]->dtype)) { fail(r, "no PTX bitcast between these sizes", u); return; }
  if (u->src[0]->dtype == TG_BOOL) { line(r, "selp.u32 %s, 1, 0, %s;", d, a); return; } /* its byte: 0 or 1 */
  if (to == TG_BOOL) { /* a byte as a bool: nonzero is true */
    reg_name(bits, sizeof bits, new_reg(r, RC_B32));
    line(r, "and.b32 %s, %s, 255;", bits, a);
    line(r, "setp.ne.u32 %s, %s, 0;", d, bits);
    return;
  }
  reg_class rc = bits_of(r, u->src[0]->dtype, a, bits, sizeof bits);
  if (rc == RC_PRED || t->rc == RC_PRED) {
    fail(r, "no PTX bitcast between these types", u);
    return;
  }
  if (t->half) { /* 16 bits into a 16-bit float: via a b16 register, then widened */
    if (rc == RC_B16) snprintf(h, sizeof h, "%s", bits);
    else reg_name(h, sizeof h, new_reg(r, RC_B16)), line(r, "cvt.u16.u32 %s, %s;", h, bits);
    if (to == TG_FLOAT16) { line(r, "cvt.f32.f16 %s, %s;", d, h); return; }
    char w[16];
    reg_name(w, sizeof w, new_reg(r, RC_B32));
    line(r, "cvt.u32.u16 %s, %s;", w, h);
    line(r, "shl.b32 %s, %s, 16;", w, w);
    line(r, "mov.b32 %s, %s;", d, w);
    return;
  }
  if (rc == RC_B16) line(r, "cvt.u32.u16 %s, %s;", d, bits); /* narrowed below */
  else line(r, "mov.%s %s, %s;", rc == RC_B64 ? "b64" : "b32", d, bits);
}

/* The address of element idx of buffer buf, in a new register. */
static void address(ptx_r *r, uop *buf, uop *idx, char *addr, size_t n) {
  char base[16], i[16];
  src_name(r, buf, base, sizeof base), src_name(r, idx, i, sizeof i);
  reg_name(addr, n, new_reg(r, RC_B64));
  if (ptypes[idx->dtype].rc != RC_B64) { fail(r, "an index that is not 64-bit", idx); return; }
  line(r, "mad.lo.s64 %s, %s, %d, %s;", addr, i, (int)tg_dtype_size(buf->dtype), base);
}

static bool written_slot(const lin_program *p, int64_t slot);

static void render_load(ptx_r *r, uop *u, const char *d, bool nc) {
  const ptx_type *p = &ptypes[u->dtype];
  char addr[16], m[16] = "", raw[16];
  address(r, u->src[0], u->src[1], addr, sizeof addr);
  if (u->nsrc > 2) src_name(r, u->src[2], m, sizeof m);
  const char *ld = nc ? "ld.global.nc" : "ld.global";
  reg_class rc = u->dtype == TG_BOOL ? RC_B32 : p->half ? RC_B16 : p->rc;
  if (rc == p->rc) snprintf(raw, sizeof raw, "%s", d);
  else reg_name(raw, sizeof raw, new_reg(r, rc));
  if (*m) line(r, "mov.%s %s, %s;", rc_decl[rc], raw, rc == RC_F32 ? "0f00000000" : rc == RC_F64 ? "0d0000000000000000" : "0");
  line(r, "%s%s%s%s.%s %s, [%s];", *m ? "@" : "", m, *m ? " " : "", ld, p->mem, raw, addr);
  if (u->dtype == TG_BOOL) line(r, "setp.ne.u32 %s, %s, 0;", d, raw);
  else if (u->dtype == TG_FLOAT16) line(r, "cvt.f32.f16 %s, %s;", d, raw);
  else if (u->dtype == TG_BFLOAT16) {
    char w[16];
    reg_name(w, sizeof w, new_reg(r, RC_B32));
    line(r, "cvt.u32.u16 %s, %s;", w, raw);
    line(r, "shl.b32 %s, %s, 16;", w, w);
    line(r, "mov.b32 %s, %s;", d, w);
  }
}

static void render_store(ptx_r *r, uop *u) {
  uop *val = u->src[2];
  const ptx_type *p = &ptypes[val->dtype];
  char addr[16], v[16], g[16] = "", raw[16];
  address(r, u->src[0], u->src[1], addr, sizeof addr);
  src_name(r, val, v, sizeof v);
  if (u->nsrc > 3) src_name(r, u->src[3], g, sizeof g);
  snprintf(raw, sizeof raw, "%s", v);
  if (val->dtype == TG_BOOL) reg_name(raw, sizeof raw, new_reg(r, RC_B32)), line(r, "selp.u32 %s, 1, 0, %s;", raw, v);
  else if (p->half) reg_name(raw, sizeof raw, new_reg(r, RC_B16)), line(r, "cvt.rn.%s.f32 %s, %s;", p->half, raw, v);
  line(r, "%s%s%sst.global.%s [%s], %s;", *g ? "@" : "", g, *g ? " " : "", p->mem, addr, raw);
}

/* ---------------------------------------------------------------- tensor cores */

/* WMMA (codegen.h): D in 4 consecutive f32 registers (the node's register is the first) from
 * mma.sync m16n8k16 on the A and B fragments, each pair of 16-bit floats (held as f32, exact)
 * rounded back to its format and packed into a .b32, the lower-numbered element in the low
 * half (the PTX ISA's "low to high"). GEP(wmma, i) reads register i. When the accumulators
 * that add D can take it directly (lin_wmma_accs), C and D are their registers and their adds
 * are skipped. */
static void render_wmma(ptx_r *r, const lin_program *prog, uop *u) {
  const char *ty = u->arg[1] == TG_BFLOAT16 ? "bf16" : "f16";
  char p[6][16], h[2][16], d[4][16], c[4][16];
  const char *o[4]; /* D's registers: the accumulators when fused */
  uop *acc[WMMA_C];
  int at = 0;
  while (at < prog->n && prog->ops[at].u != u) at++;
  bool fused = at < prog->n && lin_wmma_accs(prog, at, acc) == 0; /* C = D = the accumulators */
  for (int j = 0; j < 6; j++) {
    reg_name(p[j], sizeof p[j], new_reg(r, RC_B32));
    for (int k = 0; k < 2; k++) {
      char v[16];
      reg_name(h[k], sizeof h[k], new_reg(r, RC_B16)), src_name(r, u->src[2 * j + k], v, sizeof v);
      line(r, "cvt.rn.%s.f32 %s, %s;", ty, h[k], v);
    }
    line(r, "mov.b32 %s, {%s, %s};", p[j], h[0], h[1]);
  }
  for (int i = 0; i < WMMA_C; i++) src_name(r, fused ? acc[i] : u->src[WMMA_A + WMMA_B + i], c[i], sizeof c[i]);
  int first = define(r, u);
  reg_name(d[0], sizeof d[0], first);
  for (int i = 1; i < 4; i++) reg_name(d[i], sizeof d[i], new_reg(r, RC_F32));
  for (int i = 0; i < 4; i++) {
    o[i] = fused ? c[i] : d[i];
    if (fused) ptrmap_put(&r->fused, acc[i], acc[i]);
  }
  line(r, "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s};", ty, ty, o[0],
       o[1], o[2], o[3], p[0], p[1], p[2], p[3], p[4], p[5], c[0], c[1], c[2], c[3]);
  for (int i = 0; fused && i < 4; i++) line(r, "mov.f32 %s, %s;", d[i], c[i]); /* what GEP reads */
}

static void render_gep(ptx_r *r, uop *u) {
  uop *w = u->src[0];
  if (w->op != OP_WMMA || u->arg[0] < 0 || u->arg[0] > 3) { fail(r, "a vector lane (PTX kernels are scalar)", u); return; }
  char d[16], s[16];
  reg_name(s, sizeof s, reg_of(r, w) + (int)u->arg[0]);
  reg_name(d, sizeof d, define(r, u));
  line(r, "mov.f32 %s, %s;", d, s);
}

static void render_value(ptx_r *r, const lin_program *prog, uop *u) {
  if (u->op == OP_WMMA) { render_wmma(r, prog, u); return; }
  if (u->op == OP_GEP) { render_gep(r, u); return; }
  if (u->op == OP_LOAD) {
    char d[16];
    reg_name(d, sizeof d, define(r, u));
    render_load(r, u, d, !written_slot(prog, u->src[0]->arg[0]));
    return;
  }
  if (!uop_is_alu(u)) { fail(r, "no PTX rule for this op", u); return; }
  char o[3][16] = {{0}}, d[16], k[16] = "";
  const char *op[3] = {o[0], o[1], o[2]};
  for (int i = 0; i < u->nsrc && i < 3; i++) src_name(r, u->src[i], o[i], sizeof o[i]);
  if ((u->op == OP_SHL || u->op == OP_SHR) && u->nsrc > 1) { /* the amount is a u32 register */
    if (ptypes[u->src[1]->dtype].rc == RC_B64) reg_name(k, sizeof k, new_reg(r, RC_B32)), line(r, "cvt.u32.u64 %s, %s;", k, o[1]);
    else snprintf(k, sizeof k, "%s", o[1]);
  }
  reg_name(d, sizeof d, define(r, u));
  if (u->op == OP_CAST) render_cast(r, u, d, o[0]);
  else if (u->op == OP_BITCAST) render_bitcast(r, u, d, o[0]);
  else {
    int first = u->op == OP_WHERE ? 1 : 0;
    for (int i = first + 1; i < u->nsrc; i++)
      if (ptypes[u->src[i]->dtype].rc != ptypes[u->src[first]->dtype].rc && u->op != OP_SHL && u->op != OP_SHR)
        fail(r, "sources of different register classes", u);
    alu(r, u, (uop_op)u->op, u->src[first]->dtype, d, op, k);
  }
  if (u->dtype != TG_BOOL) normalize(r, u->dtype, d);
}

/* ---------------------------------------------------------------- reductions */

static void render_acc_init(ptx_r *r, uop *u) {
  const ptx_type *p = &ptypes[u->dtype];
  char d[16], lowest[40];
  reg_name(d, sizeof d, define(r, u));
  const char *id = u->arg[0] == OP_ADD ? imms[p->tc].zero : u->arg[0] == OP_MUL ? imms[p->tc].one : imms[p->tc].lowest;
  if (!id) { /* a signed integer's lowest value, sign-extended to its register */
    int64_t lo = (int64_t)dtype_table[u->dtype].min;
    if (p->rc == RC_B64) snprintf(lowest, sizeof lowest, "0x%016llX", (unsigned long long)lo);
    else snprintf(lowest, sizeof lowest, "0x%08X", (uint32_t)lo);
    id = lowest;
  }
  line(r, "mov.%s %s, %s;", p->w, d, id);
}

static void render_acc_update(ptx_r *r, uop *u) {
  char acc[16], b[16];
  if (ptrmap_has(&r->fused, u)) return; /* the WMMA added into it */
  src_name(r, u, acc, sizeof acc);
  for (int i = 0; i < reduce_nbody(u); i++) {
    if (u->src[i]->dtype != u->dtype) { fail(r, "a reduction body of another dtype", u); return; }
    src_name(r, u->src[i], b, sizeof b);
    const char *o[3] = {acc, b, ""};
    alu(r, u, (uop_op)u->arg[0], u->dtype, acc, o, "");
    normalize(r, u->dtype, acc);
  }
}

/* ---------------------------------------------------------------- work-group combines */

static int gpu_loop(const ptx_r *r, uop *u);

/* How a register class is kept in a .shared array: predicates as bytes. */
static const char *const rc_shared[RC_COUNT] = {"u8", "b16", "b32", "b64", "f32", "f64"};
static const int rc_bytes[RC_COUNT] = {1, 2, 4, 8, 4, 8};

/* The partial into tg_ldsN[tid.x], bar.sync 0, then acc = id; for k < G: acc OP= the partial
 * of the work-item whose group digit is k (address base + (tid + (k - g) * D) * bytes), then
 * bar.sync 0 again (c.c's render_group_combine says why). */
static void render_group_combine(ptx_r *r, uop *u) {
  uop *g = u->src[1];
  reg_class rc = ptypes[u->dtype].rc;
  int id = r->nshared++, bytes = rc_bytes[rc], digit = gpu_loop(r, g), label = r->nlabel++;
  long long div = digit >= 0 ? r->gdiv[digit] : 1, size = (long long)uop_const_ivalue(g->src[0]);
  char base[16], addr[16], v[16], raw[16], lid[16], gv[16], k[16], pr[16], acc[16];
  sb_printf(&r->shared, "\t.shared .align 8 .b8 tg_lds%d[%lld];\n", id, r->local * bytes);
  reg_name(lid, sizeof lid, r->lid), src_name(r, g, gv, sizeof gv), src_name(r, u->src[0], v, sizeof v);
  reg_name(base, sizeof base, new_reg(r, RC_B64)), reg_name(addr, sizeof addr, new_reg(r, RC_B64));
  line(r, "mov.u64 %s, tg_lds%d;", base, id);
  line(r, "mad.lo.s64 %s, %s, %d, %s;", addr, lid, bytes, base);
  if (rc == RC_PRED) reg_name(raw, sizeof raw, new_reg(r, RC_B32)), line(r, "selp.u32 %s, 1, 0, %s;", raw, v);
  else snprintf(raw, sizeof raw, "%s", v);
  line(r, "st.shared.%s [%s], %s;", rc_shared[rc], addr, raw);
  line(r, "bar.sync 0;");
  render_acc_init(r, u);
  src_name(r, u, acc, sizeof acc);
  reg_name(k, sizeof k, new_reg(r, RC_B64)), reg_name(pr, sizeof pr, new_reg(r, RC_PRED));
  line(r, "mov.u64 %s, 0;", k);
  sb_printf(&r->body, "B%d:\n", label);
  line(r, "sub.s64 %s, %s, %s;", addr, k, gv);
  line(r, "mad.lo.s64 %s, %s, %lld, %s;", addr, addr, div, lid);
  line(r, "mad.lo.s64 %s, %s, %d, %s;", addr, addr, bytes, base);
  char x[16];
  reg_name(x, sizeof x, new_reg(r, rc == RC_PRED ? RC_B32 : rc));
  line(r, "ld.shared.%s %s, [%s];", rc_shared[rc], x, addr);
  if (rc == RC_PRED) { /* back to a predicate */
    reg_name(raw, sizeof raw, new_reg(r, RC_PRED));
    line(r, "setp.ne.u32 %s, %s, 0;", raw, x);
    snprintf(x, sizeof x, "%s", raw);
  }
  const char *o[3] = {acc, x, ""};
  alu(r, u, (uop_op)u->arg[0], u->dtype, acc, o, "");
  normalize(r, u->dtype, acc);
  line(r, "add.s64 %s, %s, 1;", k, k);
  line(r, "setp.lt.s64 %s, %s, %lld;", pr, k, size);
  line(r, "@%s bra B%d;", pr, label);
  line(r, "bar.sync 0;"); /* all have read before the array is stored again (a combine in a loop) */
}

/* ---------------------------------------------------------------- loops */

static int gpu_loop(const ptx_r *r, uop *u) {
  for (int i = 0; i < r->ngloop; i++)
    if (r->gloop[i] == u) return i;
  return -1;
}

/* An output loop is a digit of the work-item index; a reduce loop is a loop (its body may run
 * zero times when the size is not a positive constant). */
static void render_loop(ptx_r *r, uop *u) {
  char v[16], g[16], size[16], t[16], p[16];
  int reg = define(r, u), gl = gpu_loop(r, u);
  reg_name(v, sizeof v, reg), reg_name(g, sizeof g, r->gid), src_name(r, u->src[0], size, sizeof size);
  if (gl >= 0) {
    if (r->gdiv[gl] == 1) snprintf(t, sizeof t, "%s", g);
    else reg_name(t, sizeof t, new_reg(r, RC_B64)), line(r, "div.u64 %s, %s, %lld;", t, g, r->gdiv[gl]);
    line(r, "rem.u64 %s, %s, %s;", v, t, size);
    return;
  }
  if (r->nloop == 64) { fail(r, "more than 64 nested loops", u); return; }
  int label = r->nlabel++;
  r->loop[r->nloop] = u, r->loop_label[r->nloop++] = label;
  line(r, "mov.u64 %s, 0;", v);
  if (u->src[0]->op != OP_CONST || uop_const_ivalue(u->src[0]) <= 0) {
    reg_name(p, sizeof p, new_reg(r, RC_PRED));
    line(r, "setp.le.s64 %s, %s, 0;", p, size);
    line(r, "@%s bra E%d;", p, label);
  }
  sb_printf(&r->body, "B%d:\n", label);
}

static void render_end(ptx_r *r, uop *u) {
  if (gpu_loop(r, u) >= 0) return;
  if (!r->nloop || r->loop[r->nloop - 1] != u) { fail(r, "unbalanced loops", u); return; }
  int label = r->loop_label[--r->nloop];
  char v[16], size[16], p[16];
  src_name(r, u, v, sizeof v), src_name(r, u->src[0], size, sizeof size);
  reg_name(p, sizeof p, new_reg(r, RC_PRED));
  line(r, "add.s64 %s, %s, 1;", v, v);
  line(r, "setp.lt.s64 %s, %s, %s;", p, v, size);
  line(r, "@%s bra B%d;", p, label);
  sb_printf(&r->body, "E%d:\n", label);
}

/* ---------------------------------------------------------------- kernels */

static bool written_slot(const lin_program *p, int64_t slot) {
  for (int i = 0; i < p->n; i++)
    if (p->ops[i].u->op == OP_STORE && p->ops[i].u->src[0]->arg[0] == slot) return true;
  return false;
}

/* GPU programs have no vector lanes (the optimizer makes scalar code for work-item devices, and
 * devectorize splits what is left: the GPU renderers have no vector forms): a vector value
 * (vcount), a lane range among the sources, or a vector load or store (arg[0] lanes) is an
 * error. Vector ops (VECTORIZE, GEP) have no rule and fail in render_value. */
static void check_scalar(ptx_r *r, const lin_op *o) {
  uop *u = o->u;
  if (u->vcount > 1 && u->op != OP_WMMA) fail(r, "a vector value (PTX kernels are scalar)", u);
  if ((u->op == OP_LOAD || u->op == OP_STORE) && u->narg && u->arg[0] > 1) fail(r, "a vector memory access (PTX kernels are scalar)", u);
  for (int i = 0; i < u->nsrc; i++)
    if (u->src[i]->op == OP_RANGE && u->src[i]->arg[1] == RANGE_LANE) fail(r, "a value with vector lanes (PTX kernels are scalar)", u);
}

static void render_op(ptx_r *r, const lin_program *p, const lin_op *o) {
  check_scalar(r, o);
  switch (o->kind) {
    case L_LOOP: render_loop(r, o->u); break;
    case L_END: render_end(r, o->u); break;
    case L_ACC_INIT: render_acc_init(r, o->u); break;
    case L_ACC_UPDATE: render_acc_update(r, o->u); break;
    case L_ACC_FINAL: break; /* scalar: the accumulator is the value */
    case L_STORE: if (o->u->op != OP_PREFETCH) render_store(r, o->u); break; /* a cache hint: none here */
    case L_VALUE:
      if (o->u->op == OP_REDUCE) render_group_combine(r, o->u);
      else render_value(r, p, o->u);
      break;
  }
}

/* The highest buffer slot the program uses + 1, and each used slot's DEFINE_GLOBAL. */
static int used_slots(const lin_program *p, uop **globals) {
  int n = 0;
  for (int i = 0; i < p->n; i++)
    for (int j = 0; j < p->ops[i].u->nsrc; j++) {
      uop *s = p->ops[i].u->src[j];
      if (s->op != OP_DEFINE_GLOBAL || s->arg[0] >= 66) continue;
      globals[s->arg[0]] = s;
      if (s->arg[0] + 1 > n) n = (int)s->arg[0] + 1;
    }
  return n;
}

/* The output loops (their order in the program) and each one's divisor of the work-item index. */
static int output_loops(ptx_r *r, const lin_program *p) {
  r->ngloop = 0;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i].u;
    if (p->ops[i].kind != L_LOOP || (u->arg[1] != RANGE_GLOBAL && u->arg[1] != RANGE_PARALLEL && u->arg[1] != RANGE_LOCAL)) continue;
    if (r->ngloop == KS_MAX_AXES || u->src[0]->op != OP_CONST) return -1;
    r->gloop[r->ngloop] = u, r->gdiv[r->ngloop++] = (long long)uop_const_ivalue(u->src[0]);
  }
  for (long long inner = 1, i = r->ngloop - 1; i >= 0; i--) {
    long long size = r->gdiv[i];
    r->gdiv[i] = inner, inner *= size;
  }
  return 0;
}

static int render_kernel(const lin_program *p, const char *name, strbuf *dst) {
  ptx_r r = {.kernel = name};
  uop *globals[66] = {0};
  int nglob = used_slots(p, globals);
  if (output_loops(&r, p) < 0)
    return tg_set_error(TG_ERR_COMPILE, "render_ptx: kernel %s: an output loop has no constant size", name);
  strbuf pro = {0};
  char g[16], n[16], pr[16], t[3][16];
  r.gid = new_reg(&r, RC_B64);
  reg_name(g, sizeof g, r.gid), reg_name(n, sizeof n, new_reg(&r, RC_B64)), reg_name(pr, sizeof pr, new_reg(&r, RC_PRED));
  for (int i = 0; i < 3; i++) reg_name(t[i], sizeof t[i], new_reg(&r, RC_B32));
  sb_printf(&pro, "\tmov.u32 %s, %%ctaid.x;\n\tmov.u32 %s, %%ntid.x;\n\tmov.u32 %s, %%tid.x;\n", t[0], t[1], t[2]);
  sb_printf(&pro, "\tcvt.u64.u32 %s, %s;\n\tmad.wide.u32 %s, %s, %s, %s;\n", g, t[2], g, t[0], t[1], g);
  sb_printf(&pro, "\tld.param.u64 %s, [tg_n];\n\tsetp.ge.s64 %s, %s, %s;\n\t@%s ret;\n", n, pr, g, n, pr);
  r.local = lin_local_size(p);
  if (r.local) { /* the work-item's index in its work-group */
    char l[16];
    reg_name(l, sizeof l, r.lid = new_reg(&r, RC_B64));
    sb_printf(&pro, "\tcvt.u64.u32 %s, %s;\n", l, t[2]);
  }
  for (int i = 0; i < 66; i++) {
    r.base[i] = -1;
    if (i >= nglob || !globals[i]) continue;
    char b[16];
    r.base[i] = new_reg(&r, RC_B64);
    reg_name(b, sizeof b, r.base[i]);
    sb_printf(&pro, "\tld.param.u64 %s, [b%d];\n\tcvta.to.global.u64 %s, %s;\n", b, i, b, b);
  }
  for (int i = 0; i < p->n && !r.err; i++) render_op(&r, p, &p->ops[i]);
  if (!r.err && r.nloop) fail(&r, "a loop left open", r.loop[0]);
  if (!r.err) {
    sb_printf(dst, ".visible .entry %s(\n\t.param .u64 tg_n", name);
    for (int i = 0; i < nglob; i++) sb_printf(dst, ",\n\t.param .u64 b%d", i);
    sb_printf(dst, "\n)\n{\n");
    for (int c = 0; c < RC_COUNT; c++)
      if (r.nreg[c]) sb_printf(dst, "\t.reg .%s %s<%d>;\n", rc_decl[c], rc_prefix[c], r.nreg[c]);
    if (r.shared.s) sb_printf(dst, "%s", r.shared.s);
    sb_printf(dst, "%s%s%s\tret;\n}\n", pro.s, r.consts.s ? r.consts.s : "", r.body.s ? r.body.s : "");
  }
  sb_free(&pro), sb_free(&r.body), sb_free(&r.consts), sb_free(&r.shared);
  ptrmap_free(&r.regs);
  ptrmap_free(&r.fused);
  return r.err;
}

/* The PTX ISA version a target needs (ptxas 13 reads up to 9.0). */
static const char *ptx_version(int sm) { return sm >= 120 ? "8.7" : sm >= 100 ? "8.6" : "8.0"; }

/* Whether a program uses tensor cores (mma.sync needs sm_80). */
static bool uses_wmma(const lin_program *p) {
  for (int i = 0; i < p->n; i++)
    if (p->ops[i].u->op == OP_WMMA) return true;
  return false;
}

char *render_ptx(const lin_program *progs, int n, const char *const *names, int sm) {
  strbuf src = {0};
  sb_printf(&src, "// tg: PTX for sm_%d\n.version %s\n.target sm_%d\n.address_size 64\n\n", sm, ptx_version(sm), sm);
  for (int i = 0; i < n; i++) {
    if (uses_wmma(&progs[i]) && sm < 80) {
      sb_free(&src);
      tg_set_error(TG_ERR_COMPILE, "render_ptx: kernel %s uses tensor cores (mma.sync), which need sm_80, not sm_%d", names[i], sm);
      return NULL;
    }
    if (render_kernel(&progs[i], names[i], &src) < 0) { sb_free(&src); return NULL; }
  }
  return src.s;
}
