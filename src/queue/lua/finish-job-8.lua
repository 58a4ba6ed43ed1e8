-- finish-job-8: records that a job of a batch ended, in the batch's index (recordFinished in
-- src/queue/batch-index.ts), in one step: the attempt's spend (only upwards), the job's summary,
-- not started any more, appended to the finished list; when it is its line's latest job, the
-- counters move from the summary it replaces to this one, and the batch gets finishedAt once every
-- line is done. Every key of the index gets the TTL again.
-- KEYS[1] meta      the batch's hash: total, spent, counters (done, n:<status>, ...), finishedAt
-- KEYS[2] lines     line -> its latest job id
-- KEYS[3] results   job id -> its summary (JSON)
-- KEYS[4] spend     "<job id>#<attempt>" -> that attempt's spend so far (USD)
-- KEYS[5] started   job id -> epoch ms, while it runs
-- KEYS[6] finished  list: job ids in the order they ended
-- KEYS[7] tasks     line -> its task's start (only its TTL is renewed here)
-- KEYS[8] specs     line -> its spec's hash (only its TTL is renewed here)
-- ARGV[1] job id  ARGV[2] line  ARGV[3] spend field ("<job id>#<attempt>")  ARGV[4] its cost (USD)
-- ARGV[5] the summary (JSON)  ARGV[6] "1": only if the job has no result yet, else "0"
-- ARGV[7] TTL (s)  ARGV[8] now (epoch ms)
-- Returns: 1 when recorded; 0 when ARGV[6] is "1" and the job already had a result.
--- @include "includes/count-summary"
local prev = redis.call('HGET', KEYS[3], ARGV[1])
if prev and ARGV[6] == '1' then return 0 end
local old = tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0')
local cost = tonumber(ARGV[4])
if cost > old then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
  redis.call('HINCRBYFLOAT', KEYS[1], 'spent', cost - old)
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('RPUSH', KEYS[6], ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then
  if prev then count(KEYS[1], prev, -1) end
  count(KEYS[1], ARGV[5], 1)
  if tonumber(redis.call('HGET', KEYS[1], 'done') or '0') >= tonumber(redis.call('HGET', KEYS[1], 'total') or '0') then
    redis.call('HSET', KEYS[1], 'finishedAt', ARGV[8])
  end
end
for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[7]) end
return 1
