/* The GPU backend: per device the weights (gpu.c), one slot per stream with
 * its cuBLAS handle and pinned staging, and one foreign-mode cudaev loop for
 * the device's context. A batch is gpu_enqueue (plain cudart + cuBLAS, the
 * twin's code) followed by cudaev_future_new_stream: the future completes when
 * the stream has passed the copy out, on the loop thread.
 *
 * After a fault the context is gone for good (a sticky error): close
 * destroys the loop (whose watchdog already failed the device's pending
 * futures), frees what it can, and resets the device, so that open can
 * build everything again in a fresh primary context. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"
#include "service.h"

struct gpu_state {
  struct gpu_dev g;
  struct gpu_slot *slots;
};

static int gpu_list(struct server *s, int *ordinals, int max, char *err, size_t errlen) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count == 0) e = cudaErrorNoDevice;
  if (e != cudaSuccess) {
    snprintf(err, errlen, "no GPU: %s (%s); --backend=cpu serves without one", cudaGetErrorName(e),
             cudaGetErrorString(e));
    return -1;
  }
  return config_devices(s->cfg->devices, count, ordinals, max, err, errlen);
}

static void gpu_free(struct device *dev) {
  struct gpu_state *st = dev->priv;
  if (st == NULL) return;
  for (int i = 0; st->slots && i < dev->nslots; i++) {
    if (st->slots[i].stream) gpu_slot_close(&st->slots[i]);
  }
  gpu_dev_close(&st->g);
  free(st->slots);
  free(st);
  dev->priv = NULL;
}

static int gpu_open(struct device *dev, int cap, char *err, size_t errlen) {
  const struct model *m = &dev->srv->model;
  struct gpu_state *st = calloc(1, sizeof *st);
  dev->priv = st;
  if (st == NULL || (st->slots = calloc((size_t)dev->nslots, sizeof *st->slots)) == NULL) {
    snprintf(err, errlen, "out of memory");
    gpu_free(dev);
    return -1;
  }
  cudaError_t e = gpu_dev_open(&st->g, m, dev->ordinal);
  for (int i = 0; e == cudaSuccess && i < dev->nslots; i++) {
    e = gpu_slot_open(&st->slots[i], &st->g, m, cap);
    dev->slots[i].in = st->slots[i].h_in;
    dev->slots[i].out = st->slots[i].h_out;
    dev->slots[i].priv = &st->slots[i];
  }
  if (e != cudaSuccess) {
    snprintf(err, errlen, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    gpu_free(dev);
    return -1;
  }
  char line[512];
  if (gpu_selfcheck(&st->slots[0], &st->g, m, line, sizeof line) != 0) {
    snprintf(err, errlen, "%s", line);
    gpu_free(dev);
    return -1;
  }
  /* The device's context is current (gpu_dev_open set it): the loop
   * serves that context. */
  e = cudaev_loop_new_foreign(&dev->loop);
  if (e != cudaSuccess) {
    snprintf(err, errlen, "cudaev_loop_new_foreign: %s", cudaev_error_string(e));
    gpu_free(dev);
    return -1;
  }
  printf("%s; %d streams\n", line, dev->nslots);
  return 0;
}

static cudaError_t gpu_submit(struct slot *slot, cudaev_future_t **out) {
  struct gpu_state *st = slot->dev->priv;
  struct gpu_slot *gs = slot->priv;
  cudaError_t e = gpu_enqueue(gs, &st->g, &slot->dev->srv->model, slot->n, slot->fault);
  if (e != cudaSuccess) return e;
  return cudaev_future_new_stream(slot->dev->loop, gs->stream, out);
}

static uint64_t gpu_batch_ns(struct slot *slot) {
  return (uint64_t)((double)gpu_batch_ms(slot->priv) * 1e6);
}

static void gpu_close(struct device *dev, int reset) {
  cudaSetDevice(dev->ordinal);
  cudaev_loop_destroy(dev->loop);
  gpu_free(dev);
  if (reset) {
    cudaError_t e = cudaDeviceReset();
    if (e != cudaSuccess)
      fprintf(stderr, "device %d: cudaDeviceReset: %s\n", dev->ordinal, cudaGetErrorName(e));
  }
  cudaGetLastError();
}

const struct backend_ops backend_gpu = {
    .name = "gpu",
    .list = gpu_list,
    .open = gpu_open,
    .submit = gpu_submit,
    .batch_ns = gpu_batch_ns,
    .close = gpu_close,
};
