/* Error Log Management: the runtime forwards to the driver's log. */
#include "internal.h"
#include "handle.h"

cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t callbackFunc, void *userData,
                                     cudaLogsCallbackHandle *callback_out) {
  CUDAEV_INIT_OR_RETURN();
  if (callbackFunc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* Same shape as CUlogsCallback: (void *data, level, char *message, size_t length). */
  CUresult r = cudaev__drv.cuLogsRegisterCallback((CUlogsCallback)(void (*)(void))callbackFunc,
                                                  userData, (CUlogsCallbackHandle *)callback_out);
  if (r == CUDA_SUCCESS && callback_out != NULL) cudaev__handle_revive(*callback_out);
  return cudaev__ret_cu(r);
}

/* An unregistered callback handle is remembered (handle.h): the driver
 * crashes on a second unregister and on a bogus handle (NVIDIA's runtime
 * with it); ours answers cudaErrorInvalidValue, NVIDIA's answer to NULL. */
cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle callback) {
  CUDAEV_INIT_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN_ERR(callback, cudaErrorInvalidValue);
  cudaev__handle_bury(callback);
  CUresult r = cudaev__drv.cuLogsUnregisterCallback((CUlogsCallbackHandle)callback);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(callback);
  return cudaev__ret_cu(r);
}

cudaError_t cudaLogsCurrent(cudaLogIterator *iterator_out, unsigned int flags) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuLogsCurrent((CUlogIterator *)iterator_out, flags));
}

cudaError_t cudaLogsDumpToFile(cudaLogIterator *iterator, const char *pathToFile,
                               unsigned int flags) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuLogsDumpToFile((CUlogIterator *)iterator, pathToFile, flags));
}

cudaError_t cudaLogsDumpToMemory(cudaLogIterator *iterator, char *buffer, size_t *size,
                                 unsigned int flags) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(
      cudaev__drv.cuLogsDumpToMemory((CUlogIterator *)iterator, buffer, size, flags));
}
