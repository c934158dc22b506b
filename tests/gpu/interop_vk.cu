// Vulkan external memory and semaphores against CUDA, on the NVIDIA Vulkan
// device whose VkPhysicalDeviceIDProperties::deviceUUID is the CUDA
// device's cudaDeviceProp::uuid. One group per topic:
//   buffer    a VkBuffer's memory (VkExportMemoryAllocateInfo, opaque fd)
//             imported with cudaImportExternalMemory and mapped with
//             cudaExternalMemoryGetMappedBuffer, whole and as a view at an
//             offset: Vulkan fills it and CUDA reads; a kernel writes and
//             Vulkan copies it to a host-visible buffer and checks
//   image     a 2-level RGBA8 VkImage in a dedicated allocation, imported
//             with cudaExternalMemoryDedicated and mapped with
//             cudaExternalMemoryGetMappedMipmappedArray: Vulkan clears and
//             CUDA reads both levels; a surface kernel writes both and
//             Vulkan copies them out and checks
//   timeline  a timeline semaphore (opaque fd) imported as
//             cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd: CUDA
//             signals and Vulkan's host waits (vkWaitSemaphores); Vulkan's
//             host signals (vkSignalSemaphore) and a CUDA stream waits; a
//             Vulkan queue and a CUDA stream wait on each other; counters
//             read with vkGetSemaphoreCounterValue
//   bad       fd -1, an fd already closed, a size past the allocation, a
//             memory fd as a semaphore and the reverse, a timeline fd as a
//             binary semaphore, Win32 handle types on Linux
// CUDA's objects are destroyed before the Vulkan objects they came from.
// CUDA takes the fd on a successful import; on a failed one it stays ours
// and is closed here.
//
// Vulkan comes from vk_headless.h: without the loader, a Vulkan driver or
// an NVIDIA Vulkan device the program skips (exit 77) with a line saying
// why. Every wait is bounded.
#include "common.h"
#include "vk_headless.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>

enum { BUF = 4 << 20, W = 256, H = 128, LEVELS = 2 };

static unsigned words[BUF / 4];
static unsigned char texels[W * H * 4];

/* A process that hangs (a wait that never returns) is ended here, with a
 * line on stdout, long before the test runner's own limit. */
static void on_timeout(int) {
  static const char msg[] = "FAILED: timed out (watchdog)\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

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

/* Polls for up to 5 s instead of cudaStreamSynchronize, which would hang
 * on a semaphore wait that is never satisfied. */
static cudaError_t bounded_stream_wait(cudaStream_t s) {
  double end = now() + 5.0;
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && now() < end) {
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
  return e;
}

__host__ __device__ static unsigned fill_word(int i, unsigned seed) {
  return (unsigned)i * 2654435761u ^ seed;
}

__host__ __device__ static uchar4 texel(int x, int y, int level) {
  return make_uchar4((unsigned char)x, (unsigned char)y,
                     (unsigned char)(x * 3 + y * 5 + level * 40), (unsigned char)(200 + level));
}

__global__ void fill_k(unsigned *p, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = fill_word(i, seed);
}

__global__ void set_k(int *p, int v) { *p = v; }

__global__ void surf_k(cudaSurfaceObject_t s, int w, int h, int level) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) surf2Dwrite(texel(x, y, level), s, x * 4, y);
}

static void print_array(cudaArray_t a) {
  cudaChannelFormatDesc d;
  cudaExtent ext = {0, 0, 0};
  unsigned flags = 0;
  memset(&d, 0, sizeof d);
  T(cudaArrayGetInfo(&d, &ext, &flags, a));
  printf("array {%d,%d,%d,%d,%d} %zux%zux%zu flags %#x\n", d.x, d.y, d.z, d.w, (int)d.f, ext.width,
         ext.height, ext.depth, flags);
}

// ---- groups -------------------------------------------------------------------

static void group_buffer(void) {
  printf("== buffer\n");
  VkPhysicalDeviceExternalBufferInfo ebi = {};
  ebi.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO;
  ebi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  ebi.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkExternalBufferProperties ebp = {};
  ebp.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
  vk.GetPhysicalDeviceExternalBufferProperties(vk.pd, &ebi, &ebp);
  VkExternalMemoryFeatureFlags feat = ebp.externalMemoryProperties.externalMemoryFeatures;
  printf("buffer memory as an opaque fd: exportable %d importable %d dedicated only %d\n",
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT),
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT),
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT));

  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;
  exportable_buffer(BUF, &buf, &mem, &size);
  printf("allocation of %d bytes: %llu bytes\n", BUF, (unsigned long long)size);

  // Vulkan writes first, and hands the buffer to CUDA.
  VkCommandBuffer cb = begin_commands();
  vk.CmdFillBuffer(cb, buf, 0, VK_WHOLE_SIZE, 0x5a5a0001u);
  buffer_barrier(cb, buf, 1);
  submit_and_wait(cb);

  int fd = memory_fd(mem);
  cudaExternalMemoryHandleDesc md;
  memset(&md, 0, sizeof md);
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.handle.fd = fd;
  md.size = size;
  cudaExternalMemory_t em = NULL;
  cudaError_t e;
  TV(e, cudaImportExternalMemory(&em, &md));
  if (e != cudaSuccess) {
    close(fd);
    printf("(rest of group skipped)\n");
    return;
  }
  unsigned *p0 = NULL, *p1 = NULL;
  void *px = NULL;
  cudaExternalMemoryBufferDesc bd;
  memset(&bd, 0, sizeof bd);
  bd.offset = 0;
  bd.size = BUF;
  TN(cudaExternalMemoryGetMappedBuffer((void **)&p0, em, &bd));
  bd.offset = BUF / 2;
  bd.size = BUF / 2;
  TN(cudaExternalMemoryGetMappedBuffer((void **)&p1, em, &bd));
  bd.size = BUF;
  TC(cudaExternalMemoryGetMappedBuffer(&px, em, &bd));
  T(cudaMemcpy(words, p0, BUF, cudaMemcpyDeviceToHost));
  int ok = 1;
  for (int i = 0; i < BUF / 4; i++) ok &= words[i] == 0x5a5a0001u;
  printf("CUDA sees Vulkan's fill: %d\n", ok);

  fill_k<<<BUF / 4 / 256, 256>>>(p0, BUF / 4, 0xc0de0000u);
  T(cudaGetLastError());
  T(cudaDeviceSynchronize());
  T(cudaMemcpy(words, p1, BUF / 2, cudaMemcpyDeviceToHost));
  ok = 1;
  for (int i = 0; i < BUF / 8; i++) ok &= words[i] == fill_word(BUF / 8 + i, 0xc0de0000u);
  printf("the view at an offset sees the kernel's writes: %d\n", ok);

  cb = begin_commands();
  buffer_barrier(cb, buf, 0);
  VkBufferCopy region = {0, 0, BUF};
  vk.CmdCopyBuffer(cb, buf, vk.stage, 1, &region);
  submit_and_wait(cb);
  const unsigned *seen = (const unsigned *)vk.stage_map;
  ok = 1;
  for (int i = 0; i < BUF / 4; i++) ok &= seen[i] == fill_word(i, 0xc0de0000u);
  printf("Vulkan sees the kernel's writes: %d cks %llx\n", ok, cks(seen, BUF));

  T(cudaFree(p1));
  T(cudaFree(p0));
  T(cudaDestroyExternalMemory(em));
  vk.DestroyBuffer(vk.dev, buf, NULL);
  vk.FreeMemory(vk.dev, mem, NULL);
}

static void group_image(void) {
  printf("== image\n");
  const VkImageUsageFlags usage = VK_IMAGE_USAGE_TRANSFER_SRC_BIT |
                                  VK_IMAGE_USAGE_TRANSFER_DST_BIT | VK_IMAGE_USAGE_STORAGE_BIT |
                                  VK_IMAGE_USAGE_SAMPLED_BIT;
  VkPhysicalDeviceExternalImageFormatInfo efi = {};
  efi.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_IMAGE_FORMAT_INFO;
  efi.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkPhysicalDeviceImageFormatInfo2 fi = {};
  fi.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_IMAGE_FORMAT_INFO_2;
  fi.pNext = &efi;
  fi.format = VK_FORMAT_R8G8B8A8_UNORM;
  fi.type = VK_IMAGE_TYPE_2D;
  fi.tiling = VK_IMAGE_TILING_OPTIMAL;
  fi.usage = usage;
  VkExternalImageFormatProperties eifp = {};
  eifp.sType = VK_STRUCTURE_TYPE_EXTERNAL_IMAGE_FORMAT_PROPERTIES;
  VkImageFormatProperties2 ifp = {};
  ifp.sType = VK_STRUCTURE_TYPE_IMAGE_FORMAT_PROPERTIES_2;
  ifp.pNext = &eifp;
  VK_CHECK(vk.GetPhysicalDeviceImageFormatProperties2(vk.pd, &fi, &ifp));
  VkExternalMemoryFeatureFlags feat = eifp.externalMemoryProperties.externalMemoryFeatures;
  printf("RGBA8 image memory as an opaque fd: exportable %d importable %d dedicated only %d\n",
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT),
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT),
         !!(feat & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT));

  VkExternalMemoryImageCreateInfo ext = {};
  ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMAGE_CREATE_INFO;
  ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkImageCreateInfo ici = {};
  ici.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO;
  ici.pNext = &ext;
  ici.imageType = VK_IMAGE_TYPE_2D;
  ici.format = VK_FORMAT_R8G8B8A8_UNORM;
  ici.extent.width = W;
  ici.extent.height = H;
  ici.extent.depth = 1;
  ici.mipLevels = LEVELS;
  ici.arrayLayers = 1;
  ici.samples = VK_SAMPLE_COUNT_1_BIT;
  ici.tiling = VK_IMAGE_TILING_OPTIMAL;
  ici.usage = usage;
  ici.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  ici.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  VkImage img;
  VK_CHECK(vk.CreateImage(vk.dev, &ici, NULL, &img));
  VkMemoryDedicatedRequirements dreq = {};
  dreq.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS;
  VkMemoryRequirements2 req = {};
  req.sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2;
  req.pNext = &dreq;
  VkImageMemoryRequirementsInfo2 rinfo = {};
  rinfo.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_REQUIREMENTS_INFO_2;
  rinfo.image = img;
  vk.GetImageMemoryRequirements2(vk.dev, &rinfo, &req);
  VkDeviceSize size = req.memoryRequirements.size;
  printf("image memory %llu bytes, dedicated preferred %d required %d\n", (unsigned long long)size,
         (int)dreq.prefersDedicatedAllocation, (int)dreq.requiresDedicatedAllocation);
  // Dedicated, which every driver allows; CUDA is told so on import.
  VkMemoryDedicatedAllocateInfo dai = {};
  dai.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
  dai.image = img;
  VkExportMemoryAllocateInfo exp = {};
  exp.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
  exp.pNext = &dai;
  exp.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkMemoryAllocateInfo mai = {};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.pNext = &exp;
  mai.allocationSize = size;
  mai.memoryTypeIndex =
      memory_type(req.memoryRequirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  VkDeviceMemory mem;
  VK_CHECK(vk.AllocateMemory(vk.dev, &mai, NULL, &mem));
  VK_CHECK(vk.BindImageMemory(vk.dev, img, mem, 0));

  // Vulkan clears both levels, leaves the image in GENERAL (the layout
  // CUDA's view of the memory keeps) and hands it to CUDA.
  VkCommandBuffer cb = begin_commands();
  image_barrier(cb, img, LEVELS, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                VK_QUEUE_FAMILY_IGNORED, VK_QUEUE_FAMILY_IGNORED);
  VkClearColorValue color;
  color.float32[0] = 10 / 255.0f;
  color.float32[1] = 20 / 255.0f;
  color.float32[2] = 30 / 255.0f;
  color.float32[3] = 40 / 255.0f;
  VkImageSubresourceRange all = {VK_IMAGE_ASPECT_COLOR_BIT, 0, LEVELS, 0, 1};
  vk.CmdClearColorImage(cb, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, &color, 1, &all);
  image_barrier(cb, img, LEVELS, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_GENERAL,
                vk.family, VK_QUEUE_FAMILY_EXTERNAL);
  submit_and_wait(cb);

  int fd = memory_fd(mem);
  cudaExternalMemoryHandleDesc md;
  memset(&md, 0, sizeof md);
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.handle.fd = fd;
  md.size = size;
  md.flags = cudaExternalMemoryDedicated;
  cudaExternalMemory_t em = NULL;
  cudaError_t e;
  TV(e, cudaImportExternalMemory(&em, &md));
  if (e != cudaSuccess) {
    close(fd);
    printf("(rest of group skipped)\n");
    return;
  }
  cudaExternalMemoryMipmappedArrayDesc ad;
  memset(&ad, 0, sizeof ad);
  ad.offset = 0;
  ad.formatDesc.x = ad.formatDesc.y = ad.formatDesc.z = ad.formatDesc.w = 8;
  ad.formatDesc.f = cudaChannelFormatKindUnsigned;
  ad.extent = make_cudaExtent(W, H, 0);
  ad.flags = cudaArraySurfaceLoadStore;
  ad.numLevels = LEVELS;
  cudaMipmappedArray_t mm = NULL, mx = NULL;
  cudaExternalMemoryMipmappedArrayDesc past = ad;
  past.offset = size;
  TC(cudaExternalMemoryGetMappedMipmappedArray(&mx, em, &past));
  TN(cudaExternalMemoryGetMappedMipmappedArray(&mm, em, &ad));
  cudaArray_t level[LEVELS];
  for (int l = 0; l < LEVELS; l++) {
    TN(cudaGetMipmappedArrayLevel(&level[l], mm, l));
    print_array(level[l]);
  }
  for (int l = 0; l < LEVELS; l++) {
    int w = W >> l, h = H >> l;
    T(cudaMemcpy2DFromArray(texels, w * 4, level[l], 0, 0, w * 4, h, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < w * h; i++)
      ok &= texels[4 * i] == 10 && texels[4 * i + 1] == 20 && texels[4 * i + 2] == 30 &&
            texels[4 * i + 3] == 40;
    printf("level %d: CUDA sees Vulkan's clear: %d\n", l, ok);
  }
  for (int l = 0; l < LEVELS; l++) {
    int w = W >> l, h = H >> l;
    cudaResourceDesc rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = level[l];
    cudaSurfaceObject_t so = 0;
    TN(cudaCreateSurfaceObject(&so, &rd));
    dim3 block(16, 16), grid((w + 15) / 16, (h + 15) / 16);
    surf_k<<<grid, block>>>(so, w, h, l);
    T(cudaGetLastError());
    T(cudaDeviceSynchronize());
    T(cudaDestroySurfaceObject(so));
  }

  // Vulkan takes the image back and copies both levels out.
  cb = begin_commands();
  image_barrier(cb, img, LEVELS, VK_IMAGE_LAYOUT_GENERAL, VK_IMAGE_LAYOUT_GENERAL,
                VK_QUEUE_FAMILY_EXTERNAL, vk.family);
  VkBufferImageCopy regions[LEVELS];
  memset(regions, 0, sizeof regions);
  VkDeviceSize offset = 0;
  for (int l = 0; l < LEVELS; l++) {
    regions[l].bufferOffset = offset;
    regions[l].imageSubresource.aspectMask = VK_IMAGE_ASPECT_COLOR_BIT;
    regions[l].imageSubresource.mipLevel = l;
    regions[l].imageSubresource.layerCount = 1;
    regions[l].imageExtent.width = W >> l;
    regions[l].imageExtent.height = H >> l;
    regions[l].imageExtent.depth = 1;
    offset += (VkDeviceSize)(W >> l) * (H >> l) * 4;
  }
  vk.CmdCopyImageToBuffer(cb, img, VK_IMAGE_LAYOUT_GENERAL, vk.stage, LEVELS, regions);
  submit_and_wait(cb);
  for (int l = 0; l < LEVELS; l++) {
    int w = W >> l, h = H >> l, ok = 1;
    const uchar4 *seen = (const uchar4 *)((const char *)vk.stage_map + regions[l].bufferOffset);
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        uchar4 want = texel(x, y, l), got = seen[y * w + x];
        ok &= got.x == want.x && got.y == want.y && got.z == want.z && got.w == want.w;
      }
    printf("level %d: Vulkan sees the surface kernel's writes: %d cks %llx\n", l, ok,
           cks(seen, (size_t)w * h * 4));
  }

  T(cudaFreeMipmappedArray(mm));
  T(cudaDestroyExternalMemory(em));
  vk.DestroyImage(vk.dev, img, NULL);
  vk.FreeMemory(vk.dev, mem, NULL);
}

static void group_timeline(cudaStream_t s) {
  printf("== timeline semaphore\n");
  VkSemaphoreTypeCreateInfo type = {};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkPhysicalDeviceExternalSemaphoreInfo esi = {};
  esi.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO;
  esi.pNext = &type;
  esi.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkExternalSemaphoreProperties esp = {};
  esp.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES;
  vk.GetPhysicalDeviceExternalSemaphoreProperties(vk.pd, &esi, &esp);
  printf("timeline semaphore as an opaque fd: exportable %d importable %d\n",
         !!(esp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT),
         !!(esp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT));

  VkSemaphore sem = exportable_timeline();
  int fd = semaphore_fd(sem);
  cudaExternalSemaphoreHandleDesc sd;
  memset(&sd, 0, sizeof sd);
  sd.type = cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd;
  sd.handle.fd = fd;
  cudaExternalSemaphore_t es = NULL;
  cudaError_t e;
  TV(e, cudaImportExternalSemaphore(&es, &sd));
  if (e != cudaSuccess) {
    close(fd);
    vk.DestroySemaphore(vk.dev, sem, NULL);
    printf("(rest of group skipped)\n");
    return;
  }
  cudaExternalSemaphoreSignalParams sp;
  cudaExternalSemaphoreWaitParams wp;
  int *flag = NULL, hflag = 0;
  CHECK(cudaMalloc((void **)&flag, sizeof *flag));
  CHECK(cudaMemset(flag, 0, sizeof *flag));

  // CUDA signals 1; Vulkan's host waits for it.
  memset(&sp, 0, sizeof sp);
  sp.params.fence.value = 1;
  T(cudaSignalExternalSemaphoresAsync(&es, &sp, 1, s));
  uint64_t value = 1;
  VkSemaphoreWaitInfo wi = {};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem;
  wi.pValues = &value;
  printf("vkWaitSemaphores for CUDA's 1: %s, counter %llu\n",
         vk_name(vk.WaitSemaphores(vk.dev, &wi, FIVE_S)), counter(sem));

  // Vulkan's host signals 2; a CUDA stream waits for it. Until then the
  // stream cannot finish: the counter is 1.
  memset(&wp, 0, sizeof wp);
  wp.params.fence.value = 2;
  T(cudaWaitExternalSemaphoresAsync(&es, &wp, 1, s));
  set_k<<<1, 1, 0, s>>>(flag, 2);
  T(cudaGetLastError());
  T(cudaStreamQuery(s));
  VkSemaphoreSignalInfo ssi = {};
  ssi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO;
  ssi.semaphore = sem;
  ssi.value = 2;
  printf("vkSignalSemaphore(2): %s\n", vk_name(vk.SignalSemaphore(vk.dev, &ssi)));
  printf("stream past the wait within 5 s: %s\n", cudaGetErrorName(bounded_stream_wait(s)));
  T(cudaMemcpy(&hflag, flag, sizeof hflag, cudaMemcpyDeviceToHost));
  printf("the kernel behind the wait ran: %d, counter %llu\n", hflag == 2, counter(sem));

  // GPU to GPU: a Vulkan queue waits for 3 and then signals 4; a CUDA
  // stream signals 3 and then waits for 4.
  uint64_t wait_value = 3, signal_value = 4;
  VkTimelineSemaphoreSubmitInfo tsi = {};
  tsi.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
  tsi.waitSemaphoreValueCount = 1;
  tsi.pWaitSemaphoreValues = &wait_value;
  tsi.signalSemaphoreValueCount = 1;
  tsi.pSignalSemaphoreValues = &signal_value;
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  VkSubmitInfo si = {};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.pNext = &tsi;
  si.waitSemaphoreCount = 1;
  si.pWaitSemaphores = &sem;
  si.pWaitDstStageMask = &stage;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &sem;
  VkFenceCreateInfo fci = {};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence;
  VK_CHECK(vk.CreateFence(vk.dev, &fci, NULL, &fence));
  VK_CHECK(vk.QueueSubmit(vk.queue, 1, &si, fence));
  printf("Vulkan queue waiting for 3: %s\n", vk_name(vk.GetFenceStatus(vk.dev, fence)));
  sp.params.fence.value = 3;
  T(cudaSignalExternalSemaphoresAsync(&es, &sp, 1, s));
  wp.params.fence.value = 4;
  T(cudaWaitExternalSemaphoresAsync(&es, &wp, 1, s));
  set_k<<<1, 1, 0, s>>>(flag, 4);
  T(cudaGetLastError());
  VkResult fr = vk.WaitForFences(vk.dev, 1, &fence, VK_TRUE, FIVE_S);
  printf("Vulkan queue done within 5 s: %s\n", vk_name(fr));
  printf("stream past the wait within 5 s: %s\n", cudaGetErrorName(bounded_stream_wait(s)));
  if (fr != VK_SUCCESS) {
    // The queue still waits for a 3 that will not come: no clean way to
    // tear Vulkan down.
    printf("FAILED: the Vulkan queue never saw CUDA's signal\n");
    fflush(stdout);
    _exit(1);
  }
  vk.DestroyFence(vk.dev, fence, NULL);
  T(cudaMemcpy(&hflag, flag, sizeof hflag, cudaMemcpyDeviceToHost));
  printf("the kernel behind the wait ran: %d, counter %llu\n", hflag == 4, counter(sem));

  // A value already reached passes at once.
  wp.params.fence.value = 1;
  T(cudaWaitExternalSemaphoresAsync(&es, &wp, 1, s));
  printf("stream past the wait within 5 s: %s\n", cudaGetErrorName(bounded_stream_wait(s)));
  // NvSciBuf flags on a timeline semaphore: a signal taken after all
  // moves the counter to 5.
  sp.flags = cudaExternalSemaphoreSignalSkipNvSciBufMemSync;
  sp.params.fence.value = 5;
  TC(cudaSignalExternalSemaphoresAsync(&es, &sp, 1, s));
  wp.flags = cudaExternalSemaphoreWaitSkipNvSciBufMemSync;
  TC(cudaWaitExternalSemaphoresAsync(&es, &wp, 1, s));
  printf("stream done within 5 s: %s, counter %llu\n", cudaGetErrorName(bounded_stream_wait(s)),
         counter(sem));
  TC(cudaSignalExternalSemaphoresAsync(&es, &sp, 0, s));

  T(cudaDestroyExternalSemaphore(es));
  CHECK(cudaFree(flag));
  vk.DestroySemaphore(vk.dev, sem, NULL);
}

/* An import expected to fail, printed as `what`: one that succeeds after
 * all is destroyed (CUDA owns the fd then); after one that fails the fd
 * is still ours and closed here (fd < 0: nothing to close). */
static void bad_memory(const char *what, const cudaExternalMemoryHandleDesc *md, int fd) {
  cudaExternalMemory_t m = NULL;
  cudaError_t e = cudaImportExternalMemory(&m, md);
  cudaError_t l = cudaGetLastError();
  printf("%-60.60s -> %s (last %s)\n", what, cudaGetErrorName(e), cudaGetErrorName(l));
  if (e == cudaSuccess)
    T(cudaDestroyExternalMemory(m));
  else if (fd >= 0)
    close(fd);
}

static void bad_semaphore(const char *what, const cudaExternalSemaphoreHandleDesc *sd, int fd) {
  cudaExternalSemaphore_t m = NULL;
  cudaError_t e = cudaImportExternalSemaphore(&m, sd);
  cudaError_t l = cudaGetLastError();
  printf("%-60.60s -> %s (last %s)\n", what, cudaGetErrorName(e), cudaGetErrorName(l));
  if (e == cudaSuccess)
    T(cudaDestroyExternalSemaphore(m));
  else if (fd >= 0)
    close(fd);
}

/* An fd number that was a memory fd and is closed now: placed far above
 * the open ones, so nothing the process opens meanwhile reuses it. */
static int closed_fd(VkDeviceMemory mem) {
  int fd = memory_fd(mem);
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  close(fd);
  if (high >= 0) close(high);
  printf("fd closed: %d\n", high >= 0 && fcntl(high, F_GETFD) == -1);
  return high;
}

static void group_bad(void) {
  printf("== bad handles\n");
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;
  exportable_buffer(1 << 20, &buf, &mem, &size);
  VkSemaphore sem = exportable_timeline();
  cudaExternalMemoryHandleDesc md;
  cudaExternalSemaphoreHandleDesc sd;
  int fd;

  memset(&md, 0, sizeof md);
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.size = size;
  md.handle.fd = -1;
  bad_memory("cudaImportExternalMemory: opaque fd -1", &md, -1);
  md.handle.fd = closed_fd(mem);
  bad_memory("cudaImportExternalMemory: an opaque fd already closed", &md, -1);
  md.handle.fd = fd = memory_fd(mem);
  md.size = size * 2;
  bad_memory("cudaImportExternalMemory: twice the allocation's size", &md, fd);
  md.size = size;
  md.handle.fd = fd = semaphore_fd(sem);
  bad_memory("cudaImportExternalMemory: a semaphore's fd", &md, fd);
  memset(&md.handle, 0, sizeof md.handle);
  md.type = cudaExternalMemoryHandleTypeOpaqueWin32;
  bad_memory("cudaImportExternalMemory: OpaqueWin32 on Linux", &md, -1);
  md.type = cudaExternalMemoryHandleTypeOpaqueWin32Kmt;
  bad_memory("cudaImportExternalMemory: OpaqueWin32Kmt on Linux", &md, -1);

  memset(&sd, 0, sizeof sd);
  sd.type = cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd;
  sd.handle.fd = -1;
  bad_semaphore("cudaImportExternalSemaphore: timeline fd -1", &sd, -1);
  sd.handle.fd = closed_fd(mem);
  bad_semaphore("cudaImportExternalSemaphore: a timeline fd already closed", &sd, -1);
  sd.handle.fd = fd = memory_fd(mem);
  bad_semaphore("cudaImportExternalSemaphore: a memory fd as timeline", &sd, fd);
  sd.type = cudaExternalSemaphoreHandleTypeOpaqueFd;
  sd.handle.fd = fd = memory_fd(mem);
  bad_semaphore("cudaImportExternalSemaphore: a memory fd as binary", &sd, fd);
  sd.handle.fd = fd = semaphore_fd(sem);
  bad_semaphore("cudaImportExternalSemaphore: a timeline's fd as binary", &sd, fd);
  memset(&sd.handle, 0, sizeof sd.handle);
  sd.type = cudaExternalSemaphoreHandleTypeOpaqueWin32;
  bad_semaphore("cudaImportExternalSemaphore: OpaqueWin32 on Linux", &sd, -1);

  vk.DestroySemaphore(vk.dev, sem, NULL);
  vk.DestroyBuffer(vk.dev, buf, NULL);
  vk.FreeMemory(vk.dev, mem, NULL);
}

int main() {
  signal(SIGALRM, on_timeout);
  alarm(90);
  int cuda_device = -1;
  int rc = vk_open(&cuda_device);
  if (rc != 0) return rc;
  CHECK(cudaSetDevice(cuda_device));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  group_buffer();
  group_image();
  group_timeline(s);
  group_bad();
  printf("== end\n");
  T(cudaStreamDestroy(s));
  T(cudaDeviceSynchronize());
  TC(cudaGetLastError());
  vk_close();
  return 0;
}
