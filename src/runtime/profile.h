/* profile.h — PROFILE=1: a timeline of what tg did, written at exit as a Chrome trace-event
 * JSON file (PROFILE_FILE, default tg_profile.json) that opens in Perfetto (ui.perfetto.dev)
 * or chrome://tracing. Host stages (build, autograd, schedule, lower, compile) go on one track
 * per host thread, kernels on one track per device. See docs/debug.md. */
#ifndef TG_PROFILE_H
#define TG_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

/* Whether PROFILE is set (read once). */
bool profile_on(void);
/* A host stage of this thread from t0 to t1 (tg_now() seconds); cat: "build", "autograd",
 * "schedule", "lower", "compile". name is copied. */
void profile_host(const char *cat, const char *name, double t0, double t1);
/* Work on device from t0 to t1 (cat "kernel", with its work and launch size, or "copy"). */
void profile_device(const char *cat, const char *device, const char *name, double t0, double t1, uint64_t flops,
                    uint64_t bytes, long long launch);
/* This thread's previous realize ended at (tg_now() seconds): the next "build" span starts there. */
double profile_last_realize_end(void);
void profile_set_last_realize_end(double t);
#endif
