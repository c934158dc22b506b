/* EGL interop on a real display: the NVIDIA EGL device, headless, with an
 * OpenGL 4.5 core context current (egl_headless.h). One group per topic,
 * each first printing whether the display has the extensions it needs
 * (both runs of compare.sh see the same driver):
 *   image   an EGLImage made from a GL texture (EGL_KHR_gl_texture_2D_image)
 *           registered with cudaGraphicsEGLRegisterImage: the cudaEglFrame
 *           it gives (type, planes, each plane's description), CUDA reading
 *           GL's texels through it and writing new ones GL reads back; the
 *           array view, layers and levels it does not have, map/unmap
 *   sync    cudaEventCreateFromEGLSync on an EGL fence (EGL_KHR_fence_sync):
 *           a stream waits on it, query and synchronize, and the record and
 *           timing such an event refuses
 *   stream  an EGLStream (EGL_KHR_stream) with CUDA as consumer and
 *           producer: a pitched and an array frame presented, acquired,
 *           read and compared, released and returned to the producer; the
 *           stream's state at each step; a consumer connected with flags
 * Prints codes, last errors, frame descriptions and checks of the data;
 * never pointers. Waits are bounded. Exits 77 (skip) without an EGL loader
 * or NVIDIA EGL device.
 */
#include "egl_headless.h"
#include "common.h"

#include <cuda_egl_interop.h>
#include <stdint.h>
#include <time.h>

static struct egl_headless egl;
static struct egl_headless_gl gl;

enum { W = 64, H = 32 };

static unsigned char texels[W * H * 4], texels2[W * H * 4], texels_out[W * H * 4];

static unsigned long long cks(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  unsigned long long h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void pause_1ms(void) {
  struct timespec t = {0, 1000000};
  nanosleep(&t, NULL);
}

/* Polls an event or a stream for up to 5 s instead of a blocking wait that
 * could hang: returns the last query's answer. */
static cudaError_t bounded_event_wait(cudaEvent_t ev) {
  double end = now() + 5.0;
  cudaError_t e;
  while ((e = cudaEventQuery(ev)) == cudaErrorNotReady && now() < end) pause_1ms();
  return e;
}

static cudaError_t bounded_stream_wait(cudaStream_t s) {
  double end = now() + 5.0;
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && now() < end) pause_1ms();
  return e;
}

/* immutable: glTexStorage2D then an upload; else glTexImage2D's mutable
 * storage. An EGLImage may be made from either. */
static GLuint make_texture(const void *data, int immutable) {
  GLuint t = 0;
  gl.GenTextures(1, &t);
  gl.BindTexture(GL_TEXTURE_2D, t);
  if (immutable) {
    gl.TexStorage2D(GL_TEXTURE_2D, 1, GL_RGBA8, W, H);
    gl.TexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W, H, GL_RGBA, GL_UNSIGNED_BYTE, data);
  } else {
    gl.TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, W, H, 0, GL_RGBA, GL_UNSIGNED_BYTE, data);
  }
  gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  gl.TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  gl.BindTexture(GL_TEXTURE_2D, 0);
  GL_CHECK(&gl, "creating a texture");
  return t;
}

static void read_texture(GLuint t, void *out) {
  gl.BindTexture(GL_TEXTURE_2D, t);
  gl.GetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);
  gl.BindTexture(GL_TEXTURE_2D, 0);
  GL_CHECK(&gl, "glGetTexImage");
}

/* An extension function, or a FAILED line and exit 1: the display listed
 * the extension, so its functions must be there. */
static void (*egl_proc(const char *name))(void) {
  void (*f)(void) = (void (*)(void))egl.GetProcAddress(name);
  if (f == NULL) {
    printf("FAILED: eglGetProcAddress(\"%s\") for a listed extension\n", name);
    exit(1);
  }
  return f;
}
#define EGL_PROC(dst, name) EGLH_SET(dst, egl_proc(name))

/* The frame as deterministic text: the planes it has, described in full;
 * of each plane's memory only whether it is set. */
static void print_frame(const cudaEglFrame *f) {
  printf("frame type %d planes %u color format %d\n", (int)f->frameType, f->planeCount,
         (int)f->eglColorFormat);
  for (unsigned i = 0; i < f->planeCount && i < CUDA_EGL_MAX_PLANES; i++) {
    const cudaEglPlaneDesc *d = &f->planeDesc[i];
    printf(" plane %u: %ux%ux%u pitch %u channels %u desc {%d,%d,%d,%d,%d}", i, d->width, d->height,
           d->depth, d->pitch, d->numChannels, d->channelDesc.x, d->channelDesc.y, d->channelDesc.z,
           d->channelDesc.w, (int)d->channelDesc.f);
    if (f->frameType == cudaEglFrameTypePitch)
      printf(" ptr %s pitch %zu xsize %zu ysize %zu\n", f->frame.pPitch[i].ptr ? "set" : "null",
             f->frame.pPitch[i].pitch, f->frame.pPitch[i].xsize, f->frame.pPitch[i].ysize);
    else
      printf(" array %s\n", f->frame.pArray[i] ? "set" : "null");
  }
}

/* The first plane of an RGBA8 frame, into or out of host memory. */
static void frame_read(const cudaEglFrame *f, void *out) {
  if (f->frameType == cudaEglFrameTypeArray)
    T(cudaMemcpy2DFromArray(out, W * 4, f->frame.pArray[0], 0, 0, W * 4, H,
                            cudaMemcpyDeviceToHost));
  else
    T(cudaMemcpy2D(out, W * 4, f->frame.pPitch[0].ptr, f->frame.pPitch[0].pitch, W * 4, H,
                   cudaMemcpyDeviceToHost));
}

static void frame_write(const cudaEglFrame *f, const void *in) {
  if (f->frameType == cudaEglFrameTypeArray)
    T(cudaMemcpy2DToArray(f->frame.pArray[0], 0, 0, in, W * 4, W * 4, H, cudaMemcpyHostToDevice));
  else
    T(cudaMemcpy2D(f->frame.pPitch[0].ptr, f->frame.pPitch[0].pitch, in, W * 4, W * 4, H,
                   cudaMemcpyHostToDevice));
}

static void image_frame(cudaGraphicsResource_t r, GLuint t) {
  cudaEglFrame f, f2;
  cudaArray_t a = NULL;
  cudaError_t e;
  /* A pattern, not zeros, underneath: a field a runtime leaves unwritten
   * shows. */
  memset(&f, 0xab, sizeof f);
  TN(cudaGraphicsResourceGetMappedEglFrame(&f, r, 0, 0));
  print_frame(&f);
  if (f.frameType != cudaEglFrameTypeArray && f.frameType != cudaEglFrameTypePitch) return;
  frame_read(&f, texels_out);
  printf("CUDA sees GL's texels through the EGLImage: %d\n",
         memcmp(texels_out, texels, sizeof texels) == 0);
  /* The first texels each side, to tell a layout or channel order from a
   * copy that never happened (the same on every runtime). */
  printf("  read: ");
  for (int i = 0; i < 12; i++) printf("%02x", texels_out[i]);
  printf(" GL: ");
  for (int i = 0; i < 12; i++) printf("%02x", texels[i]);
  printf(" row 1: ");
  for (int i = 0; i < 8; i++) printf("%02x", texels_out[W * 4 + i]);
  printf("\n");
  frame_write(&f, texels2);
  T(cudaDeviceSynchronize());
  read_texture(t, texels_out);
  printf("GL sees CUDA's texels through the EGLImage: %d cks %llx\n",
         memcmp(texels_out, texels2, sizeof texels2) == 0, cks(texels_out, sizeof texels_out));
  TV(e, cudaGraphicsSubResourceGetMappedArray(&a, r, 0, 0));
  if (e == cudaSuccess && f.frameType == cudaEglFrameTypeArray)
    printf("the array view is the frame's array: %d\n", a == f.frame.pArray[0]);
  TC(cudaGraphicsResourceGetMappedEglFrame(&f2, r, 1, 0));
  TC(cudaGraphicsResourceGetMappedEglFrame(&f2, r, 0, 1));
  TCV(e, cudaGraphicsMapResources(1, &r, 0));
  if (e == cudaSuccess) T(cudaGraphicsUnmapResources(1, &r, 0));
}

static PFNEGLCREATEIMAGEKHRPROC create_image;
static PFNEGLDESTROYIMAGEKHRPROC destroy_image;

static void image_from_texture(int immutable) {
  printf("-- from a %s texture\n", immutable ? "glTexStorage2D" : "glTexImage2D");
  GLuint t = make_texture(texels, immutable);
  /* CUDA reads the image without GL's help: GL's upload must be done. */
  gl.Finish();
  /* EGL_IMAGE_PRESERVED_KHR: without it the image's contents are undefined
   * once it is made (EGL_KHR_image_base). */
  static const EGLint attrs[] = {EGL_GL_TEXTURE_LEVEL_KHR, 0, EGL_IMAGE_PRESERVED_KHR, EGL_TRUE,
                                 EGL_NONE};
  EGLImageKHR img =
      create_image(egl.dpy, egl.ctx, EGL_GL_TEXTURE_2D_KHR, (EGLClientBuffer)(uintptr_t)t, attrs);
  if (img == EGL_NO_IMAGE_KHR) {
    printf("FAILED: eglCreateImageKHR from a GL texture (0x%x)\n", egl.GetError());
    exit(1);
  }
  cudaGraphicsResource_t r = NULL;
  cudaError_t e;
  TV(e, cudaGraphicsEGLRegisterImage(&r, img, cudaGraphicsRegisterFlagsNone));
  if (e == cudaSuccess) {
    image_frame(r, t);
    T(cudaGraphicsUnregisterResource(r));
    read_texture(t, texels_out);
    printf("GL sees CUDA's texels after the unregister: %d\n",
           memcmp(texels_out, texels2, sizeof texels2) == 0);
  }
  TCV(e, cudaGraphicsEGLRegisterImage(&r, img, 0x100));
  if (e == cudaSuccess) T(cudaGraphicsUnregisterResource(r));
  if (!destroy_image(egl.dpy, img)) {
    printf("FAILED: eglDestroyImageKHR (0x%x)\n", egl.GetError());
    exit(1);
  }
  gl.DeleteTextures(1, &t);
  GL_CHECK(&gl, "glDeleteTextures");
}

static void group_image(void) {
  printf("== egl image\n");
  int has = egl_has_ext(egl.extensions, "EGL_KHR_image_base") &&
            egl_has_ext(egl.extensions, "EGL_KHR_gl_texture_2D_image");
  printf("EGL_KHR_image_base and EGL_KHR_gl_texture_2D_image: %d\n", has);
  if (!has) return;
  EGL_PROC(create_image, "eglCreateImageKHR");
  EGL_PROC(destroy_image, "eglDestroyImageKHR");
  for (int i = 0; i < W * H * 4; i++) {
    texels[i] = (unsigned char)(i * 7 + 3);
    texels2[i] = (unsigned char)((i * 13) ^ 0xa5);
  }
  image_from_texture(1);
  image_from_texture(0);
}

static void group_sync(cudaStream_t s) {
  printf("== egl sync\n");
  int has = egl_has_ext(egl.extensions, "EGL_KHR_fence_sync");
  printf("EGL_KHR_fence_sync: %d\n", has);
  if (!has) return;
  PFNEGLCREATESYNCKHRPROC create_sync;
  PFNEGLDESTROYSYNCKHRPROC destroy_sync;
  PFNEGLCLIENTWAITSYNCKHRPROC client_wait;
  EGL_PROC(create_sync, "eglCreateSyncKHR");
  EGL_PROC(destroy_sync, "eglDestroySyncKHR");
  EGL_PROC(client_wait, "eglClientWaitSyncKHR");
  EGLSyncKHR sync = create_sync(egl.dpy, EGL_SYNC_FENCE_KHR, NULL);
  if (sync == EGL_NO_SYNC_KHR) {
    printf("FAILED: eglCreateSyncKHR(EGL_SYNC_FENCE_KHR) (0x%x)\n", egl.GetError());
    exit(1);
  }
  /* The fence signals once GL has run what came before it; a flush sends
   * that to the GPU. */
  gl.Flush();
  cudaEvent_t ev = NULL;
  cudaError_t e;
  float ms = 0;
  TV(e, cudaEventCreateFromEGLSync(&ev, sync, cudaEventDefault));
  if (e == cudaSuccess) {
    T(cudaStreamWaitEvent(s, ev, 0));
    e = bounded_event_wait(ev);
    printf("event signalled within 5 s: %s\n", cudaGetErrorName(e));
    if (e == cudaSuccess) {
      T(cudaEventQuery(ev));
      T(cudaEventSynchronize(ev));
    }
    printf("stream past the wait within 5 s: %s\n", cudaGetErrorName(bounded_stream_wait(s)));
    TC(cudaEventRecord(ev, s));
    TC(cudaEventElapsedTime(&ms, ev, ev));
    T(cudaEventDestroy(ev));
  }
  TV(e, cudaEventCreateFromEGLSync(&ev, sync, cudaEventBlockingSync | cudaEventDisableTiming));
  if (e == cudaSuccess) {
    e = bounded_event_wait(ev);
    printf("blocking-sync event signalled within 5 s: %s\n", cudaGetErrorName(e));
    if (e == cudaSuccess) T(cudaEventSynchronize(ev));
    T(cudaEventDestroy(ev));
  }
  TCV(e, cudaEventCreateFromEGLSync(&ev, sync, 0x100));
  if (e == cudaSuccess) T(cudaEventDestroy(ev));
  EGLint w = client_wait(egl.dpy, sync, EGL_SYNC_FLUSH_COMMANDS_BIT_KHR, 1000000000ull);
  printf("eglClientWaitSyncKHR: %s\n", w == EGL_CONDITION_SATISFIED_KHR ? "satisfied"
                                       : w == EGL_TIMEOUT_EXPIRED_KHR   ? "timeout"
                                                                        : "failed");
  if (!destroy_sync(egl.dpy, sync)) {
    printf("FAILED: eglDestroySyncKHR (0x%x)\n", egl.GetError());
    exit(1);
  }
}

static PFNEGLQUERYSTREAMKHRPROC query_stream;

static EGLint stream_state(EGLStreamKHR st) {
  EGLint v = 0;
  if (!query_stream(egl.dpy, st, EGL_STREAM_STATE_KHR, &v)) return -1;
  return v;
}

static void print_state(EGLint v) {
  const char *name = v == EGL_STREAM_STATE_CREATED_KHR               ? "created"
                     : v == EGL_STREAM_STATE_CONNECTING_KHR          ? "connecting"
                     : v == EGL_STREAM_STATE_EMPTY_KHR               ? "empty"
                     : v == EGL_STREAM_STATE_NEW_FRAME_AVAILABLE_KHR ? "new frame available"
                     : v == EGL_STREAM_STATE_OLD_FRAME_AVAILABLE_KHR ? "old frame available"
                     : v == EGL_STREAM_STATE_DISCONNECTED_KHR        ? "disconnected"
                     : v == -1                                       ? "(query failed)"
                                                                     : "(other)";
  printf("stream state: %s\n", name);
}

/* A frame can take a moment to reach the stream after the present call
 * returns: poll (5 s at most) so the printed state does not depend on
 * timing. */
static EGLint stream_state_after(EGLStreamKHR st, EGLint want) {
  double end = now() + 5.0;
  EGLint v;
  while ((v = stream_state(st)) != want && now() < end) pause_1ms();
  return v;
}

/* Presents pf, acquires it at the consumer end and checks its contents
 * (want), releases it and takes it back at the producer end. */
static void one_frame(cudaEglStreamConnection *prod, cudaEglStreamConnection *cons, EGLStreamKHR st,
                      cudaEglFrame pf, const void *want, cudaStream_t s) {
  cudaGraphicsResource_t r = NULL;
  cudaEglFrame f, rf;
  cudaError_t e;
  TN(cudaEGLStreamProducerPresentFrame(prod, pf, &s));
  print_state(stream_state_after(st, EGL_STREAM_STATE_NEW_FRAME_AVAILABLE_KHR));
  TN(cudaEGLStreamConsumerAcquireFrame(cons, &r, &s, 1000000));
  memset(&f, 0xab, sizeof f);
  TV(e, cudaGraphicsResourceGetMappedEglFrame(&f, r, 0, 0));
  if (e == cudaSuccess) {
    print_frame(&f);
    if (f.frameType == cudaEglFrameTypeArray || f.frameType == cudaEglFrameTypePitch) {
      frame_read(&f, texels_out);
      printf("consumer sees the producer's frame: %d\n",
             memcmp(texels_out, want, sizeof texels_out) == 0);
    }
  }
  T(cudaEGLStreamConsumerReleaseFrame(cons, r, &s));
  /* The frame comes back once EGL has it from the consumer: retry
   * cudaErrorLaunchTimeout for up to 5 s. How many retries that takes
   * depends on timing, so only the final code is printed and the last
   * error the retries left is cleared. */
  double end = now() + 5.0;
  memset(&rf, 0xab, sizeof rf);
  while ((e = cudaEGLStreamProducerReturnFrame(prod, &rf, &s)) == cudaErrorLaunchTimeout &&
         now() < end)
    pause_1ms();
  (void)cudaGetLastError();
  printf("%-60.60s -> %s\n", "cudaEGLStreamProducerReturnFrame(prod, &rf, &s) (retried)",
         cudaGetErrorName(e));
  if (e == cudaSuccess) {
    print_frame(&rf);
    int same = pf.frameType == cudaEglFrameTypePitch
                   ? rf.frame.pPitch[0].ptr == pf.frame.pPitch[0].ptr
                   : rf.frame.pArray[0] == pf.frame.pArray[0];
    printf("the returned frame is the presented one: %d\n", same);
  }
  printf("stream work done within 5 s: %s\n", cudaGetErrorName(bounded_stream_wait(s)));
}

static void group_stream(cudaStream_t s) {
  printf("== egl stream\n");
  int has = egl_has_ext(egl.extensions, "EGL_KHR_stream");
  int reset = egl_has_ext(egl.extensions, "EGL_NV_stream_reset");
  printf("EGL_KHR_stream: %d, EGL_NV_stream_reset: %d\n", has, reset);
  if (!has) return;
  PFNEGLCREATESTREAMKHRPROC create_stream;
  PFNEGLDESTROYSTREAMKHRPROC destroy_stream;
  EGL_PROC(create_stream, "eglCreateStreamKHR");
  EGL_PROC(destroy_stream, "eglDestroyStreamKHR");
  EGL_PROC(query_stream, "eglQueryStreamKHR");
  /* Without reuse the consumer gives a released frame back at once, so the
   * producer can take it back before presenting another (where the
   * driver has the attribute). */
  EGLint attrs[3] = {EGL_NONE, EGL_NONE, EGL_NONE};
  if (reset) {
    attrs[0] = EGL_SUPPORT_REUSE_NV;
    attrs[1] = EGL_FALSE;
  }
  EGLStreamKHR st = create_stream(egl.dpy, attrs);
  if (st == EGL_NO_STREAM_KHR) {
    printf("FAILED: eglCreateStreamKHR (0x%x)\n", egl.GetError());
    exit(1);
  }
  print_state(stream_state(st));
  cudaEglStreamConnection cons = NULL, prod = NULL;
  cudaError_t ec, ep = cudaErrorUnknown;
  TV(ec, cudaEGLStreamConsumerConnect(&cons, st));
  print_state(stream_state(st));
  if (ec == cudaSuccess) {
    TV(ep, cudaEGLStreamProducerConnect(&prod, st, W, H));
    print_state(stream_state(st));
  }
  if (ec == cudaSuccess && ep == cudaSuccess) {
    struct cudaChannelFormatDesc rgba8 = {8, 8, 8, 8, cudaChannelFormatKindUnsigned};
    unsigned char *dp = NULL;
    cudaArray_t arr = NULL;
    CHECK(cudaMalloc((void **)&dp, (size_t)W * 4 * H));
    CHECK(cudaMemcpy(dp, texels, sizeof texels, cudaMemcpyHostToDevice));
    CHECK(cudaMallocArray(&arr, &rgba8, W, H, cudaArraySurfaceLoadStore));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, texels2, W * 4, W * 4, H, cudaMemcpyHostToDevice));

    cudaEglFrame pf;
    memset(&pf, 0, sizeof pf);
    pf.frame.pPitch[0].ptr = dp;
    pf.frame.pPitch[0].pitch = (size_t)W * 4;
    pf.frame.pPitch[0].xsize = W;
    pf.frame.pPitch[0].ysize = H;
    pf.planeDesc[0].width = W;
    pf.planeDesc[0].height = H;
    pf.planeDesc[0].depth = 1;
    pf.planeDesc[0].pitch = W * 4;
    pf.planeDesc[0].numChannels = 4;
    pf.planeDesc[0].channelDesc = rgba8;
    pf.planeCount = 1;
    pf.frameType = cudaEglFrameTypePitch;
    pf.eglColorFormat = cudaEglColorFormatARGB;
    printf("-- pitched frame\n");
    one_frame(&prod, &cons, st, pf, texels, s);

    cudaEglFrame af = pf;
    memset(&af.frame, 0, sizeof af.frame);
    af.frame.pArray[0] = arr;
    af.planeDesc[0].pitch = 0;
    af.frameType = cudaEglFrameTypeArray;
    printf("-- array frame\n");
    one_frame(&prod, &cons, st, af, texels2, s);

    T(cudaEGLStreamProducerDisconnect(&prod));
    print_state(stream_state_after(st, EGL_STREAM_STATE_DISCONNECTED_KHR));
    CHECK(cudaFree(dp));
    CHECK(cudaFreeArray(arr));
  }
  if (ec == cudaSuccess) T(cudaEGLStreamConsumerDisconnect(&cons));
  if (!destroy_stream(egl.dpy, st)) {
    printf("FAILED: eglDestroyStreamKHR (0x%x)\n", egl.GetError());
    exit(1);
  }

  /* A consumer that asks for frames in video memory. */
  st = create_stream(egl.dpy, attrs);
  if (st == EGL_NO_STREAM_KHR) {
    printf("FAILED: eglCreateStreamKHR (0x%x)\n", egl.GetError());
    exit(1);
  }
  TV(ec, cudaEGLStreamConsumerConnectWithFlags(&cons, st, cudaEglResourceLocationVidmem));
  print_state(stream_state(st));
  if (ec == cudaSuccess) T(cudaEGLStreamConsumerDisconnect(&cons));
  if (!destroy_stream(egl.dpy, st)) {
    printf("FAILED: eglDestroyStreamKHR (0x%x)\n", egl.GetError());
    exit(1);
  }
}

int main(void) {
  egl_headless_watchdog(90);
  int rc = egl_headless_open(&egl);
  if (rc != 0) return rc;
  if (egl_headless_gl_load(&egl, &gl) != 0) return 1;
  CHECK(cudaSetDevice(egl.cuda_device));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  group_image();
  group_sync(s);
  group_stream(s);
  printf("== end\n");
  T(cudaStreamDestroy(s));
  T(cudaDeviceSynchronize());
  TC(cudaGetLastError());
  egl_headless_close(&egl);
  return 0;
}
