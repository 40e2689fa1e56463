-- The gateway's callers: an API key names a tenant, the llmbox policy its runs get, and how many
-- runs a minute it may start. Replace these demo keys (`openssl rand -hex 24`); point
-- GATEWAY_KEYS at your own file.
return {
    ["demo-key-alice-0123456789"] = { tenant = "alice", policy = "default", per_minute = 60 },
    ["demo-key-bob-0123456789ab"] = { tenant = "bob", policy = "strict", per_minute = 10 },
}
