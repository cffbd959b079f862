/* hello.c — the README example: matmul + bias + relu fused into one kernel. */
#include <stdio.h>
#include <tg.h>

int main(void) {
  float xs[6] = {1, 2, 3, 4, 5, 6};
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){2, 3}, 2);
  tg_tensor *w = tg_full((int64_t[]){3, 4}, 2, 0.5, TG_FLOAT32);
  /* matmul + bias + relu: nothing runs yet, and it all becomes one kernel */
  tg_tensor *y = tg_relu(tg_add(tg_matmul(x, w), tg_arange(0, 4, 1, TG_FLOAT32)));
  float out[8];
  if (tg_to_host(y, out, sizeof out) < 0) {  /* errors never abort: they return a status */
    fprintf(stderr, "%s\n", tg_last_error());
    return 1;
  }
  for (int i = 0; i < 8; i++) printf("%g ", out[i]);
  printf("\n");
  tg_scope_end(s);  /* frees every tensor made inside the scope */
  return 0;
}
