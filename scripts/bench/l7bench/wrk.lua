-- wrk script of the l7fast benchmark.
--   L7BENCH_RESULT=FILE wrk ... -s wrk.lua URL -- REQUEST_FILE
-- REQUEST_FILE: line 1 the method, line 2 the path, then "Name: value" lines.
-- The request is static (no request() function), so wrk builds it once per
-- thread and sends it without calling Lua per request. done() writes the
-- summary, the errors and latency percentiles (microseconds) as JSON to FILE.
-- With L7BENCH_DIAG=FILE2 (failure diagnosis only: it costs a Lua call per
-- response), the status and start of the body of failed responses are
-- appended to FILE2, one line each, at most 200.

function init(args)
   local f = assert(io.open(args[1], "r"))
   wrk.method = f:read("*l")
   wrk.path = f:read("*l")
   for line in f:lines() do
      local name, value = line:match("^([^:]+):%s?(.*)$")
      if name then
         wrk.headers[name] = value
      end
   end
   f:close()
end

function done(summary, latency, requests)
   local e = summary.errors
   local p = {}
   for _, q in ipairs({50, 90, 99, 99.9}) do
      p[#p + 1] = string.format('"%s": %d', tostring(q), latency:percentile(q))
   end
   local out = string.format(
      '{"duration_us": %d, "requests": %d, "bytes": %d, ' ..
      '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
      '"latency_us": {"min": %d, "mean": %.1f, "stdev": %.1f, "max": %d, "percentiles": {%s}}}\n',
      summary.duration, summary.requests, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.mean, latency.stdev, latency.max, table.concat(p, ", "))
   local f = assert(io.open(os.getenv("L7BENCH_RESULT"), "w"))
   f:write(out)
   f:close()
end

local diag_file = os.getenv("L7BENCH_DIAG")
if diag_file then
   local logged = 0
   function response(status, headers, body)
      if status >= 400 and logged < 200 then
         logged = logged + 1
         local f = io.open(diag_file, "a")
         if f then
            f:write(status, "\t", (tostring(body):sub(1, 120):gsub("[\r\n\t]", " ")), "\n")
            f:close()
         end
      end
   end
end
