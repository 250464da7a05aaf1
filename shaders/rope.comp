#version 450
// Rotary position embedding over x [rows, hd] (rows = ... * T, position of row r =
// offset + r % T): each pair (a, b) of a row turns by angle pos * theta_j, theta_j =
// base^(-2j / hd): a' = a cos - b sin, b' = a sin + b cos. Pairs are (j, j + hd/2)
// (rotate-half, GPT-NeoX/Llama) or, with INTERLEAVED, (2j, 2j + 1) (GPT-J).
// Angles in double-float so that float32 does not lose them for long positions:
// theta_j = r^j by squaring in double-float arithmetic (r = base^(-2/hd), given by the
// host as a float pair), pos * theta_j as an exact product plus its error, reduced
// mod 2 pi with a two-part 2 pi (the product n * 2pi_hi exact); cos and sin then take an angle
// in [-pi, pi], where the device's float32 cos and sin are accurate.
// A thread takes one j over ROWS_PER_THREAD consecutive rows (theta computed once).
#include "common/elem_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS_PER_THREAD = 8;

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t rows;
    uint half_d;        // hd / 2
    uint t;             // positions per sequence (x's size along dim -2)
    uint offset;        // position of the first row of each sequence
    uint groups_x;
    float r_hi, r_lo;   // base^(-2/hd) as a float pair
    uint interleaved;
} p;

// Error-free products (Dekker, Veltkamp's split) with `precise`: the device may neither
// contract nor reorder them, and fma need not be fused in Vulkan.
vec2 split(float a) {
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}
vec2 two_prod(float a, float b) {
    vec2 x = split(a), y = split(b);
    precise float h = a * b;
    precise float e = ((x.x * y.x - h) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(h, e);
}
vec2 df_mul(vec2 a, vec2 b) {
    vec2 h = two_prod(a.x, b.x);
    precise float lo = h.y + (a.x * b.y + a.y * b.x);
    precise float s = h.x + lo;
    precise float e = lo - (s - h.x);
    return vec2(s, e);
}

const float TWO_PI_HI = 6.28318548202514648;        // float(2 pi)
const float TWO_PI_LO = -1.7484555314695172e-07;    // 2 pi - TWO_PI_HI
const float INV_TWO_PI = 0.159154943091895336;

void main() {
    uint64_t gid = uint64_t(gl_WorkGroupID.y) * p.groups_x * gl_WorkGroupSize.x + uint64_t(gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint j = uint(gid % p.half_d);
    uint64_t first = (gid / p.half_d) * ROWS_PER_THREAD;
    if (first >= p.rows) return;
    // theta = r^j, double-float
    vec2 theta = vec2(1.0, 0.0), base = vec2(p.r_hi, p.r_lo);
    for (uint e = j; e != 0u; e >>= 1) {
        if ((e & 1u) != 0u) theta = df_mul(theta, base);
        base = df_mul(base, base);
    }
    uint d = 2u * p.half_d;
    uint ia = p.interleaved != 0u ? 2u * j : j;
    uint ib = p.interleaved != 0u ? 2u * j + 1u : j + p.half_d;
    for (uint k = 0; k < ROWS_PER_THREAD; ++k) {
        uint64_t row = first + k;
        if (row >= p.rows) break;
        float pos = float(p.offset + uint(row % p.t));   // exact: positions stay below 2^24
        vec2 ang = two_prod(pos, theta.x);
        precise float ang_lo = ang.y + pos * theta.y;
        float n = round(ang.x * INV_TWO_PI);
        vec2 np = two_prod(n, TWO_PI_HI);       // n * TWO_PI_HI exactly
        precise float red = ((ang.x - np.x) - np.y) + (ang_lo - n * TWO_PI_LO);
        float c = cos(red), s = sin(red);
        uint64_t at = row * d;
        float a = elem_load(p.x, at + ia), b = elem_load(p.x, at + ib);
        elem_store(p.y, at + ia, a * c - b * s);
        elem_store(p.y, at + ib, a * s + b * c);
    }
}
