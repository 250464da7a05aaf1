rockspec_format = "3.0"
package = "lumus"
version = "scm-1"
source = {
   url = "git+file:///dev/null",   -- installed from a checkout: luarocks --lua-version=5.4 make
                                   -- (a release: lumus-<version>-1.rockspec, `make rock`)
}
description = {
   summary = "GPU tensors, kernels and training for Lua 5.1-5.4 and LuaJIT on Vulkan compute",
   detailed = [[
lumus gives Lua scripts float32 tensors in device memory and GPU kernels on Vulkan
compute, with a pure-Lua float64 reference to check them against. Shaders are compiled
at build time and embedded in the module; at run time only the Vulkan loader and a
driver are needed (lavapipe, from mesa-vulkan-drivers, where no GPU exists).
Building needs glslc (Debian glslc, or the Vulkan SDK), spirv-val (spirv-tools), the
Vulkan loader and headers (libvulkan-dev) and jansson (libjansson-dev); the released
rockspec (lumus-0.2.0-1.rockspec) says more.
]],
   license = "MIT",
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
