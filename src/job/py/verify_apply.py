# verify_apply.py: in a verify round's own sandbox, as the agent's uid, after the post-setup snapshot
# was extracted into /workspace: applies the round's patch (on stdin) the way src/job/verify.ts says.
# What the patch creates and deletes is read from its own `diff --git` headers (renames are off, so
# each names one path, C-quoted where git quotes it). Setup may have left an ignored file where the
# patch creates one, or a file, symlink or directory where it needs the other kind: those are
# cleared, but never a path the patch deletes or changes (git apply does that itself, in order).
# Directories the patch writes into get the owner's write bit for the apply (setup may have taken
# it: directory modes are not part of a patch), given back after. Then git apply under a git dir,
# config and attributes of ours. Exit status: git apply's; its stderr's end on stderr.
import os, sys, stat, shutil, subprocess, tempfile
patch = sys.stdin.buffer.read()
ESC = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13, ord('"'): 34, ord("\\"): 92}
def unquote(b):
    # git's C quoting: "..." with \a \b \t \n \v \f \r \" \\ and \ooo octal bytes
    out, i = bytearray(), 1
    while i < len(b) - 1:
        c = b[i]
        if c == 92:
            n = b[i + 1]
            if 48 <= n <= 55: out.append(int(b[i + 1:i + 4], 8)); i += 4; continue
            out.append(ESC[n]); i += 2; continue
        out.append(c); i += 1
    return bytes(out)
def header_path(line):
    rest = line[len(b"diff --git "):]
    if rest.startswith(b'"'):
        end, i = None, 1
        while i < len(rest):
            if rest[i] == 92: i += 2; continue
            if rest[i] == 34: end = i; break
            i += 1
        return unquote(rest[:end + 1])[2:]
    n = (len(rest) - 5) // 2  # "a/P b/P", the same P twice
    return rest[2:2 + n]
created, deleted, touched, cur = set(), set(), set(), None
for line in patch.split(b"\n"):
    if line.startswith(b"diff --git "): cur = header_path(line); touched.add(cur)
    elif cur is not None and line.startswith(b"new file mode "): created.add(cur)
    elif cur is not None and line.startswith(b"deleted file mode "): deleted.add(cur)
    elif line.startswith(b"@@") or line.startswith(b"GIT binary patch"): cur = None
root = b"/workspace"
def full(rel): return os.path.join(root, rel)
def remove(p):
    if os.path.isdir(p) and not os.path.islink(p): shutil.rmtree(p)
    else: os.unlink(p)
def clear_dir(p, rel):
    # An existing directory where the patch creates a file: what the patch does not delete in it goes.
    for name in os.listdir(p):
        q, r = os.path.join(p, name), rel + b"/" + name
        if any(d == r or d.startswith(r + b"/") for d in deleted):
            if os.path.isdir(q) and not os.path.islink(q): clear_dir(q, r)
        else: remove(q)
for rel in sorted(created):
    parts = rel.split(b"/")
    for i in range(1, len(parts)):
        a = b"/".join(parts[:i])
        st = os.lstat(full(a)) if os.path.lexists(full(a)) else None
        if st is None: break
        if stat.S_ISDIR(st.st_mode): continue
        if a not in deleted: os.unlink(full(a))
        break
    p = full(rel)
    if os.path.lexists(p) and rel not in deleted:
        if os.path.isdir(p) and not os.path.islink(p): clear_dir(p, rel)
        else: os.unlink(p)
modes = {}
for rel in touched:
    d = os.path.dirname(full(rel))
    while d.startswith(root) and d not in modes and os.path.isdir(d) and not os.path.islink(d):
        m = os.lstat(d).st_mode
        modes[d] = m
        if not m & stat.S_IWUSR or not m & stat.S_IXUSR: os.chmod(d, stat.S_IMODE(m) | stat.S_IRWXU)
        d = os.path.dirname(d)
if not patch: sys.exit(0)
d = tempfile.mkdtemp(prefix=".patchbay-apply.")
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1", "HOME": d, "XDG_CONFIG_HOME": d}
try:
    subprocess.run(["git", "init", "-q", "--bare", d + "/g"], env=env, check=True)
    with open(d + "/g/info/attributes", "w") as f: f.write("* -text !eol -filter -ident !diff !merge !working-tree-encoding\n")
    env.update(GIT_DIR=d + "/g", GIT_WORK_TREE="/workspace")
    git = ["git", "-c", "core.bare=false", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.symlinks=true", "-c", "core.filemode=true"]
    r = subprocess.run(git + ["apply", "--binary", "--whitespace=nowarn", "-"], input=patch, env=env, cwd="/workspace", stderr=subprocess.PIPE)
    sys.stderr.buffer.write(r.stderr[-2000:])
finally:
    shutil.rmtree(d, ignore_errors=True)
for dpath, m in modes.items():
    if os.path.isdir(dpath) and not os.path.islink(dpath) and stat.S_IMODE(m) != stat.S_IMODE(os.lstat(dpath).st_mode): os.chmod(dpath, stat.S_IMODE(m))
sys.exit(r.returncode)
