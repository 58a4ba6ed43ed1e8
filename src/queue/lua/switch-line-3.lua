-- switch-line-3: a retried line of a batch (BatchClient.retry in src/batch/batches.ts): its latest
-- job becomes the new one; the old one's summary is un-counted, and the new one's counted if it
-- already ended (the job is enqueued before this runs). The batch is neither finished nor
-- cancelled any more.
-- KEYS[1] meta     the batch's hash: counters, finishedAt, cancelled
-- KEYS[2] lines    line -> its latest job id
-- KEYS[3] results  job id -> its summary (JSON)
-- ARGV[1] line  ARGV[2] the old job id  ARGV[3] the new job id
-- Returns: 1 when switched; 0 when the line's latest job is not ARGV[2] (another retry won).
--- @include "includes/count-summary"
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local prev = redis.call('HGET', KEYS[3], ARGV[2])
if prev then count(KEYS[1], prev, -1) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local now = redis.call('HGET', KEYS[3], ARGV[3])
if now then count(KEYS[1], now, 1) end
redis.call('HDEL', KEYS[1], 'finishedAt', 'cancelled')
return 1
