-- bench/sweep_layer_norm.lua: sweeps the workgroup form's vectors per thread (items_target
-- 1, 2, 4, 8) per shape against the same-run copy ceiling, then times small calls end to
-- end. Used to choose the defaults in src/ops/layer_norm.c.  lua5.4 bench/sweep_layer_norm.lua
local lumus = require "lumus"
print(lumus.device().name, lumus.device().driver_info)
local function median(t) table.sort(t); return t[(#t+1)//2] end
local function time(fn, n) local ts={} for i=1,n do ts[i]=lumus.gpu_time(fn) end return median(ts) end
local shapes = {{8192,768},{8192,1024},{4096,4096},{2048,8192},{32768,1024},{65536,768},{16384,4096},{4096,65536},{64,768},{1,4096}}
for _,s in ipairs(shapes) do
  local R,D=s[1],s[2]
  local x=lumus.full({R,D},1.5); local w=lumus.ones({D}); local b=lumus.zeros({D})
  local y=lumus.empty({R,D}); local m=lumus.empty({R}); local r=lumus.empty({R}); local c=lumus.empty({R,D})
  local bytes=4*(2*R*D+2*D+2*R)
  local tc=time(function() lumus.copy(x,{out=c}) end, 20)
  local line=string.format("%6dx%-6d copy %7.1f GB/s", R,D, 8*R*D/tc/1e9)
  for _,it in ipairs{1,2,4,8} do
    local cfg=lumus.tune.layer_norm(D,{items_target=it})
    local t=time(function() lumus.layer_norm_forward(x,w,b,1e-5,{out=y,mean=m,invstd=r}) end, 20)
    line=line..string.format(" | it%d %s wg%d %7.1fus %7.1f GB/s", it, cfg.variant, cfg.workgroup, t*1e6, bytes/t/1e9)
  end
  print(line)
  lumus.tune.layer_norm(D,{})
  x:free() y:free() c:free()
end
-- small calls
for _,s in ipairs{{1,4096},{64,768}} do
  local x=lumus.ones(s); lumus.synchronize()
  local n=2000; local t0=lumus.clock()
  for i=1,n do local y,m,r=lumus.layer_norm_forward(x); lumus.synchronize(); y:free() m:free() r:free() end
  local t1=lumus.clock()
  local t2=lumus.clock()
  for i=1,n do lumus.layer_norm_forward(x) end
  local t3=lumus.clock(); lumus.synchronize(); local t4=lumus.clock()
  print(string.format("%dx%d e2e %.1f us/call; record-only %.2f us/call; chained total %.1f us/op", s[1],s[2], (t1-t0)/n*1e6, (t3-t2)/n*1e6, (t4-t2)/n*1e6))
end
