rockspec_format = "3.0"
package = "llmbox"
version = "scm-1"
source = { url = "git+file:///work/main" }
description = {
   summary = "A Lua-scriptable sandbox runtime for code that language models write",
   detailed = [[
      llmbox runs untrusted code in a native Linux jail (namespaces, seccomp, no capabilities,
      rlimits and cgroups) driven by Lua recipes and enforceable Lua security policies.
   ]],
   license = "MIT",
}
dependencies = { "lua ~> 5.1", "lua-cjson", "luv" }
build = {
   type = "make",
   build_variables = { CFLAGS = "$(CFLAGS)" },
   install_variables = {
      PREFIX = "$(PREFIX)",
      BINDIR = "$(BINDIR)",
      LUADIR = "$(LUADIR)",
      LIBDIR = "$(LIBDIR)",
      -- LuaRocks deploys only lua/, lib/ and bin/: the policies go inside the Lua tree
      DATADIR = "$(LUADIR)/llmbox",
   },
}
