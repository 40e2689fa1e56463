-- C++: the host's g++ compiles the code to /tmp/llmbox/main, which then runs. Compiler errors
-- come back on stderr with the compile step's exit code (r.phase == "compile").
return {
    name = "cpp",
    aliases = { "c++", "cxx" },
    extensions = { "cpp", "cc", "cxx" },
    description = "C++17 (the host's g++, -O2)",
    image = "gcc:13",
    file = "main.cpp",
    compile = { "/usr/bin/g++", "-std=c++17", "-O2", "-pipe", "-o", "{dir}/main", "{file}" },
    run = { "{dir}/main" },
    env = {
        TMPDIR = "/tmp",               -- g++ writes its temporary files here (/tmp is writable)
        GCC_COLORS = "",               -- plain diagnostics in captured output
    },
    version = { "/bin/sh", "-c", "/usr/bin/g++ --version | head -n 1" },
    checks = "cpp",
    example = '#include <iostream>\n\nint main() {\n    std::cout << "hello from c++" << std::endl;\n}',
    details = {
        package_manager = "none (only the headers and libraries installed on the host)",
        preinstalled = { "the C++17 standard library" },
        plots = false,
    },
}
