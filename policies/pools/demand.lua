-- A pool that follows the clock and recent demand: more ready sandboxes in working hours, and
-- as many as were leased in the last minute (plus a margin), never fewer than min or more than max.
return {
    description = "ready sandboxes follow office hours and the last minute's demand",
    min = 1,
    max = 20,
    idle_timeout = "2m",
    exhaustion = "temporary",
    hooks = {
        target = function(ctx)
            local base = (ctx.hour >= 8 and ctx.hour < 19) and 4 or ctx.min
            return math.max(base, math.ceil(ctx.demand * 1.25))
        end,
    },
}
