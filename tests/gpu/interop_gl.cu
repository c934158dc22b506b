// OpenGL interop on a real context: a desktop GL 4.5 core context on the
// NVIDIA EGL device, headless (egl_headless.h), one group per topic:
//   devices  cudaGLGetDevices names the context's device; cudaGLSetGLDevice
//   buffer   a GL buffer registered and mapped: CUDA reads GL's data, a
//            kernel writes, glGetBufferSubData reads it back; read-only and
//            write-discard map flags; two buffers mapped on a stream at once;
//            mapping twice, unmapping twice, views a buffer does not have,
//            a second registration, unregistering while mapped
//   legacy   the deprecated cudaGLRegisterBufferObject family on one buffer
//   texture  GL_RGBA8 mapped as an array: cudaMemcpy2D from and to it, read
//            back with glGetTexImage; layers/levels it does not have; its
//            mipmapped-array view
//   surface  GL_R32F registered with cudaGraphicsRegisterFlagsSurfaceLoadStore,
//            read and written by a surface-object kernel; a surface object on
//            an image registered without the flag
//   flags    images registered read-only, write-discard, texture-gather
//   refused  what CUDA does not register: GL_RGB8 and depth textures, a
//            target that is not the texture's, an unknown flag, names that
//            are no GL object (last: a driver that crashed on one would end
//            the transcript there, on both runtimes)
// Prints codes, last errors, the checks and checksums of what each side
// reads; never pointers. Exits 77 (skip) without an EGL loader or NVIDIA
// EGL device.
#include "egl_headless.h"
#include "common.h"

// The deprecated buffer-object functions are under test here: declare them
// without the deprecation attribute.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda_gl_interop.h>

static struct egl_headless egl;
static struct egl_headless_gl gl;

enum { N = 4096, W = 64, H = 32 };

__host__ __device__ static unsigned fill_word(int i, unsigned seed) {
  return (unsigned)i * 2654435761u ^ seed;
}

__global__ void scale_k(unsigned *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 3u + 1u;
}

__global__ void fill_k(unsigned *p, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = fill_word(i, seed);
}

__global__ void sum_k(const unsigned *p, int n, unsigned long long *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, (unsigned long long)p[i]);
}

// Reads each texel and writes it back changed: load and store through the
// surface of a GL texture.
__global__ void surf_k(cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float v = surf2Dread<float>(s, x * (int)sizeof(float), y);
  surf2Dwrite(v * 2.0f + (float)(x + 1000 * y), s, x * (int)sizeof(float), y);
}

static unsigned long long cks(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  unsigned long long h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static unsigned words[N], words_out[N];
static unsigned char texels[W * H * 4], texels2[W * H * 4], texels_out[W * H * 4];
static float floats[W * H], floats_out[W * H];

static GLuint make_buffer(const void *data, size_t n) {
  GLuint b = 0;
  gl.GenBuffers(1, &b);
  gl.BindBuffer(GL_ARRAY_BUFFER, b);
  gl.BufferData(GL_ARRAY_BUFFER, (GLsizeiptr)n, data, GL_DYNAMIC_DRAW);
  gl.BindBuffer(GL_ARRAY_BUFFER, 0);
  GL_CHECK(&gl, "creating a buffer");
  return b;
}

static void read_buffer(GLuint b, void *out, size_t n) {
  gl.BindBuffer(GL_COPY_READ_BUFFER, b);
  gl.GetBufferSubData(GL_COPY_READ_BUFFER, 0, (GLsizeiptr)n, out);
  gl.BindBuffer(GL_COPY_READ_BUFFER, 0);
  GL_CHECK(&gl, "glGetBufferSubData");
}

// One level of immutable storage: complete without mipmaps, as CUDA maps it.
static GLuint make_texture(GLenum ifmt, GLenum fmt, GLenum type, const void *data) {
  GLuint t = 0;
  gl.GenTextures(1, &t);
  gl.BindTexture(GL_TEXTURE_2D, t);
  gl.TexStorage2D(GL_TEXTURE_2D, 1, ifmt, W, H);
  if (data != NULL) gl.TexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W, H, fmt, type, data);
  gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  gl.BindTexture(GL_TEXTURE_2D, 0);
  GL_CHECK(&gl, "creating a texture");
  return t;
}

static void read_texture(GLuint t, GLenum fmt, GLenum type, void *out) {
  gl.BindTexture(GL_TEXTURE_2D, t);
  gl.GetTexImage(GL_TEXTURE_2D, 0, fmt, type, out);
  gl.BindTexture(GL_TEXTURE_2D, 0);
  GL_CHECK(&gl, "glGetTexImage");
}

static void print_array(cudaArray_t a) {
  cudaChannelFormatDesc d;
  cudaExtent ext = {0, 0, 0};
  unsigned flags = 0;
  memset(&d, 0, sizeof d);
  T(cudaArrayGetInfo(&d, &ext, &flags, a));
  printf("array {%d,%d,%d,%d,%d} %zux%zux%zu flags %#x\n", d.x, d.y, d.z, d.w, (int)d.f, ext.width,
         ext.height, ext.depth, flags);
}

static int buffer_is_fill(GLuint b, unsigned seed) {
  read_buffer(b, words_out, sizeof words_out);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= words_out[i] == fill_word(i, seed);
  return ok;
}

static void group_devices(void) {
  printf("== devices\n");
  unsigned n = 99;
  int devs[4] = {-1, -1, -1, -1};
  T(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListAll));
  printf("GL devices %u, the first is the EGL device's: %d\n", n,
         n >= 1 && devs[0] == egl.cuda_device);
  n = 99;
  T(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListCurrentFrame));
  printf("current frame: %u\n", n);
  n = 99;
  T(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListNextFrame));
  printf("next frame: %u\n", n);
  n = 99;
  devs[0] = -7;
  TC(cudaGLGetDevices(&n, devs, 0, cudaGLDeviceListAll));
  printf("no room: count %u, list untouched %d\n", n, devs[0] == -7);
  TC(cudaGLSetGLDevice(-1));
  T(cudaGLSetGLDevice(egl.cuda_device));
  /* Again once the device's context is surely active: NVIDIA's answer,
   * success or cudaErrorSetOnActiveProcess, is the transcript's. */
  T(cudaFree(0));
  TC(cudaGLSetGLDevice(egl.cuda_device));
}

static void group_buffer(cudaStream_t s) {
  printf("== buffer\n");
  for (int i = 0; i < N; i++) words[i] = (unsigned)i ^ 0x5a5a5a5au;
  GLuint buf = make_buffer(words, sizeof words);
  GLuint buf2 = make_buffer(NULL, sizeof words);
  cudaGraphicsResource_t rb = NULL, rb2 = NULL;
  unsigned *p = NULL, *p2 = NULL;
  size_t size = 0;
  const int grid = (N + 255) / 256;
  cudaError_t e;

  TN(cudaGraphicsGLRegisterBuffer(&rb, buf, cudaGraphicsRegisterFlagsNone));
  TN(cudaGraphicsMapResources(1, &rb, 0));
  TN(cudaGraphicsResourceGetMappedPointer((void **)&p, &size, rb));
  printf("mapped size %zu\n", size);
  T(cudaMemcpy(words_out, p, sizeof words_out, cudaMemcpyDeviceToHost));
  printf("CUDA sees GL's data: %d\n", memcmp(words_out, words, sizeof words) == 0);
  scale_k<<<grid, 256>>>(p, N);
  T(cudaGetLastError());
  T(cudaDeviceSynchronize());
  TC(cudaGraphicsMapResources(1, &rb, 0));
  TC(cudaGraphicsResourceSetMapFlags(rb, cudaGraphicsMapFlagsReadOnly));
  cudaArray_t arr = NULL;
  TC(cudaGraphicsSubResourceGetMappedArray(&arr, rb, 0, 0));
  cudaMipmappedArray_t mm = NULL;
  TC(cudaGraphicsResourceGetMappedMipmappedArray(&mm, rb));
  T(cudaGraphicsUnmapResources(1, &rb, 0));
  TC(cudaGraphicsUnmapResources(1, &rb, 0));
  TC(cudaGraphicsResourceGetMappedPointer((void **)&p, &size, rb));
  read_buffer(buf, words_out, sizeof words_out);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= words_out[i] == words[i] * 3u + 1u;
  printf("GL sees the kernel's writes: %d cks %llx\n", ok, cks(words_out, sizeof words_out));

  // Read-only: a kernel sums what GL holds. Write-discard: a kernel
  // overwrites all of it.
  unsigned long long *dsum = NULL, hsum = 0, want = 0;
  for (int i = 0; i < N; i++) want += words[i] * 3u + 1u;
  CHECK(cudaMalloc((void **)&dsum, sizeof *dsum));
  CHECK(cudaMemset(dsum, 0, sizeof *dsum));
  T(cudaGraphicsResourceSetMapFlags(rb, cudaGraphicsMapFlagsReadOnly));
  TN(cudaGraphicsMapResources(1, &rb, 0));
  TN(cudaGraphicsResourceGetMappedPointer((void **)&p, &size, rb));
  sum_k<<<grid, 256>>>(p, N, dsum);
  T(cudaGetLastError());
  T(cudaMemcpy(&hsum, dsum, sizeof hsum, cudaMemcpyDeviceToHost));
  printf("read-only mapping sums to GL's data: %d\n", hsum == want);
  T(cudaGraphicsUnmapResources(1, &rb, 0));
  CHECK(cudaFree(dsum));
  T(cudaGraphicsResourceSetMapFlags(rb, cudaGraphicsMapFlagsWriteDiscard));
  TN(cudaGraphicsMapResources(1, &rb, 0));
  TN(cudaGraphicsResourceGetMappedPointer((void **)&p, &size, rb));
  fill_k<<<grid, 256>>>(p, N, 0x1234u);
  T(cudaGetLastError());
  T(cudaGraphicsUnmapResources(1, &rb, 0));
  printf("write-discard mapping, GL sees the fill: %d\n", buffer_is_fill(buf, 0x1234u));
  TC(cudaGraphicsResourceSetMapFlags(rb, 0x10));
  T(cudaGraphicsResourceSetMapFlags(rb, cudaGraphicsMapFlagsNone));

  // Two buffers, one of them registered write-discard, mapped on a stream
  // together. The stream is synchronized before GL reads, so the check does
  // not depend on how the unmap orders GL after CUDA.
  TN(cudaGraphicsGLRegisterBuffer(&rb2, buf2, cudaGraphicsRegisterFlagsWriteDiscard));
  cudaGraphicsResource_t both[2] = {rb, rb2};
  TN(cudaGraphicsMapResources(2, both, s));
  TN(cudaGraphicsResourceGetMappedPointer((void **)&p, &size, rb));
  TN(cudaGraphicsResourceGetMappedPointer((void **)&p2, &size, rb2));
  printf("second mapped size %zu\n", size);
  fill_k<<<grid, 256, 0, s>>>(p, N, 0x1111u);
  fill_k<<<grid, 256, 0, s>>>(p2, N, 0x2222u);
  T(cudaGetLastError());
  T(cudaGraphicsUnmapResources(2, both, s));
  T(cudaStreamSynchronize(s));
  int ok1 = buffer_is_fill(buf, 0x1111u), ok2 = buffer_is_fill(buf2, 0x2222u);
  printf("two buffers mapped on a stream, GL sees both fills: %d %d\n", ok1, ok2);
  TC(cudaGraphicsMapResources(0, both, s));

  // A second registration of a registered buffer, and flags a buffer does
  // not take.
  cudaGraphicsResource_t rx = NULL;
  TCV(e, cudaGraphicsGLRegisterBuffer(&rx, buf, cudaGraphicsRegisterFlagsNone));
  if (e == cudaSuccess) T(cudaGraphicsUnregisterResource(rx));
  TCV(e, cudaGraphicsGLRegisterBuffer(&rx, buf, cudaGraphicsRegisterFlagsSurfaceLoadStore));
  if (e == cudaSuccess) T(cudaGraphicsUnregisterResource(rx));
  TCV(e, cudaGraphicsGLRegisterBuffer(&rx, buf, cudaGraphicsRegisterFlagsTextureGather));
  if (e == cudaSuccess) T(cudaGraphicsUnregisterResource(rx));

  // Unregistering a mapped resource. The driver refuses it with
  // cudaErrorAlreadyMapped but frees the resource all the same: on NVIDIA's
  // runtime the unmap after it "succeeds" and a second unregister crashes
  // in the driver (H100, driver 580). So nothing touches rb2 after it but
  // that second unregister, which ours refuses and NVIDIA's crashes on.
  TN(cudaGraphicsMapResources(1, &rb2, 0));
  TCV(e, cudaGraphicsUnregisterResource(rb2));
  if (e != cudaSuccess) TREFUSE(cudaGraphicsUnregisterResource(rb2));
  T(cudaGraphicsUnregisterResource(rb));
  gl.DeleteBuffers(1, &buf);
  gl.DeleteBuffers(1, &buf2);
  GL_CHECK(&gl, "glDeleteBuffers");
}

static void group_legacy(cudaStream_t s) {
  printf("== legacy buffer objects\n");
  for (int i = 0; i < N; i++) words[i] = (unsigned)i * 7u + 5u;
  GLuint b = make_buffer(words, sizeof words);
  unsigned *p = NULL;
  const int grid = (N + 255) / 256;
  TN(cudaGLRegisterBufferObject(b));
  T(cudaGLSetBufferObjectMapFlags(b, cudaGLMapFlagsNone));
  TN(cudaGLMapBufferObject((void **)&p, b));
  T(cudaMemcpy(words_out, p, sizeof words_out, cudaMemcpyDeviceToHost));
  printf("CUDA sees GL's data: %d\n", memcmp(words_out, words, sizeof words) == 0);
  scale_k<<<grid, 256>>>(p, N);
  T(cudaGetLastError());
  TC(cudaGLSetBufferObjectMapFlags(b, cudaGLMapFlagsReadOnly));
  T(cudaGLUnmapBufferObject(b));
  read_buffer(b, words_out, sizeof words_out);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= words_out[i] == words[i] * 3u + 1u;
  printf("GL sees the kernel's writes: %d\n", ok);
  TC(cudaGLUnmapBufferObject(b));
  T(cudaGLSetBufferObjectMapFlags(b, cudaGLMapFlagsWriteDiscard));
  TN(cudaGLMapBufferObjectAsync((void **)&p, b, s));
  fill_k<<<grid, 256, 0, s>>>(p, N, 0x3333u);
  T(cudaGetLastError());
  T(cudaGLUnmapBufferObjectAsync(b, s));
  T(cudaStreamSynchronize(s));
  printf("async map, GL sees the fill: %d\n", buffer_is_fill(b, 0x3333u));
  T(cudaGLUnregisterBufferObject(b));
  TC(cudaGLUnregisterBufferObject(b));
  TC(cudaGLMapBufferObject((void **)&p, b));
  gl.DeleteBuffers(1, &b);
  GL_CHECK(&gl, "glDeleteBuffers");
}

static void group_texture(cudaStream_t s) {
  printf("== texture GL_RGBA8\n");
  for (int i = 0; i < W * H * 4; i++) {
    texels[i] = (unsigned char)(i * 7 + 3);
    texels2[i] = (unsigned char)((i * 13) ^ 0xa5);
  }
  GLuint t = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, texels);
  cudaGraphicsResource_t rt = NULL;
  cudaArray_t a = NULL, other = NULL;
  cudaMipmappedArray_t mm = NULL;
  cudaError_t e;
  TN(cudaGraphicsGLRegisterImage(&rt, t, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  TN(cudaGraphicsMapResources(1, &rt, s));
  TN(cudaGraphicsSubResourceGetMappedArray(&a, rt, 0, 0));
  print_array(a);
  T(cudaMemcpy2DFromArray(texels_out, W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  printf("CUDA sees GL's texels: %d\n", memcmp(texels_out, texels, sizeof texels) == 0);
  T(cudaMemcpy2DToArray(a, 0, 0, texels2, W * 4, W * 4, H, cudaMemcpyHostToDevice));
  TC(cudaGraphicsSubResourceGetMappedArray(&other, rt, 1, 0));
  TC(cudaGraphicsSubResourceGetMappedArray(&other, rt, 0, 1));
  void *p = NULL;
  size_t size = 0;
  TC(cudaGraphicsResourceGetMappedPointer(&p, &size, rt));
  TV(e, cudaGraphicsResourceGetMappedMipmappedArray(&mm, rt));
  if (e == cudaSuccess) {
    cudaArray_t level0 = NULL;
    TV(e, cudaGetMipmappedArrayLevel(&level0, mm, 0));
    if (e == cudaSuccess) print_array(level0);
  }
  T(cudaGraphicsUnmapResources(1, &rt, s));
  T(cudaStreamSynchronize(s));
  TC(cudaGraphicsSubResourceGetMappedArray(&other, rt, 0, 0));
  read_texture(t, GL_RGBA, GL_UNSIGNED_BYTE, texels_out);
  printf("GL sees CUDA's texels: %d cks %llx\n", memcmp(texels_out, texels2, sizeof texels2) == 0,
         cks(texels_out, sizeof texels_out));
  T(cudaGraphicsUnregisterResource(rt));
  gl.DeleteTextures(1, &t);
  GL_CHECK(&gl, "glDeleteTextures");
}

static void group_surface(cudaStream_t s) {
  printf("== surface GL_R32F\n");
  for (int i = 0; i < W * H; i++) floats[i] = (float)i;
  GLuint t = make_texture(GL_R32F, GL_RED, GL_FLOAT, floats);
  GLuint t2 = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, texels);
  cudaGraphicsResource_t rs = NULL, r2 = NULL;
  cudaArray_t a = NULL, a2 = NULL;
  cudaSurfaceObject_t so = 0;
  cudaResourceDesc rd;
  cudaError_t e;
  TN(cudaGraphicsGLRegisterImage(&rs, t, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsSurfaceLoadStore));
  TN(cudaGraphicsMapResources(1, &rs, s));
  TN(cudaGraphicsSubResourceGetMappedArray(&a, rs, 0, 0));
  print_array(a);
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a;
  TN(cudaCreateSurfaceObject(&so, &rd));
  dim3 block(16, 16), grid((W + 15) / 16, (H + 15) / 16);
  surf_k<<<grid, block, 0, s>>>(so, W, H);
  T(cudaGetLastError());
  T(cudaStreamSynchronize(s));
  T(cudaDestroySurfaceObject(so));
  T(cudaGraphicsUnmapResources(1, &rs, s));
  T(cudaStreamSynchronize(s));
  read_texture(t, GL_RED, GL_FLOAT, floats_out);
  int ok = 1;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      ok &= floats_out[y * W + x] == floats[y * W + x] * 2.0f + (x + 1000 * y);
  printf("GL sees the surface kernel's writes: %d cks %llx\n", ok,
         cks(floats_out, sizeof floats_out));
  T(cudaGraphicsUnregisterResource(rs));

  // The same on an image registered without the surface flag.
  TN(cudaGraphicsGLRegisterImage(&r2, t2, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  TN(cudaGraphicsMapResources(1, &r2, s));
  TN(cudaGraphicsSubResourceGetMappedArray(&a2, r2, 0, 0));
  print_array(a2);
  rd.res.array.array = a2;
  TCV(e, cudaCreateSurfaceObject(&so, &rd));
  if (e == cudaSuccess) T(cudaDestroySurfaceObject(so));
  T(cudaGraphicsUnmapResources(1, &r2, s));
  T(cudaStreamSynchronize(s));
  T(cudaGraphicsUnregisterResource(r2));
  gl.DeleteTextures(1, &t);
  gl.DeleteTextures(1, &t2);
  GL_CHECK(&gl, "glDeleteTextures");
}

static void group_flags(void) {
  printf("== image register flags\n");
  GLuint tr = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, texels);
  GLuint tw = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
  GLuint tg = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, texels);
  cudaGraphicsResource_t rr = NULL, rw = NULL, rg = NULL;
  cudaArray_t a = NULL;
  cudaError_t e;

  TN(cudaGraphicsGLRegisterImage(&rr, tr, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsReadOnly));
  TN(cudaGraphicsMapResources(1, &rr, 0));
  TN(cudaGraphicsSubResourceGetMappedArray(&a, rr, 0, 0));
  print_array(a);
  T(cudaMemcpy2DFromArray(texels_out, W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  printf("read-only image, CUDA sees GL's texels: %d\n",
         memcmp(texels_out, texels, sizeof texels) == 0);
  T(cudaGraphicsUnmapResources(1, &rr, 0));
  T(cudaGraphicsUnregisterResource(rr));

  TN(cudaGraphicsGLRegisterImage(&rw, tw, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsWriteDiscard));
  TN(cudaGraphicsMapResources(1, &rw, 0));
  TN(cudaGraphicsSubResourceGetMappedArray(&a, rw, 0, 0));
  T(cudaMemcpy2DToArray(a, 0, 0, texels2, W * 4, W * 4, H, cudaMemcpyHostToDevice));
  T(cudaGraphicsUnmapResources(1, &rw, 0));
  T(cudaDeviceSynchronize());
  read_texture(tw, GL_RGBA, GL_UNSIGNED_BYTE, texels_out);
  printf("write-discard image, GL sees CUDA's texels: %d\n",
         memcmp(texels_out, texels2, sizeof texels2) == 0);
  T(cudaGraphicsUnregisterResource(rw));

  TV(e,
     cudaGraphicsGLRegisterImage(&rg, tg, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsTextureGather));
  if (e == cudaSuccess) T(cudaGraphicsUnregisterResource(rg));
  gl.DeleteTextures(1, &tr);
  gl.DeleteTextures(1, &tw);
  gl.DeleteTextures(1, &tg);
  GL_CHECK(&gl, "glDeleteTextures");
}

// REFUSED(call using &rx): prints the code like TC (itself: passed on to
// TCV, the text would be printed macro-expanded); a registration that
// succeeded after all is undone.
#define REFUSED(expr)                                                                            \
  do {                                                                                           \
    cudaGraphicsResource_t rx = NULL;                                                            \
    cudaError_t r_e_ = (expr);                                                                   \
    cudaError_t r_l_ = cudaGetLastError();                                                       \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(r_e_), cudaGetErrorName(r_l_)); \
    if (r_e_ == cudaSuccess) T(cudaGraphicsUnregisterResource(rx));                              \
  } while (0)

static void group_refused(void) {
  printf("== refused\n");
  GLuint rgb = make_texture(GL_RGB8, GL_RGB, GL_UNSIGNED_BYTE, NULL);
  GLuint depth = make_texture(GL_DEPTH_COMPONENT32F, 0, 0, NULL);
  GLuint rgba = make_texture(GL_RGBA8, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
  const GLuint never = 0x7ffffff0u; /* a name GL never handed out */
  REFUSED(cudaGraphicsGLRegisterImage(&rx, rgb, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  REFUSED(cudaGraphicsGLRegisterImage(&rx, depth, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  REFUSED(cudaGraphicsGLRegisterImage(&rx, rgba, GL_TEXTURE_3D, cudaGraphicsRegisterFlagsNone));
  REFUSED(cudaGraphicsGLRegisterImage(&rx, rgba, GL_TEXTURE_RECTANGLE, 0));
  REFUSED(cudaGraphicsGLRegisterImage(&rx, rgba, GL_TEXTURE_2D, 0x100));
  REFUSED(cudaGraphicsGLRegisterImage(&rx, never, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  REFUSED(cudaGraphicsGLRegisterBuffer(&rx, 0, cudaGraphicsRegisterFlagsNone));
  REFUSED(cudaGraphicsGLRegisterBuffer(&rx, never, cudaGraphicsRegisterFlagsNone));
  gl.DeleteTextures(1, &rgb);
  gl.DeleteTextures(1, &depth);
  gl.DeleteTextures(1, &rgba);
  GL_CHECK(&gl, "glDeleteTextures");
}

int main() {
  egl_headless_watchdog(90);
  int rc = egl_headless_open(&egl);
  if (rc != 0) return rc;
  if (egl_headless_gl_load(&egl, &gl) != 0) return 1;
  group_devices();
  CHECK(cudaSetDevice(egl.cuda_device));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  group_buffer(s);
  group_legacy(s);
  group_texture(s);
  group_surface(s);
  group_flags();
  group_refused();
  printf("== end\n");
  T(cudaStreamDestroy(s));
  T(cudaDeviceSynchronize());
  TC(cudaGetLastError());
  egl_headless_close(&egl);
  return 0;
}
