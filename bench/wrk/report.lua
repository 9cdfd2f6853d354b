-- wrk script: print every figure of a run as one JSON line (prefix "BENCHJSON ") at the end.
-- It defines no request/response hook, so it costs wrk nothing while the load runs.
local function pct(latency, p) return latency:percentile(p) end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"duration_us": %d, "requests": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "mean": %.2f, "stdev": %.2f, "max": %d, ' ..
    '"p50": %d, "p90": %d, "p95": %d, "p99": %d, "p99_9": %d}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.stdev, latency.max,
    pct(latency, 50), pct(latency, 90), pct(latency, 95), pct(latency, 99), pct(latency, 99.9)))
end
