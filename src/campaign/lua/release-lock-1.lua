-- release-lock-1: ends a campaign's lock (src/campaign/store.ts) if it is still the
-- caller's: a lock that expired and was taken by another process is left to that process.
-- KEYS[1] the campaign's lock key
-- ARGV[1] the caller's token
-- Returns: 1 released, 0 not the caller's (or gone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
