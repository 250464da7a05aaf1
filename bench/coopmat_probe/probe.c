/* Tensor-core probe: times one SPIR-V kernel on the first NVIDIA device (else the first
 * device), with VK_NV_cooperative_matrix, VK_KHR_cooperative_matrix and
 * VK_NV_cooperative_matrix2 enabled where present. Raw Vulkan, apart from lumus, so that
 * the extensions' code generation is measured alone (bench/coopmat_probe/run.sh).
 *   probe mma  SPV FM FN ITERS GROUPS           products on operands in registers (mma.comp)
 *   probe smem SPV FM FN ITERS GROUPS           products on operands from shared memory (smem.comp)
 *   probe mm   SPV M N K TRANSB WG BM BN REPS   float16 C = A B by shaders/matmul_coop.comp's
 *                                               push constants, checked on 64 sampled entries
 * Prints the best and mean device time of the repetitions and TFLOP/s of the best. */
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>

#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_); exit(1); } } while (0)

typedef struct { VkStructureType sType; void *pNext; VkBool32 cooperativeMatrix, robust; } CoopKHRFeat;
typedef struct { VkStructureType sType; void *pNext; VkBool32 f[7]; } Coop2Feat;

static VkDevice dev; static VkPhysicalDevice pd; static VkQueue q; static uint32_t qf;
static VkPhysicalDeviceMemoryProperties mp;

static uint32_t memtype(uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    fprintf(stderr, "no memory type\n"); exit(1);
}
typedef struct { VkBuffer b; VkDeviceMemory m; VkDeviceAddress a; void *map; } Buf;
static Buf mkbuf(VkDeviceSize size, int host) {
    Buf r = {0};
    VkBufferCreateInfo bi = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT };
    CK(vkCreateBuffer(dev, &bi, NULL, &r.b));
    VkMemoryRequirements mr; vkGetBufferMemoryRequirements(dev, r.b, &mr);
    VkMemoryAllocateFlagsInfo fi = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT };
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi, .allocationSize = mr.size,
        .memoryTypeIndex = memtype(mr.memoryTypeBits, host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) };
    CK(vkAllocateMemory(dev, &ai, NULL, &r.m));
    CK(vkBindBufferMemory(dev, r.b, r.m, 0));
    VkBufferDeviceAddressInfo da = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = r.b };
    r.a = vkGetBufferDeviceAddress(dev, &da);
    if (host) CK(vkMapMemory(dev, r.m, 0, VK_WHOLE_SIZE, 0, &r.map));
    return r;
}

static uint32_t *readfile(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb"); if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END); *n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
    uint32_t *d = malloc(*n); if (fread(d, 1, *n, f) != *n) exit(1); fclose(f); return d;
}

static uint16_t f2h(float f) {  /* round to nearest even, finite normal range only */
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000u; int e = (int)((x >> 23) & 0xff) - 127 + 15; uint32_t m = x & 0x7fffffu;
    if (e <= 0) return (uint16_t)s;
    uint32_t r = (uint32_t)(e << 10) | (m >> 13); uint32_t rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(s | r);
}
static float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) x = s; else x = s | ((e - 15 + 127) << 23) | (m << 13);
    float f; memcpy(&f, &x, 4); return f;
}

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: probe mma|smem SPV FM FN ITERS GROUPS | probe mm SPV M N K TRANSB WG BM BN REPS\n"); return 2; }
    if (!strcmp(argv[1], "mm") && argc < 12) { fprintf(stderr, "probe mm: 10 arguments\n"); return 2; }
    VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3 };
    VkInstanceCreateInfo ici = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app };
    VkInstance inst; CK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t n = 8; VkPhysicalDevice pds[8]; CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    pd = pds[0];
    for (uint32_t i = 0; i < n; i++) { VkPhysicalDeviceProperties p; vkGetPhysicalDeviceProperties(pds[i], &p); if (p.vendorID == 0x10de) pd = pds[i]; }
    VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    uint32_t ne = 0; vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, NULL);
    VkExtensionProperties *ep = calloc(ne, sizeof *ep); vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, ep);
    int has_nv = 0, has_khr = 0, has_cm2 = 0;
    for (uint32_t i = 0; i < ne; i++) {
        if (!strcmp(ep[i].extensionName, "VK_NV_cooperative_matrix")) has_nv = 1;
        if (!strcmp(ep[i].extensionName, "VK_KHR_cooperative_matrix")) has_khr = 1;
        if (!strcmp(ep[i].extensionName, "VK_NV_cooperative_matrix2")) has_cm2 = 1;
    }
    Coop2Feat c2 = { .sType = (VkStructureType)1000593000 };
    CoopKHRFeat ck = { .sType = (VkStructureType)1000506000, .pNext = has_cm2 ? &c2 : NULL };
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cn = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, .pNext = has_khr ? (void *)&ck : NULL };
    VkPhysicalDeviceVulkan13Features f13 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, .pNext = has_nv ? (void *)&cn : NULL };
    VkPhysicalDeviceVulkan12Features f12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13 };
    VkPhysicalDeviceVulkan11Features f11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12 };
    VkPhysicalDeviceFeatures2 feat = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11 };
    vkGetPhysicalDeviceFeatures2(pd, &feat);
    feat.features.robustBufferAccess = VK_FALSE;
    fprintf(stderr, "# %s nv=%d khr=%d cm2=%d cm2feat=%d%d%d%d%d%d%d\n", props.deviceName, has_nv, has_khr, has_cm2,
            c2.f[0], c2.f[1], c2.f[2], c2.f[3], c2.f[4], c2.f[5], c2.f[6]);
    uint32_t nq = 0; vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qp[16]; vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qp);
    for (qf = 0; qf < nq; qf++) if (qp[qf].queueFlags & VK_QUEUE_COMPUTE_BIT) break;
    float prio = 1;
    VkDeviceQueueCreateInfo qci = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = qf, .queueCount = 1, .pQueuePriorities = &prio };
    const char *exts[4]; uint32_t nx = 0;
    if (has_nv) exts[nx++] = "VK_NV_cooperative_matrix";
    if (has_khr) exts[nx++] = "VK_KHR_cooperative_matrix";
    if (has_cm2) exts[nx++] = "VK_NV_cooperative_matrix2";
    VkDeviceCreateInfo dci = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &feat, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
        .enabledExtensionCount = nx, .ppEnabledExtensionNames = exts };
    CK(vkCreateDevice(pd, &dci, NULL, &dev));
    vkGetDeviceQueue(dev, qf, 0, &q);

    int smem = !strcmp(argv[1], "smem"), mma = smem || !strcmp(argv[1], "mma");
    uint32_t FM = 0, FN = 0, iters = 0, groups = 0, M = 0, N = 0, K = 0, transb = 0, wg = 128, BM = 0, BN = 0, reps = 20;
    if (mma) { FM = (uint32_t)atoi(argv[3]); FN = (uint32_t)atoi(argv[4]); iters = (uint32_t)atoi(argv[5]); groups = (uint32_t)atoi(argv[6]); }
    else { M = (uint32_t)atoi(argv[3]); N = (uint32_t)atoi(argv[4]); K = (uint32_t)atoi(argv[5]); transb = (uint32_t)atoi(argv[6]);
           wg = (uint32_t)atoi(argv[7]); BM = (uint32_t)atoi(argv[8]); BN = (uint32_t)atoi(argv[9]); reps = (uint32_t)atoi(argv[10]); }
    VkDeviceSize sa = mma ? 65536 : (VkDeviceSize)M * K * 2, sb = mma ? 65536 : (VkDeviceSize)K * N * 2;
    VkDeviceSize sc = mma ? (VkDeviceSize)groups * 4 * FM * FN * 256 * 4 : (VkDeviceSize)M * N * 2;
    Buf A = mkbuf(sa, 0), B = mkbuf(sb, 0), C = mkbuf(sc, 0), HA = mkbuf(sa, 1), HB = mkbuf(sb, 1), HC = mkbuf(sc, 1);
    srand(1);
    uint16_t *ha = HA.map, *hb = HB.map;
    for (VkDeviceSize i = 0; i < sa / 2; i++) ha[i] = f2h((float)rand() / RAND_MAX - 0.5f);
    for (VkDeviceSize i = 0; i < sb / 2; i++) hb[i] = f2h((float)rand() / RAND_MAX - 0.5f);

    size_t cn_; uint32_t *code = readfile(argv[2], &cn_);
    VkShaderModuleCreateInfo smi = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = cn_, .pCode = code };
    VkShaderModule sm; CK(vkCreateShaderModule(dev, &smi, NULL, &sm));
    VkDescriptorSetLayoutBinding bind[3];
    for (int i = 0; i < 3; i++) bind[i] = (VkDescriptorSetLayoutBinding){ .binding = (uint32_t)i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT };
    VkDescriptorSetLayoutCreateInfo dli = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 3, .pBindings = bind };
    VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &dsl));
    VkPushConstantRange pcr = { VK_SHADER_STAGE_COMPUTE_BIT, 0, 64 };
    VkPipelineLayoutCreateInfo pli = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr };
    VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, NULL, &pl));
    uint32_t spec[2] = { wg, transb };
    VkSpecializationMapEntry me[2] = { { 0, 0, 4 }, { 1, 4, 4 } };
    VkSpecializationInfo si = { 2, me, 8, spec };
    VkComputePipelineCreateInfo cpi = { .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = pl,
        .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main", .pSpecializationInfo = mma ? NULL : &si } };
    VkPipeline pipe; CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe));
    VkDescriptorPoolSize ps = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 };
    VkDescriptorPoolCreateInfo dpi = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps };
    VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
    VkDescriptorSetAllocateInfo dai = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = dp, .descriptorSetCount = 1, .pSetLayouts = &dsl };
    VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &dai, &ds));
    VkDescriptorBufferInfo dbi[3] = { { A.b, 0, VK_WHOLE_SIZE }, { B.b, 0, VK_WHOLE_SIZE }, { C.b, 0, VK_WHOLE_SIZE } };
    VkWriteDescriptorSet w[3];
    for (int i = 0; i < 3; i++) w[i] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = ds, .dstBinding = (uint32_t)i, .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &dbi[i] };
    vkUpdateDescriptorSets(dev, 3, w, 0, NULL);

    VkCommandPoolCreateInfo cpci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = qf, .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT };
    VkCommandPool cp; CK(vkCreateCommandPool(dev, &cpci, NULL, &cp));
    VkCommandBufferAllocateInfo cai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = cp, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1 };
    VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cai, &cb));
    VkQueryPoolCreateInfo qpi = { .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2 };
    VkQueryPool qpool; CK(vkCreateQueryPool(dev, &qpi, NULL, &qpool));
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    VkFence fence; CK(vkCreateFence(dev, &fci, NULL, &fence));
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT, .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT };
    /* upload */
    CK(vkBeginCommandBuffer(cb, &bi));
    VkBufferCopy ca = { 0, 0, sa }, cbb = { 0, 0, sb };
    vkCmdCopyBuffer(cb, HA.b, A.b, 1, &ca); vkCmdCopyBuffer(cb, HB.b, B.b, 1, &cbb);
    CK(vkEndCommandBuffer(cb));
    VkSubmitInfo sub = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb };
    CK(vkQueueSubmit(q, 1, &sub, fence)); CK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)); CK(vkResetFences(dev, 1, &fence));

    struct { uint64_t a, b, bias, c; uint32_t m, n, k, lda, ldb, tm, tn, gx; } pc = { A.a, B.a, 0, C.a, M, N, mma ? iters : K, K, transb ? K : N, 0, 0, 0 };
    uint32_t gx, gy;
    if (mma) { gx = groups; gy = 1; }
    else { pc.tm = (M + BM - 1) / BM; pc.tn = (N + BN - 1) / BN; uint32_t t = pc.tm * pc.tn; gx = t < 65535 ? t : 65535; gy = (t + gx - 1) / gx; pc.gx = gx; }
    double best = 1e30, tot = 0; int cnt = 0;
    for (uint32_t r = 0; r < reps + 2; r++) {
        CK(vkBeginCommandBuffer(cb, &bi));
        vkCmdResetQueryPool(cb, qpool, 0, 2);
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 64, &pc);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qpool, 0);
        vkCmdDispatch(cb, gx, gy, 1);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, 1);
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        if (r == reps + 1) { VkBufferCopy cc = { 0, 0, sc }; vkCmdCopyBuffer(cb, C.b, HC.b, 1, &cc); }
        CK(vkEndCommandBuffer(cb));
        CK(vkQueueSubmit(q, 1, &sub, fence)); CK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)); CK(vkResetFences(dev, 1, &fence));
        uint64_t ts[2]; CK(vkGetQueryPoolResults(dev, qpool, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        double us = (double)(ts[1] - ts[0]) * props.limits.timestampPeriod / 1000.0;
        if (r >= 2) { if (us < best) best = us; tot += us; cnt++; }
    }
    double flop = mma ? (double)groups * 4 * FM * FN * iters * 2.0 * 4096 * (smem ? 2 : 1) : 2.0 * M * N * K;
    double err = 0;
    if (!mma) {
        uint16_t *hc = HC.map;
        for (int s = 0; s < 64; s++) {
            uint32_t i = (uint32_t)(((uint64_t)s * 2654435761u) % M), j = (uint32_t)(((uint64_t)s * 40503u + 7) % N);
            double ref = 0, mag = 0;
            for (uint32_t k = 0; k < K; k++) {
                double av = h2f(ha[(size_t)i * K + k]), bv = transb ? h2f(hb[(size_t)j * K + k]) : h2f(hb[(size_t)k * N + j]);
                ref += av * bv; mag += fabs(av * bv);
            }
            double e = fabs(h2f(hc[(size_t)i * N + j]) - ref) / (mag + 1e-30);
            if (e > err) err = e;
        }
    }
    printf("%s %s | best %.2f us | mean %.2f us | %.1f TFLOP/s (best) | relerr %.2e\n", argv[1], argv[2], best, tot / cnt, flop / best / 1e6, err);
    return 0;
}
