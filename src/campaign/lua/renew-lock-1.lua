-- renew-lock-1: extends a campaign's lock (src/campaign/store.ts) while its holder works,
-- if it is still the caller's.
-- KEYS[1] the campaign's lock key
-- ARGV[1] the caller's token  ARGV[2] the new time to live (ms)
-- Returns: 1 renewed, 0 not the caller's (or gone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
