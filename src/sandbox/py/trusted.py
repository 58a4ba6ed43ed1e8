# trusted.py: the one rule for every process patchbay starts as root in a sandbox, put into the
# helper (helper.py) and the file agent (file_agent.py) by src/sandbox/trusted.ts, right after their
# first line. The image's environment is the agent's: an image may put PATH, LD_PRELOAD,
# PYTHONPATH, BASH_ENV, GIT_* or HOME into /workspace or /tmp, where the agent plants what it likes.
# So a root process gets TRUSTED_ENV (a fixed PATH and locale) and nothing of the image's, and its
# program is found only on that PATH (or given absolute), resolved to its real path, and refused
# unless it and every directory above it are root's and writable by no one else: no file the agent
# can write, replace or rename ever runs as root. A sticky directory (/tmp) is no exception: the
# agent can make new names in it. Processes of the agent's uid keep the image's environment.
import os as _os, stat as _stat
TRUSTED_DIRS = (b"/usr/sbin", b"/usr/bin", b"/sbin", b"/bin", b"/usr/local/sbin", b"/usr/local/bin")
TRUSTED_ENV = {b"PATH": b":".join(TRUSTED_DIRS), b"LANG": b"C.UTF-8"}
# The box's own environment (the image's ENV): a JSON list of "K=V" the backend hands a root exec
# in this variable (src/backend/docker.ts, local.ts), for the processes of the agent's uid.
BOX_ENV_VAR = b"PATCHBAY_BOX_ENV"

class Untrusted(OSError):
    pass

def _owned_by_root_alone(st):
    return st.st_uid == 0 and not st.st_mode & 0o022

def untrusted_why(real):
    # Why the file at `real` (a real path: no symlink in it) must not run as root, or None.
    real = _os.fsencode(real)
    st = _os.stat(real)
    if not _stat.S_ISREG(st.st_mode): return "not a regular file"
    if not _owned_by_root_alone(st): return "owned by uid %d with mode %o, not root's alone" % (st.st_uid, st.st_mode & 0o7777)
    d = _os.path.dirname(real)
    while True:
        st = _os.stat(d)
        if not _owned_by_root_alone(st): return "in %s, a directory of uid %d with mode %o (another uid may write it)" % (_os.fsdecode(d), st.st_uid, st.st_mode & 0o7777)
        if d == b"/": return None
        d = _os.path.dirname(d)

def trusted_program(name):
    # The real path to exec for a root process's argv[0]: an absolute path as given, a bare name
    # looked up in TRUSTED_DIRS only (the first that has it). Raises Untrusted (errno EACCES) when
    # the rule refuses it, FileNotFoundError when there is none.
    name = _os.fsencode(name)
    if b"/" in name:
        if not name.startswith(b"/"): raise Untrusted(13, "a root process's program must be an absolute path or a bare name")
        found = name if _os.path.exists(name) else None
    else:
        found = next((p for p in (d + b"/" + name for d in TRUSTED_DIRS) if _os.path.exists(p)), None)
    if found is None: raise FileNotFoundError(2, "no %s in %s" % (_os.fsdecode(name), _os.fsdecode(TRUSTED_ENV[b"PATH"])))
    real = _os.path.realpath(found)
    why = untrusted_why(real)
    if why: raise Untrusted(13, "%s (%s) refused as a root program: %s" % (_os.fsdecode(found), _os.fsdecode(real), why))
    return real

def root_env(extra, home=b"/root"):
    # A root process's environment: TRUSTED_ENV, root's HOME, then what patchbay's worker asked for.
    env = dict(TRUSTED_ENV); env[b"HOME"] = home
    env.update(extra)
    return env
