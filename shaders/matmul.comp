#version 450
// C = A B (+ bias), float32 with float32 accumulation: the kernel behind lumus.matmul and
// lumus.linear.
//
//   A: M x K row-major (rows lda floats apart), or K x M row-major when TRANS_A (a
//   transposed operand read in place).   B: K x N row-major (rows ldb apart), or N x K
//   row-major when TRANS_B (a torch-style weight [out, in], read as its transpose with no
//   separate pass).   bias: N floats or absent (address 0), added in the epilogue.
//   C: M x N, row-major, contiguous.
//   Batches (gl "z" folded into the grid): batch z = zo * batch_inner + zi, and the bases
//   of A and B advance by zo * stride + zi * stride2 (stride 0 where an operand
//   broadcasts), C's by z * stride_c.
//
// Register-blocked tiled SGEMM. A workgroup computes a BM x BN block of C; each thread a
// TM x TN sub-block held in registers, so one pair of shared-memory reads feeds TM*TN
// FMAs. The K loop steps BK at a time through double-buffered shared tiles: while a tile
// is multiplied from shared memory, the next one is already being read from global
// memory into registers, then stored to the other buffer; one barrier per step.
//
// Shared layout: both tiles are stored k-major (row k holds BM values of A's column k, or
// BN values of B's row k) as vec4s, so the inner loop reads whole vec4s. A thread's rows
// are TM/4 groups of 4, the groups BM/(TM/4) apart (likewise for columns): adjacent
// threads read adjacent vec4s, which keeps shared reads free of bank conflicts. Tiles
// stored transposed (A, and B when TRANS_B) get one vec4 of padding per k row, so the
// scalar stores of different k rows fall in different banks.
//
// VEC4: loads and stores of 4 floats (K and N, M too when TRANS_A, the row and batch
// strides multiples of 4, 16-byte aligned bases); otherwise one float at a time. Every load is bounds-checked (zero outside A or B) and
// every store too, so any M, N, K >= 1 is correct; the checks are a compare per load.
#extension GL_EXT_control_flow_attributes : require
#include "common/buffers.glsl"
#include "common/mm_io.glsl"

layout(local_size_x_id = 0) in;               // (BM/TM) * (BN/TN) threads
#ifdef FIXED_BM
// A compiled-in tile (FIXED_BM, FIXED_BN, FIXED_BK, FIXED_TM, FIXED_TN): the sizes are
// constants from the front end on, so every loop and index is folded before the driver
// sees it (the host passes the same sizes as specialization constants; unused here).
const uint BM = FIXED_BM, BN = FIXED_BN, BK = FIXED_BK, TM = FIXED_TM, TN = FIXED_TN;
#else
layout(constant_id = 1) const uint BM = 128;  // rows of C per workgroup
layout(constant_id = 2) const uint BN = 128;  // columns of C per workgroup
layout(constant_id = 3) const uint BK = 8;    // K per step
layout(constant_id = 4) const uint TM = 8;    // rows per thread (multiple of 4)
layout(constant_id = 5) const uint TN = 8;    // columns per thread (multiple of 4)
#endif
layout(constant_id = 6) const uint TRANS = 0;  // bit 0: TRANS_B, bit 1: TRANS_A, bit 2: ORDER, bit 3: ALIGNED
layout(constant_id = 7) const bool VEC4 = true;
// Thread order (bit 2 of TRANS): 0 puts consecutive threads along a row of the block (a
// group of 32 threads spans 2 x 16 thread positions when BN/TN = 16); 1 puts each group of
// 32 on a 4 x 8 patch of positions (needs (BN/TN) % 8 == 0 and (BM/TM) % 4 == 0, the host
// checks), so that one shared read of the group touches 4 vec4s of A and 8 of B (one
// 128-byte wavefront each) instead of 2 and 16. Either order gives every thread a
// distinct position: only speed depends on it.
const uint ORDER = (TRANS >> 2) & 1u;
const bool TRANS_B = (TRANS & 1u) != 0u;
const bool TRANS_A = (TRANS & 2u) != 0u;
// ALIGNED (bit 3; the host sets it only with VEC4): BM divides M, BN divides N and BK
// divides K, so every tile load is inside A and B and every store inside C, and the
// kernel runs without bounds tests. On the H200 the tests alone cost 10-25%: the K loop
// has few instructions besides its FMAs, and NVIDIA's compiler schedules the global
// loads of the next tile worse with them.
const bool ALIGNED = (TRANS & 8u) != 0u;

layout(push_constant) uniform Params {
    uint64_t a, b, bias, c;                   // device addresses (bias 0 = none)
    uint64_t stride_a, stride_b, stride_c;    // floats between (outer) batches
    uint64_t stride_a2, stride_b2;            // floats between inner batches
    uint m, n, k;
    uint tiles_m, tiles_n;                    // tiles of C per batch
    uint groups_x;                            // grid width (2-D folding)
    uint batch;
    uint group_m;                             // tile rows per band of the launch order
    uint k_rotate;                            // 1: start the K loop at a step set by the tile row
    uint batch_inner;                         // inner batches per outer one (>= 1)
    uint lda, ldb;                            // floats between rows of A and of B as stored
} p;

const uint WG = gl_WorkGroupSize.x;
const uint THREADS_N = BN / TN;               // threads along a row of the block
const uint SA = BM / 4 + 1;                   // vec4s per k row of the A tile (padded)
const uint SB = BN / 4 + (TRANS_B ? 1 : 0);   // vec4s per k row of the B tile
const uint LA = BM * BK / (4 * WG);           // vec4s of A each thread loads per step
const uint LB = BN * BK / (4 * WG);

shared vec4 As[2 * BK * SA];
shared vec4 Bs[2 * BK * SB];

// The staged next tile, in registers between its global load and its shared store.
vec4 ra[LA];
vec4 rb[LB];

// Reads a rows x BK tile of a row-major operand (rows along M or N, `ld` floats apart,
// k of them used) into `regs`: row0 is the tile's first row, nrows the operand's row count.
// Vector form: consecutive threads take consecutive vec4s of a row (coalesced).
#define LOAD_ROWS_TILE(regs, L, base, row0, nrows, ld, k0) \
    [[unroll]] for (uint l = 0; l < L; ++l) { \
        uint e = gl_LocalInvocationID.x + l * WG; \
        if (VEC4) { \
            uint r = e / (BK / 4), kc = (e % (BK / 4)) * 4; \
            bool ok = ALIGNED || (row0 + r < nrows && k0 + kc < p.k); \
            regs[l] = ok ? ld4(base, uint64_t(row0 + r) * ld + (k0 + kc)) : vec4(0.0); \
        } else { \
            [[unroll]] for (uint j = 0; j < 4; ++j) { \
                uint f = e * 4 + j; \
                uint r = f / BK, kk = f % BK; \
                bool ok = row0 + r < nrows && k0 + kk < p.k; \
                regs[l][j] = ok ? ld1(base, uint64_t(row0 + r) * ld + (k0 + kk)) : 0.0; \
            } \
        } \
    }

// Stores such a tile k-major into shared memory (one float per k row and vec4 slot).
#define STORE_ROWS_TILE(regs, L, tile, S, buf) \
    [[unroll]] for (uint l = 0; l < L; ++l) { \
        uint e = gl_LocalInvocationID.x + l * WG; \
        if (VEC4) { \
            uint r = e / (BK / 4), kc = (e % (BK / 4)) * 4; \
            [[unroll]] for (uint j = 0; j < 4; ++j) tile[(buf * BK + kc + j) * S + r / 4][r % 4] = regs[l][j]; \
        } else { \
            [[unroll]] for (uint j = 0; j < 4; ++j) { \
                uint f = e * 4 + j; \
                uint r = f / BK, kk = f % BK; \
                tile[(buf * BK + kk) * S + r / 4][r % 4] = regs[l][j]; \
            } \
        } \
    }

// Reads a BK x cols tile of a k-major operand (K rows `ld` floats apart, ncols of each
// used: B, or A when TRANS_A) into `regs`: col0 is the tile's first column.
#define LOAD_K_MAJOR_TILE(regs, L, COLS, base, col0, ncols, ld, k0) \
    [[unroll]] for (uint l = 0; l < L; ++l) { \
        uint e = gl_LocalInvocationID.x + l * WG; \
        if (VEC4) { \
            uint kr = e / (COLS / 4), nc = (e % (COLS / 4)) * 4; \
            bool ok = ALIGNED || (k0 + kr < p.k && col0 + nc < ncols); \
            regs[l] = ok ? ld4(base, uint64_t(k0 + kr) * ld + (col0 + nc)) : vec4(0.0); \
        } else { \
            [[unroll]] for (uint j = 0; j < 4; ++j) { \
                uint f = e * 4 + j; \
                uint kr = f / COLS, nn = f % COLS; \
                bool ok = k0 + kr < p.k && col0 + nn < ncols; \
                regs[l][j] = ok ? ld1(base, uint64_t(k0 + kr) * ld + (col0 + nn)) : 0.0; \
            } \
        } \
    }

// Stores such a tile as it is (k-major) into shared memory.
#define STORE_K_MAJOR_TILE(regs, L, COLS, tile, S, buf) \
    [[unroll]] for (uint l = 0; l < L; ++l) { \
        uint e = gl_LocalInvocationID.x + l * WG; \
        if (VEC4) { \
            uint kr = e / (COLS / 4), nc = e % (COLS / 4); \
            tile[(buf * BK + kr) * S + nc] = regs[l]; \
        } else { \
            [[unroll]] for (uint j = 0; j < 4; ++j) { \
                uint f = e * 4 + j; \
                uint kr = f / COLS, nn = f % COLS; \
                tile[(buf * BK + kr) * S + nn / 4][nn % 4] = regs[l][j]; \
            } \
        } \
    }

void load_tiles(uint64_t a, uint64_t b, uint m0, uint n0, uint k0) {
    if (TRANS_A) {
        LOAD_K_MAJOR_TILE(ra, LA, BM, a, m0, p.m, p.lda, k0)
    } else {
        LOAD_ROWS_TILE(ra, LA, a, m0, p.m, p.lda, k0)
    }
    if (TRANS_B) {
        LOAD_ROWS_TILE(rb, LB, b, n0, p.n, p.ldb, k0)
    } else {
        LOAD_K_MAJOR_TILE(rb, LB, BN, b, n0, p.n, p.ldb, k0)
    }
}

void store_tiles(uint buf) {
    if (TRANS_A) {
        STORE_K_MAJOR_TILE(ra, LA, BM, As, SA, buf)
    } else {
        STORE_ROWS_TILE(ra, LA, As, SA, buf)
    }
    if (TRANS_B) {
        STORE_ROWS_TILE(rb, LB, Bs, SB, buf)
    } else {
        STORE_K_MAJOR_TILE(rb, LB, BN, Bs, SB, buf)
    }
}

void main() {
    // Launch order: bands of group_m tile rows, column by column within a band, so the
    // workgroups resident at once share rows of A and columns of B in L2.
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    uint per_batch = p.tiles_m * p.tiles_n;
    uint z = g / per_batch;
    if (z >= p.batch) return;                 // padding of a folded grid
    uint t = g % per_batch;
    uint band = t / (p.group_m * p.tiles_n);
    uint first_m = band * p.group_m;
    uint band_m = min(p.tiles_m - first_m, p.group_m);
    uint in_band = t % (p.group_m * p.tiles_n);
    uint m0 = (first_m + in_band % band_m) * BM;
    uint n0 = (in_band / band_m) * BN;

    uint zo = z / p.batch_inner, zi = z - zo * p.batch_inner;
    uint64_t a = p.a + (uint64_t(zo) * p.stride_a + uint64_t(zi) * p.stride_a2) * MM_ELEM_BYTES;
    uint64_t b = p.b + (uint64_t(zo) * p.stride_b + uint64_t(zi) * p.stride_b2) * MM_ELEM_BYTES;
    uint64_t c = p.c + uint64_t(z) * p.stride_c * MM_ELEM_BYTES;

    uint tid = gl_LocalInvocationID.x;
    uint tx, ty;
    if (ORDER == 1u) {
        uint lane = tid % 32u, grp = tid / 32u;
        tx = (grp % (THREADS_N / 8u)) * 8u + lane % 8u;
        ty = (grp / (THREADS_N / 8u)) * 4u + lane / 8u;
    } else {
        tx = tid % THREADS_N;
        ty = tid / THREADS_N;
    }

    vec4 acc[TM][TN / 4];
    [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint j = 0; j < TN / 4; ++j) acc[i][j] = vec4(0.0);

    // K order: with k_rotate, tile row i runs its K steps from step i (mod steps). All
    // the workgroups resident at once would otherwise read the same BK rows of B in the
    // same step: when N is small (N = 768: 6 tile columns) that is a few KiB of B that
    // every SM asks L2 for at the same moment. Rotated, neighbouring tile rows read B
    // one step apart, while the workgroups of one tile row (sharing A) stay in step.
    uint steps = (p.k + BK - 1) / BK;
    uint rot = p.k_rotate != 0u ? (m0 / BM) % steps : 0u;
    // k_next: the K offset of the next step's tiles, wrapping to 0 past the last step
    // (no division in the loop).
    uint k_next = rot * BK;
    load_tiles(a, b, m0, n0, k_next);
    store_tiles(0);
    barrier();
    for (uint s = 0; s < steps; ++s) {
        uint cur = s & 1u;
        bool more = s + 1 < steps;
        k_next += BK;
        if (k_next >= steps * BK) k_next = 0u;
        if (more) load_tiles(a, b, m0, n0, k_next);
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
            vec4 av[TM / 4], bv[TN / 4];
            [[unroll]] for (uint i = 0; i < TM / 4; ++i) av[i] = As[(cur * BK + kk) * SA + i * (BM / TM) + ty];
            [[unroll]] for (uint j = 0; j < TN / 4; ++j) bv[j] = Bs[(cur * BK + kk) * SB + j * (BN / TN) + tx];
            [[unroll]] for (uint i = 0; i < TM; ++i)
                [[unroll]] for (uint j = 0; j < TN / 4; ++j)
                    acc[i][j] = fma(vec4(av[i / 4][i % 4]), bv[j], acc[i][j]);
        }
        if (more) store_tiles(cur ^ 1u);
        barrier();
    }

    // Epilogue: bias, then bounds-checked stores.
    [[unroll]] for (uint j = 0; j < TN / 4; ++j) {
        uint n = n0 + 4 * (j * (BN / TN) + tx);
        vec4 bias = vec4(0.0);
        if (p.bias != 0ul) {
            if (VEC4) {
                if (ALIGNED || n < p.n) bias = ld4(p.bias, n);
            } else {
                [[unroll]] for (uint q = 0; q < 4; ++q)
                    if (n + q < p.n) bias[q] = ld1(p.bias, n + q);
            }
        }
        [[unroll]] for (uint i = 0; i < TM; ++i) {
            uint m = m0 + 4 * ((i / 4) * (BM / TM) + ty) + i % 4;
            if (!ALIGNED && m >= p.m) continue;
            uint64_t row = uint64_t(m) * p.n;
            vec4 v = acc[i][j] + bias;
            if (VEC4) {
                if (ALIGNED || n < p.n) st4(c, row + n, v);
            } else {
                [[unroll]] for (uint q = 0; q < 4; ++q)
                    if (n + q < p.n) st1(c, row + n + q, v[q]);
            }
        }
    }
}
