/* Request and response bodies (parse.h). The JSON reader accepts exactly
 * RFC 8259's array-of-numbers: a server that guessed what a malformed body
 * meant would answer requests nobody sent. */
#include "parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum body_kind parse_content_type(const char *ct) {
  if (ct == NULL) return BODY_JSON;
  while (*ct == ' ' || *ct == '\t') ct++;
  size_t n = strcspn(ct, "; \t");
  if (n == 16 && strncasecmp(ct, "application/json", n) == 0) return BODY_JSON;
  if (n == 24 && strncasecmp(ct, "application/octet-stream", n) == 0) return BODY_RAW;
  return BODY_UNSUPPORTED;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The end of a JSON number starting at p, or NULL if there is none. */
static const char *scan_number(const char *p, const char *end) {
  if (p < end && *p == '-') p++;
  if (p == end || !is_digit(*p)) return NULL;
  if (*p == '0') {
    p++;
  } else {
    while (p < end && is_digit(*p)) p++;
  }
  if (p < end && *p == '.') {
    p++;
    if (p == end || !is_digit(*p)) return NULL;
    while (p < end && is_digit(*p)) p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p == end || !is_digit(*p)) return NULL;
    while (p < end && is_digit(*p)) p++;
  }
  return p;
}

int parse_json_floats(const char *s, size_t len, float *out, int n, char *err, size_t errlen) {
  const char *p = s, *end = s + len;
  int count = 0;
  while (p < end && is_ws(*p)) p++;
  if (p == end || *p != '[') {
    snprintf(err, errlen, "bad JSON: want an array of %d numbers", n);
    return -1;
  }
  p++;
  while (p < end && is_ws(*p)) p++;
  if (p < end && *p == ']') {
    p++;
  } else {
    for (;;) {
      const char *num_end = scan_number(p, end);
      if (num_end == NULL) {
        snprintf(err, errlen, "bad JSON at byte %zu: want a number", (size_t)(p - s));
        return -1;
      }
      if (count < n) {
        /* strtof needs a terminated string: numbers are short, copy one. */
        char tmp[64];
        size_t l = (size_t)(num_end - p);
        if (l >= sizeof tmp) {
          snprintf(err, errlen, "bad JSON at byte %zu: number too long", (size_t)(p - s));
          return -1;
        }
        memcpy(tmp, p, l);
        tmp[l] = 0;
        errno = 0;
        float v = strtof(tmp, NULL);
        if (!isfinite(v)) {
          snprintf(err, errlen, "number %d (%s) is out of float32 range", count, tmp);
          return -1;
        }
        out[count] = v;
      }
      count++;
      p = num_end;
      while (p < end && is_ws(*p)) p++;
      if (p < end && *p == ',') {
        p++;
        while (p < end && is_ws(*p)) p++;
        continue;
      }
      if (p < end && *p == ']') {
        p++;
        break;
      }
      snprintf(err, errlen, "bad JSON at byte %zu: want ',' or ']'", (size_t)(p - s));
      return -1;
    }
  }
  while (p < end && is_ws(*p)) p++;
  if (p != end) {
    snprintf(err, errlen, "bad JSON at byte %zu: data after the array", (size_t)(p - s));
    return -1;
  }
  if (count != n) {
    snprintf(err, errlen, "wrong length: want %d numbers, got %d", n, count);
    return -1;
  }
  return 0;
}

int parse_raw_floats(const void *p, size_t len, float *out, int n, char *err, size_t errlen) {
  if (len != (size_t)n * sizeof(float)) {
    snprintf(err, errlen, "wrong length: want %zu bytes (%d float32), got %zu",
             (size_t)n * sizeof(float), n, len);
    return -1;
  }
  memcpy(out, p, len);
  for (int i = 0; i < n; i++) {
    if (!isfinite(out[i])) {
      snprintf(err, errlen, "value %d is not finite", i);
      return -1;
    }
  }
  return 0;
}

int format_json_floats(const float *v, int n, char *buf, size_t cap) {
  size_t at = 0;
  if (cap < 4) return -1;
  buf[at++] = '[';
  for (int i = 0; i < n; i++) {
    int w = isfinite(v[i]) ? snprintf(buf + at, cap - at, i ? ",%.9g" : "%.9g", (double)v[i])
                           : snprintf(buf + at, cap - at, i ? ",null" : "null");
    if (w < 0 || (size_t)w >= cap - at) return -1;
    at += (size_t)w;
  }
  if (cap - at < 3) return -1;
  buf[at++] = ']';
  buf[at++] = '\n';
  buf[at] = 0;
  return (int)at;
}
