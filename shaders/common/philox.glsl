// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
// and the float steps lumus derives from its words (docs/random.md). Everything here is
// exact integer arithmetic or float32 additions and multiplications marked `precise`
// (correctly rounded in Vulkan, never fused), in an order lua/lumus/reference.lua
// repeats, so the same seed gives the same bits on every device. No intermediate is
// subnormal (where devices may flush to zero): see the bounds at each step.

// One block: 4 words from a 128-bit counter and a 64-bit key, ten rounds.
uvec4 philox4x32_10(uvec4 c, uvec2 k) {
    for (int round = 0; round < 10; ++round) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

// Uniform on [0, 1): the top 24 bits as a multiple of 2^-24 (exact).
float philox_uniform(uint w) {
    return float(w >> 8) * 5.9604644775390625e-8;
}

// ln(v * 2^-24) for an integer v in 1..2^24. v = m 2^e with m in [0.75, 1.5); m is
// m' (1 + j/16) with j = round((m - 1) 16) in -4..8, so r = m c_j - 1 (c_j ~ 1/(1 + j/16))
// is within +-0.042 and ln(1 + r) a degree-6 series; ln m = ln(1 + r) - ln c_j.
// Intermediates: |r| >= 2^-24 unless r == 0, so every term stays normal.
const uint LOG_C[13] = uint[13](
    0x3faaaaabu, 0x3f9d89d9u, 0x3f924925u, 0x3f888889u, 0x3f800000u, 0x3f70f0f1u, 0x3f638e39u,
    0x3f579436u, 0x3f4ccccdu, 0x3f430c31u, 0x3f3a2e8cu, 0x3f321643u, 0x3f2aaaabu);
const uint LOG_L[13] = uint[13](   // -ln(c_j), rounded to float32
    0xbe934b12u, 0xbe549f6cu, 0xbe08bc77u, 0xbd842ccdu, 0x00000000u, 0x3d785185u, 0x3df1383au,
    0x3e2ff983u, 0x3e647fbdu, 0x3e8b3ae5u, 0x3ea30c5du, 0x3eb9cebfu, 0x3ecf991eu);

// The tables are read with an index that varies per invocation: kernels that take logs
// copy them into shared memory once per workgroup (philox_load_log_tables(), then a
// barrier, with at least 13 invocations), rather than leave each invocation a private
// copy of a constant array.
shared float philox_log_c[13], philox_log_l[13];

void philox_load_log_tables() {
    uint i = gl_LocalInvocationID.x;
    if (i < 13u) {
        philox_log_c[i] = uintBitsToFloat(LOG_C[i]);
        philox_log_l[i] = uintBitsToFloat(LOG_L[i]);
    }
}

float philox_log_u24(uint v) {
    uint bits = floatBitsToUint(float(v));            // exact: v <= 2^24
    int e = int(bits >> 23) - 127;
    uint mant = bits & 0x7fffffu;
    if (mant >= 0x400000u) { e += 1; bits = mant | (126u << 23); }
    else bits = mant | (127u << 23);
    precise float m = uintBitsToFloat(bits);          // in [0.75, 1.5)
    precise float x = (m - 1.0) * 16.0 + 0.5;         // exact
    int j = int(floor(x));                            // -4..8
    precise float r = m * philox_log_c[j + 4] - 1.0;
    precise float q = 1.0 + r * (-0.5 + r * (uintBitsToFloat(0x3eaaaaabu) + r * (-0.25
                      + r * (uintBitsToFloat(0x3e4ccccdu) + r * uintBitsToFloat(0xbe2aaaabu)))));
    precise float k = float(e - 24);                  // -24..0
    precise float tail = k * uintBitsToFloat(0x3717f7d1u) + philox_log_l[j + 4];
    precise float result = k * uintBitsToFloat(0x3f317180u) + (tail + r * q);   // ln 2 = hi + lo
    return result;
}

// (sin, cos) of 2 pi t 2^-24 for an integer t in 0..2^24-1: the quadrant and octant come
// from t's bits (exact), the angle left is in [0, pi/4], then Taylor series to x^9 and
// x^10 (truncation below 3e-8). The smallest nonzero angle is 3.7e-7, so terms stay normal.
vec2 philox_sincos_u24(uint t) {
    uint quadrant = t >> 22;
    uint rem = t & 0x3fffffu;
    bool swap = rem > 0x200000u;
    if (swap) rem = 0x400000u - rem;
    precise float a = float(rem) * uintBitsToFloat(0x34c90fdbu);   // float32(2 pi) 2^-24
    precise float a2 = a * a;
    precise float s = a + a * (a2 * (uintBitsToFloat(0xbe2aaaabu) + a2 * (uintBitsToFloat(0x3c088889u)
                      + a2 * (uintBitsToFloat(0xb9500d01u) + a2 * uintBitsToFloat(0x3638ef1du)))));
    precise float c = 1.0 + a2 * (-0.5 + a2 * (uintBitsToFloat(0x3d2aaaabu) + a2 * (uintBitsToFloat(0xbab60b61u)
                      + a2 * (uintBitsToFloat(0x37d00d01u) + a2 * uintBitsToFloat(0xb493f27eu)))));
    vec2 sc = swap ? vec2(c, s) : vec2(s, c);
    if (quadrant == 1u) sc = vec2(sc.y, -sc.x);
    else if (quadrant == 2u) sc = vec2(-sc.x, -sc.y);
    else if (quadrant == 3u) sc = vec2(-sc.y, sc.x);
    return sc;
}

// sqrt(s) for s in [0, 34): three Newton steps on 1/sqrt from the integer estimate.
float philox_sqrt(float s) {
    if (s == 0.0) return 0.0;
    precise float y = uintBitsToFloat(0x5f3759dfu - (floatBitsToUint(s) >> 1));
    precise float h = 0.5 * s;
    for (int i = 0; i < 3; ++i) {
        precise float t = h * y;
        precise float t2 = t * y;
        y = y * (1.5 - t2);
    }
    precise float r = s * y;
    return r;
}

// Two standard normals (Box-Muller) from two words: radius from the first word's top 24
// bits (u in (0, 1]: (w >> 8) + 1 times 2^-24), angle from the second's.
vec2 philox_normal2(uint w0, uint w1) {
    precise float s = -2.0 * philox_log_u24((w0 >> 8) + 1u);
    float radius = philox_sqrt(s);
    vec2 sc = philox_sincos_u24(w1 >> 8);
    precise float z0 = radius * sc.y;
    precise float z1 = radius * sc.x;
    return vec2(z0, z1);
}
