/* cl.c — the OpenCL device (DEV=CL): OpenCL C kernels (render_opencl, render/c.c) built by the
 * platform's compiler and run on buffers in the device's own memory, through the OpenCL API of
 * the ICD loader (libOpenCL.so.1, loaded with dlopen: tg links no OpenCL library and needs no
 * OpenCL headers to build). On this project's CI the platform is PoCL, OpenCL on the CPU.
 *
 * One device (the first GPU of any platform, else the first device; CL_DEVICE=n picks the n-th),
 * one context, one in-order command queue. Every command goes through the queue under one lock:
 * OpenCL's calls are thread-safe except clSetKernelArg on a shared kernel object, and the lock
 * keeps a launch's arguments and its enqueue together. Copies and launches wait until done.
 * Compiles run in parallel, without the lock. Program binaries are cached on disk
 * (disk_cache.h) as cl-<hash>.bin, keyed by the source, the platform, device and driver, and
 * the build options; an entry carries a trailer with a hash of its bytes, so a broken one is
 * found and rebuilt. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "device/device.h"
#include "device/disk_cache.h"
#include "runtime/helpers.h"

#define CL_LIBRARY "libOpenCL.so.1"
/* Build options: float division and sqrt correctly rounded, as on the CPU (OpenCL allows them
 * 2.5 and 3 ulp by default: PoCL 5 gives 1 ulp off, -2.5f / 3 = 0xbf555556), where the device
 * can (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT). Nothing that relaxes IEEE semantics. */
#define CL_EXACT_DIVIDE "-cl-fp32-correctly-rounded-divide-sqrt"

/* PoCL's compiler parses clang's whole opencl-c.h (18,000 lines declaring every builtin) for
 * each program: most of a small kernel's build (docs/devices.md). On PoCL tg skips that
 * header's body (-D_OPENCL_H_ is its include guard) and declares the builtins its kernels call
 * (render_opencl: math, work-item indices, barrier) with the header's attributes; a program that
 * does not build so (one calling another builtin) is built again with the whole header.
 * TG_CL_LEAN=0 always uses the header; =2 never does (no second build: tests prove the list). */
#define CL_LEAN_OPTION " -D_OPENCL_H_"
static const char CL_LEAN_DECLS[] =
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#define TG_B1(f) float __attribute__((overloadable,const)) f(float);"
    " double __attribute__((overloadable,const)) f(double);\n"
    "#define TG_B2(f) float __attribute__((overloadable,const)) f(float,float);"
    " double __attribute__((overloadable,const)) f(double,double);\n"
    "TG_B1(exp2) TG_B1(log2) TG_B1(sin) TG_B1(sqrt) TG_B1(trunc) TG_B1(rint) TG_B2(pow) TG_B2(fmod)\n"
    "size_t __attribute__((overloadable,const)) get_global_id(uint);\n"
    "size_t __attribute__((overloadable,const)) get_local_id(uint);\n"
    "size_t __attribute__((overloadable,const)) get_group_id(uint);\n"
    "void __attribute__((overloadable,convergent)) barrier(cl_mem_fence_flags);\n"
    "#undef TG_B1\n#undef TG_B2\n";

/* ---------------------------------------------------------------- the OpenCL API */

/* The types of the OpenCL 1.2 C API as the ABI sees them (CL/cl.h): handles are pointers,
 * bitfields 64-bit, *_info enums and cl_bool 32-bit. */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef void *cl_handle; /* cl_platform_id, cl_device_id, cl_context, cl_mem, cl_kernel, ... */
typedef void (*cl_notify_fn)(const char *, const void *, size_t, void *);
typedef void (*cl_build_fn)(cl_handle, void *);

/* The constants used, with CL/cl.h's values. */
enum {
  CL_SUCCESS = 0,
  CL_TRUE = 1,
  CL_MEM_OBJECT_ALLOCATION_FAILURE = -4, CL_OUT_OF_HOST_MEMORY = -6, CL_INVALID_BINARY = -42,
  CL_INVALID_KERNEL_ARGS = -52,
  CL_PLATFORM_VERSION = 0x0901, CL_PLATFORM_NAME = 0x0902,
  CL_DEVICE_TYPE = 0x1000, CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002, CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004,
  CL_DEVICE_SINGLE_FP_CONFIG = 0x101B, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE = 0x101E, CL_DEVICE_LOCAL_MEM_SIZE = 0x1023, CL_DEVICE_NAME = 0x102B,
  CL_DEVICE_VENDOR = 0x102C, CL_DRIVER_VERSION = 0x102D, CL_DEVICE_VERSION = 0x102F,
  CL_PROGRAM_BINARY_SIZES = 0x1165, CL_PROGRAM_BINARIES = 0x1166, CL_PROGRAM_BUILD_LOG = 0x1183,
  CL_KERNEL_FUNCTION_NAME = 0x1190, CL_KERNEL_NUM_ARGS = 0x1191, CL_KERNEL_WORK_GROUP_SIZE = 0x11B0,
  CL_PROFILING_COMMAND_START = 0x1282, CL_PROFILING_COMMAND_END = 0x1283,
};
#define CL_DEVICE_TYPE_GPU ((cl_ulong)1 << 2)
#define CL_DEVICE_TYPE_ALL ((cl_ulong)0xFFFFFFFF)
#define CL_MEM_READ_WRITE ((cl_ulong)1 << 0)
#define CL_QUEUE_PROFILING_ENABLE ((cl_ulong)1 << 1)
#define CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT ((cl_ulong)1 << 7)

/* The functions used: return type, name, parameters. */
#define CL_API(X)                                                                                        \
  X(cl_int, clGetPlatformIDs, (cl_uint, cl_handle *, cl_uint *))                                         \
  X(cl_int, clGetPlatformInfo, (cl_handle, cl_uint, size_t, void *, size_t *))                           \
  X(cl_int, clGetDeviceIDs, (cl_handle, cl_ulong, cl_uint, cl_handle *, cl_uint *))                      \
  X(cl_int, clGetDeviceInfo, (cl_handle, cl_uint, size_t, void *, size_t *))                             \
  X(cl_handle, clCreateContext, (const intptr_t *, cl_uint, const cl_handle *, cl_notify_fn, void *, cl_int *)) \
  X(cl_handle, clCreateCommandQueue, (cl_handle, cl_handle, cl_ulong, cl_int *))                         \
  X(cl_handle, clCreateBuffer, (cl_handle, cl_ulong, size_t, void *, cl_int *))                          \
  X(cl_int, clReleaseMemObject, (cl_handle))                                                             \
  X(cl_int, clEnqueueWriteBuffer, (cl_handle, cl_handle, cl_uint, size_t, size_t, const void *, cl_uint, const cl_handle *, cl_handle *)) \
  X(cl_int, clEnqueueReadBuffer, (cl_handle, cl_handle, cl_uint, size_t, size_t, void *, cl_uint, const cl_handle *, cl_handle *)) \
  X(cl_handle, clCreateProgramWithSource, (cl_handle, cl_uint, const char **, const size_t *, cl_int *)) \
  X(cl_handle, clCreateProgramWithBinary, (cl_handle, cl_uint, const cl_handle *, const size_t *, const unsigned char **, cl_int *, cl_int *)) \
  X(cl_int, clBuildProgram, (cl_handle, cl_uint, const cl_handle *, const char *, cl_build_fn, void *)) \
  X(cl_int, clGetProgramBuildInfo, (cl_handle, cl_handle, cl_uint, size_t, void *, size_t *))           \
  X(cl_int, clGetProgramInfo, (cl_handle, cl_uint, size_t, void *, size_t *))                           \
  X(cl_int, clReleaseProgram, (cl_handle))                                                               \
  X(cl_handle, clCreateKernel, (cl_handle, const char *, cl_int *))                                      \
  X(cl_int, clReleaseKernel, (cl_handle))                                                                \
  X(cl_int, clGetKernelInfo, (cl_handle, cl_uint, size_t, void *, size_t *))                             \
  X(cl_int, clGetKernelWorkGroupInfo, (cl_handle, cl_handle, cl_uint, size_t, void *, size_t *))        \
  X(cl_int, clSetKernelArg, (cl_handle, cl_uint, size_t, const void *))                                  \
  X(cl_int, clEnqueueNDRangeKernel, (cl_handle, cl_handle, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint, const cl_handle *, cl_handle *)) \
  X(cl_int, clFinish, (cl_handle))                                                                       \
  X(cl_int, clWaitForEvents, (cl_uint, const cl_handle *))                                               \
  X(cl_int, clGetEventProfilingInfo, (cl_handle, cl_uint, size_t, void *, size_t *))                     \
  X(cl_int, clReleaseEvent, (cl_handle))

#define API_FIELD(ret, name, params) ret(*name) params;
typedef struct cl_api {
  CL_API(API_FIELD)
} cl_api;
#undef API_FIELD

#define API_ENTRY(ret, name, params) {#name, offsetof(cl_api, name)},
static const struct {
  const char *name;
  size_t at;
} api_names[] = {CL_API(API_ENTRY)};
#undef API_ENTRY

/* Names of OpenCL's error codes, for messages. */
static const struct {
  cl_int code;
  const char *name;
} cl_errors[] = {
    {-1, "CL_DEVICE_NOT_FOUND"},          {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},          {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"}, {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-30, "CL_INVALID_VALUE"},            {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},          {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-38, "CL_INVALID_MEM_OBJECT"},       {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"}, {-46, "CL_INVALID_KERNEL_NAME"},
    {-48, "CL_INVALID_KERNEL"},           {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},        {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},      {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},   {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-61, "CL_INVALID_BUFFER_SIZE"},      {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};

static const char *cl_error_name(cl_int code) {
  static _Thread_local char buf[32];
  for (size_t i = 0; i < sizeof cl_errors / sizeof *cl_errors; i++)
    if (cl_errors[i].code == code) return cl_errors[i].name;
  snprintf(buf, sizeof buf, "OpenCL error %d", (int)code);
  return buf;
}

/* Warp (SIMD group) width of a GPU by its vendor: how many work-items run in lockstep. A CPU
 * device (PoCL) gets 1: its vendor is the CPU's ("AuthenticAMD"). */
static const struct {
  const char *vendor;
  int warp;
} vendor_warps[] = {{"NVIDIA", 32}, {"Advanced Micro Devices", 64}, {"AMD", 64}, {"Intel", 16}};

/* ---------------------------------------------------------------- the process's OpenCL */

static struct {
  pthread_once_t once;
  cl_api f;
  void *lib;
  char why[512];                /* why the device is unavailable ("" when it is available) */
  cl_handle platform, dev, ctx, queue;
  char platform_name[128], platform_version[128], name[128], vendor[128], driver[128], version[128];
  char options[64];             /* of every build */
  int lean;                     /* builds skip opencl-c.h (PoCL; see CL_LEAN_DECLS): 0, 1, 2 */
  size_t max_local;             /* the device's largest work-group */
  bool profiling;               /* the queue records kernel times (DEBUG >= 2) */
  pthread_mutex_t lock;         /* the queue and clSetKernelArg */
} C = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static bool load_symbols(void) {
  for (size_t i = 0; i < sizeof api_names / sizeof *api_names; i++) {
    void *p = dlsym(C.lib, api_names[i].name);
    if (!p) {
      snprintf(C.why, sizeof C.why, "%s lacks %s", CL_LIBRARY, api_names[i].name);
      return false;
    }
    memcpy((char *)&C.f + api_names[i].at, &p, sizeof p);
  }
  return true;
}

/* Every (platform, device) pair, in the platforms' order: at most cap; their number. */
static int list_devices(cl_handle *plats, cl_handle *devs, int cap, cl_int *err) {
  cl_handle ps[16];
  cl_uint np = 0;
  *err = C.f.clGetPlatformIDs(16, ps, &np);
  if (*err != CL_SUCCESS) return 0;
  int n = 0;
  for (cl_uint p = 0; p < np && p < 16 && n < cap; p++) {
    cl_uint nd = 0;
    if (C.f.clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, (cl_uint)(cap - n), devs + n, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd && n < cap; d++) plats[n++] = ps[p];
  }
  return n;
}

/* CL_DEVICE: -1 when unset, the number, or -2 when it is not one. */
static int wanted_device(void) {
  const char *v = getenv("CL_DEVICE");
  if (!v || !*v) return -1;
  char *end;
  long n = strtol(v, &end, 10);
  return *end || n < 0 || n > INT_MAX ? -2 : (int)n;
}

/* Pick the device: CL_DEVICE=n, else the first GPU, else the first device. */
static bool pick_device(void) {
  cl_handle plats[32], devs[32];
  cl_int err;
  int n = list_devices(plats, devs, 32, &err), want = wanted_device(), pick = -1;
  if (n == 0) {
    snprintf(C.why, sizeof C.why, "no OpenCL platform with a device (%s; install an ICD such as pocl-opencl-icd)",
             err == CL_SUCCESS ? "no devices" : cl_error_name(err));
    return false;
  }
  if (want >= n || want == -2) {
    snprintf(C.why, sizeof C.why, "CL_DEVICE=%s, but the OpenCL devices here are 0 to %d", getenv("CL_DEVICE"), n - 1);
    return false;
  }
  for (int i = 0; i < n && want < 0 && pick < 0; i++) {
    cl_ulong type = 0;
    if (C.f.clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS && (type & CL_DEVICE_TYPE_GPU)) pick = i;
  }
  pick = want >= 0 ? want : pick >= 0 ? pick : 0;
  C.platform = plats[pick], C.dev = devs[pick];
  return true;
}

static void device_string(cl_uint what, char *buf, size_t n) {
  if (C.f.clGetDeviceInfo(C.dev, what, n, buf, NULL) != CL_SUCCESS) snprintf(buf, n, "?");
  buf[n - 1] = 0;
}

static bool make_context(void) {
  cl_int err = CL_SUCCESS;
  C.ctx = C.f.clCreateContext(NULL, 1, &C.dev, NULL, NULL, &err);
  if (!C.ctx) {
    snprintf(C.why, sizeof C.why, "cannot create a context on %s: %s", C.name, cl_error_name(err));
    return false;
  }
  C.profiling = tg_debug() >= 2;
  C.queue = C.f.clCreateCommandQueue(C.ctx, C.dev, C.profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
  if (!C.queue) snprintf(C.why, sizeof C.why, "cannot create a command queue on %s: %s", C.name, cl_error_name(err));
  return C.queue != NULL;
}

static void load_once(void) {
  snprintf(C.why, sizeof C.why, "OpenCL could not be set up"); /* until every step succeeded */
  C.lib = dlopen(CL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!C.lib) {
    snprintf(C.why, sizeof C.why, "%s not found (no OpenCL ICD loader: install ocl-icd-libopencl1 and an ICD such as pocl-opencl-icd): %s",
             CL_LIBRARY, dlerror());
    return;
  }
  if (!load_symbols() || !pick_device()) return;
  if (C.f.clGetPlatformInfo(C.platform, CL_PLATFORM_NAME, sizeof C.platform_name, C.platform_name, NULL) != CL_SUCCESS)
    snprintf(C.platform_name, sizeof C.platform_name, "?");
  if (C.f.clGetPlatformInfo(C.platform, CL_PLATFORM_VERSION, sizeof C.platform_version, C.platform_version, NULL) != CL_SUCCESS)
    snprintf(C.platform_version, sizeof C.platform_version, "?");
  C.platform_name[sizeof C.platform_name - 1] = C.platform_version[sizeof C.platform_version - 1] = 0;
  device_string(CL_DEVICE_NAME, C.name, sizeof C.name);
  device_string(CL_DEVICE_VENDOR, C.vendor, sizeof C.vendor);
  device_string(CL_DRIVER_VERSION, C.driver, sizeof C.driver);
  device_string(CL_DEVICE_VERSION, C.version, sizeof C.version);
  cl_ulong fp = 0;
  C.f.clGetDeviceInfo(C.dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  snprintf(C.options, sizeof C.options, "%s", fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT ? CL_EXACT_DIVIDE : "");
  C.lean = strstr(C.platform_name, "Portable Computing Language") ? tg_getenv_int("TG_CL_LEAN", 1) : 0;
  if (!make_context()) return;
  C.why[0] = 0;
  if (tg_debug() >= 1) /* which one: a GPU taken by another process may leave only the CPU's */
    fprintf(stderr, "CL: %s (%s, %s, driver %s)\n", C.name, C.platform_name, C.version, C.driver);
}

static bool cl_available(void) {
  pthread_once(&C.once, load_once);
  if (!C.why[0]) return true;
  tg_set_error(TG_ERR_DEVICE, "CL: %s", C.why);
  return false;
}

/* ---------------------------------------------------------------- memory */

static void *cl_alloc(size_t bytes) {
  cl_int err = CL_SUCCESS;
  cl_handle m = C.f.clCreateBuffer(C.ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
  bool nomem = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY;
  if (!m) tg_set_error(nomem ? TG_ERR_NOMEM : TG_ERR_DEVICE, "CL: cannot allocate %zu bytes on %s: %s", bytes, C.name, cl_error_name(err));
  return m;
}

static void cl_free(void *mem) {
  if (mem) C.f.clReleaseMemObject(mem);
}

static int cl_copy_in(void *mem, const void *src, size_t bytes) {
  if (!bytes) return 0;
  pthread_mutex_lock(&C.lock);
  cl_int err = C.f.clEnqueueWriteBuffer(C.queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
  pthread_mutex_unlock(&C.lock);
  return err == CL_SUCCESS ? 0 : tg_set_error(TG_ERR_DEVICE, "CL: copy of %zu bytes to %s failed: %s", bytes, C.name, cl_error_name(err));
}

static int cl_copy_out(void *dst, void *mem, size_t bytes) {
  if (!bytes) return 0;
  pthread_mutex_lock(&C.lock);
  cl_int err = C.f.clEnqueueReadBuffer(C.queue, mem, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  pthread_mutex_unlock(&C.lock);
  return err == CL_SUCCESS ? 0 : tg_set_error(TG_ERR_DEVICE, "CL: copy of %zu bytes from %s failed: %s", bytes, C.name, cl_error_name(err));
}

/* ---------------------------------------------------------------- programs */

/* The build's error: the status name and the first ~600 characters of the build log. */
static int build_error(cl_handle prog, cl_int err, const char *what) {
  char log[600] = "";
  size_t got = 0;
  if (prog && C.f.clGetProgramBuildInfo(prog, C.dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &got) == CL_SUCCESS && got) {
    char *full = malloc(got + 1);
    if (full && C.f.clGetProgramBuildInfo(prog, C.dev, CL_PROGRAM_BUILD_LOG, got, full, NULL) == CL_SUCCESS) {
      full[got] = 0;
      snprintf(log, sizeof log, "%s", full);
    }
    free(full);
  }
  return tg_set_error(TG_ERR_COMPILE, "CL: %s failed (%s)%s%s", what, cl_error_name(err), log[0] ? ": " : "", log);
}

/* The kernels names[0..n) of a built program (their handles in fns; the kernels keep the
 * program alive). 0, or a negative status with every kernel made so far released. */
static int make_kernels(cl_handle prog, const char *const *names, int n, void **fns) {
  for (int i = 0; i < n; i++) {
    cl_int err = CL_SUCCESS;
    fns[i] = C.f.clCreateKernel(prog, names[i], &err);
    if (fns[i]) continue;
    tg_set_error(TG_ERR_COMPILE, "CL: the program has no kernel %s (%s)", names[i], cl_error_name(err));
    while (i-- > 0) C.f.clReleaseKernel(fns[i]);
    return TG_ERR_COMPILE;
  }
  return 0;
}

/* A program built from the sources (lean: CL_LEAN_DECLS first and opencl-c.h skipped): its
 * handle, or NULL with the error (and the build log) set. */
static cl_handle build_program(const char *src, bool lean) {
  cl_int err = CL_SUCCESS;
  const char *parts[] = {CL_LEAN_DECLS, src};
  cl_handle prog = C.f.clCreateProgramWithSource(C.ctx, lean ? 2 : 1, lean ? parts : parts + 1, NULL, &err);
  if (!prog) return build_error(NULL, err, "clCreateProgramWithSource"), NULL;
  char options[sizeof C.options + sizeof CL_LEAN_OPTION];
  snprintf(options, sizeof options, "%s%s", C.options, lean ? CL_LEAN_OPTION : "");
  err = C.f.clBuildProgram(prog, 1, &C.dev, options, NULL, NULL);
  if (err == CL_SUCCESS) return prog;
  build_error(prog, err, "building the kernel source");
  C.f.clReleaseProgram(prog);
  return NULL;
}

static cl_handle build_source(const char *src) {
  if (!C.lean) return build_program(src, false);
  cl_handle prog = build_program(src, true);
  if (prog || C.lean == 2) return prog;
  if (tg_debug() >= 1) fprintf(stderr, "CL: built again with opencl-c.h: %s\n", tg_last_error());
  tg_clear_error();
  return build_program(src, false);
}

/* A built program's binary for this device (malloc'd), or NULL. */
static unsigned char *program_binary(cl_handle prog, size_t *len) {
  size_t size = 0;
  if (C.f.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size) return NULL;
  unsigned char *bin = malloc(size);
  if (bin && C.f.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) free(bin), bin = NULL;
  *len = size;
  return bin;
}

/* ---------------------------------------------------------------- the disk cache */

/* An entry is the binary's bytes, then this trailer: a magic and a hash of those bytes. */
#define TRAILER_MAGIC "tgCLbin1"
typedef struct trailer {
  char magic[8];
  uint64_t hash;
} trailer;

static bool read_file(const char *path, unsigned char **data, size_t *len) {
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

/* The binary inside an entry's bytes: its length, or 0 when the trailer does not vouch for it. */
static size_t entry_binary(const unsigned char *data, size_t len) {
  trailer t;
  if (len <= sizeof t) return 0;
  memcpy(&t, data + len - sizeof t, sizeof t);
  size_t n = len - sizeof t;
  return !memcmp(t.magic, TRAILER_MAGIC, 8) && t.hash == hash_bytes(data, n, 7) ? n : 0;
}

/* Whether the driver can be handed binary b without dying. PoCL's binaries ("poclbin") are its
 * cache directory serialized; one taken while that directory lacked the program's bitcode
 * (seen once in a cold suite run, where builds of one source overlap) has no /program.bc
 * record, and loading it aborts the process inside PoCL (an assertion in
 * pocl_binary_get_kernels_metadata). Such a binary is neither stored nor loaded. Other
 * drivers check their binaries themselves (clCreateProgramWithBinary fails). */
static bool binary_usable(const unsigned char *b, size_t n) {
  static const char record[] = "\x0b\0\0\0/program.bc"; /* u32 length 11, then the name */
  if (n < 8 || memcmp(b, "poclbin", 8) != 0) return true;
  const unsigned char *r = memmem(b, n, record, sizeof record - 1);
  uint32_t len = 0;
  size_t at = r ? (size_t)(r - b) + sizeof record - 1 : n;
  if (at + 4 <= n) memcpy(&len, b + at, 4);
  return len > 0 && len <= n - at - 4;
}

static bool check_entry(const char *path, char *why, size_t n) {
  unsigned char *data = NULL;
  size_t len = 0, blen = read_file(path, &data, &len) ? entry_binary(data, len) : 0;
  bool ok = blen > 0 && binary_usable(data, blen);
  const char *bad = blen ? "a PoCL binary without the program's bitcode" : "its trailer does not match its bytes";
  if (!ok) snprintf(why, n, "%s", data ? bad : "cannot be read");
  free(data);
  return ok;
}

static void store_entry(const char *name, cl_handle prog) {
  size_t len = 0;
  unsigned char *bin = disk_cache_enabled() ? program_binary(prog, &len) : NULL;
  unsigned char *data = bin && binary_usable(bin, len) ? realloc(bin, len + sizeof(trailer)) : NULL;
  if (!data) { free(bin); return; }
  trailer t;
  memcpy(t.magic, TRAILER_MAGIC, 8);
  t.hash = hash_bytes(data, len, 7);
  memcpy(data + len, &t, sizeof t);
  disk_cache_write(name, data, len + sizeof t);
  free(data);
}

/* The kernels from the cached binary of entry name: 1, 0 when there is none (a broken entry,
 * or one the driver refuses, is removed), or a negative status. */
static int load_cached(const char *name, const char *const *names, int n, void **fns) {
  char path[PATH_MAX];
  unsigned char *data = NULL;
  size_t len = 0;
  int found = disk_cache_find(name, check_entry, path, sizeof path);
  if (found <= 0) return found;
  size_t blen = read_file(path, &data, &len) ? entry_binary(data, len) : 0;
  if (blen && !binary_usable(data, blen)) blen = 0; /* replaced since it was checked */
  cl_int status = CL_SUCCESS, err = CL_INVALID_BINARY;
  const unsigned char *bin = data;
  cl_handle prog = blen ? C.f.clCreateProgramWithBinary(C.ctx, 1, &C.dev, &blen, &bin, &status, &err) : NULL;
  free(data);
  int rc = -1;
  if (prog && status == CL_SUCCESS && (err = C.f.clBuildProgram(prog, 1, &C.dev, C.options, NULL, NULL)) == CL_SUCCESS)
    rc = make_kernels(prog, names, n, fns);
  if (prog) C.f.clReleaseProgram(prog);
  if (rc == 0) return 1;
  char why[160];
  snprintf(why, sizeof why, "the driver refuses it: %s", rc < 0 ? tg_last_error() : cl_error_name(err));
  disk_cache_remove(path, blen ? why : "it changed while being read");
  tg_clear_error();
  return 0;
}

static int compile_fresh(const char *src, const char *name, const char *const *names, int n, void **fns) {
  cl_handle prog = build_source(src);
  if (!prog) return TG_ERR_COMPILE;
  int rc = make_kernels(prog, names, n, fns);
  if (rc == 0) store_entry(name, prog);
  C.f.clReleaseProgram(prog);
  return rc;
}

static int cl_compile(const char *src, const char *const *names, int n, void **fns) {
  if (!cl_available()) return TG_ERR_DEVICE;
  double t0 = tg_now();
  char name[128];
  const char *parts[] = {src, C.platform_name, C.platform_version, C.name, C.driver, C.version, C.options};
  disk_cache_key(name, sizeof name, "cl-", parts, 7, ".bin");
  int rc = load_cached(name, names, n, fns);
  bool hit = rc == 1;
  if (rc == 0) rc = compile_fresh(src, name, names, n, fns);
  if (rc < 0) return rc;
  tg_thread_stats.kernels_compiled++;
  tg_thread_stats.disk_cache_hits += hit;
  tg_thread_stats.compile_seconds += tg_now() - t0;
  return 0; /* the kernels live as long as the process */
}

/* ---------------------------------------------------------------- launching */

/* The work-group size: min(n, 256), within what the device and the kernel allow. */
static size_t local_size(cl_handle k, long long n) {
  size_t most = 256, kernel_most = 0;
  if (C.f.clGetKernelWorkGroupInfo(k, C.dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_most, &kernel_most, NULL) == CL_SUCCESS && kernel_most)
    most = most < kernel_most ? most : kernel_most;
  most = most < C.max_local ? most : C.max_local;
  return (size_t)n < most ? (size_t)n : most;
}

/* DEBUG >= 2: the kernel's time on the device, from its event. */
static void report_event(cl_handle k, cl_handle ev, size_t global, size_t local) {
  cl_ulong start = 0, end = 0;
  char kname[128] = "?";
  C.f.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof kname, kname, NULL);
  kname[sizeof kname - 1] = 0;
  if (C.f.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL) == CL_SUCCESS &&
      C.f.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS)
    fprintf(stderr, "cl %-32s %9.3f ms on the device, global %zu local %zu\n", kname, (double)(end - start) * 1e-6, global, local);
}

/* Set the arguments (tg_n, then the buffers the kernel declares) and run; under C.lock. */
static cl_int run_locked(cl_handle k, void **args, int nargs, long long n, size_t global, size_t local) {
  cl_uint kargs = 0;
  cl_int err = C.f.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof kargs, &kargs, NULL);
  if (err != CL_SUCCESS) return err;
  if (kargs == 0 || kargs - 1 > (cl_uint)nargs) return CL_INVALID_KERNEL_ARGS;
  cl_ulong tg_n = (cl_ulong)n;
  err = C.f.clSetKernelArg(k, 0, sizeof tg_n, &tg_n);
  for (cl_uint i = 1; i < kargs && err == CL_SUCCESS; i++) err = C.f.clSetKernelArg(k, i, sizeof(cl_handle), &args[i - 1]);
  cl_handle ev = NULL;
  if (err == CL_SUCCESS) err = C.f.clEnqueueNDRangeKernel(C.queue, k, 1, NULL, &global, &local, 0, NULL, C.profiling ? &ev : NULL);
  if (err == CL_SUCCESS) err = ev ? C.f.clWaitForEvents(1, &ev) : C.f.clFinish(C.queue);
  if (ev && err == CL_SUCCESS) report_event(k, ev, global, local);
  if (ev) C.f.clReleaseEvent(ev);
  return err;
}

/* n work-items in work-groups of `want` (0: local_size's choice, the last group padded). A
 * work-group size the kernel or device cannot take is an error before anything runs. */
static int cl_launch_local(kernel_fn fn, void **args, int nargs, long long n, long long want) {
  cl_handle k = (cl_handle)(uintptr_t)fn;
  if (n <= 0) return 0; /* nothing to compute */
  size_t local = want > 0 ? (size_t)want : local_size(k, n), kernel_most = 0;
  if (want > 0 && C.f.clGetKernelWorkGroupInfo(k, C.dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_most, &kernel_most, NULL) == CL_SUCCESS &&
      (local > kernel_most || local > C.max_local || n % want))
    return tg_set_error(TG_ERR_DEVICE, "CL: work-groups of %lld work-items for %lld work-items: %s allows %zu for this kernel", want, n,
                        C.name, kernel_most < C.max_local ? kernel_most : C.max_local);
  if ((unsigned long long)n > SIZE_MAX - local) return tg_set_error(TG_ERR_DEVICE, "CL: %lld work-items are too many", n);
  size_t global = ((size_t)n + local - 1) / local * local;
  pthread_mutex_lock(&C.lock);
  cl_int err = run_locked(k, args, nargs, n, global, local);
  pthread_mutex_unlock(&C.lock);
  if (err == CL_SUCCESS) return 0;
  return tg_set_error(TG_ERR_DEVICE, "CL: kernel launch on %s (%lld work-items, local size %zu, %d buffers) failed: %s", C.name, n, local,
                      nargs, cl_error_name(err));
}

static int cl_launch(kernel_fn fn, void **args, int nargs, long long n) { return cl_launch_local(fn, args, nargs, n, 0); }

/* ---------------------------------------------------------------- the device */

static void cl_describe(char *buf, size_t n) {
  snprintf(buf, n, "cl %s | %s | %s | driver %s | %s | options \"%s\"", C.platform_name, C.platform_version, C.name, C.driver, C.version,
           C.options);
}

static int cl_open(void);

device cl_device = {
    .name = "CL",
    .open = cl_open,
    .render = render_opencl,
    .compile = cl_compile,
    .launch = cl_launch,
    .launch_local = cl_launch_local,
    .describe = cl_describe,
    .alloc = cl_alloc,
    .free = cl_free,
    .copy_in = cl_copy_in,
    .copy_out = cl_copy_out,
};

/* Open the library, pick the device, make the context and queue; the capabilities are the
 * device's (threads: the host threads that build programs, 1). */
static int cl_open(void) {
  if (!cl_available()) return TG_ERR_DEVICE;
  cl_ulong cache = 0, local = 0;
  size_t wg = 0;
  C.f.clGetDeviceInfo(C.dev, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache, NULL);
  C.f.clGetDeviceInfo(C.dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  C.f.clGetDeviceInfo(C.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  C.max_local = wg ? wg : 1;
  cl_ulong type = 0;
  C.f.clGetDeviceInfo(C.dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  int warp = 1;
  for (size_t i = 0; i < sizeof vendor_warps / sizeof *vendor_warps && warp == 1 && (type & CL_DEVICE_TYPE_GPU); i++)
    if (strstr(C.vendor, vendor_warps[i].vendor)) warp = vendor_warps[i].warp;
  bool tc = tg_getenv_int("TC_EMULATE", 0) != 0; /* tensor cores emulated in local memory (docs/devices.md) */
  cl_device.caps = (device_caps){.vector_bytes = 16, .vector_registers = 16, .l2_bytes = cache ? (int64_t)cache : 1 << 20, .threads = 1,
                                 .local_bytes = (int64_t)local, .max_local_size = (int)(C.max_local < INT_MAX ? C.max_local : INT_MAX),
                                 .warp = tc ? 32 : warp, .tc = tc ? TC_M16N8K16 : 0};
  return 0;
}
