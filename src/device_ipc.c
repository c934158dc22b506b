/* Device Management, IPC: cudaIpcGetEventHandle, cudaIpcOpenEventHandle,
 * cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcCloseMemHandle.
 * Calls no other device file. */
#include "internal.h"

#include <string.h>

#include "handle.h"

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's runtime lets the driver judge the event first: NULL is an
   * invalid value, an event made without cudaEventInterprocess an invalid
   * handle, even with a NULL `handle`. Ours asks the driver the same with a
   * handle of its own, then refuses the NULL one; an event the driver
   * would crash on (handle.h) never reaches it. */
  if (event == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(event);
  CUipcEventHandle own;
  CUresult r = cudaev__drv.cuIpcGetEventHandle(handle != NULL ? (CUipcEventHandle *)handle : &own,
                                               (CUevent)event);
  if (r == CUDA_SUCCESS && handle == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(r);
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle) {
  CUDAEV_CTX_OR_RETURN();
  if (event == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUipcEventHandle h;
  memcpy(&h, &handle, sizeof h);
  CUresult r = cudaev__drv.cuIpcOpenEventHandle((CUevent *)event, h);
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*event);
  return cudaev__ret_cu(r);
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
  CUDAEV_CTX_OR_RETURN();
  if (handle == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuIpcGetMemHandle((CUipcMemHandle *)handle, (CUdeviceptr)devPtr));
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUipcMemHandle h;
  memcpy(&h, &handle, sizeof h);
  return cudaev__ret_cu(cudaev__drv.cuIpcOpenMemHandle((CUdeviceptr *)devPtr, h, flags));
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuIpcCloseMemHandle((CUdeviceptr)devPtr));
}
