/* dtype.h — the dtype table: sizes, names, categories, limits, C spellings, promotion. */
#ifndef TG_DTYPE_H
#define TG_DTYPE_H

#include <stdbool.h>
#include <stdint.h>
#include "tg.h"

typedef struct dtype_info {
  const char *name;
  int size;           /* bytes */
  char kind;          /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float */
  const char *ctype;  /* C type used to store one element */
  const char *cvalue; /* C type used to compute (float for 16-bit floats) */
  double min, max;    /* value limits (floats: -inf/inf) */
} dtype_info;
extern const dtype_info dtype_table[TG_DTYPE_COUNT];

static inline bool dtype_valid(int dt) { return dt >= 0 && dt < TG_DTYPE_COUNT; }
static inline bool dtype_is_float(tg_dtype dt) { return dtype_table[dt].kind == 'f'; }
static inline bool dtype_is_int(tg_dtype dt) {
  return dtype_table[dt].kind == 'i' || dtype_table[dt].kind == 'u';
}
static inline bool dtype_is_unsigned(tg_dtype dt) { return dtype_table[dt].kind == 'u'; }
static inline bool dtype_is_half(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16; }

/* Read element i of a buffer of dtype dt as double / write a double (host side). */
double dtype_read(const void *p, tg_dtype dt, size_t i);
void dtype_write(void *p, tg_dtype dt, size_t i, double v);
/* v as an integer without undefined behaviour: truncated, saturated to the int64 range (the
 * uint64 range when to_u64), NaN → 0. */
int64_t dtype_double_to_int(double v, bool to_u64);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

/* Accumulation dtype of sum/prod/cumsum (docs/semantics.md). */
tg_dtype dtype_sum_acc(tg_dtype dt);
#endif
