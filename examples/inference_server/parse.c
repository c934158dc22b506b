/* Request and response bodies (parse.h). The JSON reader accepts exactly
 * RFC 8259's array-of-numbers: a server that guessed what a malformed body
 * meant would answer requests nobody sent. */
#include "parse.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
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

/* The parser's common case without strtof: significant digits w <= 2^24
 * and a power of ten |e| <= 10 are both exact in float (5^10 < 2^24), so
 * one IEEE float multiplication or division is the correctly rounded
 * result, the same float strtof returns (Clinger's fast path). Needs float
 * arithmetic in float precision (FLT_EVAL_METHOD 0). Scans the number as
 * scan_number does (the same grammar) in the same pass. Returns the end of
 * the number with *out set, or NULL for scan_number and strtof to do it. */
static const char *fast_number(const char *p, const char *end, float *out) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
  static const float pow10f[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
  int neg = 0, digits = 0, e10 = 0;
  uint32_t w = 0;
  if (p < end && *p == '-') neg = 1, p++;
  if (p == end || !is_digit(*p)) return NULL;
  if (*p == '0') {
    p++;
  } else {
    do {
      if (++digits > 9) return NULL;
      w = w * 10 + (uint32_t)(*p++ - '0');
    } while (p < end && is_digit(*p));
  }
  if (p < end && *p == '.') {
    if (++p == end || !is_digit(*p)) return NULL;
    do {
      e10--;
      if (w != 0 || *p != '0') { /* leading zeros are not significant */
        if (++digits > 9) return NULL;
        w = w * 10 + (uint32_t)(*p - '0');
      }
      p++;
    } while (p < end && is_digit(*p));
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    int eneg = 0, x = 0, xd = 0;
    p++;
    if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p == end || !is_digit(*p)) return NULL;
    do {
      if (++xd > 3) return NULL;
      x = x * 10 + (*p++ - '0');
    } while (p < end && is_digit(*p));
    e10 += eneg ? -x : x;
  }
  if (w == 0) {
    *out = neg ? -0.0f : 0.0f;
    return p;
  }
  if (w > (1u << 24) || e10 < -10 || e10 > 10) return NULL;
  float v = (float)w;
  v = e10 < 0 ? v / pow10f[-e10] : v * pow10f[e10];
  *out = neg ? -v : v;
  return p;
#else
  (void)p, (void)end, (void)out;
  return NULL;
#endif
}

static uint64_t pow10_u64(int k) {
  static const uint64_t p[] = {1ull,
                               10ull,
                               100ull,
                               1000ull,
                               10000ull,
                               100000ull,
                               1000000ull,
                               10000000ull,
                               100000000ull,
                               1000000000ull,
                               10000000000ull,
                               100000000000ull,
                               1000000000000ull,
                               10000000000000ull,
                               100000000000000ull,
                               1000000000000000ull,
                               10000000000000000ull,
                               100000000000000000ull,
                               1000000000000000000ull,
                               10000000000000000000ull};
  return p[k];
}

/* snprintf's "%.9g" of a float, byte for byte, without printf's
 * multi-precision machinery: a float is m * 2^e (m < 2^24), and for
 * 2^-73 <= |v| < 2^24 its nine significant digits are m * 10^k / 2^-e in
 * 128-bit integers, rounded half to even on the exact remainder as glibc
 * rounds. Other values go to snprintf. Returns the length written (cap
 * too small: >= cap, like snprintf). */
int format_float_g9(float f, char *buf, size_t cap) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  int bexp = (int)((bits >> 23) & 0xff);
  int e2 = bexp - 150;
  uint32_t m = (bits & 0x7fffff) | 0x800000u;
  /* Fast path: 2^-73 <= |f| < 2^24, i.e. -97 <= e2 < 0; the exponent
   * bounds keep m * 10^k below 2^124 and the shift below 128. */
  if (bexp == 0 || e2 >= 0 || e2 < -97) return snprintf(buf, cap, "%.9g", (double)f);
  /* X, the decimal exponent: floor(log10(2^(bexp-127))) is X or X - 1
   * (78913 / 2^18 is log10(2) rounded down); the loop makes it exact. */
  int x = ((bexp - 127) * 78913) >> 18;
  unsigned __int128 q = 0;
  for (int tries = 0; tries < 4; tries++) {
    int k = 8 - x;
    if (k < 0 || k > 30) return snprintf(buf, cap, "%.9g", (double)f);
    unsigned __int128 num = (unsigned __int128)m * pow10_u64(k < 19 ? k : 19);
    if (k > 19) num *= pow10_u64(k - 19);
    int sh = -e2;
    q = num >> sh;
    if (q >= 1000000000u) {
      x++;
      continue;
    }
    if (q < 100000000u) {
      x--;
      continue;
    }
    unsigned __int128 r = num - (q << sh), half = (unsigned __int128)1 << (sh - 1);
    if (r > half || (r == half && (q & 1))) q++;
    if (q == 1000000000u) {
      q = 100000000u;
      x++;
    }
    break;
  }
  if (q < 100000000u || q >= 1000000000u) return snprintf(buf, cap, "%.9g", (double)f);
  char d[9];
  uint32_t qq = (uint32_t)q;
  for (int i = 8; i >= 0; i--, qq /= 10) d[i] = (char)('0' + qq % 10);
  int nd = 9;
  while (nd > 1 && d[nd - 1] == '0') nd--;
  char out[32];
  int at = 0;
  if (bits >> 31) out[at++] = '-';
  if (x >= 0) { /* x <= 7 here: fixed notation */
    for (int i = 0; i <= x; i++) out[at++] = d[i];
    if (nd > x + 1) {
      out[at++] = '.';
      for (int i = x + 1; i < nd; i++) out[at++] = d[i];
    }
  } else if (x >= -4) {
    out[at++] = '0';
    out[at++] = '.';
    for (int i = 0; i < -x - 1; i++) out[at++] = '0';
    for (int i = 0; i < nd; i++) out[at++] = d[i];
  } else {
    out[at++] = d[0];
    if (nd > 1) {
      out[at++] = '.';
      for (int i = 1; i < nd; i++) out[at++] = d[i];
    }
    out[at++] = 'e';
    out[at++] = '-';
    out[at++] = (char)('0' + (-x) / 10);
    out[at++] = (char)('0' + (-x) % 10);
  }
  if ((size_t)at < cap) {
    memcpy(buf, out, (size_t)at);
    buf[at] = 0;
  } else if (cap) {
    buf[0] = 0;
  }
  return at;
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
      float v = 0;
      const char *num_end = count < n ? fast_number(p, end, &v) : NULL;
      int slow = num_end == NULL;
      if (slow) num_end = scan_number(p, end);
      if (num_end == NULL) {
        snprintf(err, errlen, "bad JSON at byte %zu: want a number", (size_t)(p - s));
        return -1;
      }
      if (slow && count < n) {
        char tmp[64];
        size_t l = (size_t)(num_end - p);
        if (l >= sizeof tmp) {
          snprintf(err, errlen, "bad JSON at byte %zu: number too long", (size_t)(p - s));
          return -1;
        }
        /* strtof needs a terminated string: numbers are short, copy one. */
        memcpy(tmp, p, l);
        tmp[l] = 0;
        v = strtof(tmp, NULL);
        if (!isfinite(v)) {
          snprintf(err, errlen, "number %d (%s) is out of float32 range", count, tmp);
          return -1;
        }
      }
      if (count < n) out[count] = v;
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
    if (i) {
      if (cap - at < 2) return -1;
      buf[at++] = ',';
    }
    int w = isfinite(v[i]) ? format_float_g9(v[i], buf + at, cap - at)
                           : snprintf(buf + at, cap - at, "null");
    if (w < 0 || (size_t)w >= cap - at) return -1;
    at += (size_t)w;
  }
  if (cap - at < 3) return -1;
  buf[at++] = ']';
  buf[at++] = '\n';
  buf[at] = 0;
  return (int)at;
}

char *format_uint(uint64_t v, char *end) {
  do *--end = (char)('0' + v % 10);
  while (v /= 10);
  return end;
}
