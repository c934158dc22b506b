/* Texture Object Management: channel descriptors and texture objects.
 *
 * cudaTextureObject_t is the driver's CUtexObject; the runtime's
 * descriptors are converted to and from the driver's on every call, so the
 * getters report what the driver holds. */
#include "internal.h"

#include "array.h"

#include <string.h>

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                   enum cudaChannelFormatKind f) {
  struct cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}

/* The runtime spells the driver's CU_TRSF_* flags as separate fields:
 * cudaReadModeElementType is CU_TRSF_READ_AS_INTEGER (no promotion of
 * integer texels to [0,1] floats), the int fields are booleans. */
static cudaError_t texdesc_to_cu(const struct cudaTextureDesc *in, CUDA_TEXTURE_DESC *out) {
  if (in->readMode != cudaReadModeElementType && in->readMode != cudaReadModeNormalizedFloat)
    return cudaErrorInvalidValue;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < 3; i++) out->addressMode[i] = (CUaddress_mode)in->addressMode[i];
  out->filterMode = (CUfilter_mode)in->filterMode;
  unsigned flags = 0;
  if (in->readMode == cudaReadModeElementType) flags |= CU_TRSF_READ_AS_INTEGER;
  if (in->normalizedCoords) flags |= CU_TRSF_NORMALIZED_COORDINATES;
  if (in->sRGB) flags |= CU_TRSF_SRGB;
  if (in->disableTrilinearOptimization) flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  if (in->seamlessCubemap) flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  out->flags = flags;
  out->maxAnisotropy = in->maxAnisotropy;
  out->mipmapFilterMode = (CUfilter_mode)in->mipmapFilterMode;
  out->mipmapLevelBias = in->mipmapLevelBias;
  out->minMipmapLevelClamp = in->minMipmapLevelClamp;
  out->maxMipmapLevelClamp = in->maxMipmapLevelClamp;
  for (int i = 0; i < 4; i++) out->borderColor[i] = in->borderColor[i];
  return cudaSuccess;
}

static void texdesc_from_cu(const CUDA_TEXTURE_DESC *in, struct cudaTextureDesc *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < 3; i++) out->addressMode[i] = (enum cudaTextureAddressMode)in->addressMode[i];
  out->filterMode = (enum cudaTextureFilterMode)in->filterMode;
  out->readMode =
      (in->flags & CU_TRSF_READ_AS_INTEGER) ? cudaReadModeElementType : cudaReadModeNormalizedFloat;
  out->sRGB = (in->flags & CU_TRSF_SRGB) != 0;
  for (int i = 0; i < 4; i++) out->borderColor[i] = in->borderColor[i];
  out->normalizedCoords = (in->flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
  out->maxAnisotropy = in->maxAnisotropy;
  out->mipmapFilterMode = (enum cudaTextureFilterMode)in->mipmapFilterMode;
  out->mipmapLevelBias = in->mipmapLevelBias;
  out->minMipmapLevelClamp = in->minMipmapLevelClamp;
  out->maxMipmapLevelClamp = in->maxMipmapLevelClamp;
  out->disableTrilinearOptimization = (in->flags & CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION) != 0;
  out->seamlessCubemap = (in->flags & CU_TRSF_SEAMLESS_CUBEMAP) != 0;
}

cudaError_t cudaCreateTextureObject(cudaTextureObject_t *pTexObject,
                                    const struct cudaResourceDesc *pResDesc,
                                    const struct cudaTextureDesc *pTexDesc,
                                    const struct cudaResourceViewDesc *pResViewDesc) {
  /* NVIDIA's order and codes: no resource descriptor is an invalid value,
   * no texture descriptor an invalid resource handle, then the output. */
  CUDAEV_CTX_OR_RETURN();
  if (pResDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (pTexDesc == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (pTexObject == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_RESOURCE_DESC rd;
  CUDA_TEXTURE_DESC td;
  CUDA_RESOURCE_VIEW_DESC vd;
  cudaError_t e = cudaev__resdesc_to_cu(pResDesc, &rd);
  if (e == cudaSuccess) e = texdesc_to_cu(pTexDesc, &td);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (pResViewDesc != NULL) memcpy(&vd, pResViewDesc, sizeof vd);
  CUtexObject t = 0;
  CUresult r = cudaev__drv.cuTexObjectCreate(&t, &rd, &td, pResViewDesc != NULL ? &vd : NULL);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *pTexObject = (cudaTextureObject_t)t;
  return cudaSuccess;
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuTexObjectDestroy((CUtexObject)texObject));
}

cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                             cudaTextureObject_t texObject) {
  CUDAEV_CTX_OR_RETURN();
  if (pResDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_RESOURCE_DESC rd;
  CUresult r = cudaev__drv.cuTexObjectGetResourceDesc(&rd, (CUtexObject)texObject);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__resdesc_from_cu(&rd, pResDesc);
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *pTexDesc,
                                            cudaTextureObject_t texObject) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's runtime answers a NULL output with an invalid resource
   * handle. */
  if (pTexDesc == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  CUDA_TEXTURE_DESC td;
  memset(&td, 0, sizeof td); /* the driver may leave fields (borderColor) unwritten */
  CUresult r = cudaev__drv.cuTexObjectGetTextureDesc(&td, (CUtexObject)texObject);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  texdesc_from_cu(&td, pTexDesc);
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc *pResViewDesc,
                                                 cudaTextureObject_t texObject) {
  CUDAEV_CTX_OR_RETURN();
  /* The driver leaves the view of a texture made without one unwritten:
   * report zeros rather than stack garbage. */
  CUDA_RESOURCE_VIEW_DESC vd;
  memset(&vd, 0, sizeof vd);
  CUresult r = cudaev__drv.cuTexObjectGetResourceViewDesc(&vd, (CUtexObject)texObject);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  /* NVIDIA's runtime asks the driver, then skips a NULL output and
   * succeeds. */
  if (pResViewDesc == NULL) return cudaSuccess;
  memcpy(pResViewDesc, &vd, sizeof vd);
  return cudaSuccess;
}
