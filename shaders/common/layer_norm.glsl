// Shared by the LayerNorm forward kernels (shaders/layer_norm_<form>.comp):
// y = (x - mean) * invstd * weight + bias over the last dimension, saving mean and
// invstd per row (what backward needs). Each form is one file; src/ops/layer_norm.c
// plans which runs. Every form is built in widths: VEC = 4 (vec4 loads, rows a multiple
// of 4), VEC = 4 with ANY_D = 1 (vec4 loads, any D: see "Row access" below) and VEC = 1
// (floats, any D).
// Rows past maxComputeWorkGroupCount[0] arrive on a 2-D grid (groups_x wide).
// Every form reads all of a row before writing it, so out == x (in place) is safe
// (the split form only where the host allows it: see layer_norm_split.comp).
//
// Numerics (corrected two-pass): m0 = sum(x)/D in float32 is off from the true mean by
// its rounding error, which for rows with a large common offset (1e4 + noise) is far
// bigger than the noise's own precision. So the second pass takes r = x - m0 (exact
// when x is near m0), and c = sum(r)/D recovers the lost part: mean = m0 + c,
// var = sum(r^2)/D - c^2 (c is tiny, so this subtracts nothing large), and
// y = (r - c) * invstd. Never E[x^2] - E[x]^2 on raw x.
//
// Non-finite and huge rows (docs/semantics.md): the fast statistics overflow once the
// row's deviations pass ~1.8e19 (their squares) or its sum passes the float32 maximum,
// and a NaN or infinity in the row spoils them too. Either way the sum of squared
// deviations comes out non-finite: one test per row after the reductions (uniform over
// whoever shares the row), and only such rows take scaled_stats below, which reads the
// row again from memory, scaled by a power of two. The reading loops are untouched.
//
// A form file includes this first, after any #extension lines of its own.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// DT: the dtype of x, y, weight and bias: 0 float32; 1 float16, 2 bfloat16 (the group,
// subgroup, stream and two-stage split forms, VEC 4 or 1 or clamped ANY_D, and the tile
// form: a vector is 4 elements of 2 bytes; values are float32 in registers, so the
// statistics are float32 as for float32 x; y rounds once, to nearest even, on store).
// mean and invstd stay float32.
#ifndef DT
#define DT 0
#endif
#if DT != 0
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "common/buffers.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ITEMS = 1;   // vectors per thread held in registers
layout(constant_id = 2) const uint ROWS = 1;    // rows per workgroup (subgroup form);
                                                // workgroups per row (split form)
// Clamped masked rows (ANY_D = 2): 1 masks only the vectors a row shares with its
// neighbours and shifts a parameter's lanes before converting them (see ln_keep and
// load_param), 0 masks every vector with selects (the host's choice: lean_spec in
// src/ops/layer_norm.c).
layout(constant_id = 4) const uint LEAN = 0;
// SHIFTED (VEC = 4; the host's shifted_params): p.weight and p.bias point at float32
// copies made for this call (shaders/layer_norm_params.comp). With ANY_D, 4 copies of
// p.n vectors: vector idx of copy o holds the lanes that vector idx of a row of skew o
// needs, one aligned load in place of two and a lane shift. Without ANY_D (16-bit x),
// one copy: float32 lanes in place of 16-bit ones converted per vector.
layout(constant_id = 6) const uint SHIFTED = 0;

float hsum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#if VEC == 4
#define VT vec4
#define ROW_ARRAY Vec4Array
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#elif VEC == 1
#define VT float
#define ROW_ARRAY FloatArray
float hsum(float v) { return v; }
#else
#error "define VEC as 4 or 1"
#endif
#ifndef ANY_D
#define ANY_D 0
#endif
#if ANY_D && VEC != 4
#error "ANY_D needs VEC = 4"
#endif

layout(push_constant) uniform Params {
    uint64_t x, y, weight, bias, mean, invstd;   // device addresses (0 = absent)
    uint rows;       // number of rows
    uint n;          // vectors per row: D / VEC; with ANY_D the most that cover a row
    uint d;          // elements per row
    float eps;
    uint groups_x;   // width of the dispatch grid, for 2-D folding
    uint pad0;
    uint64_t scratch;   // split form: ticket counter, then one record per part
    uint chunk;         // split form: vectors per part
    uint spin_limit;    // split form: polls before a part stops waiting for its partners
    uint tickets;       // split form: 1: rows taken from a counter in start order
    uint epoch;         // split form: this call's nonzero ready tag
    uint ticket_base;   // split form: the ticket counter's value when this call starts
    uint classes;       // split form: > 1: parts picked by multiprocessor class
    uint class_jobs;    // split form: jobs per class (rows * parts / classes)
    uint launched;      // split form: workgroups in the grid
    uint lag;           // pipelined two-stage split: tickets between a slice's record and its normalizing
} p;

const uint WG = gl_WorkGroupSize.x;
shared vec2 partials[WG];

// 1/sqrt(a) to within about an ulp: inversesqrt is only 2-ulp accurate in Vulkan, and
// one Newton step squares its error away.
// At a = 0 (eps = 0, a constant row) the step would make inf * NaN: 1/sqrt(0) is +inf.
float invsqrt_refined(float a) {
    float r = inversesqrt(a);
    return a == 0.0 ? r : r * (1.5 - 0.5 * a * r * r);
}

uint group_index() { return gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x; }

// A macro, not a function: a function returning a buffer reference leaves an
// undecorated variable behind where spirv-opt skips the module (see
// layer_norm_split.comp).
#define row_ptr(base, row) ROW_ARRAY((base) + uint64_t(row) * uint64_t(p.d) * 4ul)

// weight and bias are only read, and never alias y (the host refuses that), so they are
// declared readonly restrict.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer ParamVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer ParamFloat { float v[]; };

// Elements of x, y, weight and bias (DT): element i, or 4-element vector i, at an
// address, as float32 values. A vector is 16 bytes of float32 or 8 of float16/bfloat16.
#if DT != 0
#if DT == 1
#define HALF4 f16vec4
#define HALF1 float16_t
layout(buffer_reference, std430, buffer_reference_align = 8) buffer HalfArray4 { HALF4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer HalfArray1 { HALF1 v[]; };
vec4 half_to_float(f16vec4 h) { return vec4(h); }
float half_to_float(float16_t h) { return float(h); }
f16vec4 float_to_half(vec4 v) { return f16vec4(v); }
float16_t float_to_half(float v) { return float16_t(v); }
#else
// 4 bfloat16 as two 32-bit words (element 2k in the low half of word k): bit operations
// on words, no 16-bit registers
#define HALF4 uvec2
#define HALF1 uint16_t
layout(buffer_reference, std430, buffer_reference_align = 8) buffer HalfArray4 { HALF4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer HalfArray1 { HALF1 v[]; };
vec4 half_to_float(uvec2 h) {
    return uintBitsToFloat(uvec4(h.x << 16, h.x & 0xffff0000u, h.y << 16, h.y & 0xffff0000u));
}
float half_to_float(uint16_t h) { return uintBitsToFloat(uint(h) << 16); }
// bfloat16: round to nearest even; a NaN stays a quiet NaN.
uint bf16_bits(float x) {
    uint b = floatBitsToUint(x);
    return (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}
uvec2 float_to_half(vec4 v) {
    return uvec2(bf16_bits(v.x) | (bf16_bits(v.y) << 16), bf16_bits(v.z) | (bf16_bits(v.w) << 16));
}
uint16_t float_to_half(float v) { return uint16_t(bf16_bits(v)); }
#endif
layout(buffer_reference, std430, buffer_reference_align = 8) readonly restrict buffer ParamHalf4 { HALF4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) readonly restrict buffer ParamHalf1 { HALF1 v[]; };
const uint64_t VEC_BYTES = 8ul;
vec4 x_vec(uint64_t at, uint i) { return half_to_float(HalfArray4(at).v[i]); }
float x_elem(uint64_t at, uint i) { return half_to_float(HalfArray1(at).v[i]); }
void y_vec(uint64_t at, uint i, vec4 v) { HalfArray4(at).v[i] = float_to_half(v); }
void y_elem(uint64_t at, uint i, float v) { HalfArray1(at).v[i] = float_to_half(v); }
vec4 param_vec(uint64_t at, uint i) { return half_to_float(ParamHalf4(at).v[i]); }
float param_elem(uint64_t at, uint i) { return half_to_float(ParamHalf1(at).v[i]); }
#else
const uint64_t VEC_BYTES = 16ul;
vec4 x_vec(uint64_t at, uint i) { return Vec4Array(at).v[i]; }
float x_elem(uint64_t at, uint i) { return FloatArray(at).v[i]; }
void y_vec(uint64_t at, uint i, vec4 v) { Vec4Array(at).v[i] = v; }
void y_elem(uint64_t at, uint i, float v) { FloatArray(at).v[i] = v; }
vec4 param_vec(uint64_t at, uint i) { return ParamVec4(at).v[i]; }
float param_elem(uint64_t at, uint i) { return ParamFloat(at).v[i]; }
#endif

// Row access: ln_load(base, row, idx) reads vector idx of a row of x (base p.x),
// ln_store(row, idx, v) writes it to y, ln_keep(row, idx, v) zeroes v's lanes outside
// the row, load_weight/load_bias(row, idx) give the matching weight and bias lanes.
// Callers keep idx < p.n.
#if ANY_D
// Rows of any D read as the aligned 4-element vectors of the flattened tensor that
// cover them: vector idx of a row is vector number floor(row*D / 4) + idx of the buffer, and its
// lane k holds element 4*idx + k - o of the row, o = (row*D) mod 4 (the row's skew).
// Lanes outside the row read as 0 and are never written. A vector wholly inside the row
// is one vector access; the partial ones (at most two per row) take one element access per
// lane inside the row, so no access touches a neighbouring row's elements (in place,
// adjacent rows' workgroups run at once and share those vec4s) nor bytes past the
// tensor's end. Element indices are unsigned: 4*idx - o wraps to a huge value below the
// row's start, which every "< p.d" test then rejects (p.d < 2^31).
uint row_skew(uint row) { return uint((uint64_t(row) * uint64_t(p.d)) & 3ul); }
// The address of the vector holding the row's first element.
uint64_t row_base(uint64_t base, uint row) { return base + ((uint64_t(row) * uint64_t(p.d)) >> 2) * VEC_BYTES; }
uint first_elem(uint row, uint idx) { return 4u * idx - row_skew(row); }
bool whole_vector(uint e0) { return e0 < p.d && p.d - e0 >= 4u; }

// LEAN: a whole vector (all of a row's but at most its first and last) passes untouched,
// a branch that almost every thread skips in place of four compares and selects, which
// float16's 8-byte vectors feel most.
vec4 ln_keep(uint row, uint idx, vec4 v) {
    uint e0 = first_elem(row, idx);
    if (LEAN != 0u && whole_vector(e0)) return v;
    uvec4 e = uvec4(e0) + uvec4(0u, 1u, 2u, 3u);
    return mix(vec4(0.0), v, lessThan(e, uvec4(p.d)));
}
#if ANY_D == 2
// Clamped loads (ANY_D = 2): every vector is one aligned vec4 load (ln_load_raw), its
// lanes outside the row zeroed afterwards (ln_keep), so a thread's ITEMS loads can all be
// in flight at once: a branch per load, as ANY_D = 1 has, or ln_keep's between loads,
// lets the compiler issue them only one after another (load_items below takes them
// all first). The index is clamped to the row's last vec4, so no load leaves the
// 16-byte blocks that hold the tensor's elements (plain tensors start 16-byte aligned).
// A partial vector's outside lanes belong to the neighbouring row: in place, that row's
// workgroup may be rewriting them while they are read, which changes only lanes
// ln_keep drops. Stores stay exact, as below.
vec4 ln_load_raw(uint64_t base, uint row, uint idx) {
    uint last = (row_skew(row) + p.d - 1u) >> 2;
    return x_vec(row_base(base, row), min(idx, last));
}
vec4 ln_load(uint64_t base, uint row, uint idx) { return ln_keep(row, idx, ln_load_raw(base, row, idx)); }
#else
vec4 ln_load(uint64_t base, uint row, uint idx) {
    uint e0 = first_elem(row, idx);
    uint64_t at = row_base(base, row);
    if (whole_vector(e0)) return x_vec(at, idx);
    vec4 r = vec4(0.0);
    for (uint k = 0u; k < 4u; ++k)
        if (e0 + k < p.d) r[k] = x_elem(at, 4u * idx + k);
    return r;
}
#endif
void ln_store(uint row, uint idx, vec4 v) {
    uint e0 = first_elem(row, idx);
    uint64_t at = row_base(p.y, row);
    if (whole_vector(e0)) { y_vec(at, idx, v); return; }
    for (uint k = 0u; k < 4u; ++k)
        if (e0 + k < p.d) y_elem(at, 4u * idx + k, v[k]);
}
// Lanes of weight or bias for vector idx: elements 4*idx - o .. 4*idx - o + 3, from the
// aligned vec4s idx - 1 and idx of the parameter (o is uniform over the row), or per
// element at the row's ends.
#if ANY_D == 2
// Clamped: vec4s idx - 1 and idx of the parameter, each index clamped to its last vec4
// (lanes that need a clamped vector lie outside the row, whose results are never
// stored), combined by selects on o. No branch but the uniform o == 0.
// LEAN: the lanes are shifted as stored, before one conversion to float32, on branches
// that are uniform wherever a workgroup holds a row.
#if DT == 0
#define PARAM_RAW vec4
vec4 param_raw(uint64_t at, uint i) { return ParamVec4(at).v[i]; }
vec4 raw_to_float(vec4 v) { return v; }
#else
#define PARAM_RAW HALF4
HALF4 param_raw(uint64_t at, uint i) { return ParamHalf4(at).v[i]; }
vec4 raw_to_float(HALF4 v) { return half_to_float(v); }
#endif
// Lanes o.. of the 8 in a:b (bfloat16: two words each, element 2k in the low half of word k).
#if DT == 2
uvec2 shift_lanes(uvec2 a, uvec2 b, uint o) {
    if (o == 2u) return uvec2(a.y, b.x);
    if (o == 1u) return uvec2((a.y >> 16) | (b.x << 16), (b.x >> 16) | (b.y << 16));
    return uvec2((a.x >> 16) | (a.y << 16), (a.y >> 16) | (b.x << 16));
}
#else
PARAM_RAW shift_lanes(PARAM_RAW a, PARAM_RAW b, uint o) {
    if (o == 1u) return PARAM_RAW(a.w, b.xyz);
    if (o == 2u) return PARAM_RAW(a.zw, b.xy);
    return PARAM_RAW(a.yzw, b.x);
}
#endif
vec4 load_param(uint64_t addr, float absent, uint row, uint idx) {
    if (addr == 0ul) return vec4(absent);
    uint o = row_skew(row);
    if (SHIFTED != 0u) return ParamVec4(addr).v[o * p.n + idx];
    uint last = (p.d - 1u) >> 2;
    if (LEAN != 0u) {
        PARAM_RAW rb = param_raw(addr, min(idx, last));
        if (o == 0u) return raw_to_float(rb);
        return raw_to_float(shift_lanes(param_raw(addr, min(idx - 1u, last)), rb, o));
    }
    vec4 b = param_vec(addr, min(idx, last));
    if (o == 0u) return b;
    vec4 a = param_vec(addr, min(idx - 1u, last));
    vec4 r = mix(vec4(a.yzw, b.x), vec4(a.zw, b.xy), bvec4(o == 2u));
    return mix(r, vec4(a.w, b.xyz), bvec4(o == 1u));
}
#else
vec4 load_param(uint64_t addr, float absent, uint row, uint idx) {
    if (addr == 0ul) return vec4(absent);
    uint o = row_skew(row);
    if (SHIFTED != 0u) return ParamVec4(addr).v[o * p.n + idx];
    if (4u * idx + 4u <= p.d) {
        vec4 b = param_vec(addr, idx);
        if (o == 0u) return b;
        if (idx > 0u) {
            vec4 a = param_vec(addr, idx - 1u);
            return o == 1u ? vec4(a.w, b.xyz) : o == 2u ? vec4(a.zw, b.xy) : vec4(a.yzw, b.x);
        }
    }
    vec4 r = vec4(absent);
    uint e0 = 4u * idx - o;
    for (uint k = 0u; k < 4u; ++k)
        if (e0 + k < p.d) r[k] = param_elem(addr, e0 + k);
    return r;
}
#endif
vec4 load_weight(uint row, uint idx) { return load_param(p.weight, 1.0, row, idx); }
vec4 load_bias(uint row, uint idx) { return load_param(p.bias, 0.0, row, idx); }
// Elements of the row in its vectors [a, b).
float slice_count(uint row, uint a, uint b) {
    uint o = row_skew(row);
    uint lo = max(4u * a, o) - o, hi = min(4u * b, p.d + o) - o;
    return hi > lo ? float(hi - lo) : 0.0;
}
#elif DT != 0
// 2-byte elements: a row of x or y starts at base + row * D * 2; VEC 4 reads 4 elements
// (8 bytes, D % 4 == 0 keeps them aligned), VEC 1 one.
#if VEC == 4
#define HALF_ARRAY HalfArray4
#else
#define HALF_ARRAY HalfArray1
#endif
#define half_row(base, row) HALF_ARRAY((base) + uint64_t(row) * uint64_t(p.d) * 2ul)
VT ln_load(uint64_t base, uint row, uint idx) { return half_to_float(half_row(base, row).v[idx]); }
void ln_store(uint row, uint idx, VT v) { half_row(p.y, row).v[idx] = float_to_half(v); }
VT ln_keep(uint row, uint idx, VT v) { return v; }
#if VEC == 4
VT load_param(uint64_t addr, float absent, uint idx) {
    if (addr == 0ul) return VT(absent);
    return SHIFTED != 0u ? ParamVec4(addr).v[idx] : half_to_float(HALF_ARRAY(addr).v[idx]);
}
#else
VT load_param(uint64_t addr, float absent, uint idx) {
    return addr != 0ul ? half_to_float(HALF_ARRAY(addr).v[idx]) : VT(absent);
}
#endif
VT load_weight(uint row, uint idx) { return load_param(p.weight, 1.0, idx); }
VT load_bias(uint row, uint idx) { return load_param(p.bias, 0.0, idx); }
float slice_count(uint row, uint a, uint b) { return float(b - a) * float(VEC); }
#else
VT ln_load(uint64_t base, uint row, uint idx) { return row_ptr(base, row).v[idx]; }
void ln_store(uint row, uint idx, VT v) { row_ptr(p.y, row).v[idx] = v; }
VT ln_keep(uint row, uint idx, VT v) { return v; }
#if VEC == 4
#define ParamArray ParamVec4
#else
#define ParamArray ParamFloat
#endif
VT load_weight(uint row, uint idx) {
    return p.weight != 0ul ? ParamArray(p.weight).v[idx] : VT(1.0);
}
VT load_bias(uint row, uint idx) {
    return p.bias != 0ul ? ParamArray(p.bias).v[idx] : VT(0.0);
}
float slice_count(uint row, uint a, uint b) { return float(b - a) * float(VEC); }
#endif

// A thread's items of a row in registers: v[i] = vector start + i * step where live and
// below lim, else 0, lanes outside the row zeroed (as ln_load gives them). Clamped rows
// take every load first and then the masks, so no branch lies between a thread's loads
// and all ITEMS are in flight at once.
void load_items(out VT v[ITEMS], uint row, uint start, uint step, uint lim, bool live) {
#if ANY_D == 2
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = start + i * step;
        v[i] = live && idx < lim ? ln_load_raw(p.x, row, idx) : VT(0.0);
    }
    for (uint i = 0; i < ITEMS; ++i) v[i] = ln_keep(row, start + i * step, v[i]);
#else
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = start + i * step;
        v[i] = live && idx < lim ? ln_load(p.x, row, idx) : VT(0.0);
    }
#endif
}

// A split slice wholly inside its row (every vector of [first, end) whole, as all but a
// row's first and last slices are) needs none of the masked code: `whole` is uniform over
// the workgroup, and the two-stage split form calls the *_if functions below with a
// literal for `masked` on either side of one branch, so each side compiles to its own
// code and a whole slice loads, keeps and stores as rows of D % 4 == 0 do (the masked
// code on whole vectors cost about 25 points of copy there: each vector's tests and
// branches, not the bytes). Both sides give the same values on a whole slice: the clamp
// and the masks change no lane of a whole vector. The one-stage split form does not use
// them: with them it lost 3-10 points of copy on an H100 (BENCHMARKS.md, 2026-12-07).
#if ANY_D == 2
bool slice_whole(uint row, uint first, uint end) {
    return first < end && whole_vector(first_elem(row, first)) && whole_vector(first_elem(row, end - 1u));
}
VT keep_if(bool masked, uint row, uint idx, VT v) { return masked ? ln_keep(row, idx, v) : v; }
void store_if(bool masked, uint row, uint idx, VT v) {
    if (masked) ln_store(row, idx, v);
    else y_vec(row_base(p.y, row), idx, v);
}
void load_items_if(bool masked, out VT v[ITEMS], uint row, uint start, uint step, uint lim, bool live) {
    if (masked) { load_items(v, row, start, step, lim, live); return; }
    uint64_t at = row_base(p.x, row);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = start + i * step;
        v[i] = live && idx < lim ? x_vec(at, idx) : VT(0.0);
    }
}
#else
bool slice_whole(uint row, uint first, uint end) { return false; }   // no masked code to skip
VT keep_if(bool masked, uint row, uint idx, VT v) { return ln_keep(row, idx, v); }
void store_if(bool masked, uint row, uint idx, VT v) { ln_store(row, idx, v); }
void load_items_if(bool masked, out VT v[ITEMS], uint row, uint start, uint step, uint lim, bool live) {
    load_items(v, row, start, step, lim, live);
}
#endif

bool is_finite(float v) { return (floatBitsToUint(v) & 0x7f800000u) != 0x7f800000u; }

// 2^e as a float, for e in [-126, 127] (a normal float: exact scaling).
float pow2(int e) { return uintBitsToFloat(uint(127 + e) << 23); }

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

// Reductions for scaled_stats, by how a form shares a row (define LN_SHARE before the
// include): 0 the workgroup, 2 nobody (one invocation per row), 3 a segment of SEG
// lanes of a subgroup (the subgroup form).
#ifndef LN_SHARE
#define LN_SHARE 0
#endif
float group_max(float v) {
    float s = subgroupMax(v);
    if (subgroupElect()) partials[gl_SubgroupID] = vec2(s, 0.0);
    barrier();
    float t = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) t = max(t, partials[i].x);
    barrier();
    return t;
}
#if LN_SHARE == 0
float share_sum(float v) { return group_sum(vec2(v, 0.0)).x; }
float share_max(float v) { return group_max(v); }
#elif LN_SHARE == 3
// Segments of SEG = WG / ROWS lanes (a power of two dividing the subgroup) share a row.
// A segment as wide as the subgroup reduces with subgroup operations; narrower ones
// through `partials`, each lane adding its segment's values in the same order, so
// every lane of a segment gets the identical result, or (SHUFFLES) by a butterfly of
// shuffles, in which partners add the same two values (addition commutes), so every
// lane of a segment again ends with the identical result. Called by whole subgroups.
#extension GL_KHR_shader_subgroup_shuffle : require
layout(constant_id = 5) const uint SHUFFLES = 0;
const uint SEG = WG / ROWS;
uint seg_slot() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }
vec2 share_sum2(vec2 v) {
    if (SEG == gl_SubgroupSize) return subgroupAdd(v);
    if (SEG == 1u) return v;
    if (SHUFFLES != 0u) {
        for (uint m = 1u; m < SEG; m <<= 1) v += subgroupShuffleXor(v, m);
        return v;
    }
    uint at = seg_slot();
    partials[at] = v;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    vec2 t = vec2(0.0);
    for (uint i = at - at % SEG, end = i + SEG; i < end; ++i) t += partials[i];
    subgroupBarrier();   // every lane has read before `partials` is written again
    return t;
}
float share_sum(float v) { return share_sum2(vec2(v, 0.0)).x; }
float share_max(float v) {
    if (SEG == gl_SubgroupSize) return subgroupMax(v);
    if (SEG == 1u) return v;
    if (SHUFFLES != 0u) {
        for (uint m = 1u; m < SEG; m <<= 1) v = max(v, subgroupShuffleXor(v, m));
        return v;
    }
    uint at = seg_slot();
    partials[at] = vec2(v, 0.0);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    float t = 0.0;
    for (uint i = at - at % SEG, end = i + SEG; i < end; ++i) t = max(t, partials[i].x);
    subgroupBarrier();
    return t;
}
#else
float share_sum(float v) { return v; }
float share_max(float v) { return v; }
#endif

// The exponent field (0..255) of the largest |component|, as a float (exact).
float exponent_field(VT v) {
#if VEC == 4
    uvec4 e = (floatBitsToUint(v) >> 23) & 0xffu;
    return float(max(max(e.x, e.y), max(e.z, e.w)));
#else
    return float((floatBitsToUint(v) >> 23) & 0xffu);
#endif
}

// Statistics of a row whose fast statistics were not finite, from memory, every
// invocation sharing the row taking vectors start, start + stride, ... With
// e = clamp(exponent of max |x|, 0, 126), xs = x * 2^-e is below 4 in magnitude, so its
// sums and squares cannot overflow; a two-pass over xs (corrected mean, then the sum of
// squared deviations from it) gives mean_s and var_s, and mean = mean_s * 2^e.
// y = ((xs - mean_s) * a) * b, with b the invstd when var = var_s * 2^2e (+ eps) is a
// float (a = 2^e, and |xs - mean_s| * a <= 2 max|x|), else b = 1/sqrt(var_s + eps * 2^-2e)
// (a = 1) and invstd = b * 2^-e, which may be subnormal (or 0 where the device flushes
// subnormals); y is right either way.
// Rows holding NaN or +-inf (exponent field 255): mean = sum(xs) * 2^e (NaN, or +-inf),
// invstd and y NaN, as PyTorch.
// The scaling is `precise`: a compiler may otherwise factor x.x * s + x.y * s into
// (x.x + x.y) * s (Mesa does), which overflows exactly where the scale was for.
struct ScaledStats { float scale, mean_s, a, b, mean, invstd; };
VT scaled_x(uint row, uint idx, float scale) {
    precise VT xs = ln_load(p.x, row, idx) * scale;
    return xs;
}
#define LN_XS(row, idx) scaled_x(row, idx, z.scale)
ScaledStats scaled_stats(uint row, uint start, uint stride) {
    ScaledStats z;
    float em = 0.0;
    for (uint idx = start; idx < p.n; idx += stride) em = max(em, exponent_field(ln_load(p.x, row, idx)));
    int e = clamp(int(share_max(em)) - 127, 0, 126);
    z.scale = pow2(-e);
    float s = 0.0;
    for (uint idx = start; idx < p.n; idx += stride) s += hsum(LN_XS(row, idx));
    float m0 = share_sum(s) / float(p.d);
    if (!is_finite(m0)) {
        const float nan = uintBitsToFloat(0x7fc00000u);
        z.mean_s = 0.0; z.a = 1.0; z.b = nan;
        z.mean = m0 * pow2(e); z.invstd = nan;
        return z;
    }
    float c = 0.0;
    for (uint idx = start; idx < p.n; idx += stride) c += hsum(ln_keep(row, idx, LN_XS(row, idx) - m0));
    z.mean_s = m0 + share_sum(c) / float(p.d);
    float q = 0.0;
    for (uint idx = start; idx < p.n; idx += stride) { VT r = ln_keep(row, idx, LN_XS(row, idx) - z.mean_s); q += hsum(r * r); }
    float var_s = share_sum(q) / float(p.d);
    z.mean = z.mean_s * pow2(e);
    float ve = var_s * pow2(e) * pow2(e) + p.eps;
    if (is_finite(ve)) {
        z.a = pow2(e); z.b = invsqrt_refined(ve); z.invstd = z.b;
    } else {
        z.a = 1.0; z.b = invsqrt_refined(var_s + p.eps * pow2(-e) * pow2(-e));
        z.invstd = z.b * pow2(-e);
    }
    return z;
}

// y for vector idx of a row that took scaled_stats.
VT scaled_y(ScaledStats z, uint row, uint idx) {
    precise VT y = ((LN_XS(row, idx) - z.mean_s) * z.a) * z.b;
    return fma(y, load_weight(row, idx), load_bias(row, idx));
}
