#version 450
// Deterministic scatter-add along one dimension (lumus.index_add, lumus.scatter_add):
//   out[o, i, c] = t[o, i, c] + sum over j = 0..m-1, in order, of src[o, j, c]
//                  where ids(o, j, c) == i + 1 (ids 1-based; others add nothing),
// t and out viewed as [outer, size, inner], src as [outer, m, inner] (all contiguous).
// ids(o, j, c) is ids[j] (index_add: one id per slice, IDS_PER_ELEMENT 0) or
// ids[(o * m + j) * inner + c] (scatter_add: ids shaped as src, 1).
//
// One thread per output element scans all m ids and adds the matching src values in j
// order, so the result is the same bits on every run (no float atomics). The cost is
// m compares per output element; the ids are read by every thread of a row alike and
// stay in cache.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ids { int v[]; };

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t t, ids, src, dst;
    uint outer, size, inner, m;
    uint groups_x;
} p;

#if TILE
// The tiled form of index_add (IDS_PER_ELEMENT 0, inner >= the workgroup's width in
// use): a workgroup owns TILE consecutive rows i0.. of one outer block and one column
// per thread; it reads the ids once per workgroup, a workgroup-wide chunk at a time into
// shared memory, and each thread adds src[o, j, c] into its accumulator of row ids[j] - 1
// when that row is in the tile, for j in order: the same sums in the same order as the
// plain form, for numel(t) / TILE * #ids compares instead of numel(t) * #ids.
const uint WG = gl_WorkGroupSize.x;
shared int sh_ids[WG];

void main() {
    uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    uint col_groups = (p.inner + WG - 1) / WG;
    uint row_tiles = (p.size + TILE - 1) / TILE;
    uint cg = group % col_groups;
    uint rest = group / col_groups;
    uint tile = rest % row_tiles;
    uint o = rest / row_tiles;
    if (o >= p.outer) return;   // uniform per workgroup
    uint lid = gl_LocalInvocationID.x;
    uint c = cg * WG + lid;
    bool live = c < p.inner;
    uint i0 = tile * TILE;
    float acc[TILE];
    [[unroll]] for (uint r = 0; r < TILE; ++r) {
        uint i = i0 + r;
        acc[r] = live && i < p.size ? Floats(p.t + ((uint64_t(o) * p.size + i) * p.inner + c) * 4ul).v[0] : 0.0;
    }
    uint64_t base = (uint64_t(o) * p.m * p.inner + c) * 4ul;
    uint64_t step = uint64_t(p.inner) * 4ul;
    for (uint j0 = 0; j0 < p.m; j0 += WG) {
        sh_ids[lid] = j0 + lid < p.m ? Ids(p.ids).v[j0 + lid] : 0;
        barrier();
        uint count = min(WG, p.m - j0);
        for (uint k = 0; k < count; ++k) {
            uint r = uint(sh_ids[k] - 1) - i0;   // wraps past TILE for ids below the tile
            if (r < TILE && live) {
                float v = Floats(p.src + base + uint64_t(j0 + k) * step).v[0];
                [[unroll]] for (uint q = 0; q < TILE; ++q) if (q == r) acc[q] += v;
            }
        }
        barrier();
    }
    [[unroll]] for (uint r = 0; r < TILE; ++r) {
        uint i = i0 + r;
        if (live && i < p.size) Floats(p.dst + ((uint64_t(o) * p.size + i) * p.inner + c) * 4ul).v[0] = acc[r];
    }
}
#else
void main() {
    uint64_t e = uint64_t(gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t n = uint64_t(p.outer) * p.size * p.inner;
    if (e >= n) return;
    uint c = uint(e % p.inner);
    uint64_t r = e / p.inner;
    int id = int(r % p.size) + 1;
    uint64_t o = r / p.size;
    float acc = Floats(p.t + e * 4ul).v[0];
    uint64_t base = (o * p.m * p.inner + c) * 4ul;   // byte offset of src (and per-element ids) at j = 0
    uint64_t step = uint64_t(p.inner) * 4ul;
    for (uint j = 0; j < p.m; ++j) {
        uint64_t s = base + uint64_t(j) * step;
#if IDS_PER_ELEMENT
        int k = Ids(p.ids + s).v[0];
#else
        int k = Ids(p.ids).v[j];
#endif
        if (k == id) acc += Floats(p.src + s).v[0];
    }
    Floats(p.dst + e * 4ul).v[0] = acc;
}
#endif
