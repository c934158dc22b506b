/* OpenGL Interoperability, and its deprecated buffer-object functions.
 *
 * Every function here is the driver's cudaGL.h counterpart: the runtime adds
 * the lazy context, argument checks the driver cannot make for it (the
 * size it does not return), and the device-ordinal translation of
 * cudaGLGetDevices. Without the GL headers at build time this file is
 * empty and the exports are stubbed (see src/driver/driver.h).
 */
#include "internal.h"
#include "interop.h"

#if defined(CUDAEV_HAVE_GL)

#pragma GCC visibility push(default)
#include <cuda_gl_interop.h>
#pragma GCC visibility pop

/* The driver's devices of the current GL context. One call site for
 * cudaGLGetDevices and no_gl_context. */
static CUresult gl_devices(unsigned *n, CUdevice *found, unsigned cap, CUGLDeviceList list) {
  return cudaev__drv.cuGLGetDevices(n, found, cap, list);
}

/* The driver's answer when it finds no current GL context, else
 * CUDA_SUCCESS. The answer depends on the machine: a driver with a
 * desktop GL stack says CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, one without
 * a display stack CUDA_ERROR_OPERATING_SYSTEM. NVIDIA's runtime answered
 * cudaErrorOperatingSystem on such a machine, so the callers report the
 * driver's answer where they report the missing context. Other answers,
 * errors included, leave the caller's own answer in place. */
static CUresult no_gl_context(void) {
  CUdevice found[64];
  unsigned n = 0;
  CUresult r = gl_devices(&n, found, 64, CU_GL_DEVICE_LIST_ALL);
  return r == CUDA_ERROR_INVALID_GRAPHICS_CONTEXT || r == CUDA_ERROR_OPERATING_SYSTEM
             ? r
             : CUDA_SUCCESS;
}

cudaError_t cudaGLGetDevices(unsigned int *pCudaDeviceCount, int *pCudaDevices,
                             unsigned int cudaDeviceCount, enum cudaGLDeviceList deviceList) {
  CUDAEV_INIT_OR_RETURN();
  /* NVIDIA's runtime checks the list before asking the driver (measured:
   * cudaErrorInvalidValue for 9 with no GL context, on an H200), and the
   * count pointer after it: a NULL count without a GL context is the
   * driver's cudaErrorInvalidGraphicsContext (measured on an H100). */
  if (deviceList != cudaGLDeviceListAll && deviceList != cudaGLDeviceListCurrentFrame &&
      deviceList != cudaGLDeviceListNextFrame)
    return cudaev__ret(cudaErrorInvalidValue);
  /* The count is every device found, also when the list has less room
   * (measured: 1 for a list of 0 on an H100, where the driver's own answer
   * is the number written), so the driver is asked with room for all. */
  CUdevice found[64];
  unsigned n = 0;
  CUresult r = gl_devices(&n, found, 64, (CUGLDeviceList)deviceList);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  if (pCudaDeviceCount == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* The driver writes CUdevice handles; the runtime's callers want
   * ordinals, which differ from the handles when they ever do. */
  for (unsigned i = 0; pCudaDevices != NULL && i < n && i < cudaDeviceCount; i++) {
    pCudaDevices[i] = (int)found[i];
    for (int d = 0; d < cudaev__rt.device_count; d++) {
      if (cudaev__rt.devices[d].dev == found[i]) {
        pCudaDevices[i] = d;
        break;
      }
    }
  }
  *pCudaDeviceCount = n;
  return cudaSuccess;
}

cudaError_t cudaGraphicsGLRegisterBuffer(struct cudaGraphicsResource **resource, GLuint buffer,
                                         unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (resource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(
      cudaev__drv.cuGraphicsGLRegisterBuffer((CUgraphicsResource *)resource, buffer, flags),
      resource);
}

cudaError_t cudaGraphicsGLRegisterImage(struct cudaGraphicsResource **resource, GLuint image,
                                        GLenum target, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (resource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(
      cudaev__drv.cuGraphicsGLRegisterImage((CUgraphicsResource *)resource, image, target, flags),
      resource);
}

/* ---- deprecated (CUDA 3.0) buffer objects -------------------------------- */

/* NVIDIA documents this call as no longer needed (the device becomes the
 * calling thread's current device, with its primary context), and the
 * same rule as cudaVDPAUSetVDPAUDevice's: fail with
 * cudaErrorSetOnActiveProcess once the device's primary context is
 * initialised (measured on an H100 with a GL context current: cudaSuccess
 * before cudaFree(0), cudaErrorSetOnActiveProcess after). With no GL
 * context current, the first call is cudaErrorDevicesUnavailable,
 * whichever of its answers for the missing context the driver gives
 * (measured on an H100 and an H200). */
cudaError_t cudaGLSetGLDevice(int device) {
  CUDAEV_INIT_OR_RETURN();
  cudaError_t e = cudaev__interop_device_fresh(device);
  if (e != cudaSuccess) return cudaev__ret(e);
  /* Whatever the driver says of the missing context (an H100's driver:
   * invalid graphics context; an H200's without a display stack: an
   * operating-system error), NVIDIA's runtime answers this one with
   * cudaErrorDevicesUnavailable (measured on both). */
  if (no_gl_context() != CUDA_SUCCESS) return cudaev__ret(cudaErrorDevicesUnavailable);
  return cudaSetDevice(device);
}

cudaError_t cudaGLRegisterBufferObject(GLuint bufObj) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuGLRegisterBufferObject(bufObj));
}

cudaError_t cudaGLUnregisterBufferObject(GLuint bufObj) {
  CUDAEV_CTX_OR_RETURN();
  CUresult r = cudaev__drv.cuGLUnregisterBufferObject(bufObj);
  /* Without a current GL context the driver answers an invalid value where
   * NVIDIA's runtime answers the missing context (measured on an H100:
   * cudaErrorInvalidGraphicsContext, the GL device query's answer there;
   * with a context both answer cudaErrorInvalidValue for a buffer that is
   * not registered): the GL device query tells the two apart, and its
   * answer is the one given. */
  if (r == CUDA_ERROR_INVALID_VALUE) {
    CUresult g = no_gl_context();
    if (g != CUDA_SUCCESS) return cudaev__ret_cu(g);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaGLSetBufferObjectMapFlags(GLuint bufObj, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuGLSetBufferObjectMapFlags(bufObj, flags));
}

/* The runtime's map functions return no size; the driver's want somewhere
 * to put it. */
cudaError_t cudaGLMapBufferObject(void **devPtr, GLuint bufObj) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUdeviceptr p = 0;
  size_t size = 0;
  CUresult r = cudaev__drv.cuGLMapBufferObject(&p, &size, bufObj);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *devPtr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaGLMapBufferObjectAsync(void **devPtr, GLuint bufObj, cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* The driver crashes on a destroyed or bogus stream (handle.h), NVIDIA's
   * runtime with it. */
  CUDAEV_LIVE_OR_RETURN(stream);
  CUdeviceptr p = 0;
  size_t size = 0;
  CUresult r = cudaev__drv.cuGLMapBufferObjectAsync(&p, &size, bufObj, (CUstream)stream);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *devPtr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaGLUnmapBufferObject(GLuint bufObj) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuGLUnmapBufferObject(bufObj));
}

cudaError_t cudaGLUnmapBufferObjectAsync(GLuint bufObj, cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuGLUnmapBufferObjectAsync(bufObj, (CUstream)stream));
}

#endif
