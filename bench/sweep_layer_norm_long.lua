-- bench/sweep_layer_norm_long.lua: rows too long for one workgroup (default 4096 x 65536)
-- through the split form's settings: SM classes (parts taken by the multiprocessor's
-- class) or tickets, record protocol (64-bit tagged words or 32-bit words behind
-- fences), parts per row and workgroup size, the context's scratch against a fresh one
-- per call, and the streaming form; with weight and bias (as bench/layer_norm.lua runs
-- it) and without. Each setting is timed in rounds that alternate with the copy ceiling
-- (best round kept), its fallbacks counted (parts that stopped waiting for their
-- partners) and its output checked against lumus.reference on sample rows. Chose the
-- split defaults in src/ops/layer_norm.c. Sized for the H200 (3 GiB of tensors):
--
--   lua5.4 bench/sweep_layer_norm_long.lua [--shape 4096x65536] [--rounds 3] [--iters 15]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
local ref = common.load_reference()

local opt = common.parse_args(arg, { shape = true, rounds = true, iters = true }, {},
  "usage: lua5.4 bench/sweep_layer_norm_long.lua [--shape RxD] [--rounds N] [--iters N]")
local R, D = table.unpack(common.parse_shapes(opt.shape or "4096x65536")[1])
local rounds = common.int_opt(opt.rounds, 3)
local iters = common.int_opt(opt.iters, 15)

-- {label, tuning, affine}: tuning goes to lumus.tune.layer_norm as it is. "fresh
-- scratch" is the tuning hook's return_scratch: a scratch of the call's own, zeroed by
-- a fill (and a barrier) before it, as every call did before the context kept one.
local settings = {
  { "default", {}, true },
  { "no classes", { classes = 1 }, true },
  { "4 parts of 512", { parts = 4, wg = 512 }, true },
  { "16 parts of 128", { parts = 16, wg = 128 }, true },
  { "no classes, fresh scratch", { classes = 1, return_scratch = true }, true },
  { "fenced records", { records = "fenced" }, true },
  { "default", {}, false },
  { "no classes", { classes = 1 }, false },
  { "4 parts of 512", { parts = 4, wg = 512 }, false },
  { "streaming form", { form = "stream" }, false },
}

local gen = common.normal_gen(1, ref)
local xbytes, block, k = common.matrix_bytes(gen, R, D)
local wbytes = common.random_bytes(gen, D, 0.1, 1.0)
local bbytes = common.random_bytes(gen, D, 0.1, 0.0)
local x = lumus.from_bytes(xbytes, { R, D })
xbytes = nil
collectgarbage()
local w, b = lumus.from_bytes(wbytes, { D }), lumus.from_bytes(bbytes, { D })
local y, m, r = lumus.empty({ R, D }), lumus.empty({ R }), lumus.empty({ R })
local c = lumus.empty({ R, D })
local bytes = 4 * (2 * R * D + 2 * D + 2 * R)

-- Rows checked: the first, one past the block, the last.
local check = { 0, k % R, R - 1 }
local wv, bv = common.unpack_floats(wbytes), common.unpack_floats(bbytes)
local function max_err(affine)
  local e = 0
  for _, row in ipairs(check) do
    local got = common.unpack_floats(y:to_bytes(row * D + 1, D))
    local xrow = common.unpack_floats(block, (row % k) * D, D)
    local want = ref.layer_norm_forward(xrow, affine and wv or nil, affine and bv or nil, 1e-5)
    e = math.max(e, ref.compare(got, want).max_abs)
  end
  return e
end

print(("# sweep_layer_norm_long: %dx%d on %s, %s"):format(R, D, common.device_line(lumus), os.date("!%Y-%m-%d %H:%M UTC")))
print(("best of %d rounds alternating with the copy, each the median of %d gpu_time samples"):format(rounds, iters))
print()
local rows = {}
for _, s in ipairs(settings) do
  local label, tune, affine = s[1], s[2], s[3]
  local cfg = lumus.tune.layer_norm(D, tune)
  local ww, bb = nil, nil
  if affine then ww, bb = w, b end
  local function ln()
    local _, _, _, scratch = lumus.layer_norm_forward(x, ww, bb, 1e-5, { out = y, mean = m, invstd = r })
    if scratch then scratch:free() end
  end
  local function cp() lumus.copy(x, { out = c }) end
  local t_ln, t_cp = math.huge, math.huge
  for _ = 1, rounds do
    t_ln = math.min(t_ln, (common.device_time(lumus, ln, iters, 2)))
    t_cp = math.min(t_cp, (common.device_time(lumus, cp, iters, 2)))
  end
  local fb = "-"
  if cfg.variant == "split" then
    local t2 = {}
    for key, v in pairs(tune) do t2[key] = v end
    t2.return_scratch = true
    lumus.tune.layer_norm(D, t2)
    local _, _, _, scratch = lumus.layer_norm_forward(x, ww, bb, 1e-5, { out = y, mean = m, invstd = r })
    local tickets, fallbacks = string.unpack("<I4I4", scratch:to_bytes(1, 2))
    fb = ("%d/%d"):format(fallbacks, tickets)
    scratch:free()
  else
    ln()
  end
  lumus.tune.layer_norm(D, {})
  local gbs, copy_gbs = bytes / t_ln / 1e9, 8 * R * D / t_cp / 1e9
  -- The hook reports the choice for a call with weight or bias; without them the
  -- automatic choice takes tickets, not SM classes.
  local classes = cfg.classes or 1
  if not affine and not (tune.classes and tune.classes > 1) then classes = 1 end
  rows[#rows + 1] = {
    label, affine and "yes" or "no", cfg.variant .. (cfg.records and (" " .. cfg.records) or "")
      .. (classes > 1 and (", " .. classes .. " classes") or ""),
    ("%dx%d"):format(cfg.workgroup, cfg.items), cfg.parts or cfg.rows_per_group,
    common.fmt(t_ln * 1e6, 1), common.fmt(gbs, 0), common.fmt(copy_gbs, 0),
    common.fmt(100 * gbs / copy_gbs, 1), fb, ref and ("%.2e"):format(max_err(affine)) or "-",
  }
  io.stderr:write(table.concat(rows[#rows], "  "), "\n")
end
print(common.markdown_table(
  { "setting", "weight, bias", "form", "wg x items", "parts", "µs", "GB/s", "copy GB/s", "% of copy", "fallbacks/tickets", "max err" },
  rows, { "l", "l", "l", "l" }))
