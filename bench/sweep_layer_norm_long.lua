-- bench/sweep_layer_norm_long.lua: rows of D = 65536 (4096 of them) through the split form's
-- part counts and workgroup sizes and the streaming form, on random and constant data, with
-- the same-run copy ceiling and the split form's fallback count (parts that stopped waiting
-- for their partners and read the whole row). Chose the split defaults in
-- src/ops/layer_norm.c. Sized for the H200 (3 GiB of tensors): lua5.4 bench/sweep_layer_norm_long.lua
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local lumus = require "lumus"
local ref = require "lumus.reference"
local common = require "common"
local function median(t) table.sort(t); return t[(#t+1)//2] end
local function time(fn, n)
  local t0 = lumus.clock(); repeat for i=1,5 do fn() end lumus.synchronize() until lumus.clock()-t0 > 0.15
  local ts={} for i=1,n do ts[i]=lumus.gpu_time(fn) end return median(ts) end
local R, D = 4096, 65536
local gen = common.normal_gen(1, ref)
local xr = lumus.from_bytes(common.matrix_bytes(gen, R, D), {R, D})
local xc = lumus.full({R, D}, 1.5)
local y=lumus.empty({R,D}); local m=lumus.empty({R}); local r=lumus.empty({R}); local c=lumus.empty({R,D})
local bytes=4*(2*R*D+2*D+2*R)
for _, x in ipairs{xr, xc} do
  local tc=time(function() lumus.copy(x,{out=c}) end, 10)
  print(string.format("%s data: copy %.1f GB/s", x == xr and "random" or "constant", 8*R*D/tc/1e9))
  for _,tune in ipairs{{}, {parts=2, spin_limit=0}, {parts=4,wg=512}, {parts=8,wg=256}, {parts=4, wg=1024, items_target=4}, {stream=true}} do
    local cfg=lumus._layer_norm_config(D,tune)
    local t=time(function() lumus.layer_norm_forward(x,nil,nil,1e-5,{out=y,mean=m,invstd=r}) end, 10)
    tune.return_scratch = true
    lumus._layer_norm_config(D,tune)
    local fb = "-"
    local _,_,_,s = lumus.layer_norm_forward(x,nil,nil,1e-5,{out=y,mean=m,invstd=r})
    if s then local tk, f = string.unpack("<I4I4", s:to_bytes(1,2)); fb = f .. "/" .. tk; s:free() end
    print(string.format("  %s wg%d items%d parts%d %.1fus %.1f GB/s %.1f%% fallbacks %s", cfg.variant,cfg.workgroup,cfg.items,cfg.rows_per_group,t*1e6,bytes/t/1e9, 100*(bytes/t)/(8*R*D/tc), fb))
  end
end
