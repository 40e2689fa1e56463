-- Java: OpenJDK from the host's /usr/lib/jvm. The code is compiled with javac, then its class
-- runs on the JVM; the public class may have any name (hooks javac.sh and java.sh find it).
return {
    name = "java",
    aliases = {},
    extensions = { "java" },
    description = "Java 17 (the host's OpenJDK: javac, then java)",
    image = "eclipse-temurin:17-jdk",
    file = "Main.java",
    compile = { "/bin/sh", "{code}/hooks/javac.sh", "{file}" },
    run = { "/bin/sh", "{code}/hooks/java.sh", "{file}" },
    hooks = {
        { src = "javac.sh", dst = "{code}/hooks/javac.sh" },
        { src = "java.sh", dst = "{code}/hooks/java.sh" },
    },
    -- /usr/lib/jvm/*/lib/jvm.cfg and conf/security/* are symlinks into /etc/java-17-openjdk
    -- (Debian 12's default JDK): the JVM does not start without it. Config files, nothing secret.
    mounts = { "/etc/java-17-openjdk" },
    env = {
        -- Flags for both JVMs (javac's and the program's), chosen so they start within the
        -- default policy: 512M when llmbox is not root (RLIMIT_DATA, RLIMIT_AS at 2.5G; the JVM
        -- maps the 120M module image and reserves class space, code cache and metaspace up
        -- front) and 64 processes + threads (serial GC, one JIT thread, client compiler only:
        -- ~13 threads). javac.sh adds -Xmx: 256M, less under an rlimit (see there); an -Xmx in
        -- JVM_FLAGS (a caller's env = { JVM_FLAGS = ... } replaces these) wins. Passed on the
        -- command line, not in JAVA_TOOL_OPTIONS or JDK_JAVA_OPTIONS, which make the JVM
        -- announce them on stderr.
        JVM_FLAGS = "-Xss1m -XX:ReservedCodeCacheSize=16m -XX:MaxMetaspaceSize=192m "
            .. "-XX:CompressedClassSpaceSize=32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
            .. "-XX:CICompilerCount=1 -XX:-UsePerfData -Xshare:auto",
        -- one malloc arena: glibc reserves 64M of address space for each extra one
        MALLOC_ARENA_MAX = "1",
    },
    -- Read from the JDK's release file: starting a JVM just to ask needs JVM_FLAGS, which
    -- `llmbox langs` (a plain exec) does not set.
    version = { "/bin/sh", "-c", '. "$(readlink -f /usr/bin/java | sed "s|/bin/java$||")/release" '
        .. '&& echo "OpenJDK $JAVA_RUNTIME_VERSION"' },
    checks = "java",
    example = 'public class Main {\n    public static void main(String[] args) {\n'
        .. '        System.out.println("hello from java");\n    }\n}',
    details = {
        package_manager = "maven/gradle (not available: no network in the sandbox)",
        preinstalled = { "the Java SE 17 standard library" },
        plots = false,
    },
}
