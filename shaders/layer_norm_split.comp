#version 450
// LayerNorm forward, split form (see common/layer_norm.glsl): PARTS workgroups per row,
// each holding a slice in registers, so rows too long for one workgroup's registers
// are still read only once. Each part publishes its slice's (shift, mean offset, M2) to
// a scratch record; the parts combine them (Chan's pairwise update: sums of
// non-negative terms, no cancellation). Workgroups take row slots from a ticket
// counter in start order, so a part only waits for partners that have already started
// or start next; if a partner still does not arrive within a bounded spin, the part
// computes that partner's record itself from x (which is why the host never runs this
// form in place), exactly as the partner does (see SLICE_RECORD).
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
#include "common/layer_norm_slices.glsl"

layout(buffer_reference, std430, buffer_reference_align = 4) buffer SharedWords { uint v[]; };
#if TAGGED_RECORDS
layout(buffer_reference, std430, buffer_reference_align = 8) buffer TaggedWords { uint64_t v[]; };
#endif
const uint PARTS = ROWS;
shared uint job_slot;
shared vec3 records[PARTS];     // (shift, mean offset, M2) of each part
shared bool partners_missing;
shared bool record_missing[PARTS];   // partner k had not published in time

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
    // This slice's statistics, two-pass from registers.
    VT v[ITEMS];
    load_items(v, row, first + tid, WG, end, true);
    vec3 own = slice_record(v, row, first, end);
    float shift = own.x;

#if TAGGED_RECORDS
    // Record words as (value, tag = epoch) in 64 bits; threads 0..2 publish one word each
    // (a loop: a workgroup may have fewer than 3). Relaxed atomics suffice: each word
    // carries its own readiness.
    uint rec = 8u + 8u * (row * PARTS + part);
    for (uint k = tid; k < 3u; k += WG) {
        float value = k == 0u ? own.x : k == 1u ? own.y : own.z;
        atomicExchange(TaggedWords(p.scratch).v[rec + k], packUint2x32(uvec2(floatBitsToUint(value), p.epoch)));
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
        bool missing = w0.y != p.epoch || w1.y != p.epoch || w2.y != p.epoch;
        record_missing[tid] = missing;
        if (missing) {
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
        atomicExchange(SharedWords(p.scratch).v[rec + 0u], floatBitsToUint(own.x));
        atomicExchange(SharedWords(p.scratch).v[rec + 1u], floatBitsToUint(own.y));
        atomicExchange(SharedWords(p.scratch).v[rec + 2u], floatBitsToUint(own.z));
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
        bool missing = atomicAdd(SharedWords(p.scratch).v[other + 3u], 0u) != p.epoch;
        record_missing[tid] = missing;
        if (missing) {
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
    if (partners_missing) {   // uniform
        // A partner never started in time: this part takes the missing records itself,
        // each from its slice in memory, exactly as the partner computes it.
        for (uint k = 0u; k < PARTS; ++k) {
            if (!record_missing[k]) continue;   // uniform
            vec3 r = slice_record_from_memory(row, k * p.chunk, min(k * p.chunk + p.chunk, p.n));
            if (tid == 0u) records[k] = r;
        }
        barrier();
    }
    // Combine about part 0's shift: d_i = slice mean_i - shift_0 (small when the row has
    // a common offset, so computed without losing it). Every part combines the same
    // records in the same order, so all of a row's parts agree on the statistics and on
    // rescale.
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
    bool rescale = !is_finite(m2_total);   // uniform: NaN, inf or overflow in the row
    float invstd = invsqrt_refined(m2_total / n_total + p.eps);
    float adjust = (shift - base) - delta;   // y = ((x - shift) + adjust) * invstd
    float mean = base + delta;
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
        if (idx < end) ln_store(row, idx, fma(((v[i] - shift) + adjust) * invstd, load_weight(row, idx), load_bias(row, idx)));
    }
    if (part == 0u && tid == 0u) store_stats(row, mean, invstd);
    finish_classes();
}
