/* fuzz_file.h — shared by the libFuzzer targets of the file loaders: the loaders take a path,
 * so each input is written to an in-memory file (memfd) opened as /proc/self/fd/N. A target
 * aborts (libFuzzer reports a crash and saves the input) when a call breaks the contract:
 * success, or a negative status with a message (docs/errors.md). */
#ifndef TG_FUZZ_FILE_H
#define TG_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "tg.h"

/* The path of a file holding data[0..size) (one memfd per process, rewritten each time). */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0 && (fd = memfd_create("tg_fuzz", 0)) < 0) abort();
  if (ftruncate(fd, 0) < 0) abort();
  for (size_t off = 0; off < size;) {
    ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
    if (w <= 0) abort();
    off += (size_t)w;
  }
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return path;
}

/* The contract of a call that returned status rc. */
static inline void fuzz_check_status(const char *op, int rc) {
  if (rc > 0 || rc < TG_ERR_SHAPE || (rc < 0 && !tg_last_error()[0])) {
    fprintf(stderr, "%s: status %d, message \"%s\"\n", op, rc, tg_last_error());
    abort();
  }
}
#endif
