/* A memcpy whose stores bypass the caches (non-temporal), for the staging
 * ring's host copies (src/staging.c).
 *
 * glibc's memcpy streams only copies larger than a share of the last-level
 * cache; the ring copies in 256 KiB parts, which glibc copies with plain
 * stores, so the memory reads every destination line before writing it
 * (a read for ownership): three bytes of memory traffic for each byte
 * copied instead of two. A large pageable copy is bound by that traffic
 * (measured: 7.3 against 10 GB/s for one thread, 256 MiB in 256 KiB
 * parts). The data written is not wanted in the cache: the DMA reads a
 * staging buffer from memory, and the destination of a large copy to the
 * host outgrows the caches anyway.
 *
 * Thread: any. */
#ifndef CUDAEV_NTCOPY_H
#define CUDAEV_NTCOPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

static inline void cudaev__nt_copy(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  /* Streaming stores want 16-byte aligned destinations. */
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; s += 64, d += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  memcpy(d, s, n);
  /* Streaming stores are weakly ordered: before anyone is told the copy is
   * done (an atomic, then a DMA or the caller's return), they are made
   * visible. */
  _mm_sfence();
}
#else
static inline void cudaev__nt_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
#endif

#endif
