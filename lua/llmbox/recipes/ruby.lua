-- Ruby: the host's MRI interpreter runs the code as a script file.
return {
    name = "ruby",
    aliases = { "rb" },
    extensions = { "rb" },
    description = "Ruby (the host's /usr/bin/ruby)",
    image = "ruby:3.3-slim",
    file = "main.rb",
    run = { "/usr/bin/ruby", "{file}" },
    env = {
        RUBYOPT = "",                   -- nothing from outside changes the interpreter's flags
        -- gems installed for the session live in the workspace, next to the system's
        GEM_HOME = "{workspace}/.gem",
        GEM_PATH = "{workspace}/.gem:/usr/lib/ruby/gems/3.1.0:/usr/share/rubygems-integration/all",
    },
    version = { "/usr/bin/ruby", "--version" },
    checks = "ruby",
    example = 'puts "hello from ruby"',
    -- gem install into GEM_HOME from the policy's source (a URL, or a local directory with a
    -- `gem generate_index` index), else rubygems.org
    install = function(packages, sources)
        local argv = { "/usr/bin/gem", "install", "--install-dir", "{workspace}/.gem", "--no-document",
            "--no-user-install" }
        local src = sources.source
        if src then
            if src:sub(1, 1) == "/" then src = "file://" .. src end
            argv[#argv + 1] = "--clear-sources"
            argv[#argv + 1] = "--source"
            argv[#argv + 1] = src
        end
        -- gem takes no "--": names are safe anyway (llmbox refuses any that start with "-")
        for _, p in ipairs(packages) do argv[#argv + 1] = p end
        return argv
    end,
    details = {
        package_manager = "gem (installs into /sandbox/.gem when the policy allows it)",
        preinstalled = { "the Ruby standard library and default gems" },
        plots = false,
    },
}
