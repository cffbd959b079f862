/* llvm.c — the LLVM device: LLVM IR (render/llvm.c) compiled in process with libLLVM-14's C
 * API, loaded with dlopen, and run on the thread pool like the CPU device's kernels.
 *
 *   IR text ─ parse (LLVMParseIRInContext) ─ verify ─ optimize (new pass manager, LLVMRunPasses
 *   with a TargetMachine for this host's CPU name and features) ─ verify ─ emit an object file
 *   in memory ─ link it into one ORC LLJIT (RuntimeDyld; libm and the rest resolved from this
 *   process) ─ look up the kernels.
 *
 * The C API functions are looked up into a table of pointers (llvm_api below), so libtg never
 * links LLVM and a machine without it simply has no LLVM device. Compiles run in parallel:
 * each has its own LLVMContext and takes a TargetMachine from a pool (a TargetMachine's
 * subtarget cache is not thread-safe); only linking into the JIT holds the lock. Objects are
 * cached on disk like the CPU device's shared objects (disk_cache.h): an entry is the object
 * plus a trailer holding a hash of its bytes, so a truncated or garbled entry is found before
 * RuntimeDyld reads it. Kernel symbols are renamed to name_<IR hash>: one JIT holds every
 * kernel of the process, two different kernels may share a name (its hash is 16 bits), and
 * one IR compiled twice is linked once. */
#include "device/llvm.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "device/disk_cache.h"
#include "runtime/helpers.h"
#include "runtime/threadpool.h"

#define LLVM_LIBRARY "libLLVM-14.so.1"
/* The optimization pipeline and codegen level (TG_LLVM_PASSES, TG_LLVM_CODEGEN override them).
 * Kernels come vectorized, unrolled and with invariants hoisted by tg's own optimizer, so they
 * need allocas promoted, common subexpressions (the broadcasts) merged and instructions
 * combined, not LLVM's full O2: default<O2> took 4.5 s of CPU for the demo's 119 kernels
 * (its loop unroller fully unrolled small loops into thousands of instructions for codegen),
 * this pipeline 0.9 s, and the kernels run as fast (docs/devices.md). Codegen stays at O2. */
#define LLVM_DEFAULT_PASSES "function(sroa,early-cse,instcombine,simplifycfg)"
#define LLVM_DEFAULT_CODEGEN 2

/* The C API functions used: return type, name, parameters. LLVM's handles are opaque pointers
 * (void * here), its enums ints, LLVMBool an int. */
#define LLVM_API(X)                                                                              \
  X(void *, LLVMContextCreate, (void))                                                           \
  X(void, LLVMContextDispose, (void *))                                                          \
  X(void *, LLVMCreateMemoryBufferWithMemoryRange, (const char *, size_t, const char *, int))    \
  X(void *, LLVMCreateMemoryBufferWithMemoryRangeCopy, (const char *, size_t, const char *))     \
  X(const char *, LLVMGetBufferStart, (void *))                                                  \
  X(size_t, LLVMGetBufferSize, (void *))                                                         \
  X(void, LLVMDisposeMemoryBuffer, (void *))                                                     \
  X(int, LLVMParseIRInContext, (void *, void *, void **, char **))                               \
  X(int, LLVMVerifyModule, (void *, int, char **))                                               \
  X(void, LLVMDisposeModule, (void *))                                                           \
  X(void, LLVMDisposeMessage, (char *))                                                          \
  X(void *, LLVMGetNamedFunction, (void *, const char *))                                        \
  X(void, LLVMSetValueName2, (void *, const char *, size_t))                                     \
  X(void, LLVMSetTarget, (void *, const char *))                                                 \
  X(void *, LLVMCreateTargetDataLayout, (void *))                                                \
  X(void, LLVMSetModuleDataLayout, (void *, void *))                                             \
  X(void, LLVMDisposeTargetData, (void *))                                                       \
  X(char *, LLVMGetDefaultTargetTriple, (void))                                                  \
  X(char *, LLVMGetHostCPUName, (void))                                                          \
  X(char *, LLVMGetHostCPUFeatures, (void))                                                      \
  X(int, LLVMGetTargetFromTriple, (const char *, void **, char **))                              \
  X(void *, LLVMCreateTargetMachine, (void *, const char *, const char *, const char *, int, int, int)) \
  X(void, LLVMDisposeTargetMachine, (void *))                                                    \
  X(int, LLVMTargetMachineEmitToMemoryBuffer, (void *, void *, int, char **, void **))           \
  X(void *, LLVMRunPasses, (void *, const char *, void *, void *))                               \
  X(void *, LLVMCreatePassBuilderOptions, (void))                                                \
  X(void, LLVMDisposePassBuilderOptions, (void *))                                               \
  X(void, LLVMPassBuilderOptionsSetLoopUnrolling, (void *, int))                                 \
  X(void, LLVMPassBuilderOptionsSetLoopVectorization, (void *, int))                             \
  X(void, LLVMPassBuilderOptionsSetSLPVectorization, (void *, int))                              \
  X(void, LLVMPassBuilderOptionsSetLoopInterleaving, (void *, int))                              \
  X(char *, LLVMGetErrorMessage, (void *))                                                       \
  X(void, LLVMDisposeErrorMessage, (char *))                                                     \
  X(void *, LLVMOrcCreateLLJIT, (void **, void *))                                               \
  X(void *, LLVMOrcLLJITGetExecutionSession, (void *))                                           \
  X(void, LLVMOrcExecutionSessionSetErrorReporter, (void *, void (*)(void *, void *), void *))   \
  X(void *, LLVMOrcLLJITGetMainJITDylib, (void *))                                               \
  X(char, LLVMOrcLLJITGetGlobalPrefix, (void *))                                                 \
  X(void *, LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess, (void **, char, void *, void *)) \
  X(void, LLVMOrcJITDylibAddGenerator, (void *, void *))                                         \
  X(void *, LLVMOrcJITDylibCreateResourceTracker, (void *))                                      \
  X(void *, LLVMOrcLLJITAddObjectFileWithRT, (void *, void *, void *))                           \
  X(void *, LLVMOrcResourceTrackerRemove, (void *))                                              \
  X(void, LLVMOrcReleaseResourceTracker, (void *))                                               \
  X(void *, LLVMOrcLLJITLookup, (void *, uint64_t *, const char *))                             \
  X(void, LLVMInstallFatalErrorHandler, (void (*)(const char *)))

#define API_FIELD(ret, name, params) ret(*name) params;
typedef struct llvm_api {
  LLVM_API(API_FIELD)
} llvm_api;
#undef API_FIELD

#define API_ENTRY(ret, name, params) {#name, offsetof(llvm_api, name)},
static const struct {
  const char *name;
  size_t at;
} api_names[] = {LLVM_API(API_ENTRY)};
#undef API_ENTRY

/* The native target's initializers (LLVMInitializeNativeTarget is an inline function in
 * LLVM's headers, so there is no symbol for it). */
#if defined(__x86_64__) || defined(__i386__)
#define LLVM_ARCH "X86"
#elif defined(__aarch64__)
#define LLVM_ARCH "AArch64"
#else
#define LLVM_ARCH ""
#endif
static const char *const target_inits[] = {"TargetInfo", "Target", "TargetMC", "AsmPrinter"};

enum { CODEGEN_OBJECT = 1, RELOC_PIC = 2, CODE_MODEL_SMALL = 3, VERIFY_RETURN_STATUS = 2 };

/* The process's one LLVM, loaded once (load_once). The JIT and the set of linked IR hashes are
 * shared under lock; so is the pool of idle TargetMachines (each compile takes one). */
static struct {
  pthread_once_t once;
  llvm_api f;
  void *lib;
  char why[640];          /* why it is unavailable ("" when it is available) */
  char *triple, *cpu, *features;
  void *target, *jit, *jd;
  char passes[256];
  int codegen;
  pthread_mutex_t lock;
  ptrmap linked;          /* IR hash → (void *)1: its kernels are in the JIT */
  VEC(void *) idle_tms;   /* TargetMachines not in use */
} L = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The JIT's session errors (a symbol it cannot resolve) are reported here, not printed. */
static _Thread_local char session_error[512];
/* The kernel this thread is compiling, named if LLVM dies of an internal error. */
static _Thread_local const char *compiling;

/* LLVM exits the process after an internal error ("LLVM ERROR: ..."); say which kernel. */
static void fatal_error(const char *reason) {
  fprintf(stderr, "tg: LLVM failed compiling kernel %s: %s (DEV=CPU avoids LLVM)\n", compiling ? compiling : "?", reason);
}

/* An LLVMErrorRef's message (consumes the error); "" for success. */
static const char *error_text(void *err, char *buf, size_t n) {
  buf[0] = 0;
  if (!err) return buf;
  char *m = L.f.LLVMGetErrorMessage(err);
  snprintf(buf, n, "%s", m ? m : "unknown error");
  if (m) L.f.LLVMDisposeErrorMessage(m);
  return buf;
}

static void report_session_error(void *ctx, void *err) {
  (void)ctx;
  error_text(err, session_error, sizeof session_error);
}

static bool load_symbols(const char *path) {
  for (size_t i = 0; i < sizeof api_names / sizeof *api_names; i++) {
    void *p = dlsym(L.lib, api_names[i].name);
    if (!p) {
      snprintf(L.why, sizeof L.why, "%s lacks %s", path, api_names[i].name);
      return false;
    }
    memcpy((char *)&L.f + api_names[i].at, &p, sizeof p);
  }
  for (size_t i = 0; i < sizeof target_inits / sizeof *target_inits; i++) {
    char name[64];
    snprintf(name, sizeof name, "LLVMInitialize%s%s", LLVM_ARCH, target_inits[i]);
    void (*init)(void) = NULL;
    void *p = *LLVM_ARCH ? dlsym(L.lib, name) : NULL;
    if (!p) {
      snprintf(L.why, sizeof L.why, "no LLVM target for this CPU (%s missing)", name);
      return false;
    }
    memcpy(&init, &p, sizeof p);
    init();
  }
  return true;
}

/* The host: its triple, CPU name and features, and the target for them. */
static bool find_target(void) {
  char *msg = NULL;
  L.triple = L.f.LLVMGetDefaultTargetTriple();
  L.cpu = L.f.LLVMGetHostCPUName();
  L.features = L.f.LLVMGetHostCPUFeatures();
  if (!L.f.LLVMGetTargetFromTriple(L.triple, &L.target, &msg)) return true;
  snprintf(L.why, sizeof L.why, "no LLVM target for %s: %s", L.triple, msg ? msg : "");
  if (msg) L.f.LLVMDisposeMessage(msg);
  return false;
}

/* A TargetMachine for this host (PIC: calls into libm go through stubs), from the pool or new;
 * NULL with the error set. tm_give puts it back. */
static void *tm_take(void) {
  pthread_mutex_lock(&L.lock);
  void *tm = L.idle_tms.n ? L.idle_tms.v[--L.idle_tms.n] : NULL;
  pthread_mutex_unlock(&L.lock);
  if (!tm) tm = L.f.LLVMCreateTargetMachine(L.target, L.triple, L.cpu, L.features, L.codegen, RELOC_PIC, CODE_MODEL_SMALL);
  if (!tm) tg_set_error(TG_ERR_COMPILE, "LLVM: cannot make a target machine for %s (%s)", L.triple, L.cpu);
  return tm;
}

static void tm_give(void *tm) {
  pthread_mutex_lock(&L.lock);
  if (VEC_PUSH(L.idle_tms, tm) < 0) L.f.LLVMDisposeTargetMachine(tm);
  pthread_mutex_unlock(&L.lock);
}

/* The JIT: one LLJIT whose main library resolves what kernels call (libm) from this process. */
static bool make_jit(void) {
  char buf[512];
  void *err = L.f.LLVMOrcCreateLLJIT(&L.jit, NULL);
  if (err) { snprintf(L.why, sizeof L.why, "cannot create the LLVM JIT: %s", error_text(err, buf, sizeof buf)); return false; }
  L.f.LLVMOrcExecutionSessionSetErrorReporter(L.f.LLVMOrcLLJITGetExecutionSession(L.jit), report_session_error, NULL);
  L.jd = L.f.LLVMOrcLLJITGetMainJITDylib(L.jit);
  void *gen = NULL;
  err = L.f.LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, L.f.LLVMOrcLLJITGetGlobalPrefix(L.jit), NULL, NULL);
  if (err) { snprintf(L.why, sizeof L.why, "the LLVM JIT cannot search this process for symbols: %s", error_text(err, buf, sizeof buf)); return false; }
  L.f.LLVMOrcJITDylibAddGenerator(L.jd, gen);
  return true;
}

static void load_once(void) {
  const char *path = getenv("TG_LLVM_LIBRARY");
  if (!path || !*path) path = LLVM_LIBRARY;
  const char *passes = getenv("TG_LLVM_PASSES");
  snprintf(L.passes, sizeof L.passes, "%s", passes && *passes ? passes : LLVM_DEFAULT_PASSES);
  L.codegen = tg_getenv_int("TG_LLVM_CODEGEN", LLVM_DEFAULT_CODEGEN);
  if (L.codegen < 0 || L.codegen > 3) L.codegen = LLVM_DEFAULT_CODEGEN;
  L.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!L.lib) {
    snprintf(L.why, sizeof L.why, "%s not found: %s", path, dlerror());
    return;
  }
  if (load_symbols(path) && find_target() && make_jit()) L.why[0] = 0;
  if (!L.why[0]) L.f.LLVMInstallFatalErrorHandler(fatal_error);
  else if (!L.why[0]) snprintf(L.why, sizeof L.why, "%s could not be set up", path);
}

bool llvm_available(void) {
  pthread_once(&L.once, load_once);
  if (!L.why[0]) return true;
  tg_set_error(TG_ERR_DEVICE, "%s", L.why);
  return false;
}

/* ---------------------------------------------------------------- IR → object */

/* Whether mod is valid IR; if not, the error says what. */
static bool verify(void *mod, const char *what) {
  char *msg = NULL;
  bool bad = L.f.LLVMVerifyModule(mod, VERIFY_RETURN_STATUS, &msg);
  if (bad) tg_set_error(TG_ERR_COMPILE, "LLVM: %s: %s", what, msg ? msg : "");
  if (msg) L.f.LLVMDisposeMessage(msg);
  return !bad;
}

/* Parse, verify and optimize ir, rename each names[i] to names[i] + suffix, and emit an object
 * with tm: the object's buffer (LLVMMemoryBufferRef), or NULL with the error set. */
static void *ir_to_object(void *tm, const char *ir, const char *const *names, int n, const char *suffix) {
  char *msg = NULL, buf[512];
  double t[4] = {tg_now(), 0, 0, 0};
  compiling = names[0];
  void *ctx = L.f.LLVMContextCreate(), *mod = NULL, *obj = NULL;
  void *mb = L.f.LLVMCreateMemoryBufferWithMemoryRange(ir, strlen(ir), "kernel", 1);
  if (L.f.LLVMParseIRInContext(ctx, mb, &mod, &msg)) { /* takes mb */
    tg_set_error(TG_ERR_COMPILE, "LLVM: the IR does not parse: %s", msg ? msg : "");
    goto done;
  }
  if (!verify(mod, "the IR is invalid")) goto done;
  for (int i = 0; i < n; i++) {
    void *fn = L.f.LLVMGetNamedFunction(mod, names[i]);
    if (!fn) { tg_set_error(TG_ERR_COMPILE, "LLVM: the IR has no function %s", names[i]); goto done; }
    char full[192];
    int len = snprintf(full, sizeof full, "%s%s", names[i], suffix);
    L.f.LLVMSetValueName2(fn, full, (size_t)len);
  }
  t[1] = tg_now();
  L.f.LLVMSetTarget(mod, L.triple);
  void *dl = L.f.LLVMCreateTargetDataLayout(tm);
  L.f.LLVMSetModuleDataLayout(mod, dl);
  L.f.LLVMDisposeTargetData(dl);
  void *opts = L.f.LLVMCreatePassBuilderOptions(); /* for default<On> pipelines: no unrolling or vectorizing */
  L.f.LLVMPassBuilderOptionsSetLoopUnrolling(opts, 0);
  L.f.LLVMPassBuilderOptionsSetLoopVectorization(opts, 0);
  L.f.LLVMPassBuilderOptionsSetLoopInterleaving(opts, 0);
  L.f.LLVMPassBuilderOptionsSetSLPVectorization(opts, 0);
  void *err = L.f.LLVMRunPasses(mod, L.passes, tm, opts);
  L.f.LLVMDisposePassBuilderOptions(opts);
  if (err) { tg_set_error(TG_ERR_COMPILE, "LLVM: passes \"%s\" failed: %s", L.passes, error_text(err, buf, sizeof buf)); goto done; }
  if (!verify(mod, "the optimized IR is invalid")) goto done; /* an optimizer bug: an error, not a crash in codegen */
  t[2] = tg_now();
  if (L.f.LLVMTargetMachineEmitToMemoryBuffer(tm, mod, CODEGEN_OBJECT, &msg, &obj)) {
    tg_set_error(TG_ERR_COMPILE, "LLVM: code generation failed: %s", msg ? msg : "");
    obj = NULL;
  }
  t[3] = tg_now();
  if (obj && tg_debug() >= 2)
    fprintf(stderr, "llvm %-28s parse %6.2f ms, optimize %6.2f ms, codegen %6.2f ms, %zu bytes of IR\n", names[0],
            (t[1] - t[0]) * 1e3, (t[2] - t[1]) * 1e3, (t[3] - t[2]) * 1e3, strlen(ir));
done:
  compiling = NULL;
  if (msg) L.f.LLVMDisposeMessage(msg);
  if (mod) L.f.LLVMDisposeModule(mod);
  L.f.LLVMContextDispose(ctx);
  return obj;
}

/* ---------------------------------------------------------------- the disk cache */

/* An entry is the object's bytes, then this trailer: a magic and a hash of those bytes. */
#define TRAILER_MAGIC "tgLLVMo1"
typedef struct trailer {
  char magic[8];
  uint64_t hash;
} trailer;

static bool read_file(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) < 0 || st.st_size <= 0) { if (f) fclose(f); return false; }
  *len = (size_t)st.st_size;
  *data = malloc(*len);
  bool ok = *data && fread(*data, 1, *len, f) == *len;
  fclose(f);
  if (!ok) free(*data), *data = NULL;
  return ok;
}

/* The object inside an entry's bytes: its length, or 0 when the trailer does not vouch for it. */
static size_t entry_object(const char *data, size_t len) {
  trailer t;
  if (len <= sizeof t) return 0;
  memcpy(&t, data + len - sizeof t, sizeof t);
  size_t n = len - sizeof t;
  return !memcmp(t.magic, TRAILER_MAGIC, 8) && t.hash == hash_bytes(data, n, 3) ? n : 0;
}

static bool check_entry(const char *path, char *why, size_t n) {
  char *data = NULL;
  size_t len = 0;
  bool ok = read_file(path, &data, &len) && entry_object(data, len) > 0;
  if (!ok) snprintf(why, n, "%s", data ? "its trailer does not match its bytes" : "cannot be read");
  free(data);
  return ok;
}

static void store_entry(const char *name, const char *obj, size_t len) {
  if (!disk_cache_enabled()) return;
  char *data = malloc(len + sizeof(trailer));
  if (!data) return;
  trailer t;
  memcpy(t.magic, TRAILER_MAGIC, 8);
  t.hash = hash_bytes(obj, len, 3);
  memcpy(data, obj, len);
  memcpy(data + len, &t, sizeof t);
  disk_cache_write(name, data, len + sizeof t);
  free(data);
}

/* ---------------------------------------------------------------- linking */

/* Link an object (takes obj) and look up the kernels; on failure its symbols are removed
 * again, so a rebuilt object can be linked. Under L.lock. */
static int link_object(void *obj, const char *const *names, int n, const char *suffix, void **fns) {
  char buf[512];
  void *rt = L.f.LLVMOrcJITDylibCreateResourceTracker(L.jd);
  void *err = L.f.LLVMOrcLLJITAddObjectFileWithRT(L.jit, rt, obj);
  int rc = err ? tg_set_error(TG_ERR_COMPILE, "LLVM: cannot add the object: %s", error_text(err, buf, sizeof buf)) : 0;
  for (int i = 0; i < n && rc == 0; i++) {
    char full[192];
    uint64_t addr = 0;
    snprintf(full, sizeof full, "%s%s", names[i], suffix);
    session_error[0] = 0;
    err = L.f.LLVMOrcLLJITLookup(L.jit, &addr, full);
    if (err || !addr)
      rc = tg_set_error(TG_ERR_COMPILE, "LLVM: cannot link %s: %s%s%s", names[i], error_text(err, buf, sizeof buf),
                        session_error[0] ? "; " : "", session_error);
    fns[i] = (void *)(uintptr_t)addr;
  }
  if (rc < 0) L.f.LLVMOrcResourceTrackerRemove(rt);
  L.f.LLVMOrcReleaseResourceTracker(rt);
  return rc;
}

/* Look up kernels linked before (the same IR compiled earlier in this process). */
static int lookup_linked(const char *const *names, int n, const char *suffix, void **fns) {
  for (int i = 0; i < n; i++) {
    char full[192], buf[256];
    uint64_t addr = 0;
    snprintf(full, sizeof full, "%s%s", names[i], suffix);
    void *err = L.f.LLVMOrcLLJITLookup(L.jit, &addr, full);
    if (err || !addr) return tg_set_error(TG_ERR_COMPILE, "LLVM: lost %s: %s", full, error_text(err, buf, sizeof buf));
    fns[i] = (void *)(uintptr_t)addr;
  }
  return 0;
}

/* Link obj (taken) unless another thread linked the same IR meanwhile; then look up. */
static int link_once(uint64_t h, void *obj, const char *const *names, int n, const char *suffix, void **fns) {
  pthread_mutex_lock(&L.lock);
  bool done = ptrmap_get(&L.linked, (void *)(uintptr_t)h) != NULL;
  int rc = done ? lookup_linked(names, n, suffix, fns) : link_object(obj, names, n, suffix, fns);
  if (done) L.f.LLVMDisposeMemoryBuffer(obj);
  if (rc == 0 && !done) ptrmap_put(&L.linked, (void *)(uintptr_t)h, (void *)1);
  pthread_mutex_unlock(&L.lock);
  return rc;
}

/* The cached object for entry name, linked: 1, or 0 when there is none (a broken one is
 * removed first, one that fails to link too), or a negative status. */
static int link_cached(uint64_t h, const char *name, const char *const *names, int n, const char *suffix, void **fns) {
  char path[PATH_MAX], *data = NULL;
  size_t len = 0;
  int found = disk_cache_find(name, check_entry, path, sizeof path);
  if (found <= 0) return found;
  size_t olen = read_file(path, &data, &len) ? entry_object(data, len) : 0;
  int rc = -1;
  if (olen) rc = link_once(h, L.f.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, olen, name), names, n, suffix, fns);
  free(data);
  if (rc == 0) return 1;
  disk_cache_remove(path, olen ? tg_last_error() : "it changed while being read");
  tg_clear_error();
  return 0;
}

/* Compile ir into a new object, store it in the disk cache and link it. */
static int compile_fresh(uint64_t h, const char *ir, const char *name, const char *const *names, int n, const char *suffix,
                         void **fns) {
  void *tm = tm_take();
  if (!tm) return TG_ERR_COMPILE;
  void *obj = ir_to_object(tm, ir, names, n, suffix);
  tm_give(tm);
  if (!obj) return TG_ERR_COMPILE;
  store_entry(name, L.f.LLVMGetBufferStart(obj), L.f.LLVMGetBufferSize(obj));
  return link_once(h, obj, names, n, suffix, fns);
}

static int compile(const char *ir, const char *const *names, int n, void **fns, bool *hit) {
  uint64_t h = hash_bytes(ir, strlen(ir), 5) | 1;
  char suffix[24], name[128], codegen[8];
  snprintf(suffix, sizeof suffix, "_%016llx", (unsigned long long)h);
  pthread_mutex_lock(&L.lock);
  int rc = ptrmap_get(&L.linked, (void *)(uintptr_t)h) ? lookup_linked(names, n, suffix, fns) : 1;
  pthread_mutex_unlock(&L.lock);
  if (rc <= 0) return rc; /* linked before in this process */
  snprintf(codegen, sizeof codegen, "%d", L.codegen);
  const char *parts[] = {ir, "llvm-14", L.triple, L.cpu, L.features, L.passes, codegen};
  disk_cache_key(name, sizeof name, "llvm-", parts, 7, ".o");
  rc = link_cached(h, name, names, n, suffix, fns);
  *hit = rc == 1;
  return rc != 0 ? (rc < 0 ? rc : 0) : compile_fresh(h, ir, name, names, n, suffix, fns);
}

int llvm_compile(const char *ir, const char *const *names, int n, void **fns) {
  if (!llvm_available()) return TG_ERR_DEVICE;
  double t0 = tg_now();
  bool hit = false;
  int rc = compile(ir, names, n, fns, &hit);
  if (rc < 0) return rc;
  tg_thread_stats.kernels_compiled++;
  tg_thread_stats.disk_cache_hits += hit;
  tg_thread_stats.compile_seconds += tg_now() - t0;
  return 0;
}

/* ---------------------------------------------------------------- the device */

/* Whether the host's LLVM feature list ("+sse2,-avx512f,...") has +name. */
static bool has_feature(const char *name) {
  size_t n = strlen(name);
  for (const char *p = L.features; p && (p = strstr(p, name)); p += n)
    if (p > L.features && p[-1] == '+' && (p[n] == ',' || !p[n])) return true;
  return false;
}

static void llvm_describe(char *buf, size_t n) {
  uint64_t f = hash_bytes(L.features, strlen(L.features), 1);
  snprintf(buf, n, "llvm-14 %s %s features=%016llx passes=%s codegen=%d threads=%d vector=%d", L.triple, L.cpu,
           (unsigned long long)f, L.passes, L.codegen, threadpool_size(), llvm_device.caps.vector_bytes);
}

static char *llvm_render(const lin_program *progs, int n, const char *const *names) {
  return render_llvm_caps(progs, n, names, &llvm_device.caps);
}

/* Load LLVM; the capabilities are the host CPU's as LLVM sees it (VECTOR_BYTES overrides the
 * width, as for the CPU device). */
static int llvm_open(void) {
  if (!llvm_available()) return TG_ERR_DEVICE;
  int vb = has_feature("avx512f") ? 64 : has_feature("avx") ? 32 : 16, env = tg_getenv_int("VECTOR_BYTES", 0);
  if (env == 16 || env == 32 || env == 64) vb = env;
  int64_t l2 = host_cache_bytes(2), l3 = host_cache_bytes(3);
  llvm_device.caps = (device_caps){.vector_bytes = vb, .vector_registers = has_feature("avx512f") ? 32 : 16,
                                   .l2_bytes = l2 > 0 ? l2 : 1 << 20, .llc_bytes = l3 > 0 ? l3 : 0, .threads = threadpool_size(), .max_local_size = 1, .warp = 1,
                                   .f16c = has_feature("f16c") && tg_getenv_int("F16C", 1), .load_stride = 4};
  return 0;
}

device llvm_device = {
    .name = "LLVM",
    .open = llvm_open,
    .render = llvm_render,
    .vectors = &llvm_vector_forms,
    .compile = llvm_compile,
    .launch = host_launch,
    .describe = llvm_describe,
};
