-- Shell helpers for the specs that build and start other programs (host_spec,
-- install_spec). Loaded with dofile from the repository root, where busted runs.
local M = {}

M.ROOT = io.popen("pwd"):read("l")

-- Runs a shell command; returns its output (stdout and stderr) and exit code.
-- Under `make sanitize` the sanitizer runtime is preloaded into this process; the
-- compilers, luarocks and host binaries started here are not built for it.
function M.run(cmd)
  local p = io.popen("(unset LD_PRELOAD; " .. cmd .. ") 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

return M
