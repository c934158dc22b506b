/* parse.h: request and response bodies of POST /v1/infer, shared by the
 * service and its blocking twin. Pure functions on buffers: no I/O, no
 * allocation, any thread.
 *
 * A request body is either a JSON array of exactly n numbers
 * (`Content-Type: application/json`, also assumed when the header is
 * absent) or n little-endian float32 values (`application/octet-stream`).
 * Every value must be finite in float32. The response is the same kind: a
 * JSON array (numbers printed with 9 significant digits, enough to read
 * back the same float; a non-finite result prints as null) or raw float32.
 */
#ifndef INFER_PARSE_H
#define INFER_PARSE_H

#include <stddef.h>
#include <stdint.h>

enum body_kind {
  BODY_JSON,
  BODY_RAW,
  BODY_UNSUPPORTED,
};

/* The kind a Content-Type header names (NULL: JSON). Parameters such as
 * "; charset=utf-8" are ignored; the media type is matched without regard
 * to case. */
enum body_kind parse_content_type(const char *content_type);

/* Parses a JSON array of exactly n numbers (RFC 8259 grammar: no NaN,
 * Infinity, hex, leading '+' or '.', trailing commas) into out. s need not
 * be NUL-terminated. Returns 0, or -1 with a one-line reason in err. */
int parse_json_floats(const char *s, size_t len, float *out, int n, char *err, size_t errlen);

/* Copies n raw float32 values (len must be 4 n) into out, refusing
 * non-finite ones. Returns 0 or -1 with a reason. */
int parse_raw_floats(const void *p, size_t len, float *out, int n, char *err, size_t errlen);

/* Writes "[v0,v1,...]\n" into buf (cap bytes, NUL-terminated). Returns the
 * length without the NUL, or -1 if cap is too small
 * (format_json_max(n) always suffices). */
int format_json_floats(const float *v, int n, char *buf, size_t cap);

/* Writes f as snprintf's "%.9g" would, byte for byte (faster for the
 * common magnitudes). Returns the length without the NUL; >= cap when cap
 * is too small. */
int format_float_g9(float f, char *buf, size_t cap);

/* The decimal digits of v, written so that they end right before `end`
 * (20 bytes before it suffice; no NUL). Returns the first digit. Response
 * headers format their numbers with it, where snprintf's parsing of its
 * format showed in profiles. */
char *format_uint(uint64_t v, char *end);

/* A size for format_json_floats that always suffices. */
static inline size_t format_json_max(int n) { return (size_t)n * 17 + 4; }

#endif
