#!/bin/sh
# Enqueue a fix job over patchbay's HTTP API with curl, follow its live events, print its patch.
#
#   export PATCHBAY_URL=http://127.0.0.1:7474 PATCHBAY_TOKEN=…   # the dashboard's or a write API token
#   sh examples/api/fix.sh spec.json > fix.diff
#
# spec.json is a JobSpec (docs/jobspec.md), e.g.
#   {"task": "Fix clamp so that python3 -m unittest -q passes.", "repo": {"path": "/srv/repos/clamp"}, "verify": "python3 -m unittest -q"}
# (a repo path is the dashboard host's). The patch goes to stdout, the events' types to stderr.
# Exit status: 0 the job completed, 1 it ended otherwise, 2 a request failed.
set -eu
base=${PATCHBAY_URL:-http://127.0.0.1:7474}
auth="Authorization: Bearer ${PATCHBAY_TOKEN:?set PATCHBAY_TOKEN: the dashboard token or a write API token}"
spec=${1:?usage: fix.sh spec.json}

# Enqueue: 201 (or 200: the same jobId and spec were there) with {"id": …}; else a problem+json
# whose detail and errors say what is wrong.
out=$(curl -sS -w '\n%{http_code}' -H "$auth" -H 'Content-Type: application/json' --data-binary @"$spec" "$base/api/v1/jobs") || exit 2
code=$(printf '%s\n' "$out" | tail -n 1)
body=$(printf '%s\n' "$out" | sed '$d')
case $code in
  200|201) ;;
  *) printf 'patchbay: enqueue: %s %s\n' "$code" "$body" | tr -d '\000-\010\013-\037\177' >&2; exit 2 ;;
esac
# a job id is [A-Za-z0-9_.-] only: safe to cut out of the JSON and to put in a URL
id=$(printf '%s' "$body" | sed -n 's/.*"id":"\([A-Za-z0-9_.-]*\)".*/\1/p')
[ -n "$id" ] || { echo "patchbay: no id in $body" >&2; exit 2; }
echo "patchbay: job $id enqueued" >&2

# Follow: each data line is a JSON array of events; the stream ends after its `end` event.
curl -sSN -H "$auth" -H 'Accept: text/event-stream' "$base/api/v1/jobs/$id/events" | while IFS= read -r line; do
  case $line in
    data:*) printf '%s\n' "$line" | grep -o '"type":"[a-z_]*"' | sed 's/"type":"\(.*\)"/  \1/' >&2 || true ;;
    'event: end') break ;;
  esac
done

# The outcome, then the patch of a completed job.
job=$(curl -sS -H "$auth" "$base/api/v1/jobs/$id") || exit 2
status=$(printf '%s' "$job" | sed -n 's/^{[^{]*"status":"\([a-z_]*\)".*/\1/p')
echo "patchbay: job $id: ${status:-not finished}" >&2
[ "$status" = completed ] || exit 1
curl -fsS -H "$auth" "$base/api/v1/jobs/$id/patch" || exit 2
