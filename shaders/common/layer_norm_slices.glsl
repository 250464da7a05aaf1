// A LayerNorm slice's record (shift, mean offset, M2), shared by the split forms
// (layer_norm_split.comp, layer_norm_split2.comp); include after common/layer_norm.glsl.
// Two-pass: shift = the slice's float32 mean, then the deviations' sum and squares. A
// part computes a record from its vectors in registers; a part whose partner has not
// published takes the partner's record from memory, reading the slice twice (no second
// register array, which would cost every call occupancy). Both are the same arithmetic
// on the same values in the same order (`precise`: no contraction or reassociation that
// could differ between them), so a record is a function of the slice alone and every
// part of a row combines identical records, whoever computed them: the row's
// statistics, and whether they overflow and must be rescaled, are the same in all its
// parts. X(i, idx) is the slice's vector idx, held as item i; M says whether the slice may
// hold masked vectors (see slice_whole).
#define SLICE_RECORD(X, M)                                                               \
    float count = slice_count(row, first, end);   /* 0 only past ANY_D's row end */      \
    precise float s = 0.0;                                                               \
    for (uint i = 0; i < ITEMS; ++i) {                                                   \
        uint idx = first + gl_LocalInvocationID.x + i * WG;                              \
        precise VT xi = idx < end ? X(i, idx) : VT(0.0);                                 \
        s += hsum(xi);                                                                   \
    }                                                                                    \
    precise float total = group_sum(vec2(s, 0.0)).x;                                     \
    precise float shift = count > 0.0 ? total / count : 0.0;                             \
    precise vec2 q = vec2(0.0);                                                          \
    for (uint i = 0; i < ITEMS; ++i) {                                                   \
        uint idx = first + gl_LocalInvocationID.x + i * WG;                              \
        precise VT r = idx < end ? keep_if(M, row, idx, X(i, idx) - shift) : VT(0.0);     \
        q += vec2(hsum(r), hsum(r * r));                                                 \
    }                                                                                    \
    q = group_sum(q);                                                                    \
    precise float offset = count > 0.0 ? q.x / count : 0.0;   /* mean = shift + offset */ \
    precise float m2 = q.y - q.x * offset;                    /* squared deviations */   \
    /* not max(m2, 0.0): max may turn an overflow's NaN into 0, hiding it from rescale */ \
    return vec3(shift, offset, m2 < 0.0 ? 0.0 : m2);

#define X_REGS(i, idx) v[i]
vec3 slice_record_if(bool masked, VT v[ITEMS], uint row, uint first, uint end) { SLICE_RECORD(X_REGS, masked) }
vec3 slice_record(VT v[ITEMS], uint row, uint first, uint end) { return slice_record_if(true, v, row, first, end); }
#define X_MEM(i, idx) ln_load(p.x, row, idx)
vec3 slice_record_from_memory(uint row, uint first, uint end) { SLICE_RECORD(X_MEM, true) }
