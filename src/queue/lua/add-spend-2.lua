-- add-spend-2: a running job's spend after a model response (the worker's stopAfterTurn in
-- src/queue/batch-index.ts): the attempt's spend only goes up, and the batch's total by as much.
-- KEYS[1] meta   the batch's hash: spent, budgetUsd
-- KEYS[2] spend  "<job id>#<attempt>" -> that attempt's spend so far (USD)
-- ARGV[1] spend field ("<job id>#<attempt>")  ARGV[2] the attempt's cost so far (USD)
-- Returns: { the batch's spent (USD), its budgetUsd or "" when it has none }.
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local cost = tonumber(ARGV[2])
local spent
if cost > old then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  spent = redis.call('HINCRBYFLOAT', KEYS[1], 'spent', cost - old)
else
  spent = redis.call('HGET', KEYS[1], 'spent') or '0'
end
return { spent, redis.call('HGET', KEYS[1], 'budgetUsd') or '' }
