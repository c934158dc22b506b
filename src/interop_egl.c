/* EGL Interoperability: the driver's cudaEGL.h functions, with the frame
 * structure translated both ways.
 *
 * The runtime's cudaEglFrame and the driver's CUeglFrame hold the same frame
 * differently. The runtime describes every plane (cudaEglPlaneDesc: size,
 * pitch, channel count, cudaChannelFormatDesc) and gives pitched planes as
 * cudaPitchedPtr; the driver describes the first plane only (size, pitch,
 * channel count, CUarray_format) and gives pitched planes as bare pointers.
 * So a runtime frame goes down as its first plane's description, and a
 * driver frame comes up with the other planes' descriptions derived from
 * the colour format (chroma subsampling and interleaving). Colour formats,
 * frame types and resource-location flags have the same values on both
 * sides.
 *
 * Without the EGL headers at build time this file is empty and the exports
 * are stubbed (see src/driver/driver.h).
 */
#include "internal.h"
#include "interop.h"
#include "handle.h"

#if defined(CUDAEV_HAVE_EGL)

#pragma GCC visibility push(default)
#include <cuda_egl_interop.h>
#pragma GCC visibility pop

#include <string.h>

#include "array.h"

/* Returns cudaSuccess, cudaErrorInvalidValue (frame type) or
 * cudaErrorInvalidChannelDescriptor (first plane's channelDesc); not recorded. */
static cudaError_t frame_to_cu(const cudaEglFrame *in, CUeglFrame *out) {
  memset(out, 0, sizeof *out);
  /* The first plane's channel format before the frame type, as NVIDIA's
   * runtime checks them (an all-ones frame: invalid channel descriptor). */
  const cudaEglPlaneDesc *p = &in->planeDesc[0];
  unsigned channels = 0;
  cudaError_t e = cudaev__channel_to_format(&p->channelDesc, &out->cuFormat, &channels);
  if (e != cudaSuccess) return e;
  if (in->frameType == cudaEglFrameTypeArray) {
    for (int i = 0; i < CUDA_EGL_MAX_PLANES; i++)
      out->frame.pArray[i] = (CUarray)in->frame.pArray[i];
  } else if (in->frameType == cudaEglFrameTypePitch) {
    for (int i = 0; i < CUDA_EGL_MAX_PLANES; i++) out->frame.pPitch[i] = in->frame.pPitch[i].ptr;
  } else {
    return cudaErrorInvalidValue;
  }
  out->width = p->width;
  out->height = p->height;
  out->depth = p->depth;
  out->pitch = p->pitch;
  out->numChannels = p->numChannels;
  out->planeCount = in->planeCount;
  out->frameType = (CUeglFrameType)in->frameType;
  out->eglColorFormat = (CUeglColorFormat)in->eglColorFormat;
  return cudaSuccess;
}

/* Width and height shifts of the chroma planes of a multi-planar format. */
static void chroma_shift(CUeglColorFormat f, unsigned *wshift, unsigned *hshift) {
  switch (f) {
  case CU_EGL_COLOR_FORMAT_YUV420_PLANAR:
  case CU_EGL_COLOR_FORMAT_YUV420_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_YVU420_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_420_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_Y12V12U12_420_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_YUV420_PLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YUV420_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU420_PLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU420_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU420_PLANAR:
  case CU_EGL_COLOR_FORMAT_YUV420_SEMIPLANAR_2020:
  case CU_EGL_COLOR_FORMAT_YVU420_SEMIPLANAR_2020:
  case CU_EGL_COLOR_FORMAT_YUV420_PLANAR_2020:
  case CU_EGL_COLOR_FORMAT_YVU420_PLANAR_2020:
  case CU_EGL_COLOR_FORMAT_YUV420_SEMIPLANAR_709:
  case CU_EGL_COLOR_FORMAT_YVU420_SEMIPLANAR_709:
  case CU_EGL_COLOR_FORMAT_YUV420_PLANAR_709:
  case CU_EGL_COLOR_FORMAT_YVU420_PLANAR_709:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_420_SEMIPLANAR_709:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_420_SEMIPLANAR_2020:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_420_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_420_SEMIPLANAR_709_ER:
  case CU_EGL_COLOR_FORMAT_Y12V12U12_420_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_Y12V12U12_420_SEMIPLANAR_709_ER:
    *wshift = 1;
    *hshift = 1;
    return;
  case CU_EGL_COLOR_FORMAT_YUV422_PLANAR:
  case CU_EGL_COLOR_FORMAT_YUV422_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_YVU422_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_YUV422_PLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YUV422_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU422_PLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU422_SEMIPLANAR_ER:
  case CU_EGL_COLOR_FORMAT_YVU422_PLANAR:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_422_SEMIPLANAR_2020:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_422_SEMIPLANAR:
  case CU_EGL_COLOR_FORMAT_Y10V10U10_422_SEMIPLANAR_709:
    *wshift = 1;
    *hshift = 0;
    return;
  default: /* 4:4:4 and single-plane formats */
    *wshift = 0;
    *hshift = 0;
    return;
  }
}

static void frame_from_cu(const CUeglFrame *in, cudaEglFrame *out) {
  memset(out, 0, sizeof *out);
  unsigned planes = in->planeCount < CUDA_EGL_MAX_PLANES ? in->planeCount : CUDA_EGL_MAX_PLANES;
  unsigned wshift, hshift;
  chroma_shift(in->eglColorFormat, &wshift, &hshift);
  for (unsigned i = 0; i < planes; i++) {
    cudaEglPlaneDesc *p = &out->planeDesc[i];
    /* The first plane is the one the driver describes. Of two planes the
     * second interleaves both chroma components (2 channels); of three,
     * each chroma plane holds one. Elements keep the first plane's type. */
    p->width = i == 0 ? in->width : (in->width + (1u << wshift) - 1) >> wshift;
    p->height = i == 0 ? in->height : (in->height + (1u << hshift) - 1) >> hshift;
    p->depth = in->depth;
    /* NVIDIA documents only the first plane's pitch as meaningful. */
    p->pitch = in->pitch;
    p->numChannels = i == 0 ? in->numChannels : planes == 2 ? 2 : 1;
    p->channelDesc = cudaev__channel_from_format(in->cuFormat, p->numChannels);
    if (in->frameType == CU_EGL_FRAME_TYPE_PITCH)
      out->frame.pPitch[i] =
          (struct cudaPitchedPtr){in->frame.pPitch[i], p->pitch, p->width, p->height};
    else
      out->frame.pArray[i] = (cudaArray_t)in->frame.pArray[i];
  }
  out->planeCount = in->planeCount;
  out->frameType = (cudaEglFrameType)in->frameType;
  out->eglColorFormat = (cudaEglColorFormat)in->eglColorFormat;
}

cudaError_t cudaGraphicsEGLRegisterImage(struct cudaGraphicsResource **pCudaResource,
                                         EGLImageKHR image, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (pCudaResource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(
      cudaev__drv.cuGraphicsEGLRegisterImage((CUgraphicsResource *)pCudaResource, image, flags),
      pCudaResource);
}

cudaError_t cudaGraphicsResourceGetMappedEglFrame(cudaEglFrame *eglFrame,
                                                  cudaGraphicsResource_t resource,
                                                  unsigned int index, unsigned int mipLevel) {
  CUDAEV_CTX_OR_RETURN();
  RESOURCE_OR_RETURN(resource);
  if (eglFrame == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUeglFrame f;
  memset(&f, 0, sizeof f);
  CUresult r = cudaev__drv.cuGraphicsResourceGetMappedEglFrame(&f, (CUgraphicsResource)resource,
                                                               index, mipLevel);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  frame_from_cu(&f, eglFrame);
  return cudaSuccess;
}

/* EGL streams: NVIDIA's runtime answers a NULL connection pointer, and a
 * NULL connection where one is read, with cudaErrorInvalidResourceHandle,
 * before it looks at the other pointers (measured on an H100). */
cudaError_t cudaEGLStreamConsumerConnect(cudaEglStreamConnection *conn, EGLStreamKHR eglStream) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(
      cudaev__drv.cuEGLStreamConsumerConnect((CUeglStreamConnection *)conn, eglStream));
}

cudaError_t cudaEGLStreamConsumerConnectWithFlags(cudaEglStreamConnection *conn,
                                                  EGLStreamKHR eglStream, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamConsumerConnectWithFlags(
      (CUeglStreamConnection *)conn, eglStream, flags));
}

cudaError_t cudaEGLStreamConsumerDisconnect(cudaEglStreamConnection *conn) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamConsumerDisconnect((CUeglStreamConnection *)conn));
}

cudaError_t cudaEGLStreamConsumerAcquireFrame(cudaEglStreamConnection *conn,
                                              cudaGraphicsResource_t *pCudaResource,
                                              cudaStream_t *pStream, unsigned int timeout) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL || *conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (pCudaResource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(
      cudaev__drv.cuEGLStreamConsumerAcquireFrame((CUeglStreamConnection *)conn,
                                                  (CUgraphicsResource *)pCudaResource,
                                                  (CUstream *)pStream, timeout),
      pCudaResource);
}

cudaError_t cudaEGLStreamConsumerReleaseFrame(cudaEglStreamConnection *conn,
                                              cudaGraphicsResource_t pCudaResource,
                                              cudaStream_t *pStream) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamConsumerReleaseFrame(
      (CUeglStreamConnection *)conn, (CUgraphicsResource)pCudaResource, (CUstream *)pStream));
}

cudaError_t cudaEGLStreamProducerConnect(cudaEglStreamConnection *conn, EGLStreamKHR eglStream,
                                         EGLint width, EGLint height) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamProducerConnect((CUeglStreamConnection *)conn,
                                                               eglStream, width, height));
}

cudaError_t cudaEGLStreamProducerDisconnect(cudaEglStreamConnection *conn) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamProducerDisconnect((CUeglStreamConnection *)conn));
}

cudaError_t cudaEGLStreamProducerPresentFrame(cudaEglStreamConnection *conn, cudaEglFrame eglframe,
                                              cudaStream_t *pStream) {
  CUDAEV_CTX_OR_RETURN();
  /* The frame before the connection, as NVIDIA's runtime checks them. */
  CUeglFrame f;
  cudaError_t e = frame_to_cu(&eglframe, &f);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  return cudaev__ret_cu(cudaev__drv.cuEGLStreamProducerPresentFrame((CUeglStreamConnection *)conn,
                                                                    f, (CUstream *)pStream));
}

cudaError_t cudaEGLStreamProducerReturnFrame(cudaEglStreamConnection *conn, cudaEglFrame *eglframe,
                                             cudaStream_t *pStream) {
  CUDAEV_CTX_OR_RETURN();
  if (conn == NULL || *conn == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (eglframe == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUeglFrame f;
  memset(&f, 0, sizeof f);
  CUresult r = cudaev__drv.cuEGLStreamProducerReturnFrame((CUeglStreamConnection *)conn, &f,
                                                          (CUstream *)pStream);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  frame_from_cu(&f, eglframe);
  return cudaSuccess;
}

cudaError_t cudaEventCreateFromEGLSync(cudaEvent_t *phEvent, EGLSyncKHR eglSync,
                                       unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  /* cudaEventBlockingSync / cudaEventDisableTiming are the driver's
   * CU_EVENT_BLOCKING_SYNC / CU_EVENT_DISABLE_TIMING. The driver is asked
   * before the output is looked at, as NVIDIA's runtime does (a platform
   * without EGL sync objects: not supported, even for a NULL output); an
   * event made for a NULL output is destroyed again. */
  CUevent ev = NULL;
  CUresult r = cudaev__drv.cuEventCreateFromEGLSync(&ev, eglSync, flags);
  if (r == CUDA_SUCCESS && phEvent == NULL) {
    cudaev__drv.cuEventDestroy(ev);
    return cudaev__ret(cudaErrorInvalidValue);
  }
  if (r == CUDA_SUCCESS) {
    cudaev__handle_revive(ev);
    *phEvent = (cudaEvent_t)ev;
  }
  /* Where the platform has no EGL sync objects NVIDIA's runtime answers
   * cudaErrorNotSupported and leaves the last error alone (measured on an
   * H200). */
  if (r == CUDA_ERROR_NOT_SUPPORTED) return cudaErrorNotSupported;
  return cudaev__ret_cu(r);
}

#endif
