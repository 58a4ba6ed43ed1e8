-- cancel-waiting-10: cancels a job that no worker has taken (recordCancelled in
-- src/queue/result-record.ts), in one step: the cancel mark either way (a worker that took the job
-- first sees it and stops it), and when the job was still waiting, delayed or prioritized, it
-- leaves that list for BullMQ's completed set with its cancelled result as the return value, the
-- result recorded and its transcript (job_started, job_finished) written. Every command then sees
-- it finished.
-- KEYS[1] wait  KEYS[2] paused  KEYS[3] prioritized  KEYS[4] delayed  KEYS[5] completed (BullMQ's)
-- KEYS[6] the job's BullMQ hash  KEYS[7] its result record  KEYS[8] its transcript stream
-- KEYS[9] BullMQ's event stream  KEYS[10] its cancel mark
-- ARGV[1] job id  ARGV[2] the result (JSON)  ARGV[3] the job_started event (JSON)
-- ARGV[4] the job_finished event (JSON)  ARGV[5] retention (s)  ARGV[6] the transcript's MAXLEN
-- ARGV[7] now (epoch ms)
-- Returns: 1 when the job was waiting and is now cancelled; 0 when it was not (taken, or finished).
local id = ARGV[1]
redis.call('SET', KEYS[10], '1', 'EX', ARGV[5])
if redis.call('EXISTS', KEYS[6]) == 0 then return 0 end
local removed = redis.call('LREM', KEYS[1], 0, id) + redis.call('LREM', KEYS[2], 0, id)
  + redis.call('ZREM', KEYS[3], id) + redis.call('ZREM', KEYS[4], id)
if removed == 0 then return 0 end
redis.call('HSET', KEYS[6], 'returnvalue', ARGV[2], 'finishedOn', ARGV[7])
redis.call('ZADD', KEYS[5], ARGV[7], id)
redis.call('SET', KEYS[7], ARGV[2], 'EX', ARGV[5])
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[3])
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[4])
redis.call('EXPIRE', KEYS[8], ARGV[5])
redis.call('XADD', KEYS[9], 'MAXLEN', '~', 10000, '*', 'event', 'completed', 'jobId', id, 'returnvalue', ARGV[2], 'prev', 'waiting')
return 1
