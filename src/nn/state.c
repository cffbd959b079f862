/* state.c — the state dict: an ordered list of named tensors (PyTorch's state_dict).
 * Entries keep their insertion order (which is the order files are written in and the order
 * tg_state_dict_parameters returns). Each entry holds its own reference (tg_retain) and a copy
 * of its name; tg_state_dict_free releases both. Lookups are linear: dicts are small. */
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"

static int find(const tg_state_dict *sd, const char *name) {
  for (int i = 0; i < sd->n; i++)
    if (!strcmp(sd->names[i], name)) return i;
  return -1;
}

/* Make room for one more entry. */
static int reserve(tg_state_dict *sd) {
  if (sd->n < sd->cap) return 0;
  int cap = sd->cap ? 2 * sd->cap : 16;
  char **names = realloc(sd->names, sizeof *names * (size_t)cap);
  if (!names) return TG_ERR_NOMEM;
  sd->names = names;
  tg_tensor **tensors = realloc(sd->tensors, sizeof *tensors * (size_t)cap);
  if (!tensors) return TG_ERR_NOMEM;
  sd->tensors = tensors;
  sd->cap = cap;
  return 0;
}

int tg_state_dict_add(tg_state_dict *sd, const char *name, tg_tensor *t) {
  if (!sd || !name) return tg_set_error(TG_ERR_ARG, "state_dict_add: NULL %s", sd ? "name" : "state dict");
  if (!t) {
    if (!tg_last_error()[0]) tg_set_error(TG_ERR_ARG, "state_dict_add: NULL tensor for \"%s\"", name);
    return TG_ERR_ARG;
  }
  if (!name[0]) return tg_set_error(TG_ERR_ARG, "state_dict_add: empty name");
  if (sd->n < 0 || sd->n > sd->cap) return tg_set_error(TG_ERR_ARG, "state_dict_add: corrupt state dict (n=%d cap=%d)", sd->n, sd->cap);
  if (find(sd, name) >= 0) return tg_set_error(TG_ERR_ARG, "state_dict_add: duplicate name \"%s\"", name);
  char *copy = strdup(name);
  if (!copy || reserve(sd) < 0) {
    free(copy);
    return tg_set_error(TG_ERR_NOMEM, "state_dict_add: out of memory adding \"%s\"", name);
  }
  sd->names[sd->n] = copy;
  sd->tensors[sd->n++] = tg_retain(t);
  return 0;
}

tg_tensor *tg_state_dict_get(const tg_state_dict *sd, const char *name) {
  if (!sd || !name) {
    tg_set_error(TG_ERR_ARG, "state_dict_get: NULL %s", sd ? "name" : "state dict");
    return NULL;
  }
  int i = find(sd, name);
  if (i < 0) tg_set_error(TG_ERR_ARG, "state_dict_get: no tensor named \"%s\" (%d entries)", name, sd->n);
  return i < 0 ? NULL : sd->tensors[i];
}

void tg_state_dict_free(tg_state_dict *sd) {
  if (!sd) return;
  for (int i = 0; i < sd->n; i++) {
    free(sd->names[i]);
    tg_free(sd->tensors[i]);
  }
  free(sd->names);
  free(sd->tensors);
  memset(sd, 0, sizeof *sd);
}

/* Never NULL on success (an empty list is a 1-slot allocation), so NULL always means error. */
tg_tensor **tg_state_dict_parameters(const tg_state_dict *sd, int *n) {
  if (n) *n = 0;
  if (!sd || !n) {
    tg_set_error(TG_ERR_ARG, "state_dict_parameters: NULL %s", sd ? "count pointer" : "state dict");
    return NULL;
  }
  tg_tensor **out = malloc(sizeof *out * (size_t)(sd->n > 0 ? sd->n : 1));
  if (!out) {
    tg_set_error(TG_ERR_NOMEM, "state_dict_parameters: out of memory");
    return NULL;
  }
  for (int i = 0; i < sd->n; i++)
    if (tg_get_requires_grad(sd->tensors[i])) out[(*n)++] = sd->tensors[i];
  return out;
}
