#version 450
// LayerNorm backward over the last dimension (src/ops/layer_norm_backward.c plans it).
// With g = dy * weight and xhat = (x - mean) * invstd (mean, invstd saved by forward):
//   dx      = invstd * (g - sum(g)/D - xhat * sum(g * xhat)/D)     per row
//   dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy   per column
// No float atomics: the column sums are two-stage. Stage 1 (the fused or apply stage):
// workgroup-group j sums its fixed block of rows, in row order, into partial row j of
// the scratch; stage 2 (REDUCE) adds the partial rows of each column in a fixed order.
// The same plan gives the same order, so the results are identical run to run.
//
// STAGE selects the kernel, one SPIR-V variant each (shaders/variants.def):
//   FUSED   rows that fit in registers: a workgroup owns a block of rows and reads each
//           row once (x, dy), K rows at a time (one reduction for the K), writes dx and
//           keeps the column partials in registers across its rows;
//   STATS   long rows, step 1: a workgroup per row streams it for sum(g), sum(g*xhat);
//   APPLY   long rows, step 2: a thread per column vector and block of rows writes dx
//           and sums its column's partials;
//   ROWS    short rows: a row per segment of SEG lanes of a subgroup (sums by shuffles,
//           no barrier per row); the workgroup's segments share its block of rows and
//           its partial row;
//   REDUCE  stage 2: partial rows into dweight and dbias;
//   SPLIT   long rows on a GPU with 64-bit atomics: PARTS workgroups per row, each
//           holding a slice in registers, exchange their slices' sums (below);
//   QUAD    rows of D % 4 != 0 as FUSED, four rows at a time as one row of aligned
//           vec4s (below).
// Non-finite values propagate as PyTorch's: a NaN or inf in a row makes its sums, hence
// all of its dx, NaN; a column's dweight/dbias takes NaN from any NaN in it (and the
// whole dweight from a row whose statistics are NaN).
#if STAGE == 6
#extension GL_EXT_shader_atomic_int64 : require
#endif
#if STAGE == 1 || STAGE == 5 || STAGE == 6 || STAGE == 7
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common/buffers.glsl"

#define STAGE_FUSED 1
#define STAGE_STATS 2
#define STAGE_APPLY 3
#define STAGE_REDUCE 4
#define STAGE_ROWS 5
#define STAGE_SPLIT 6
#define STAGE_QUAD 7

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ITEMS = 1;   // FUSED: vectors per thread of each row;
                                                // REDUCE: partial rows loaded at once
layout(constant_id = 2) const uint K = 1;       // FUSED, APPLY: rows in flight at once (1..4)
layout(constant_id = 3) const uint PREFETCH = 0; // FUSED: 1 loads the next K rows early
layout(constant_id = 4) const uint SEG = 1;     // ROWS: lanes per row, a power of two that
                                                // divides the subgroup size
layout(constant_id = 5) const uint PARTS = 1;   // SPLIT: workgroups (slices) per row

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
    uint64_t x, dy, dx, weight, mean, invstd;   // device addresses (weight 0: absent)
    uint64_t partial;    // 2 * groups rows of d floats: dweight's partial rows, then dbias's
                         // (0: no weight, no column sums)
    uint64_t stats;      // STATS: (sum g, sum g * xhat) per slice of a row; SPLIT: the
                         // split LayerNorm scratch (src/ops/split_scratch.c); FUSED,
                         // ROWS, QUAD: the folded reduce's counters (0: REDUCE runs)
    uint64_t dweight, dbias;
    uint rows;           // rows of x
    uint n;              // vectors per row (d / VEC)
    uint d;              // elements per row
    uint rows_per_group; // rows of a partial row's block
    uint groups;         // partial rows (blocks of rows)
    uint groups_x;       // width of the dispatch grid, for 2-D folding
    uint col_blocks;     // APPLY: workgroups across a row; REDUCE: across d
    uint stat_parts;     // STATS: slices per row (workgroups), each its own pair of sums
    uint chunk;          // SPLIT: vectors per slice; folded reduce: workgroups per team
    uint epoch;          // SPLIT: this call's record tag (stats: the split scratch)
    uint spin_limit;     // SPLIT: polls for a partner's record before computing it
    uint fold;           // REDUCE: rows per partial row (4 after QUAD, else 1)
} p;

const uint WG = gl_WorkGroupSize.x;

// A macro, not a function: a function returning a buffer reference leaves an
// undecorated variable that spirv-opt refuses (as in common/layer_norm.glsl).
#define row_ptr(base, row) ROW_ARRAY((base) + uint64_t(row) * uint64_t(p.d) * 4ul)

#if VEC == 4
layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer ParamArray { vec4 v[]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer ParamArray { float v[]; };
#endif
VT load_weight(uint idx) { return p.weight != 0ul ? ParamArray(p.weight).v[idx] : VT(1.0); }

uint group_index() { return gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x; }
float row_mean(uint row) { return FloatArray(p.mean).v[row]; }
float row_invstd(uint row) { return FloatArray(p.invstd).v[row]; }

// Sums of a and b over the workgroup, for any subgroup size. Every subgroup adds the
// per-subgroup partials by the same steps (lane i takes partials i, i + size, ..., then
// a subgroupAdd), so every thread sees the same, reproducible result, and a thread reads
// a few partials instead of all of them.
shared vec4 red_a[WG];
shared vec4 red_b[WG];
void group_sum2(inout vec4 a, inout vec4 b) {
    vec4 sa = subgroupAdd(a), sb = subgroupAdd(b);
    if (subgroupElect()) { red_a[gl_SubgroupID] = sa; red_b[gl_SubgroupID] = sb; }
    barrier();
    vec4 ta = vec4(0.0), tb = vec4(0.0);
    for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) { ta += red_a[i]; tb += red_b[i]; }
    a = subgroupAdd(ta);
    b = subgroupAdd(tb);
    barrier();
}

#if STAGE == STAGE_FUSED || STAGE == STAGE_ROWS || STAGE == STAGE_QUAD
// The reduce stage folded into this dispatch (p.stats != 0: counter words, zero between
// calls). Workgroups form teams of p.chunk in group order; each counts itself in on its
// team's word once its partial row is written, and the one that completes the count
// adds the team's partial rows, in group order, into the team's first row and counts the
// team in on the last word; the team that completes that adds the teams' rows, in team
// order (and a quad row's four parts in order), into dweight and dbias. Every order is
// fixed by the plan, not by which workgroup ends last, so the bits are reproducible; no
// workgroup waits for another (the last of each count does the work), so nothing can
// hang whatever the scheduling.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer CoherentFloats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };   // counters; partial floats as bits for atomic loads
shared bool fold_last;
const uint FOLD_COLS = 4;    // columns a thread adds at once
const uint FOLD_TERMS = 8;   // ... and terms of each loaded at once: 32 loads in flight

// For q = 0 .. 2w-1 (half q / w: dweight's partial rows, then dbias's; column c = q % w)
// the sum over i = 0 .. n-1 and f = 0 .. nf-1, in that order, of the partial word
// half * groups * rw + (first + i * step) * rw + f * d + c (rw: words per partial row),
// into the same word of row `first` (outputs false) or into dweight/dbias[c]. Loads are
// relaxed device-scope atomic loads, which read device-coherent memory: other workgroups
// wrote these rows in this dispatch, and a plain load may hit a line this multiprocessor
// cached before they did (the split stage reads its neighbours' words the same way).
void fold_sum(uint first, uint step, uint n, uint nf, uint w, bool outputs) {
    uint64_t rw = uint64_t(p.d) * uint64_t(p.fold);
    uint64_t half_words = uint64_t(p.groups) * rw;
    uint terms = n * nf;
    for (uint q0 = gl_LocalInvocationID.x; q0 < 2u * w; q0 += WG * FOLD_COLS) {
        float acc[FOLD_COLS];
        uint64_t at[FOLD_COLS];
        for (uint cc = 0; cc < FOLD_COLS; ++cc) {
            uint q = min(q0 + cc * WG, 2u * w - 1u);
            acc[cc] = 0.0;
            at[cc] = uint64_t(q / w) * half_words + uint64_t(first) * rw + uint64_t(q % w);
        }
        for (uint k0 = 0; k0 < terms; k0 += FOLD_TERMS) {
            float v[FOLD_COLS * FOLD_TERMS];
            for (uint cc = 0; cc < FOLD_COLS; ++cc)
                for (uint u = 0; u < FOLD_TERMS; ++u) {
                    uint k = k0 + u;
                    v[cc * FOLD_TERMS + u] = 0.0;
                    if (k < terms && q0 + cc * WG < 2u * w) {
                        uint64_t off = at[cc] + uint64_t(k / nf) * uint64_t(step) * rw + uint64_t(k % nf) * uint64_t(p.d);
                        v[cc * FOLD_TERMS + u] = uintBitsToFloat(atomicLoad(Words(p.partial + off * 4ul).v[0],
                                                     gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
                    }
                }
            for (uint cc = 0; cc < FOLD_COLS; ++cc)
                for (uint u = 0; u < FOLD_TERMS; ++u)
                    if (k0 + u < terms) acc[cc] += v[cc * FOLD_TERMS + u];
        }
        for (uint cc = 0; cc < FOLD_COLS; ++cc) {
            uint q = q0 + cc * WG;
            if (q >= 2u * w) break;
            if (outputs) FloatArray(q < w ? p.dweight : p.dbias).v[q % w] = acc[cc];
            else CoherentFloats(p.partial + at[cc] * 4ul).v[0] = acc[cc];
        }
    }
}

// Whether this workgroup completed the count on word `word` of `total` (and set it back
// to 0 for the next call). Its writes reach device scope before its count does.
bool count_in(uint word, uint total) {
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
        fold_last = atomicAdd(Words(p.stats).v[word], 1u) == total - 1u;
        if (fold_last) atomicExchange(Words(p.stats).v[word], 0u);
    }
    barrier();
    bool last = fold_last;
    barrier();   // fold_last is read by all before it is written again
    if (last) memoryBarrierBuffer();
    return last;
}

// Called by every workgroup after it wrote partial row grp (uniform).
void fold_reduce(uint grp) {
    uint team_size = p.chunk;
    uint teams = (p.groups + team_size - 1u) / team_size;
    uint team = grp / team_size;
    uint members = min(team_size, p.groups - team * team_size);
    if (!count_in(team, members)) return;
    fold_sum(team * team_size, 1u, members, 1u, p.d * p.fold, false);
    if (!count_in(teams, teams)) return;
    fold_sum(0u, team_size, teams, p.fold, p.d, true);
}
#endif

#if STAGE == STAGE_FUSED
// The K rows from r0 on (rows past r1 and vectors past the row read as 0) into XS, GS
// (x and dy), MS, RSV (mean, invstd).
#define LOAD_ROWS(R0, XS, GS, MS, RSV)                                                  \
    for (uint k = 0; k < K; ++k) {                                                      \
        bool live = (R0) + k < r1;                                                      \
        MS[k] = live ? row_mean((R0) + k) : 0.0;                                        \
        RSV[k] = live ? row_invstd((R0) + k) : 0.0;                                     \
        for (uint i = 0; i < ITEMS; ++i) {                                              \
            uint idx = tid + i * WG;                                                    \
            bool in_row = live && idx < p.n;                                            \
            XS[k * ITEMS + i] = in_row ? row_ptr(p.x, (R0) + k).v[idx] : VT(0.0);       \
            GS[k * ITEMS + i] = in_row ? row_ptr(p.dy, (R0) + k).v[idx] : VT(0.0);      \
        }                                                                               \
    }

void main() {
    uint grp = group_index();
    if (grp >= p.groups) return;   // uniform over the workgroup
    uint tid = gl_LocalInvocationID.x;
    uint r0 = grp * p.rows_per_group;
    uint r1 = min(r0 + p.rows_per_group, p.rows);
    bool sums = p.partial != 0ul;
    float inv_d = 1.0 / float(p.d);

    VT w[ITEMS], acc_w[ITEMS], acc_b[ITEMS];
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        w[i] = idx < p.n ? load_weight(idx) : VT(0.0);
        acc_w[i] = VT(0.0);
        acc_b[i] = VT(0.0);
    }
    // With PREFETCH the next K rows' loads are issued before this K's reduction and
    // stores, so they overlap (twice the registers).
    VT xh[K * ITEMS], g[K * ITEMS], xn[K * ITEMS], gn[K * ITEMS];
    float m[K], rs[K], mn[K], rn[K];
    if (PREFETCH != 0) LOAD_ROWS(r0, xn, gn, mn, rn)
    for (uint r = r0; r < r1; r += K) {
        if (PREFETCH != 0) {
            for (uint j = 0; j < K * ITEMS; ++j) { xh[j] = xn[j]; g[j] = gn[j]; }
            for (uint k = 0; k < K; ++k) { m[k] = mn[k]; rs[k] = rn[k]; }
            LOAD_ROWS(r + K, xn, gn, mn, rn)
        } else {
            // every load of the K rows first, then the arithmetic: K rows in flight
            LOAD_ROWS(r, xh, g, m, rs)
        }
        vec4 sa = vec4(0.0), sb = vec4(0.0);
        for (uint k = 0; k < K; ++k) {
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = tid + i * WG;
                uint j = k * ITEMS + i;
                // Padding (outside the row, rows past the block) stays 0 and adds 0.
                xh[j] = r + k < r1 && idx < p.n ? (xh[j] - m[k]) * rs[k] : VT(0.0);
                if (sums) { acc_w[i] += g[j] * xh[j]; acc_b[i] += g[j]; }
                g[j] *= w[i];
                sa[k] += hsum(g[j]);
                sb[k] += hsum(g[j] * xh[j]);
            }
        }
        group_sum2(sa, sb);
        for (uint k = 0; k < K; ++k) {
            if (r + k >= r1) break;
            float ma = sa[k] * inv_d, mb = sb[k] * inv_d;
            ROW_ARRAY dxr = row_ptr(p.dx, r + k);
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = tid + i * WG;
                uint j = k * ITEMS + i;
                if (idx < p.n) dxr.v[idx] = rs[k] * ((g[j] - ma) - xh[j] * mb);
            }
        }
    }
    if (!sums) return;
    uint64_t half_bytes = uint64_t(p.groups) * uint64_t(p.d) * 4ul;
    ROW_ARRAY pw = row_ptr(p.partial, grp);
    ROW_ARRAY pb = row_ptr(p.partial + half_bytes, grp);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) { pw.v[idx] = acc_w[i]; pb.v[idx] = acc_b[i]; }
    }
    if (p.stats != 0ul) fold_reduce(grp);
}

#elif STAGE == STAGE_STATS
// A workgroup per slice of a row (p.stat_parts slices of ceil(n / stat_parts) vectors),
// so that few long rows still spread over the device; APPLY adds a row's pairs in slice
// order.
void main() {
    uint job = group_index();
    uint row = job / p.stat_parts, slice = job % p.stat_parts;
    if (row >= p.rows) return;   // uniform
    uint tid = gl_LocalInvocationID.x;
    float m = row_mean(row), rs = row_invstd(row);
    ROW_ARRAY xr = row_ptr(p.x, row);
    ROW_ARRAY dyr = row_ptr(p.dy, row);
    uint chunk = (p.n + p.stat_parts - 1u) / p.stat_parts;
    uint end = min((slice + 1u) * chunk, p.n);
    VT a = VT(0.0), b = VT(0.0);
    for (uint idx = slice * chunk + tid; idx < end; idx += WG) {
        VT gv = dyr.v[idx] * load_weight(idx);
        a += gv;
        b += gv * ((xr.v[idx] - m) * rs);
    }
    vec4 sa = vec4(hsum(a), 0.0, 0.0, 0.0), sb = vec4(hsum(b), 0.0, 0.0, 0.0);
    group_sum2(sa, sb);
    if (tid == 0) {
        FloatArray(p.stats).v[2u * job] = sa.x;
        FloatArray(p.stats).v[2u * job + 1u] = sb.x;
    }
}

#elif STAGE == STAGE_APPLY
void main() {
    uint job = group_index();
    uint grp = job / p.col_blocks;
    if (grp >= p.groups) return;
    uint idx = (job % p.col_blocks) * WG + gl_LocalInvocationID.x;
    if (idx >= p.n) return;   // no barriers in this stage
    uint r0 = grp * p.rows_per_group;
    uint r1 = min(r0 + p.rows_per_group, p.rows);
    bool sums = p.partial != 0ul;
    float inv_d = 1.0 / float(p.d);
    VT w = load_weight(idx);
    VT acc_w = VT(0.0), acc_b = VT(0.0);
    for (uint r = r0; r < r1; r += K) {
        VT xv[K], dyv[K];
        for (uint k = 0; k < K; ++k) {
            bool live = r + k < r1;
            xv[k] = live ? row_ptr(p.x, r + k).v[idx] : VT(0.0);
            dyv[k] = live ? row_ptr(p.dy, r + k).v[idx] : VT(0.0);
        }
        for (uint k = 0; k < K; ++k) {
            if (r + k >= r1) break;
            uint row = r + k;
            float rs = row_invstd(row);
            VT xh = (xv[k] - row_mean(row)) * rs;
            uint at = 2u * row * p.stat_parts;
            float sa = FloatArray(p.stats).v[at], sb = FloatArray(p.stats).v[at + 1u];
            for (uint s = 1u; s < p.stat_parts; ++s) {
                sa += FloatArray(p.stats).v[at + 2u * s];
                sb += FloatArray(p.stats).v[at + 2u * s + 1u];
            }
            float ma = sa * inv_d, mb = sb * inv_d;
            row_ptr(p.dx, row).v[idx] = rs * ((dyv[k] * w - ma) - xh * mb);
            if (sums) { acc_w += dyv[k] * xh; acc_b += dyv[k]; }
        }
    }
    if (!sums) return;
    uint64_t half_bytes = uint64_t(p.groups) * uint64_t(p.d) * 4ul;
    row_ptr(p.partial, grp).v[idx] = acc_w;
    row_ptr(p.partial + half_bytes, grp).v[idx] = acc_b;
}

#elif STAGE == STAGE_REDUCE
// WG = COLS columns x (WG / COLS) slices: slice s adds partial rows s, s + S, s + 2S, ...
// in order (each p.fold rows of d, column c at c, c + d, ...); the slices' sums then meet
// in slice order. Columns are floats (any d). A thread issues ITEMS of its loads before
// adding them (in the same order), so they wait one memory latency, not ITEMS.
const uint COLS = 32;
const uint SLICES = WG / COLS;
shared vec2 slice_sum[WG];
void main() {
    uint tid = gl_LocalInvocationID.x;
    uint c = tid % COLS, s = tid / COLS;
    uint col = group_index() * COLS + c;
    bool live = group_index() < p.col_blocks && col < p.d;   // uniform but for the last block
    uint64_t row_words = uint64_t(p.d) * uint64_t(p.fold);
    uint64_t half_bytes = uint64_t(p.groups) * row_words * 4ul;
    // the thread's terms: q = 0 .. count-1 is partial row s + (q / fold) * SLICES, part q % fold
    uint count = live && s < p.groups ? ((p.groups - 1 - s) / SLICES + 1) * p.fold : 0;
    vec2 t = vec2(0.0);
    for (uint q0 = 0; q0 < count; q0 += ITEMS) {
        vec2 v[ITEMS];
        for (uint u = 0; u < ITEMS; ++u) {
            uint q = q0 + u;
            uint j = s + (q / p.fold) * SLICES, f = q % p.fold;
            uint64_t off = (uint64_t(j) * row_words + uint64_t(f) * uint64_t(p.d) + col) * 4ul;
            v[u] = vec2(0.0);
            if (q < count) v[u] = vec2(FloatArray(p.partial + off).v[0], FloatArray(p.partial + half_bytes + off).v[0]);
        }
        for (uint u = 0; u < ITEMS; ++u)
            if (q0 + u < count) t += v[u];
    }
    slice_sum[tid] = t;
    barrier();
    if (s == 0 && live) {
        vec2 total = vec2(0.0);
        for (uint i = 0; i < SLICES; ++i) total += slice_sum[i * COLS + c];
        FloatArray(p.dweight).v[col] = total.x;
        FloatArray(p.dbias).v[col] = total.y;
    }
}
#elif STAGE == STAGE_ROWS
// Segment `seg` of the workgroup (SEG lanes of one subgroup) takes rows r0 + seg,
// r0 + seg + segs, ... of the block, K at a time; lane l holds vectors l, l + SEG, ...
// of a row. A row's sums meet by a butterfly of shuffles within the segment: each step
// adds a pair in both lanes, and float addition commutes, so all lanes get the same bits.
// At the end the segments' column partials meet in a fixed order: by the same butterfly
// across the segments of a subgroup, then subgroup after subgroup in shared memory.
shared VT col_w[SEG * ITEMS];
shared VT col_b[SEG * ITEMS];

void main() {
    uint grp = group_index();
    if (grp >= p.groups) return;   // uniform over the workgroup
    uint lane = gl_SubgroupInvocationID % SEG;
    uint seg = (gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID) / SEG;
    uint segs = WG / SEG;
    uint r0 = grp * p.rows_per_group;
    uint r1 = min(r0 + p.rows_per_group, p.rows);
    bool sums = p.partial != 0ul;
    float inv_d = 1.0 / float(p.d);

    VT w[ITEMS], acc_w[ITEMS], acc_b[ITEMS];
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * SEG;
        w[i] = idx < p.n ? load_weight(idx) : VT(0.0);
        acc_w[i] = VT(0.0);
        acc_b[i] = VT(0.0);
    }
    for (uint base = r0; base < r1; base += segs * K) {   // uniform trip count
        VT xh[K * ITEMS], g[K * ITEMS];
        float m[K], rs[K];
        for (uint k = 0; k < K; ++k) {
            uint row = base + k * segs + seg;
            bool live = row < r1;
            m[k] = live ? row_mean(row) : 0.0;
            rs[k] = live ? row_invstd(row) : 0.0;
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = lane + i * SEG;
                bool in_row = live && idx < p.n;
                xh[k * ITEMS + i] = in_row ? row_ptr(p.x, row).v[idx] : VT(0.0);
                g[k * ITEMS + i] = in_row ? row_ptr(p.dy, row).v[idx] : VT(0.0);
            }
        }
        vec4 sa = vec4(0.0), sb = vec4(0.0);
        for (uint k = 0; k < K; ++k) {
            bool live = base + k * segs + seg < r1;
            for (uint i = 0; i < ITEMS; ++i) {
                uint j = k * ITEMS + i;
                // Padding (outside the row, rows past the block) stays 0 and adds 0.
                xh[j] = live && lane + i * SEG < p.n ? (xh[j] - m[k]) * rs[k] : VT(0.0);
                if (sums) { acc_w[i] += g[j] * xh[j]; acc_b[i] += g[j]; }
                g[j] *= w[i];
                sa[k] += hsum(g[j]);
                sb[k] += hsum(g[j] * xh[j]);
            }
        }
        for (uint o = 1; o < SEG; o <<= 1) {
            sa += subgroupShuffleXor(sa, o);
            sb += subgroupShuffleXor(sb, o);
        }
        for (uint k = 0; k < K; ++k) {
            uint row = base + k * segs + seg;
            if (row >= r1) continue;
            float ma = sa[k] * inv_d, mb = sb[k] * inv_d;
            ROW_ARRAY dxr = row_ptr(p.dx, row);
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = lane + i * SEG;
                uint j = k * ITEMS + i;
                if (idx < p.n) dxr.v[idx] = rs[k] * ((g[j] - ma) - xh[j] * mb);
            }
        }
    }
    if (!sums) return;   // uniform
    for (uint o = SEG; o < gl_SubgroupSize; o <<= 1)
        for (uint i = 0; i < ITEMS; ++i) {
            acc_w[i] += subgroupShuffleXor(acc_w[i], o);
            acc_b[i] += subgroupShuffleXor(acc_b[i], o);
        }
    for (uint s = 0; s < gl_NumSubgroups; ++s) {
        if (gl_SubgroupID == s && gl_SubgroupInvocationID < SEG)
            for (uint i = 0; i < ITEMS; ++i) {
                uint c = lane + i * SEG;
                col_w[c] = s == 0 ? acc_w[i] : col_w[c] + acc_w[i];
                col_b[c] = s == 0 ? acc_b[i] : col_b[c] + acc_b[i];
            }
        barrier();
    }
    uint64_t half_bytes = uint64_t(p.groups) * uint64_t(p.d) * 4ul;
    ROW_ARRAY pw = row_ptr(p.partial, grp);
    ROW_ARRAY pb = row_ptr(p.partial + half_bytes, grp);
    for (uint c = gl_LocalInvocationID.x; c < p.n; c += WG) { pw.v[c] = col_w[c]; pb.v[c] = col_b[c]; }
    if (p.stats != 0ul) fold_reduce(grp);
}

#elif STAGE == STAGE_SPLIT
// Workgroup slot * PARTS + part holds slice `part` (p.chunk vectors, ITEMS per thread) of
// rows slot, slot + slots, ... (slots = p.groups), one row at a time, so its column
// partials and weight stay in registers and its partial row is slot's. All slots * PARTS
// workgroups are meant to be resident at once (the host launches at most one per
// multiprocessor). For each row a part publishes its slice's (sum g, sum g * xhat) as
// two 64-bit words tagged with the call's epoch (the split LayerNorm scratch, record
// row * PARTS + part, 64 bytes each), thread i polls for part i's record, and every part
// adds the PARTS records in order 0..PARTS-1, so all of a row's parts agree. A record
// still missing after p.spin_limit polls (a partner that is not resident) is computed
// from memory by slice_sums, the same steps its owner takes, so the result does not
// depend on which happened. Not in place: a fallback reads a partner's x and dy while
// that partner may be writing its dx.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer SharedWords { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer TaggedWords { uint64_t v[]; };
shared vec2 records[PARTS];
shared bool record_missing[PARTS];
shared bool partners_missing;
// Record (row, part): 64 bytes after the scratch's first 64 (counters).
#define record(row, part) TaggedWords(p.stats + 64ul * (1ul + uint64_t(row) * uint64_t(PARTS) + uint64_t(part)))

// Vectors first + tid, first + tid + WG, ... below end of `row` (0 past it).
void load_slice(uint row, uint first, uint end, out VT xs[ITEMS], out VT dys[ITEMS]) {
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + gl_LocalInvocationID.x + i * WG;
        xs[i] = idx < end ? row_ptr(p.x, row).v[idx] : VT(0.0);
        dys[i] = idx < end ? row_ptr(p.dy, row).v[idx] : VT(0.0);
    }
}
void load_weights(uint first, uint end, out VT ws[ITEMS]) {
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + gl_LocalInvocationID.x + i * WG;
        ws[i] = idx < end ? load_weight(idx) : VT(0.0);
    }
}

// A slice's (sum g, sum g * xhat) over the workgroup. `precise`: the owner and a part
// computing a missing record run these steps at two call sites and must get the same
// bits (no contraction into fma at one and not the other). Padding is 0 and adds 0.
vec2 slice_sums(VT xs[ITEMS], VT dys[ITEMS], VT ws[ITEMS], float m, float rs) {
    precise VT a = VT(0.0), b = VT(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        precise VT g = dys[i] * ws[i];
        precise VT xh = (xs[i] - m) * rs;
        a += g;
        b += g * xh;
    }
    vec4 sa = vec4(hsum(a), 0.0, 0.0, 0.0), sb = vec4(hsum(b), 0.0, 0.0, 0.0);
    group_sum2(sa, sb);
    return vec2(sa.x, sb.x);
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint job = group_index();
    uint slots = p.groups;
    uint slot = job / PARTS, part = job % PARTS;
    if (slot >= slots) return;   // uniform: grid padding
    uint first = part * p.chunk;
    uint end = min(first + p.chunk, p.n);
    bool sums = p.partial != 0ul;
    float inv_d = 1.0 / float(p.d);

    VT w[ITEMS], acc_w[ITEMS], acc_b[ITEMS];
    load_weights(first, end, w);
    for (uint i = 0; i < ITEMS; ++i) { acc_w[i] = VT(0.0); acc_b[i] = VT(0.0); }
    // With PREFETCH the next row's slice is loaded while this row's records are
    // exchanged (twice the registers for the slice).
    VT xs[ITEMS], dys[ITEMS], xn[ITEMS], dyn[ITEMS];
    if (PREFETCH != 0 && slot < p.rows) load_slice(slot, first, end, xn, dyn);
    for (uint row = slot; row < p.rows; row += slots) {
        if (PREFETCH != 0) {
            for (uint i = 0; i < ITEMS; ++i) { xs[i] = xn[i]; dys[i] = dyn[i]; }
            if (row + slots < p.rows) load_slice(row + slots, first, end, xn, dyn);
        } else {
            load_slice(row, first, end, xs, dys);
        }
        float m = row_mean(row), rs = row_invstd(row);
        vec2 own = slice_sums(xs, dys, w, m, rs);
        // Threads 0 and 1 publish a word each; relaxed atomics suffice, as each word
        // carries its own tag.
        if (tid < 2u)
            atomicExchange(record(row, part).v[tid], packUint2x32(uvec2(floatBitsToUint(own[tid]), p.epoch)));
        if (tid == 0u) partners_missing = false;
        barrier();
        if (tid < PARTS) {
            TaggedWords other = record(row, tid);
            uvec2 w0, w1;
            uint polls = 0u;
            for (;;) {
                w0 = unpackUint2x32(atomicLoad(other.v[0], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
                w1 = unpackUint2x32(atomicLoad(other.v[1], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed));
                if ((w0.y == p.epoch && w1.y == p.epoch) || polls >= p.spin_limit) break;
                ++polls;
            }
            bool missing = w0.y != p.epoch || w1.y != p.epoch;
            record_missing[tid] = missing;
            if (missing) {
                partners_missing = true;
                atomicAdd(SharedWords(p.stats).v[1], 1u);   // fallbacks, for the specs
            } else {
                records[tid] = vec2(uintBitsToFloat(w0.x), uintBitsToFloat(w1.x));
            }
        }
        barrier();
        if (partners_missing) {   // uniform
            for (uint k = 0u; k < PARTS; ++k) {
                if (!record_missing[k]) continue;   // uniform
                uint kf = k * p.chunk, ke = min(kf + p.chunk, p.n);
                VT kx[ITEMS], kdy[ITEMS], kw[ITEMS];
                load_slice(row, kf, ke, kx, kdy);
                load_weights(kf, ke, kw);
                vec2 r = slice_sums(kx, kdy, kw, m, rs);
                if (tid == 0u) records[k] = r;
            }
            barrier();
        }
        float ta = 0.0, tb = 0.0;
        for (uint k = 0u; k < PARTS; ++k) { ta += records[k].x; tb += records[k].y; }
        float ma = ta * inv_d, mb = tb * inv_d;
        ROW_ARRAY dxr = row_ptr(p.dx, row);
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = first + tid + i * WG;
            if (idx >= end) continue;
            VT xh = (xs[i] - m) * rs;
            dxr.v[idx] = rs * ((dys[i] * w[i] - ma) - xh * mb);
            if (sums) { acc_w[i] += dys[i] * xh; acc_b[i] += dys[i]; }
        }
        // records[] and partners_missing are next written after slice_sums's barriers,
        // which every thread reaches only once done reading them here.
    }
    if (!sums) return;
    uint64_t half_bytes = uint64_t(p.groups) * uint64_t(p.d) * 4ul;
    ROW_ARRAY pw = row_ptr(p.partial, slot);
    ROW_ARRAY pb = row_ptr(p.partial + half_bytes, slot);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        if (idx < end) { pw.v[idx] = acc_w[i]; pb.v[idx] = acc_b[i]; }
    }
}

#elif STAGE == STAGE_QUAD
// Rows of D % 4 != 0 (D >= 4), four at a time: rows 4q..4q+3 are 4D floats from a
// 16-byte boundary (x, dy and dx are plain tensors), a quad row of D aligned vec4s, and
// vector idx holds the same (row of the quad, column) in every quad: its lanes below
// cut[i] lie in quad row rq[i], the rest in rq[i] + 1 (D >= 4: a vector spans at most
// two rows). So a thread keeps its lanes' weight and column partials in registers across
// the block's quads (p.rows_per_group quads), and the four rows' sums meet in one
// workgroup reduction per quad. The partial row is a quad row (4D floats), which REDUCE
// folds (p.fold = 4). The last quad may hold fewer rows: lanes past x's end read as 0
// (the loads stay inside x's last 16-byte block), and its last vector is stored per
// element.
float weight_at(uint col) { return p.weight != 0ul ? FloatArray(p.weight).v[col] : 1.0; }

void main() {
    uint grp = group_index();
    if (grp >= p.groups) return;   // uniform over the workgroup
    uint tid = gl_LocalInvocationID.x;
    uint quads = (p.rows + 3u) / 4u;
    uint q0 = grp * p.rows_per_group;
    uint q1 = min(q0 + p.rows_per_group, quads);
    bool sums = p.partial != 0ul;
    float inv_d = 1.0 / float(p.d);
    const uvec4 LANE = uvec4(0u, 1u, 2u, 3u);

    vec4 w[ITEMS], acc_w[ITEMS], acc_b[ITEMS];
    uint rq[ITEMS], cut[ITEMS];
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        uint e = 4u * idx;
        rq[i] = min(e / p.d, 3u);
        cut[i] = min((rq[i] + 1u) * p.d - min(e, (rq[i] + 1u) * p.d), 4u);
        w[i] = vec4(0.0);
        if (idx < p.n)
            for (uint l = 0; l < 4u; ++l) {
                uint row_of_lane = rq[i] + (l < cut[i] ? 0u : 1u);
                w[i][l] = weight_at(e + l - row_of_lane * p.d);
            }
        acc_w[i] = vec4(0.0);
        acc_b[i] = vec4(0.0);
    }
    for (uint q = q0; q < q1; ++q) {
        uint live_rows = min(4u, p.rows - 4u * q);   // uniform
        uint live_elems = live_rows * p.d;
        vec4 m4 = vec4(0.0), r4 = vec4(0.0);
        for (uint k = 0; k < live_rows; ++k) { m4[k] = row_mean(4u * q + k); r4[k] = row_invstd(4u * q + k); }
        uint64_t base = uint64_t(q) * uint64_t(p.d) * 16ul;
        vec4 xs[ITEMS], g[ITEMS];
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = tid + i * WG;
            bool in_quad = idx < p.n && 4u * idx < live_elems;
            xs[i] = in_quad ? Vec4Array(p.x + base).v[idx] : vec4(0.0);
            g[i] = in_quad ? Vec4Array(p.dy + base).v[idx] : vec4(0.0);
        }
        vec4 sa = vec4(0.0), sb = vec4(0.0);
        vec4 mv[ITEMS], rv[ITEMS];
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = tid + i * WG;
            bvec4 lo = lessThan(LANE, uvec4(cut[i]));
            if (live_rows < 4u) {   // uniform: lanes past x's last row read as 0
                bvec4 keep = lessThan(4u * idx + LANE, uvec4(live_elems));
                xs[i] = mix(vec4(0.0), xs[i], keep);
                g[i] = mix(vec4(0.0), g[i], keep);
            }
            uint hi_row = min(rq[i] + 1u, 3u);
            mv[i] = mix(vec4(m4[hi_row]), vec4(m4[rq[i]]), lo);
            rv[i] = mix(vec4(r4[hi_row]), vec4(r4[rq[i]]), lo);
            // Padding (lanes of rows past x, vectors past the quad) stays 0 and adds 0.
            vec4 xh = (xs[i] - mv[i]) * rv[i];
            xs[i] = xh;
            if (sums) { acc_w[i] += g[i] * xh; acc_b[i] += g[i]; }
            g[i] *= w[i];
            // Each row's lanes selected, not weighted by 0 (a NaN in one row stays there).
            vec4 gx = g[i] * xh;
            sa[rq[i]] += hsum(mix(vec4(0.0), g[i], lo));
            sb[rq[i]] += hsum(mix(vec4(0.0), gx, lo));
            sa[hi_row] += hsum(mix(g[i], vec4(0.0), lo));
            sb[hi_row] += hsum(mix(gx, vec4(0.0), lo));
        }
        group_sum2(sa, sb);
        vec4 ma = sa * inv_d, mb = sb * inv_d;
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = tid + i * WG;
            if (idx >= p.n || 4u * idx >= live_elems) continue;
            bvec4 lo = lessThan(LANE, uvec4(cut[i]));
            uint hi_row = min(rq[i] + 1u, 3u);
            vec4 mav = mix(vec4(ma[hi_row]), vec4(ma[rq[i]]), lo);
            vec4 mbv = mix(vec4(mb[hi_row]), vec4(mb[rq[i]]), lo);
            vec4 dxv = rv[i] * ((g[i] - mav) - xs[i] * mbv);
            if (4u * idx + 4u <= live_elems) {
                Vec4Array(p.dx + base).v[idx] = dxv;
            } else {   // the last vector of a quad of fewer rows: its elements inside x only
                for (uint l = 0; l < 4u; ++l)
                    if (4u * idx + l < live_elems) FloatArray(p.dx + base).v[4u * idx + l] = dxv[l];
            }
        }
    }
    if (!sums) return;
    uint64_t half_bytes = uint64_t(p.groups) * uint64_t(p.d) * 16ul;
    uint64_t mine = uint64_t(grp) * uint64_t(p.d) * 16ul;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) {
            Vec4Array(p.partial + mine).v[idx] = acc_w[i];
            Vec4Array(p.partial + half_bytes + mine).v[idx] = acc_b[i];
        }
    }
    if (p.stats != 0ul) fold_reduce(grp);
}

#else
#error "define STAGE"
#endif
