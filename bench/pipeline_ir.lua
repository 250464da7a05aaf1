-- bench/pipeline_ir.lua: LayerNorm's pipelines for neighbouring masked (D % 4 != 0) and
-- aligned rows, each form the plan takes for them, built once so that the driver's
-- statistics and internal representations of each can be compared. Run as
--
--   LUMUS_PIPELINE_CACHE=off LUMUS_PIPELINE_STATS=1 LUMUS_PIPELINE_IR=DIR \
--     lua5.4 bench/pipeline_ir.lua [--dtypes float32,float16] [--shapes 4043x65482,4096x65536,...]
--
-- Each case prints its plan on stdout; the statistics go to stderr and the internal
-- representations (where the driver gives them) into DIR, one file per pipeline, named
-- by shader and specialization constants (src/pipelines.c).
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = require "lumus"

local args = common.parse_args(arg, { dtypes = true, shapes = true })
local shapes = common.parse_shapes(args.shapes or
  "4043x65482,4096x65536,1080x196917,1080x196920,54047x871,54047x872,269578x95,269578x96")
local dtypes = {}
for dt in (args.dtypes or "float32,float16"):gmatch("[^,%s]+") do dtypes[#dtypes + 1] = dt end

for _, dt in ipairs(dtypes) do
  for _, s in ipairs(shapes) do
    local rows, d = s[1], s[2]
    local c = lumus.tune.layer_norm(d, nil, rows, dt)
    local x = lumus.zeros({ rows, d }, { dtype = dt })   -- the whole shape: the plan depends on rows
    local w, b = lumus.ones({ d }, { dtype = dt }), lumus.zeros({ d }, { dtype = dt })
    io.stderr:write(("== %s %s: %s/%dx%d%s\n"):format(dt, s.name, c.variant, c.workgroup, c.items, c.masked and "/masked" or ""))
    lumus.layer_norm_forward(x, w, b, 1e-5)
    lumus.synchronize()
    print(("%s\t%s\t%s\t%d\t%d\t%s"):format(dt, s.name, c.variant, c.workgroup, c.items, tostring(c.masked)))
    for _, t in ipairs { x, w, b } do t:free() end
  end
end
