/* transcendental.h — EXP2, LOG2 and SIN of a lowered kernel rewritten into polynomial ALU
 * code (transcendental.c), so they vectorize instead of calling libm once per lane. */
#ifndef TG_TRANSCENDENTAL_H
#define TG_TRANSCENDENTAL_H

#include "codegen/codegen.h"

/* Whether kernels of this shape state get the decomposition: host devices (vector lanes) do;
 * GPU devices (ks->scalar, program.c) keep their native exp2/log2/sin. TRANSCENDENTAL=0 in
 * the environment turns it off everywhere (libm calls, for comparison). */
bool transcendental_wanted(const kshape *ks);
/* The lowered kernel with every float EXP2/LOG2/SIN decomposed (float16/bfloat16 computed in
 * float32); sink itself when !transcendental_wanted(ks). The result belongs to the pool. */
uop *transcendental_rewrite(uop *sink, const kshape *ks);

/* The ulp bounds tests/test_transcendental.c asserts over the whole float range (measured
 * 2026-11-24: exp2 0.83 / 0.78 ulp (float32 / float64), log2 2.35 / 2.06, sin 0.50 / 1.42). */
enum { TRANSC_EXP2_ULP = 1, TRANSC_LOG2_ULP = 3, TRANSC_SIN_ULP = 2 };
#endif
