-- job-rows-n: the jobs list's fields of some BullMQ jobs in one call (leanJobs and statuses in
-- src/web/jobs-list.ts), never a field over the max: HSTRLEN first, so a big spec, result or
-- reason is never read.
-- KEYS     the jobs' hashes (any number)
-- ARGV[1] mode: "row" (the list's fields) or "status" (what the status filter needs)
-- ARGV[2] max bytes of a field that is read (data, returnvalue, progress, failedReason)
-- ARGV[3] max characters of failedReason kept
-- Returns: per key, false when the job is gone, else for "row" { timestamp, processedOn or false,
-- finishedOn or false, attempts made, progress, failedReason (cut), data, returnvalue } and for
-- "status" { timestamp, processedOn or false, finishedOn or false, returnvalue's first 200
-- characters, 1 if it has a failedReason else 0 }, where a field over the max is its length (a
-- number) and a missing one false.
local mode, max, rmax = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
local function small(key, f, cut)
  local n = redis.call('HSTRLEN', key, f)
  if n == 0 then return false end
  if n > max then return n end
  local v = redis.call('HGET', key, f)
  if cut then return string.sub(v, 1, cut) end
  return v
end
for i, key in ipairs(KEYS) do
  local v = redis.call('HMGET', key, 'timestamp', 'processedOn', 'finishedOn', 'atm', 'attemptsMade')
  if not v[1] then
    out[i] = false
  elseif mode == 'status' then
    out[i] = { v[1], v[2] or false, v[3] or false, small(key, 'returnvalue', 200), redis.call('HEXISTS', key, 'failedReason') }
  else
    local reason = small(key, 'failedReason', rmax)
    out[i] = { v[1], v[2] or false, v[3] or false, v[4] or v[5] or '0', small(key, 'progress'), reason, small(key, 'data'), small(key, 'returnvalue') }
  end
end
return out
