/* device.h — the device interface: what the engine needs from a device (render, compile,
 * launch; memory) and the one record codegen may read about it (its capabilities). A device
 * file fills one `device` struct and adds it to the table in device.c; nothing else in tg
 * knows which device it is. See docs/devices.md. */
#ifndef TG_DEVICE_H
#define TG_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "uop/uop.h"

typedef struct device device;
struct device {
  const char *name; /* "CPU", "LLVM", "CL", "CUDA": what DEV= and tg_to take */
  /* 0 when the device can be used here; otherwise a negative status with the error set
   * (its library or driver is missing). Called once, before anything else. */
  int (*open)(void);
  device_caps caps;                      /* filled by open */
  /* Source for the programs of one kernel (caller frees), one function per stage. Host
   * devices: void names[i](void **args, long long start, long long end). GPU-style devices
   * (caps.max_local_size > 1): a kernel names[i](long long n, T0 *b0, T1 *b1, ...) run by n
   * work-items (render_c_gpu). */
  char *(*render)(const lin_program *progs, int n, const char *const *names);
  /* The vector nodes that renderer renders as vectors (NULL: none; the rest go lane by lane). */
  const vector_forms *vectors;
  /* Compile src and return a handle for each of names[0..n) in fns (host devices: the
   * function's address; GPU devices: their kernel object), cached on disk by the device,
   * keyed by source + compiler + flags. */
  int (*compile)(const char *src, const char *const *names, int n, void **fns);
  /* Run fn and wait for it. Host devices: over iterations [0, n) of the parallel axis on the
   * thread pool, args being host addresses (any host function of that form: engine/chunks.c
   * runs a chain of kernels group by group through it). GPU devices: n work-items, args being
   * nargs memory handles (alloc's), passed after n. 0 or a negative status with the error set. */
  int (*launch)(kernel_fn fn, void **args, int nargs, long long n);
  /* GPU devices: the same in work-groups of exactly `local` work-items (n a multiple of it; a
   * kernel with LOCAL or work-group GROUP axes relies on that size: its local arrays and
   * barriers). Refused with an error, never run, when the kernel or device allows fewer.
   * NULL on host devices. */
  int (*launch_local)(kernel_fn fn, void **args, int nargs, long long n, long long local);
  /* What a kernel's speed depends on (compiler, flags, cores): keys BEAM's cache. */
  void (*describe)(char *buf, size_t n);
  /* Device memory: NULL on devices that compute on host memory (CPU, LLVM), whose buffers are
   * host blocks (device/buffer.c). Otherwise a buffer is the handle alloc returns (NULL with
   * the error set); the copies wait until they are done and return 0 or a negative status. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *mem);
  int (*copy_in)(void *mem, const void *src, size_t bytes);
  int (*copy_out)(void *dst, void *mem, size_t bytes);
  /* Logical instances (device.c): "CPU:1" is a copy of the CPU's struct with base = &cpu_device
   * and instance 1; the kinds themselves have base NULL and instance 0. Programs are built and
   * cached for the base (one compile serves every instance). */
  const device *base;
  int instance;
};

enum { MAX_INSTANCES = 8 }; /* CPU:0 .. CPU:7, LLVM:0 .. LLVM:7 */

/* The kind a device is an instance of (itself for CPU, LLVM, CL, CUDA). */
static inline const device *device_base(const device *d) { return d->base ? d->base : d; }

/* Memory of nbytes on d (host memory, 64-byte aligned, on host devices) and its release. */
void *device_mem_alloc(const device *d, size_t nbytes);
void device_mem_free(const device *d, void *mem);

/* Bytes of the host's data cache at level (2, 3) as the kernel reports it for CPU 0 (sysfs:
 * what one core shares), else as sysconf says (a VM's CPUID may report the whole socket's L3:
 * 256 MB here against 32 MB in sysfs), else 0. */
int64_t host_cache_bytes(int level);

/* The launch of the host devices (CPU, LLVM): the parallel axis over the thread pool. */
int host_launch(kernel_fn fn, void **args, int nargs, long long n);

/* Whether a device computes on its own memory with work-items (OpenCL, CUDA) rather than on
 * host memory with loops over a parallel range (CPU, LLVM). */
static inline bool device_is_gpu(const device *d) { return d->alloc != NULL; }

/* The device named name ("CPU", "LLVM", case-insensitive; ":n" an instance, ":0" the kind
 * itself), opened; NULL with the error set when it is unknown or not available here. */
const device *device_get(const char *name);
/* The device work goes to when nothing else says: tg_set_default_device, else DEV, else CPU
 * (NULL with the error set when that one cannot be opened). */
const device *device_default(void);

/* A device's number in uop->device (1, 2, ...; uop.h) and back (NULL for DEVICE_NONE). */
int device_number(const device *d);
const device *device_of_number(int n);

extern device cpu_device;  /* device/cpu.c */
extern device cl_device;   /* device/cl.c */
extern device cuda_device; /* device/cuda.c */
#endif
