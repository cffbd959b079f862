/* profile.c — PROFILE=1: events kept in memory (one lock), written at exit as Chrome
 * trace-event JSON: "X" (complete) events with ts/dur in whole microseconds from the first event,
 * pid 1, tid = the track; "M" metadata events name the tracks (profile.h). */
#include "runtime/profile.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"

enum { DEVICE_TRACKS = 16, HOST_TRACK0 = 100 };

typedef struct prof_event {
  char cat[12], name[96];
  int track;
  double t0, t1;
  uint64_t flops, bytes;
  long long launch; /* -1: a host stage */
} prof_event;

static struct {
  pthread_mutex_t lock;
  VEC(prof_event) ev;
  const char *device[DEVICE_TRACKS]; /* track 1 + i: device name */
  int host_threads;
  bool at_exit;
} prof = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int host_track;       /* this thread's host track (0: not given yet) */
static _Thread_local double realize_end;   /* tg_now() when this thread's last realize ended */

bool profile_on(void) {
  static _Atomic int on = TG_ENV_UNREAD;
  return tg_getenv_cached(&on, "PROFILE", 0) != 0;
}

double profile_last_realize_end(void) { return realize_end; }
void profile_set_last_realize_end(double t) { realize_end = t; }

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void write_track_name(FILE *f, int track, const char *name, bool *first) {
  fprintf(f, "%s\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", *first ? "" : ",", track);
  json_string(f, name);
  fprintf(f, "}}");
  *first = false;
}

/* At exit: the file. An error goes to stderr (nothing else can report it then). */
static void write_profile(void) {
  pthread_mutex_lock(&prof.lock);
  const char *path = getenv("PROFILE_FILE");
  if (!path || !*path) path = "tg_profile.json";
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "tg: PROFILE: cannot write %s\n", path);
    pthread_mutex_unlock(&prof.lock);
    return;
  }
  double base = prof.ev.n ? prof.ev.v[0].t0 : 0;
  for (size_t i = 0; i < prof.ev.n; i++)
    if (prof.ev.v[i].t0 < base) base = prof.ev.v[i].t0;
  bool first = true;
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  for (int d = 0; d < DEVICE_TRACKS && prof.device[d]; d++) write_track_name(f, 1 + d, prof.device[d], &first);
  for (int h = 0; h < prof.host_threads; h++) {
    char name[32];
    snprintf(name, sizeof name, "host thread %d", h);
    write_track_name(f, HOST_TRACK0 + h, name, &first);
  }
  for (size_t i = 0; i < prof.ev.n; i++) {
    const prof_event *e = &prof.ev.v[i];
    fprintf(f, "%s\n{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,\"cat\":", first ? "" : ",", e->track,
            llround((e->t0 - base) * 1e6), llround((e->t1 - e->t0) * 1e6)); /* whole microseconds */
    first = false;
    json_string(f, e->cat);
    fprintf(f, ",\"name\":");
    json_string(f, e->name);
    if (e->launch >= 0)
      fprintf(f, ",\"args\":{\"flops\":%llu,\"bytes\":%llu,\"global\":%lld}", (unsigned long long)e->flops,
              (unsigned long long)e->bytes, e->launch);
    fprintf(f, "}");
  }
  fprintf(f, "\n]}\n");
  fclose(f);
  VEC_FREE(prof.ev);
  pthread_mutex_unlock(&prof.lock);
}

/* Under prof.lock. */
static void add(prof_event e) {
  if (!prof.at_exit) prof.at_exit = atexit(write_profile) == 0;
  if (VEC_PUSH(prof.ev, e) < 0) return; /* out of memory: the event is lost, nothing else */
}

void profile_host(const char *cat, const char *name, double t0, double t1) {
  if (!profile_on()) return;
  pthread_mutex_lock(&prof.lock);
  if (!host_track) host_track = HOST_TRACK0 + prof.host_threads++;
  prof_event e = {.track = host_track, .t0 = t0, .t1 = t1, .launch = -1};
  snprintf(e.cat, sizeof e.cat, "%s", cat), snprintf(e.name, sizeof e.name, "%s", name);
  add(e);
  pthread_mutex_unlock(&prof.lock);
}

void profile_device(const char *cat, const char *device, const char *name, double t0, double t1, uint64_t flops,
                    uint64_t bytes, long long launch) {
  if (!profile_on()) return;
  pthread_mutex_lock(&prof.lock);
  int d = 0;
  while (d < DEVICE_TRACKS - 1 && prof.device[d] && strcmp(prof.device[d], device)) d++;
  if (!prof.device[d]) prof.device[d] = device; /* device names are static strings */
  prof_event e = {.track = 1 + d, .t0 = t0, .t1 = t1, .flops = flops, .bytes = bytes, .launch = launch};
  snprintf(e.cat, sizeof e.cat, "%s", cat), snprintf(e.name, sizeof e.name, "%s", name);
  add(e);
  pthread_mutex_unlock(&prof.lock);
}
