/* device.c — the device table, opening devices, the default device, and the public device
 * calls (tg_device_available, tg_set_default_device). */
#include "device/device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device/llvm.h"
#include "runtime/helpers.h"

/* Every device tg knows, in the order `DEV` names them. */
static device *const devices[] = {&cpu_device, &llvm_device, &cl_device, &cuda_device};
enum { NDEVICES = sizeof devices / sizeof devices[0] };

static struct {
  pthread_mutex_t lock;
  int state[NDEVICES]; /* 0 not opened yet, 1 open, else the negative status of the failed open */
  char why[NDEVICES][256];
  const device *chosen; /* tg_set_default_device */
  char env[64];         /* DEV, read once ("" until read) */
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The index of the device a name means ("cpu", "CPU:0"), or -1. */
static int find(const char *name) {
  size_t n = strcspn(name, ":");
  if (name[n] == ':' && strcmp(name + n + 1, "0") != 0) return -1; /* one device of each kind so far */
  for (int i = 0; i < NDEVICES; i++)
    if (strlen(devices[i]->name) == n && !strncasecmp(devices[i]->name, name, n)) return i;
  return -1;
}

const device *device_get(const char *name) {
  int i = name ? find(name) : -1;
  if (i < 0) {
    char known[128] = "";
    for (int k = 0; k < NDEVICES; k++) snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", devices[k]->name);
    tg_set_error(TG_ERR_DEVICE, "device \"%s\": no such device (tg knows %s)", name ? name : "(null)", known);
    return NULL;
  }
  pthread_mutex_lock(&reg.lock);
  if (reg.state[i] == 0) { /* open it once; its error message is kept for later callers */
    int rc = devices[i]->open();
    reg.state[i] = rc < 0 ? rc : 1;
    if (rc < 0) snprintf(reg.why[i], sizeof reg.why[i], "%s", tg_last_error());
  }
  int state = reg.state[i];
  pthread_mutex_unlock(&reg.lock);
  if (state == 1) return devices[i];
  tg_set_error(state, "device %s is not available here: %s", devices[i]->name, reg.why[i]);
  return NULL;
}

const device *device_default(void) {
  pthread_mutex_lock(&reg.lock);
  const device *d = reg.chosen;
  if (!reg.env[0]) { /* read once, like every knob */
    const char *env = getenv("DEV");
    snprintf(reg.env, sizeof reg.env, "%s", env && *env ? env : "");
  }
  char name[64];
  snprintf(name, sizeof name, "%s", reg.env);
  pthread_mutex_unlock(&reg.lock);
  if (d) return d;
  if (name[0]) return device_get(name);
  /* No DEV: the fastest good compiler here. LLVM compiles in process, ~9x cheaper than cc with
   * kernels as fast (docs/performance.md): a first training step's hundred kernels in about a
   * second. Without libLLVM-14, the system compiler. */
  d = tg_device_available("LLVM") ? device_get("LLVM") : device_get("CPU");
  pthread_mutex_lock(&reg.lock);
  snprintf(reg.env, sizeof reg.env, "%s", d ? d->name : "CPU");
  pthread_mutex_unlock(&reg.lock);
  return d;
}

int device_number(const device *d) {
  for (int i = 0; i < NDEVICES; i++)
    if (devices[i] == d) return i + 1;
  return DEVICE_NONE;
}

const device *device_of_number(int n) { return n > 0 && n <= NDEVICES ? devices[n - 1] : NULL; }

int tg_device_available(const char *name) {
  if (!name || find(name) < 0) return 0;
  int status = tg_error_status(); /* asking is not an error: the thread's error stays as it was */
  char keep[1024];
  snprintf(keep, sizeof keep, "%s", tg_last_error());
  bool ok = device_get(name) != NULL;
  tg_clear_error();
  if (status < 0) tg_set_error(status, "%s", keep);
  return ok;
}

int tg_set_default_device(const char *name) {
  const device *d = device_get(name);
  if (!d) return tg_error_status();
  pthread_mutex_lock(&reg.lock);
  reg.chosen = d;
  pthread_mutex_unlock(&reg.lock);
  return 0;
}

int caps_lanes(const device_caps *c, size_t elem_bytes) {
  int lanes = (int)((size_t)c->vector_bytes / (elem_bytes ? elem_bytes : 1));
  return lanes > 16 ? 16 : lanes < 2 ? 2 : lanes;
}

void *device_mem_alloc(const device *d, size_t nbytes) {
  if (d->alloc) return d->alloc(nbytes);
  return aligned_alloc(64, (nbytes + 63) / 64 * 64);
}

void device_mem_free(const device *d, void *mem) {
  if (d->alloc) d->free(mem);
  else free(mem);
}
