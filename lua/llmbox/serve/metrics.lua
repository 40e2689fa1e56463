-- llmbox.serve.metrics: the daemon's counters, served as Prometheus text (GET /metrics, format
-- 0.0.4). In-process and cheap: a counter is a table entry, a histogram a few.
--
--   metrics.request(route, status)              llmbox_http_requests_total{route,status}
--   metrics.run(lang, outcome, seconds, limit)  llmbox_runs_total{language,outcome},
--                                               llmbox_run_duration_seconds{language} (histogram),
--                                               llmbox_limits_total{limit}
--   metrics.warm(hit)                           llmbox_warm_leases_total{result="hit"|"miss"}
--   metrics.reload(ok)                          llmbox_reloads_total{result="ok"|"refused"}
--   metrics.text(gauges) -> the exposition, with the gauges given now (open sessions, ...)
local format, concat, pairs, ipairs, tostring = string.format, table.concat, pairs, ipairs, tostring

local _M = { _VERSION = "0.1.0" }

local BUCKETS = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 }

local counters = {} -- name -> { help, series = { labels text -> value } }
local histograms = {} -- language -> { counts per bucket, sum, count }

local HELP = {
    llmbox_http_requests_total = "HTTP requests answered, by route and status",
    llmbox_runs_total = "runs finished, by language and outcome (ok, failed, limit, refused, error)",
    llmbox_limits_total = "runs stopped or marked by a limit, by the limit that fired",
    llmbox_warm_leases_total = "one-shot runs that found a warm worker (hit) or started one (miss)",
    llmbox_reloads_total = "reloads on SIGHUP, taken (ok) or refused (the running configuration stayed)",
}

local function escape(v)
    return (tostring(v):gsub("\\", "\\\\"):gsub("\n", "\\n"):gsub('"', '\\"'))
end

local function labels(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = format('%s="%s"', k, escape(t[k])) end
    return "{" .. concat(parts, ",") .. "}"
end

local function inc(name, l, by)
    local c = counters[name] or { series = {} }
    counters[name] = c
    local key = labels(l)
    c.series[key] = (c.series[key] or 0) + (by or 1)
end

function _M.request(route, status)
    inc("llmbox_http_requests_total", { route = route, status = status })
end

function _M.run(lang, outcome, seconds, limit)
    inc("llmbox_runs_total", { language = lang, outcome = outcome })
    if limit then inc("llmbox_limits_total", { limit = limit }) end
    if seconds then
        local h = histograms[lang]
        if not h then
            h = { counts = {}, sum = 0, count = 0 }
            for i = 1, #BUCKETS do h.counts[i] = 0 end
            histograms[lang] = h
        end
        for i, b in ipairs(BUCKETS) do
            if seconds <= b then h.counts[i] = h.counts[i] + 1 end
        end
        h.sum, h.count = h.sum + seconds, h.count + 1
    end
end

function _M.warm(hit)
    inc("llmbox_warm_leases_total", { result = hit and "hit" or "miss" })
end

function _M.reload(ok)
    inc("llmbox_reloads_total", { result = ok and "ok" or "refused" })
end

--- metrics.text(gauges) -> text; gauges: { { name, help, value [, labels] }, ... }
function _M.text(gauges)
    local out = {}
    local names = {}
    for name in pairs(counters) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
        out[#out + 1] = format("# HELP %s %s\n# TYPE %s counter", name, HELP[name] or name, name)
        local keys = {}
        for k in pairs(counters[name].series) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do out[#out + 1] = format("%s%s %s", name, k, tostring(counters[name].series[k])) end
    end
    out[#out + 1] = "# HELP llmbox_run_duration_seconds wall-clock time of finished runs, by language\n"
        .. "# TYPE llmbox_run_duration_seconds histogram"
    local langs = {}
    for l in pairs(histograms) do langs[#langs + 1] = l end
    table.sort(langs)
    for _, l in ipairs(langs) do
        local h = histograms[l]
        for i, b in ipairs(BUCKETS) do
            out[#out + 1] = format('llmbox_run_duration_seconds_bucket{language="%s",le="%s"} %d', escape(l),
                tostring(b), h.counts[i])
        end
        out[#out + 1] = format('llmbox_run_duration_seconds_bucket{language="%s",le="+Inf"} %d', escape(l), h.count)
        out[#out + 1] = format('llmbox_run_duration_seconds_sum{language="%s"} %.6f', escape(l), h.sum)
        out[#out + 1] = format('llmbox_run_duration_seconds_count{language="%s"} %d', escape(l), h.count)
    end
    local seen = {}
    for _, g in ipairs(gauges or {}) do
        if not seen[g[1]] then
            out[#out + 1] = format("# HELP %s %s\n# TYPE %s gauge", g[1], g[2], g[1])
            seen[g[1]] = true
        end
        out[#out + 1] = format("%s%s %s", g[1], g[4] and labels(g[4]) or "", tostring(g[3]))
    end
    return concat(out, "\n") .. "\n"
end

return _M
