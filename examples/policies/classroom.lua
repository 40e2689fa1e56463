-- A custom policy: students' exercises. Start from the strict preset, allow a little more time,
-- and warn (instead of refusing) about imports we only want to discuss.
-- Use it with: llmbox run -p examples/policies/classroom.lua -c '...'
return {
    extends = "strict",
    description = "Teaching: strict sandbox, 20 s per run, checks warn instead of refusing",
    limits = {
        timeout = 20,
        cpu = 15,
        memory = "128M",
        output = "64K",
    },
    env = {
        set = { COURSE = "intro-to-python" },
    },
    checks = {
        mode = "warn",
    },
}
