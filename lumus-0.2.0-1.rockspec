-- The released rock. `make rock` builds build/dist/lumus-0.2.0.tar.gz (git archive) and
-- packs it with this file into build/dist/lumus-0.2.0-1.src.rock (luarocks pack), which
-- installs anywhere with `luarocks install ./lumus-0.2.0-1.src.rock`. The source URL names
-- the release tarball beside this rockspec (`luarocks build lumus-0.2.0-1.rockspec` in a
-- directory holding it); a public host's tarball URL replaces it when there is one.
-- The version matches lumus.version (src/lumus_core.c).
rockspec_format = "3.0"
package = "lumus"
version = "0.2.0-1"
source = {
   url = "file://lumus-0.2.0.tar.gz",
   dir = "lumus-0.2.0",
}
description = {
   summary = "GPU tensors, kernels and training for Lua 5.1-5.4 and LuaJIT on Vulkan compute",
   detailed = [[
lumus gives Lua scripts tensors in device memory (float32, float16, bfloat16, int32,
bool) and GPU kernels on Vulkan compute: elementwise ops, reductions, matmul, LayerNorm,
attention, autograd, nn modules, optimizers and a GPT-2 model, with a pure-Lua float64
reference to check every result against. Lua 5.4 is the primary target; 5.3, 5.1 and
LuaJIT 2.1 are supported.

Building needs, besides a C11 compiler and the Lua headers:
  glslc      GLSL to SPIR-V compiler (Debian package glslc, or the Vulkan SDK)
  spirv-val  SPIR-V validator (Debian package spirv-tools, or the Vulkan SDK)
  the Vulkan loader and headers (Debian package libvulkan-dev)
  jansson    C JSON library for safetensors headers (Debian package libjansson-dev)
The build checks them first and names any that is missing. Shaders are compiled at build
time and embedded in the module; at run time only the Vulkan loader and a driver are
needed (lavapipe, from mesa-vulkan-drivers, where no GPU exists).
Type definitions for the Lua Language Server are installed in the rock's meta/ directory
(`luarocks show --rock-dir lumus`; see the README).
]],
   license = "MIT",
   labels = { "gpu", "vulkan", "tensor", "machine-learning", "neural-networks" },
}
dependencies = {
   "lua >= 5.1, < 5.5",
}
external_dependencies = {
   VULKAN = { header = "vulkan/vulkan.h", library = "vulkan" },
   JANSSON = { header = "jansson.h", library = "jansson" },   -- safetensors headers (Debian: libjansson-dev)
}
build = {
   type = "make",
   build_target = "all",
   -- LUA is the interpreter of the Lua version being installed for (lua5.1, luajit, ...):
   -- the Makefile derives the version and the headers' flavour from it and LUA_INCDIR.
   -- LUA_LIBDIR is not passed: the module does not link liblua, and luarocks leaves it
   -- unset on Debian (passing it would warn "unmatched variable" on every build).
   build_variables = {
      CFLAGS = "$(CFLAGS)",
      LIBFLAG = "$(LIBFLAG)",
      LUA_INCDIR = "$(LUA_INCDIR)",
      LUA = "$(LUA)",
   },
   install_target = "install",
   install_variables = {
      INST_LIBDIR = "$(LIBDIR)",
      INST_LUADIR = "$(LUADIR)",
      -- lumus.h and liblumus.a for hosts go into the rock's own directory (luarocks show
      -- --rock-dir lumus): luarocks would deploy files in $(LIBDIR) as Lua modules.
      INST_INCDIR = "$(PREFIX)/include",
      INST_STATICDIR = "$(PREFIX)/static",
      -- install builds liblumus.a, whose embedded Lua files and preloader need these too.
      CFLAGS = "$(CFLAGS)",
      LUA_INCDIR = "$(LUA_INCDIR)",
      LUA = "$(LUA)",
   },
   -- Into the rock's directory: the Lua Language Server definitions and the docs.
   copy_directories = { "meta", "docs" },
}
