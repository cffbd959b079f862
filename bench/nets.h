/* nets.h — the networks the benches train: the demo conv net (examples/mnist.c) and an MLP
 * 784-512-512-10, with random batches. Shared by bench/train_step.c and bench/overhead.c. */
#ifndef TG_BENCH_NETS_H
#define TG_BENCH_NETS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tg.h>

typedef struct net {
  tg_conv2d_layer c[4];
  tg_batchnorm2d bn[2];
  tg_linear fc[3];
  tg_state_dict sd;
  bool conv;
} net;

static int net_init(net *n, bool conv) {
  memset(n, 0, sizeof *n);
  n->conv = conv;
  char name[16];
  if (conv) {
    static const int64_t ch[5] = {1, 32, 32, 64, 64};
    for (int i = 0; i < 4; i++) {
      int k = i < 2 ? 5 : 3;
      snprintf(name, sizeof name, "c%d", i);
      if (tg_conv2d_init(&n->c[i], ch[i], ch[i + 1], k, k, 1, 0, 1, 1, true) < 0 ||
          tg_conv2d_state(&n->c[i], name, &n->sd) < 0) return -1;
    }
    for (int i = 0; i < 2; i++) {
      snprintf(name, sizeof name, "bn%d", i);
      if (tg_batchnorm2d_init(&n->bn[i], i ? 64 : 32) < 0 || tg_batchnorm2d_state(&n->bn[i], name, &n->sd) < 0) return -1;
    }
    return tg_linear_init(&n->fc[0], 576, 10, true) < 0 || tg_linear_state(&n->fc[0], "fc", &n->sd) < 0 ? -1 : 0;
  }
  static const int64_t dims[4] = {784, 512, 512, 10};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "fc%d", i);
    if (tg_linear_init(&n->fc[i], dims[i], dims[i + 1], true) < 0 || tg_linear_state(&n->fc[i], name, &n->sd) < 0) return -1;
  }
  return 0;
}

static void net_free(net *n) {
  tg_state_dict_free(&n->sd);
  for (int i = 0; i < 4; i++) tg_conv2d_free(&n->c[i]);
  for (int i = 0; i < 2; i++) tg_batchnorm2d_free(&n->bn[i]);
  for (int i = 0; i < 3; i++) tg_linear_free(&n->fc[i]);
}

static tg_tensor *net_forward(net *n, tg_tensor *x) {
  static const int two[2] = {2, 2};
  if (!n->conv) {
    x = tg_relu(tg_linear_forward(&n->fc[0], tg_flatten(x, 1, -1)));
    x = tg_relu(tg_linear_forward(&n->fc[1], x));
    return tg_linear_forward(&n->fc[2], x);
  }
  for (int b = 0; b < 2; b++) {
    x = tg_relu(tg_conv2d_forward(&n->c[2 * b], x));
    x = tg_relu(tg_conv2d_forward(&n->c[2 * b + 1], x));
    x = tg_max_pool2d(tg_batchnorm2d_forward(&n->bn[b], x), two, NULL, NULL);
  }
  return tg_linear_forward(&n->fc[0], tg_flatten(x, 1, -1));
}

/* A network with Adam and one random batch (x, y), realized: what a benchmark steps. */
typedef struct net_run {
  net n;
  tg_tensor **params;
  tg_optimizer *opt;
  tg_tensor *x, *y;
} net_run;

static void net_run_free(net_run *r) {
  tg_free(r->x), tg_free(r->y);
  tg_optimizer_free(r->opt);
  free(r->params);
  net_free(&r->n);
}

static int net_run_init(net_run *r, bool conv, int64_t batch) {
  memset(r, 0, sizeof *r);
  tg_manual_seed(0);
  int np;
  if (net_init(&r->n, conv) < 0 || !(r->params = tg_state_dict_parameters(&r->n.sd, &np)) ||
      !(r->opt = tg_adam(r->params, np, 1e-3, 0.9, 0.999, 1e-8))) return net_run_free(r), -1;
  int64_t xs[4] = {batch, 1, 28, 28}, ys[1] = {batch};
  r->x = tg_rand(xs, 4, TG_FLOAT32), r->y = tg_randint(ys, 1, 0, 10, TG_INT32);
  if (!r->x || !r->y || tg_realize(r->x) < 0 || tg_realize(r->y) < 0) return net_run_free(r), -1;
  return 0;
}

/* The loss of the batch (a lazy graph). */
static inline tg_tensor *net_run_loss(net_run *r) { return tg_sparse_cross_entropy(net_forward(&r->n, r->x), r->y, 0.0, -1); }

/* One training step (forward, backward, Adam) on the batch (in[0], in[1]) of the net_run ctx,
 * in tg_jit's form: out[0] is the loss. */
static inline int net_run_step(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  net_run *r = ctx;
  if (nin != 2 || nout != 1) return -1;
  tg_tensor *loss = tg_sparse_cross_entropy(net_forward(&r->n, in[0]), in[1], 0.0, -1);
  if (!loss || tg_backward(loss) < 0) return -1;
  out[0] = loss;
  return tg_optimizer_step(r->opt, out, 1);
}
#endif
