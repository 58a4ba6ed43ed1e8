# supervisor.py: patchbay's supervisor, run in every sandbox as root (python3 -I -S -u, cwd /).
# Loaded by src/sandbox/supervisor.ts through src/core/assets.ts. argv[1]: the sandbox's pids limit;
# argv[2]: the agent's uid. It never forks: it must work when the agent's processes hold the whole
# pids limit.
#
# Its kills are atomic: kill(-1, SIGKILL) sent with the agent's uid as the real and effective uid
# (setresuid(uid, uid, 0), so the way back to root is kept) reaches every process of that uid in
# one pass of the kernel's task list, taken against fork (a fork under way either completes before
# and its child is signalled too, or is restarted after the signal), and kills whole thread groups:
# a zombie leader whose other threads live, a stopped process, a fork bomb. Where some of the
# agent's processes must live on (its shell, between commands), everything of the uid is stopped
# the same atomic way, the targets are killed by pid while nothing of the agent's can fork, and the
# rest go on. After a kill it waits until no target is left alive (a zombie whose threads are all
# gone is dead), and says how many are.
#
# Requests (words; the reply is `PB<nonce> <a> <b>`):
#   begin NONCE SHELL KEEP [TOKEN]
#                              before a command: kills all but SHELL and KEEP when the pids limit is
#                              three quarters full (a fork bomb left running), then notes the time the
#                              command begins (clock ticks since boot), then writes TOKEN and a newline
#                              to the gate (fd 9, the helper's: the shell waits for it before the
#                              command). a: killed.
#   kill NONCE MODE SHELL KEEP MODE all: every process of the agent's uid but KEEP; others: but SHELL
#                              and KEEP; command: SIGUSR1 to SHELL, then the processes started since
#                              the last begin but SHELL and KEEP. a: killed, b: left alive.
#   dead NONCE PID             a: 1 once PID is dead (waits up to a second), else 0.
# KEEP is a comma-separated pid list or "-" (the file agent under gVisor, where it is the agent's uid).
import os, sys, signal, time
AGENT = int(sys.argv[2])
out = sys.stdout.buffer
def read(path, n=8192):
    try:
        fd = os.open(path, os.O_RDONLY)
        try: return os.read(fd, n)
        finally: os.close(fd)
    except OSError: return None
def info(pid):
    # (real uid, state, threads, start time) of a process, or None once it is gone. Status lines
    # are safe to split: the kernel escapes a name's newlines and tabs.
    s = read("/proc/%d/status" % pid)
    st = read("/proc/%d/stat" % pid, 4096)
    if not s or not st: return None
    uid, state, threads = None, b"?", 1
    for line in s.split(b"\n"):
        if line.startswith(b"State:"): state = (line[6:].split() or [b"?"])[0]
        elif line.startswith(b"Uid:"): uid = int(line[4:].split()[0])
        elif line.startswith(b"Threads:"): threads = int(line[8:].split()[0])
    rest = st[st.rfind(b")") + 2:].split()
    return uid, state, threads, rest[19] if len(rest) > 19 else b"?"
def alive(i):
    return i is not None and not (i[1] in (b"Z", b"X") and i[2] <= 1)
def agents():
    r = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            i = info(int(name))
            if i and i[0] == AGENT: r[int(name)] = i
    return r
CAN_SWITCH = True
def as_agent(sig):
    # kill(-1) as the agent: every process of its uid, atomically (the caller itself excepted).
    global CAN_SWITCH
    if CAN_SWITCH:
        try: os.setresuid(AGENT, AGENT, 0)
        except OSError: CAN_SWITCH = False
    if not CAN_SWITCH: return sweep(sig)
    try: os.kill(-1, sig)
    except ProcessLookupError: pass
    finally: os.setresuid(0, 0, 0)
def sweep(sig):
    # Without setresuid (never seen; a runtime that refuses it): by pid, a few passes.
    for _ in range(3):
        for p in agents():
            try: os.kill(p, sig)
            except OSError: pass
def signal_pid(p, sig):
    try: os.kill(p, sig); return True
    except OSError: return False
# When the running command began, in clock ticks since boot (the unit of a process's start time):
# a command's processes are those started since, whatever their pids (which wrap). In the tick it
# began, the last pid then given out tells them apart (no pid wraps within a tick); gVisor shows none
# there, so the processes of that tick are listed instead.
TICKS = os.sysconf("SC_CLK_TCK")
began, last_pid, edge = 0, 0, set()
def ticks_now(): return int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS)
def started_since(p, i):
    if not i[3].isdigit(): return True
    t = int(i[3])
    if t != began: return t > began
    return p > last_pid if last_pid else p not in edge
def kill(mode, shell, keep):
    spare = set(keep) | (set() if mode == "all" else {shell})
    def target(p, i): return p not in spare and (mode != "command" or started_since(p, i))
    if mode == "command" and shell: signal_pid(shell, signal.SIGUSR1)
    procs = agents()
    killed = 0
    if not any(p in spare for p in procs):
        killed = sum(1 for i in procs.values() if alive(i))  # a zombie is dead already: not counted
        as_agent(signal.SIGKILL)
        # Nothing of the uid is left to fork: whatever is alive of it now is a target.
        def left(): return [p for p, i in agents().items() if p not in spare and alive(i)]
    else:
        held = {p for p, i in procs.items() if i[1] in (b"T", b"t")}  # stopped already: left stopped
        as_agent(signal.SIGSTOP)
        frozen = agents()
        targets = {p: i[3] for p, i in frozen.items() if target(p, i)}
        for p in targets:
            if alive(frozen[p]) and signal_pid(p, signal.SIGKILL): killed += 1
        for p in frozen:
            if p not in targets and p not in held: signal_pid(p, signal.SIGCONT)
        # The frozen targets only: what the processes left running start from now on is theirs.
        def left():
            now = ((p, info(p)) for p in targets)
            return [p for p, i in now if alive(i) and i[3] == targets[p]]
    # Until every target is dead: a zombie leader's threads, a process in uninterruptible sleep.
    deadline = time.monotonic() + 5
    while True:
        live = left()
        if not live or time.monotonic() > deadline: return killed, len(live)
        for p in live: signal_pid(p, signal.SIGKILL)
        time.sleep(0.01)
LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
def pids_full():
    # The container's pids cgroup (v2, or v1's pids hierarchy); else tasks counted against LIMIT.
    for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids"):
        cur, mx = read(d + "/pids.current"), read(d + "/pids.max")
        if cur and mx:
            if mx.strip() == b"max": return False
            return int(cur) * 4 >= int(mx) * 3
    if not LIMIT: return False
    tasks = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            i = info(int(name))
            if i: tasks += i[2]
    return tasks * 4 >= LIMIT * 3
def settle():
    # Killed processes hold their pids until reaped (by tini or their parent): wait for that.
    for _ in range(200):
        if not pids_full(): return
        time.sleep(0.01)
def begin(shell, keep):
    global began, last_pid, edge
    # The memory cgroup's OOM killer takes the shell and all it starts first. (The agent can lower it
    # back, and memory held where no process's size shows it, a memfd or tmpfs files, can still make
    # the killer take a root helper: the job then fails once, see Supervisor.ensure.)
    oom_adj(shell, 1000)
    n = 0
    if pids_full():
        n = kill("others", shell, keep)[0]
        settle()
    began = ticks_now()
    try: last_pid = int((read("/proc/loadavg") or b"").split()[4])
    except (IndexError, ValueError): last_pid = 0
    edge = set() if last_pid else {p for p, i in agents().items() if i[3] == str(began).encode()}
    return n, 0
GATE_FD = 9
try: os.set_blocking(GATE_FD, False)  # never waits on the agent's shell; no gate here: nothing written
except OSError: pass
def open_gate(token):
    # A shell that stopped reading (the agent closed its end) fills the pipe: its tokens are dropped,
    # and its commands start without waiting for their begin. Either way the supervisor goes on.
    try: os.write(GATE_FD, token + b"\n")
    except OSError: pass
def dead(pid):
    for _ in range(100):
        if not alive(info(pid)): return 1, 0
        time.sleep(0.01)
    return 0, 0
def pids(s): return [int(p) for p in s.split(",") if p.isdigit()] if s != "-" else []
def oom_adj(pid, value):
    try:
        fd = os.open("/proc/%s/oom_score_adj" % pid, os.O_WRONLY)
        try: os.write(fd, b"%d" % value)
        finally: os.close(fd)
    except OSError: pass
out.write(b"PBREADY:%d\n" % os.getpid())
for line in sys.stdin.buffer:
    w = line.decode("ascii", "replace").split()
    try:
        if w[0] == "begin":
            a, b = begin(int(w[2]), pids(w[3]))
            if len(w) > 4 and w[4].isalnum(): open_gate(w[4].encode()[:64])
        elif w[0] == "kill": a, b = kill(w[2], int(w[3]), pids(w[4]))
        elif w[0] == "dead": a, b = dead(int(w[2]))
        else: a, b = -1, 0
    except Exception as e:
        a, b = -1, 0
        sys.stderr.buffer.write(("supervisor: %r\n" % (e,)).encode())
    out.write(b"PB%s %d %d\n" % (w[1].encode() if len(w) > 1 else b"-", a, b))
