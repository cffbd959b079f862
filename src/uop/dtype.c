/* dtype.c — dtype table, promotion lattice, 16-bit float conversions. */
#include "uop/dtype.h"

#include <math.h>
#include <string.h>

const dtype_info dtype_table[TG_DTYPE_COUNT] = {
    [TG_BOOL] = {"bool", 1, 'b', "_Bool", "_Bool", 0, 1},
    [TG_INT8] = {"int8", 1, 'i', "signed char", "signed char", -128.0, 127.0},
    [TG_INT16] = {"int16", 2, 'i', "short", "short", -32768.0, 32767.0},
    [TG_INT32] = {"int32", 4, 'i', "int", "int", -2147483648.0, 2147483647.0},
    [TG_INT64] = {"int64", 8, 'i', "long long", "long long", -9223372036854775808.0, 9223372036854775807.0},
    [TG_UINT8] = {"uint8", 1, 'u', "unsigned char", "unsigned char", 0, 255.0},
    [TG_UINT16] = {"uint16", 2, 'u', "unsigned short", "unsigned short", 0, 65535.0},
    [TG_UINT32] = {"uint32", 4, 'u', "unsigned int", "unsigned int", 0, 4294967295.0},
    [TG_UINT64] = {"uint64", 8, 'u', "unsigned long long", "unsigned long long", 0, 18446744073709551615.0},
    [TG_FLOAT16] = {"float16", 2, 'f', "unsigned short", "float", -INFINITY, INFINITY},
    [TG_BFLOAT16] = {"bfloat16", 2, 'f', "unsigned short", "float", -INFINITY, INFINITY},
    [TG_FLOAT32] = {"float32", 4, 'f', "float", "float", -INFINITY, INFINITY},
    [TG_FLOAT64] = {"float64", 8, 'f', "double", "double", -INFINITY, INFINITY},
};

size_t tg_dtype_size(tg_dtype dt) { return dtype_valid(dt) ? (size_t)dtype_table[dt].size : 0; }
const char *tg_dtype_name(tg_dtype dt) { return dtype_valid(dt) ? dtype_table[dt].name : "invalid"; }
bool tg_dtype_is_float(tg_dtype dt) { return dtype_valid(dt) && dtype_is_float(dt); }

static tg_dtype signed_of_size(int size) {
  switch (size) {
    case 1: return TG_INT8;
    case 2: return TG_INT16;
    case 4: return TG_INT32;
    default: return TG_INT64;
  }
}

tg_dtype tg_promote_types(tg_dtype a, tg_dtype b) {
  if (!dtype_valid(a) || !dtype_valid(b)) return TG_DTYPE_COUNT;
  if (a == b) return a;
  const dtype_info *x = &dtype_table[a], *y = &dtype_table[b];
  if (x->kind == 'b') return b;
  if (y->kind == 'b') return a;
  if (x->kind == 'f' && y->kind == 'f') {
    if (x->size == y->size) return TG_FLOAT32; /* float16 + bfloat16 */
    return x->size > y->size ? a : b;
  }
  if (x->kind == 'f') return a;
  if (y->kind == 'f') return b;
  if (x->kind == y->kind) return x->size >= y->size ? a : b;
  const dtype_info *s = x->kind == 'i' ? x : y, *u = x->kind == 'i' ? y : x;
  if (s->size > u->size) return x->kind == 'i' ? a : b;
  if (u->size == 8) return TG_FLOAT64;
  return signed_of_size(u->size * 2);
}

tg_dtype dtype_sum_acc(tg_dtype dt) {
  if (dt == TG_BOOL || dtype_table[dt].kind == 'i') return TG_INT64;
  if (dtype_table[dt].kind == 'u') return TG_UINT64;
  return dt;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
  else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (!man) bits = sign;
  else { /* subnormal: value = man * 2^-24 */
    float f = (float)man * 5.9604644775390625e-8f;
    memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) { /* NaN: keep the top payload bits (quiet or signalling), stay a NaN */
    uint32_t payload = (ax >> 13) & 0x3ff;
    return (uint16_t)(sign | 0x7c00 | (payload ? payload : 1)); /* numpy: 0x7f800001 -> 0x7c01 */
  }
  if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00);
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
  if (ax < 0x38800000u) {                                  /* subnormal or zero in half */
    float a;
    memcpy(&a, &ax, 4);
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f)); /* units of 2^-24 */
  }
  uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u); /* round to nearest even on bit 13 */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, but keep it a NaN */
    return (uint16_t)((x >> 16) | ((x >> 16) & 0x7f ? 0 : 0x40));
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

double dtype_read(const void *p, tg_dtype dt, size_t i) {
  switch (dt) {
    case TG_BOOL: return ((const unsigned char *)p)[i] != 0;
    case TG_INT8: return ((const int8_t *)p)[i];
    case TG_INT16: return ((const int16_t *)p)[i];
    case TG_INT32: return ((const int32_t *)p)[i];
    case TG_INT64: return (double)((const int64_t *)p)[i];
    case TG_UINT8: return ((const uint8_t *)p)[i];
    case TG_UINT16: return ((const uint16_t *)p)[i];
    case TG_UINT32: return ((const uint32_t *)p)[i];
    case TG_UINT64: return (double)((const uint64_t *)p)[i];
    case TG_FLOAT16: return half_to_float(((const uint16_t *)p)[i]);
    case TG_BFLOAT16: return bf16_to_float(((const uint16_t *)p)[i]);
    case TG_FLOAT32: return ((const float *)p)[i];
    case TG_FLOAT64: return ((const double *)p)[i];
    default: return NAN;
  }
}

int64_t dtype_double_to_int(double v, bool to_u64) {
  if (isnan(v)) return 0;
  if (to_u64 && v >= 9223372036854775808.0) /* above int64: through uint64 (wraps to negative) */
    return v >= 18446744073709551616.0 ? -1 : (int64_t)(uint64_t)v;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return to_u64 ? 0 : INT64_MIN;
  return (int64_t)v;
}

void dtype_write(void *p, tg_dtype dt, size_t i, double v) {
  switch (dt) {
    case TG_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    case TG_INT8: ((int8_t *)p)[i] = (int8_t)dtype_double_to_int(v, false); break;
    case TG_INT16: ((int16_t *)p)[i] = (int16_t)dtype_double_to_int(v, false); break;
    case TG_INT32: ((int32_t *)p)[i] = (int32_t)dtype_double_to_int(v, false); break;
    case TG_INT64: ((int64_t *)p)[i] = (int64_t)dtype_double_to_int(v, false); break;
    case TG_UINT8: ((uint8_t *)p)[i] = (uint8_t)dtype_double_to_int(v, false); break;
    case TG_UINT16: ((uint16_t *)p)[i] = (uint16_t)dtype_double_to_int(v, false); break;
    case TG_UINT32: ((uint32_t *)p)[i] = (uint32_t)dtype_double_to_int(v, false); break;
    case TG_UINT64: ((uint64_t *)p)[i] = (uint64_t)dtype_double_to_int(v, true); break;
    case TG_FLOAT16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    case TG_BFLOAT16: ((uint16_t *)p)[i] = float_to_bf16((float)v); break;
    case TG_FLOAT32: ((float *)p)[i] = (float)v; break;
    case TG_FLOAT64: ((double *)p)[i] = v; break;
    default: break;
  }
}
