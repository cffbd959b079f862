/* device.c — the device table, opening devices, the default device, and the public device
 * calls (tg_device_available, tg_set_default_device). A host device kind (CPU, LLVM) has up to
 * MAX_INSTANCES logical instances, "CPU:1" ...: each its own device (number, name, queue in
 * the engine) sharing the kind's render, compile and launch; "CPU" is "CPU:0". */
#include "device/device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "device/llvm.h"
#include "runtime/helpers.h"
#include "runtime/threadpool.h"

/* Every device tg knows, in the order `DEV` names them. */
static device *const devices[] = {&cpu_device, &llvm_device, &cl_device, &cuda_device};
enum { NDEVICES = sizeof devices / sizeof devices[0] };

static struct {
  pthread_mutex_t lock;
  int state[NDEVICES]; /* 0 not opened yet, 1 open, else the negative status of the failed open */
  char why[NDEVICES][256];
  const device *chosen; /* tg_set_default_device */
  char env[64];         /* DEV, read once ("" until read) */
  /* instance i > 0 of kind k: a copy of the kind's struct made when first asked for (after the
   * kind is open, so its caps are filled); published with release, read with acquire */
  device inst[NDEVICES][MAX_INSTANCES];
  char inst_name[NDEVICES][MAX_INSTANCES][16];
  _Atomic bool inst_ready[NDEVICES][MAX_INSTANCES];
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Host kinds have instances; a device with memory of its own has one (its context). */
static bool has_instances(const device *d) { return d->alloc == NULL; }

/* The kind and instance a name means ("cpu", "CPU:0", "llvm:3"); the kind's index, or -1 when
 * no kind has that name, -2 when the instance is not a number in range for the kind. */
static int find(const char *name, int *instance) {
  size_t n = strcspn(name, ":");
  int k = -1;
  for (int i = 0; i < NDEVICES && k < 0; i++)
    if (strlen(devices[i]->name) == n && !strncasecmp(devices[i]->name, name, n)) k = i;
  *instance = 0;
  if (k < 0 || name[n] != ':') return k;
  const char *num = name + n + 1;
  if (num[0] < '0' || num[0] > '9' || (num[1] && (num[0] == '0' || num[1] < '0' || num[1] > '9' || num[2]))) return -2;
  *instance = atoi(num);
  return *instance == 0 || (*instance < MAX_INSTANCES && has_instances(devices[k])) ? k : -2;
}

static const device *unknown_device(const char *name, int why) {
  char known[128] = "";
  for (int k = 0; k < NDEVICES; k++) snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", devices[k]->name);
  if (why == -2)
    tg_set_error(TG_ERR_DEVICE, "device \"%s\": no such instance (CPU and LLVM have instances :0 to :%d; CL and CUDA only :0)",
                 name, MAX_INSTANCES - 1);
  else tg_set_error(TG_ERR_DEVICE, "device \"%s\": no such device (tg knows %s, with :n for instances)", name ? name : "(null)", known);
  return NULL;
}

/* Instance i of kind k (the kind is open), made on first use. */
static const device *instance(int k, int i) {
  if (i == 0) return devices[k];
  if (atomic_load_explicit(&reg.inst_ready[k][i], memory_order_acquire)) return &reg.inst[k][i];
  pthread_mutex_lock(&reg.lock);
  if (!atomic_load_explicit(&reg.inst_ready[k][i], memory_order_relaxed)) {
    snprintf(reg.inst_name[k][i], sizeof reg.inst_name[k][i], "%s:%d", devices[k]->name, i);
    reg.inst[k][i] = *devices[k];
    reg.inst[k][i].name = reg.inst_name[k][i];
    reg.inst[k][i].base = devices[k];
    reg.inst[k][i].instance = i;
    atomic_store_explicit(&reg.inst_ready[k][i], true, memory_order_release);
  }
  pthread_mutex_unlock(&reg.lock);
  return &reg.inst[k][i];
}

const device *device_get(const char *name) {
  int inst = 0, i = name ? find(name, &inst) : -1;
  if (i < 0) return unknown_device(name, i);
  pthread_mutex_lock(&reg.lock);
  if (reg.state[i] == 0) { /* open it once; its error message is kept for later callers */
    int rc = devices[i]->open();
    reg.state[i] = rc < 0 ? rc : 1;
    if (rc < 0) snprintf(reg.why[i], sizeof reg.why[i], "%s", tg_last_error());
  }
  int state = reg.state[i];
  pthread_mutex_unlock(&reg.lock);
  if (state == 1) return instance(i, inst);
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

/* Numbers: kind k's instance i is 1 + k + NDEVICES * i (the kinds keep 1..NDEVICES). */
int device_number(const device *d) {
  if (!d) return DEVICE_NONE;
  const device *base = device_base(d);
  for (int k = 0; k < NDEVICES; k++)
    if (devices[k] == base) return 1 + k + NDEVICES * d->instance;
  return DEVICE_NONE;
}

const device *device_of_number(int n) {
  if (n <= 0 || n > NDEVICES * MAX_INSTANCES) return NULL;
  int k = (n - 1) % NDEVICES, i = (n - 1) / NDEVICES;
  if (i == 0) return devices[k];
  return atomic_load_explicit(&reg.inst_ready[k][i], memory_order_acquire) ? &reg.inst[k][i] : NULL;
}

int tg_device_available(const char *name) {
  int inst;
  if (!name || find(name, &inst) < 0) return 0;
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

/* ---------------------------------------------------------------- host caches */

static int64_t sysfs_cache_bytes(int level) {
  for (int i = 0; i < 8; i++) {
    char path[96], type[32] = "";
    int lv = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fscanf(f, "%d", &lv) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!ok || lv != level || !(f = fopen(path, "r"))) continue;
    ok = fscanf(f, "%31s", type) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!ok || !strcmp(type, "Instruction") || !(f = fopen(path, "r"))) continue;
    long long n = 0;
    char unit = 0;
    ok = fscanf(f, "%lld%c", &n, &unit) >= 1;
    fclose(f);
    if (ok && n > 0 && n < (1LL << 40)) return (int64_t)n * (unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1);
  }
  return 0;
}

int host_launch(kernel_fn fn, void **args, int nargs, long long n) {
  (void)nargs;
  threadpool_run(fn, args, n, 0);
  return 0;
}

int64_t host_cache_bytes(int level) {
  int64_t n = sysfs_cache_bytes(level);
  long s = level == 2 ? sysconf(_SC_LEVEL2_CACHE_SIZE) : level == 3 ? sysconf(_SC_LEVEL3_CACHE_SIZE) : 0;
  return n > 0 ? n : s > 0 ? s : 0;
}
