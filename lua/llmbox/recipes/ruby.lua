-- Ruby: the host's MRI interpreter runs the code as a script file.
return {
    name = "ruby",
    aliases = { "rb" },
    extensions = { "rb" },
    description = "Ruby (the host's /usr/bin/ruby)",
    file = "main.rb",
    run = { "/usr/bin/ruby", "{file}" },
    env = {
        RUBYOPT = "",                   -- nothing from outside changes the interpreter's flags
    },
    version = { "/usr/bin/ruby", "--version" },
    checks = "ruby",
    example = 'puts "hello from ruby"',
    details = {
        package_manager = "gem (no network in the sandbox: rubygems.org is not reachable)",
        preinstalled = { "the Ruby standard library and default gems" },
        plots = false,
    },
}
