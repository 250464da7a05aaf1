#version 450
// LayerNorm forward: y = (x - mean) * invstd * weight + bias over the last dimension,
// saving mean and invstd per row (what backward needs).
//
// Built in three forms (MODE) and two widths (VEC = 4: vec4 loads, rows a multiple of 4;
// VEC = 1: any D):
//   MODE_GROUP:     one workgroup per row; the row is read once into registers (ITEMS
//                   vectors per thread), reduced with subgroupAdd plus one shared-memory
//                   step, the variance taken from the registers (two-pass, exact), then y
//                   written. Memory traffic: x read once, y written once.
//   MODE_SUBGROUP:  one subgroup per row, ROWS rows per workgroup; for short rows.
//   MODE_STREAM:    one workgroup per row, row too long for registers: ITEMS vectors per
//                   thread stay in registers, the rest is read again in each of the three
//                   passes (sum, deviations, write); the same exact statistics.
//   MODE_ROW:       one invocation per row, three passes over it (sum, deviations,
//                   write) from the cache: no barriers and no subgroup operations, which
//                   a CPU device (lavapipe) pays dearly for; wrong for a GPU, whose
//                   lanes would then read far-apart addresses.
//   MODE_SPLIT:     PARTS workgroups per row, each holding a slice in registers, so rows
//                   too long for one workgroup's registers are still read only once. Each
//                   part publishes its slice's (shift, mean offset, M2) to a scratch
//                   record; the parts combine them (Chan's pairwise update: sums of
//                   non-negative terms, no cancellation). Workgroups take row slots from
//                   a ticket counter in start order, so a part only waits for partners
//                   that have already started or start next; if a partner still does not
//                   arrive within a bounded spin, the part reads the whole row itself.
//                   MODE_SPLIT64 publishes each record word as one 64-bit atomic whose
//                   high half is a tag, so a reader that sees the tag has the value: no
//                   fences and one round trip per poll, where the 32-bit protocol needs
//                   a fence on each side, a flag and a second read.
//                   The scratch is the context's and outlives the call: the tag (and
//                   the 32-bit protocol's flag) is the call's epoch, which the host
//                   advances at every call, so records left by earlier calls are never
//                   taken for this one's, and the ticket counter runs on from call to
//                   call (p.ticket_base). No fill has to clear it before each call.
// Rows past maxComputeWorkGroupCount[0] arrive on a 2-D grid (groups_x wide).
// Reading all of a row before writing it makes out == x (in place) safe in every mode.
//
// Numerics (corrected two-pass): m0 = sum(x)/D in float32 is off from the true mean by
// its rounding error, which for rows with a large common offset (1e4 + noise) is far
// bigger than the noise's own precision. So the second pass takes r = x - m0 (exact
// when x is near m0), and c = sum(r)/D recovers the lost part: mean = m0 + c,
// var = sum(r^2)/D - c^2 (c is tiny, so this subtracts nothing large), and
// y = (r - c) * invstd. Never E[x^2] - E[x]^2 on raw x.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#if defined(MODE_SPLIT64SM)
// MODE_SPLIT64 whose workgroups pick their parts by the multiprocessor they run on
// (VK_NV_shader_sm_builtins): see "classes" below.
#define MODE_SPLIT64
#define SM_IDS 1
#extension GL_NV_shader_sm_builtins : require
#endif
#if defined(MODE_SPLIT64)
// The split form with 64-bit atomics (devices with shaderBufferInt64Atomics): see below.
#define MODE_SPLIT
#define TAGGED_RECORDS 1
#extension GL_EXT_shader_atomic_int64 : require
#extension GL_KHR_memory_scope_semantics : require
#else
#define TAGGED_RECORDS 0
#endif
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ITEMS = 1;   // vectors per thread held in registers
layout(constant_id = 2) const uint ROWS = 1;    // rows per workgroup (MODE_SUBGROUP);
                                                // workgroups per row (MODE_SPLIT)

float hsum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#if VEC == 4
#define VT vec4
#define ROW_ARRAY Vec4Array
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#else
#define VT float
#define ROW_ARRAY FloatArray
float hsum(float v) { return v; }
#endif

layout(push_constant) uniform Params {
    uint64_t x, y, weight, bias, mean, invstd;   // device addresses (0 = absent)
    uint rows;       // number of rows
    uint n;          // vectors per row (D / VEC)
    uint d;          // elements per row
    float eps;
    uint groups_x;   // width of the dispatch grid, for 2-D folding
    uint pad0;
    uint64_t scratch;   // MODE_SPLIT: ticket counter, then one uvec4 record per part
    uint chunk;         // MODE_SPLIT: vectors per part
    uint spin_limit;    // MODE_SPLIT: polls before a part stops waiting for its partners
    uint tickets;       // MODE_SPLIT: 1: rows taken from a counter in start order
    uint epoch;         // MODE_SPLIT: this call's nonzero ready tag (see below)
    uint ticket_base;   // MODE_SPLIT: the ticket counter's value when this call starts
    uint classes;       // MODE_SPLIT: > 1: parts picked by multiprocessor class (see below)
    uint class_jobs;    // MODE_SPLIT: jobs per class (rows * parts / classes)
    uint launched;      // MODE_SPLIT: workgroups in the grid
} p;

const uint WG = gl_WorkGroupSize.x;
shared vec2 partials[WG];

// 1/sqrt(a) to within about an ulp: inversesqrt is only 2-ulp accurate in Vulkan, and
// one Newton step squares its error away.
float invsqrt_refined(float a) {
    float r = inversesqrt(a);
    return r * (1.5 - 0.5 * a * r * r);
}

uint group_index() { return gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x; }

// A macro, not a function: a function returning a buffer reference leaves an
// undecorated variable behind where spirv-opt skips the module (see MODE_SPLIT).
#define row_ptr(base, row) ROW_ARRAY((base) + uint64_t(row) * uint64_t(p.d) * 4ul)

// weight and bias are only read, and never alias y (the host refuses that), so they are
// declared readonly restrict (no change measured on the H200, 2026-12-02).
#if VEC == 4
layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer ParamArray { vec4 v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer ParamArray { float v[]; };
#endif
VT load_weight(uint idx) {
    return p.weight != 0ul ? ParamArray(p.weight).v[idx] : VT(1.0);
}
VT load_bias(uint idx) {
    return p.bias != 0ul ? ParamArray(p.bias).v[idx] : VT(0.0);
}

// From sum(r) and sum(r^2) of r = x - m0: the correction c and invstd.
vec2 finish_stats(vec2 sums) {
    float c = sums.x / float(p.d);
    float var = max(sums.y / float(p.d) - c * c, 0.0);
    return vec2(c, invsqrt_refined(var + p.eps));
}

void store_stats(uint row, float mean, float invstd) {
    FloatArray(p.mean).v[row] = mean;
    FloatArray(p.invstd).v[row] = invstd;
}

#if defined(MODE_GROUP) || defined(MODE_STREAM) || defined(MODE_SPLIT)
// Sum over the workgroup, for any subgroup size: every thread adds the per-subgroup
// partials in the same order, so all threads see the identical result.
vec2 group_sum(vec2 v) {
    vec2 s = subgroupAdd(v);
    if (subgroupElect()) partials[gl_SubgroupID] = s;
    barrier();
    vec2 t = vec2(0.0);
    for (uint i = 0; i < gl_NumSubgroups; ++i) t += partials[i];
    barrier();
    return t;
}
#endif

#if defined(MODE_GROUP)
void main() {
    uint row = group_index();
    if (row >= p.rows) return;   // uniform over the workgroup
    uint tid = gl_LocalInvocationID.x;
    ROW_ARRAY xr = row_ptr(p.x, row);

    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? xr.v[idx] : VT(0.0);
        s += hsum(v[i]);
    }
    float m0 = group_sum(vec2(s, 0.0)).x / float(p.d);

    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? v[i] - m0 : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    vec2 st = finish_stats(group_sum(q));

    ROW_ARRAY yr = row_ptr(p.y, row);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) yr.v[idx] = fma((v[i] - st.x) * st.y, load_weight(idx), load_bias(idx));
    }
    if (tid == 0) store_stats(row, m0 + st.x, st.y);
}
#elif defined(MODE_SUBGROUP)
void main() {
    uint first = group_index() * ROWS;
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    // ITEMS is sized for the device's smallest subgroup, so any actual size covers a row.
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
        uint row = first + r;
        if (row >= p.rows) break;   // uniform over the subgroup
        ROW_ARRAY xr = row_ptr(p.x, row);
        VT v[ITEMS];
        float s = 0.0;
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            v[i] = idx < p.n ? xr.v[idx] : VT(0.0);
            s += hsum(v[i]);
        }
        float m0 = subgroupAdd(s) / float(p.d);
        vec2 q = vec2(0.0);
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            v[i] = idx < p.n ? v[i] - m0 : VT(0.0);
            q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
        }
        vec2 st = finish_stats(subgroupAdd(q));
        ROW_ARRAY yr = row_ptr(p.y, row);
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            if (idx < p.n) yr.v[idx] = fma((v[i] - st.x) * st.y, load_weight(idx), load_bias(idx));
        }
        if (subgroupElect()) store_stats(row, m0 + st.x, st.y);
    }
}
#elif defined(MODE_STREAM)
// The first WG * ITEMS vectors of the row stay in registers; the rest is read from
// memory in each pass (where a recently read row mostly comes from L2).
void main() {
    uint row = group_index();
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x;
    ROW_ARRAY xr = row_ptr(p.x, row);
    const uint held = WG * ITEMS;

    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? xr.v[idx] : VT(0.0);
        s += hsum(v[i]);
    }
    for (uint idx = held + tid; idx < p.n; idx += WG) s += hsum(xr.v[idx]);
    float m0 = group_sum(vec2(s, 0.0)).x / float(p.d);

    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? v[i] - m0 : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    for (uint idx = held + tid; idx < p.n; idx += WG) {
        VT r = xr.v[idx] - m0;
        q += vec2(hsum(r), hsum(r * r));
    }
    vec2 st = finish_stats(group_sum(q));

    ROW_ARRAY yr = row_ptr(p.y, row);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) yr.v[idx] = fma((v[i] - st.x) * st.y, load_weight(idx), load_bias(idx));
    }
    for (uint idx = held + tid; idx < p.n; idx += WG)
        yr.v[idx] = fma((xr.v[idx] - m0 - st.x) * st.y, load_weight(idx), load_bias(idx));
    if (tid == 0) store_stats(row, m0 + st.x, st.y);
}
#elif defined(MODE_ROW)
// Sums of x - shift and of its square over the row: four accumulators per lane (vec4
// components, or four scalars), each summing blocks of ROW_BLOCK vectors first, so the
// rounding stays near a tree's rather than growing with the row length.
// llvmpipe stops an invocation's loops after 65535 iterations in all (and computes
// garbage), so the host uses this form only for rows of at most LN_ROW_MAX_VECTORS.
const uint ROW_BLOCK = 64u;
void row_sums(ROW_ARRAY xr, float shift, out vec4 q1, out vec4 q2) {
    q1 = vec4(0.0); q2 = vec4(0.0);
#if VEC == 4
    for (uint b = 0u; b < p.n; b += ROW_BLOCK) {
        vec4 b1 = vec4(0.0), b2 = vec4(0.0);
        for (uint i = b; i < min(b + ROW_BLOCK, p.n); ++i) { vec4 r = xr.v[i] - shift; b1 += r; b2 += r * r; }
        q1 += b1; q2 += b2;
    }
#else
    uint n4 = p.n & ~3u;
    for (uint b = 0u; b < n4; b += 4u * ROW_BLOCK) {
        vec4 b1 = vec4(0.0), b2 = vec4(0.0);
        for (uint i = b; i < min(b + 4u * ROW_BLOCK, n4); i += 4u) {
            vec4 r = vec4(xr.v[i], xr.v[i + 1u], xr.v[i + 2u], xr.v[i + 3u]) - shift;
            b1 += r; b2 += r * r;
        }
        q1 += b1; q2 += b2;
    }
    for (uint i = n4; i < p.n; ++i) { float r = xr.v[i] - shift; q1.x += r; q2.x += r * r; }
#endif
}

void main() {
    uint row = group_index() * WG + gl_LocalInvocationID.x;
    if (row >= p.rows) return;
    ROW_ARRAY xr = row_ptr(p.x, row);
    vec4 q1, q2;
    row_sums(xr, 0.0, q1, q2);
    float m0 = hsum4(q1) / float(p.d);
    row_sums(xr, m0, q1, q2);
    vec2 st = finish_stats(vec2(hsum4(q1), hsum4(q2)));
    ROW_ARRAY yr = row_ptr(p.y, row);
    for (uint i = 0u; i < p.n; ++i)
        yr.v[i] = fma((xr.v[i] - m0 - st.x) * st.y, load_weight(i), load_bias(i));
    store_stats(row, m0 + st.x, st.y);
}
#elif defined(MODE_SPLIT)
layout(buffer_reference, std430, buffer_reference_align = 4) buffer SharedWords { uint v[]; };
#if TAGGED_RECORDS
layout(buffer_reference, std430, buffer_reference_align = 8) buffer TaggedWords { uint64_t v[]; };
#endif
const uint PARTS = ROWS;
shared uint job_slot;
shared vec3 records[PARTS];     // (shift, mean offset, M2) of each part
shared bool partners_missing;

// Sums of (x - shift) and (x - shift)^2 over the whole row, read from memory.
// In this form no variable holds a buffer reference: glslang leaves such variables
// without the AliasedPointer decoration, which spirv-val requires once spirv-opt skips
// the module (it does for GL_NV_shader_sm_builtins) and so leaves them in.
vec2 row_sums(uint row, float shift) {
    vec2 q = vec2(0.0);
    for (uint idx = gl_LocalInvocationID.x; idx < p.n; idx += WG) {
        VT r = row_ptr(p.x, row).v[idx] - shift;
        q += vec2(hsum(r), hsum(r * r));
    }
    return group_sum(q);
}

// Classes (p.classes > 1): a row's parts are dealt to `classes` classes (part k to
// class k % classes), and a workgroup takes its jobs from the class of the
// multiprocessor it runs on, in row order. The workgroups resident on one
// multiprocessor then share a few slices of weight and bias, which can stay in its L1
// instead of being read from L2 again by every part (a part reads twice its x bytes in
// weight and bias). A class whose jobs are all taken sends its workgroups on
// to the next class, so every job is taken whatever the placement. Counters: scratch
// words 3.. (one per class); word 2 counts finished workgroups, and the last one resets
// them all for the next call.
#if defined(SM_IDS)
uint sm_index() { return gl_SMIDNV; }
#else
// A stand-in where SM ids are missing (specs): skewed (class 0 gets twice its share of
// workgroups) so that classes run out and send workgroups on to the next.
uint sm_index() { return group_index() % (p.classes + 1u); }
#endif
const uint NO_JOB = 0xffffffffu;

uint take_class_job() {
    uint c0 = sm_index() % p.classes;
    for (uint k = 0u; k < p.classes; ++k) {
        uint c = (c0 + k) % p.classes;
        uint t = atomicAdd(SharedWords(p.scratch).v[3u + c], 1u);
        if (t < p.class_jobs) return c * p.class_jobs + t;
    }
    return NO_JOB;
}

// Every workgroup calls this once on its way out when classes are on.
void finish_classes() {
    if (p.classes > 1u && gl_LocalInvocationID.x == 0u &&
        atomicAdd(SharedWords(p.scratch).v[2], 1u) == p.launched - 1u) {
        for (uint c = 0u; c < p.classes; ++c) atomicExchange(SharedWords(p.scratch).v[3u + c], 0u);
        atomicExchange(SharedWords(p.scratch).v[2], 0u);
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint row, part;
    if (p.classes > 1u) {
        if (tid == 0) job_slot = take_class_job();
        barrier();
        uint job = job_slot;
        if (job == NO_JOB) { finish_classes(); return; }   // uniform: all taken
        uint c = job / p.class_jobs, t = job % p.class_jobs;
        uint per_row = PARTS / p.classes;   // this class's parts of each row
        row = t / per_row;
        part = c + p.classes * (t % per_row);
    } else {
        uint job;
        if (p.tickets != 0u) {
            if (tid == 0) job_slot = atomicAdd(SharedWords(p.scratch).v[0], 1u) - p.ticket_base;
            barrier();
            job = job_slot;
        } else {
            job = group_index();   // devices that start workgroups in index order
        }
        row = job / PARTS; part = job % PARTS;
        if (row >= p.rows) return;   // uniform: grid padding
    }
    uint first = part * p.chunk;
    uint end = min(first + p.chunk, p.n);
    float count = float(end - first) * float(VEC);

    // This slice's statistics, two-pass from registers: shift = its float32 mean.
    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        v[i] = idx < end ? row_ptr(p.x, row).v[idx] : VT(0.0);
        s += hsum(v[i]);
    }
    float shift = group_sum(vec2(s, 0.0)).x / count;
    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        v[i] = idx < end ? v[i] - shift : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    q = group_sum(q);
    float offset = q.x / count;                    // slice mean = shift + offset
    float m2 = max(q.y - q.x * offset, 0.0);       // sum of squared deviations

#if TAGGED_RECORDS
    // Record words as (value, tag = epoch) in 64 bits; threads 0..2 publish one word each.
    // Relaxed atomics suffice: each word carries its own readiness.
    uint rec = 8u + 8u * (row * PARTS + part);
    if (tid < 3u) {
        float value = tid == 0u ? shift : tid == 1u ? offset : m2;
        atomicExchange(TaggedWords(p.scratch).v[rec + tid], packUint2x32(uvec2(floatBitsToUint(value), p.epoch)));
    }
    if (tid == 0u) partners_missing = false;
    barrier();
    // Thread i waits for part i of this row.
    if (tid < PARTS) {
        uint other = 8u + 8u * (row * PARTS + tid);
        uvec2 w0, w1, w2;
        uint polls = 0u;
        for (;;) {
            w0 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[other + 0u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            w1 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[other + 1u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            w2 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[other + 2u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            if ((w0.y == p.epoch && w1.y == p.epoch && w2.y == p.epoch) || polls >= p.spin_limit) break;
            ++polls;
        }
        if (w0.y != p.epoch || w1.y != p.epoch || w2.y != p.epoch) {
            partners_missing = true;
            atomicAdd(SharedWords(p.scratch).v[1], 1u);   // fallbacks, for tuning (_layer_norm_config's return_scratch)
        } else {
            records[tid] = vec3(uintBitsToFloat(w0.x), uintBitsToFloat(w1.x), uintBitsToFloat(w2.x));
        }
    }
#else
    // Publish: the record's words, then (after a buffer barrier) its ready flag. A record
    // is 16 words (64 bytes), so pollers of one record do not share a line with others.
    uint rec = 16u + 16u * (row * PARTS + part);
    // Every access to the scratch is atomic: atomics are coherent at device scope,
    // where plain (even volatile) loads may be served from a stale cache line.
    if (tid == 0) {
        atomicExchange(SharedWords(p.scratch).v[rec + 0u], floatBitsToUint(shift));
        atomicExchange(SharedWords(p.scratch).v[rec + 1u], floatBitsToUint(offset));
        atomicExchange(SharedWords(p.scratch).v[rec + 2u], floatBitsToUint(m2));
        memoryBarrierBuffer();
        atomicExchange(SharedWords(p.scratch).v[rec + 3u], p.epoch);
        partners_missing = false;
    }
    barrier();
    // Thread i waits for part i of this row.
    if (tid < PARTS) {
        uint other = 16u + 16u * (row * PARTS + tid);
        uint polls = 0u;
        while (atomicAdd(SharedWords(p.scratch).v[other + 3u], 0u) != p.epoch && polls < p.spin_limit) ++polls;
        memoryBarrierBuffer();
        if (atomicAdd(SharedWords(p.scratch).v[other + 3u], 0u) != p.epoch) {
            partners_missing = true;
            atomicAdd(SharedWords(p.scratch).v[1], 1u);   // fallbacks, for tuning (_layer_norm_config's return_scratch)
        } else {
            records[tid] = vec3(uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 0u], 0u)),
                                uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 1u], 0u)),
                                uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 2u], 0u)));
        }
    }
#endif
    barrier();
    float adjust, invstd, mean;   // y = (v + adjust) * invstd, v = x - shift
    if (!partners_missing) {
        // Combine about part 0's shift: d_i = slice mean_i - shift_0 (small when the
        // row has a common offset, so computed without losing it).
        float base = records[0].x;
        float n_total = float(p.d);
        float delta = 0.0;
        for (uint i = 0; i < PARTS; ++i) {
            float n_i = float(min((i + 1u) * p.chunk, p.n) - min(i * p.chunk, p.n)) * float(VEC);
            delta += n_i * ((records[i].x - base) + records[i].y);
        }
        delta /= n_total;
        float m2_total = 0.0;
        for (uint i = 0; i < PARTS; ++i) {
            float n_i = float(min((i + 1u) * p.chunk, p.n) - min(i * p.chunk, p.n)) * float(VEC);
            float d = (records[i].x - base) + records[i].y - delta;
            m2_total += records[i].z + n_i * d * d;
        }
        invstd = invsqrt_refined(m2_total / n_total + p.eps);
        adjust = (shift - base) - delta;
        mean = base + delta;
    } else {
        // A partner never started in time: corrected two-pass over the whole row.
        float m0 = row_sums(row, 0.0).x / float(p.d);
        vec2 st = finish_stats(row_sums(row, m0));
        invstd = st.y;
        adjust = (shift - m0) - st.x;
        mean = m0 + st.x;
    }
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        if (idx < end) row_ptr(p.y, row).v[idx] = fma((v[i] + adjust) * invstd, load_weight(idx), load_bias(idx));
    }
    if (part == 0u && tid == 0u) store_stats(row, mean, invstd);
    finish_classes();
}
#else
#error "define MODE_GROUP, MODE_SUBGROUP, MODE_STREAM, MODE_ROW, MODE_SPLIT, MODE_SPLIT64 or MODE_SPLIT64SM"
#endif
