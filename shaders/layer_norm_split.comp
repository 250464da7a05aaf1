#version 450
// LayerNorm forward, split form (see common/layer_norm.glsl): PARTS workgroups per row,
// each holding a slice in registers, so rows too long for one workgroup's registers
// are still read only once. Each part publishes its slice's (shift, mean offset, M2) to
// a scratch record; the parts combine them (Chan's pairwise update: sums of
// non-negative terms, no cancellation). Workgroups take row slots from a ticket
// counter in start order, so a part only waits for partners that have already started
// or start next; if a partner still does not arrive within a bounded spin, the part
// reads the whole row itself (which is why the host never runs this form in place).
//
// Record protocols (defines):
//   default            32-bit words; the writer fences between the values and the ready
//                      flag, the reader polls the flag, fences, then reads the values.
//   TAGGED_RECORDS=1   each record word is one 64-bit atomic whose high half is a tag,
//                      so a reader that sees the tag has the value: no fences and one
//                      round trip per poll (needs shaderBufferInt64Atomics).
//   SM_IDS=1           with TAGGED_RECORDS: workgroups pick their parts by the
//                      multiprocessor they run on (VK_NV_shader_sm_builtins; see
//                      "classes" below).
// The scratch is the context's and outlives the call: the tag (and the 32-bit
// protocol's flag) is the call's epoch, which the host advances at every call, so
// records left by earlier calls are never taken for this one's, and the ticket counter
// runs on from call to call (p.ticket_base). No fill has to clear it before each call.
#ifndef TAGGED_RECORDS
#define TAGGED_RECORDS 0
#endif
#ifndef SM_IDS
#define SM_IDS 0
#endif
#if SM_IDS
#if !TAGGED_RECORDS
#error "SM_IDS needs TAGGED_RECORDS"
#endif
#extension GL_NV_shader_sm_builtins : require
#endif
#if TAGGED_RECORDS
#extension GL_EXT_shader_atomic_int64 : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "common/layer_norm.glsl"

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
        VT r = ln_keep(row, idx, ln_load(p.x, row, idx) - shift);
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
#if SM_IDS
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
    // Elements in the slice: 0 only where ANY_D's last vectors lie past this row's end.
    float count = slice_count(row, first, end);

    // This slice's statistics, two-pass from registers: shift = its float32 mean.
    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        v[i] = idx < end ? ln_load(p.x, row, idx) : VT(0.0);
        s += hsum(v[i]);
    }
    float total = group_sum(vec2(s, 0.0)).x;
    float shift = count > 0.0 ? total / count : 0.0;
    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        v[i] = idx < end ? ln_keep(row, idx, v[i] - shift) : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    q = group_sum(q);
    float offset = count > 0.0 ? q.x / count : 0.0;                    // slice mean = shift + offset
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
            atomicAdd(SharedWords(p.scratch).v[1], 1u);   // fallbacks, which the tuning hook reads (return_scratch)
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
            atomicAdd(SharedWords(p.scratch).v[1], 1u);   // fallbacks, which the tuning hook reads (return_scratch)
        } else {
            records[tid] = vec3(uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 0u], 0u)),
                                uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 1u], 0u)),
                                uintBitsToFloat(atomicAdd(SharedWords(p.scratch).v[other + 2u], 0u)));
        }
    }
#endif
    barrier();
    float adjust, invstd, mean;   // y = (v + adjust) * invstd, v = x - shift
    bool rescale;                 // uniform: the statistics came out non-finite
    if (!partners_missing) {
        // Combine about part 0's shift: d_i = slice mean_i - shift_0 (small when the
        // row has a common offset, so computed without losing it).
        float base = records[0].x;
        float n_total = float(p.d);
        float delta = 0.0;
        for (uint i = 0; i < PARTS; ++i) {
            float n_i = slice_count(row, min(i * p.chunk, p.n), min((i + 1u) * p.chunk, p.n));
            delta += n_i * ((records[i].x - base) + records[i].y);
        }
        delta /= n_total;
        float m2_total = 0.0;
        for (uint i = 0; i < PARTS; ++i) {
            float n_i = slice_count(row, min(i * p.chunk, p.n), min((i + 1u) * p.chunk, p.n));
            float d = (records[i].x - base) + records[i].y - delta;
            m2_total += records[i].z + n_i * d * d;
        }
        // Every part combines the same records in the same order, so all of a row's
        // parts agree on rescale.
        rescale = !is_finite(m2_total);
        invstd = invsqrt_refined(m2_total / n_total + p.eps);
        adjust = (shift - base) - delta;
        mean = base + delta;
    } else {
        // A partner never started in time: corrected two-pass over the whole row.
        float m0 = row_sums(row, 0.0).x / float(p.d);
        vec2 sums = row_sums(row, m0);
        rescale = !is_finite(sums.y);
        vec2 st = finish_stats(sums);
        invstd = st.y;
        adjust = (shift - m0) - st.x;
        mean = m0 + st.x;
    }
    if (rescale) {
        // NaN, inf or overflow in the row (a slice's sums, or their combination): every
        // part takes the row's statistics scaled, from memory, and writes its slice.
        ScaledStats z = scaled_stats(row, tid, WG);
        for (uint idx = first + tid; idx < end; idx += WG) ln_store(row, idx, scaled_y(z, row, idx));
        if (part == 0u && tid == 0u) store_stats(row, z.mean, z.invstd);
        finish_classes();
        return;
    }
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        if (idx < end) ln_store(row, idx, fma((v[i] + adjust) * invstd, load_weight(row, idx), load_bias(row, idx)));
    }
    if (part == 0u && tid == 0u) store_stats(row, mean, invstd);
    finish_classes();
}
