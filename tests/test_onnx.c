/* test_onnx.c — the ONNX importer's API (include/tg_onnx.h) on small models from
 * tests/fixtures/onnx (written by tests/onnx/gen_fixtures.py): a model's inputs, outputs and
 * values against hand-computed ones, external data, TensorProto files, and every kind of bad
 * file (truncated, garbage, huge dims, a cycle, a missing initializer, a wrong dtype, short
 * data, a value defined twice, external data outside the model's directory), each checked
 * for its error message. The op conformance tests are tests/onnx/conformance.c. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "tg_onnx.h"

#define FIX "tests/fixtures/onnx/"

/* Load path, expect failure with `want` in the message. */
static int load_fails_with(const char *path, const char *want) {
  tg_clear_error();
  tg_onnx_model *m = tg_onnx_load(path);
  if (m) {
    tg_onnx_free(m);
    printf("  %s loaded, expected an error with \"%s\"\n", path, want);
    return 0;
  }
  if (!strstr(tg_last_error(), want)) printf("  %s: message \"%s\" lacks \"%s\"\n", path, tg_last_error(), want);
  return strstr(tg_last_error(), want) != NULL;
}

TEST(onnx_add_relu_gemm_values) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  CHECK(tg_onnx_num_inputs(m) == 1); /* W and one are initializers, not inputs */
  CHECK(!strcmp(tg_onnx_input_name(m, 0), "X"));
  CHECK(tg_onnx_input_name(m, 1) == NULL);
  CHECK(tg_onnx_num_outputs(m) == 2);
  tg_dtype dt = TG_BOOL;
  int64_t shape[4] = {0};
  CHECK(tg_onnx_input_info(m, 0, &dt, shape, 4) == 2 && dt == TG_FLOAT32 && shape[0] == 2 && shape[1] == 3);
  CHECK(tg_onnx_input_info(m, 1, &dt, shape, 4) == -1);
  CHECK(!strcmp(tg_onnx_output_name(m, 0), "Y") && !strcmp(tg_onnx_output_name(m, 1), "Z"));
  tg_scope *s = tg_scope_begin();
  float x[6] = {-2, 0, 1, 3, -10, 2}, w[6] = {1, 2, 3, 4, 5, 6}, y[6], z[4];
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){2, 3}, 2), *out[2];
  CHECK(tg_onnx_run(m, &in, 1, out, 2) == 0);
  CHECK(tg_to_host(out[0], y, sizeof y) == 0 && tg_to_host(out[1], z, sizeof z) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(y[i], (x[i] + w[i] > 0 ? x[i] + w[i] : 0) - 1, 1e-6);
  for (int r = 0; r < 2; r++) /* Z = X W^T */
    for (int c = 0; c < 2; c++) {
      double ref = 0;
      for (int k = 0; k < 3; k++) ref += x[r * 3 + k] * w[c * 3 + k];
      CHECK_CLOSE(z[r * 2 + c], ref, 1e-6);
    }
  tg_scope_end(s);
  tg_onnx_free(m);
}

/* tg_onnx_run through a tg_jit (example_onnx_run --jit, bench/onnx_bench.py): the recorded
 * kernels replay with each call's input and give the values a plain run gives. */
static int run_add_relu(void *m, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  return tg_onnx_run(m, in, nin, out, nout);
}

TEST(onnx_run_replays_through_tg_jit) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_jit *jit = tg_jit_new(run_add_relu, m);
  for (int call = 0; call < 5; call++) {
    tg_scope *s = tg_scope_begin();
    float x[6], y[6], z[4], y_ref[6], z_ref[4];
    for (int i = 0; i < 6; i++) x[i] = (float)((i * 7 + call * 3) % 11) - 5;
    tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){2, 3}, 2), *out[2], *ref[2];
    CHECK(tg_jit_call(jit, &in, 1, out, 2) == 0);
    CHECK(tg_onnx_run(m, &in, 1, ref, 2) == 0);
    CHECK(tg_to_host(out[0], y, sizeof y) == 0 && tg_to_host(out[1], z, sizeof z) == 0);
    CHECK(tg_to_host(ref[0], y_ref, sizeof y_ref) == 0 && tg_to_host(ref[1], z_ref, sizeof z_ref) == 0);
    CHECK(!memcmp(y, y_ref, sizeof y) && !memcmp(z, z_ref, sizeof z));
    tg_scope_end(s);
  }
  CHECK(tg_jit_replaying(jit));
  tg_jit_free(jit);
  tg_onnx_free(m);
}

TEST(onnx_outputs_belong_to_the_callers_scope) {
  tg_stats before = tg_get_stats();
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_ones((int64_t[]){2, 3}, 2, TG_FLOAT32), *out[2];
  CHECK(tg_onnx_run(m, &in, 1, out, 2) == 0);
  CHECK(tg_realize(out[0]) == 0 && tg_realize(out[1]) == 0);
  float y[6];
  CHECK(tg_to_host(out[0], y, sizeof y) == 0 && y[5] == 6.0f); /* 1 + 6, relu, - 1 */
  tg_scope_end(s);
  tg_onnx_free(m);
  CHECK(tg_get_stats().buffers_alive == before.buffers_alive); /* nothing left behind */
}

TEST(onnx_external_data) {
  tg_onnx_model *m = tg_onnx_load(FIX "external.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_full((int64_t[]){2, 3}, 2, 10, TG_FLOAT32), *out;
  float y[6];
  CHECK(tg_onnx_run(m, &in, 1, &out, 1) == 0 && tg_to_host(out, y, sizeof y) == 0);
  for (int i = 0; i < 6; i++) CHECK(y[i] == 11.0f + (float)i); /* W = 1..6 at offset 8 */
  tg_scope_end(s);
  tg_onnx_free(m);
  CHECK(load_fails_with(FIX "external_escape.onnx", "bad external data location '../../../etc/passwd'"));
}

TEST(onnx_load_tensor) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_onnx_load_tensor(FIX "tensor_i64.pb");
  CHECK(t && tg_get_dtype(t) == TG_INT64 && tg_ndim(t) == 2 && tg_dim(t, 0) == 2 && tg_dim(t, 1) == 3);
  int64_t v[6];
  CHECK(t && tg_to_host(t, v, sizeof v) == 0);
  for (int i = 0; t && i < 6; i++) CHECK(v[i] == i);
  tg_clear_error();
  CHECK(tg_onnx_load_tensor(FIX "tensor_truncated.pb") == NULL && strstr(tg_last_error(), "not a TensorProto"));
  CHECK(tg_onnx_load_tensor(FIX "no_such.pb") == NULL && strstr(tg_last_error(), "cannot open"));
  tg_scope_end(s);
}

TEST(onnx_bad_files_fail_with_a_message) {
  CHECK(load_fails_with(FIX "truncated.onnx", "protobuf parse failed"));
  CHECK(load_fails_with(FIX "garbage.onnx", "not an ONNX model"));
  CHECK(load_fails_with(FIX "huge_dims.onnx", "4 bytes of raw data for 1125899906842624 elements"));
  CHECK(load_fails_with(FIX "dims_overflow.onnx", "dims overflow int64 (dim 1 is 1099511627776)"));
  CHECK(load_fails_with(FIX "cycle.onnx", "cycle"));
  CHECK(load_fails_with(FIX "missing_init.onnx", "value 'W', which nothing defines"));
  CHECK(load_fails_with(FIX "wrong_dtype.onnx", "unknown data type 99"));
  CHECK(load_fails_with(FIX "short_data.onnx", "20 bytes of raw data for 6 elements of float32"));
  CHECK(load_fails_with(FIX "twice.onnx", "value 'Y' is defined twice"));
  CHECK(load_fails_with(FIX "no_such_model.onnx", "cannot open"));
  CHECK(load_fails_with(NULL, "NULL path"));
}

TEST(onnx_huge_dims_allocate_nothing) {
  tg_stats before = tg_get_stats();
  CHECK(load_fails_with(FIX "huge_dims.onnx", "W")); /* (2^30, 2^20) floats claimed, 4 bytes present */
  CHECK(tg_get_stats().bytes_alive == before.bytes_alive);
}

/* An op or attribute tg does not implement fails when the model runs, naming it. */
static void run_fails_with(const char *path, const char *want) {
  tg_onnx_model *m = tg_onnx_load(path);
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_ones((int64_t[]){2}, 1, TG_FLOAT32), *out = (tg_tensor *)1;
  tg_clear_error();
  CHECK(tg_onnx_run(m, &in, 1, &out, 1) < 0);
  CHECK(out == NULL);
  CHECK(strstr(tg_last_error(), want) != NULL);
  tg_scope_end(s);
  tg_onnx_free(m);
}

TEST(onnx_unsupported_op_and_attribute_are_named) {
  run_fails_with(FIX "unsupported_op.onnx", "op FancyOp is not supported");
  run_fails_with(FIX "unsupported_attr.onnx", "Relu node '': attribute 'shininess' is not supported");
  run_fails_with(FIX "split_no_outputs.onnx", "Split node '': no outputs");
}

TEST(onnx_run_argument_errors) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_tensor *out[2];
  tg_clear_error();
  CHECK(tg_onnx_run(m, NULL, 0, out, 2) == TG_ERR_ARG && strstr(tg_last_error(), "0 inputs given, the model has 1"));
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_ones((int64_t[]){2, 3}, 2, TG_FLOAT32);
  CHECK(tg_onnx_run(m, &in, 1, out, 1) == TG_ERR_ARG && strstr(tg_last_error(), "1 outputs asked for"));
  tg_tensor *wrong = tg_ones((int64_t[]){4, 5}, 2, TG_FLOAT32); /* does not broadcast with W (2, 3) */
  tg_clear_error();
  CHECK(tg_onnx_run(m, &wrong, 1, out, 2) < 0 && strstr(tg_last_error(), "ONNX Add node"));
  tg_tensor *ints = tg_ones((int64_t[]){2, 3}, 2, TG_INT32);
  CHECK(tg_onnx_run(m, &ints, 1, out, 2) == TG_ERR_ARG &&
        strstr(tg_last_error(), "input 'X' is int32, the model declares float32"));
  tg_tensor *none = NULL;
  CHECK(tg_onnx_run(m, &none, 1, out, 2) < 0 && tg_last_error()[0]);
  tg_scope_end(s);
  CHECK(tg_onnx_run(NULL, NULL, 0, out, 0) == TG_ERR_ARG);
  CHECK(tg_onnx_num_inputs(NULL) == -1 && tg_onnx_output_name(m, -1) == NULL);
  tg_onnx_free(m);
  tg_onnx_free(NULL);
}

/* ---- sequences and optionals (sequence.onnx, gen_fixtures.py: Q = [S[-1], X[0:1], X[1:4]],
 * C = concat(Q), L = len(Q), H = O holds a value) */

static tg_onnx_value tensor_value(tg_tensor **t) { return (tg_onnx_value){TG_ONNX_TENSOR, 1, t}; }

/* Run sequence.onnx with X = 0..11 as (4, 3), S from sequence_2.pb and O; check every output. */
static void check_sequence_model(tg_onnx_model *m, tg_onnx_value o, bool has) {
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  tg_tensor *xt = tg_from_data(x, TG_FLOAT32, (int64_t[]){4, 3}, 2);
  tg_onnx_value in[3] = {tensor_value(&xt), {0}, o}, out[4];
  CHECK(tg_onnx_load_value(FIX "sequence_2.pb", tg_onnx_input_kind(m, 1), &in[1]) == 0);
  CHECK(tg_onnx_run_values(m, in, 3, out, 4) == 0);
  CHECK(out[0].kind == TG_ONNX_SEQUENCE && out[0].n == 3);
  if (out[0].kind != TG_ONNX_SEQUENCE || out[0].n != 3) return;
  const float want_rows[5][3] = {{7, 8, 9}, {0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};
  const int64_t item_rows[3] = {1, 1, 3};
  for (int k = 0, r = 0; k < 3; r += (int)item_rows[k++]) {
    CHECK(tg_ndim(out[0].items[k]) == 2 && tg_dim(out[0].items[k], 0) == item_rows[k]);
    float v[9];
    CHECK(tg_to_host(out[0].items[k], v, (size_t)item_rows[k] * 3 * sizeof(float)) == 0);
    for (int i = 0; i < item_rows[k] * 3; i++) CHECK(v[i] == want_rows[r + i / 3][i % 3]);
  }
  float c[15];
  CHECK(out[1].kind == TG_ONNX_TENSOR && tg_dim(out[1].items[0], 0) == 5 && tg_to_host(out[1].items[0], c, sizeof c) == 0);
  for (int i = 0; i < 15; i++) CHECK(c[i] == want_rows[i / 3][i % 3]);
  int64_t len = 0;
  uint8_t h = 2;
  CHECK(tg_to_host(out[2].items[0], &len, sizeof len) == 0 && len == 3);
  CHECK(tg_to_host(out[3].items[0], &h, 1) == 0 && h == has);
  tg_onnx_value_clear(&in[1]);
  for (int i = 0; i < 4; i++) tg_onnx_value_clear(&out[i]);
}

TEST(onnx_sequences_and_optionals_run) {
  tg_onnx_model *m = tg_onnx_load(FIX "sequence.onnx");
  CHECK(m != NULL);
  if (!m) return;
  CHECK(tg_onnx_input_kind(m, 0) == TG_ONNX_TENSOR && tg_onnx_input_kind(m, 1) == TG_ONNX_SEQUENCE);
  CHECK(tg_onnx_input_kind(m, 2) == (TG_ONNX_TENSOR | TG_ONNX_OPTIONAL) && tg_onnx_input_kind(m, 3) == -1);
  CHECK(tg_onnx_output_kind(m, 0) == TG_ONNX_SEQUENCE && tg_onnx_output_kind(m, 1) == TG_ONNX_TENSOR);
  tg_scope *s = tg_scope_begin();
  check_sequence_model(m, (tg_onnx_value){TG_ONNX_NONE, 0, NULL}, false);
  tg_onnx_value o;
  CHECK(tg_onnx_load_value(FIX "optional_tensor.pb", tg_onnx_input_kind(m, 2), &o) == 0 && o.kind == TG_ONNX_TENSOR);
  check_sequence_model(m, o, true);
  tg_onnx_value_clear(&o);
  tg_scope_end(s);
  tg_onnx_free(m);
}

TEST(onnx_sequence_misuse_fails_with_a_message) {
  tg_onnx_model *m = tg_onnx_load(FIX "sequence.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_ones((int64_t[]){4, 3}, 2, TG_FLOAT32), *items[2] = {x, NULL}, *outs[4];
  tg_onnx_value in[3] = {tensor_value(&x), tensor_value(&x), {TG_ONNX_NONE, 0, NULL}}, out[4];
  tg_clear_error(); /* a tensor where the model declares a sequence */
  CHECK(tg_onnx_run_values(m, in, 3, out, 4) == TG_ERR_ARG &&
        strstr(tg_last_error(), "input 'S' is a tensor, the model declares a sequence"));
  in[1] = (tg_onnx_value){TG_ONNX_SEQUENCE, 2, items}; /* a NULL item */
  CHECK(tg_onnx_run_values(m, in, 3, out, 4) == TG_ERR_ARG && strstr(tg_last_error(), "a NULL item"));
  in[1] = (tg_onnx_value){TG_ONNX_SEQUENCE, 0, items}; /* S[-1] of an empty sequence */
  CHECK(tg_onnx_run_values(m, in, 3, out, 4) < 0 && strstr(tg_last_error(), "SequenceAt node") &&
        strstr(tg_last_error(), "position -1 is outside a sequence of 0"));
  for (int i = 0; i < 4; i++) CHECK(out[i].kind == TG_ONNX_NONE && out[i].items == NULL);
  tg_tensor *plain[3] = {x, x, NULL}; /* tg_onnx_run: S is a tensor, then Q is a sequence output */
  CHECK(tg_onnx_run(m, plain, 3, outs, 4) < 0 && strstr(tg_last_error(), "input 0 must be a sequence"));
  tg_onnx_model *add = tg_onnx_load(FIX "add_relu.onnx"); /* none for a tensor input: omitted */
  tg_onnx_value none = {TG_ONNX_NONE, 0, NULL};
  CHECK(add && tg_onnx_run_values(add, &none, 1, out, 2) < 0 && strstr(tg_last_error(), "Add node '': missing input"));
  tg_onnx_free(add);
  tg_scope_end(s);
  tg_onnx_free(m);
}

TEST(onnx_load_value_files) {
  tg_scope *s = tg_scope_begin();
  tg_onnx_value v;
  CHECK(tg_onnx_load_value(FIX "sequence_2.pb", TG_ONNX_SEQUENCE, &v) == 0 && v.kind == TG_ONNX_SEQUENCE && v.n == 2);
  float a[6], b[3];
  CHECK(v.n == 2 && tg_to_host(v.items[0], a, sizeof a) == 0 && tg_to_host(v.items[1], b, sizeof b) == 0);
  for (int i = 0; i < 6; i++) CHECK(a[i] == i);
  CHECK(b[0] == 7 && b[1] == 8 && b[2] == 9);
  tg_onnx_value_clear(&v);
  CHECK(v.kind == TG_ONNX_NONE && v.items == NULL);
  CHECK(tg_onnx_load_value(FIX "optional_none.pb", TG_ONNX_TENSOR | TG_ONNX_OPTIONAL, &v) == 0 && v.kind == TG_ONNX_NONE);
  tg_clear_error();
  CHECK(tg_onnx_load_value(FIX "sequence_truncated.pb", TG_ONNX_SEQUENCE, &v) < 0 &&
        strstr(tg_last_error(), "not a SequenceProto") && v.kind == TG_ONNX_NONE);
  CHECK(tg_onnx_load_value(FIX "sequence_2.pb", 7, &v) == TG_ERR_ARG && strstr(tg_last_error(), "kind 7"));
  CHECK(tg_onnx_load_value(NULL, TG_ONNX_SEQUENCE, &v) == TG_ERR_ARG);
  CHECK(tg_onnx_load_value(FIX "no_such.pb", TG_ONNX_SEQUENCE, &v) < 0 && strstr(tg_last_error(), "cannot open"));
  tg_onnx_value_clear(NULL);
  tg_scope_end(s);
}

/* ---- Det and RoiAlign (det.onnx, roi_align.onnx) */

/* The determinant of an m x m matrix by Gaussian elimination with partial pivoting (doubles). */
static double naive_det(const float *a0, int m) {
  double a[16 * 16], det = 1;
  for (int i = 0; i < m * m; i++) a[i] = a0[i];
  for (int k = 0; k < m; k++) {
    int p = k;
    for (int r = k + 1; r < m; r++)
      if (fabs(a[r * m + k]) > fabs(a[p * m + k])) p = r;
    if (a[p * m + k] == 0) return 0;
    if (p != k) {
      det = -det;
      for (int c = 0; c < m; c++) {
        double t = a[k * m + c];
        a[k * m + c] = a[p * m + c], a[p * m + c] = t;
      }
    }
    det *= a[k * m + k];
    for (int r = k + 1; r < m; r++) {
      double f = a[r * m + k] / a[k * m + k];
      for (int c = k; c < m; c++) a[r * m + c] -= f * a[k * m + c];
    }
  }
  return det;
}

TEST(onnx_det_against_gaussian_elimination) {
  tg_onnx_model *m = tg_onnx_load(FIX "det.onnx");
  CHECK(m != NULL);
  if (!m) return;
  enum { B = 4, M = 12 };
  static float x[B * M * M];
  uint32_t seed = 12345;
  for (int i = 0; i < B * M * M; i++) seed = seed * 1664525u + 1013904223u, x[i] = (float)((seed >> 8) % 2001) / 1000.f - 1.f;
  for (int c = 0; c < M; c++) x[1 * M * M + 5 * M + c] = x[1 * M * M + 2 * M + c]; /* batch 1: two equal rows */
  memset(x + 2 * M * M, 0, M * M * sizeof(float)); /* batch 2: a permutation (zero diagonal: pivots needed) */
  for (int r = 0; r < M; r++) x[2 * M * M + r * M + (r + 1) % M] = (float)(r + 1);
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){B, M, M}, 3), *out;
  float d[B];
  CHECK(tg_onnx_run(m, &in, 1, &out, 1) == 0 && tg_ndim(out) == 1 && tg_to_host(out, d, sizeof d) == 0);
  for (int b = 0; b < B; b++) {
    double want = naive_det(x + b * M * M, M);
    CHECK(fabs(d[b] - want) <= 1e-4 * fabs(want) + 1e-5);
  }
  CHECK(fabs(d[1]) < 1e-5 && fabs(naive_det(x + 2 * M * M, M)) > 1e8); /* singular; 12! with a sign */
  tg_tensor *rect = tg_ones((int64_t[]){2, 3}, 2, TG_FLOAT32);
  tg_clear_error();
  CHECK(tg_onnx_run(m, &rect, 1, &out, 1) < 0 && strstr(tg_last_error(), "Det node") &&
        strstr(tg_last_error(), "square matrices"));
  tg_scope_end(s);
  tg_onnx_free(m);
}

TEST(onnx_roi_align_constant_image_and_bad_boxes) {
  tg_onnx_model *m = tg_onnx_load(FIX "roi_align.onnx");
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  float boxes[8] = {0, 0, 4, 4, 1, 1, 3, 2}, y[8];
  int64_t idx[2] = {0, 0};
  tg_tensor *in[3] = {tg_full((int64_t[]){1, 1, 4, 4}, 4, 3.0, TG_FLOAT32), tg_from_data(boxes, TG_FLOAT32, (int64_t[]){2, 4}, 2),
                      tg_from_data(idx, TG_INT64, (int64_t[]){2}, 1)},
           *out;
  CHECK(tg_onnx_run(m, in, 3, &out, 1) == 0 && tg_to_host(out, y, sizeof y) == 0);
  for (int i = 0; i < 8; i++) CHECK_CLOSE(y[i], 3.0, 1e-6); /* every sample inside X: weights sum to 1 */
  idx[1] = 5;
  in[2] = tg_from_data(idx, TG_INT64, (int64_t[]){2}, 1);
  tg_clear_error();
  CHECK(tg_onnx_run(m, in, 3, &out, 1) < 0 && strstr(tg_last_error(), "roi 1: batch index 5 of 1"));
  idx[1] = 0, boxes[2] = 1e30f;
  in[1] = tg_from_data(boxes, TG_FLOAT32, (int64_t[]){2, 4}, 2), in[2] = tg_from_data(idx, TG_INT64, (int64_t[]){2}, 1);
  CHECK(tg_onnx_run(m, in, 3, &out, 1) < 0 && strstr(tg_last_error(), "a box beyond 1e6"));
  tg_scope_end(s);
  tg_onnx_free(m);
}

/* SplitToSequence into one item per element, past the 256 parts it once allowed; counted and
 * stacked back (split_to_sequence.onnx). */
TEST(onnx_split_to_sequence_many_parts) {
  tg_onnx_model *m = tg_onnx_load(FIX "split_to_sequence.onnx");
  CHECK(m != NULL);
  if (!m) return;
  enum { N = 300 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i * 7 % 13) - 6.0f;
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){N}, 1), *out[2];
  int64_t len = 0;
  CHECK(tg_onnx_run(m, &in, 1, out, 2) == 0 && tg_to_host(out[0], &len, sizeof len) == 0 && len == N);
  CHECK(tg_to_host(out[1], y, sizeof y) == 0 && !memcmp(x, y, sizeof x));
  tg_scope_end(s);
  tg_onnx_free(m);
}
