/* Graphics (OpenGL, EGL, VDPAU) and external-memory interoperability on a
 * fake driver: argument checks, CUdevice <-> ordinal mapping, the
 * cudaEglFrame <-> CUeglFrame translation both ways and the external
 * mipmapped-array descriptor. The fake has two devices whose CUdevice
 * handles (100, 101) differ from their ordinals, so a missing translation
 * shows. The graphics tests build only where the runtime's graphics interop
 * does (src/driver/driver.h: toolkit typedefs and GL/EGL/VDPAU headers). */
#include <criterion/criterion.h>

#include "fake_driver.h"

#if defined(CUDAEV_HAVE_GL) && defined(CUDAEV_HAVE_EGL) && defined(CUDAEV_HAVE_VDPAU)
#define GRAPHICS 1
#else
#define GRAPHICS 0
#endif

#if GRAPHICS
#pragma GCC visibility push(default)
#include <cuda_egl_interop.h>
#include <cuda_gl_interop.h>
#include <cuda_vdpau_interop.h>
#pragma GCC visibility pop
#endif

static struct {
  int calls;
  CUresult result; /* what the faked interop call returns */
  CUstream st;
  CUstream *pst;
  unsigned flags;
  CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC mip;
  CUdevice devs[3];
  unsigned ndevs;
#if GRAPHICS
  CUeglFrame frame; /* what the runtime presented */
  CUeglFrame give;  /* what the driver hands back */
  GLuint obj;
  GLenum target;
#endif
} got;

static CUresult f_count_two(int *n) {
  *n = 2;
  return CUDA_SUCCESS;
}
static CUresult f_device_get(CUdevice *d, int ordinal) {
  *d = 100 + ordinal;
  return CUDA_SUCCESS;
}

#if GRAPHICS
/* EGL */
static CUresult f_present(CUeglStreamConnection *conn, CUeglFrame f, CUstream *pst) {
  (void)conn;
  got.calls++;
  got.frame = f;
  got.pst = pst;
  return got.result;
}
static CUresult f_return(CUeglStreamConnection *conn, CUeglFrame *f, CUstream *pst) {
  (void)conn;
  got.calls++;
  got.pst = pst;
  if (got.result == CUDA_SUCCESS) *f = got.give;
  return got.result;
}
static CUresult f_mapped(CUeglFrame *f, CUgraphicsResource r, unsigned index, unsigned level) {
  (void)r;
  got.calls++;
  got.flags = index * 10 + level;
  if (got.result == CUDA_SUCCESS) *f = got.give;
  return got.result;
}
static CUresult f_egl_register(CUgraphicsResource *r, EGLImageKHR image, unsigned flags) {
  got.calls++;
  got.flags = flags;
  *r = (CUgraphicsResource)image;
  return CUDA_SUCCESS;
}
static CUresult f_event_egl(CUevent *e, EGLSyncKHR sync, unsigned flags) {
  got.calls++;
  got.flags = flags;
  *e = (CUevent)sync;
  return CUDA_SUCCESS;
}
static CUresult f_acquire(CUeglStreamConnection *conn, CUgraphicsResource *r, CUstream *pst,
                          unsigned timeout) {
  (void)conn;
  got.calls++;
  got.pst = pst;
  got.flags = timeout;
  *r = (CUgraphicsResource)(uintptr_t)0x107000;
  return CUDA_SUCCESS;
}

/* GL */
static CUresult f_gl_devices(unsigned *n, CUdevice *devs, unsigned cap, CUGLDeviceList list) {
  got.calls++;
  got.flags = list;
  *n = got.ndevs;
  for (unsigned i = 0; i < got.ndevs && i < cap; i++) devs[i] = got.devs[i];
  return got.result;
}
static CUresult f_gl_map(CUdeviceptr *p, size_t *size, GLuint obj) {
  got.calls++;
  got.obj = obj;
  *p = 0xdead000;
  *size = 64;
  return got.result;
}
static CUresult f_gl_map_async(CUdeviceptr *p, size_t *size, GLuint obj, CUstream st) {
  got.st = st;
  return f_gl_map(p, size, obj);
}
static CUresult f_gl_unmap_async(GLuint obj, CUstream st) {
  got.calls++;
  got.obj = obj;
  got.st = st;
  return CUDA_SUCCESS;
}
static CUresult f_gl_register_image(CUgraphicsResource *r, GLuint image, GLenum target,
                                    unsigned flags) {
  got.calls++;
  got.obj = image;
  got.target = target;
  got.flags = flags;
  *r = (CUgraphicsResource)(uintptr_t)0x106000;
  return CUDA_SUCCESS;
}
static CUresult f_gl_set_map_flags(GLuint obj, unsigned flags) {
  got.calls++;
  got.obj = obj;
  got.flags = flags;
  return CUDA_SUCCESS;
}

/* VDPAU */
static CUresult f_vdpau_device(CUdevice *d, VdpDevice vdp, VdpGetProcAddress *gpa) {
  (void)gpa;
  got.calls++;
  *d = (CUdevice)vdp;
  return CUDA_SUCCESS;
}
static CUresult f_vdpau_video(CUgraphicsResource *r, VdpVideoSurface s, unsigned flags) {
  got.calls++;
  got.obj = s;
  got.flags = flags;
  *r = (CUgraphicsResource)(uintptr_t)0x105000;
  return CUDA_SUCCESS;
}

#endif

/* external memory */
static CUresult f_ext_mip(CUmipmappedArray *m, CUexternalMemory mem,
                          const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *d) {
  (void)mem;
  got.calls++;
  got.mip = *d;
  *m = (CUmipmappedArray)(uintptr_t)0x104000;
  return CUDA_SUCCESS;
}

/* graphics resources: unregister and the calls after it */
static CUresult f_unregister(CUgraphicsResource r) {
  (void)r;
  got.calls++;
  return got.result;
}
static CUresult f_map(unsigned n, CUgraphicsResource *r, CUstream s) {
  (void)n, (void)r, (void)s;
  got.calls++;
  return CUDA_SUCCESS;
}

static void setup(void) {
  static struct cudaev_driver t;
  fake_driver_base(&t);
  t.cuDeviceGetCount = f_count_two;
  t.cuDeviceGet = f_device_get;
#if GRAPHICS
  t.cuEGLStreamProducerPresentFrame = f_present;
  t.cuEGLStreamProducerReturnFrame = f_return;
  t.cuGraphicsResourceGetMappedEglFrame = f_mapped;
  t.cuGraphicsEGLRegisterImage = f_egl_register;
  t.cuEventCreateFromEGLSync = f_event_egl;
  t.cuEGLStreamConsumerAcquireFrame = f_acquire;
  t.cuGLGetDevices = f_gl_devices;
  t.cuGLMapBufferObject = f_gl_map;
  t.cuGLMapBufferObjectAsync = f_gl_map_async;
  t.cuGLUnmapBufferObjectAsync = f_gl_unmap_async;
  t.cuGraphicsGLRegisterImage = f_gl_register_image;
  t.cuGLSetBufferObjectMapFlags = f_gl_set_map_flags;
  t.cuVDPAUGetDevice = f_vdpau_device;
  t.cuGraphicsVDPAURegisterVideoSurface = f_vdpau_video;
#endif
  t.cuExternalMemoryGetMappedMipmappedArray = f_ext_mip;
  t.cuGraphicsUnregisterResource = f_unregister;
  t.cuGraphicsMapResources = f_map;
  t.cuGraphicsUnmapResources = f_map;
  cudaev__driver_install(&t, 13000);
}

TestSuite(interop, .init = setup);

static struct cudaChannelFormatDesc chan(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  return (struct cudaChannelFormatDesc){x, y, z, w, f};
}

#if GRAPHICS
/* A connection, as the caller's variable that holds it. */
static cudaEglStreamConnection conn_var = (cudaEglStreamConnection)(uintptr_t)0x103000;
#define CONN (&conn_var)
/* A registered resource, as far as the fake driver is concerned. */
#define RES  ((cudaGraphicsResource_t)(uintptr_t)0x100099)

static void expect_chan(struct cudaChannelFormatDesc d, int x, int y, int z, int w,
                        enum cudaChannelFormatKind f) {
  cr_expect(d.x == x && d.y == y && d.z == z && d.w == w && d.f == f,
            "channel desc {%d,%d,%d,%d,%d}, expected {%d,%d,%d,%d,%d}", d.x, d.y, d.z, d.w, d.f, x,
            y, z, w, f);
}

/* ---- EGL: runtime frame -> driver frame ---------------------------------- */

Test(interop, present_pitch_frame_goes_down_as_its_first_plane) {
  cudaEglFrame f;
  memset(&f, 0, sizeof f);
  f.frameType = cudaEglFrameTypePitch;
  f.eglColorFormat = cudaEglColorFormatYUV420SemiPlanar;
  f.planeCount = 2;
  f.frame.pPitch[0] = (struct cudaPitchedPtr){(void *)0x1000, 4096, 1920, 1080};
  f.frame.pPitch[1] = (struct cudaPitchedPtr){(void *)0x2000, 4096, 960, 540};
  f.planeDesc[0] = (cudaEglPlaneDesc){
      1920, 1080, 0, 2048, 1, chan(8, 0, 0, 0, cudaChannelFormatKindUnsigned), {0}};
  f.planeDesc[1] = (cudaEglPlaneDesc){
      960, 540, 0, 2048, 2, chan(8, 8, 0, 0, cudaChannelFormatKindUnsigned), {0}};
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x100099;
  cr_assert_eq(cudaEGLStreamProducerPresentFrame(CONN, f, &s), cudaSuccess);
  cr_assert_eq(got.calls, 1);
  cr_expect_eq(got.pst, (CUstream *)&s);
  cr_expect_eq(got.frame.frame.pPitch[0], (void *)0x1000);
  cr_expect_eq(got.frame.frame.pPitch[1], (void *)0x2000);
  cr_expect_null(got.frame.frame.pPitch[2]);
  cr_expect_eq(got.frame.width, 1920);
  cr_expect_eq(got.frame.height, 1080);
  cr_expect_eq(got.frame.depth, 0);
  /* The plane descriptor's pitch, not the pitched pointer's. */
  cr_expect_eq(got.frame.pitch, 2048);
  cr_expect_eq(got.frame.planeCount, 2);
  cr_expect_eq(got.frame.numChannels, 1);
  cr_expect_eq(got.frame.frameType, CU_EGL_FRAME_TYPE_PITCH);
  cr_expect_eq(got.frame.eglColorFormat, CU_EGL_COLOR_FORMAT_YUV420_SEMIPLANAR);
  cr_expect_eq(got.frame.cuFormat, CU_AD_FORMAT_UNSIGNED_INT8);
}

Test(interop, present_array_frame) {
  cudaEglFrame f;
  memset(&f, 0, sizeof f);
  f.frameType = cudaEglFrameTypeArray;
  f.eglColorFormat = cudaEglColorFormatRGBA;
  f.planeCount = 1;
  f.frame.pArray[0] = (cudaArray_t)(uintptr_t)0x10a000;
  f.planeDesc[0] =
      (cudaEglPlaneDesc){640, 480, 1, 0, 4, chan(32, 32, 32, 32, cudaChannelFormatKindFloat), {0}};
  cr_assert_eq(cudaEGLStreamProducerPresentFrame(CONN, f, NULL), cudaSuccess);
  cr_expect_eq(got.frame.frame.pArray[0], (CUarray)(uintptr_t)0x10a000);
  cr_expect_eq(got.frame.frameType, CU_EGL_FRAME_TYPE_ARRAY);
  cr_expect_eq(got.frame.eglColorFormat, CU_EGL_COLOR_FORMAT_RGBA);
  cr_expect_eq(got.frame.cuFormat, CU_AD_FORMAT_FLOAT);
  cr_expect_eq(got.frame.numChannels, 4);
  cr_expect_eq(got.frame.width, 640);
  cr_expect_eq(got.frame.depth, 1);
  cr_expect_null(got.pst);
}

Test(interop, present_frame_rejected_before_the_driver) {
  cudaEglFrame f;
  memset(&f, 0, sizeof f);
  f.planeCount = 1;
  f.planeDesc[0] =
      (cudaEglPlaneDesc){16, 16, 0, 16, 1, chan(8, 0, 0, 0, cudaChannelFormatKindUnsigned), {0}};
  f.frameType = (cudaEglFrameType)7;
  cr_expect_eq(cudaEGLStreamProducerPresentFrame(CONN, f, NULL), cudaErrorInvalidValue);
  f.frameType = cudaEglFrameTypePitch;
  f.planeDesc[0].channelDesc = chan(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
  cr_expect_eq(cudaEGLStreamProducerPresentFrame(CONN, f, NULL), cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidChannelDescriptor);
  f.planeDesc[0].channelDesc = chan(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  cr_expect_eq(cudaEGLStreamProducerPresentFrame(NULL, f, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(got.calls, 0);
  got.result = CUDA_ERROR_INVALID_HANDLE;
  cr_expect_eq(cudaEGLStreamProducerPresentFrame(CONN, f, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

/* ---- EGL: driver frame -> runtime frame ---------------------------------- */

Test(interop, mapped_planar_420_pitch_frame) {
  memset(&got.give, 0, sizeof got.give);
  got.give.frameType = CU_EGL_FRAME_TYPE_PITCH;
  got.give.eglColorFormat = CU_EGL_COLOR_FORMAT_YUV420_PLANAR;
  got.give.planeCount = 3;
  got.give.frame.pPitch[0] = (void *)0x1000;
  got.give.frame.pPitch[1] = (void *)0x2000;
  got.give.frame.pPitch[2] = (void *)0x3000;
  got.give.width = 1921;
  got.give.height = 1081;
  got.give.pitch = 2048;
  got.give.numChannels = 1;
  got.give.cuFormat = CU_AD_FORMAT_UNSIGNED_INT8;
  cudaEglFrame f;
  memset(&f, 0xff, sizeof f);
  cudaGraphicsResource_t res = (cudaGraphicsResource_t)(uintptr_t)0x108000;
  cr_assert_eq(cudaGraphicsResourceGetMappedEglFrame(&f, res, 2, 3), cudaSuccess);
  cr_expect_eq(got.flags, 23);
  cr_expect_eq(f.frameType, cudaEglFrameTypePitch);
  cr_expect_eq(f.eglColorFormat, cudaEglColorFormatYUV420Planar);
  cr_expect_eq(f.planeCount, 3);
  cr_expect_eq(f.planeDesc[0].width, 1921);
  cr_expect_eq(f.planeDesc[0].height, 1081);
  cr_expect_eq(f.planeDesc[0].pitch, 2048);
  cr_expect_eq(f.planeDesc[0].numChannels, 1);
  expect_chan(f.planeDesc[0].channelDesc, 8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  for (int i = 1; i < 3; i++) {
    cr_expect_eq(f.planeDesc[i].width, 961, "plane %d", i);
    cr_expect_eq(f.planeDesc[i].height, 541, "plane %d", i);
    cr_expect_eq(f.planeDesc[i].numChannels, 1, "plane %d", i);
    expect_chan(f.planeDesc[i].channelDesc, 8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  }
  cr_expect_eq(f.frame.pPitch[0].ptr, (void *)0x1000);
  cr_expect_eq(f.frame.pPitch[0].pitch, 2048);
  cr_expect_eq(f.frame.pPitch[0].xsize, 1921);
  cr_expect_eq(f.frame.pPitch[0].ysize, 1081);
  cr_expect_eq(f.frame.pPitch[2].ptr, (void *)0x3000);
  cr_expect_eq(f.frame.pPitch[2].xsize, 961);
  cr_expect_eq(f.frame.pPitch[2].ysize, 541);
  for (int i = 0; i < 4; i++) cr_expect_eq(f.planeDesc[0].reserved[i], 0);
}

Test(interop, returned_semiplanar_422_frame) {
  memset(&got.give, 0, sizeof got.give);
  got.give.frameType = CU_EGL_FRAME_TYPE_PITCH;
  got.give.eglColorFormat = CU_EGL_COLOR_FORMAT_Y10V10U10_422_SEMIPLANAR;
  got.give.planeCount = 2;
  got.give.frame.pPitch[0] = (void *)0x1000;
  got.give.frame.pPitch[1] = (void *)0x2000;
  got.give.width = 1280;
  got.give.height = 720;
  got.give.pitch = 2560;
  got.give.numChannels = 1;
  got.give.cuFormat = CU_AD_FORMAT_UNSIGNED_INT16;
  cudaEglFrame f;
  cudaStream_t s = NULL;
  cr_assert_eq(cudaEGLStreamProducerReturnFrame(CONN, &f, &s), cudaSuccess);
  cr_expect_eq(got.pst, (CUstream *)&s);
  cr_expect_eq(f.planeCount, 2);
  cr_expect_eq(f.planeDesc[1].width, 640);
  cr_expect_eq(f.planeDesc[1].height, 720);
  cr_expect_eq(f.planeDesc[1].numChannels, 2);
  expect_chan(f.planeDesc[1].channelDesc, 16, 16, 0, 0, cudaChannelFormatKindUnsigned);
  cr_expect_eq(f.frame.pPitch[1].ptr, (void *)0x2000);
  /* Planes past planeCount stay zero. */
  cr_expect_null(f.frame.pPitch[2].ptr);
  cr_expect_eq(f.planeDesc[2].width, 0);
}

Test(interop, mapped_array_frame) {
  memset(&got.give, 0, sizeof got.give);
  got.give.frameType = CU_EGL_FRAME_TYPE_ARRAY;
  got.give.eglColorFormat = CU_EGL_COLOR_FORMAT_ABGR;
  got.give.planeCount = 1;
  got.give.frame.pArray[0] = (CUarray)(uintptr_t)0x10a000;
  got.give.width = 64;
  got.give.height = 32;
  got.give.numChannels = 4;
  got.give.cuFormat = CU_AD_FORMAT_HALF;
  cudaEglFrame f;
  cr_assert_eq(cudaGraphicsResourceGetMappedEglFrame(&f, RES, 0, 0), cudaSuccess);
  cr_expect_eq(f.frameType, cudaEglFrameTypeArray);
  cr_expect_eq(f.frame.pArray[0], (cudaArray_t)(uintptr_t)0x10a000);
  cr_expect_null(f.frame.pArray[1]);
  cr_expect_eq(f.planeDesc[0].width, 64);
  cr_expect_eq(f.planeDesc[0].numChannels, 4);
  expect_chan(f.planeDesc[0].channelDesc, 16, 16, 16, 16, cudaChannelFormatKindFloat);
}

Test(interop, mapped_frame_errors_leave_the_frame_alone) {
  /* the resource first, then the frame, as NVIDIA's runtime checks them */
  cr_expect_eq(cudaGraphicsResourceGetMappedEglFrame(NULL, NULL, 0, 0),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGraphicsResourceGetMappedEglFrame(NULL, RES, 0, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaEGLStreamProducerReturnFrame(CONN, NULL, NULL), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  got.result = CUDA_ERROR_NOT_MAPPED;
  cudaEglFrame f;
  memset(&f, 0x5a, sizeof f);
  cr_expect_eq(cudaGraphicsResourceGetMappedEglFrame(&f, RES, 0, 0),
               cudaev__error_from_cu(CUDA_ERROR_NOT_MAPPED));
  cr_expect_eq(f.planeCount, 0x5a5a5a5au);
  cr_expect_eq(cudaGetLastError(), cudaev__error_from_cu(CUDA_ERROR_NOT_MAPPED));
}

/* ---- EGL: pass-through calls --------------------------------------------- */

Test(interop, egl_pass_through) {
  cudaGraphicsResource_t r = NULL;
  cr_expect_eq(cudaGraphicsEGLRegisterImage(&r, (EGLImageKHR)(uintptr_t)0x100042,
                                            cudaGraphicsRegisterFlagsReadOnly),
               cudaSuccess);
  cr_expect_eq(r, (cudaGraphicsResource_t)(uintptr_t)0x100042);
  cr_expect_eq(got.flags, cudaGraphicsRegisterFlagsReadOnly);
  cr_expect_eq(cudaGraphicsEGLRegisterImage(NULL, NULL, 0), cudaErrorInvalidValue);

  cudaEvent_t e = NULL;
  cr_expect_eq(
      cudaEventCreateFromEGLSync(&e, (EGLSyncKHR)(uintptr_t)0x100043, cudaEventBlockingSync),
      cudaSuccess);
  cr_expect_eq(e, (cudaEvent_t)(uintptr_t)0x100043);
  cr_expect_eq(got.flags, CU_EVENT_BLOCKING_SYNC);
  cr_expect_eq(cudaEventCreateFromEGLSync(NULL, NULL, 0), cudaErrorInvalidValue);

  cudaStream_t s = NULL;
  cr_expect_eq(cudaEGLStreamConsumerAcquireFrame(CONN, &r, &s, 1000), cudaSuccess);
  cr_expect_eq(r, (cudaGraphicsResource_t)(uintptr_t)0x107000);
  cr_expect_eq(got.pst, (CUstream *)&s);
  cr_expect_eq(got.flags, 1000);
  cr_expect_eq(cudaEGLStreamConsumerAcquireFrame(NULL, &r, &s, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEGLStreamConsumerAcquireFrame(CONN, NULL, &s, 0), cudaErrorInvalidValue);

  /* Entry points the fake leaves out answer as a driver without them. */
  cr_expect_eq(cudaEGLStreamConsumerConnect(CONN, NULL), cudaErrorNotSupported);
  cr_expect_eq(cudaEGLStreamConsumerConnect(NULL, NULL), cudaErrorInvalidResourceHandle);
}

/* ---- OpenGL --------------------------------------------------------------- */

Test(interop, gl_get_devices_maps_handles_to_ordinals) {
  got.devs[0] = 101;
  got.devs[1] = 100;
  got.ndevs = 2;
  unsigned n = 0;
  int devs[4] = {-1, -1, -1, -1};
  cr_assert_eq(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListCurrentFrame), cudaSuccess);
  cr_expect_eq(got.flags, CU_GL_DEVICE_LIST_CURRENT_FRAME);
  cr_expect_eq(n, 2);
  cr_expect_eq(devs[0], 1);
  cr_expect_eq(devs[1], 0);
  cr_expect_eq(devs[2], -1);
  /* A short array: only what the driver wrote is translated. */
  devs[0] = devs[1] = -1;
  cr_assert_eq(cudaGLGetDevices(&n, devs, 1, cudaGLDeviceListAll), cudaSuccess);
  cr_expect_eq(devs[0], 1);
  cr_expect_eq(devs[1], -1);
  cr_expect_eq(cudaGLGetDevices(NULL, devs, 4, cudaGLDeviceListAll), cudaErrorInvalidValue);
  got.result = CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
  cr_expect_eq(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListAll),
               cudaev__error_from_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT));
  /* The driver judges the GL context before the runtime looks at the
   * count pointer, as NVIDIA's does; a bad list comes before both. */
  cr_expect_eq(cudaGLGetDevices(NULL, devs, 4, cudaGLDeviceListAll),
               cudaErrorInvalidGraphicsContext);
  cr_expect_eq(cudaGLGetDevices(NULL, devs, 4, (enum cudaGLDeviceList)9), cudaErrorInvalidValue);
}

/* cudaGLUnregisterBufferObject: the driver's invalid value is NVIDIA's
 * cudaErrorInvalidGraphicsContext when no GL context is current (the GL
 * device query says so), and stays an invalid value with one. */
static CUresult f_gl_unreg_invalid(GLuint obj) {
  got.obj = obj;
  return CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_gl_no_context(unsigned *n, CUdevice *devs, unsigned cap, CUGLDeviceList list) {
  (void)devs, (void)cap, (void)list;
  *n = 0;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

Test(interop, gl_unregister_without_gl_context) {
  cudaev__drv.cuGLUnregisterBufferObject = f_gl_unreg_invalid;
  cudaev__drv.cuGLGetDevices = f_gl_no_context;
  cr_expect_eq(cudaGLUnregisterBufferObject(5), cudaErrorInvalidGraphicsContext);
  cr_expect_eq(got.obj, 5);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidGraphicsContext);
  cudaev__drv.cuGLGetDevices = f_gl_devices; /* a GL context: got.result is success */
  got.ndevs = 1;
  got.devs[0] = 100;
  cr_expect_eq(cudaGLUnregisterBufferObject(5), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

Test(interop, gl_buffer_objects) {
  void *p = NULL;
  cr_expect_eq(cudaGLMapBufferObject(&p, 7), cudaSuccess);
  cr_expect_eq(p, (void *)0xdead000);
  cr_expect_eq(got.obj, 7);
  p = NULL;
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x100099;
  cr_expect_eq(cudaGLMapBufferObjectAsync(&p, 8, s), cudaSuccess);
  cr_expect_eq(p, (void *)0xdead000);
  cr_expect_eq(got.st, (CUstream)s);
  cr_expect_eq(cudaGLUnmapBufferObjectAsync(9, cudaStreamPerThread), cudaSuccess);
  cr_expect_eq(got.obj, 9);
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaGLSetBufferObjectMapFlags(10, cudaGLMapFlagsWriteDiscard), cudaSuccess);
  cr_expect_eq(got.flags, CU_GL_MAP_RESOURCE_FLAGS_WRITE_DISCARD);
  int calls = got.calls;
  cr_expect_eq(cudaGLMapBufferObject(NULL, 7), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, calls);
  got.result = CUDA_ERROR_MAP_FAILED;
  p = (void *)0x1;
  cr_expect_eq(cudaGLMapBufferObject(&p, 7), cudaErrorMapBufferObjectFailed);
  cr_expect_eq(p, (void *)0x1);
  cr_expect_eq(cudaGetLastError(), cudaErrorMapBufferObjectFailed);
  cr_expect_eq(cudaGLRegisterBufferObject(7), cudaErrorNotSupported);
}

/* The driver frees a mapped resource even as it refuses to unregister it
 * (CUDA_ERROR_ALREADY_MAPPED), so after that answer, as after success, the
 * resource is refused before the driver sees it; registering hands it out
 * again. */
Test(interop, unregistered_resource_is_refused) {
  cudaGraphicsResource_t r = NULL;
  cr_assert_eq(cudaGraphicsGLRegisterImage(&r, 3, GL_TEXTURE_2D, 0), cudaSuccess);
  cr_expect_eq(cudaGraphicsMapResources(1, &r, 0), cudaSuccess);
  got.result = CUDA_ERROR_ALREADY_MAPPED;
  cr_expect_eq(cudaGraphicsUnregisterResource(r), cudaErrorAlreadyMapped);
  got.result = CUDA_SUCCESS;
  int calls = got.calls;
  cr_expect_eq(cudaGraphicsUnmapResources(1, &r, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGraphicsUnregisterResource(r), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cudaGraphicsResource_t both[2] = {(cudaGraphicsResource_t)(uintptr_t)0x107000, r};
  cr_expect_eq(cudaGraphicsMapResources(2, both, 0), cudaErrorInvalidResourceHandle);
  void *p;
  size_t size;
  cr_expect_eq(cudaGraphicsResourceGetMappedPointer(&p, &size, r), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGraphicsResourceSetMapFlags(r, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(got.calls, calls, "the driver saw a call with an unregistered resource");
  /* Registered again at the same address: live. */
  cr_assert_eq(cudaGraphicsGLRegisterImage(&r, 3, GL_TEXTURE_2D, 0), cudaSuccess);
  cr_expect_eq(cudaGraphicsMapResources(1, &r, 0), cudaSuccess);
  /* A refusal that frees nothing (a bad handle) leaves it usable. */
  got.result = CUDA_ERROR_INVALID_HANDLE;
  cr_expect_eq(cudaGraphicsUnregisterResource(r), cudaErrorInvalidResourceHandle);
  got.result = CUDA_SUCCESS;
  cr_expect_eq(cudaGraphicsUnmapResources(1, &r, 0), cudaSuccess);
  cr_expect_eq(cudaGraphicsUnregisterResource(r), cudaSuccess);
  cr_expect_eq(cudaGraphicsUnregisterResource(r), cudaErrorInvalidResourceHandle);
}

Test(interop, gl_register_image) {
  cudaGraphicsResource_t r = NULL;
  cr_expect_eq(
      cudaGraphicsGLRegisterImage(&r, 3, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsSurfaceLoadStore),
      cudaSuccess);
  cr_expect_eq(r, (cudaGraphicsResource_t)(uintptr_t)0x106000);
  cr_expect_eq(got.obj, 3);
  cr_expect_eq(got.target, GL_TEXTURE_2D);
  cr_expect_eq(got.flags, CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST);
  cr_expect_eq(cudaGraphicsGLRegisterImage(NULL, 3, GL_TEXTURE_2D, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaGraphicsGLRegisterBuffer(NULL, 3, 0), cudaErrorInvalidValue);
}

/* As NVIDIA documents and answers: a device whose primary context is
 * initialised is refused, and with no GL context current the device is
 * unavailable (the GL device query says so); else it is cudaSetDevice. */
Test(interop, gl_set_gl_device_refuses_an_active_device) {
  cr_expect_eq(cudaGLSetGLDevice(2), cudaErrorInvalidDevice);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDevice);
  cudaev__drv.cuGLGetDevices = f_gl_no_context;
  cr_expect_eq(cudaGLSetGLDevice(1), cudaErrorDevicesUnavailable);
  cr_expect_eq(cudaGetLastError(), cudaErrorDevicesUnavailable);
  cr_expect_eq(fake_retains, 0);
  cudaev__drv.cuGLGetDevices = f_gl_devices; /* a GL context */
  cr_expect_eq(cudaGLSetGLDevice(1), cudaSuccess);
  int d = -1;
  cr_expect_eq(cudaGetDevice(&d), cudaSuccess);
  cr_expect_eq(d, 1);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(cudaGLSetGLDevice(1), cudaErrorSetOnActiveProcess);
  cr_expect_eq(cudaGetLastError(), cudaErrorSetOnActiveProcess);
}

/* Without a GL context the answer follows the driver's GL device query:
 * a driver with a desktop GL stack says CUDA_ERROR_INVALID_GRAPHICS_CONTEXT
 * (the answers measured on the H100s above), one without a display stack
 * CUDA_ERROR_OPERATING_SYSTEM, which NVIDIA's runtime passes through.
 * Other query failures leave each call's own answer. */
static CUresult gl_query_says;
static CUresult f_gl_query(unsigned *n, CUdevice *devs, unsigned cap, CUGLDeviceList list) {
  (void)devs, (void)cap, (void)list;
  *n = 0;
  return gl_query_says;
}

Test(interop, gl_no_context_answer_follows_the_driver) {
  cudaev__drv.cuGLUnregisterBufferObject = f_gl_unreg_invalid;
  cudaev__drv.cuGLGetDevices = f_gl_query;
  unsigned n;
  int devs[4];

  /* cudaGLSetGLDevice first: the calls below make the primary context,
   * after which it answers cudaErrorSetOnActiveProcess. */
  gl_query_says = CUDA_ERROR_OPERATING_SYSTEM;
  cr_expect_eq(cudaGLSetGLDevice(1), cudaErrorDevicesUnavailable);
  cr_expect_eq(cudaGetLastError(), cudaErrorDevicesUnavailable);
  gl_query_says = CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
  cr_expect_eq(cudaGLSetGLDevice(1), cudaErrorDevicesUnavailable);
  cr_expect_eq(cudaGetLastError(), cudaErrorDevicesUnavailable);
  cr_expect_eq(fake_retains, 0);

  gl_query_says = CUDA_ERROR_OPERATING_SYSTEM;
  cr_expect_eq(cudaGLGetDevices(NULL, devs, 4, cudaGLDeviceListAll), cudaErrorOperatingSystem);
  cr_expect_eq(cudaGLGetDevices(&n, devs, 4, cudaGLDeviceListAll), cudaErrorOperatingSystem);
  cr_expect_eq(cudaGLGetDevices(&n, devs, 4, (enum cudaGLDeviceList)9), cudaErrorInvalidValue);
  cr_expect_eq(cudaGLUnregisterBufferObject(5), cudaErrorOperatingSystem);
  cr_expect_eq(cudaGetLastError(), cudaErrorOperatingSystem);

  gl_query_says = CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
  cr_expect_eq(cudaGLGetDevices(NULL, devs, 4, cudaGLDeviceListAll),
               cudaErrorInvalidGraphicsContext);
  cr_expect_eq(cudaGLUnregisterBufferObject(5), cudaErrorInvalidGraphicsContext);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidGraphicsContext);

  gl_query_says = CUDA_ERROR_UNKNOWN;
  cr_expect_eq(cudaGLUnregisterBufferObject(5), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

/* ---- VDPAU ---------------------------------------------------------------- */

Test(interop, vdpau_get_device_maps_handle_to_ordinal) {
  int d = -1;
  cr_expect_eq(cudaVDPAUGetDevice(&d, 101, NULL), cudaSuccess);
  cr_expect_eq(d, 1);
  cr_expect_eq(cudaVDPAUGetDevice(NULL, 101, NULL), cudaErrorInvalidValue);
}

Test(interop, vdpau_set_device_refuses_an_active_device) {
  cr_expect_eq(cudaVDPAUSetVDPAUDevice(-1, 0, NULL), cudaErrorInvalidDevice);
  cr_expect_eq(cudaVDPAUSetVDPAUDevice(1, 0, NULL), cudaSuccess);
  int d = -1;
  cr_expect_eq(cudaGetDevice(&d), cudaSuccess);
  cr_expect_eq(d, 1);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(cudaVDPAUSetVDPAUDevice(1, 0, NULL), cudaErrorSetOnActiveProcess);
  cr_expect_eq(cudaGetLastError(), cudaErrorSetOnActiveProcess);
}

Test(interop, vdpau_register_video_surface) {
  cudaGraphicsResource_t r = NULL;
  cr_expect_eq(cudaGraphicsVDPAURegisterVideoSurface(&r, 12, cudaGraphicsMapFlagsReadOnly),
               cudaSuccess);
  cr_expect_eq(r, (cudaGraphicsResource_t)(uintptr_t)0x105000);
  cr_expect_eq(got.obj, 12);
  cr_expect_eq(got.flags, CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY);
  cr_expect_eq(cudaGraphicsVDPAURegisterOutputSurface(NULL, 12, 0), cudaErrorInvalidValue);
}

#endif

/* ---- external memory ------------------------------------------------------ */

Test(interop, external_mipmapped_array_descriptor) {
  struct cudaExternalMemoryMipmappedArrayDesc d;
  memset(&d, 0, sizeof d);
  d.offset = 4096;
  d.formatDesc = chan(32, 32, 0, 0, cudaChannelFormatKindFloat);
  d.extent = (struct cudaExtent){64, 32, 0};
  d.flags = cudaArraySurfaceLoadStore | cudaArrayColorAttachment;
  d.numLevels = 5;
  cudaMipmappedArray_t m = NULL;
  cudaExternalMemory_t mem = (cudaExternalMemory_t)(uintptr_t)0x109000;
  cr_assert_eq(cudaExternalMemoryGetMappedMipmappedArray(&m, mem, &d), cudaSuccess);
  cr_expect_eq(m, (cudaMipmappedArray_t)(uintptr_t)0x104000);
  cr_expect_eq(got.mip.offset, 4096);
  cr_expect_eq(got.mip.arrayDesc.Format, CU_AD_FORMAT_FLOAT);
  cr_expect_eq(got.mip.arrayDesc.NumChannels, 2);
  cr_expect_eq(got.mip.arrayDesc.Width, 64);
  cr_expect_eq(got.mip.arrayDesc.Height, 32);
  cr_expect_eq(got.mip.arrayDesc.Depth, 0);
  cr_expect_eq(got.mip.arrayDesc.Flags, CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_COLOR_ATTACHMENT);
  cr_expect_eq(got.mip.numLevels, 5);

  got.calls = 0;
  d.formatDesc = chan(32, 8, 0, 0, cudaChannelFormatKindFloat);
  cr_expect_eq(cudaExternalMemoryGetMappedMipmappedArray(&m, mem, &d),
               cudaErrorInvalidChannelDescriptor);
  /* the channel format before the output, as NVIDIA's runtime checks them */
  cr_expect_eq(cudaExternalMemoryGetMappedMipmappedArray(NULL, mem, &d),
               cudaErrorInvalidChannelDescriptor);
  d.formatDesc = chan(32, 32, 0, 0, cudaChannelFormatKindFloat);
  cr_expect_eq(cudaExternalMemoryGetMappedMipmappedArray(NULL, mem, &d), cudaErrorInvalidValue);
  cr_expect_eq(cudaExternalMemoryGetMappedMipmappedArray(&m, mem, NULL), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
}
