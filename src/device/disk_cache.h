/* disk_cache.h — the on-disk cache of compiled artifacts (kernel objects, BEAM choices), shared
 * by every device: entries are files in one flat directory, named by a hash of what produced
 * them (source + compiler + flags), written atomically and checked when read.
 *
 * The directory is $TG_CACHE_DIR, $XDG_CACHE_HOME/tg or ~/.cache/tg. When it cannot be used
 * (not a directory, not writable) the process warns once on stderr and works in a private
 * temporary directory (mkdtemp under $TMPDIR, removed at exit): compiles still work, nothing
 * persists. CACHELEVEL=0 turns lookups and stores off (work files go to the private directory).
 *
 * A writer fills a temp file beside the entry and renames it into place, so a reader never
 * sees a partial entry and two processes storing one entry at once both succeed (the second
 * rename replaces an identical file; a path renamed over stays valid for whoever opened it).
 * A reader that finds a broken entry (a crash or a full disk can leave garbage or a truncated
 * file) removes it, says so at DEBUG>=1, and rebuilds. */
#ifndef TG_DISK_CACHE_H
#define TG_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries removed as broken in this process (tests read it). */
extern _Atomic uint64_t disk_cache_removed;

/* Whether lookups and stores are on (CACHELEVEL > 0, the default). */
bool disk_cache_enabled(void);

/* The configured directory (not checked): $TG_CACHE_DIR, $XDG_CACHE_HOME/tg or ~/.cache/tg. */
void disk_cache_config_dir(char *buf, size_t n);

/* An entry name: prefix, 32 hex digits hashing the n strings parts (their order matters),
 * suffix; e.g. ("", {source, compiler, flags}, ".so"). */
void disk_cache_key(char *name, size_t cap, const char *prefix, const char *const *parts, int n, const char *suffix);

/* Says whether the file at path is a usable entry; on false, why (for the DEBUG message). */
typedef bool (*disk_cache_check_fn)(const char *path, char *why, size_t n);

/* Look up entry name: 1 and its path when it exists and passes check (NULL: any file);
 * 0 when there is none (a broken one is removed first); negative when no directory works.
 * Always 0 when the cache is off. */
int disk_cache_find(const char *name, disk_cache_check_fn check, char *path, size_t n);

/* A new, empty, uniquely named temp file in the directory where entry name goes, ending with
 * suffix (e.g. ".c" for a compiler that needs it); 0 or a negative status. */
int disk_cache_temp(const char *name, const char *suffix, char *tmp, size_t n);

/* Make the finished temp file tmp the entry name (atomic rename). When the cache is off, or
 * the rename fails, tmp is just removed: a failed store is not an error (DEBUG>=1 says so). */
void disk_cache_publish(const char *tmp, const char *name);

/* Store data as entry name (temp file + publish); nothing when the cache is off. */
void disk_cache_write(const char *name, const void *data, size_t len);

/* Remove a broken entry (why: for the DEBUG>=1 message). */
void disk_cache_remove(const char *path, const char *why);

/* Checks: a non-empty file; a shared object of this machine's ELF class whose headers and
 * segments all lie inside the file (catches garbage and truncation before dlopen, which can
 * crash on a segment that ends past the end of the file). */
bool disk_cache_check_nonempty(const char *path, char *why, size_t n);
bool disk_cache_check_elf(const char *path, char *why, size_t n);

#endif
