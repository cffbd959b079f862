/* ops_shape.c — ONNX shape, movement and indexing ops (Reshape, Transpose, Slice, Gather,
 * Concat, Pad, ...) and the ops that make constants, mapped onto tg's view and index
 * functions. Shapes, axes and pads that arrive as tensors are read on the host. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAXD OX_MAX_DIMS

static tg_tensor *ints_tensor(const int64_t *v, int64_t count) {
  return tg_from_data(v, TG_INT64, &count, 1);
}

/* Indices with negative values counted from the end of an axis of size dim. */
static tg_tensor *wrap_index(tg_tensor *idx, int64_t dim) {
  tg_tensor *i = tg_cast(idx, TG_INT64);
  return tg_where(tg_lt(i, tg_zeros_like(i)), tg_add_s(i, (double)dim), i);
}

/* Axes from attribute `axes` (opset < from) or input 1 (NULL: none): count, or < 0 on error. */
static int axes_of(ox_node *n, int from, int64_t *axes) {
  if (n->opset >= from) return IN(1) ? ox_host_ints(IN(1), axes, MAXD) : 0;
  int k = ox_attr_ints(n, "axes", axes, MAXD);
  return k == -1 ? 0 : k;
}

/* ---------------------------------------------------------------- shapes */

static int op_reshape(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t shape[MAXD], in[MAXD];
  int nd = ox_host_ints(IN(1), shape, MAXD), xnd = tg_shape(x, in, MAXD);
  if (nd < 0 || xnd < 0) return -1;
  bool allowzero = ox_attr_i(n, "allowzero", 0) != 0;
  for (int i = 0; i < nd && !allowzero; i++)
    if (shape[i] == 0) {
      if (i >= xnd) return ox_fail(n, TG_ERR_ARG, "shape[%d] = 0 copies a dim the input lacks", i);
      shape[i] = in[i];
    }
  return ox_set(n, 0, tg_reshape(x, shape, nd));
}

static int op_shape(ox_node *n) {
  int64_t s[MAXD];
  int nd = tg_shape(IN(0), s, MAXD);
  if (nd < 0) return -1;
  int64_t st = ox_attr_i(n, "start", 0), en = ox_attr_i(n, "end", nd);
  st = st < 0 ? st + nd : st, en = en < 0 ? en + nd : en;
  st = st < 0 ? 0 : st > nd ? nd : st, en = en < 0 ? 0 : en > nd ? nd : en;
  return ox_set(n, 0, ints_tensor(s + st, en > st ? en - st : 0));
}

static int op_size(ox_node *n) {
  int64_t v = tg_numel(IN(0));
  return ox_set(n, 0, tg_from_data(&v, TG_INT64, NULL, 0));
}

static int op_flatten(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x);
  int64_t a = ox_attr_i(n, "axis", 1);
  if (a < -nd || a > nd) return ox_fail(n, TG_ERR_ARG, "axis %lld out of range", (long long)a);
  if (a < 0) a += nd;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < nd; i++) *(i < a ? &outer : &inner) *= tg_dim(x, i);
  int64_t shape[2] = {outer, inner};
  return ox_set(n, 0, tg_reshape(x, shape, 2));
}

static int op_squeeze(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t axes[MAXD];
  int na = axes_of(n, 13, axes), nd = tg_ndim(x);
  if (na < 0) return -1;
  if (na == 0) return ox_set(n, 0, tg_squeeze(x, TG_ALL_AXES));
  int64_t s[MAXD], out[MAXD];
  bool drop[MAXD] = {0};
  tg_shape(x, s, MAXD);
  for (int i = 0; i < na; i++) {
    int a = ox_axis(n, axes[i], nd);
    if (a < 0) return -1;
    if (s[a] != 1) return ox_fail(n, TG_ERR_ARG, "axis %d has size %lld, not 1", a, (long long)s[a]);
    drop[a] = true;
  }
  int k = 0;
  for (int i = 0; i < nd; i++)
    if (!drop[i]) out[k++] = s[i];
  return ox_set(n, 0, tg_reshape(x, out, k));
}

static int op_unsqueeze(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t axes[MAXD], s[MAXD], out[MAXD];
  int na = axes_of(n, 13, axes), nd = tg_shape(x, s, MAXD);
  if (na < 0 || nd < 0) return -1;
  int on = nd + na;
  if (on > MAXD) return ox_fail(n, TG_ERR_ARG, "rank %d is too large", on);
  bool ins[MAXD] = {0};
  for (int i = 0; i < na; i++) {
    int a = ox_axis(n, axes[i], on);
    if (a < 0) return -1;
    if (ins[a]) return ox_fail(n, TG_ERR_ARG, "axis %d given twice", a);
    ins[a] = true;
  }
  for (int i = 0, k = 0; i < on; i++) out[i] = ins[i] ? 1 : s[k++];
  return ox_set(n, 0, tg_reshape(x, out, on));
}

static int op_transpose(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x), order[MAXD];
  int64_t perm[MAXD];
  int np = ox_attr_ints(n, "perm", perm, MAXD);
  if (np < -1) return -1;
  if (np >= 0 && np != nd) return ox_fail(n, TG_ERR_ARG, "perm has %d entries for rank %d", np, nd);
  for (int i = 0; i < nd; i++) order[i] = np < 0 ? nd - 1 - i : (int)perm[i];
  for (int i = 0; i < nd; i++)
    if (order[i] < 0 || order[i] >= nd) return ox_fail(n, TG_ERR_ARG, "perm entry %d out of range", order[i]);
  return ox_set(n, 0, tg_permute(x, order, nd));
}

static int op_concat(ox_node *n) {
  tg_tensor *ts[OX_MAX_IO];
  int k = 0;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]) ts[k++] = n->in[i];
  if (!k) return ox_fail(n, TG_ERR_ARG, "no inputs");
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(ts[0]));
  return axis < 0 ? -1 : ox_set(n, 0, tg_cat(ts, k, axis));
}

static int op_split(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x));
  if (axis < 0) return -1;
  int64_t sizes[OX_MAX_IO], dim = tg_dim(x, axis);
  int k = n->opset >= 13 ? (IN(1) ? ox_host_ints(IN(1), sizes, OX_MAX_IO) : -1) : ox_attr_ints(n, "split", sizes, OX_MAX_IO);
  if (k < -1) return -1;
  if (k <= 0) { /* equal parts; the last smaller (opset 18) */
    if ((k = n->nout) < 1) return ox_fail(n, TG_ERR_ARG, "no outputs");
    int64_t part = (dim + k - 1) / k;
    for (int i = 0; i < k; i++) sizes[i] = i < k - 1 ? part : dim - part * (k - 1);
  }
  if (k != n->nout) return ox_fail(n, TG_ERR_ARG, "%d sizes for %d outputs", k, n->nout);
  return tg_split(x, sizes, k, axis, n->out) < 0 ? -1 : 0;
}

/* Slice (opset 10+: starts, ends, axes, steps as inputs; before: attributes). */
static int op_slice(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t st[MAXD], en[MAXD], ax[MAXD], sp[MAXD];
  int nd = tg_ndim(x), k, ke, ka = -1, ks = -1;
  if (n->opset >= 10) {
    k = ox_host_ints(IN(1), st, MAXD), ke = ox_host_ints(IN(2), en, MAXD);
    if (IN(3)) ka = ox_host_ints(IN(3), ax, MAXD);
    if (IN(4)) ks = ox_host_ints(IN(4), sp, MAXD);
  } else {
    k = ox_attr_ints(n, "starts", st, MAXD), ke = ox_attr_ints(n, "ends", en, MAXD), ka = ox_attr_ints(n, "axes", ax, MAXD);
  }
  if (k < 0 || ke != k || (ka >= 0 && ka != k) || (ks >= 0 && ks != k))
    return ox_fail(n, TG_ERR_ARG, "starts, ends, axes and steps differ in length");
  for (int i = 0; i < k && x; i++) {
    int a = ox_axis(n, ka >= 0 ? ax[i] : i, nd);
    int64_t step = ks >= 0 ? sp[i] : 1;
    if (a < 0) return -1;
    if (step == 0) return ox_fail(n, TG_ERR_ARG, "step 0");
    int64_t dim = tg_dim(x, a), s = st[i], e = en[i];
    /* clamp like ONNX: to [0, dim] forward, [-1, dim-1] backward (as Python's slice) */
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) s = s < 0 ? 0 : s > dim ? dim : s, e = e < 0 ? 0 : e > dim ? dim : e;
    else s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s, e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    if (step < 0 && e == -1) e = TG_SLICE_END;
    if (step < 0 && s == -1) s = 0, e = 0; /* empty */
    x = tg_slice(x, a, s, e, step);
  }
  return ox_set(n, 0, x);
}

static int op_gather(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x));
  if (axis < 0 || !IN(1)) return -1;
  return ox_set(n, 0, tg_index_select(x, axis, wrap_index(IN(1), tg_dim(x, axis))));
}

static int op_gather_elements(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x));
  if (axis < 0 || !IN(1)) return -1;
  return ox_set(n, 0, tg_gather(x, axis, wrap_index(IN(1), tg_dim(x, axis))));
}

/* Flat positions of ND indices (..., k) into dims[b .. b+k) of data, plus the batch offset
 * (batch_dims b): the index into data reshaped to (B * P, rest...). */
static tg_tensor *nd_flat_index(ox_node *n, tg_tensor *data, tg_tensor *idx, int b, int64_t *rows) {
  int nd = tg_ndim(data), ni = tg_ndim(idx);
  int64_t k = tg_dim(idx, -1), ds[MAXD];
  tg_shape(data, ds, MAXD);
  if (k < 1 || b + k > nd || ni < b + 1) return ox_fail(n, TG_ERR_ARG, "index depth %lld does not fit", (long long)k), NULL;
  int64_t strides[MAXD], p = 1, bsz = 1;
  for (int j = (int)k - 1; j >= 0; j--) strides[j] = p, p *= ds[b + j];
  for (int j = 0; j < b; j++) bsz *= ds[j];
  tg_tensor *flat = tg_zeros(NULL, 0, TG_INT64), *i64 = tg_cast(idx, TG_INT64);
  for (int j = 0; j < k; j++) {
    tg_tensor *c = tg_squeeze(tg_slice(i64, ni - 1, j, j + 1, 1), -1);
    flat = tg_add(flat, tg_mul_s(wrap_index(c, ds[b + j]), (double)strides[j]));
  }
  if (b > 0) { /* offset of each batch: its row-major number times P */
    int64_t bshape[MAXD];
    for (int j = 0; j < ni - 1; j++) bshape[j] = j < b ? ds[j] : 1;
    tg_tensor *off = tg_reshape(tg_mul_s(tg_arange(0, (double)bsz, 1, TG_INT64), (double)p), bshape, ni - 1);
    flat = tg_add(flat, off);
  }
  *rows = bsz * p;
  return flat;
}

/* data reshaped to (rows, rest...) */
static tg_tensor *rows_view(tg_tensor *data, int64_t rows, int skip) {
  int64_t ds[MAXD], s[MAXD];
  int nd = tg_shape(data, ds, MAXD);
  s[0] = rows;
  for (int j = skip; j < nd; j++) s[1 + j - skip] = ds[j];
  return tg_reshape(data, s, 1 + nd - skip);
}

static int op_gather_nd(ox_node *n) {
  tg_tensor *data = IN(0), *idx = IN(1);
  int b = (int)ox_attr_i(n, "batch_dims", 0);
  int64_t rows;
  if (!data || !idx) return -1;
  tg_tensor *flat = nd_flat_index(n, data, idx, b, &rows);
  if (!flat) return -1;
  return ox_set(n, 0, tg_index_select(rows_view(data, rows, b + (int)tg_dim(idx, -1)), 0, flat));
}

/* ScatterND: updates (idx.shape[:-1] + rest) written at the flat rows. */
static int op_scatter_nd(ox_node *n) {
  tg_tensor *data = IN(0), *idx = IN(1), *upd = IN(2);
  int64_t rows, ds[MAXD];
  if (!data || !idx || !upd) return -1;
  const char *red = ox_attr_s(n, "reduction", "none");
  tg_tensor *flat = nd_flat_index(n, data, idx, 0, &rows);
  if (!flat) return -1;
  int nd = tg_shape(data, ds, MAXD), k = (int)tg_dim(idx, -1);
  int64_t m = tg_numel(flat), us[MAXD];
  us[0] = m;
  for (int j = k; j < nd; j++) us[1 + j - k] = ds[j];
  tg_tensor *src = tg_reshape(upd, us, 1 + nd - k);
  int64_t col[MAXD]; /* (m, 1, 1, ...): one row index per update, broadcast over the rest */
  for (int j = 0; j < 1 + nd - k; j++) col[j] = j ? 1 : m;
  tg_tensor *index = tg_expand(tg_reshape(flat, col, 1 + nd - k), us, 1 + nd - k);
  tg_tensor *v = rows_view(data, rows, k), *r;
  if (!strcmp(red, "none")) r = tg_scatter(v, 0, index, src);
  else if (!strcmp(red, "add")) r = tg_scatter_reduce(v, 0, index, src, TG_SCATTER_SUM, true);
  else if (!strcmp(red, "mul")) r = tg_scatter_reduce(v, 0, index, src, TG_SCATTER_PROD, true);
  else if (!strcmp(red, "max")) r = tg_scatter_reduce(v, 0, index, src, TG_SCATTER_AMAX, true);
  else if (!strcmp(red, "min")) r = tg_scatter_reduce(v, 0, index, src, TG_SCATTER_AMIN, true);
  else return ox_fail(n, TG_ERR_ARG, "reduction '%s' is not supported", red);
  return ox_set(n, 0, tg_reshape(r, ds, nd));
}

static int op_scatter_elements(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x));
  if (axis < 0 || !IN(1)) return -1;
  tg_tensor *idx = wrap_index(IN(1), tg_dim(x, axis));
  const char *red = ox_attr_s(n, "reduction", "none");
  static const struct { const char *name; tg_scatter_op op; } reds[] = {
      {"add", TG_SCATTER_SUM}, {"mul", TG_SCATTER_PROD}, {"max", TG_SCATTER_AMAX}, {"min", TG_SCATTER_AMIN}};
  if (!strcmp(red, "none")) return ox_set(n, 0, tg_scatter(x, axis, idx, IN(2)));
  for (int i = 0; i < 4; i++)
    if (!strcmp(red, reds[i].name)) return ox_set(n, 0, tg_scatter_reduce(x, axis, idx, IN(2), reds[i].op, true));
  return ox_fail(n, TG_ERR_ARG, "reduction '%s' is not supported", red);
}

/* Expand: numpy broadcast of the input and the shape, both ways. */
static int op_expand(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t s[MAXD], xs[MAXD], out[MAXD];
  int k = ox_host_ints(IN(1), s, MAXD), nd = tg_shape(x, xs, MAXD);
  if (k < 0 || nd < 0) return -1;
  int on = k > nd ? k : nd;
  for (int i = 0; i < on; i++) {
    int64_t a = i - (on - nd) >= 0 ? xs[i - (on - nd)] : 1, b = i - (on - k) >= 0 ? s[i - (on - k)] : 1;
    if (a != b && a != 1 && b != 1) return ox_fail(n, TG_ERR_ARG, "shapes do not broadcast at axis %d", i);
    out[i] = a == 1 ? b : a;
  }
  int64_t pad[MAXD];
  for (int i = 0; i < on; i++) pad[i] = i < on - nd ? 1 : xs[i - (on - nd)];
  return ox_set(n, 0, tg_expand(tg_reshape(x, pad, on), out, on));
}

static int op_tile(ox_node *n) {
  int64_t r[MAXD];
  int k = ox_host_ints(IN(1), r, MAXD);
  if (k < 0) return -1;
  if (k != tg_ndim(IN(0))) return ox_fail(n, TG_ERR_ARG, "%d repeats for rank %d", k, tg_ndim(IN(0)));
  return ox_set(n, 0, tg_repeat(IN(0), r, k));
}

/* Pad: modes by name; pads (begin..., end...) for all axes or for `axes` (opset 18). */
static int op_pad(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x);
  int64_t pads[2 * MAXD], axes[MAXD], before[MAXD] = {0}, after[MAXD] = {0};
  double value = 0;
  int k = n->opset >= 11 ? ox_host_ints(IN(1), pads, 2 * MAXD) : ox_attr_ints(n, "pads", pads, 2 * MAXD);
  if (k < 0) return k == -1 ? ox_fail(n, TG_ERR_ARG, "no pads") : -1;
  if (n->opset >= 11 && IN(2) && tg_numel(IN(2)) > 0 && ox_host_doubles(IN(2), &value, 1) < 0) return -1;
  if (n->opset < 11) value = ox_attr_f(n, "value", 0.0);
  int na = IN(3) ? ox_host_ints(IN(3), axes, MAXD) : nd;
  if (!IN(3))
    for (int i = 0; i < nd; i++) axes[i] = i;
  if (na < 0 || k != 2 * na) return ox_fail(n, TG_ERR_ARG, "%d pads for %d axes", k, na);
  for (int i = 0; i < na; i++) {
    int a = ox_axis(n, axes[i], nd);
    if (a < 0) return -1;
    before[a] = pads[i], after[a] = pads[na + i];
  }
  const char *mode = ox_attr_s(n, "mode", "constant");
  static const struct { const char *name; tg_padding m; } modes[] = {
      {"constant", TG_PAD_CONSTANT}, {"reflect", TG_PAD_REFLECT}, {"edge", TG_PAD_REPLICATE}, {"wrap", TG_PAD_CIRCULAR}};
  for (int i = 0; i < 4; i++)
    if (!strcmp(mode, modes[i].name)) return ox_set(n, 0, tg_pad_mode(x, before, after, modes[i].m, value));
  return ox_fail(n, TG_ERR_ARG, "mode '%s' is not supported", mode);
}

/* ---------------------------------------------------------------- constants */

static int op_constant(ox_node *n) {
  const Onnx__AttributeProto *a;
  if ((a = ox_attr(n, "value")) && a->t) return ox_set(n, 0, ox_tensor_from_proto(a->t, NULL));
  if ((a = ox_attr(n, "value_float"))) return ox_set(n, 0, tg_scalar(a->f, TG_FLOAT32));
  if ((a = ox_attr(n, "value_int"))) return ox_set(n, 0, tg_from_data(&a->i, TG_INT64, NULL, 0));
  if ((a = ox_attr(n, "value_floats"))) {
    int64_t c = (int64_t)a->n_floats;
    return ox_set(n, 0, tg_from_data(a->floats ? (void *)a->floats : (void *)&c, TG_FLOAT32, &c, 1));
  }
  if ((a = ox_attr(n, "value_ints"))) return ox_set(n, 0, ints_tensor(a->ints ? a->ints : (int64_t *)&a->n_ints, (int64_t)a->n_ints));
  return ox_fail(n, TG_ERR_ARG, "no value attribute that is supported (sparse_value and strings are not)");
}

static int op_constant_of_shape(ox_node *n) {
  int64_t s[MAXD];
  int k = ox_host_ints(IN(0), s, MAXD);
  if (k < 0) return -1;
  const Onnx__AttributeProto *a = ox_attr(n, "value");
  if (!a || !a->t) return ox_set(n, 0, tg_zeros(s, k, TG_FLOAT32));
  tg_tensor *v = ox_tensor_from_proto(a->t, NULL);
  if (!v || tg_numel(v) != 1) return v ? ox_fail(n, TG_ERR_ARG, "value must have one element") : -1;
  return ox_set(n, 0, tg_contiguous(tg_expand(tg_reshape(v, NULL, 0), s, k)));
}

static int op_range(ox_node *n) {
  double v[3];
  for (int i = 0; i < 3; i++)
    if (ox_host_doubles(IN(i), &v[i], 1) != 1) return ox_fail(n, TG_ERR_ARG, "input %d must be a scalar", i);
  if (v[2] == 0) return ox_fail(n, TG_ERR_ARG, "delta is 0");
  tg_dtype dt = tg_get_dtype(IN(0));
  double count = ceil((v[1] - v[0]) / v[2]);
  if (count <= 0) return ox_set(n, 0, tg_zeros((int64_t[]){0}, 1, dt));
  return ox_set(n, 0, tg_cast(tg_add_s(tg_mul_s(tg_arange(0, count, 1, TG_FLOAT64), v[2]), v[0]), dt));
}

static int op_eye_like(ox_node *n) {
  tg_tensor *x = IN(0);
  if (tg_ndim(x) != 2) return ox_fail(n, TG_ERR_ARG, "input must be 2-D");
  int dt = ox_attr(n, "dtype") ? ox_dtype((int)ox_attr_i(n, "dtype", 1), "EyeLike dtype") : (int)tg_get_dtype(x);
  if (dt < 0) return -1;
  int64_t r = tg_dim(x, 0), c = tg_dim(x, 1), k = ox_attr_i(n, "k", 0);
  tg_tensor *ri = tg_reshape(tg_arange(0, (double)r, 1, TG_INT64), (int64_t[]){r, 1}, 2);
  tg_tensor *ci = tg_reshape(tg_arange(0, (double)c, 1, TG_INT64), (int64_t[]){1, c}, 2);
  return ox_set(n, 0, tg_cast(tg_eq(tg_sub(ci, ri), tg_full((int64_t[]){1, 1}, 2, (double)k, TG_INT64)), (tg_dtype)dt));
}

static int op_one_hot(ox_node *n) {
  tg_tensor *idx = IN(0), *vals = IN(2);
  int64_t depth;
  double d;
  if (ox_host_doubles(IN(1), &d, 1) != 1) return ox_fail(n, TG_ERR_ARG, "depth must be a scalar");
  depth = (int64_t)d;
  int on = tg_ndim(idx) + 1, axis = ox_axis(n, ox_attr_i(n, "axis", -1), on);
  if (axis < 0 || !vals || depth < 1) return ox_fail(n, TG_ERR_ARG, "bad depth or values");
  tg_tensor *oh = tg_one_hot(wrap_index(idx, depth), depth, TG_BOOL);
  int order[MAXD];
  for (int i = 0, k = 0; i < on; i++) order[i] = i == axis ? on - 1 : k++;
  oh = tg_permute(oh, order, on);
  tg_tensor *off = tg_slice(vals, 0, 0, 1, 1), *onv = tg_slice(vals, 0, 1, 2, 1);
  return ox_set(n, 0, tg_where(oh, tg_reshape(onv, NULL, 0), tg_reshape(off, NULL, 0)));
}

static int op_trilu(ox_node *n) {
  int64_t k = 0;
  if (IN(1) && ox_host_ints(IN(1), &k, 1) != 1) return ox_fail(n, TG_ERR_ARG, "k must be a scalar");
  return ox_set(n, 0, ox_attr_i(n, "upper", 1) ? tg_triu(IN(0), k) : tg_tril(IN(0), k));
}

/* DepthToSpace / SpaceToDepth: reshape, permute, reshape (NCHW). */
static int op_depth_space(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t s[MAXD], b = ox_attr_i(n, "blocksize", 0);
  if (tg_shape(x, s, MAXD) != 4 || b < 1 || b > 65536) return ox_fail(n, TG_ERR_ARG, "needs a 4-D input and blocksize 1 to 65536");
  int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  if (!strcmp(n->np->op_type, "SpaceToDepth")) {
    int64_t s6[6] = {N, C, H / b, b, W / b, b}, o[4] = {N, C * b * b, H / b, W / b};
    int p[6] = {0, 3, 5, 1, 2, 4};
    return ox_set(n, 0, tg_reshape(tg_permute(tg_reshape(x, s6, 6), p, 6), o, 4));
  }
  bool crd = !strcmp(ox_attr_s(n, "mode", "DCR"), "CRD");
  int64_t dcr[6] = {N, b, b, C / (b * b), H, W}, crds[6] = {N, C / (b * b), b, b, H, W}, o[4] = {N, C / (b * b), H * b, W * b};
  int pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
  return ox_set(n, 0, tg_reshape(tg_permute(tg_reshape(x, crd ? crds : dcr, 6), crd ? pc : pd, 6), o, 4));
}

static int op_nonzero(ox_node *n) {
  tg_tensor *r = tg_nonzero(IN(0));
  return ox_set(n, 0, r ? tg_transpose(r, 0, 1) : NULL);
}

/* Compress: the positions where the condition is true, along axis (none: flattened). */
static int op_compress(ox_node *n) {
  tg_tensor *x = IN(0), *c = IN(1);
  const Onnx__AttributeProto *a = ox_attr(n, "axis");
  if (!x || !c) return -1;
  if (!a) x = tg_flatten(x, 0, tg_ndim(x) - 1 < 0 ? 0 : tg_ndim(x) - 1);
  int axis = ox_axis(n, a ? a->i : 0, tg_ndim(x));
  if (axis < 0) return -1;
  int64_t len = tg_numel(c), dim = tg_dim(x, axis);
  if (len > dim) len = dim;
  tg_tensor *pos = tg_nonzero(tg_slice(tg_reshape(c, (int64_t[]){tg_numel(c)}, 1), 0, 0, len, 1));
  if (!pos) return -1;
  return ox_set(n, 0, tg_index_select(x, axis, tg_reshape(pos, (int64_t[]){tg_dim(pos, 0)}, 1)));
}

/* ---------------------------------------------------------------- the table */

const ox_op ox_ops_shape[] = {
    {"Reshape", 5, op_reshape, "allowzero"},
    {"Shape", 1, op_shape, "start,end"},
    {"Size", 1, op_size, ""},
    {"Flatten", 1, op_flatten, "axis"},
    {"Squeeze", 1, op_squeeze, "axes"},
    {"Unsqueeze", 1, op_unsqueeze, "axes"},
    {"Transpose", 1, op_transpose, "perm"},
    {"Concat", 4, op_concat, "axis"},
    {"Split", 2, op_split, "axis,split,num_outputs"},
    {"Slice", 1, op_slice, "starts,ends,axes"},
    {"Gather", 1, op_gather, "axis"},
    {"GatherElements", 11, op_gather_elements, "axis"},
    {"GatherND", 11, op_gather_nd, "batch_dims"},
    {"ScatterND", 11, op_scatter_nd, "reduction"},
    {"ScatterElements", 11, op_scatter_elements, "axis,reduction"},
    {"Scatter", 9, op_scatter_elements, "axis"},
    {"Expand", 8, op_expand, ""},
    {"Tile", 6, op_tile, ""},
    {"Pad", 2, op_pad, "mode,pads,value"},
    {"Constant", 1, op_constant, "value,value_float,value_floats,value_int,value_ints"},
    {"ConstantOfShape", 9, op_constant_of_shape, "value"},
    {"Range", 11, op_range, ""},
    {"EyeLike", 9, op_eye_like, "dtype,k"},
    {"OneHot", 9, op_one_hot, "axis"},
    {"Trilu", 14, op_trilu, "upper"},
    {"DepthToSpace", 1, op_depth_space, "blocksize,mode"},
    {"SpaceToDepth", 1, op_depth_space, "blocksize"},
    {"NonZero", 9, op_nonzero, ""},
    {"Compress", 9, op_compress, "axis"},
    {NULL, 0, NULL, NULL},
};
