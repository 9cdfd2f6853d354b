-- wrk script for the Hearth-style ladder: like report.lua, plus the status-code distribution
-- (counted per thread in response(), summed in done()). The response hook makes wrk parse
-- every response's headers, so a ladder's req/s is a little below a report.lua run's.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local agg = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    if s then
      for code, n in pairs(s) do agg[code] = (agg[code] or 0) + n end
    end
  end
  local parts = {}
  for code, n in pairs(agg) do table.insert(parts, string.format('"%d": %d', code, n)) end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"duration_us": %d, "requests": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "mean": %.2f, "stdev": %.2f, "max": %d, ' ..
    '"p50": %d, "p90": %d, "p95": %d, "p99": %d, "p99_9": %d}, "statuses": {%s}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(99), latency:percentile(99.9), table.concat(parts, ", ")))
end
