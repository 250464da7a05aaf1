#version 450
// y = act(x W^T + b), or act(LayerNorm(x) W^T + b) (LN): lumus.linear's path for small
// models (products too small to fill the device with the tiled kernel's blocks) and
// lumus.layer_norm_linear.
//
//   x: M x K row-major, rows lda elements apart.  W: N x K (torch's weight), rows ldb apart.
//   y: M x N, contiguous.  b: N elements (address 0 = none).
//
// A workgroup is 64 threads on an 8 x 8 grid and computes one BM x BN block of y (BM, BN
// in 8, 16, 32: TM = BM/8 rows and TN = BN/8 columns per thread, rows ty + 8i, columns
// tx + 8j, so that threads read shared memory without bank conflicts). K goes by in
// steps of BK (32 to 256: the host takes the largest that its registers and shared
// memory allow, so a small model's K is one or a few steps, each a single round of
// loads in flight, rather than a long chain of dependent ones): each step's x and W tiles are loaded into registers during the
// previous step's multiply-adds (one barrier pair per step), then stored k-major into
// shared memory (a column of one padding so that the scalar stores of consecutive k fall
// in different banks). Consecutive threads read consecutive k of a row (whole 128-byte
// lines), as vec4s with VEC4, else floats. Rows and columns past M and N are clamped on
// load and skipped on store; k past K loads 0.
//
// LN: each workgroup first computes the mean and 1/sqrt(var + eps) of its BM rows over K
// (one shifted pass over the row with several loads in flight per thread, float32,
// biased variance) and normalizes x as it loads it:
// (x - mean) * invstd * ln_w[k] + ln_b[k] (addresses 0: weight 1, bias 0). Accumulation
// is float32; DT picks the element type (common/mm_io.glsl). ACT: common/activation.glsl.
#extension GL_EXT_control_flow_attributes : require
#include "common/buffers.glsl"
#include "common/mm_io.glsl"
#include "common/activation.glsl"

layout(local_size_x_id = 0) in;                  // 64 (the host always passes 64)
layout(constant_id = 1) const uint BM = 16;
layout(constant_id = 2) const uint BN = 16;
layout(constant_id = 3) const uint ACT = 0;
layout(constant_id = 4) const bool LN = false;
layout(constant_id = 5) const bool VEC4 = false;   // K, lda, ldb multiples of 4; x, W, ln_w, ln_b 16-byte aligned
layout(constant_id = 6) const uint BK = 32;        // K per step: a multiple of 32 (the host's choice)

const uint WG = 64;
const uint TM = BM / 8, TN = BN / 8;
const uint SA = BM + 1, SB = BN + 1;          // shared row lengths (k-major, padded)
const uint LA = BM * BK / WG, LB = BN * BK / WG;

layout(push_constant) uniform Params {
    uint64_t a, b, bias, c, ln_w, ln_b;
    uint m, n, k, lda, ldb;
    uint tiles_n;                             // blocks along N
    uint groups_x;                            // grid width (2-D folding)
    uint groups;                              // workgroups with work
    float eps;
} p;

shared float As[BK * SA];
shared float Bs[BK * SB];
shared float red[WG], red2[WG];
shared float row_mean[BM], row_invstd[BM];

// The staged next tiles; with VEC4, vec4s of 4 consecutive k (BK / 4 per row), else floats.
const uint EA = VEC4 ? LA / 4 : LA, EB = VEC4 ? LB / 4 : LB;   // loads per thread and step
const uint PER_ROW = VEC4 ? BK / 4 : BK;                        // loads per row and step
vec4 ra[EA];
vec4 rb[EB];

// Every load of a thread is at the same k offset within the step (WG is a multiple of
// PER_ROW): kq = tid % PER_ROW; its rows are tid / PER_ROW + l * (WG / PER_ROW).
void load_tiles(uint row0, uint col0, uint k0) {
    uint tid = gl_LocalInvocationID.x, kq = tid % PER_ROW, r0 = tid / PER_ROW;
    const uint RSTEP = WG / PER_ROW;
    uint k = k0 + (VEC4 ? 4u * kq : kq);
    bool in_k = k < p.k;   // VEC4: K % 4 == 0, so a vec4 is wholly in or out
    vec4 lw = vec4(1.0), lb = vec4(0.0);
    if (LN && in_k) {
        if (p.ln_w != 0ul) lw = VEC4 ? ld4(p.ln_w, k) : vec4(ld1(p.ln_w, k));
        if (p.ln_b != 0ul) lb = VEC4 ? ld4(p.ln_b, k) : vec4(ld1(p.ln_b, k));
    }
    [[unroll]] for (uint l = 0; l < EA; ++l) {
        uint r = r0 + l * RSTEP;
        vec4 v = vec4(0.0);
        if (in_k) {
            uint64_t at = uint64_t(min(row0 + r, p.m - 1u)) * p.lda + k;
            v = VEC4 ? ld4(p.a, at) : vec4(ld1(p.a, at));
            if (LN) v = (v - row_mean[r]) * row_invstd[r] * lw + lb;
        }
        ra[l] = v;
    }
    [[unroll]] for (uint l = 0; l < EB; ++l) {
        uint r = r0 + l * RSTEP;
        uint64_t at = uint64_t(min(col0 + r, p.n - 1u)) * p.ldb + k;
        rb[l] = in_k ? (VEC4 ? ld4(p.b, at) : vec4(ld1(p.b, at))) : vec4(0.0);
    }
}

void store_tiles() {
    uint tid = gl_LocalInvocationID.x, kq = tid % PER_ROW, r0 = tid / PER_ROW;
    const uint RSTEP = WG / PER_ROW;
    [[unroll]] for (uint l = 0; l < EA; ++l) {
        uint r = r0 + l * RSTEP;
        if (VEC4) {
            [[unroll]] for (uint q = 0; q < 4; ++q) As[(4u * kq + q) * SA + r] = ra[l][q];
        } else {
            As[kq * SA + r] = ra[l].x;
        }
    }
    [[unroll]] for (uint l = 0; l < EB; ++l) {
        uint r = r0 + l * RSTEP;
        if (VEC4) {
            [[unroll]] for (uint q = 0; q < 4; ++q) Bs[(4u * kq + q) * SB + r] = rb[l][q];
        } else {
            Bs[kq * SB + r] = rb[l].x;
        }
    }
}

// LN: the mean and invstd of rows row0 .. row0 + BM - 1 (clamped), WG / BM threads a row,
// in one pass over the row: sums of d = x - x[0] and of d^2 (the shift by the row's first
// element keeps the variance's subtraction from cancelling when the mean is large).
void row_stats(uint row0) {
    const uint T = WG / BM;
    const uint UNR = 4;                            // independent loads in flight per thread
    uint tid = gl_LocalInvocationID.x, r = tid / T, part = tid % T;
    uint64_t base = uint64_t(min(row0 + r, p.m - 1u)) * p.lda;
    float shift = ld1(p.a, base);
    float s = 0.0, q = 0.0;
    if (VEC4) {
        for (uint k0 = 4u * part; k0 < p.k; k0 += 4u * T * UNR) {
            vec4 d[UNR];
            [[unroll]] for (uint u = 0; u < UNR; ++u) {
                uint k = k0 + u * 4u * T;
                d[u] = k < p.k ? ld4(p.a, base + k) - shift : vec4(0.0);
            }
            [[unroll]] for (uint u = 0; u < UNR; ++u) {
                s += (d[u].x + d[u].y) + (d[u].z + d[u].w);
                q += dot(d[u], d[u]);
            }
        }
    } else {
        for (uint k0 = part; k0 < p.k; k0 += T * UNR) {
            float d[UNR];
            [[unroll]] for (uint u = 0; u < UNR; ++u) {
                uint k = k0 + u * T;
                d[u] = k < p.k ? ld1(p.a, base + k) - shift : 0.0;
            }
            [[unroll]] for (uint u = 0; u < UNR; ++u) {
                s += d[u];
                q = fma(d[u], d[u], q);
            }
        }
    }
    red[tid] = s;
    red2[tid] = q;
    barrier();
    if (part == 0u) {
        float ts = 0.0, tq = 0.0;
        for (uint i = 0; i < T; ++i) { ts += red[tid + i]; tq += red2[tid + i]; }
        float md = ts / float(p.k);
        row_mean[r] = shift + md;
        row_invstd[r] = inversesqrt(max(tq / float(p.k) - md * md, 0.0) + p.eps);
    }
    barrier();
}

void main() {
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= p.groups) return;                // padding of a folded grid (whole workgroups)
    // Neighbouring workgroups share a block of rows of x (and, with LN, its statistics).
    uint row0 = (g / p.tiles_n) * BM, col0 = (g % p.tiles_n) * BN;
    uint tid = gl_LocalInvocationID.x, tx = tid % 8u, ty = tid / 8u;
    if (LN) row_stats(row0);

    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

    load_tiles(row0, col0, 0u);
    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        store_tiles();
        barrier();
        if (k0 + BK < p.k) load_tiles(row0, col0, k0 + BK);
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
            float av[TM], bv[TN];
            [[unroll]] for (uint i = 0; i < TM; ++i) av[i] = As[kk * SA + ty + 8u * i];
            [[unroll]] for (uint j = 0; j < TN; ++j) bv[j] = Bs[kk * SB + tx + 8u * j];
            [[unroll]] for (uint i = 0; i < TM; ++i)
                [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier();
    }

    [[unroll]] for (uint j = 0; j < TN; ++j) {
        uint n = col0 + tx + 8u * j;
        if (n >= p.n) continue;
        float bias = p.bias != 0ul ? ld1(p.bias, n) : 0.0;
        [[unroll]] for (uint i = 0; i < TM; ++i) {
            uint m = row0 + ty + 8u * i;
            if (m < p.m) st1(p.c, uint64_t(m) * p.n + n, act_apply(ACT, acc[i][j] + bias));
        }
    }
}
