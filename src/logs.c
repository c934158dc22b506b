/* Error Log Management: the runtime forwards to the driver's log. */
#include "internal.h"

cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t callbackFunc, void *userData,
                                     cudaLogsCallbackHandle *callback_out) {
  CUDAEV_INIT_OR_RETURN();
  if (callbackFunc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* Same shape as CUlogsCallback: (void *data, level, char *message, size_t length). */
  return cudaev__ret_cu(
      cudaev__drv.cuLogsRegisterCallback((CUlogsCallback)(void (*)(void))callbackFunc, userData,
                                         (CUlogsCallbackHandle *)callback_out));
}

cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle callback) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuLogsUnregisterCallback((CUlogsCallbackHandle)callback));
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
