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
  const char *name; /* "CPU", "LLVM": what DEV= and tg_to take */
  /* 0 when the device can be used here; otherwise a negative status with the error set
   * (its library or driver is missing). Called once, before anything else. */
  int (*open)(void);
  device_caps caps;                      /* filled by open */
  /* Source for the programs of one kernel (caller frees), one function per stage:
   * void names[i](void **args, long long start, long long end). */
  char *(*render)(const lin_program *progs, int n, const char *const *names);
  /* Compile src and return the address of each of names[0..n) in fns (cached on disk by the
   * device, keyed by source + compiler + flags). */
  int (*compile)(const char *src, const char *const *names, int n, void **fns);
  /* Run fn over iterations [0, n) of the parallel axis and wait for it. */
  void (*launch)(kernel_fn fn, void **args, long long n);
  /* What a kernel's speed depends on (compiler, flags, cores): keys BEAM's cache. */
  void (*describe)(char *buf, size_t n);
};

/* The device named name ("CPU", "LLVM", case-insensitive, ":0" allowed), opened; NULL with
 * the error set when it is unknown or not available here. */
const device *device_get(const char *name);
/* The device work goes to when nothing else says: tg_set_default_device, else DEV, else CPU
 * (NULL with the error set when that one cannot be opened). */
const device *device_default(void);

/* A device's number in uop->device (1, 2, ...; uop.h) and back (NULL for DEVICE_NONE). */
int device_number(const device *d);
const device *device_of_number(int n);

extern device cpu_device; /* device/cpu.c */
#endif
