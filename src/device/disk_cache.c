/* disk_cache.c — the on-disk cache of compiled artifacts: which directory (the configured one,
 * or a private temp directory when that cannot be used), entry names, atomic stores, and checks
 * that find broken entries so they are removed and rebuilt. See disk_cache.h. */
#include "device/disk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/helpers.h"

/* Temp files carry this infix; one older than STALE_SECONDS was left by a process that died
 * mid-write and is swept when a process first writes to the directory (not on every start: a
 * directory of 17k entries takes 12-16 ms to read). */
#define TMP_INFIX ".tmp-"
#define STALE_SECONDS 3600

_Atomic uint64_t disk_cache_removed;

/* Which directory is in use. Compiles may run on several threads: guarded by lock. */
static struct {
  pthread_mutex_t lock;
  char checked[PATH_MAX]; /* the configured directory last checked ("" none) */
  bool usable;            /* ... and whether it could be used */
  char warned[PATH_MAX];  /* the last directory warned about: one warning each */
  char swept[PATH_MAX];   /* the last directory swept of stale temp files */
  char priv[PATH_MAX];    /* the private fallback directory ("" until needed) */
  pid_t owner;            /* the process that made priv (a forked child makes its own) */
  bool cleanup_registered;
} dc = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool disk_cache_enabled(void) { return tg_getenv_int("CACHELEVEL", 1) > 0; }

void disk_cache_config_dir(char *buf, size_t n) {
  const char *d = getenv("TG_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (d && *d) snprintf(buf, n, "%s", d);
  else if (xdg && *xdg) snprintf(buf, n, "%s/tg", xdg);
  else snprintf(buf, n, "%s/.cache/tg", home && *home ? home : "/tmp");
}

/* dir + "/" + name into buf; -1 when it does not fit. */
static int join(char *buf, size_t n, const char *dir, const char *name) {
  return (size_t)snprintf(buf, n, "%s/%s", dir, name) < n ? 0 : -1;
}

/* ---------------------------------------------------------------- the directory */

static int mkdirs(const char *path) {
  char tmp[PATH_MAX];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp) return errno = ENAMETOOLONG, -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* A uniquely named empty file dir/<name>.tmp-XXXXXX<suffix>; its fd, or -1 (errno set). */
static int make_temp(const char *dir, const char *name, const char *suffix, char *tmp, size_t n) {
  if ((size_t)snprintf(tmp, n, "%s/%s" TMP_INFIX "XXXXXX%s", dir, name, suffix) >= n) return errno = ENAMETOOLONG, -1;
  return mkstemps(tmp, (int)strlen(suffix));
}

/* Whether dir exists (or can be made) and a file can be created in it; why it cannot. */
static bool dir_usable(const char *dir, char *why, size_t n) {
  char probe[PATH_MAX];
  int fd = mkdirs(dir) < 0 ? -1 : make_temp(dir, ".probe", "", probe, sizeof probe);
  if (fd < 0) { snprintf(why, n, "%s", strerror(errno)); return false; }
  close(fd);
  unlink(probe);
  return true;
}

/* Remove temp files older than STALE_SECONDS from dir (all of them when all). */
static void sweep(const char *dir, bool all) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[PATH_MAX];
  time_t now = time(NULL);
  struct stat st;
  for (struct dirent *e; (e = readdir(d));) {
    if (!all && !strstr(e->d_name, TMP_INFIX)) continue;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || join(path, sizeof path, dir, e->d_name) < 0) continue;
    if (lstat(path, &st) == 0 && (all || now - st.st_mtime > STALE_SECONDS)) unlink(path);
  }
  closedir(d);
}

static void remove_private_dir(void) {
  if (!dc.priv[0] || dc.owner != getpid()) return; /* a forked child leaves its parent's alone */
  sweep(dc.priv, true);
  rmdir(dc.priv);
}

/* The private directory, made on first need (and again if it vanished, or in a forked child)
 * under $TMPDIR, or /tmp when that fails. */
static int private_dir(char *out, size_t n) {
  struct stat st;
  if (!dc.priv[0] || dc.owner != getpid() || stat(dc.priv, &st) < 0) {
    const char *t = getenv("TMPDIR"), *bases[] = {t && *t ? t : "/tmp", "/tmp"};
    dc.priv[0] = 0;
    for (int i = 0; i < 2 && !dc.priv[0]; i++) {
      snprintf(dc.priv, sizeof dc.priv, "%s/tg-cache-XXXXXX", bases[i]);
      if (!mkdtemp(dc.priv)) dc.priv[0] = 0;
    }
    if (!dc.priv[0]) return tg_set_error(TG_ERR_IO, "cache: cannot make a private directory under %s or /tmp: %s", bases[0], strerror(errno));
    dc.owner = getpid();
    if (!dc.cleanup_registered) dc.cleanup_registered = atexit(remove_private_dir) == 0;
  }
  snprintf(out, n, "%s", dc.priv);
  return 0;
}

/* Check the configured directory when it is new (or on recheck); one warning when it fails. */
static void check_config_dir(const char *want, bool recheck) {
  if (!recheck && !strcmp(want, dc.checked)) return;
  char why[256];
  snprintf(dc.checked, sizeof dc.checked, "%s", want);
  dc.usable = dir_usable(want, why, sizeof why);
  if (!dc.usable && strcmp(dc.warned, want)) {
    snprintf(dc.warned, sizeof dc.warned, "%s", want);
    fprintf(stderr, "tg: warning: cache directory %s cannot be used (%s); compiling without a disk cache\n", want, why);
  }
}

/* The directory where entries go now: the configured one if usable, else the private one. A
 * writer's first use of a directory sweeps it. */
static int current_dir(char *out, size_t n, bool recheck, bool writing) {
  char want[PATH_MAX];
  disk_cache_config_dir(want, sizeof want);
  pthread_mutex_lock(&dc.lock);
  bool use = disk_cache_enabled();
  if (use) check_config_dir(want, recheck);
  use = use && dc.usable;
  if (use && writing && strcmp(dc.swept, want)) {
    snprintf(dc.swept, sizeof dc.swept, "%s", want);
    sweep(want, false);
  }
  int rc = use ? (snprintf(out, n, "%s", want), 0) : private_dir(out, n);
  pthread_mutex_unlock(&dc.lock);
  return rc;
}

/* ---------------------------------------------------------------- entries */

void disk_cache_key(char *name, size_t cap, const char *prefix, const char *const *parts, int n, const char *suffix) {
  uint64_t h1 = 0x243f6a8885a308d3ull, h2 = 0x13198a2e03707344ull;
  for (int i = 0; i < n; i++) { /* each part hashed on its own: ("ab","c") differs from ("a","bc") */
    size_t len = strlen(parts[i]);
    h1 = hash_mix(h1, hash_bytes(parts[i], len, 2 * (uint64_t)i + 1));
    h2 = hash_mix(h2, hash_bytes(parts[i], len, 2 * (uint64_t)i + 2));
  }
  snprintf(name, cap, "%s%016llx%016llx%s", prefix, (unsigned long long)h1, (unsigned long long)h2, suffix);
}

int disk_cache_find(const char *name, disk_cache_check_fn check, char *path, size_t n) {
  if (!disk_cache_enabled()) return 0;
  char dir[PATH_MAX], why[256] = "not a regular file";
  int rc = current_dir(dir, sizeof dir, false, false);
  if (rc < 0) return rc;
  if (join(path, n, dir, name) < 0) return tg_set_error(TG_ERR_IO, "cache: path too long: %s/%s", dir, name);
  struct stat st;
  if (stat(path, &st) < 0) return 0;
  if (S_ISREG(st.st_mode) && (!check || check(path, why, sizeof why))) return 1;
  disk_cache_remove(path, why);
  return 0;
}

int disk_cache_temp(const char *name, const char *suffix, char *tmp, size_t n) {
  char dir[PATH_MAX];
  for (int attempt = 0; attempt < 2; attempt++) { /* a failure re-checks the directory once */
    int rc = current_dir(dir, sizeof dir, attempt > 0, true);
    if (rc < 0) return rc;
    int fd = make_temp(dir, name, suffix, tmp, n);
    if (fd >= 0) return close(fd), 0;
  }
  return tg_set_error(TG_ERR_IO, "cache: cannot create a temp file in %s: %s", dir, strerror(errno));
}

void disk_cache_publish(const char *tmp, const char *name) {
  const char *slash = strrchr(tmp, '/');
  char path[PATH_MAX];
  int dirlen = slash ? (int)(slash - tmp) : 1;
  bool fits = (size_t)snprintf(path, sizeof path, "%.*s/%s", dirlen, slash ? tmp : ".", name) < sizeof path;
  if (!disk_cache_enabled()) { unlink(tmp); return; }
  if (fits && rename(tmp, path) == 0) return;
  if (tg_debug() >= 1) fprintf(stderr, "disk cache: cannot store %s: %s\n", path, fits ? strerror(errno) : "path too long");
  unlink(tmp);
}

void disk_cache_write(const char *name, const void *data, size_t len) {
  char tmp[PATH_MAX];
  if (!disk_cache_enabled()) return;
  if (disk_cache_temp(name, "", tmp, sizeof tmp) < 0) { tg_clear_error(); return; }
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(data, 1, len, f) == len;
  if (f && fclose(f) != 0) ok = false; /* a full disk shows here */
  if (ok) disk_cache_publish(tmp, name);
  else unlink(tmp);
}

void disk_cache_remove(const char *path, const char *why) {
  bool gone = unlink(path) == 0 || errno == ENOENT; /* ENOENT: another process healed it first */
  if (gone) atomic_fetch_add_explicit(&disk_cache_removed, 1, memory_order_relaxed); /* clang: no __atomic_* on _Atomic */
  if (tg_debug() >= 1)
    fprintf(stderr, "disk cache: %s broken entry %s (%s); rebuilding it\n", gone ? "removed" : "cannot remove", path, why);
}

/* ---------------------------------------------------------------- checks */

bool disk_cache_check_nonempty(const char *path, char *why, size_t n) {
  struct stat st;
  if (stat(path, &st) == 0 && st.st_size > 0) return true;
  snprintf(why, n, "empty file");
  return false;
}

/* The range [off, off + len) lies inside a file of size bytes (no overflow). */
static bool inside(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

/* Why an ELF header (and the program headers after it in the file) is not a shared object
 * of this machine that fits in size bytes; NULL when it is. */
static const char *elf_problem(int fd, const ElfW(Ehdr) *eh, uint64_t size) {
  static const unsigned char cls = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG)) return "no ELF magic";
  if (eh->e_ident[EI_CLASS] != cls || eh->e_type != ET_DYN) return "not a shared object of this machine";
  if (eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 || eh->e_phnum > 64) return "bad program headers";
  if (!inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)), size)) return "truncated (program headers)";
  if (eh->e_shoff && !inside(eh->e_shoff, (uint64_t)eh->e_shnum * eh->e_shentsize, size)) return "truncated (section headers)";
  ElfW(Phdr) ph[64];
  size_t bytes = (size_t)eh->e_phnum * sizeof ph[0];
  if (pread(fd, ph, bytes, (off_t)eh->e_phoff) != (ssize_t)bytes) return "unreadable program headers";
  for (int i = 0; i < eh->e_phnum; i++)
    if (!inside(ph[i].p_offset, ph[i].p_filesz, size)) return "truncated (a segment ends past the end of the file)";
  return NULL;
}

bool disk_cache_check_elf(const char *path, char *why, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  ElfW(Ehdr) eh;
  const char *problem = NULL;
  if (fd < 0 || fstat(fd, &st) < 0) problem = strerror(errno);
  else if ((uint64_t)st.st_size < sizeof eh || pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh)
    problem = st.st_size ? "too short for an ELF header" : "empty file";
  else problem = elf_problem(fd, &eh, (uint64_t)st.st_size);
  if (fd >= 0) close(fd);
  if (problem) snprintf(why, n, "%s", problem);
  return !problem;
}
