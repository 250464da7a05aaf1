#version 450
// LayerNorm forward, two-stage split form (see common/layer_norm.glsl), for rows too
// long for one workgroup's registers. A row is cut into PARTS slices of p.chunk
// vectors, ITEMS vectors per thread, and x is read twice:
//   STAGE 1  each slice's record (shift, mean offset, M2; common/layer_norm_slices.glsl)
//            to the scratch (p.scratch, 4 floats per slice), one workgroup per slice;
//   STAGE 2  a second dispatch: each slice combines its row's records (Chan's pairwise
//            update, the same sums in the same order in every slice of the row, so all
//            agree), reads its slice again and writes y. Slices run in the reverse of
//            stage 1's order, so the slices stage 1 read last, which the L2 cache may
//            still hold, come first.
//   STAGE 0  both in one dispatch, pipelined: workgroups take tickets in start order;
//            ticket t computes slice t's record and publishes it as tagged 64-bit words
//            (value, epoch; the split form's layout in the context's scratch, so needs
//            shaderBufferInt64Atomics), then normalizes slice t - p.lag, whose row's
//            records were published about p.lag tickets ago. The second read of a slice
//            thus follows the first by about p.lag slices, which the L2 cache holds,
//            where the two dispatches read all of x in between. Every record a slice
//            waits for belongs to a ticket below its own (p.lag >= PARTS), taken by a
//            workgroup that has started and publishes before it waits for anything,
//            so the wait ends; should a record still be missing after p.spin_limit
//            polls, the slice computes it from x itself, as its owner does.
// No stage waits for a whole row to be resident at once (the one-dispatch split form's
// parts hold their slices in registers while they wait for all partners, a wait that
// grows with their number). Not in place: a row whose statistics come out non-finite is
// read again whole by every slice (scaled statistics) while others may have written
// theirs, and a missing record is computed from x.
#ifndef STAGE
#error "define STAGE as 0, 1 or 2"
#endif
#if STAGE == 0
#extension GL_EXT_shader_atomic_int64 : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "common/layer_norm.glsl"
#include "common/layer_norm_slices.glsl"

const uint PARTS = ROWS;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Records { vec4 v[]; };

// Loads vectors first .. end-1 of `row` (one slice) into v.
void load_slice(bool masked, out VT v[ITEMS], uint row, uint first, uint end) {
    load_items_if(masked, v, row, first + gl_LocalInvocationID.x, WG, end, true);
}

float part_count(uint row, uint k) {
    return slice_count(row, min(k * p.chunk, p.n), min((k + 1u) * p.chunk, p.n));
}

// Record k of the row whose records start at rec0 (STAGE 2: from the first dispatch's
// scratch; STAGE 0: from shared memory, gathered by gather_records).
#if STAGE == 0
shared vec3 records[PARTS];
shared bool record_missing[PARTS];
shared bool any_missing;
shared uint job_slot;
vec3 row_record(uint rec0, uint k) { return records[k]; }
#else
vec3 row_record(uint rec0, uint k) { return Records(p.scratch).v[rec0 + k].xyz; }
#endif

// Normalizes slice `part` of `row` (held in v) with the row's combined records: the
// mean's offset from slice 0's shift and the total M2, by two workgroup sums in a fixed
// order (thread k takes slices k, k + WG, ...).
void normalize_slice(bool masked, VT v[ITEMS], uint row, uint part, uint first, uint end) {
    uint tid = gl_LocalInvocationID.x;
    uint rec0 = row * PARTS;
    float base = row_record(rec0, 0u).x;
    float n_total = float(p.d);
    float wsum = 0.0;
    for (uint k = tid; k < PARTS; k += WG) {
        vec3 r = row_record(rec0, k);
        wsum += part_count(row, k) * ((r.x - base) + r.y);
    }
    float delta = group_sum(vec2(wsum, 0.0)).x / n_total;
    float msum = 0.0;
    for (uint k = tid; k < PARTS; k += WG) {
        vec3 r = row_record(rec0, k);
        float dk = (r.x - base) + r.y - delta;
        msum += r.z + part_count(row, k) * dk * dk;
    }
    float m2_total = group_sum(vec2(msum, 0.0)).x;
    if (!is_finite(m2_total)) {
        // NaN, inf or overflow in the row: every slice takes the row's statistics
        // scaled, from memory, and writes itself.
        ScaledStats z = scaled_stats(row, tid, WG);
        for (uint idx = first + tid; idx < end; idx += WG) ln_store(row, idx, scaled_y(z, row, idx));
        if (part == 0u && tid == 0u) store_stats(row, z.mean, z.invstd);
        return;
    }
    float invstd = invsqrt_refined(m2_total / n_total + p.eps);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        if (idx < end) store_if(masked, row, idx, fma(((v[i] - base) - delta) * invstd, load_weight(row, idx), load_bias(row, idx)));
    }
    if (part == 0u && tid == 0u) store_stats(row, base + delta, invstd);
}

#if STAGE == 0
layout(buffer_reference, std430, buffer_reference_align = 4) buffer SharedWords { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer TaggedWords { uint64_t v[]; };

// Record words: 8 per slice (64 bytes, so pollers of one record share no line with
// another's), after 64 bytes of counters (word 0 the ticket counter, word 1 fallbacks).
uint record_word(uint job) { return 8u + 8u * job; }

void publish_record(uint job, vec3 r) {
    // relaxed: each word carries its own readiness; a loop, as a workgroup may have fewer
    // than 3 invocations
    for (uint k = gl_LocalInvocationID.x; k < 3u; k += WG) {
        float value = k == 0u ? r.x : k == 1u ? r.y : r.z;
        atomicExchange(TaggedWords(p.scratch).v[record_word(job) + k],
                       packUint2x32(uvec2(floatBitsToUint(value), p.epoch)));
    }
}

// The row's records into `records`: polled, and any still missing after the spin limit
// computed from x (the same function of the slice as its owner's).
void gather_records(uint row) {
    uint tid = gl_LocalInvocationID.x;
    if (tid == 0u) any_missing = false;
    barrier();
    for (uint k = tid; k < PARTS; k += WG) {
        uint w = record_word(row * PARTS + k);
        uvec2 w0, w1, w2;
        uint polls = 0u;
        for (;;) {
            w0 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[w + 0u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            w1 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[w + 1u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            w2 = unpackUint2x32(atomicLoad(TaggedWords(p.scratch).v[w + 2u], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
            if ((w0.y == p.epoch && w1.y == p.epoch && w2.y == p.epoch) || polls >= p.spin_limit) break;
            ++polls;
        }
        bool missing = w0.y != p.epoch || w1.y != p.epoch || w2.y != p.epoch;
        record_missing[k] = missing;
        if (missing) {
            any_missing = true;
            atomicAdd(SharedWords(p.scratch).v[1], 1u);   // fallbacks, which the tuning hook reads (return_scratch)
        } else {
            records[k] = vec3(uintBitsToFloat(w0.x), uintBitsToFloat(w1.x), uintBitsToFloat(w2.x));
        }
    }
    barrier();
    if (any_missing) {   // uniform
        for (uint k = 0u; k < PARTS; ++k) {
            if (!record_missing[k]) continue;   // uniform
            vec3 r = slice_record_from_memory(row, k * p.chunk, min(k * p.chunk + p.chunk, p.n));
            if (tid == 0u) records[k] = r;
        }
        barrier();
    }
}
#endif

// Slice [first, end) of `row` loaded, then its record taken or it normalized: each side of
// one uniform branch with a literal `masked` (see slice_whole), so each compiles to its own
// code and a slice wholly inside its row runs none of the masked code.
vec3 record_slice(uint row, uint first, uint end) {
    VT v[ITEMS];
    if (slice_whole(row, first, end)) {
        load_slice(false, v, row, first, end);
        return slice_record_if(false, v, row, first, end);
    }
    load_slice(true, v, row, first, end);
    return slice_record_if(true, v, row, first, end);
}
void load_and_normalize(uint row, uint part, uint first, uint end) {
    VT v[ITEMS];
    if (slice_whole(row, first, end)) {
        load_slice(false, v, row, first, end);
        normalize_slice(false, v, row, part, first, end);
    } else {
        load_slice(true, v, row, first, end);
        normalize_slice(true, v, row, part, first, end);
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint jobs = p.rows * PARTS;   // the host keeps this (plus p.lag at STAGE 0) within 32 bits
#if STAGE == 0
    if (tid == 0u) job_slot = atomicAdd(SharedWords(p.scratch).v[0], 1u) - p.ticket_base;
    barrier();
    uint ticket = job_slot;
    if (ticket >= jobs + p.lag) return;   // uniform: never, unless the grid is padded
    if (ticket < jobs) {
        uint row = ticket / PARTS, part = ticket % PARTS;
        uint first = part * p.chunk, end = min(first + p.chunk, p.n);
        publish_record(ticket, record_slice(row, first, end));
    }
    if (ticket < p.lag) return;   // uniform
    uint job = ticket - p.lag;
    uint row = job / PARTS, part = job % PARTS;
    uint first = part * p.chunk, end = min(first + p.chunk, p.n);
    gather_records(row);
    load_and_normalize(row, part, first, end);
#else
    uint job = group_index();
    if (job >= jobs) return;      // uniform: grid padding
#if STAGE == 2
    job = jobs - 1u - job;
#endif
    uint row = job / PARTS, part = job % PARTS;
    uint first = part * p.chunk;
    uint end = min(first + p.chunk, p.n);
#if STAGE == 1
    vec3 r = record_slice(row, first, end);
    if (tid == 0u) Records(p.scratch).v[job] = vec4(r, 0.0);
#else
    load_and_normalize(row, part, first, end);
#endif
#endif
}
