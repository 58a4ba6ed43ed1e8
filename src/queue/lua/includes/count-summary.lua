-- count-summary: count(meta, summary, by), for the batch index's scripts that include it
-- (finish-job-7, switch-line-3): adds `by` (1, or -1 to un-count) to the counters in a batch's meta
-- hash for one job's summary (JSON, JobSummary in src/queue/batch-index.ts): n:<status>, done, and
-- verified or unverified when the summary says either.
-- KEYS, ARGV: none of its own (meta is the including script's KEYS[1]).
-- Returns: nothing.
local function count(meta, summary, by)
  local s = cjson.decode(summary)
  redis.call('HINCRBY', meta, 'n:' .. s.status, by)
  redis.call('HINCRBY', meta, 'done', by)
  if s.verified == true then redis.call('HINCRBY', meta, 'verified', by) elseif s.verified == false then redis.call('HINCRBY', meta, 'unverified', by) end
end
