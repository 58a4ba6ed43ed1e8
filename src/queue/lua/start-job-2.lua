-- start-job-2: a job of a batch about to start (the worker's start hook in
-- src/queue/batch-index.ts): marks it started and reads what decides whether it may.
-- KEYS[1] meta     the batch's hash: spent, budgetUsd, cancelled
-- KEYS[2] started  job id -> epoch ms, while it runs
-- ARGV[1] job id  ARGV[2] now (epoch ms)
-- Returns: { spent, budgetUsd, cancelled }, each nil when the batch has none.
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('HMGET', KEYS[1], 'spent', 'budgetUsd', 'cancelled')
