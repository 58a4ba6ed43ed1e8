#!/usr/bin/env python3
"""Enqueue a fix job over patchbay's HTTP API, follow its live events, print its patch.

Standard library only (urllib, json). The patch goes to stdout, the progress to stderr:

    export PATCHBAY_URL=http://127.0.0.1:7474 PATCHBAY_TOKEN=…   # the dashboard's or a write API token
    python3 examples/api/fix.py --repo /srv/repos/clamp \\
        --task "Fix clamp so that python3 -m unittest -q passes." \\
        --verify "python3 -m unittest -q" > fix.diff

--repo is a path on the dashboard's host, under its PATCHBAY_API_REPO_ROOTS (the workers read it
there); --git URL [--ref REF] for a repository to clone. Exit status: 0 the job completed, 1 it ended otherwise, 2 a request failed.
If the event stream breaks, it reconnects with Last-Event-ID and goes on where it stopped.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ.get("PATCHBAY_URL", "http://127.0.0.1:7474").rstrip("/")
TOKEN = os.environ.get("PATCHBAY_TOKEN", "")


def safe(text):
    """Model and repo text is hostile: no terminal escapes or other controls reach the terminal."""
    return "".join(c if c.isprintable() else "?" for c in str(text))[:300]


def call(method, path, body=None, accept="application/json"):
    headers = {"Accept": accept}
    if TOKEN:
        headers["Authorization"] = "Bearer " + TOKEN
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    try:
        return urllib.request.urlopen(req, timeout=60 if accept != "text/event-stream" else 120)
    except urllib.error.HTTPError as err:
        # application/problem+json: detail says what is wrong, errors name the bad fields
        try:
            problem = json.load(err)
        except ValueError:
            problem = {"detail": err.reason}
        print("patchbay: %s %s: %s %s" % (method, path, err.code, safe(problem.get("detail", ""))), file=sys.stderr)
        for line in problem.get("errors", []):
            print("  " + safe(line), file=sys.stderr)
        sys.exit(2)


def show(event):
    kind = event.get("type")
    if kind == "tool_call":
        print("turn %s: %s" % (event.get("turn"), safe(event.get("name"))), file=sys.stderr)
    elif kind in ("verify", "setup"):
        print("%s: %s -> exit %s" % (kind, safe(event.get("command")), event.get("exitCode")), file=sys.stderr)
    elif kind == "job_finished":
        cost = "scripted (not priced)" if event.get("scripted") else "$%.4f" % event.get("costUsd", 0)
        print("finished: %s, %s turns, %s" % (safe(event.get("status")), event.get("turns"), cost), file=sys.stderr)


def follow(job_id):
    """Reads the SSE stream until its `end` event (after job_finished); returns the job's status."""
    last_id, status = None, None
    for _ in range(100):  # reconnects, bounded
        path = "/api/v1/jobs/%s/events" % job_id
        if last_id:
            path += "?after=" + last_id  # the same as a Last-Event-ID header
        with call("GET", path, accept="text/event-stream") as stream:
            event, data = None, []
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("id:"):
                    last_id = line[3:].strip()
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "":
                    if event == "end":
                        return status
                    if data:
                        for e in json.loads("\n".join(data)):  # each message is an array of events
                            show(e)
                            if e.get("type") == "job_finished":
                                status = e.get("status")
                    event, data = None, []
    raise SystemExit("patchbay: the event stream kept breaking")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", help="a directory on the dashboard's host")
    p.add_argument("--git", help="a git URL to clone")
    p.add_argument("--ref")
    p.add_argument("--task", required=True)
    p.add_argument("--verify")
    p.add_argument("--job-id", help="makes the enqueue idempotent")
    a = p.parse_args()
    if bool(a.repo) == bool(a.git):
        p.error("give --repo or --git")
    repo = {"path": a.repo} if a.repo else dict({"git": a.git}, **({"ref": a.ref} if a.ref else {}))
    spec = {"task": a.task, "repo": repo}
    if a.verify:
        spec["verify"] = a.verify
    if a.job_id:
        spec["jobId"] = a.job_id

    with call("POST", "/api/v1/jobs", spec) as res:
        job_id = json.load(res)["id"]
    print("patchbay: job %s enqueued" % safe(job_id), file=sys.stderr)
    follow(job_id)
    with call("GET", "/api/v1/jobs/" + job_id) as res:
        job = json.load(res)
    status = job.get("status")
    if job.get("state") == "completed":
        with call("GET", "/api/v1/jobs/%s/patch" % job_id, accept="text/x-diff") as res:
            sys.stdout.buffer.write(res.read())
    print("patchbay: %s" % safe(status or job.get("failedReason") or job.get("state")), file=sys.stderr)
    sys.exit(0 if status == "completed" else 1)


if __name__ == "__main__":
    main()
