/* Unit tests of the service's pure parts: request and response bodies
 * (parse.c), the batching policy (policy.h), the MLP and its weights file
 * (model.c), the device list and flags (config.c), metrics (metrics.c),
 * the lists behind the clients' deadlines (deadline_fifo.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "deadline_fifo.h"
#include "metrics.h"
#include "model.h"
#include "parse.h"
#include "policy.h"

/* ---- parse.c ------------------------------------------------------------ */

Test(parse, content_types) {
  cr_expect_eq(parse_content_type(NULL), BODY_JSON);
  cr_expect_eq(parse_content_type("application/json"), BODY_JSON);
  cr_expect_eq(parse_content_type("Application/JSON; charset=utf-8"), BODY_JSON);
  cr_expect_eq(parse_content_type(" application/octet-stream"), BODY_RAW);
  cr_expect_eq(parse_content_type("application/jsonx"), BODY_UNSUPPORTED);
  cr_expect_eq(parse_content_type("text/plain"), BODY_UNSUPPORTED);
  cr_expect_eq(parse_content_type(""), BODY_UNSUPPORTED);
}

static int json(const char *s, float *out, int n, char *err) {
  return parse_json_floats(s, strlen(s), out, n, err, 128);
}

Test(parse, json_good) {
  float v[4];
  char err[128];
  cr_assert_eq(json(" [ 1, -2.5e1 ,0.125,\n3E-2 ] \r\n", v, 4, err), 0, "%s", err);
  cr_expect_eq(v[0], 1.0f);
  cr_expect_eq(v[1], -25.0f);
  cr_expect_eq(v[2], 0.125f);
  cr_expect_eq(v[3], 3e-2f);
  cr_expect_eq(json("[]", v, 0, err), 0);
  /* Not NUL-terminated: only len bytes count. */
  cr_expect_eq(parse_json_floats("[7]xyz", 3, v, 1, err, sizeof err), 0);
  cr_expect_eq(v[0], 7.0f);
  cr_expect_eq(json("[1e-50]", v, 1, err), 0, "underflow is a number: %s", err);
}

Test(parse, json_bad) {
  static const char *bad[] = {
      "",     "[",          "[1,2", "{\"a\":1}", "[1,,2]",  "[1,2,]", "[NaN]", "[\"1\"]",
      "[01]", "[.5]",       "[+1]", "[1] x",     "[[1]]",   "[0x10]", "[-]",   "[1.]",
      "[1e]", "[Infinity]", "null", "[1e999]",   "[-1e39]", "[1 2]",
  };
  float v[2];
  char err[128];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(json(bad[i], v, 1, err), -1, "accepted %s", bad[i]);
    cr_expect(strchr(err, '\n') == NULL, "one line: %s", err);
  }
  cr_expect_eq(json("[1,2,3]", v, 2, err), -1);
  cr_expect_str_eq(err, "wrong length: want 2 numbers, got 3");
  cr_expect_eq(json("[1]", v, 2, err), -1);
  cr_expect_str_eq(err, "wrong length: want 2 numbers, got 1");
}

Test(parse, raw) {
  float in[3] = {1, -2, 3}, out[3];
  char err[128];
  cr_expect_eq(parse_raw_floats(in, sizeof in, out, 3, err, sizeof err), 0);
  cr_expect_eq(memcmp(in, out, sizeof in), 0);
  cr_expect_eq(parse_raw_floats(in, sizeof in - 1, out, 3, err, sizeof err), -1);
  in[1] = INFINITY;
  cr_expect_eq(parse_raw_floats(in, sizeof in, out, 3, err, sizeof err), -1);
  cr_expect_str_eq(err, "value 1 is not finite");
}

Test(parse, format_round_trip) {
  float v[5] = {1.0f, -0.1f, 3.4028235e38f, 1.17549435e-38f, 0.333333343f}, back[5];
  char buf[128], err[128];
  int len = format_json_floats(v, 5, buf, sizeof buf);
  cr_assert_gt(len, 0);
  cr_expect_eq(buf[len - 1], '\n');
  cr_assert_eq(parse_json_floats(buf, (size_t)len, back, 5, err, sizeof err), 0, "%s", err);
  cr_expect_eq(memcmp(v, back, sizeof v), 0, "9 digits read back the same floats");
  v[0] = NAN;
  len = format_json_floats(v, 1, buf, sizeof buf);
  cr_expect_str_eq(buf, "[null]\n");
  cr_expect_eq(format_json_floats(v, 5, buf, 8), -1, "too small");
  float many[100];
  for (int i = 0; i < 100; i++) many[i] = -1.23456789e-30f * (float)(i + 1);
  char *big = malloc(format_json_max(100));
  cr_expect_gt(format_json_floats(many, 100, big, format_json_max(100)), 0);
  free(big);
}

/* The formatter's fast path must print what snprintf prints, byte for
 * byte, and the parser's what strtof reads: a sweep over every float bit
 * pattern in steps (every binade, both signs, the fast paths' edges). */
Test(parse, format_uint) {
  char buf[24], *end = buf + sizeof buf;
  char *d = format_uint(0, end);
  cr_expect(end - d == 1 && d[0] == '0');
  d = format_uint(1234567890u, end);
  cr_expect(end - d == 10 && memcmp(d, "1234567890", 10) == 0);
  d = format_uint(UINT64_MAX, end);
  cr_expect(end - d == 20 && memcmp(d, "18446744073709551615", 20) == 0);
}

Test(parse, float_paths_equal_libc) {
  char a[64], b[64], js[80], err[64];
  unsigned long bad = 0, n = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) {
    uint32_t bits = (uint32_t)u;
    float f, got, want;
    memcpy(&f, &bits, sizeof f);
    if (!isfinite(f)) continue;
    n++;
    format_float_g9(f, a, sizeof a);
    snprintf(b, sizeof b, "%.9g", (double)f);
    if (strcmp(a, b) != 0 && bad++ < 5) cr_log_error("%08x: %s, snprintf %s", bits, a, b);
    for (int prec = 1; prec <= 9; prec += 2) {
      int len = snprintf(js, sizeof js, "[%.*g]", prec, (double)f);
      if (parse_json_floats(js, (size_t)len, &got, 1, err, sizeof err) != 0) continue;
      js[len - 1] = 0;
      want = strtof(js + 1, NULL);
      if (memcmp(&got, &want, sizeof got) != 0 && bad++ < 5)
        cr_log_error("%s: %a, strtof %a", js + 1, (double)got, (double)want);
    }
  }
  /* Ties and carries: values whose nine digits round up to a new decade. */
  const float edge[] = {9.99999999e-5f, 0.999999999f, 9999999.5f, 16777215.0f,     16777216.0f,
                        0.5f,           1e-22f,       2e-22f,     5.42101086e-20f, 1e10f};
  for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
    format_float_g9(edge[i], a, sizeof a);
    snprintf(b, sizeof b, "%.9g", (double)edge[i]);
    cr_expect_str_eq(a, b);
  }
  cr_expect_eq(bad, 0, "%lu of %lu floats differ from libc", bad, n);
  cr_expect_gt(format_float_g9(0.125f, a, 3), 2, "too small: the length it needs");
}

/* ---- policy.h ----------------------------------------------------------- */

Test(policy, window_and_size) {
  struct policy p = {.max_batch = 4, .window_s = 0.001};
  double wait;
  cr_expect_eq(policy_take(&p, 0, 0, 0, 0, &wait), 0);
  cr_expect_eq(policy_take(&p, 1, 0.0004, 0, 0, &wait), 0, "waits for the window");
  cr_expect_float_eq(wait, 0.0006, 1e-12);
  cr_expect_eq(policy_take(&p, 3, 0.001, 0, 0, &wait), 3, "window over: what is there");
  cr_expect_eq(policy_take(&p, 4, 0, 0, 0, &wait), 4, "full: at once");
  cr_expect_eq(policy_take(&p, 9, 0, 0, 0, &wait), 4, "never more than a batch");
  cr_expect_eq(policy_take(&p, 2, 0, 1, 0, &wait), 2, "draining: no waiting");
  struct policy now = {.max_batch = 8, .window_s = 0};
  cr_expect_eq(policy_take(&now, 1, 0, 0, 0, &wait), 1, "no window");
  cr_expect_eq(policy_take(&p, 2, 0, 0, 1, &wait), 0, "eager off: the window, all waiting or not");
  cr_expect_float_eq(wait, 0.001, 1e-12);
}

Test(policy, eager) {
  struct policy p = {.max_batch = 4, .window_s = 0.001, .eager = 1};
  double wait;
  cr_expect_eq(policy_take(&p, 2, 0, 0, 1, &wait), 2, "none to come: at once");
  cr_expect_eq(wait, 0);
  cr_expect_eq(policy_take(&p, 2, 0.0004, 0, 0, &wait), 0, "more may come: the window");
  cr_expect_float_eq(wait, 0.0006, 1e-12);
  cr_expect_eq(policy_take(&p, 6, 0, 0, 1, &wait), 4, "never more than a batch");
  cr_expect_eq(policy_take(&p, 0, 0, 0, 1, &wait), 0, "nothing queued: nothing sent");
}

/* ---- model.c ------------------------------------------------------------ */

Test(model, dims) {
  struct model m = {0};
  char err[256];
  cr_expect_eq(model_parse_dims(&m, "64,256,16", err, sizeof err), 0);
  cr_expect_eq(m.nlayers, 2);
  cr_expect_eq(model_parse_dims(&m, "1,2,3,4", err, sizeof err), 0);
  cr_expect_eq(m.nlayers, 3);
  static const char *bad[] = {"4,4", "1,2,3,4,5", "0,4,4", "4,,4", "4,a,4", "", "9000,1,1", "4,4,"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(model_parse_dims(&m, bad[i], err, sizeof err), -1, "accepted %s", bad[i]);
}

Test(model, crc32) {
  cr_expect_eq(model_crc32(0, "123456789", 9), 0xcbf43926u, "zlib's check value");
}

Test(model, file_round_trip_and_forward) {
  struct model m = {0}, back = {0};
  char err[256], path[] = "/tmp/infer-unit-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  cr_assert_eq(model_parse_dims(&m, "3,5,2", err, sizeof err), 0);
  cr_assert_eq(model_generate(&m, 42), 0);
  cr_assert_eq(model_save(&m, path, err, sizeof err), 0, "%s", err);
  cr_assert_eq(model_parse_dims(&back, "3,5,2", err, sizeof err), 0);
  cr_assert_eq(model_load(&back, path, err, sizeof err), 0, "%s", err);
  cr_expect_eq(back.seed, 42u);
  cr_expect_eq(memcmp(m.w[0], back.w[0], sizeof(float) * 15), 0);
  cr_expect_eq(memcmp(m.b[1], back.b[1], sizeof(float) * 2), 0);
  /* The same seed gives the same weights. */
  struct model again = {0};
  model_parse_dims(&again, "3,5,2", err, sizeof err);
  model_generate(&again, 42);
  cr_expect_eq(memcmp(m.w[1], again.w[1], sizeof(float) * 10), 0);
  /* Forward pass by hand for one row. */
  float x[3] = {0.5f, -1.0f, 2.0f}, y[2];
  double scratch[10];
  model_forward(&m, x, y, 1, scratch);
  for (int j = 0; j < 2; j++) {
    double acc = m.b[1][j];
    for (int i = 0; i < 5; i++) {
      double h = m.b[0][i];
      for (int k = 0; k < 3; k++) h += x[k] * (double)m.w[0][k * 5 + i];
      h = (float)(h > 0 ? h : 0);
      acc += h * m.w[1][i * 2 + j];
    }
    cr_expect_float_eq(y[j], (float)acc, 1e-6, "output %d", j);
  }
  /* Other dims than the file's are refused; so is a damaged file. */
  struct model other = {0};
  model_parse_dims(&other, "3,6,2", err, sizeof err);
  cr_expect_eq(model_load(&other, path, err, sizeof err), -1);
  FILE *f = fopen(path, "r+b");
  fseek(f, 30, SEEK_SET);
  fputc(0x55, f);
  fclose(f);
  cr_expect_eq(model_load(&back, path, err, sizeof err), -1);
  cr_expect(strstr(err, "CRC") != NULL, "%s", err);
  unlink(path);
  model_free(&m);
  model_free(&back);
  model_free(&again);
  model_free(&other);
}

/* ---- config.c ----------------------------------------------------------- */

Test(config, devices) {
  int ids[8];
  char err[256];
  cr_expect_eq(config_devices("all", 3, ids, 8, err, sizeof err), 3);
  cr_expect_eq(config_devices("2,0", 3, ids, 8, err, sizeof err), 2);
  cr_expect_eq(ids[0], 2);
  cr_expect_eq(config_devices("3", 3, ids, 8, err, sizeof err), -1);
  cr_expect_eq(config_devices("0,0", 3, ids, 8, err, sizeof err), -1);
  cr_expect_eq(config_devices("x", 3, ids, 8, err, sizeof err), -1);
}

Test(config, flags) {
  struct config c;
  char *ok[] = {"p",
                "--port=0",
                "--max-batch",
                "8",
                "--batch-window-us=50",
                "--backend=cpu",
                "--fault-injection",
                "--header-deadline-ms=1500",
                "--body-deadline-ms",
                "250",
                NULL};
  cr_expect_eq(config_parse(&c, "p", "t", 10, ok), -1);
  cr_expect_eq(c.header_deadline_ms, 1500u);
  cr_expect_eq(c.body_deadline_ms, 250u);
  cr_expect_eq(c.port, 0);
  cr_expect_eq(c.max_batch, 8);
  cr_expect_eq(c.window_us, 50u);
  cr_expect_eq(c.fault_injection, 1);
  cr_expect_str_eq(c.backend, "cpu");
  char *bad[] = {"p", "--max-batch=0", NULL};
  cr_expect_eq(config_parse(&c, "p", "t", 2, bad), 2);
  char *zero[] = {"p", "--body-deadline-ms=0", NULL};
  cr_expect_eq(config_parse(&c, "p", "t", 2, zero), 2, "a deadline of 0 ms is refused");
  char *none[] = {"p", NULL};
  cr_expect_eq(config_parse(&c, "p", "t", 1, none), -1);
  cr_expect_eq(c.header_deadline_ms, 10000u, "defaults");
  cr_expect_eq(c.body_deadline_ms, 10000u);
}

/* ---- metrics.c ---------------------------------------------------------- */

Test(metrics, render) {
  struct metrics m;
  struct strbuf b = {0};
  metrics_init(&m, 64);
  metrics_request(&m, 200, 300000); /* 0.3 ms */
  metrics_request(&m, 418, 1000);   /* other */
  metrics_request(&m, 408, 2000);
  metrics_other(&m, METRICS_PATH_HEALTH, 200);
  metrics_other(&m, METRICS_PATH_HEALTH, 200);
  metrics_other(&m, METRICS_PATH_OTHER, 404);
  metrics_other(&m, METRICS_PATH_INFER, 405);
  metrics_timeout(&m, METRICS_PHASE_HEADERS);
  metrics_batch(&m, 3, 50000);
  cr_expect_eq(metrics_answers(&m), 7);
  metrics_render(&m, &b);
  cr_assert(!b.oom);
  cr_expect(strstr(b.p, "infer_requests_total{code=\"200\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_requests_total{code=\"408\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_requests_total{code=\"404\"} 0\n") != NULL,
            "other requests are not inference requests");
  cr_expect(strstr(b.p, "infer_requests_total{code=\"other\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_other_requests_total{path=\"/health\",code=\"200\"} 2\n") != NULL);
  cr_expect(strstr(b.p, "infer_other_requests_total{path=\"other\",code=\"404\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_other_requests_total{path=\"/v1/infer\",code=\"405\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_other_requests_total{path=\"/metrics\"") == NULL,
            "pairs never seen are not printed");
  cr_expect(strstr(b.p, "infer_http_timeouts_total{phase=\"headers\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_http_timeouts_total{phase=\"body\"} 0\n") != NULL);
  cr_expect(strstr(b.p, "infer_request_duration_seconds_count 3\n") != NULL,
            "the latency of inference requests only");
  cr_expect(strstr(b.p, "infer_request_duration_seconds_bucket{le=\"0.00025\"} 2\n") != NULL,
            "the 1 and 2 us answers are in the first buckets, the 0.3 ms one is not");
  cr_expect(strstr(b.p, "infer_request_duration_seconds_bucket{le=\"0.0005\"} 3\n") != NULL);
  cr_expect(strstr(b.p, "infer_batch_size_bucket{le=\"2\"} 0\n") != NULL);
  cr_expect(strstr(b.p, "infer_batch_size_bucket{le=\"4\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_batch_size_bucket{le=\"64\"} 1\n") != NULL);
  cr_expect(strstr(b.p, "infer_batch_rows_total 3\n") != NULL);
  cr_expect(strstr(b.p, "process_threads ") != NULL);
  /* Every line is a comment or "name[{labels}] value". */
  for (char *line = strtok(b.p, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    char *sp = strrchr(line, ' ');
    cr_expect(sp != NULL && sp[1] != 0, "%s", line);
  }
  sb_free(&b);
}

/* ---- deadline_fifo.c ---------------------------------------------------- */

Test(deadline_fifo, order_and_due) {
  struct deadline_fifo f;
  struct deadline_item a = {0}, b = {0}, c = {0};
  deadline_fifo_init(&f, 100);
  cr_expect_eq(deadline_fifo_next_due(&f), UINT64_MAX);
  cr_expect_null(deadline_fifo_pop_due(&f, 1000));
  deadline_fifo_push(&f, &a, 10);
  deadline_fifo_push(&f, &b, 20);
  deadline_fifo_push(&f, &c, 30);
  cr_expect_eq(f.len, 3);
  cr_expect_eq(deadline_fifo_next_due(&f), 110);
  cr_expect_null(deadline_fifo_pop_due(&f, 109), "not due yet");
  cr_expect_eq(deadline_fifo_pop_due(&f, 120), &a);
  cr_expect_eq(deadline_fifo_pop_due(&f, 120), &b, "due exactly at 120");
  cr_expect_null(deadline_fifo_pop_due(&f, 120));
  cr_expect_null(a.on, "a popped item is in no list");
  cr_expect_eq(deadline_fifo_next_due(&f), 130);
  cr_expect_eq(f.len, 1);
}

Test(deadline_fifo, remove_and_move) {
  struct deadline_fifo f, g;
  struct deadline_item a = {0}, b = {0}, c = {0};
  deadline_fifo_init(&f, 100);
  deadline_fifo_init(&g, 5);
  deadline_fifo_push(&f, &a, 0);
  deadline_fifo_push(&f, &b, 1);
  deadline_fifo_push(&f, &c, 2);
  deadline_item_remove(&b); /* from the middle */
  deadline_item_remove(&b); /* twice: nothing */
  cr_expect_eq(f.len, 2);
  cr_expect_eq(a.next, &c);
  cr_expect_eq(c.prev, &a);
  deadline_item_remove(&a); /* the head */
  cr_expect_eq(f.head, &c);
  cr_expect_eq(deadline_fifo_next_due(&f), 102);
  /* Pushed again: to the back, with a new due time. */
  deadline_fifo_push(&f, &a, 50);
  cr_expect_eq(f.tail, &a);
  cr_expect_eq(a.due_ns, 150);
  /* Pushed onto another list: it leaves the first. */
  deadline_fifo_push(&g, &c, 60);
  cr_expect_eq(f.len, 1);
  cr_expect_eq(f.head, &a);
  cr_expect_eq(g.head, &c);
  cr_expect_eq(c.on, &g);
  cr_expect_eq(deadline_fifo_next_due(&g), 65);
  deadline_item_remove(&a);
  deadline_item_remove(&c);
  cr_expect(f.head == NULL && f.tail == NULL && f.len == 0);
  cr_expect(g.head == NULL && g.tail == NULL && g.len == 0);
}
