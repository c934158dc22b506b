/* Vulkan for interop_vk.cu, loaded at run time: an instance and a device on
 * the NVIDIA Vulkan device whose VkPhysicalDeviceIDProperties::deviceUUID
 * is a CUDA device's cudaDeviceProp::uuid, with VK_KHR_external_memory_fd,
 * VK_KHR_external_semaphore_fd and timeline semaphores (Vulkan 1.2); one
 * queue, a command pool, a host-visible staging buffer that Vulkan copies
 * what it reads back into, and helpers to make exportable memory and
 * semaphores and to hand them between Vulkan and CUDA.
 *
 * libvulkan.so.1 is dlopen'ed, not linked: without the loader, a Vulkan
 * driver or an NVIDIA Vulkan device the program skips (exit 77) with a line
 * saying why, instead of failing to start. Where the loader finds no NVIDIA
 * driver, name its ICD file:
 *   VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
 * (VK_ICD_FILENAMES for loaders older than 1.3.207).
 *
 * Include after common.h (vk_open prints the CUDA calls it makes).
 */
#ifndef CUDAEV_TESTS_GPU_VK_HEADLESS_H
#define CUDAEV_TESTS_GPU_VK_HEADLESS_H

#include <vulkan/vulkan.h>
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>

#define VK_INSTANCE_FUNCTIONS(X)                  \
  X(DestroyInstance)                              \
  X(EnumeratePhysicalDevices)                     \
  X(GetPhysicalDeviceProperties2)                 \
  X(GetPhysicalDeviceFeatures2)                   \
  X(GetPhysicalDeviceQueueFamilyProperties)       \
  X(GetPhysicalDeviceMemoryProperties)            \
  X(EnumerateDeviceExtensionProperties)           \
  X(GetPhysicalDeviceExternalBufferProperties)    \
  X(GetPhysicalDeviceImageFormatProperties2)      \
  X(GetPhysicalDeviceExternalSemaphoreProperties) \
  X(CreateDevice)                                 \
  X(GetDeviceProcAddr)

#define VK_DEVICE_FUNCTIONS(X)   \
  X(DestroyDevice)               \
  X(GetDeviceQueue)              \
  X(DeviceWaitIdle)              \
  X(CreateBuffer)                \
  X(DestroyBuffer)               \
  X(GetBufferMemoryRequirements) \
  X(CreateImage)                 \
  X(DestroyImage)                \
  X(GetImageMemoryRequirements2) \
  X(AllocateMemory)              \
  X(FreeMemory)                  \
  X(BindBufferMemory)            \
  X(BindImageMemory)             \
  X(MapMemory)                   \
  X(UnmapMemory)                 \
  X(GetMemoryFdKHR)              \
  X(CreateSemaphore)             \
  X(DestroySemaphore)            \
  X(GetSemaphoreFdKHR)           \
  X(SignalSemaphore)             \
  X(WaitSemaphores)              \
  X(GetSemaphoreCounterValue)    \
  X(CreateCommandPool)           \
  X(DestroyCommandPool)          \
  X(AllocateCommandBuffers)      \
  X(FreeCommandBuffers)          \
  X(BeginCommandBuffer)          \
  X(EndCommandBuffer)            \
  X(CmdFillBuffer)               \
  X(CmdCopyBuffer)               \
  X(CmdPipelineBarrier)          \
  X(CmdClearColorImage)          \
  X(CmdCopyImageToBuffer)        \
  X(QueueSubmit)                 \
  X(CreateFence)                 \
  X(DestroyFence)                \
  X(WaitForFences)               \
  X(GetFenceStatus)

static struct {
  void *lib;
  PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
#define VK_MEMBER(name) PFN_vk##name name;
  VK_INSTANCE_FUNCTIONS(VK_MEMBER)
  VK_DEVICE_FUNCTIONS(VK_MEMBER)
#undef VK_MEMBER
  VkInstance instance;
  VkPhysicalDevice pd;
  VkPhysicalDeviceMemoryProperties mem_props;
  VkDevice dev;
  uint32_t family;
  VkQueue queue;
  VkCommandPool pool;
  VkBuffer stage; /* host-visible, where Vulkan copies what it reads back */
  VkDeviceMemory stage_mem;
  void *stage_map;
} vk;

/* The staging buffer's size, and the bound on every Vulkan wait. */
enum { VK_STAGE_BYTES = 4 << 20 };
static const uint64_t FIVE_S = 5000000000ull;

static inline const char *vk_name(VkResult r) {
  static char other[32];
  switch (r) {
  case VK_SUCCESS: return "VK_SUCCESS";
  case VK_NOT_READY: return "VK_NOT_READY";
  case VK_TIMEOUT: return "VK_TIMEOUT";
  case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
  case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
  case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
  case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
  case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
  case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
  case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
  case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
  default: snprintf(other, sizeof other, "VkResult %d", (int)r); return other;
  }
}

/* A Vulkan step that must work on an NVIDIA device: on failure, a FAILED
 * line and exit 1. */
#define VK_CHECK(call)                                                                 \
  do {                                                                                 \
    VkResult v_r_ = (call);                                                            \
    if (v_r_ != VK_SUCCESS) {                                                          \
      printf("FAILED: %s -> %s at %s:%d\n", #call, vk_name(v_r_), __FILE__, __LINE__); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static inline uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < vk.mem_props.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (vk.mem_props.memoryTypes[i].propertyFlags & want) == want) return i;
  printf("FAILED: no Vulkan memory type with properties %#x\n", (unsigned)want);
  exit(1);
}

static inline int has_extension(const VkExtensionProperties *list, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(list[i].extensionName, name) == 0) return 1;
  return 0;
}

/* Returns 0, 77 (skip) or 1 (failed), after a line saying why. */
static inline int vk_open(int *cuda_device) {
  vk.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (vk.lib == NULL) {
    printf("SKIP: no Vulkan loader (libvulkan.so.1 not found)\n");
    fprintf(stderr, "[vk] %s\n", dlerror());
    return 77;
  }
  void *gipa = dlsym(vk.lib, "vkGetInstanceProcAddr");
  memcpy(&vk.GetInstanceProcAddr, &gipa, sizeof gipa);
  if (vk.GetInstanceProcAddr == NULL) {
    printf("FAILED: libvulkan.so.1 has no vkGetInstanceProcAddr\n");
    return 1;
  }
  PFN_vkEnumerateInstanceVersion instance_version =
      (PFN_vkEnumerateInstanceVersion)vk.GetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
  PFN_vkCreateInstance create_instance =
      (PFN_vkCreateInstance)vk.GetInstanceProcAddr(NULL, "vkCreateInstance");
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (instance_version != NULL && instance_version(&loader_version) != VK_SUCCESS)
    loader_version = VK_API_VERSION_1_0;
  fprintf(stderr, "[vk] loader %u.%u.%u\n", VK_API_VERSION_MAJOR(loader_version),
          VK_API_VERSION_MINOR(loader_version), VK_API_VERSION_PATCH(loader_version));
  if (create_instance == NULL || loader_version < VK_API_VERSION_1_2) {
    printf("SKIP: the Vulkan loader is older than 1.2 (timeline semaphores)\n");
    return 77;
  }
  VkApplicationInfo app = {};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "cudaev interop_vk";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici = {};
  ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ici.pApplicationInfo = &app;
  VkResult r = create_instance(&ici, NULL, &vk.instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    printf(
        "SKIP: no Vulkan driver (vkCreateInstance -> %s); set VK_DRIVER_FILES to NVIDIA's "
        "nvidia_icd.json\n",
        vk_name(r));
    return 77;
  }
  if (r != VK_SUCCESS) {
    printf("FAILED: vkCreateInstance -> %s\n", vk_name(r));
    return 1;
  }
#define VK_LOAD_INSTANCE(name)                                                    \
  vk.name = (PFN_vk##name)vk.GetInstanceProcAddr(vk.instance, "vk" #name);        \
  if (vk.name == NULL) {                                                          \
    printf("FAILED: vkGetInstanceProcAddr(\"vk%s\") on a 1.2 instance\n", #name); \
    return 1;                                                                     \
  }
  VK_INSTANCE_FUNCTIONS(VK_LOAD_INSTANCE)
#undef VK_LOAD_INSTANCE

  // The NVIDIA device whose UUID is a CUDA device's.
  VkPhysicalDevice pds[16];
  uint32_t npd = 16, nvidia = 0;
  r = vk.EnumeratePhysicalDevices(vk.instance, &npd, pds);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) npd = 0;
  int ncuda = 0;
  T(cudaGetDeviceCount(&ncuda));
  VkPhysicalDeviceProperties2 props = {};
  VkPhysicalDeviceIDProperties ids = {};
  for (uint32_t i = 0; i < npd && vk.pd == VK_NULL_HANDLE; i++) {
    ids = VkPhysicalDeviceIDProperties{};
    ids.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
    props = VkPhysicalDeviceProperties2{};
    props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props.pNext = &ids;
    vk.GetPhysicalDeviceProperties2(pds[i], &props);
    fprintf(stderr, "[vk] device %u: %s, vendor %#x, API %u.%u.%u, driver %#x\n", i,
            props.properties.deviceName, props.properties.vendorID,
            VK_API_VERSION_MAJOR(props.properties.apiVersion),
            VK_API_VERSION_MINOR(props.properties.apiVersion),
            VK_API_VERSION_PATCH(props.properties.apiVersion), props.properties.driverVersion);
    if (props.properties.vendorID != 0x10de) continue;
    nvidia++;
    for (int d = 0; d < ncuda; d++) {
      cudaDeviceProp cp;
      memset(&cp, 0, sizeof cp);
      if (cudaGetDeviceProperties(&cp, d) == cudaSuccess &&
          memcmp(cp.uuid.bytes, ids.deviceUUID, VK_UUID_SIZE) == 0) {
        vk.pd = pds[i];
        *cuda_device = d;
        break;
      }
    }
  }
  if (nvidia == 0) {
    printf(
        "SKIP: no NVIDIA Vulkan device among %u; set VK_DRIVER_FILES to NVIDIA's "
        "nvidia_icd.json\n",
        npd);
    return 77;
  }
  if (vk.pd == VK_NULL_HANDLE) {
    printf("SKIP: no NVIDIA Vulkan device has the UUID of a CUDA device\n");
    return 77;
  }
  printf("Vulkan device has the UUID of CUDA device %d\n", *cuda_device);
  if (props.properties.apiVersion < VK_API_VERSION_1_2) {
    printf("FAILED: the NVIDIA Vulkan device offers API %u.%u, below 1.2\n",
           VK_API_VERSION_MAJOR(props.properties.apiVersion),
           VK_API_VERSION_MINOR(props.properties.apiVersion));
    return 1;
  }

  uint32_t next = 0;
  VK_CHECK(vk.EnumerateDeviceExtensionProperties(vk.pd, NULL, &next, NULL));
  VkExtensionProperties *exts = (VkExtensionProperties *)calloc(next ? next : 1, sizeof *exts);
  VK_CHECK(vk.EnumerateDeviceExtensionProperties(vk.pd, NULL, &next, exts));
  int mem_fd = has_extension(exts, next, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  int sem_fd = has_extension(exts, next, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
  free(exts);
  printf("VK_KHR_external_memory_fd %d, VK_KHR_external_semaphore_fd %d\n", mem_fd, sem_fd);
  VkPhysicalDeviceVulkan12Features f12 = {};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceFeatures2 f2 = {};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &f12;
  vk.GetPhysicalDeviceFeatures2(vk.pd, &f2);
  printf("timeline semaphores %d\n", (int)f12.timelineSemaphore);
  if (!mem_fd || !sem_fd || !f12.timelineSemaphore) {
    printf("FAILED: the NVIDIA Vulkan device lacks fd export or timeline semaphores\n");
    return 1;
  }

  // A queue that can clear images and copy: graphics or compute.
  VkQueueFamilyProperties fams[16];
  uint32_t nfam = 16;
  vk.GetPhysicalDeviceQueueFamilyProperties(vk.pd, &nfam, fams);
  vk.family = UINT32_MAX;
  for (uint32_t i = 0; i < nfam && vk.family == UINT32_MAX; i++)
    if (fams[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) vk.family = i;
  if (vk.family == UINT32_MAX) {
    printf("FAILED: no graphics or compute queue family\n");
    return 1;
  }
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = vk.family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features on12 = {};
  on12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  on12.timelineSemaphore = VK_TRUE;
  const char *dev_exts[] = {VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME,
                            VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME};
  VkDeviceCreateInfo dci = {};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.pNext = &on12;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = 2;
  dci.ppEnabledExtensionNames = dev_exts;
  VK_CHECK(vk.CreateDevice(vk.pd, &dci, NULL, &vk.dev));
#define VK_LOAD_DEVICE(name)                                        \
  vk.name = (PFN_vk##name)vk.GetDeviceProcAddr(vk.dev, "vk" #name); \
  if (vk.name == NULL) {                                            \
    printf("FAILED: vkGetDeviceProcAddr(\"vk%s\")\n", #name);       \
    return 1;                                                       \
  }
  VK_DEVICE_FUNCTIONS(VK_LOAD_DEVICE)
#undef VK_LOAD_DEVICE
  vk.GetDeviceQueue(vk.dev, vk.family, 0, &vk.queue);
  vk.GetPhysicalDeviceMemoryProperties(vk.pd, &vk.mem_props);
  VkCommandPoolCreateInfo cpi = {};
  cpi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cpi.queueFamilyIndex = vk.family;
  VK_CHECK(vk.CreateCommandPool(vk.dev, &cpi, NULL, &vk.pool));

  VkBufferCreateInfo bci = {};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = VK_STAGE_BYTES;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_CHECK(vk.CreateBuffer(vk.dev, &bci, NULL, &vk.stage));
  VkMemoryRequirements req;
  vk.GetBufferMemoryRequirements(vk.dev, vk.stage, &req);
  VkMemoryAllocateInfo mai = {};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  VK_CHECK(vk.AllocateMemory(vk.dev, &mai, NULL, &vk.stage_mem));
  VK_CHECK(vk.BindBufferMemory(vk.dev, vk.stage, vk.stage_mem, 0));
  VK_CHECK(vk.MapMemory(vk.dev, vk.stage_mem, 0, VK_WHOLE_SIZE, 0, &vk.stage_map));
  return 0;
}

static inline void vk_close(void) {
  VK_CHECK(vk.DeviceWaitIdle(vk.dev));
  vk.UnmapMemory(vk.dev, vk.stage_mem);
  vk.DestroyBuffer(vk.dev, vk.stage, NULL);
  vk.FreeMemory(vk.dev, vk.stage_mem, NULL);
  vk.DestroyCommandPool(vk.dev, vk.pool, NULL);
  vk.DestroyDevice(vk.dev, NULL);
  vk.DestroyInstance(vk.instance, NULL);
}

static inline VkCommandBuffer begin_commands(void) {
  VkCommandBufferAllocateInfo ai = {};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = vk.pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb;
  VK_CHECK(vk.AllocateCommandBuffers(vk.dev, &ai, &cb));
  VkCommandBufferBeginInfo bi = {};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vk.BeginCommandBuffer(cb, &bi));
  return cb;
}

/* Ends, submits and waits (5 s at most) for cb; the host then reads what
 * it wrote to the staging buffer. */
static inline void submit_and_wait(VkCommandBuffer cb) {
  VkMemoryBarrier host = {};
  host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.CmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host,
                        0, NULL, 0, NULL);
  VK_CHECK(vk.EndCommandBuffer(cb));
  VkFenceCreateInfo fci = {};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence;
  VK_CHECK(vk.CreateFence(vk.dev, &fci, NULL, &fence));
  VkSubmitInfo si = {};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VK_CHECK(vk.QueueSubmit(vk.queue, 1, &si, fence));
  VK_CHECK(vk.WaitForFences(vk.dev, 1, &fence, VK_TRUE, FIVE_S));
  vk.DestroyFence(vk.dev, fence, NULL);
  vk.FreeCommandBuffers(vk.dev, vk.pool, 1, &cb);
}

/* Ownership of a buffer or image moves between the queue family and
 * VK_QUEUE_FAMILY_EXTERNAL (CUDA) around each hand-over. */
static inline void buffer_barrier(VkCommandBuffer cb, VkBuffer b, int to_external) {
  VkBufferMemoryBarrier bb = {};
  bb.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER;
  bb.srcAccessMask = to_external ? VK_ACCESS_TRANSFER_WRITE_BIT : 0;
  bb.dstAccessMask = to_external ? 0 : VK_ACCESS_TRANSFER_READ_BIT;
  bb.srcQueueFamilyIndex = to_external ? vk.family : VK_QUEUE_FAMILY_EXTERNAL;
  bb.dstQueueFamilyIndex = to_external ? VK_QUEUE_FAMILY_EXTERNAL : vk.family;
  bb.buffer = b;
  bb.offset = 0;
  bb.size = VK_WHOLE_SIZE;
  vk.CmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                        0, 0, NULL, 1, &bb, 0, NULL);
}

static inline void image_barrier(VkCommandBuffer cb, VkImage img, uint32_t levels,
                                 VkImageLayout from, VkImageLayout to, uint32_t src_family,
                                 uint32_t dst_family) {
  VkImageMemoryBarrier ib = {};
  ib.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER;
  ib.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  ib.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  ib.oldLayout = from;
  ib.newLayout = to;
  ib.srcQueueFamilyIndex = src_family;
  ib.dstQueueFamilyIndex = dst_family;
  ib.image = img;
  ib.subresourceRange.aspectMask = VK_IMAGE_ASPECT_COLOR_BIT;
  ib.subresourceRange.levelCount = levels;
  ib.subresourceRange.layerCount = 1;
  vk.CmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                        0, 0, NULL, 0, NULL, 1, &ib);
}

static inline int memory_fd(VkDeviceMemory mem) {
  VkMemoryGetFdInfoKHR gi = {};
  gi.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR;
  gi.memory = mem;
  gi.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  int fd = -1;
  VK_CHECK(vk.GetMemoryFdKHR(vk.dev, &gi, &fd));
  return fd;
}

static inline int semaphore_fd(VkSemaphore sem) {
  VkSemaphoreGetFdInfoKHR gi = {};
  gi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR;
  gi.semaphore = sem;
  gi.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  int fd = -1;
  VK_CHECK(vk.GetSemaphoreFdKHR(vk.dev, &gi, &fd));
  return fd;
}

/* An exportable VkBuffer of size bytes in device-local memory of its own. */
static inline void exportable_buffer(VkDeviceSize size, VkBuffer *buf, VkDeviceMemory *mem,
                                     VkDeviceSize *alloc_size) {
  VkExternalMemoryBufferCreateInfo ext = {};
  ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkBufferCreateInfo bci = {};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.pNext = &ext;
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_CHECK(vk.CreateBuffer(vk.dev, &bci, NULL, buf));
  VkMemoryRequirements req;
  vk.GetBufferMemoryRequirements(vk.dev, *buf, &req);
  VkExportMemoryAllocateInfo exp = {};
  exp.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
  exp.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkMemoryAllocateInfo mai = {};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.pNext = &exp;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  VK_CHECK(vk.AllocateMemory(vk.dev, &mai, NULL, mem));
  VK_CHECK(vk.BindBufferMemory(vk.dev, *buf, *mem, 0));
  *alloc_size = req.size;
}

static inline VkSemaphore exportable_timeline(void) {
  VkSemaphoreTypeCreateInfo type = {};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkExportSemaphoreCreateInfo exp = {};
  exp.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO;
  exp.pNext = &type;
  exp.handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkSemaphoreCreateInfo sci = {};
  sci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  sci.pNext = &exp;
  VkSemaphore sem;
  VK_CHECK(vk.CreateSemaphore(vk.dev, &sci, NULL, &sem));
  return sem;
}

static inline unsigned long long counter(VkSemaphore sem) {
  uint64_t v = 0;
  VK_CHECK(vk.GetSemaphoreCounterValue(vk.dev, sem, &v));
  return (unsigned long long)v;
}

#endif
