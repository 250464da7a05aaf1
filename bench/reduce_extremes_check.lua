-- max/min with indices over the last dim, the automatic kernel choice, on a seeded list of
-- shapes (fixed odd/prime rows and a log-uniform draw of D), against plain Lua on the same
-- rounded inputs (NaN, infinities and ties sprinkled in): values bit-equal (NaN as NaN),
-- indices the first extreme or the first NaN. For a real GPU, where the specs do not run:
--   lua5.4 bench/reduce_extremes_check.lua [seed] [masked|elements]
-- (the second argument forces the row form's masked units or element reads: tune.reduce)
local lumus = require("lumus")
local seed = tonumber(arg[1]) or 7
if arg[2] == "masked" or arg[2] == "elements" then lumus.tune.reduce({ masked = arg[2] == "masked" })
elseif arg[2] then error("bench/reduce_extremes_check.lua: the second argument must be masked or elements") end
math.randomseed(seed)
local shapes = { {1, 1}, {3, 7}, {5, 31}, {2, 33}, {7, 97}, {3, 1023}, {2, 2053}, {4, 4099},
  {1, 65537}, {2, 100003}, {33, 129}, {9, 255}, {1, 300007} }
for _ = 1, 12 do
  local d = math.floor(math.exp(math.random() * math.log(200000)))
  shapes[#shapes + 1] = { math.max(1, math.min(40, 400000 // d)), d }
end
local passed, failed = 0, 0
for _, dtype in ipairs({ "float32", "float16", "bfloat16" }) do
  for _, sh in ipairs(shapes) do
    local rows, d = sh[1], sh[2]
    local v = {}
    for i = 1, rows * d do
      local u = math.random()
      local x = (math.random() - 0.5) * 8
      if u < 0.002 then x = 0 / 0 elseif u < 0.004 then x = math.huge elseif u < 0.006 then x = -math.huge
      elseif u < 0.1 then x = math.floor(x) end   -- ties
      v[i] = x
    end
    local x = lumus.tensor(v):view({ rows, d }):to(dtype)
    local xs = x:float():to_table()
    for _, op in ipairs({ "max", "min" }) do
      local vals, idx = lumus[op](x, { dim = 2 })
      vals, idx = vals:float():to_table(), idx:to_table()
      local bad
      for r = 1, rows do
        local row = xs[r]
        local best, bi = row[1], 1
        if best == best then
          for k = 2, d do
            local e = row[k]
            if e ~= e then best, bi = e, k; break end
            if (op == "max" and e > best) or (op == "min" and e < best) then best, bi = e, k end
          end
        end
        local got = vals[r]
        local same = (got == best) or (got ~= got and best ~= best)
        -- lumus indices are 1-based, as Lua
        if not same or idx[r] ~= bi then
          bad = ("row %d: got %s @%s, want %s @%d"):format(r, tostring(got), tostring(idx[r]), tostring(best), bi)
          break
        end
      end
      if bad then failed = failed + 1; print(("FAIL %s %s %dx%d %s"):format(op, dtype, rows, d, bad))
      else passed = passed + 1 end
    end
  end
end
print(("%d passed, %d failed"):format(passed, failed))
