/* uop.h — the IR. A UOp is {op, dtype, src[], arg[]}: immutable, interned (equal content →
 * same pointer) and reference counted. Every op is described once, in uop_ops[] (uop.c).
 *
 * Ownership: uop_new returns a node whose new reference belongs to the current *pool*
 * (an autorelease stack). Code that builds graphs takes a mark, builds freely, keeps what it
 * needs with uop_incref, and releases the pool back to the mark. */
#ifndef TG_UOP_H
#define TG_UOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "tg.h"

/* X-macro: name, number of sources (-1 variadic), group flags. */
#define UOP_FLAG_UNARY 1u
#define UOP_FLAG_BINARY 2u
#define UOP_FLAG_TERNARY 4u
#define UOP_FLAG_ALU 8u         /* elementwise math */
#define UOP_FLAG_COMMUTATIVE 16u
#define UOP_FLAG_MOVEMENT 32u
#define UOP_FLAG_CMP 64u         /* result is bool */
#define UOP_FLAG_TENSOR 128u     /* may appear in a tensor graph */
#define UOP_FLAG_KERNEL 256u     /* may appear in a lowered kernel */

#define U_ (UOP_FLAG_UNARY | UOP_FLAG_ALU | UOP_FLAG_TENSOR | UOP_FLAG_KERNEL)
#define B_ (UOP_FLAG_BINARY | UOP_FLAG_ALU | UOP_FLAG_TENSOR | UOP_FLAG_KERNEL)
#define C_ (B_ | UOP_FLAG_COMMUTATIVE)
#define M_ (UOP_FLAG_MOVEMENT | UOP_FLAG_TENSOR)
#define UOP_LIST(X)                                                             \
  /* elementwise unary */                                                       \
  X(NEG, 1, U_) X(EXP2, 1, U_) X(LOG2, 1, U_) X(SIN, 1, U_) X(SQRT, 1, U_)      \
  X(RECIP, 1, U_) X(TRUNC, 1, U_) X(NOT, 1, U_) X(CAST, 1, U_)                  \
  X(BITCAST, 1, U_)                                                             \
  /* elementwise binary */                                                      \
  X(ADD, 2, C_) X(MUL, 2, C_) X(SUB, 2, B_) X(FDIV, 2, B_) X(IDIV, 2, B_)       \
  X(MOD, 2, B_) X(MAX, 2, C_) X(AND, 2, C_) X(OR, 2, C_) X(XOR, 2, C_)          \
  X(SHL, 2, B_) X(SHR, 2, B_) X(POW, 2, B_)                                     \
  X(CMPLT, 2, B_ | UOP_FLAG_CMP) X(CMPNE, 2, C_ | UOP_FLAG_CMP)                 \
  X(CMPEQ, 2, C_ | UOP_FLAG_CMP)                                                \
  /* elementwise ternary */                                                     \
  X(WHERE, 3, UOP_FLAG_TERNARY | UOP_FLAG_ALU | UOP_FLAG_TENSOR | UOP_FLAG_KERNEL) \
  /* tensor graph */                                                            \
  X(BUFFER, 0, UOP_FLAG_TENSOR) X(PARAM, 0, UOP_FLAG_TENSOR)                    \
  X(CONST, 0, UOP_FLAG_TENSOR | UOP_FLAG_KERNEL) X(IOTA, 0, UOP_FLAG_TENSOR)    \
  X(VALUE, 0, UOP_FLAG_TENSOR) /* a user's scalar: a kernel argument, see uop_value */ \
  /* a kernel's symbolic variable (docs/symbolic.md): arg [id, min, max], src[0] the 0-d int64 \
   * view of the variable's buffer; only among a kernel SINK's sources after the first */   \
  X(DEFINE_VAR, 1, UOP_FLAG_TENSOR | UOP_FLAG_KERNEL)                            \
  X(REDUCE_AXIS, 1, UOP_FLAG_TENSOR) X(CONTIGUOUS, 1, UOP_FLAG_TENSOR)          \
  X(DETACH, 1, UOP_FLAG_TENSOR) /* stop gradients; stripped by the scheduler */ \
  X(GRADFN, -1, UOP_FLAG_TENSOR) /* value src[0]; custom derivative for src[1..] */ \
  X(COPY, 1, UOP_FLAG_TENSOR) /* src[0]'s value on device arg[0] (tg_to) */     \
  X(RESHAPE, 1, M_) X(PERMUTE, 1, M_) X(EXPAND, 1, M_) X(PAD, 1, M_)            \
  X(SHRINK, 1, M_) X(FLIP, 1, M_)                                               \
  /* lowering and kernels */                                                    \
  X(INDEX, -1, UOP_FLAG_KERNEL) X(DEFINE_GLOBAL, 0, UOP_FLAG_KERNEL)            \
  X(RANGE, 1, UOP_FLAG_KERNEL) X(LOAD, -1, UOP_FLAG_KERNEL)                     \
  X(STORE, -1, UOP_FLAG_KERNEL) X(REDUCE, -1, UOP_FLAG_KERNEL)                   \
  /* vectors (codegen/vectorize.c): VECTORIZE(x0..xw-1) builds a vector of w lanes, or of one \
   * source broadcast to vcount lanes; GEP(v) is lane arg[0] of v */              \
  X(VECTORIZE, -1, UOP_FLAG_KERNEL) X(GEP, 1, UOP_FLAG_KERNEL)                  \
  X(SINK, -1, UOP_FLAG_TENSOR | UOP_FLAG_KERNEL)                                \
  /* a tensor split across devices: src[i] the shard on device i; arg[0] the axis split       \
   * (-1: every source holds the whole value), arg[1..] the whole shape (schedule/multi.c) */  \
  X(MULTI, -1, UOP_FLAG_TENSOR)                                                 \
  /* a warp's tensor-core multiply-accumulate (codegen.h: sources the A, B, C fragments, vcount \
   * 4: D; arg [shape, operand dtype]); last, so the other ops keep their numbers in caches */ \
  X(WMMA, -1, UOP_FLAG_KERNEL)                                                  \
  /* a hint: bring element src[1] of buffer src[0] into the cache (no value; host devices:    \
   * linearize.c's next-row prefetch) */                                        \
  X(PREFETCH, 2, UOP_FLAG_KERNEL)

typedef enum uop_op {
#define UOP_ENUM(name, n, f) OP_##name,
  UOP_LIST(UOP_ENUM)
#undef UOP_ENUM
  OP_COUNT
} uop_op;

typedef struct uop_info {
  const char *name;
  int nsrc;
  unsigned flags;
} uop_info;
extern const uop_info uop_ops[OP_COUNT];

/* A node is immutable once uop_new returns it, and may be shared by every thread (interning):
 * the only fields that change are atomic — the reference count, `realized` (set once) and the
 * value range symbolic.c caches. Its shape is computed when it is made. */
typedef struct uop uop;
struct uop {
  uint16_t op;
  uint8_t dtype;      /* tg_dtype; index math is TG_INT64 */
  _Atomic uint8_t range_done; /* vmin/vmax computed (symbolic.c) */
  _Atomic uint32_t refcnt;
  uint64_t hash;
  int32_t nsrc, narg;
  int32_t ndim;       /* tensor shape rank (-1: none, for kernel-level ops) */
  uop **src;
  int64_t *arg;
  int64_t *shape;     /* tensor shape (ndim entries, in the node's own allocation); a dim that
                         depends on a variable holds its largest value: the layout */
  int64_t *sym;       /* NULL, or per dim 0 (a plain size) or the symbolic size (sym_is) */
  uop *next;          /* intern chain (after death: the list of nodes being freed) */
  uint8_t device;     /* where its value lives: DEVICE_NONE, a device index + 1, DEVICE_MIXED */
  uint8_t vcount;     /* vector lanes of a kernel value (0: a scalar), like tinygrad's dtype.vec(n):
                         set by codegen's vectorize pass, part of the node's identity */
  _Atomic(uop *) realized; /* BUFFER this expression was realized into (strong ref, set once) */
  _Atomic uint32_t handles; /* tensor handles whose value this node is (tensor_set_value): the
                               scheduler keeps the buffer of a root someone can still read */
  _Atomic int64_t vmin, vmax; /* value range of int/bool nodes (symbolic.c) */
};

static inline bool uop_is(const uop *u, uop_op op) { return u && u->op == op; }
static inline unsigned uop_flags(const uop *u) { return uop_ops[u->op].flags; }
static inline bool uop_is_alu(const uop *u) { return uop_flags(u) & UOP_FLAG_ALU; }
static inline bool uop_is_movement(const uop *u) { return uop_flags(u) & UOP_FLAG_MOVEMENT; }

/* Build (or find) a node. Sources are borrowed; the result's reference belongs to the pool. */
uop *uop_new(uop_op op, tg_dtype dtype, uop *const *src, int nsrc, const int64_t *arg, int narg);
/* The same for a vector of vcount lanes of dtype (0: a scalar; at most 255). */
uop *uop_new_vec(uop_op op, tg_dtype dtype, int vcount, uop *const *src, int nsrc, const int64_t *arg, int narg);
uop *uop_new1(uop_op op, tg_dtype dtype, uop *a);
uop *uop_new2(uop_op op, tg_dtype dtype, uop *a, uop *b);
uop *uop_new3(uop_op op, tg_dtype dtype, uop *a, uop *b, uop *c);
/* A copy of u with other sources (same op, dtype, vcount, arg). */
uop *uop_replace_src(uop *u, uop *const *src, int nsrc);

void uop_incref(uop *u);
void uop_decref(uop *u);

/* The device of a node, derived when it is made: a BUFFER's is set by the code that makes it
 * (uop_set_device, before anyone else holds it), a COPY's is the one it copies to, any other
 * node's is its sources': DEVICE_NONE when none has one (constants), DEVICE_MIXED when two
 * differ (an error where a tensor is made: tensor_wrap). A MULTI's is DEVICE_MULTI, and so is
 * that of an op on it and constants or a tensor of one device (copied to each: split per
 * device by the scheduler, schedule/multi.c). */
enum { DEVICE_NONE = 0, DEVICE_MULTI = 254, DEVICE_MIXED = 255 }; /* MULTI: on several (a MULTI below) */
void uop_set_device(uop *buffer, int device);

/* The BUFFER u was realized into, or NULL. */
static inline uop *uop_realized(const uop *u) { return atomic_load_explicit(&((uop *)u)->realized, memory_order_acquire); }
/* Make buf the buffer u was realized into unless it already has one (another thread may have
 * realized the same node); returns the node's buffer. The node takes its own reference. */
uop *uop_set_realized(uop *u, uop *buf);

/* Autorelease pool of references handed out by uop_new. */
size_t uop_pool_mark(void);
void uop_pool_release(size_t mark);
/* Give the current pool one more reference to u (u stays alive until the pool releases it). */
uop *uop_pool_add(uop *u);

/* Constants: ints stored as int64 (uint64 by bits), floats as the bits of a double, so equal
 * bit patterns intern (NaN dedupes, -0.0 stays distinct). */
uop *uop_const(tg_dtype dt, double v);
uop *uop_const_int(tg_dtype dt, int64_t v);
uop *uop_const_bool(bool v);
/* A value that comes from the user (tg_full, tg_scalar, the scalar of tg_mul_s, ...): a VALUE
 * node with the constant's encoding in arg[0] and a serial number in arg[1], so every call
 * makes its own node. The scheduler passes it to the kernel as an argument (a 0-d input), so
 * a kernel never depends on the number and a new value never compiles a new kernel; and a
 * tensor made from it is a leaf of its own (two tg_zeros are two gradient targets). */
uop *uop_value(tg_dtype dt, double v);
double uop_const_value(const uop *c);   /* as double (a CONST or a VALUE) */
int64_t uop_const_ivalue(const uop *c); /* as int64 (floats truncate) */
bool uop_is_const_val(const uop *u, double v);

/* Helpers for index math (TG_INT64). */
uop *uop_idx(int64_t v);
uop *uop_add(uop *a, uop *b);
uop *uop_mul(uop *a, uop *b);
uop *uop_alu(uop_op op, uop *a, uop *b); /* binary ALU; dtype: bool for CMP ops, else a's */

/* Tensor-graph shape (computed from op/src/arg when the node is made). ndim -1 for kernel-level ops. */
static inline int uop_ndim(const uop *u) { return u->ndim; }
static inline const int64_t *uop_shape(const uop *u) { return u->shape; }
int64_t shape_numel(const int64_t *shape, int ndim);

/* ---- symbolic sizes (docs/symbolic.md)
 * A symbolic size coef * var + add is one int64 below -2^62 (no shape, pad or shrink argument
 * can be that low): id (14 bits), coef (int8) and add (40 bits). It can stand wherever a
 * movement op takes a size or offset. A node's shape holds the layout value (the largest over
 * the variable's range), its `sym` the symbolic form. SYM_BAD: no such size (two variables
 * met, or out of range). */
#define SYM_BAD INT64_MIN
enum { SYM_MAX_VARS = 16383 };
static inline bool sym_is(int64_t v) { return v < -(INT64_C(1) << 62) && v != SYM_BAD; }
int64_t sym_make(int id, int64_t coef, int64_t add);
int sym_var(int64_t v);       /* 0 for a plain value */
int64_t sym_coef(int64_t v);
int64_t sym_add_of(int64_t v); /* the constant part (a plain value: itself) */
int64_t sym_add(int64_t a, int64_t b); /* affine sum: plain where the variable cancels */
int64_t sym_sub(int64_t a, int64_t b);
int64_t sym_at(int64_t v, int64_t x);  /* the value with the variable at x */
int64_t sym_hi(int64_t v);             /* largest over the variable's range (the layout) */
int64_t sym_lo(int64_t v);             /* smallest */
/* "start_pos+1" for messages. */
const char *sym_str(int64_t v, char *buf, size_t n);
/* The variable registry: id 1..SYM_MAX_VARS, or a negative status with an error. */
int uvar_new(const char *name, int64_t min, int64_t max);
bool uvar_known(int id); /* made by uvar_new */
const char *uvar_name(int id);
int64_t uvar_min(int id);
int64_t uvar_max(int id);
/* The bound value: false while unbound. */
bool uvar_value(int id, int64_t *out);
void uvar_set(int id, int64_t value);
/* The first variable any dim or argument of u names (0: none). */
int uop_sym_var(const uop *u);

/* Topological order (sources before users) of the graph under root; caller frees *out. */
int uop_toposort(uop *root, uop ***out);

/* A self-contained encoding of the graph under root (ops, dtypes, args, edges as indices), so
 * a cache can recognise an equal graph later without keeping its nodes alive. Caller frees. */
int uop_serialize(uop *root, int64_t **out);

/* Debug print of a graph (DEBUG=3). */
void uop_print(uop *root, FILE *f);
uint64_t uop_alive_count(void);

/* Spec checks (spec.c), run when SPEC=1: 0, or TG_ERR_DEVICE with a message naming the op,
 * its dtype and its sources' shapes. A tensor graph: sources' dtypes and shapes fit each op,
 * movement arguments are valid. A kernel AST: SINK(expr) as schedule.c builds it, only ops
 * lower.c can lower, one PARAM per slot. */
int uop_spec_tensor(uop *root);
int uop_spec_kernel(uop *ast);
#endif
