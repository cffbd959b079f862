/* cuda.h — the CUDA device (DEV=CUDA, src/device/cuda.c) and its offline check: NVRTC compiling
 * the CUDA C of every kernel tg builds, for any device, without a GPU (TG_CUDA_CHECK=1), and with
 * CUDA_PTX=1 ptxas assembling its PTX (render_ptx).
 * docs/devices.md, section CUDA. */
#ifndef TG_DEVICE_CUDA_H
#define TG_DEVICE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"

/* Whether NVRTC could be loaded (the first call loads it; no driver or GPU needed); false with
 * the reason as the thread's error. */
bool cuda_nvrtc_available(void);

/* Compile CUDA C src to a cubin for arch ("sm_90") with NVRTC, through the disk cache (keyed by
 * source, NVRTC version, arch and flags). names[0] names the kernel in errors. 0 with the
 * cubin in *cubin (caller frees) and its size in *len, or TG_ERR_COMPILE with NVRTC's log in
 * the error. No driver is needed. */
int cuda_nvrtc_cubin(const char *src, const char *arch, const char *const *names, char **cubin, size_t *len);

/* The offline check (issue 14): with TG_CUDA_CHECK=1 (or =sm_XY) in the environment, render
 * the programs of a kernel as CUDA C and compile them with NVRTC for sm_90 (or sm_XY); 0 when
 * NVRTC accepts them or the knob is off, else TG_ERR_COMPILE naming the kernel, with NVRTC's
 * log (the source and the whole log go to stderr). Called by program_build for every device. */
int cuda_offline_check(const lin_program *progs, int n, const char *const *names);
/* Whether TG_CUDA_CHECK is on in this process. */
bool cuda_offline_check_on(void);

/* Kernels the offline check compiled (or found in the disk cache) in this process; of those,
 * the ones whose PTX ptxas assembled (CUDA_PTX=1). */
extern _Atomic uint64_t cuda_checked_kernels, cuda_ptx_checked_kernels;

/* CUDA_PTX=1 (read once per process): the device renders PTX (render_ptx) and the driver
 * compiles it, and the offline check also assembles every kernel's PTX with ptxas. */
bool cuda_ptx_mode(void);

/* Whether ptxas is there ($TG_PTXAS, $CUDA_PATH/bin/ptxas, /usr/local/cuda/bin/ptxas); false
 * with the reason as the thread's error. */
bool cuda_ptxas_available(void);

/* Assemble PTX for arch ("sm_90") with ptxas (a subprocess on a temp file; no GPU needed): 0
 * when it is accepted (remembered in the disk cache by PTX, arch and ptxas path), else
 * TG_ERR_COMPILE naming kernel, with the start of ptxas's log. */
int cuda_ptxas_check(const char *ptx, const char *arch, const char *kernel);

#endif
