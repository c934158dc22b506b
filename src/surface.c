/* Surface Object Management. cudaSurfaceObject_t is the driver's
 * CUsurfObject; the resource descriptor converts as for textures. */
#include "internal.h"

#include "array.h"

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *pSurfObject,
                                    const struct cudaResourceDesc *pResDesc) {
  CUDAEV_CTX_OR_RETURN();
  if (pSurfObject == NULL || pResDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_RESOURCE_DESC rd;
  cudaError_t e = cudaev__resdesc_to_cu(pResDesc, &rd);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUsurfObject s = 0;
  CUresult r = cudaev__drv.cuSurfObjectCreate(&s, &rd);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *pSurfObject = (cudaSurfaceObject_t)s;
  return cudaSuccess;
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuSurfObjectDestroy((CUsurfObject)surfObject));
}

cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                             cudaSurfaceObject_t surfObject) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's runtime answers a NULL output with cudaErrorInvalidDevice. */
  if (pResDesc == NULL) return cudaev__ret(cudaErrorInvalidDevice);
  CUDA_RESOURCE_DESC rd;
  CUresult r = cudaev__drv.cuSurfObjectGetResourceDesc(&rd, (CUsurfObject)surfObject);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__resdesc_from_cu(&rd, pResDesc);
  return cudaSuccess;
}
