/* gpt2.c — GPT-2: loading (a Hugging Face directory or a GGUF file), a new randomly
 * initialized model, saving in the Hugging Face layout, the forward pass over a batch (for
 * training and full recompute), and decoding through a key/value cache.
 *
 * Every weight is held as a float32 tensor in the orientation the forward pass multiplies by:
 * linear weights (in, out) like Hugging Face's Conv1D. GGUF stores them (out, in), so they are
 * kept as a lazy transpose of the file's tensor; quantized GGUF weights stay raw blocks with
 * lazy dequantization ops (gguf.c), which fuse into the matmul that reads them. The per-layer
 * tensors are described once, in `slots`: names in both layouts and shapes. See docs/llm.md. */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"
#include "tensor/tensor.h"
#include "tg_llm.h"
#include "tg_nn.h"

typedef struct layer {
  tg_tensor *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *out_w, *out_b;
} layer;

struct tg_gpt2 {
  tg_gpt2_config cfg;
  tg_tensor *wte, *wpe, *lnf_w, *lnf_b, *head; /* head (V, E): the output projection, wte when tied */
  layer *h;
  tg_kv_cache *cache; /* n_layer caches of batch 1 once tg_gpt2_reset ran */
  float *wte_host, *wpe_host; /* float32 host copies for the cached steps' row gathers (made at the first) */
  bool use_jit;               /* one-token steps replay a tg_jit (tg_gpt2_use_jit) */
  tg_jit *jit;                /* recorded for the current cache; freed by tg_gpt2_reset */
  tg_symvar *pos;             /* start_pos in [0, pos_max]: one-token steps attend over cache[:pos+1] */
  int64_t pos_max;
  bool jit_form;              /* the caches are in attend_at's form, (1, H, start_pos + 1, D) (caches_form) */
};

/* ---------------------------------------------------------------- the tensor table */

/* The sizes a shape is written in. */
typedef enum dim { D_E, D_3E, D_I, D_V, D_P } dim;

/* One tensor: where it lives, its Hugging Face and GGUF names (per layer: after "h.N." and
 * "blk.N."), its shape as Hugging Face stores it, and whether it is a Conv1D weight (GGUF
 * stores those transposed). */
typedef struct slot {
  size_t off;
  const char *hf, *gg;
  int ndim;
  dim d[2];
  bool conv1d;
} slot;

#define L(f) offsetof(layer, f)
static const slot layer_slots[] = {
  {L(ln1_w), "ln_1.weight", "attn_norm.weight", 1, {D_E}, false},
  {L(ln1_b), "ln_1.bias", "attn_norm.bias", 1, {D_E}, false},
  {L(qkv_w), "attn.c_attn.weight", "attn_qkv.weight", 2, {D_E, D_3E}, true},
  {L(qkv_b), "attn.c_attn.bias", "attn_qkv.bias", 1, {D_3E}, false},
  {L(proj_w), "attn.c_proj.weight", "attn_output.weight", 2, {D_E, D_E}, true},
  {L(proj_b), "attn.c_proj.bias", "attn_output.bias", 1, {D_E}, false},
  {L(ln2_w), "ln_2.weight", "ffn_norm.weight", 1, {D_E}, false},
  {L(ln2_b), "ln_2.bias", "ffn_norm.bias", 1, {D_E}, false},
  {L(fc_w), "mlp.c_fc.weight", "ffn_up.weight", 2, {D_E, D_I}, true},
  {L(fc_b), "mlp.c_fc.bias", "ffn_up.bias", 1, {D_I}, false},
  {L(out_w), "mlp.c_proj.weight", "ffn_down.weight", 2, {D_I, D_E}, true},
  {L(out_b), "mlp.c_proj.bias", "ffn_down.bias", 1, {D_E}, false},
};
#undef L
#define NSLOTS ((int)(sizeof layer_slots / sizeof layer_slots[0]))

#define M(f) offsetof(struct tg_gpt2, f)
static const slot model_slots[] = {
  {M(wte), "wte.weight", "token_embd.weight", 2, {D_V, D_E}, false},
  {M(wpe), "wpe.weight", "position_embd.weight", 2, {D_P, D_E}, false},
  {M(lnf_w), "ln_f.weight", "output_norm.weight", 1, {D_E}, false},
  {M(lnf_b), "ln_f.bias", "output_norm.bias", 1, {D_E}, false},
};
#undef M

static int64_t dim_size(const tg_gpt2_config *c, dim d) {
  static const size_t at[] = {[D_E] = offsetof(tg_gpt2_config, n_embd), [D_I] = offsetof(tg_gpt2_config, n_inner),
                              [D_V] = offsetof(tg_gpt2_config, vocab_size), [D_P] = offsetof(tg_gpt2_config, n_positions)};
  return d == D_3E ? 3 * c->n_embd : *(const int64_t *)((const char *)c + at[d]);
}

static tg_tensor **slot_ptr(void *base, const slot *s) { return (tg_tensor **)((char *)base + s->off); }

/* Tensor i of the model in table order (0..3 the model's, then 12 per layer) and its slot. */
static int n_tensors(const tg_gpt2 *m) { return 4 + NSLOTS * (int)m->cfg.n_layer; }
static tg_tensor **tensor_at(tg_gpt2 *m, int i, const slot **s) {
  *s = i < 4 ? &model_slots[i] : &layer_slots[(i - 4) % NSLOTS];
  return slot_ptr(i < 4 ? (void *)m : (void *)&m->h[(i - 4) / NSLOTS], *s);
}

/* ---------------------------------------------------------------- config */

/* The limits a configuration must respect (they bound every allocation made from it). */
static int check_config(const char *op, const char *file, const tg_gpt2_config *c) {
  static const struct { const char *name; size_t off; int64_t max; } lim[] = {
    {"n_layer", offsetof(tg_gpt2_config, n_layer), 1024},      {"n_head", offsetof(tg_gpt2_config, n_head), 1024},
    {"n_embd", offsetof(tg_gpt2_config, n_embd), 65536},       {"n_inner", offsetof(tg_gpt2_config, n_inner), 1 << 20},
    {"vocab_size", offsetof(tg_gpt2_config, vocab_size), 1 << 24}, {"n_positions", offsetof(tg_gpt2_config, n_positions), 1 << 20},
  };
  for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
    int64_t v = *(const int64_t *)((const char *)c + lim[i].off);
    if (v < 1 || v > lim[i].max)
      return tg_set_error(TG_ERR_ARG, "%s: %s: %s must be in 1..%lld, got %lld", op, file, lim[i].name, (long long)lim[i].max,
                          (long long)v);
  }
  if (c->n_embd % c->n_head)
    return tg_set_error(TG_ERR_ARG, "%s: %s: n_embd %lld is not a multiple of n_head %lld", op, file, (long long)c->n_embd,
                        (long long)c->n_head);
  if (!(c->eps > 0 && c->eps < 1)) return tg_set_error(TG_ERR_ARG, "%s: %s: layer_norm_epsilon must be in (0, 1), got %g", op, file, c->eps);
  return 0;
}

/* A small reader for config.json: the top-level object's members, any JSON value skipped. */
typedef struct cfg_reader { const char *p, *end; } cfg_reader;

static void ws(cfg_reader *r) {
  while (r->p < r->end && isspace((unsigned char)*r->p)) r->p++;
}

/* Skip a string starting at '"'; its contents (escapes left as they are) in [*s, *e). */
static bool skip_string(cfg_reader *r, const char **s, const char **e) {
  if (r->p >= r->end || *r->p != '"') return false;
  *s = ++r->p;
  while (r->p < r->end && *r->p != '"') r->p += *r->p == '\\' ? 2 : 1;
  if (r->p >= r->end) return false;
  *e = r->p++;
  return true;
}

/* Skip one value: a string, a scalar, or a nested object/array (brackets counted). */
static bool skip_value(cfg_reader *r) {
  const char *s, *e;
  ws(r);
  if (r->p >= r->end) return false;
  if (*r->p == '"') return skip_string(r, &s, &e);
  if (*r->p != '{' && *r->p != '[') {
    const char *start = r->p;
    while (r->p < r->end && !strchr(",}] \t\r\n", *r->p)) r->p++;
    return r->p > start;
  }
  int64_t depth = 0;
  do {
    if (*r->p == '"') {
      if (!skip_string(r, &s, &e)) return false;
      continue;
    }
    depth += (*r->p == '{' || *r->p == '[') - (*r->p == '}' || *r->p == ']');
    r->p++;
  } while (depth > 0 && r->p < r->end);
  return depth == 0;
}

/* The keys config.json may set, how, and whether it must. */
typedef enum cfg_kind { K_INT, K_INT_OR_NULL, K_FLOAT, K_ACT, K_FALSE } cfg_kind;
static const struct { const char *key; cfg_kind kind; size_t off; bool required; } cfg_keys[] = {
  {"n_layer", K_INT, offsetof(tg_gpt2_config, n_layer), true},
  {"n_head", K_INT, offsetof(tg_gpt2_config, n_head), true},
  {"n_embd", K_INT, offsetof(tg_gpt2_config, n_embd), true},
  {"vocab_size", K_INT, offsetof(tg_gpt2_config, vocab_size), true},
  {"n_positions", K_INT, offsetof(tg_gpt2_config, n_positions), true},
  {"n_inner", K_INT_OR_NULL, offsetof(tg_gpt2_config, n_inner), false},
  {"layer_norm_epsilon", K_FLOAT, offsetof(tg_gpt2_config, eps), false},
  {"activation_function", K_ACT, 0, false},
  {"scale_attn_by_inverse_layer_idx", K_FALSE, 0, false},
};

/* Hugging Face's activation names → tg's GELU forms (gelu_new and its aliases are the tanh form). */
static const struct { const char *name; bool erf; } activations[] = {
  {"gelu_new", false}, {"gelu_pytorch_tanh", false}, {"gelu_fast", false}, {"gelu", true},
};

/* One member's value [s, e) (a string's contents for strings) into c. */
static int cfg_set(const char *file, int k, const char *s, const char *e, bool quoted, tg_gpt2_config *c) {
  char buf[64];
  size_t n = (size_t)(e - s);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, s, n), buf[n] = 0;
  cfg_kind kind = cfg_keys[k].kind;
  void *at = (char *)c + cfg_keys[k].off;
  char *stop = NULL;
  if (kind == K_ACT) {
    for (size_t i = 0; quoted && i < sizeof activations / sizeof activations[0]; i++)
      if (!strcmp(buf, activations[i].name)) return c->gelu_erf = activations[i].erf, 0;
    return tg_set_error(TG_ERR_IO, "gpt2_load: %s: activation_function \"%s\" is not supported (gelu_new, gelu)", file, buf);
  }
  if (kind == K_FALSE) return !quoted && !strcmp(buf, "false") ? 0 : tg_set_error(TG_ERR_IO, "gpt2_load: %s: %s %s is not supported", file, cfg_keys[k].key, buf);
  if (kind == K_INT_OR_NULL && !quoted && !strcmp(buf, "null")) return 0;
  if (kind == K_FLOAT) {
    double v = quoted ? NAN : strtod(buf, &stop);
    if (stop && *stop == 0 && stop != buf) return *(double *)at = v, 0;
  } else {
    long long v = quoted ? 0 : strtoll(buf, &stop, 10);
    if (stop && *stop == 0 && stop != buf) return *(int64_t *)at = v, 0;
  }
  return tg_set_error(TG_ERR_IO, "gpt2_load: %s: %s must be a number, got %s%s%s", file, cfg_keys[k].key, quoted ? "\"" : "",
                      buf, quoted ? "\"" : "");
}

/* Parse config.json's text into c (defaults for what it leaves out; n_inner 0 = 4 n_embd). */
static int parse_config(const char *file, const char *text, size_t len, tg_gpt2_config *c) {
  *c = (tg_gpt2_config){.eps = 1e-5};
  bool seen[sizeof cfg_keys / sizeof cfg_keys[0]] = {0};
  cfg_reader r = {text, text + len};
  ws(&r);
  if (r.p >= r.end || *r.p++ != '{') return tg_set_error(TG_ERR_IO, "gpt2_load: %s: not a JSON object", file);
  for (ws(&r); r.p < r.end && *r.p != '}';) {
    const char *ks, *ke, *vs, *ve;
    if (!skip_string(&r, &ks, &ke)) break;
    ws(&r);
    if (r.p >= r.end || *r.p++ != ':') break;
    ws(&r);
    bool quoted = r.p < r.end && *r.p == '"';
    vs = r.p + quoted;
    if (!skip_value(&r)) break;
    ve = r.p - quoted;
    for (size_t k = 0; k < sizeof cfg_keys / sizeof cfg_keys[0]; k++)
      if ((size_t)(ke - ks) == strlen(cfg_keys[k].key) && !memcmp(ks, cfg_keys[k].key, (size_t)(ke - ks))) {
        int rc = cfg_set(file, (int)k, vs, ve, quoted, c);
        if (rc < 0) return rc;
        seen[k] = true;
      }
    ws(&r);
    if (r.p < r.end && *r.p == ',') r.p++, ws(&r);
  }
  if (r.p >= r.end || *r.p != '}') return tg_set_error(TG_ERR_IO, "gpt2_load: %s: bad JSON at byte %lld", file, (long long)(r.p - text));
  for (size_t k = 0; k < sizeof cfg_keys / sizeof cfg_keys[0]; k++)
    if (cfg_keys[k].required && !seen[k]) return tg_set_error(TG_ERR_IO, "gpt2_load: %s: \"%s\" is missing", file, cfg_keys[k].key);
  if (!c->n_inner && c->n_embd > 0 && c->n_embd <= 65536) c->n_inner = 4 * c->n_embd;
  return check_config("gpt2_load", file, c);
}

/* ---------------------------------------------------------------- making a model */

static tg_gpt2 *alloc_model(const tg_gpt2_config *cfg) {
  tg_gpt2 *m = calloc(1, sizeof *m);
  if (m) m->h = calloc((size_t)cfg->n_layer, sizeof *m->h);
  if (!m || !m->h) {
    if (m) free(m);
    tg_set_error(TG_ERR_NOMEM, "gpt2: out of memory");
    return NULL;
  }
  m->cfg = *cfg;
  return m;
}

void tg_gpt2_free(tg_gpt2 *m) {
  if (!m) return;
  tg_gpt2_reset(m, -1);
  if (m->head != m->wte) tg_free(m->head);
  const slot *sl;
  for (int i = 0; i < n_tensors(m); i++) tg_free(*tensor_at(m, i, &sl));
  free(m->h);
  free(m);
}

/* Check t's shape against the slot's (the GGUF orientation when gguf) and take it into *dst:
 * float32 (a lazy cast otherwise), transposed back for GGUF's Conv1D weights. */
static int take(const char *op, const char *file, const char *name, tg_gpt2 *m, const slot *s, bool gguf, tg_tensor *t,
                tg_tensor **dst) {
  if (!t) return tg_error_status_or(TG_ERR_IO);
  int64_t want[2], got[2] = {0, 0};
  for (int i = 0; i < s->ndim; i++) want[i] = dim_size(&m->cfg, s->d[gguf && s->conv1d ? 1 - i : i]);
  int nd = tg_ndim(t);
  for (int i = 0; i < nd && i < 2; i++) got[i] = tg_dim(t, i);
  if (nd != s->ndim || got[0] != want[0] || (nd == 2 && got[1] != want[1])) {
    char w[64], g[96];
    snprintf(w, sizeof w, s->ndim == 1 ? "(%lld)" : "(%lld, %lld)", (long long)want[0], (long long)want[1]);
    if (nd > 2) snprintf(g, sizeof g, "rank %d", nd);
    else snprintf(g, sizeof g, nd == 1 ? "(%lld)" : "(%lld, %lld)", (long long)got[0], (long long)got[1]);
    return tg_set_error(TG_ERR_IO, "%s: %s: tensor \"%s\" has shape %s, expected %s", op, file, name, g, w);
  }
  if (!tg_dtype_is_float(tg_get_dtype(t)))
    return tg_set_error(TG_ERR_IO, "%s: %s: tensor \"%s\" is %s, not a float", op, file, name, tg_dtype_name(tg_get_dtype(t)));
  if (tg_get_dtype(t) != TG_FLOAT32) t = tg_cast(t, TG_FLOAT32);
  if (gguf && s->conv1d) t = tg_transpose(t, 0, 1);
  if (!t) return tg_error_status_or(TG_ERR_NOMEM);
  *dst = tg_retain(t);
  return 0;
}

/* A name source: the tensor called name into *t: 0, 1 if there is none, or a negative status. */
typedef int (*find_fn)(void *src, const char *name, tg_tensor **t);

/* Tensor i's name: prefix, then per layer "h.N." / "blk.N.", then the slot's name. */
static void tensor_name(char *buf, size_t cap, int i, const slot *s, bool gguf, const char *prefix) {
  const char *base = gguf ? s->gg : s->hf;
  if (i < 4) snprintf(buf, cap, "%s%s", prefix, base);
  else snprintf(buf, cap, gguf ? "%sblk.%d.%s" : "%sh.%d.%s", prefix, (i - 4) / NSLOTS, base);
}

/* Fill every slot of m from src. */
static int fill(const char *op, const char *file, tg_gpt2 *m, bool gguf, find_fn find, void *src, const char *prefix) {
  char name[256];
  for (int i = 0; i < n_tensors(m); i++) {
    const slot *s;
    tg_tensor **dst = tensor_at(m, i, &s);
    tensor_name(name, sizeof name, i, s, gguf, prefix);
    tg_tensor *t = NULL;
    int rc = find(src, name, &t);
    if (rc > 0) return tg_set_error(TG_ERR_IO, "%s: %s: tensor \"%s\" is missing", op, file, name);
    if (rc == 0) rc = take(op, file, name, m, s, gguf, t, dst);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ---------------------------------------------------------------- Hugging Face directory */

static char *read_text(const char *op, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return tg_set_error(TG_ERR_IO, "%s: cannot open %s", op, path), NULL;
  char *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  bool more = buf && fgetc(f) != EOF;
  fclose(f);
  if (!buf || more) return free(buf), tg_set_error(buf ? TG_ERR_IO : TG_ERR_NOMEM, "%s: %s: %s", op, path, buf ? "larger than 1 MiB" : "out of memory"), NULL;
  buf[n] = 0, *len = n;
  return buf;
}

static int find_sd(void *src, const char *name, tg_tensor **t) {
  const tg_state_dict *sd = src;
  for (int i = 0; i < sd->n; i++)
    if (!strcmp(sd->names[i], name)) return *t = sd->tensors[i], 0;
  return 1;
}

/* "transformer." when the file's names carry it (GPT2LMHeadModel), else "" (GPT2Model). */
static const char *hf_prefix(const tg_state_dict *sd) {
  for (int i = 0; i < sd->n; i++)
    if (!strcmp(sd->names[i], "transformer.wte.weight")) return "transformer.";
  return "";
}

tg_gpt2 *tg_gpt2_load(const char *dir) {
  if (!dir) return tg_set_error(TG_ERR_ARG, "gpt2_load: NULL directory"), NULL;
  char path[4096];
  size_t len;
  tg_gpt2_config cfg;
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *text = read_text("gpt2_load", path, &len);
  if (!text) return NULL;
  int rc = parse_config(path, text, len, &cfg);
  free(text);
  if (rc < 0) return NULL;
  tg_state_dict sd = {0};
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  tg_gpt2 *m = NULL;
  tg_scope *s = tg_scope_begin();
  if (tg_safetensors_read(path, &sd) == 0 && (m = alloc_model(&cfg)) && fill("gpt2_load", path, m, false, find_sd, &sd, hf_prefix(&sd)) < 0)
    tg_gpt2_free(m), m = NULL;
  tg_scope_end(s);
  tg_state_dict_free(&sd);
  if (m) m->head = m->wte;
  return m;
}

/* ---------------------------------------------------------------- GGUF */

static int find_gguf(void *src, const char *name, tg_tensor **t) {
  if (tg_gguf_find_tensor(src, name) < 0) return 1;
  *t = tg_gguf_tensor(src, name);
  return *t ? 0 : tg_error_status_or(TG_ERR_IO);
}

/* gpt2.* metadata → cfg (vocab size from token_embd's rows). */
static int gguf_config(tg_gguf *g, const char *path, tg_gpt2_config *cfg) {
  static const struct { const char *key; size_t off; } keys[] = {
    {"gpt2.block_count", offsetof(tg_gpt2_config, n_layer)},      {"gpt2.attention.head_count", offsetof(tg_gpt2_config, n_head)},
    {"gpt2.embedding_length", offsetof(tg_gpt2_config, n_embd)}, {"gpt2.feed_forward_length", offsetof(tg_gpt2_config, n_inner)},
    {"gpt2.context_length", offsetof(tg_gpt2_config, n_positions)},
  };
  const char *arch = tg_gguf_get_string(g, "general.architecture", NULL);
  if (!arch || strcmp(arch, "gpt2"))
    return tg_set_error(TG_ERR_IO, "gpt2_load_gguf: %s: general.architecture is %s%s%s, not \"gpt2\"", path, arch ? "\"" : "",
                        arch ? arch : "missing", arch ? "\"" : "");
  *cfg = (tg_gpt2_config){.eps = 1e-5};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (tg_gguf_get_int(g, keys[i].key, (int64_t *)((char *)cfg + keys[i].off)) < 0)
      return tg_set_error(TG_ERR_IO, "gpt2_load_gguf: %s: metadata %s is missing or not an integer", path, keys[i].key);
  if (tg_gguf_find_key(g, "gpt2.attention.layer_norm_epsilon") >= 0 && tg_gguf_get_float(g, "gpt2.attention.layer_norm_epsilon", &cfg->eps) < 0)
    return tg_error_status();
  tg_gguf_tensor_info info;
  int64_t at = tg_gguf_find_tensor(g, "token_embd.weight");
  if (at < 0 || tg_gguf_tensor_info_at(g, at, &info) < 0 || info.ndim != 2)
    return tg_set_error(TG_ERR_IO, "gpt2_load_gguf: %s: tensor \"token_embd.weight\" is missing or not 2-D", path);
  cfg->vocab_size = info.shape[0];
  return check_config("gpt2_load_gguf", path, cfg);
}

tg_gpt2 *tg_gpt2_load_gguf(const char *path) {
  if (!path) return tg_set_error(TG_ERR_ARG, "gpt2_load_gguf: NULL path"), NULL;
  tg_gguf *g = tg_gguf_open(path);
  if (!g) return NULL;
  tg_gpt2_config cfg;
  tg_gpt2 *m = NULL;
  tg_scope *s = tg_scope_begin();
  if (gguf_config(g, path, &cfg) == 0 && (m = alloc_model(&cfg))) {
    slot out = {offsetof(struct tg_gpt2, head), NULL, "output.weight", 2, {D_V, D_E}, false};
    int rc = fill("gpt2_load_gguf", path, m, true, find_gguf, g, "");
    if (rc == 0 && tg_gguf_find_tensor(g, "output.weight") >= 0) /* an untied output projection */
      rc = take("gpt2_load_gguf", path, "output.weight", m, &out, true, tg_gguf_tensor(g, "output.weight"), &m->head);
    else if (rc == 0) m->head = m->wte;
    if (rc < 0) tg_gpt2_free(m), m = NULL;
  }
  tg_scope_end(s);
  tg_gguf_close(g);
  return m;
}

/* ---------------------------------------------------------------- a new model, saving */

tg_gpt2 *tg_gpt2_new(const tg_gpt2_config *config) {
  if (!config) return tg_set_error(TG_ERR_ARG, "gpt2_new: NULL config"), NULL;
  tg_gpt2_config cfg = *config;
  if (!cfg.n_inner && cfg.n_embd > 0 && cfg.n_embd <= 65536) cfg.n_inner = 4 * cfg.n_embd;
  if (check_config("gpt2_new", "config", &cfg) < 0) return NULL;
  tg_gpt2 *m = alloc_model(&cfg);
  if (!m) return NULL;
  /* Hugging Face's init: weights N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)),
   * biases 0, norms 1 */
  int rc = 0;
  tg_scope *s = tg_scope_begin();
  for (int i = 0; i < n_tensors(m) && rc == 0; i++) {
    const slot *sl;
    tg_tensor **dst = tensor_at(m, i, &sl);
    int64_t shape[2] = {dim_size(&cfg, sl->d[0]), sl->ndim == 2 ? dim_size(&cfg, sl->d[1]) : 1};
    bool norm_w = strstr(sl->hf, "ln_") && strstr(sl->hf, "weight"), residual = strstr(sl->hf, "c_proj.weight");
    tg_tensor *t = sl->ndim == 2 ? tg_normal(shape, 2, 0, residual ? 0.02 / sqrt(2.0 * (double)cfg.n_layer) : 0.02, TG_FLOAT32)
                   : norm_w      ? tg_ones(shape, 1, TG_FLOAT32)
                                 : tg_zeros(shape, 1, TG_FLOAT32);
    t = t ? tg_contiguous(t) : NULL;
    if (!t || tg_realize(t) < 0 || !tg_requires_grad(t, true)) rc = tg_error_status_or(TG_ERR_NOMEM);
    else *dst = tg_retain(t);
  }
  tg_scope_end(s);
  if (rc < 0) return tg_gpt2_free(m), NULL;
  m->head = m->wte;
  return m;
}

tg_tensor **tg_gpt2_parameters(tg_gpt2 *m, int *n) {
  if (!m || !n) return tg_set_error(TG_ERR_ARG, "gpt2_parameters: NULL argument"), NULL;
  *n = n_tensors(m);
  tg_tensor **out = malloc(sizeof *out * (size_t)*n);
  if (!out) return tg_set_error(TG_ERR_NOMEM, "gpt2_parameters: out of memory"), NULL;
  for (int i = 0; i < *n; i++) {
    const slot *sl;
    out[i] = *tensor_at(m, i, &sl);
  }
  return out;
}

const tg_gpt2_config *tg_gpt2_get_config(const tg_gpt2 *m) { return m ? &m->cfg : NULL; }

static int write_config(const char *path, const tg_gpt2_config *c) {
  FILE *f = fopen(path, "w");
  if (!f) return tg_set_error(TG_ERR_IO, "gpt2_save: cannot write %s", path);
  fprintf(f,
          "{\n  \"activation_function\": \"%s\",\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"bos_token_id\": 0,\n"
          "  \"eos_token_id\": 0,\n  \"layer_norm_epsilon\": %.17g,\n  \"model_type\": \"gpt2\",\n  \"n_embd\": %lld,\n"
          "  \"n_head\": %lld,\n  \"n_inner\": %lld,\n  \"n_layer\": %lld,\n  \"n_positions\": %lld,\n  \"torch_dtype\": \"float32\",\n"
          "  \"vocab_size\": %lld\n}\n",
          c->gelu_erf ? "gelu" : "gelu_new", c->eps, (long long)c->n_embd, (long long)c->n_head, (long long)c->n_inner,
          (long long)c->n_layer, (long long)c->n_positions, (long long)c->vocab_size);
  return fclose(f) == 0 ? 0 : tg_set_error(TG_ERR_IO, "gpt2_save: cannot write %s", path);
}

/* Rewrite the safetensors file tmp as path with "__metadata__": {"format": "pt"} first in
 * its header: transformers refuses a file without it (tg_safetensors_save writes none). */
static int add_format(const char *tmp, const char *path) {
  FILE *in = fopen(tmp, "rb"), *out = in ? fopen(path, "wb") : NULL;
  unsigned char len8[8];
  char *head = NULL, buf[1 << 16];
  int ok = out && fread(len8, 1, 8, in) == 8;
  uint64_t n = 0;
  for (int i = 7; ok && i >= 0; i--) n = n << 8 | len8[i];
  ok = ok && n >= 2 && n < (1u << 30) && (head = malloc(n + 64)) && fread(head, 1, n, in) == n && head[0] == '{';
  if (ok) {
    static const char meta[] = "{\"__metadata__\":{\"format\":\"pt\"},";
    uint64_t m = sizeof meta - 1 + n - 1, pad = (8 - m % 8) % 8;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((m + pad) >> (8 * i));
    ok = fwrite(len8, 1, 8, out) == 8 && fwrite(meta, 1, sizeof meta - 1, out) == sizeof meta - 1 &&
         fwrite(head + 1, 1, n - 1, out) == n - 1 && fwrite("        ", 1, pad, out) == pad;
  }
  for (size_t k; ok && (k = fread(buf, 1, sizeof buf, in)) > 0;) ok = fwrite(buf, 1, k, out) == k;
  ok = ok && !ferror(in);
  free(head);
  if (in) fclose(in);
  if (out && fclose(out) != 0) ok = 0;
  remove(tmp);
  return ok ? 0 : tg_set_error(TG_ERR_IO, "gpt2_save: cannot write %s", path);
}

int tg_gpt2_save(tg_gpt2 *m, const char *dir) {
  if (!m || !dir) return tg_set_error(TG_ERR_ARG, "gpt2_save: NULL argument");
  char path[4096], name[256];
  snprintf(path, sizeof path, "%s/config.json", dir);
  int rc = write_config(path, &m->cfg);
  tg_state_dict sd = {0};
  tg_scope *s = tg_scope_begin();
  for (int i = 0; i < n_tensors(m) && rc == 0; i++) { /* linear weights are (in, out), as Conv1D stores them */
    const slot *sl;
    tg_tensor *t = *tensor_at(m, i, &sl);
    tensor_name(name, sizeof name, i, sl, false, "transformer.");
    rc = tg_state_dict_add(&sd, name, tg_contiguous(tg_detach(t)));
  }
  char final[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.tmp", dir);
  snprintf(final, sizeof final, "%s/model.safetensors", dir);
  if (rc == 0) rc = tg_safetensors_save(path, &sd);
  if (rc == 0) rc = add_format(path, final);
  tg_scope_end(s);
  tg_state_dict_free(&sd);
  return rc;
}

/* ---------------------------------------------------------------- forward */

static tg_tensor *linear(tg_tensor *x, tg_tensor *w, tg_tensor *b) { return tg_add(tg_matmul(x, w), b); }

/* (B, T, E) → (B, H, T, D) */
static tg_tensor *heads(tg_tensor *x, int64_t h) {
  int64_t shape[4] = {tg_dim(x, 0), tg_dim(x, 1), h, tg_dim(x, 2) / h};
  return tg_transpose(tg_reshape(x, shape, 4), 1, 2);
}

/* The cache c (1, H, M, D) with t (1, H, 1, D) at position pos, an int32 (1) tensor: data, not
 * a constant, so one recording serves every position. Only cache[:, :, :start_pos + 1] (a
 * variable size, docs/symbolic.md) is read and written: the rows before pos are copied, row
 * pos is t, and the rows after it are neither read nor stored (the kernel's loop and stores end
 * at start_pos + 1), so a step's cache traffic grows with the position instead of being the
 * whole cache. */
static tg_tensor *put_at(tg_tensor *c, tg_tensor *t, tg_tensor *pos, tg_symvar *start) {
  int64_t n = tg_dim(c, 2), col[2] = {n, 1};
  int64_t from[4] = {0, 0, 0, 0}, to[4] = {tg_dim(c, 0), tg_dim(c, 1), tg_var_dim(start, 1), tg_dim(c, 3)};
  return tg_where(tg_reshape(tg_eq(tg_arange(0, (double)n, 1, TG_INT32), pos), col, 2), t, tg_shrink(c, from, to));
}

/* Attention of one query at position pos over the cache with k and v written at pos (the
 * cache assigned: the JIT's state). The new values equal the old ones but at pos, so kernels
 * reading the cache before or after the assign compute the same. The keys and values
 * attended, and assigned, are cache[:, :, :start_pos + 1]: one set of kernels serves every
 * position, and each step reads only the positions written so far. The cache tensors keep
 * that variable dim between steps (the next step binds start_pos one higher: its last row is
 * the one put_at writes); caches_form moves them between this form and the whole cache. */
static tg_tensor *attend_at(tg_kv_cache *c, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *pos, tg_symvar *start) {
  tg_tensor *kn = put_at(c->k, k, pos, start), *vn = put_at(c->v, v, pos, start);
  tg_tensor *o = tg_scaled_dot_product_attention(q, kn, vn, NULL, false);
  return tg_assign(c->k, kn) < 0 || tg_assign(c->v, vn) < 0 ? NULL : o;
}

/* A cache tensor between the two paths, with start_pos bound to the last position written:
 * into the form attend_at assigns, (1, H, start_pos + 1, D), before the JIT's steps (its
 * recording calls must see the cache as later calls do: one form, one set of kernels); else
 * the whole (1, H, M, D) again, zeros after the rows written (a replay leaves the rest of the
 * buffer unwritten), for tg_attention's path. A copy of the rows written, once per switch. */
static int cache_form(tg_tensor *t, tg_symvar *start, bool jit) {
  int64_t none[4] = {0, 0, 0, 0}, to[4], after[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++) to[i] = i == 2 ? tg_var_dim(start, 1) : tg_dim(t, i);
  after[2] = tg_var_expr(start, -1, tg_dim(t, 2) - 1);
  tg_scope *s = tg_scope_begin();
  tg_tensor *rows = tg_shrink(t, none, to);
  int rc = tg_assign(t, jit ? rows : tg_pad(rows, none, after, 0));
  if (rc == 0) rc = tg_realize(t);
  tg_scope_end(s);
  return rc;
}

static int caches_form(tg_gpt2 *m, int64_t last, bool jit) {
  if (!m->pos || (m->jit_form == jit && !(jit && !m->jit))) return 0; /* a new recording: the form again, as a view */
  if (tg_var_bind(m->pos, last) < 0) return -1;
  for (int64_t l = 0; l < m->cfg.n_layer; l++)
    if (cache_form(m->cache[l].k, m->pos, jit) < 0 || cache_form(m->cache[l].v, m->pos, jit) < 0) return -1;
  m->jit_form = jit;
  return 0;
}

/* One block on x (B, T, E); cache NULL: causal attention over x alone; pos (one token through
 * the JIT): attend_at. */
static tg_tensor *block(const tg_gpt2 *m, const layer *ly, tg_tensor *x, tg_kv_cache *cache, tg_tensor *pos) {
  const tg_gpt2_config *c = &m->cfg;
  int64_t e = c->n_embd, sizes[3] = {e, e, e}, back[3] = {tg_dim(x, 0), tg_dim(x, 1), e};
  tg_tensor *qkv[3], *a = linear(tg_layernorm(x, 1, ly->ln1_w, ly->ln1_b, c->eps), ly->qkv_w, ly->qkv_b);
  /* cached: the stream x and q, k, v realized once, in one schedule (the attention and the
   * cache writes are separate schedules that read them) */
  tg_tensor *both[2] = {x, a};
  if ((cache && !pos && tg_realize_many(both, 2) < 0) || tg_split(a, sizes, 3, 2, qkv) < 0) return NULL;
  tg_tensor *q = heads(qkv[0], c->n_head), *k = heads(qkv[1], c->n_head), *v = heads(qkv[2], c->n_head);
  tg_tensor *o = pos     ? attend_at(cache, q, k, v, pos, m->pos)
                 : cache ? tg_attention(q, k, v, cache, true)
                         : tg_scaled_dot_product_attention(q, k, v, NULL, true);
  o = tg_reshape(tg_transpose(o, 1, 2), back, 3);
  x = tg_add(x, linear(o, ly->proj_w, ly->proj_b));
  tg_tensor *f = linear(tg_layernorm(x, 1, ly->ln2_w, ly->ln2_b, c->eps), ly->fc_w, ly->fc_b);
  f = c->gelu_erf ? tg_gelu_erf(f) : tg_gelu(f);
  return tg_add(x, linear(f, ly->out_w, ly->out_b));
}

/* The embedded input x (B, T, E) → logits (B, T, V); pos: see block(). */
static tg_tensor *forward(tg_gpt2 *m, tg_tensor *x, bool cached, tg_tensor *pos) {
  /* Cached steps realize the residual stream at the start of every block (block()): each
   * layer's attention realizes (it writes the cache), and a lazy stream would make every later
   * layer recompute the blocks before it inside its own kernels. */
  for (int64_t l = 0; l < m->cfg.n_layer && x; l++) x = block(m, &m->h[l], x, cached ? &m->cache[l] : NULL, pos);
  /* and before the final layernorm: fused into its row kernel, the last block's output
   * projection stored x times W (E x 4E floats, a kernel of its own) and summed it after */
  if (cached && !pos && x && tg_realize(x) < 0) return NULL;
  x = tg_layernorm(x, 1, m->lnf_w, m->lnf_b, m->cfg.eps);
  return tg_matmul(x, tg_transpose(m->head, 0, 1));
}

tg_tensor *tg_gpt2_forward(tg_gpt2 *m, tg_tensor *ids) {
  if (!m || !ids) return tg_set_error(TG_ERR_ARG, "gpt2_forward: NULL argument"), NULL;
  tg_dtype dt = tg_get_dtype(ids);
  if (tg_ndim(ids) != 2 || tg_dtype_is_float(dt) || dt == TG_BOOL)
    return tg_set_error(TG_ERR_ARG, "gpt2_forward: ids must be an integer (B, T) tensor"), NULL;
  if (tg_dim(ids, 1) < 1 || tg_dim(ids, 1) > m->cfg.n_positions)
    return tg_set_error(TG_ERR_ARG, "gpt2_forward: T = %lld must be in 1..n_positions (%lld)", (long long)tg_dim(ids, 1),
                        (long long)m->cfg.n_positions), NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *pos = tg_arange(0, (double)tg_dim(ids, 1), 1, TG_INT32);
  tg_tensor *r = forward(m, tg_add(tg_embedding_lookup(m->wte, ids), tg_embedding_lookup(m->wpe, pos)), false, NULL);
  if (r) r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

int tg_gpt2_reset(tg_gpt2 *m, int64_t max_len) {
  if (!m) return tg_set_error(TG_ERR_ARG, "gpt2_reset: NULL model");
  for (int64_t l = 0; m->cache && l < m->cfg.n_layer; l++) tg_kv_cache_free(&m->cache[l]);
  free(m->cache), m->cache = NULL;
  free(m->wte_host), free(m->wpe_host); /* remade from the (maybe trained) weights at the next step */
  m->wte_host = m->wpe_host = NULL;
  tg_jit_free(m->jit), m->jit = NULL; /* it recorded the old cache's tensors */
  m->jit_form = false;
  if (max_len < 0) return 0;
  if (max_len == 0) max_len = m->cfg.n_positions;
  if (max_len > m->cfg.n_positions)
    return tg_set_error(TG_ERR_ARG, "gpt2_reset: max_len %lld is above n_positions %lld", (long long)max_len, (long long)m->cfg.n_positions);
  m->cache = calloc((size_t)m->cfg.n_layer, sizeof *m->cache);
  if (!m->cache) return tg_set_error(TG_ERR_NOMEM, "gpt2_reset: out of memory");
  for (int64_t l = 0; l < m->cfg.n_layer; l++) {
    int rc = tg_kv_cache_init(&m->cache[l], 1, m->cfg.n_head, max_len, m->cfg.n_embd / m->cfg.n_head, TG_FLOAT32);
    if (rc < 0) return tg_gpt2_reset(m, -1), rc;
  }
  return 0;
}

/* Host copies of wte and wpe (float32; a quantized table is dequantized once). tg's gathers
 * are masked reductions over the whole table (index.c): a decode step would read all V x E
 * values of wte to embed one token, as many bytes as the output projection. The copies cost
 * (V + P) x E floats of host memory; tg_gpt2_reset drops them. A quantized (lazy) wte is
 * copied through a bitcast to int32 (the same bits): realizing its own node would keep the
 * dequantized float32 table as its value (a handle holds it, schedule.c), and the tied
 * output projection would then read 4 bytes a weight every step instead of the blocks. */
static int host_tables(tg_gpt2 *m) {
  if (m->wte_host) return 0;
  size_t nt = (size_t)(m->cfg.vocab_size * m->cfg.n_embd), np = (size_t)(m->cfg.n_positions * m->cfg.n_embd);
  float *t = malloc(sizeof(float) * nt), *p = malloc(sizeof(float) * np);
  int rc = t && p ? 0 : tg_set_error(TG_ERR_NOMEM, "gpt2_step: out of memory for the embedding tables");
  tg_scope *s = tg_scope_begin();
  tg_tensor *wte = tg_is_realized(m->wte) ? m->wte : tg_bitcast(tg_detach(m->wte), TG_INT32);
  if (rc == 0) rc = tg_to_host(wte, t, sizeof(float) * nt);
  if (rc == 0) rc = tg_to_host(tg_detach(m->wpe), p, sizeof(float) * np);
  tg_scope_end(s);
  if (rc < 0) return free(t), free(p), rc;
  m->wte_host = t, m->wpe_host = p;
  return 0;
}

int64_t tg_gpt2_position(const tg_gpt2 *m) { return m && m->cache ? m->cache[0].len : -1; }

/* One token's step as a tg_jit function: in[0] the embedded token (1, 1, E), in[1] its
 * position (int32 (1)); out[0] the logits (1, V). */
static int decode_fn(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  tg_gpt2 *m = ctx;
  int64_t flat[2] = {1, m->cfg.vocab_size};
  (void)nin, (void)nout;
  out[0] = tg_reshape(forward(m, in[0], true, in[1]), flat, 2);
  return out[0] ? 0 : tg_error_status_or(TG_ERR_ARG);
}

/* A one-token step through the JIT (recorded on the first calls, then replayed): the caches'
 * positions advance here, as tg_attention advances them on the other path. */
static tg_tensor *jit_step(tg_gpt2 *m, tg_tensor *x, int64_t p) {
  int64_t top = m->cache[0].max_len - 1;
  if (!m->pos || m->pos_max != top) { /* a variable per cache length (they live until exit) */
    if (!(m->pos = tg_variable("start_pos", 0, top))) return NULL;
    m->pos_max = top;
  }
  if (caches_form(m, p > 0 ? p - 1 : 0, true) < 0 || tg_var_bind(m->pos, p) < 0) return NULL;
  if (!m->jit && !(m->jit = tg_jit_new(decode_fn, m))) return NULL;
  int32_t p32 = (int32_t)p;
  int64_t one = 1;
  tg_tensor *in[2] = {x, tg_from_data(&p32, TG_INT32, &one, 1)}, *out = NULL;
  if (!in[1] || tg_jit_call(m->jit, in, 2, &out, 1) < 0) return NULL;
  for (int64_t l = 0; l < m->cfg.n_layer; l++) m->cache[l].len++;
  return out;
}

int tg_gpt2_use_jit(tg_gpt2 *m, bool on) {
  if (!m) return tg_set_error(TG_ERR_ARG, "gpt2_use_jit: NULL model");
  if (!on) tg_jit_free(m->jit), m->jit = NULL;
  m->use_jit = on;
  return 0;
}

tg_tensor *tg_gpt2_step(tg_gpt2 *m, const int32_t *ids, int64_t n) {
  if (!m || !ids) return tg_set_error(TG_ERR_ARG, "gpt2_step: NULL argument"), NULL;
  if (!m->cache && tg_gpt2_reset(m, 0) < 0) return NULL;
  int64_t p = m->cache[0].len, max = m->cache[0].max_len;
  if (n < 1 || n > max - p)
    return tg_set_error(TG_ERR_ARG, "gpt2_step: %lld tokens after position %lld do not fit the cache of %lld", (long long)n,
                        (long long)p, (long long)max), NULL;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
      return tg_set_error(TG_ERR_ARG, "gpt2_step: token %lld is %d, outside the vocabulary of %lld", (long long)i, (int)ids[i],
                          (long long)m->cfg.vocab_size), NULL;
  int64_t e = m->cfg.n_embd, shape[3] = {1, n, e}, flat[2] = {n, m->cfg.vocab_size};
  float *x = host_tables(m) < 0 ? NULL : malloc(sizeof(float) * (size_t)(n * e));
  if (!x) return tg_error_status() < 0 ? NULL : (tg_set_error(TG_ERR_NOMEM, "gpt2_step: out of memory"), NULL);
  for (int64_t i = 0; i < n; i++) /* the embeddings, gathered here: the token and position are data */
    for (int64_t j = 0; j < e; j++) x[i * e + j] = m->wte_host[ids[i] * e + j] + m->wpe_host[(p + i) * e + j];
  tg_scope *s = tg_scope_begin();
  tg_tensor *xt = tg_from_data(x, TG_FLOAT32, shape, 3), *r = NULL;
  free(x);
  if (n == 1 && m->use_jit) r = jit_step(m, xt, p);
  else if (!m->pos || caches_form(m, p > 0 ? p - 1 : 0, false) == 0) /* after JIT steps: the whole caches again */
    r = tg_reshape(forward(m, xt, true, NULL), flat, 2);
  if (r && tg_realize(r) < 0) r = NULL;
  if (r) r = tg_keep(r);
  tg_scope_end(s);
  return r;
}
