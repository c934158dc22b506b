/* A response's bytes (http1_impl.h): status line, Date, Content-Length,
 * the application's headers, Connection, body; appended to the
 * connection's output buffer, which grows as needed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http1_impl.h"
#include "parse.h"

static const char *reason_phrase(unsigned status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 415: return "Unsupported Media Type";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Unknown";
  }
}

static int reserve(struct http1_conn *c, size_t more) {
  if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
  if (c->out_len + more <= c->out_cap) return 0;
  size_t cap = c->out_cap ? c->out_cap : 1024;
  while (cap < c->out_len + more) cap *= 2;
  char *p = realloc(c->out, cap);
  if (p == NULL) return -1;
  c->out = p;
  c->out_cap = cap;
  return 0;
}

static void put(struct http1_conn *c, const void *p, size_t n) {
  memcpy(c->out + c->out_len, p, n);
  c->out_len += n;
}

#define PUT_LIT(c, s) put((c), (s), sizeof(s) - 1)

/* "Date: ...\r\n", formatted once a second per server. */
static const char *date_line(struct http1 *h, size_t *len) {
  time_t t = time(NULL);
  if ((long long)t != h->date_at) {
    struct tm tm;
    gmtime_r(&t, &tm);
    h->date_len = strftime(h->date, sizeof h->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    h->date_at = t;
  }
  *len = h->date_len;
  return h->date;
}

int http1_compose(struct http1_conn *c, unsigned status, const char *headers, size_t hlen,
                  const char *ctype, const void *body, size_t blen, int close, int head_only) {
  size_t dlen, clen = ctype ? strlen(ctype) : 0;
  const char *date = date_line(c->srv, &dlen);
  if (reserve(c, 160 + dlen + clen + hlen + (head_only ? 0 : blen)) != 0) return -1;
  char num[24], *d;
  PUT_LIT(c, "HTTP/1.1 ");
  d = format_uint(status, num + sizeof num);
  put(c, d, (size_t)(num + sizeof num - d));
  put(c, " ", 1);
  const char *why = reason_phrase(status);
  put(c, why, strlen(why));
  PUT_LIT(c, "\r\n");
  put(c, date, dlen);
  PUT_LIT(c, "Content-Length: ");
  d = format_uint(blen, num + sizeof num);
  put(c, d, (size_t)(num + sizeof num - d));
  PUT_LIT(c, "\r\n");
  if (ctype) {
    PUT_LIT(c, "Content-Type: ");
    put(c, ctype, clen);
    PUT_LIT(c, "\r\n");
  }
  if (hlen) put(c, headers, hlen);
  if (close)
    PUT_LIT(c, "Connection: close\r\n");
  else if (c->parser.http_major == 1 && c->parser.http_minor == 0)
    PUT_LIT(c, "Connection: keep-alive\r\n");
  PUT_LIT(c, "\r\n");
  if (!head_only && blen) put(c, body, blen);
  return 0;
}

int http1_compose_continue(struct http1_conn *c) {
  if (reserve(c, 32) != 0) return -1;
  PUT_LIT(c, "HTTP/1.1 100 Continue\r\n\r\n");
  return 0;
}
