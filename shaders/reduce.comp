#version 450
#extension GL_EXT_control_flow_attributes : require
#ifdef ROWS_SG
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
// Reductions over one dimension of a tensor read as [outer, r, inner] (row-major): sum
// (and mean), var, max and min with their indices (OP). The reduced dimension is the
// middle one; inner == 1 is a reduction over the last dimension (or over everything).
//
// Layout of the work: the columns (o, c), flattened as q = o * inner + c, are taken COLS
// at a time by a workgroup, with one chunk of r (a split); its WG threads are COLS
// columns by LANES = WG / COLS lanes. Thread (column, lane) walks rows lane,
// lane + LANES, ... of its chunk, so each step of the COLS threads of a lane reads COLS
// adjacent elements when inner >= COLS, and for inner == 1 the lanes of a column read
// adjacent elements (4 per load when VEC == 4, 8 halves when VEC == 8), COLS short
// rows per workgroup. The lanes of a
// column then meet in a fixed tree in shared memory. When the grid would be
// too small for the device, r is split into chunks (splits > 1): each chunk's state is
// written (STATE_OUT), then reduced over the splits into the result (combine_states),
// either by a second dispatch (STATE_IN) or (STATE_LAST) in the same one by whichever
// workgroup of a column group finishes last: each counts itself in on the group's
// counter word after writing its states, and the one that completes the count reads
// them all and sets the word back to 0 (the host keeps the counters zero between calls;
// a dependent dispatch costs microseconds on a GPU). Every order is fixed by the shape,
// not by which workgroup ends last: results are deterministic.
//
// ROWS_SG (inner == 1, full subgroups): a column's LANES lanes are instead consecutive
// positions of the workgroup's subgroups, so each load of a subgroup reads one stretch of
// a row, and the lanes within a subgroup meet by shuffles (a fixed butterfly) before the
// subgroups' states meet in shared memory.
//
// States: sum  a = compensated sum (b its negated low part while a thread adds);
//         var  a = mean, b = sum of squared deviations, i = count (Welford; lanes and
//              splits combine by Chan's formula);
//         max/min  a = value, i = its index along r (0-based; EMPTY when none yet).
// Sum accuracy: per-thread Kahan summation, then a tree; a
// thread whose compensated sum is not finite (an inf entry, overflow: the compensation
// is then inf - inf) adds its share again plainly, so +-inf entries and overflow give
// +-inf, inf with -inf or any NaN gives NaN, as PyTorch.
// max/min as PyTorch: NaN counts as beyond every number (max, min and both indices pick
// the first NaN); ties go to the lowest index.
#include "common/buffers.glsl"
#include "common/reduce_io.glsl"

#define OP_SUM 0
#define OP_VAR 1
#define OP_MAX 2
#define OP_MIN 3

#define STATE_IN 1u
#define STATE_OUT 2u
#define STATE_LAST 4u

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;   // columns per workgroup, a power of two dividing WG
layout(constant_id = 2) const uint TILE_ITEMS = 1;   // TILE: 16-byte units per thread staged
const uint WG = gl_WorkGroupSize.x;
const uint LANES = WG / COLS;
const uint EMPTY = 0xffffffffu;
const uint UNROLL = 4;   // loads in flight per thread

layout(buffer_reference, std430, buffer_reference_align = 4) buffer WordArray { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer IntArray { int v[]; };

layout(push_constant) uniform Params {
    uint64_t x;          // input elements (unread by a STATE_IN dispatch)
    uint64_t y;          // values out (0: none)
    uint64_t idx;        // int32 1-based indices out (max/min; 0: none)
    uint64_t states;     // STATE_OUT, STATE_IN: 3 words per (column, split)
    uint64_t counters;   // STATE_LAST: a word per column group, 0 between dispatches
    uint outer, r, inner;
    uint chunk;          // rows of r per split (in units of VEC elements, as r is); TILE:
                         // rows (of x's outer) per workgroup, r being one chunk
    uint splits;
    uint flags;
    float divisor;       // sum: 1; mean: the count; var: max(0, count - correction)
    uint col_groups;     // ceil(outer * inner / COLS)
    uint groups_x;       // width of the grid, for 2-D folding
    uint row_elems;      // MASKED: elements per row (r then counts the most units a row spans)
} p;

#ifdef TILE
#define CHUNK p.r
#else
#define CHUNK p.chunk
#endif

struct St { float a; float b; uint i; };

bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }

// max/min: does (v, i) win over (w, j)?
bool beats(float v, uint i, float w, uint j) {
    if (i == EMPTY) return false;
    if (j == EMPTY) return true;
    bool nv = is_nan(v), nw = is_nan(w);
    if (nv || nw) return nv && (!nw || i < j);
#if OP == OP_MAX
    if (v != w) return v > w;
#else
    if (v != w) return v < w;
#endif
    return i < j;
}

St identity() {
#if OP == OP_MAX || OP == OP_MIN
    return St(0.0, 0.0, EMPTY);
#else
    return St(0.0, 0.0, 0u);
#endif
}

#if OP == OP_MAX
#define BEYOND(v, w) ((v) > (w))
#else
#define BEYOND(v, w) ((v) < (w))
#endif

// sum: one element v into a thread's compensated sum; var: Welford's update (max, min:
// take_slots below).
void take(inout St s, float v, uint i) {
#if OP == OP_VAR
    s.i += 1u;
    float d = v - s.a;
    s.a += d / float(s.i);
    s.b += d * (v - s.a);
#else
    precise float yv = v - s.b;
    precise float t = s.a + yv;
    precise float c = (t - s.a) - yv;
    s.b = c;
    s.a = t;
#endif
}

// Another state o into s (sums: finished values, added plainly).
void merge(inout St s, St o) {
#if OP == OP_SUM
    s.a += o.a;
#elif OP == OP_VAR
    if (o.i == 0u) return;
    if (s.i == 0u) { s = o; return; }
    float n = float(s.i) + float(o.i);
    float fo = float(o.i) / n;
    float d = o.a - s.a;
    s.a += d * fo;
    s.b += o.b + d * d * float(s.i) * fo;
    s.i += o.i;
#else
    if (beats(o.a, o.i, s.a, s.i)) s = o;
#endif
}

// A chunk's state, by atomics: they read device-coherent memory, where a plain load may
// hit a line this multiprocessor cached before another workgroup wrote the state
// (STATE_LAST: adjacent column groups' states share cache lines).
St load_state(uint64_t at) {
    WordArray w = WordArray(p.states + at * 12ul);
    return St(uintBitsToFloat(atomicAdd(w.v[0], 0u)), uintBitsToFloat(atomicAdd(w.v[1], 0u)), atomicAdd(w.v[2], 0u));
}

// Four elements at indices r4 * 4 + k into a thread's state.
void take_vec4(inout St s, vec4 u, uint r4) {
    for (uint k = 0; k < 4; ++k) take(s, u[k], r4 * 4 + k);
}

#if VEC == 8
// 16-bit dtypes: 8 elements (one 16-byte load) per unit, as the columns of a mat2x4.
#define VT mat2x4
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Word4Array { uvec4 v[]; };
#if DT == 1
vec4 halves(uint a, uint b) { return vec4(unpackHalf2x16(a), unpackHalf2x16(b)); }
#else
vec4 halves(uint a, uint b) {
    return uintBitsToFloat(uvec4(a << 16, a & 0xffff0000u, b << 16, b & 0xffff0000u));
}
#endif
uvec4 load_words(uint64_t at) { return Word4Array(p.x + at * 16ul).v[0]; }
VT words_unit(uvec4 w) { return VT(halves(w.x, w.y), halves(w.z, w.w)); }
VT load_unit(uint64_t at) { return words_unit(load_words(at)); }
#if OP == OP_MAX || OP == OP_MIN
// Whether any of the 8 values in w is a NaN, on the bits: a 16-bit value's magnitude
// bits plus NAN_ADD carry into its top bit exactly when they exceed inf's (float16 0x7c00,
// bfloat16 0x7f80); no carry crosses into the other half. Cheaper than testing the
// converted floats (4 adds and ors against 8 ands and 8 maxes).
#if DT == 1
const uint NAN_ADD = 0x03ff03ffu;
#else
const uint NAN_ADD = 0x007f007fu;
#endif
bool words_have_nan(uvec4 w) {
    uvec4 t = (w & uvec4(0x7fff7fffu)) + uvec4(NAN_ADD);
    return (((t.x | t.y) | (t.z | t.w)) & 0x80008000u) != 0u;
}
#endif
void take_unit(inout St s, VT u, uint r) {
    take_vec4(s, u[0], r * 2);
    take_vec4(s, u[1], r * 2 + 1);
}
float unit_sum(VT u) { vec4 h = u[0] + u[1]; return (h.x + h.y) + (h.z + h.w); }
#elif VEC == 4
#define VT vec4
#if DT == 1
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Half4Array { f16vec4 v[]; };
VT load_unit(uint64_t at) { return vec4(Half4Array(p.x + at * 8ul).v[0]); }
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Bf4Array { u16vec4 v[]; };
VT load_unit(uint64_t at) { return uintBitsToFloat(uvec4(Bf4Array(p.x + at * 8ul).v[0]) << 16); }
#else
VT load_unit(uint64_t at) { return Vec4Array(p.x + at * 16ul).v[0]; }
#endif
void take_unit(inout St s, VT u, uint r) { take_vec4(s, u, r); }
float unit_sum(VT u) { return (u.x + u.y) + (u.z + u.w); }
#elif defined(TILE)
// The tile form: elements from the run staged in shared memory (see main_tile).
#define VT float
const uint UNIT = DT == 0 ? 4u : 8u;             // elements per 16-byte unit
const uint TILE_ELEMS = gl_WorkGroupSize.x * TILE_ITEMS * UNIT;
shared float tile[TILE_ELEMS + TILE_ELEMS / 32u];
// Skewed by a word per 32: a lane per row of any length reads with at most two-way bank
// conflicts, and the unit-wide stores of the staging have none.
uint slot(uint e) { return e + (e >> 5); }
uint64_t tile_base;                              // the element in tile[0]
VT load_unit(uint64_t at) { return tile[slot(uint(at - tile_base))]; }
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Word4TileArray { uvec4 v[]; };
#if DT == 1
vec2 halves2(uint w) { return unpackHalf2x16(w); }
#else
vec2 halves2(uint w) { return uintBitsToFloat(uvec2(w << 16, w & 0xffff0000u)); }
#endif
void take_unit(inout St s, VT u, uint r) { take(s, u, r); }
float unit_sum(VT u) { return u; }
#else
#define VT float
VT load_unit(uint64_t at) { return load_elem(p.x, at); }
void take_unit(inout St s, VT u, uint r) { take(s, u, r); }
float unit_sum(VT u) { return u; }
#endif

// max/min load units as RT: the bits of 16-bit units (VEC == 8), converted as they are taken.
#if VEC == 8
#define RT uvec4
RT load_raw(uint64_t at) { return load_words(at); }
#else
#define RT VT
RT load_raw(uint64_t at) { return load_unit(at); }
#endif

#ifndef CVEC
#define CVEC 1
#endif

// MASKED (sum, max and min over rows, inner == 1, VEC 4 or 8, x 16-byte aligned): rows of
// any length read as the aligned units of the flattened x that cover them. Row o starts
// in unit floor(o * row_elems / VEC) at lane skew = o * row_elems mod VEC; lane k of its
// unit i holds element i * VEC + k - skew (wrapping below the row's start, so one
// unsigned test rejects both ends). A unit holding none of the row is not loaded, so no
// load leaves the 16-byte blocks that hold x's elements. Lanes outside the row read as
// 0 for sums; for max and min as START (below, on the raw bits of 16-bit units), which
// never wins a comparison, and an index that lands outside the row is dropped at the end.
#ifdef MASKED
#if (OP != OP_SUM && OP != OP_MAX && OP != OP_MIN) || (VEC != 4 && VEC != 8)
#error "MASKED is for sum, max and min with VEC 4 or 8"
#endif
bool unit_in_row(uint i, uint skew) { return i * uint(VEC) < p.row_elems + skew; }
// Whether all of unit i's lanes hold row elements (e: the element in its lane 0).
bool unit_whole(uint e) { return e < p.row_elems && p.row_elems - e >= uint(VEC); }
vec4 keep4(vec4 v, uint e, float outside) {
    return mix(vec4(outside), v, lessThan(uvec4(e) + uvec4(0u, 1u, 2u, 3u), uvec4(p.row_elems)));
}
#if OP == OP_SUM
// Unit i of a row with its lanes outside the row 0, in two steps as max and min's below
// (all of a thread's loads issued before any mask): masked_sum_load reads a unit holding
// some of the row, else 0; masked_sum_keep zeroes the lanes outside the row, and takes a
// unit wholly inside it, all but at most two of a row's, as loaded.
VT masked_sum_load(uint64_t col, uint i, uint skew) {
    return unit_in_row(i, skew) ? load_unit(col + i) : VT(0.0);
}
VT masked_sum_keep(VT u, uint i, uint skew) {
    uint e = i * uint(VEC) - skew;
    if (unit_whole(e)) return u;
#if VEC == 8
    return VT(keep4(u[0], e, 0.0), keep4(u[1], e + 4u, 0.0));
#else
    return keep4(u, e, 0.0);
#endif
}
#endif
#endif

// max, min: a thread keeps one state per element slot of a load (SLOTS: the elements of
// a unit, or the 4 columns of CVEC == 4), so that each loaded element costs a few
// independent, branch-free instructions (no divergent path per element) and the slots'
// chains run in parallel. (var keeps Welford's per-element update: its slot form, with
// one reciprocal per load, measured 3-8 points of copy slower on the H200.) Every slot sees its elements in growing index order; the slots are combined
// once, by merge(), at the end.
#if VEC == 8
const uint SLOTS = 8;
#define SV 2
#elif CVEC == 4 || VEC == 4
const uint SLOTS = 4;
#define SV 1
#else
const uint SLOTS = 1;
#define SV 0
#endif

#if OP == OP_MAX || OP == OP_MIN
#if OP == OP_MAX
#define START uintBitsToFloat(0xff800000u)   // -inf: nothing is below it
#define BEYOND4(v, w) greaterThan(v, w)
#else
#define START uintBitsToFloat(0x7f800000u)
#define BEYOND4(v, w) lessThan(v, w)
#endif
#ifdef MASKED
// Unit i of a row (of skew `skew`) with its lanes outside the row START, in two steps so
// that a thread issues all its loads before any mask (a branch between one load and the
// next had NVIDIA's compiler issue them one by one): masked_load reads a unit holding
// some of the row and gives a unit holding none all START; masked_keep sets the lanes
// outside the row to START, as the raw bits of 16-bit units (START16, the dtype's
// infinity) or the float32 unit. A unit wholly inside the row, all but at most two of a
// row's, is taken as loaded.
#if VEC == 8
#if DT == 1
const uint START16 = OP == OP_MAX ? 0xfc00u : 0x7c00u;
#else
const uint START16 = OP == OP_MAX ? 0xff80u : 0x7f80u;
#endif
RT masked_load(uint64_t col, uint i, uint skew) {
    return unit_in_row(i, skew) ? load_words(col + i) : uvec4(START16 | (START16 << 16));
}
RT masked_keep(RT w, uint i, uint skew) {
    uint e = i * 8u - skew;
    if (unit_whole(e)) return w;
    uvec4 lo = uvec4(e) + uvec4(0u, 2u, 4u, 6u);
    uvec4 l = mix(uvec4(START16), w & 0xffffu, lessThan(lo, uvec4(p.row_elems)));
    uvec4 h = mix(uvec4(START16 << 16), w & 0xffff0000u, lessThan(lo + 1u, uvec4(p.row_elems)));
    return l | h;
}
#else
RT masked_load(uint64_t col, uint i, uint skew) {
    return unit_in_row(i, skew) ? load_unit(col + i) : RT(START);
}
RT masked_keep(RT u, uint i, uint skew) {
    uint e = i * 4u - skew;
    if (unit_whole(e)) return u;
    return keep4(u, e, START);
}
#endif
#endif
// Slot k holds its best number m[k] and the unit ix[k] it came from, and the unit nx[k]
// of its first NaN (EMPTY: none). A slot starts at START with the thread's first unit,
// which is right when no element is beyond START (all equal to it: the first wins). The
// comparison is ordered, so a NaN never wins here; a unit with a NaN (rare, one test per
// unit) records it, and a recorded NaN beats the number at the end. The slots are held
// as vec4s (SV of them) and updated by vector compares and selects: as float and uint
// arrays indexed by the slot loop, NVIDIA's compiler put 128 bytes of them in local
// memory (float16 max over rows at 34-38% of the copy ceiling on the H200; 51-62% as
// vec4s). The loops over slots are unrolled for the same reason.
#if SV > 0
vec4 unit_vec(VT u, uint g) {
#if VEC == 8
    return u[g];
#else
    return u;
#endif
}
// A loaded unit (RT: its 16-bit values' bits when VEC == 8, converted here, so the NaN test
// can read the bits; else the unit itself) into the slots.
void take_slots(inout vec4 m[SV], inout uvec4 ix[SV], inout uvec4 nx[SV], RT raw, uint r) {
#if VEC == 8
    VT u = words_unit(raw);
#else
    VT u = raw;
    uvec4 most = uvec4(0u);
#endif
    [[unroll]] for (uint g = 0; g < SV; ++g) {
        vec4 v = unit_vec(u, g);
        bvec4 w = BEYOND4(v, m[g]);
        m[g] = mix(m[g], v, w);
        ix[g] = mix(ix[g], uvec4(r), w);
#if VEC != 8
        most = max(most, floatBitsToUint(v) & 0x7fffffffu);
#endif
    }
#if VEC == 8
    if (words_have_nan(raw)) {
#else
    if (max(max(most.x, most.y), max(most.z, most.w)) > 0x7f800000u) {
#endif
        // Units arrive in growing r, so the first NaN is the smallest r seen with one.
        [[unroll]] for (uint g = 0; g < SV; ++g) {
            bvec4 nan = greaterThan(floatBitsToUint(unit_vec(u, g)) & 0x7fffffffu, uvec4(0x7f800000u));
            nx[g] = min(nx[g], mix(uvec4(EMPTY), uvec4(r), nan));
        }
    }
}
#define SLOT_M(k) m[(k) / 4u][(k) % 4u]
#define SLOT_IX(k) ix[(k) / 4u][(k) % 4u]
#define SLOT_NX(k) nx[(k) / 4u][(k) % 4u]
#else
void take_slots(inout float m[1], inout uint ix[1], inout uint nx[1], VT u, uint r) {
    bool w = BEYOND(u, m[0]);
    m[0] = w ? u : m[0];
    ix[0] = w ? r : ix[0];
    if (nx[0] == EMPTY && is_nan(u)) nx[0] = r;
}
#define SLOT_M(k) m[0]
#define SLOT_IX(k) ix[0]
#define SLOT_NX(k) nx[0]
#endif
#endif
// CVEC == 4 (with VEC == 4; inner a multiple of 4, x plain): each thread takes 4 adjacent
// columns, one load of 4 elements per row, as if inner were inner / 4 columns of vec4s
// (p.inner counts those units); its 4 states are kept, merged and written as 4 columns'
// (the states a split writes are laid out per element column, so a second dispatch may
// be the CVEC == 1 kernel). NS: states per thread.
const uint NS = CVEC;

shared float sh_a[WG * NS];
shared float sh_b[WG * NS];
shared uint sh_i[WG * NS];

// The meeting of a column's lanes' states, into lane 0's (every invocation takes part).
void meet(inout St s[NS], uint t, uint lane) {
#ifdef ROWS_SG
    uint span = min(LANES, gl_SubgroupSize);   // a column's lanes in one subgroup
    for (uint m = 1u; m < span; m <<= 1) {
        St o = St(subgroupShuffleXor(s[0].a, m), 0.0, 0u);
#if OP == OP_VAR
        o.b = subgroupShuffleXor(s[0].b, m);
#endif
#if OP != OP_SUM
        o.i = subgroupShuffleXor(s[0].i, m);
#endif
        merge(s[0], o);
    }
    if (LANES > span) {   // the subgroups' states of a column, in order, by its lane 0
        if (lane % span == 0u) { uint k = t / span; sh_a[k] = s[0].a; sh_b[k] = s[0].b; sh_i[k] = s[0].i; }
        barrier();
        if (lane == 0u) {
            for (uint k = t / span + 1u; k < (t + LANES) / span; ++k) merge(s[0], St(sh_a[k], sh_b[k], sh_i[k]));
        }
    }
#else
    for (uint j = 0; j < NS; ++j) { sh_a[t * NS + j] = s[j].a; sh_b[t * NS + j] = s[j].b; sh_i[t * NS + j] = s[j].i; }
    for (uint step = LANES / 2; step > 0; step >>= 1) {
        barrier();
        if (lane < step) {
            uint u = t + step * COLS;
            for (uint j = 0; j < NS; ++j) {
                merge(s[j], St(sh_a[u * NS + j], sh_b[u * NS + j], sh_i[u * NS + j]));
                sh_a[t * NS + j] = s[j].a; sh_b[t * NS + j] = s[j].b; sh_i[t * NS + j] = s[j].i;
            }
        }
    }
#endif
}

// Lane 0's states of column (o, c): the result, or (to_states) chunk `split`'s state.
void store(St s[NS], uint o, uint c, uint split, bool to_states, bool writer) {
    if (!writer) return;
    for (uint j = 0; j < NS; ++j) {
        if (to_states) {
            uint64_t at = ((uint64_t(o) * p.splits + split) * p.inner + c) * NS + j;
            WordArray w = WordArray(p.states + at * 12ul);
            w.v[0] = floatBitsToUint(s[j].a);
            w.v[1] = floatBitsToUint(s[j].b);
            w.v[2] = s[j].i;
            continue;
        }
        uint64_t at = (uint64_t(o) * p.inner + c) * NS + j;
#if OP == OP_SUM
        store_elem(p.y, at, s[j].a / p.divisor);
#elif OP == OP_VAR
        store_elem(p.y, at, s[j].b / p.divisor);
#else
        if (p.y != 0ul) store_elem(p.y, at, s[j].a);
        if (p.idx != 0ul) IntArray(p.idx + at * 4ul).v[0] = int(s[j].i + 1u);
#endif
    }
}

// Column q (valid: it is one of this workgroup's) by thread t, its lane `lane`, over
// chunk `split` of r: the lanes' states, their meeting, and the result. Called by every
// thread of the workgroup alike.
void reduce_column(uint64_t q, uint t, uint lane, uint split, bool valid) {
    uvec2 oc = valid ? div_mod(q, p.inner) : uvec2(0u);
    uint o = oc.x, c = oc.y;
    uint r0 = split * CHUNK;
    uint r1 = min(r0 + CHUNK, p.r);
#ifdef MASKED
    uint64_t first_elem = uint64_t(o) * p.row_elems;
    uint64_t col = first_elem / uint(VEC);             // the unit holding the row's first element
    uint skew = uint(first_elem % uint(VEC));
#define LOAD_ROW_UNIT(at, i) masked_sum_load(col, i, skew)
#define KEEP_ROW_UNIT(u, i) masked_sum_keep(u, i, skew)
#define LOAD_ROW_RAW(at, i) masked_load(col, i, skew)
#define KEEP_ROW_RAW(u, i) masked_keep(u, i, skew)
#else
    uint64_t col = uint64_t(o) * p.r * p.inner + c;   // unit (element or vec4) of row 0
#define LOAD_ROW_UNIT(at, i) load_unit(at)
#define KEEP_ROW_UNIT(u, i) (u)
#define LOAD_ROW_RAW(at, i) load_raw(at)
#define KEEP_ROW_RAW(u, i) (u)
#endif

    St s[NS];
    for (uint j = 0; j < NS; ++j) s[j] = identity();
    if (valid) {
#if OP == OP_SUM || OP == OP_VAR
        for (uint r = r0 + lane; r < r1; r += LANES * UNROLL) {
            VT u[UNROLL];
            for (uint k = 0; k < UNROLL; ++k) {
                uint rk = r + k * LANES;
                u[k] = rk < r1 ? LOAD_ROW_UNIT(col + uint64_t(rk) * p.inner, rk) : VT(0.0);
            }
            for (uint k = 0; k < UNROLL; ++k) {
                uint rk = r + k * LANES;
#if CVEC == 4
                if (rk < r1) for (uint j = 0; j < NS; ++j) take(s[j], u[k][j], rk);
#else
                if (rk < r1) take_unit(s[0], KEEP_ROW_UNIT(u[k], rk), rk);
#endif
            }
        }
#else
        uint first = r0 + lane;
#if SV > 0
        vec4 m[SV];
        uvec4 ix[SV], nx[SV];
        [[unroll]] for (uint g = 0; g < SV; ++g) { m[g] = vec4(START); ix[g] = uvec4(first < r1 ? first : EMPTY); nx[g] = uvec4(EMPTY); }
#else
        float m[1];
        uint ix[1], nx[1];
        m[0] = START; ix[0] = first < r1 ? first : EMPTY; nx[0] = EMPTY;
#endif
        for (uint r = first; r < r1; r += LANES * UNROLL) {
            RT u[UNROLL];
            for (uint k = 0; k < UNROLL; ++k) {
                uint rk = r + k * LANES;
                u[k] = rk < r1 ? LOAD_ROW_RAW(col + uint64_t(rk) * p.inner, rk) : RT(0);
            }
            for (uint k = 0; k < UNROLL; ++k) {
                uint rk = r + k * LANES;
                if (rk < r1) take_slots(m, ix, nx, KEEP_ROW_RAW(u[k], rk), rk);
            }
        }
        // The slots' states: one per column (CVEC == 4), or merged into the thread's.
        [[unroll]] for (uint k = 0; k < SLOTS; ++k) {
            // Element index along r: rows are units of VEC elements, columns single rows.
            uint at = CVEC == 4 ? 0u : k;
            uint per = CVEC == 4 ? 1u : uint(VEC);
            St sk = SLOT_NX(k) != EMPTY ? St(uintBitsToFloat(0x7fc00000u), 0.0, SLOT_NX(k) * per + at)
                  : St(SLOT_M(k), 0.0, SLOT_IX(k) == EMPTY ? EMPTY : SLOT_IX(k) * per + at);
#ifdef MASKED
            // the row's element, or (a slot left at START on lanes outside the row) none
            if (sk.i != EMPTY) { sk.i -= skew; if (sk.i >= p.row_elems) sk.i = EMPTY; }
#endif
#if CVEC == 4
            s[k] = sk;
#else
            merge(s[0], sk);
#endif
        }
#endif
    }
#if OP == OP_SUM
    for (uint j = 0; j < NS; ++j) {
        float v = s[j].a - s[j].b;
        if (valid && (floatBitsToUint(v) & 0x7f800000u) == 0x7f800000u) {   // inf or NaN: cold
            v = 0.0;
            for (uint r = r0 + lane; r < r1; r += LANES) {
                uint64_t at = col + uint64_t(r) * p.inner;
#if CVEC == 4
                v += load_unit(at)[j];
#else
                v += unit_sum(KEEP_ROW_UNIT(LOAD_ROW_UNIT(at, r), r));
#endif
            }
        }
        s[j] = St(v, 0.0, 0u);
    }
#endif

    meet(s, t, lane);
    store(s, o, c, split, (p.flags & STATE_OUT) != 0u, lane == 0u && valid);
}

// Column q's result from its `nstates` chunks' states (laid out as the chunks write
// them), in a fixed order: the lanes take them as the rows of r, then meet.
void combine_states(uint64_t q, uint t, uint lane, bool valid, uint nstates) {
    uvec2 oc = valid ? div_mod(q, p.inner) : uvec2(0u);
    uint o = oc.x, c = oc.y;
    uint64_t col = uint64_t(o) * nstates * p.inner + c;   // state (column, r): (col + r * inner) * NS + j
    St s[NS];
    for (uint j = 0; j < NS; ++j) {
        s[j] = identity();
        if (!valid) continue;
        for (uint r = lane; r < nstates; r += LANES) {
            St st = load_state((col + uint64_t(r) * p.inner) * NS + j);
#if OP == OP_SUM
            take(s[j], st.a, 0u);
#else
            merge(s[j], st);
#endif
        }
#if OP == OP_SUM
        float v = s[j].a - s[j].b;
        if ((floatBitsToUint(v) & 0x7f800000u) == 0x7f800000u) {   // inf or NaN: added plainly
            v = 0.0;
            for (uint r = lane; r < nstates; r += LANES) v += load_state((col + uint64_t(r) * p.inner) * NS + j).a;
        }
        s[j] = St(v, 0.0, 0u);
#endif
    }
    meet(s, t, lane);
    store(s, o, c, 0u, false, lane == 0u && valid);
}

#ifdef TILE
// Tile form (inner == 1, one chunk, ROWS_SG and VEC == 1 builds): the workgroup takes
// p.chunk consecutive rows, one contiguous run of x, and stages it in shared memory as
// whole 16-byte units (every thread TILE_ITEMS of them, adjacent threads adjacent units;
// a unit past x's last element element by element), then reduces COLS rows at a time
// from there, LANES lanes per row, as the subgroup form does from memory. So loads stay
// 16 bytes wide however short or oddly sized the rows, where the other forms give a row
// of 3 elements a lane reading 3 scattered floats.
void main() {
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    uint row0 = g * p.chunk;
    if (g >= p.col_groups) return;   // whole workgroup
    uint nrows = min(p.chunk, p.outer - row0);
    uint64_t e0 = uint64_t(row0) * p.r;
    uint64_t e1 = e0 + uint64_t(nrows) * p.r;
    uint64_t total = uint64_t(p.outer) * p.r;
    uint64_t u0 = e0 / UNIT;
    uint nu = uint((e1 - 1ul) / UNIT - u0) + 1u;   // <= WG * TILE_ITEMS (the host's p.chunk)
    tile_base = u0 * UNIT;
    for (uint i = 0u; i < TILE_ITEMS; ++i) {
        uint u = gl_LocalInvocationID.x + i * WG;
        if (u >= nu) continue;
        uint64_t first = (u0 + u) * UNIT;
        if (first + UNIT <= total) {
#if DT == 0
            vec4 v = Vec4Array(p.x + first * 4ul).v[0];
            for (uint k = 0u; k < 4u; ++k) tile[slot(u * 4u + k)] = v[k];
#else
            uvec4 w = Word4TileArray(p.x + first * 2ul).v[0];
            for (uint k = 0u; k < 4u; ++k) {
                vec2 h = halves2(w[k]);
                tile[slot(u * 8u + 2u * k)] = h.x;
                tile[slot(u * 8u + 2u * k + 1u)] = h.y;
            }
#endif
        } else {
            for (uint k = 0u; k < UNIT; ++k)
                if (first + k < total) tile[slot(u * UNIT + k)] = load_elem(p.x, first + k);
        }
    }
    barrier();
    // (full subgroups tile the workgroup: t runs over 0..WG-1)
    uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    for (uint base = 0u; base < nrows; base += COLS) {   // uniform
        uint j = base + t / LANES;
        reduce_column(uint64_t(row0 + j), t, t % LANES, 0u, j < nrows);
    }
}
#else
shared bool last_group;

void main() {
    uint64_t g = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    if (g >= uint64_t(p.col_groups) * p.splits) return;   // whole workgroup
    uvec2 cs = div_mod(g, p.splits);
    uint cg = cs.x, split = cs.y;
#ifdef ROWS_SG
    // (full subgroups tile the workgroup: t runs over 0..WG-1)
    uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint64_t q = uint64_t(cg) * COLS + t / LANES;   // the column: (o, c) flattened
    uint lane = t % LANES;
#else
    uint t = gl_LocalInvocationID.x;
    uint64_t q = uint64_t(cg) * COLS + t % COLS;   // the column: (o, c) flattened
    uint lane = t / COLS;
#endif
    bool valid = q < uint64_t(p.outer) * p.inner;
    if ((p.flags & STATE_IN) != 0u) { combine_states(q, t, lane, valid, p.r); return; }   // a second dispatch
    reduce_column(q, t, lane, split, valid);
    if ((p.flags & STATE_LAST) == 0u) return;
    // The states reach device scope before the count that publishes them; the count
    // that completes the group's tells its workgroup that all of them have.
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) {
        last_group = atomicAdd(WordArray(p.counters).v[cg], 1u) == p.splits - 1u;
        if (last_group) atomicExchange(WordArray(p.counters).v[cg], 0u);
    }
    barrier();
    if (!last_group) return;   // whole workgroup
    memoryBarrierBuffer();
    combine_states(q, t, lane, valid, p.splits);
}
#endif
