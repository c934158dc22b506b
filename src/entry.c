/* Driver Entry Point Access and cudaGetExportTable. */
#include "internal.h"

CUDAEV_DECLARE_VARIANT(cudaGetDriverEntryPoint, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaGetDriverEntryPointByVersion, _ptsz);

/* cudaEnableDefault / LegacyStream / PerThreadDefaultStream are the
 * driver's CU_GET_PROC_ADDRESS_* flags. A program built with per-thread
 * default stream calls the _ptsz entry points, whose "default" means the
 * per-thread variants. */
static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int version,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status, bool per_thread) {
  CUDAEV_INIT_OR_RETURN();
  if (symbol == NULL || funcPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
    return cudaev__ret(cudaErrorInvalidValue);
  if (flags == cudaEnableDefault && per_thread) flags = cudaEnablePerThreadDefaultStream;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = cudaev__drv.cuGetProcAddress(symbol, funcPtr, (int)version, flags, &found);
  if (status != NULL) *status = (enum cudaDriverEntryPointQueryResult)found;
  if (r == CUDA_ERROR_NOT_FOUND) {
    *funcPtr = NULL;
    /* With a status to read, a missing symbol is not an API error. */
    return status != NULL ? cudaSuccess : cudaev__ret(cudaErrorSymbolNotFound);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, false);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, true);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, false);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, true);
}

/* The runtime keeps no export tables of its own: every id is the driver's.
 * NVIDIA's runtime checks the pointers before anything else, and answers
 * cudaErrorUnknown, not the initialisation error, when there is no driver
 * to ask (none, or the toolkit's stub). */
cudaError_t cudaGetExportTable(const void **ppExportTable, const cudaUUID_t *pExportTableId) {
  if (ppExportTable == NULL || pExportTableId == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (cudaev__init() != cudaSuccess) return cudaev__ret(cudaErrorUnknown);
  return cudaev__ret_cu(
      cudaev__drv.cuGetExportTable(ppExportTable, (const CUuuid *)pExportTableId));
}
