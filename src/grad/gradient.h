/* gradient.h — reverse-mode differentiation on the tensor graph (uop level).
 *
 * grad_uops walks the graph under y in reverse topological order and applies one derivative
 * rule per op (grad_rules[] in gradient.c). Gradients are ordinary lazy graphs, so they can be
 * differentiated again. */
#ifndef TG_GRADIENT_H
#define TG_GRADIENT_H

#include "uop/uop.h"

/* d(y)/d(targets[i]) for every target (y must have one element). A node matches a target when
 * it is the target or was realized into it (node->realized == target). out[i] is NULL where
 * y does not depend on targets[i] through differentiable (float) ops. Results belong to the
 * uop pool. Returns 0, or a negative tg_status with the error set (an op without a rule on
 * a path from y to a target). */
int grad_uops(uop *y, uop *const *targets, int n, uop **out);

/* Custom derivatives. GRADFN(value, inputs...) has the value of src[0]; autograd does not look
 * inside that value's graph but calls the rule registered under id arg[0], which writes the
 * gradient of each input src[i] (i >= 1, at most GRAD_CUSTOM_MAX_SRC sources) into d[i]
 * (NULL: none) from g, the gradient of the value. Used where the generic rules would build
 * slow kernels (convolution: its input gradient is a transposed convolution, not a col2im). */
#define GRAD_CUSTOM_MAX_SRC 4
typedef void (*grad_custom_rule)(uop *u, uop *g, uop **d);
/* The id of a rule (registering the same function twice gives the same id), or -1 if the
 * table is full. */
int grad_register_custom(grad_custom_rule rule);

/* The derivative rule of op exists (tests and docs). */
bool grad_has_rule(uop_op op);
#endif
