-- The default pool: two sandboxes kept ready, at most ten at once, each used once.
return {
    description = "two ready sandboxes, up to ten, single use",
    min = 2,
    max = 10,
    idle_timeout = "5m",
    acquisition_timeout = "30s",
    max_uses = 1,
    max_lifetime = "1h",
    health_check_interval = "1m",
    exhaustion = "wait",
    prewarm = true,
}
