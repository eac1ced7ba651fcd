import { createHash } from 'node:crypto';

/**
 * The one Lua script behind every fenced Redis write. It checks and advances the fence key and
 * runs the write's commands in the same script, so Redis runs them with nothing in between.
 *
 * KEYS[1] is the fence key; KEYS[2..] are the keys the commands touch (all declared, as Redis
 * Cluster and the scripting rules require). ARGV: token, command count, then per command
 * `name, keyCount, argCount, keyIndex..., arg...`.
 *
 * Tokens are compared as canonical decimal strings, by length then byte by byte: `tonumber`
 * would turn them into doubles and equate 2^53 with 2^53+1, and Lua's `<` on strings follows the
 * server's collation locale. That comparison is only numeric for canonical decimals, so the
 * script checks both the incoming token and the stored one itself (the script is exported, and
 * an `EVAL` caller skips `parseToken`): one bad token stored would poison the key for good.
 * The fence key is advanced before the commands run, so any effect of a write (even a partial
 * one, if a command fails at run time) is covered by its token.
 *
 * Reply: `{1, result...}` when applied, `{0, highestToken}` when stale; an error reply, with
 * nothing changed, for a token or stored value that is not canonical.
 */
export const FENCE_SCRIPT = `
local function less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end

local MAX = '9223372036854775807'
local function canonical(s)
  return type(s) == 'string' and string.match(s, '^[1-9][0-9]*$') ~= nil and not less(MAX, s)
end

local token = ARGV[1]
if not canonical(token) then
  -- Shown printable and short: an error reply is one line.
  local shown = string.gsub(string.sub(tostring(token), 1, 40), '[^ -~]', '?')
  return redis.error_reply('LEASEHOLD fencing token in ARGV[1] must be a canonical decimal string ' ..
    '(no sign, spaces or leading zeros) in [1, ' .. MAX .. '], got "' .. shown .. '"')
end
local current = redis.call('GET', KEYS[1])
if current then
  if not canonical(current) then
    return redis.error_reply('LEASEHOLD fence key ' .. KEYS[1] .. ' holds a value that is not a canonical token')
  end
  if less(token, current) then return {0, current} end
end
redis.call('SET', KEYS[1], token)

local reply = {1}
local at = 3
for _ = 1, tonumber(ARGV[2]) do
  local call = {ARGV[at]}
  local keyCount, argCount = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  at = at + 3
  for _ = 1, keyCount do
    call[#call + 1] = KEYS[tonumber(ARGV[at])]
    at = at + 1
  end
  for _ = 1, argCount do
    call[#call + 1] = ARGV[at]
    at = at + 1
  end
  reply[#reply + 1] = redis.call(unpack(call))
end
return reply
`;

/**
 * The SHA-1 of {@link FENCE_SCRIPT}, for `EVALSHA`; the helpers load the script with `EVAL` when
 * Redis does not have it yet.
 */
export const FENCE_SCRIPT_SHA1 = createHash('sha1').update(FENCE_SCRIPT).digest('hex');
