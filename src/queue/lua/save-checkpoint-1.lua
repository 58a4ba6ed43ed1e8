-- save-checkpoint-1: stores a job's checkpoint (redisCheckpoints in src/queue/checkpoints.ts) unless
-- a newer attempt stored one: an older attempt (a worker that lost its lock and did not notice
-- yet) never overwrites it.
-- KEYS[1] the job's checkpoint hash: attempt, data
-- ARGV[1] attempt  ARGV[2] the checkpoint (JSON)  ARGV[3] TTL (s)
-- Returns: 1 when stored; 0 when the hash holds a later attempt's.
local a = tonumber(redis.call('HGET', KEYS[1], 'attempt') or '0')
if a > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'attempt', ARGV[1], 'data', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
