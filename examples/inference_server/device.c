/* Devices of the service: opening each (a context, a foreign-mode cudaev
 * loop driven by the one libev loop, slots), choosing one per batch (least
 * loaded, ties in turn), and the reset after a fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

#define MAX_DEVICES 64

static void on_recover(struct ev_loop *evl, ev_timer *w, int revents);

static void free_slots(struct device *dev) {
  for (int i = 0; i < dev->nslots; i++) free(dev->slots[i].req);
  free(dev->slots);
  dev->slots = dev->free = NULL;
}

/* Opens one device; on failure it is left DOWN. */
static int open_one(struct device *dev, char *err, size_t errlen) {
  struct server *s = dev->srv;
  int cap = s->cfg->max_batch;
  dev->nslots = s->cfg->streams;
  dev->slots = calloc((size_t)dev->nslots, sizeof *dev->slots);
  for (int i = 0; dev->slots && i < dev->nslots; i++) {
    dev->slots[i].dev = dev;
    dev->slots[i].index = i;
    dev->slots[i].req = calloc((size_t)cap, sizeof(struct request *));
    if (dev->slots[i].req == NULL) {
      free_slots(dev);
      break;
    }
  }
  if (dev->slots == NULL) {
    snprintf(err, errlen, "out of memory");
    dev->state = DEV_DOWN;
    return -1;
  }
  if (s->be->open(dev, cap, err, errlen) != 0) {
    free_slots(dev);
    dev->state = DEV_DOWN;
    return -1;
  }
  dev->free = NULL;
  for (int i = dev->nslots - 1; i >= 0; i--) {
    dev->slots[i].next_free = dev->free;
    dev->free = &dev->slots[i];
  }
  dev->inflight = 0;
  cudaev_loop_set_spin(dev->loop, s->spin_us);
  evdrive_start(&dev->drive, s->evl, dev->loop, server_after_process, s);
  dev->state = DEV_UP;
  return 0;
}

/* Closes one device: its loop first (continuations of batches in flight
 * run now and answer their requests), then its resources. Not inside
 * cudaev_loop_process: from main() or from the recover timer. */
static void close_one(struct device *dev, int reset) {
  if (dev->slots == NULL) return;
  dev->state = dev->state == DEV_UP ? DEV_DOWN : dev->state;
  evdrive_stop(&dev->drive);
  dev->srv->be->close(dev, reset);
  dev->loop = NULL;
  free_slots(dev);
}

int devices_open(struct server *s, char *err, size_t errlen) {
  int ordinals[MAX_DEVICES];
  int n = s->be->list(s, ordinals, MAX_DEVICES, err, errlen);
  if (n <= 0) return -1;
  s->dev = calloc((size_t)n, sizeof *s->dev);
  if (s->dev == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->ndev = n;
  for (int i = 0; i < n; i++) {
    struct device *dev = &s->dev[i];
    dev->srv = s;
    dev->index = i;
    dev->ordinal = ordinals[i];
    ev_init(&dev->recover, on_recover);
    dev->recover.data = dev;
    char why[256];
    if (open_one(dev, why, sizeof why) != 0) {
      /* Every device of the machine is meant to serve: one that cannot is a
       * configuration problem to fix, not to serve around. */
      snprintf(err, errlen, "device %d: %s", dev->ordinal, why);
      s->ndev = i;
      devices_close(s);
      return -1;
    }
  }
  return 0;
}

void devices_close(struct server *s) {
  /* Down first, all of them: continuations running inside the closes below
   * dispatch again and must find no slot. */
  for (int i = 0; i < s->ndev; i++) {
    if (s->dev[i].state == DEV_UP) s->dev[i].state = DEV_DOWN;
    ev_timer_stop(s->evl, &s->dev[i].recover);
  }
  for (int i = 0; i < s->ndev; i++) close_one(&s->dev[i], 0);
  free(s->dev);
  s->dev = NULL;
  s->ndev = 0;
}

int devices_up(struct server *s) {
  int up = 0;
  for (int i = 0; i < s->ndev; i++) up += s->dev[i].state == DEV_UP;
  return up;
}

struct slot *device_take_slot(struct server *s) {
  struct device *best = NULL;
  for (int k = 0; k < s->ndev; k++) {
    struct device *d = &s->dev[(s->rr + k) % s->ndev];
    if (d->state != DEV_UP || d->free == NULL) continue;
    if (best == NULL || d->inflight < best->inflight) best = d;
  }
  if (best == NULL) return NULL;
  s->rr = (best->index + 1) % s->ndev;
  struct slot *slot = best->free;
  best->free = slot->next_free;
  best->inflight++;
  return slot;
}

void device_put_slot(struct slot *slot) {
  slot->next_free = slot->dev->free;
  slot->dev->free = slot;
  slot->dev->inflight--;
}

void device_failed(struct device *dev, cudaError_t e) {
  /* Our own shutdown and resets destroy loops: their futures end with
   * LOOP_DESTROYED, which says nothing about the device. */
  if (dev->state != DEV_UP || e == CUDAEV_ERROR_LOOP_DESTROYED) return;
  dev->state = DEV_FAILED;
  dev->last_error = e;
  fprintf(stderr, "%s: device %d failed (%s): its batches get 503; resetting it\n",
          dev->srv->cfg->prog, dev->ordinal, cudaev_error_name(e));
  /* Not here: this runs inside a continuation, i.e. inside
   * cudaev_loop_process of the very loop the reset destroys. */
  ev_timer_stop(dev->srv->evl, &dev->recover);
  ev_timer_set(&dev->recover, 0., 0.);
  ev_timer_start(dev->srv->evl, &dev->recover);
}

static void on_recover(struct ev_loop *evl, ev_timer *w, int revents) {
  struct device *dev = w->data;
  struct server *s = dev->srv;
  char why[256];
  (void)evl, (void)revents;
  if (s->cfg->loop_threads > 1) {
    /* Every loop thread's loop for this device serves the device's one
     * primary context: a reset here would pull it from under the others.
     * The process restarts instead, all threads together. */
    char line[160];
    snprintf(line, sizeof line, "device %d: %s (with %d loop threads, no in-process reset)",
             dev->ordinal, cudaev_error_name(dev->last_error), s->cfg->loop_threads);
    close_one(dev, 0);
    server_restart(s, line);
    batch_dispatch(s);
    http_kick(s);
    server_check_drained(s);
    return;
  }
  uint64_t t0 = now_ns();
  close_one(dev, 1);
  dev->resets++;
  atomic_fetch_add(&s->metrics->device_resets, 1);
  if (open_one(dev, why, sizeof why) == 0) {
    fprintf(stderr, "%s: device %d reset and serving again (%.1f ms)\n", s->cfg->prog, dev->ordinal,
            (double)(now_ns() - t0) * 1e-6);
  } else {
    fprintf(stderr, "%s: device %d could not be reopened: %s; %d device(s) left\n", s->cfg->prog,
            dev->ordinal, why, devices_up(s));
    char line[160];
    snprintf(line, sizeof line, "device %d: %.140s", dev->ordinal, why);
    server_restart(s, line);
  }
  batch_dispatch(s);
  http_kick(s);
  server_check_drained(s);
}

void devices_set_spin(struct server *s, unsigned us) {
  s->spin_us = us;
  for (int i = 0; i < s->ndev; i++)
    if (s->dev[i].loop) cudaev_loop_set_spin(s->dev[i].loop, us);
}

void devices_metrics(struct server *s, struct strbuf *b) {
  sb_printf(b,
            "# HELP infer_device_up 1 while the device takes batches.\n"
            "# TYPE infer_device_up gauge\n");
  for (int i = 0; i < s->ndev; i++)
    sb_printf(b, "infer_device_up{device=\"%d\"} %d\n", s->dev[i].ordinal,
              s->dev[i].state == DEV_UP);
  sb_printf(b, "# TYPE infer_device_batches_total counter\n");
  for (int i = 0; i < s->ndev; i++)
    sb_printf(b, "infer_device_batches_total{device=\"%d\"} %llu\n", s->dev[i].ordinal,
              s->dev[i].batches);
  sb_printf(b, "# TYPE infer_device_inflight_batches gauge\n");
  for (int i = 0; i < s->ndev; i++)
    sb_printf(b, "infer_device_inflight_batches{device=\"%d\"} %d\n", s->dev[i].ordinal,
              s->dev[i].inflight);
  sb_printf(b,
            "# HELP cudaev_loop_pending Futures the device's cudaev loop tracks.\n"
            "# TYPE cudaev_loop_pending gauge\n");
  for (int i = 0; i < s->ndev; i++)
    sb_printf(b, "cudaev_loop_pending{device=\"%d\"} %zu\n", s->dev[i].ordinal,
              s->dev[i].loop ? cudaev_loop_pending(s->dev[i].loop) : 0);
  sb_printf(b,
            "# HELP cudaev_loop_passes_total cudaev_loop_process calls for the device.\n"
            "# TYPE cudaev_loop_passes_total counter\n");
  for (int i = 0; i < s->ndev; i++)
    sb_printf(b, "cudaev_loop_passes_total{device=\"%d\"} %llu\n", s->dev[i].ordinal,
              s->dev[i].drive.passes);
}
