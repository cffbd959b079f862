/* test_devices.c — the device API (docs/devices.md): names, availability, the default device
 * (tg_set_default_device, DEV=), and clear errors for devices that do not exist here. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST(devices_names_and_availability) {
  CHECK(tg_device_available("CPU") == 1);
  CHECK(tg_device_available("cpu") == 1);   /* case does not matter */
  CHECK(tg_device_available("CPU:0") == 1); /* one device of each kind: index 0 */
  CHECK(tg_device_available("CPU:1") == 0);
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
  printf("rc=%d out=%g err=%s\n", rc, out, tg_last_error());
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
