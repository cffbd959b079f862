/* test_devices.c — the device API (docs/devices.md): names, availability, the default device
 * (tg_set_default_device, DEV=), and clear errors for devices that do not exist here. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST(devices_names_and_availability) {
  CHECK(tg_device_available("CPU") == 1);
  CHECK(tg_device_available("cpu") == 1);   /* case does not matter */
  CHECK(tg_device_available("CPU:0") == 1); /* the kind itself */
  CHECK(tg_device_available("CPU:1") == 1 && tg_device_available("CPU:8") == 0); /* logical instances :0 to :7 */
  CHECK(tg_device_available("TPU") == 0);
  CHECK(tg_device_available("") == 0);
  CHECK(tg_device_available(NULL) == 0);
}

/* Asking is not an error: the thread's last error stays what it was. */
TEST(devices_available_keeps_the_last_error) {
  tg_clear_error();
  CHECK(tg_device_available("TPU") == 0 && tg_last_error()[0] == 0);
  tg_tensor *bad = tg_reshape(NULL, (int64_t[]){1}, 1); /* an error to keep */
  CHECK(bad == NULL);
  char before[256];
  snprintf(before, sizeof before, "%s", tg_last_error());
  CHECK(before[0] != 0);
  CHECK(tg_device_available("TPU") == 0 && tg_device_available("CPU") == 1);
  CHECK(strcmp(tg_last_error(), before) == 0);
  tg_clear_error();
}

TEST(devices_set_default_errors_name_the_device) {
  tg_clear_error();
  CHECK(tg_set_default_device("TPU") == TG_ERR_DEVICE);
  CHECK(strstr(tg_last_error(), "TPU") && strstr(tg_last_error(), "CPU")); /* says which exist */
  CHECK(tg_set_default_device(NULL) == TG_ERR_DEVICE);
  CHECK(tg_set_default_device("cpu") == 0);
  tg_scope *s = tg_scope_begin();
  CHECK(tg_item(tg_sum(tg_ones((int64_t[]){3}, 1, TG_FLOAT32), NULL, 0, false)) == 3);
  tg_scope_end(s);
}

/* DEV names the default device; an unknown one makes realizes fail with a clear error. */
TEST_CHILD(devices_child_realize) {
  tg_scope *s = tg_scope_begin();
  float out = 0;
  int rc = tg_to_host(tg_sum(tg_ones((int64_t[]){4}, 1, TG_FLOAT32), NULL, 0, false), &out, sizeof out);
  printf("rc=%d out=%g dev=%s err=%s\n", rc, out, rc ? "" : tg_device_of(tg_ones((int64_t[]){1}, 1, TG_FLOAT32)), tg_last_error());
  CHECK(1);
  tg_scope_end(s);
}

TEST(devices_dev_environment) {
  char out[2048];
  CHECK(harness_run_child("devices_child_realize", "DEV=CPU", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 out=4") != NULL);
  CHECK(harness_run_child("devices_child_realize", "DEV=cpu:0", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 out=4") != NULL);
  CHECK(harness_run_child("devices_child_realize", "DEV=NOPE", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=-4") && strstr(out, "device \"NOPE\": no such device"));
}

/* The default device when DEV is not set: LLVM where libLLVM-14 loads, else CPU. */
TEST(devices_default_is_the_fastest_compiler) {
  char out[2048];
  CHECK(harness_run_child("devices_child_realize", "DEV=", out, sizeof out) == 0 && strstr(out, "rc=0 out=4"));
  CHECK(strstr(out, tg_device_available("LLVM") ? "dev=LLVM" : "dev=CPU") != NULL);
}

TEST(devices_device_of) {
  tg_scope *s = tg_scope_begin();
  double d[3] = {1, 2, 3};
  const char *dflt = tg_device_of(tg_ones((int64_t[]){2}, 1, TG_FLOAT32)); /* a constant: the default device */
  CHECK(dflt && !strcmp(tg_device_of(tg_from_data(d, TG_FLOAT64, (int64_t[]){3}, 1)), dflt));
  tg_clear_error();
  CHECK(tg_device_of(NULL) == NULL && strstr(tg_last_error(), "device_of"));
  CHECK(tg_to(tg_ones((int64_t[]){2}, 1, TG_FLOAT32), "TPU") == NULL && strstr(tg_last_error(), "TPU"));
  tg_tensor *x = tg_from_data(d, TG_FLOAT64, (int64_t[]){3}, 1);
  CHECK(tg_realize(x) == 0);
  tg_reset_stats();
  tg_tensor *same = tg_to(x, dflt);
  CHECK(same && !strcmp(tg_device_of(same), dflt));
  double out[3];
  CHECK(tg_to_host(same, out, sizeof out) == 0 && out[2] == 3 && tg_get_stats().kernels_run == 0); /* no copy */
  tg_scope_end(s);
}

/* Two devices: CPU and LLVM (both host memory). */
TEST(devices_copies_and_mixed_device_errors) {
  if (!tg_device_available("LLVM")) { SKIP("the LLVM device is not available here (libLLVM-14)"); return; }
  tg_scope *s = tg_scope_begin();
  double d[4] = {1, -2, 3.5, 4}, out[4];
  tg_tensor *x = tg_to(tg_from_data(d, TG_FLOAT64, (int64_t[]){4}, 1), "CPU"); /* whatever the default is */
  CHECK(tg_realize(x) == 0 && !strcmp(tg_device_of(x), "CPU"));
  tg_tensor *y = tg_to(x, "LLVM");
  CHECK(y && !strcmp(tg_device_of(y), "LLVM"));
  tg_clear_error();
  CHECK(tg_add(x, y) == NULL); /* copies are explicit */
  CHECK(strstr(tg_last_error(), "different devices") && strstr(tg_last_error(), "CPU") && strstr(tg_last_error(), "LLVM"));
  tg_clear_error();
  tg_tensor *z = tg_mul_s(tg_add(y, y), 0.5); /* on LLVM */
  CHECK(z && !strcmp(tg_device_of(z), "LLVM"));
  tg_tensor *back = tg_to(z, "CPU");
  CHECK(back && !strcmp(tg_device_of(back), "CPU"));
  CHECK(tg_to_host(back, out, sizeof out) == 0);
  for (int i = 0; i < 4; i++) CHECK(out[i] == d[i]);
  CHECK(tg_to_host(z, out, sizeof out) == 0); /* read where it is */
  for (int i = 0; i < 4; i++) CHECK(out[i] == d[i]);
  /* gradients flow back through the copy, to the source's device */
  tg_tensor *g = NULL;
  CHECK(tg_gradient(tg_sum(tg_mul(tg_to(x, "LLVM"), tg_to(x, "LLVM")), NULL, 0, false), &x, 1, &g) == 0);
  CHECK(g && !strcmp(tg_device_of(g), "CPU"));
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 4; i++) CHECK(out[i] == 2 * d[i]);
  /* a constant goes anywhere */
  tg_tensor *c = tg_to(tg_full((int64_t[]){4}, 1, 7, TG_FLOAT64), "LLVM");
  CHECK(c && !strcmp(tg_device_of(c), "LLVM") && tg_to_host(tg_add(c, y), out, sizeof out) == 0 && out[1] == 5);
  tg_scope_end(s);
}
