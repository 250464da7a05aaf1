/* Strided views in the op layer: the strided copy and fill kernels
 * (shaders/strided_copy.comp), the contiguous copy an op makes of an input it cannot
 * read by strides, and t:contiguous(). */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

#define STRIDED_WG 256
#define STRIDED_ELEMS 4
#define U32_MAX 0xffffffffLL

/* Drops size-1 dimensions and merges each dimension into the one outside it when both
 * sides step over it contiguously with it (outer stride = inner stride * inner size);
 * returns the number of dimensions left (at least 1). */
static int collapse(int ndim, const int64_t *shape, const int64_t *ss, const int64_t *ds,
                    int64_t *size, int64_t *s, int64_t *d) {
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1) continue;
        if (n > 0 && s[n - 1] == ss[i] * shape[i] && d[n - 1] == ds[i] * shape[i]) {
            size[n - 1] *= shape[i];
            s[n - 1] = ss[i];
            d[n - 1] = ds[i];
            continue;
        }
        size[n] = shape[i]; s[n] = ss[i]; d[n] = ds[i];
        n++;
    }
    if (n == 0) { size[0] = 1; s[0] = 0; d[0] = 0; n = 1; }
    return n;
}

#define TRANSPOSE_TILE 32
#define FILL_FLAG 0x100u   /* shaders/strided_copy.comp */

void lm_require_narrow_storage(lua_State *L, lm_context *ctx, const char *op, lm_dtype d) {
    if (!ctx->narrow_storage)
        luaL_error(L, "%s: this device lacks 8/16-bit storage (needed for %s tensors here)", op, lm_dtype_name(d));
}

/* The variant of each element size: 4-byte, 2-byte (16-bit storage), 1-byte (8-bit). */
static lm_shader_id sized(lua_State *L, lm_context *ctx, const char *op, lm_dtype d, lm_shader_id s4,
                          lm_shader_id s2, lm_shader_id s1) {
    unsigned es = lm_dtype_size(d);
    if (es == 4) return s4;
    lm_require_narrow_storage(L, ctx, op, d);
    return es == 2 ? s2 : s1;
}

static void check_u32(lua_State *L, const char *op, int64_t v) {
    if (v > U32_MAX)
        luaL_error(L, "%s: a view with a dimension or stride of 2^32 elements or more (after merging "
                   "contiguous dimensions) is not supported", op);
}

/* The tiled form for merged dimensions [B,] R, C where src steps 1 along R and dst 1
 * along C (a transposed matrix made contiguous): returns 0 when the shape is not that. */
static int record_transpose32(lua_State *L, lm_tensor *src, lm_tensor *dst, int n,
                              const int64_t *size, const int64_t *s, const int64_t *d) {
    if (!(n == 2 || n == 3) || d[n - 1] != 1 || s[n - 2] != 1 || s[n - 1] == 1) return 0;
    int64_t batch = n == 3 ? size[0] : 1;
    struct {
        uint64_t src, dst;
        uint32_t batch, r, c, src_b, src_c, dst_b, dst_r, tiles_r, tiles_c, groups_x;
    } pc = {
        .src = lm_tensor_address(src), .dst = lm_tensor_address(dst),
        .batch = (uint32_t)batch, .r = (uint32_t)size[n - 2], .c = (uint32_t)size[n - 1],
        .src_b = n == 3 ? (uint32_t)s[0] : 0, .src_c = (uint32_t)s[n - 1],
        .dst_b = n == 3 ? (uint32_t)d[0] : 0, .dst_r = (uint32_t)d[n - 2],
        .tiles_r = (uint32_t)((size[n - 2] + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE),
        .tiles_c = (uint32_t)((size[n - 1] + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE),
    };
    lm_context *ctx = dst->storage->ctx;
    lm_shader_id shader = sized(L, ctx, "copy", dst->dtype, LM_SH_STRIDED_TRANSPOSE, LM_SH_STRIDED_TRANSPOSE16,
                                LM_SH_STRIDED_TRANSPOSE8);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (uint64_t)pc.tiles_r * pc.tiles_c * (uint64_t)batch, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "copy", .any_dtype = 1, .shader = shader, .spec = { TRANSPOSE_TILE * 8, 0, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
    return 1;
}

#define TILE64 64
#define TILE64_BATCH 4   /* shaders/transpose.comp's MAX_BATCH */

/* The tile64 form (shaders/transpose.comp) for merged dimensions where dst steps 1 along
 * the last, C, src steps more than 1 there and 1 along another, R; the rest (up to
 * TILE64_BATCH) are batches: returns 0 when the shape is not that or its offsets within
 * a tile or its workgroup count would pass 32 bits. */
static int record_transpose64(lua_State *L, lm_tensor *src, lm_tensor *dst, int n,
                              const int64_t *size, const int64_t *s, const int64_t *d) {
    int c = n - 1, r = -1;
    if (n < 2 || d[c] != 1 || s[c] == 1) return 0;
    for (int i = 0; i < c; i++) if (s[i] == 1) r = i;
    if (r < 0 || n - 2 > TILE64_BATCH) return 0;
    const int64_t lim = (int64_t)1 << 32;
    if (s[c] >= lim / TILE64 - 1 || d[r] >= lim / TILE64 - 1) return 0;
    struct {
        uint64_t src, dst;
        uint32_t r, c, src_c, dst_r, tiles_r, tiles_c, groups, groups_x, nbatch;
        uint32_t bsize[TILE64_BATCH], src_b[TILE64_BATCH], dst_b[TILE64_BATCH];
    } pc = {
        .src = lm_tensor_address(src), .dst = lm_tensor_address(dst),
        .r = (uint32_t)size[r], .c = (uint32_t)size[c], .src_c = (uint32_t)s[c], .dst_r = (uint32_t)d[r],
        .tiles_r = (uint32_t)((size[r] + TILE64 - 1) / TILE64),
        .tiles_c = (uint32_t)((size[c] + TILE64 - 1) / TILE64),
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "transpose push constants");
    uint64_t groups = (uint64_t)pc.tiles_r * pc.tiles_c;
    for (int i = 0; i < c; i++) {
        if (i == r) continue;
        pc.bsize[pc.nbatch] = (uint32_t)size[i];
        pc.src_b[pc.nbatch] = (uint32_t)s[i];
        pc.dst_b[pc.nbatch] = (uint32_t)d[i];
        pc.nbatch++;
        groups *= (uint64_t)size[i];
        if (groups >= (uint64_t)lim) return 0;
    }
    if (groups >= (uint64_t)lim) return 0;
    pc.groups = (uint32_t)groups;
    lm_context *ctx = dst->storage->ctx;
    lm_shader_id shader = sized(L, ctx, "copy", dst->dtype, LM_SH_TRANSPOSE64, LM_SH_TRANSPOSE64_16,
                                LM_SH_TRANSPOSE64_8);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "copy", .any_dtype = 1, .shader = shader,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
    return 1;
}

/* The transpose forms a strided copy may take (tune.transpose). */
enum { TRANSPOSE_TILE64, TRANSPOSE_TILE32, TRANSPOSE_NONE };
static const char *const transpose_forms[] = { "tile64", "tile32", "general", NULL };

static int record_transpose(lua_State *L, lm_tensor *src, lm_tensor *dst, int n,
                            const int64_t *size, const int64_t *s, const int64_t *d) {
    int form = dst->storage->ctx->transpose_form;
    if (form == TRANSPOSE_NONE) return 0;
    if (form == TRANSPOSE_TILE64 && record_transpose64(L, src, dst, n, size, s, d)) return 1;
    return record_transpose32(L, src, dst, n, size, s, d);
}

/* tune.transpose([{form = "tile64" | "tile32" | "general"}]) -> the form strided copies
 * that transpose take: tile64 (the default; tile32 where its shape limits exclude it),
 * tile32 (32 x 32 tiles, [B,] R, C shapes only), or general (no tiles). {} restores the
 * default. */
int lm_op_transpose_config(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    static const char *const known[] = { "form", NULL };
    if (lm_check_options(L, 1, known))
        ctx->transpose_form = lm_option_choice(L, 1, "form", transpose_forms, TRANSPOSE_TILE64);
    lua_pushstring(L, transpose_forms[ctx->transpose_form]);
    return 1;
}

/* dst = src element by element over dst's shape (src has the same shape and dtype,
 * possibly with stride-0 dimensions), or dst = the element `value` (dst's dtype) when
 * src is NULL. Elements move as bits. */
static void record_strided(lua_State *L, lm_tensor *src, lm_tensor *dst, const void *value) {
    static const int64_t zeros[LM_MAX_DIMS] = { 0 };
    const char *op = src ? "copy" : "fill";
    lm_context *ctx = dst->storage->ctx;
    if (src && src->dtype != dst->dtype)
        luaL_error(L, "%s: dtypes %s and %s differ (internal: a strided copy does not convert)", op,
                   lm_dtype_name(src->dtype), lm_dtype_name(dst->dtype));
    lm_shader_id shader = sized(L, ctx, op, dst->dtype, LM_SH_STRIDED_COPY, LM_SH_STRIDED_COPY16, LM_SH_STRIDED_COPY8);
    int64_t size[LM_MAX_DIMS], s[LM_MAX_DIMS], d[LM_MAX_DIMS];
    int n = collapse(dst->ndim, dst->shape, src ? src->strides : zeros, dst->strides, size, s, d);
    for (int i = 0; i < n; i++) { check_u32(L, op, size[i]); check_u32(L, op, s[i]); check_u32(L, op, d[i]); }
    if (src && record_transpose(L, src, dst, n, size, s, d)) return;
    /* A copy whose innermost runs are contiguous on both sides and every step and start
     * 16-byte aligned moves 16-byte units (a head split's permute, a narrow of whole rows). */
    uint64_t units = (uint64_t)dst->numel;
    if (src) {
        int64_t es = (int64_t)lm_dtype_size(dst->dtype);
        uint64_t sa = lm_tensor_address(src), da = lm_tensor_address(dst);
        int ok = s[n - 1] == 1 && d[n - 1] == 1 && size[n - 1] * es % 16 == 0 && sa % 16 == 0 && da % 16 == 0;
        for (int i = 0; ok && i < n - 1; i++) ok = s[i] * es % 16 == 0 && d[i] * es % 16 == 0;
        if (ok) {
            int64_t k = 16 / es;
            size[n - 1] /= k;
            for (int i = 0; i < n - 1; i++) { s[i] /= k; d[i] /= k; }
            units /= (uint64_t)k;
            shader = LM_SH_STRIDED_COPY128;
        }
    }
    struct {
        uint64_t src, dst, n;
        uint32_t ndim_flags, groups_x;
        uint32_t size[LM_MAX_DIMS], src_stride[LM_MAX_DIMS], dst_stride[LM_MAX_DIMS];
    } pc = { .dst = lm_tensor_address(dst), .n = units, .ndim_flags = (uint32_t)n };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "strided copy push constants");
    if (src) {
        pc.src = lm_tensor_address(src);
    } else {
        uint32_t bits = 0;
        memcpy(&bits, value, lm_dtype_size(dst->dtype));   /* little-endian: the low bits */
        pc.src = bits;
        pc.ndim_flags |= FILL_FLAG;
    }
    for (int i = 0; i < n; i++) {
        pc.size[i] = (uint32_t)size[i];
        pc.src_stride[i] = (uint32_t)s[i];
        pc.dst_stride[i] = (uint32_t)d[i];
    }
    uint64_t per_group = (uint64_t)STRIDED_WG * STRIDED_ELEMS;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (units + per_group - 1) / per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shader, .spec = { STRIDED_WG, STRIDED_ELEMS, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
}

void lm_record_strided_copy(lua_State *L, lm_tensor *src, lm_tensor *dst) { record_strided(L, src, dst, NULL); }
void lm_record_strided_fill_element(lua_State *L, lm_tensor *t, const void *elem) { record_strided(L, NULL, t, elem); }
void lm_record_strided_fill(lua_State *L, lm_tensor *t, float v) {
    if (t->dtype != LM_FLOAT32) luaL_error(L, "fill: a float value for a %s tensor (internal)", lm_dtype_name(t->dtype));
    record_strided(L, NULL, t, &v);
}

int lm_broadcast_view(const lm_tensor *src, const lm_tensor *dst, lm_tensor *view) {
    *view = *src;
    int lead = dst->ndim - src->ndim;
    if (lead < 0) return 0;
    for (int i = 0; i < dst->ndim; i++) {
        int k = i - lead;
        int64_t size = k < 0 ? 1 : src->shape[k];
        if (size != dst->shape[i] && size != 1) return 0;
        view->shape[i] = dst->shape[i];
        view->strides[i] = k < 0 || size != dst->shape[i] ? 0 : src->strides[k];
    }
    view->ndim = dst->ndim;
    view->numel = dst->numel;
    return 1;
}

/* Pushes a contiguous copy of the tensor at slot idx (checked live). */
static void push_contiguous(lua_State *L, int idx) {
    lm_tensor *t = lm_check_tensor(L, idx);
    lm_tensor *dst = lm_push_tensor_dtype(L, t->storage->ctx, t->dtype, t->ndim, t->shape);
    lm_tensor *src = lm_check_tensor(L, idx);   /* the allocation may have run a finalizer */
    lm_record_strided_copy(L, src, dst);
}

void lm_contiguous_inputs(lua_State *L, int first, int last) {
    for (int i = first; i <= last; i++) {
        lm_tensor *t = luaL_testudata(L, i, LM_TENSOR_MT);
        if (!t || !t->storage || !t->storage->ctx || lm_tensor_is_plain(t)) continue;
        push_contiguous(L, i);
        lua_replace(L, i);
    }
}

/* t:contiguous(): t itself when contiguous, else a contiguous copy. */
int lm_op_contiguous(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_check_options(L, 2, lm_no_options);
    lua_settop(L, 1);
    if (!lm_tensor_is_contiguous(t)) push_contiguous(L, 1);
    return 1;
}
