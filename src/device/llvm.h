/* llvm.h — the LLVM device (DEV=LLVM): kernels rendered as LLVM IR (render/llvm.c) and compiled
 * in this process by libLLVM-14, loaded with dlopen at first use (tg never links LLVM; a
 * machine without it has no LLVM device). No compiler process is forked. docs/devices.md. */
#ifndef TG_DEVICE_LLVM_H
#define TG_DEVICE_LLVM_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/codegen.h"

/* The device (device.c's table). */
extern struct device llvm_device;

/* LLVM IR (LLVM 14 text) for the programs of one kernel: one function per program with the
 * signature and semantics of render_c's (caller frees; NULL with the error set). */
char *render_llvm(const lin_program *progs, int n, const char *const *names);
/* The same for a device with capabilities caps (NULL: none assumed): caps->f16c converts
 * float16 with the hardware's instructions (same bits as without). */
char *render_llvm_caps(const lin_program *progs, int n, const char *const *names, const device_caps *caps);

/* Whether libLLVM-14 could be loaded and set up for this CPU (the first call loads it);
 * false with the reason as the thread's error ("libLLVM-14.so.1 not found: ..."). */
bool llvm_available(void);

/* Compile IR and return the address of each of names[0..n) in fns: the contract of a device's
 * compile. Objects are cached on disk (disk_cache.h) keyed by IR + LLVM + CPU + options;
 * compiled code stays loaded for the life of the process. 0 or a negative status. */
int llvm_compile(const char *ir, const char *const *names, int n, void **fns);

#endif
