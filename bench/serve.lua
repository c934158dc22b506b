-- wrk script of bench/serve.sh: POST /v1/infer with a JSON array of
-- SERVE_INPUTS floats (the model's input size, default 64), and one
-- machine-readable line at the end (latency percentiles in microseconds,
-- p99.9 included, which wrk's own --latency table lacks).
local n = tonumber(os.getenv("SERVE_INPUTS") or "64")
local vals = {}
for i = 1, n do vals[i] = string.format("%.4f", ((i * 37) % 201 - 100) / 100) end
wrk.method = "POST"
wrk.body = "[" .. table.concat(vals, ",") .. "]"
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'SERVE {"requests": %d, "duration_us": %d, "bytes": %d, "errors_connect": %d, ' ..
    '"errors_read": %d, "errors_write": %d, "errors_status": %d, "errors_timeout": %d, ' ..
    '"mean_us": %.1f, "p50_us": %d, "p90_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency.mean, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max))
end
