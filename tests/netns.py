"""A virtual cluster on one machine, for multi-node end-to-end tests.

Every node of a `Cluster` is a network namespace of its own with one
interface, `eth0` (one end of a veth pair), holding the address `addr(k)`
in a private /24; the other ends hang on a bridge.  The bridge lives in a
namespace of its own (the "hub"), not in the host's: the host's routes,
addresses and firewall (iptables with bridge-nf-call-iptables=1, a FORWARD
policy of DROP) never see a packet, and nothing is sent anywhere but
between the namespaces created here.  Each node also has its own UTS
namespace (hostname `node<k>`, resolvable on every node through a hosts
file that `ip netns exec` binds over /etc/hosts) and, when asked for, a
time namespace whose CLOCK_MONOTONIC (and CLOCK_BOOTTIME) is offset by a
number of seconds: the clock skew between machines that a multi-node run
must cope with.  `ip netns exec` mounts a sysfs of the node's network
over /sys, which hides the host's cgroup file systems; each node mounts
the host's cgroup hierarchies again under /sys/fs/cgroup (the same
hierarchies: a process's cgroup and its CPU quota, throttling and
pressure read the same inside a node as on a real host).

    from netns import Cluster, should_run
    ok, why = should_run()         # skip the test with WHY when not ok
    with Cluster(2, time_offsets={1: 1000}) as c:
        server = c.popen(0, ["python3", "server.py", c.addr(0)])
        client = c.popen(1, ["python3", "client.py", c.addr(0)])
        c.link_down(1); ...; c.link_up(1)

Each node's namespaces are held by a sleeping process started inside them;
`popen` runs a command with nsenter(1) into that process's network, UTS,
mount (and time) namespaces, so the Popen returned IS the command: its
signals, exit status and pipes are the command's own.  Nothing outside the
cluster is changed except /etc/netns/<namespace>/ (the hosts files), and
everything is removed on exit, on an exception or KeyboardInterrupt, and
at the next Cluster's start if a previous test process died without
cleaning up (names carry the creating pid).

docs/testing-multinode.md describes it.  Requires root (CAP_SYS_ADMIN and
CAP_NET_ADMIN), iproute2's `ip netns`
and util-linux's unshare/nsenter with time namespaces (Linux >= 5.6).
"""
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import time

NETNS_ETC = "/etc/netns"
IFNAME = "eth0"  # the node side of each veth pair, the same name on every node
_SEQ = itertools.count(1)
_NAME_RE = re.compile(r"^ss(\d+)-(\d+)-(\d+|hub)$")
_available = None
_subnets_in_use = set()  # the subnets of this process's live clusters


class ClusterError(RuntimeError):
    """Setting up or driving the virtual cluster failed; says which command."""


_GENERIC_MOUNT_OPTIONS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev",
                          "noexec", "seclabel"}


def _cgroup_mount_script():
    """The shell commands that mount this host's cgroup file systems under
    /sys/fs/cgroup again (in a node, after `ip netns exec` mounted a new
    sysfs over /sys): the tmpfs that holds a v1 layout, each v1 hierarchy
    with its controllers and name, and the v2 hierarchy.  A mount that
    fails leaves the node without it, as before."""
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return ""
    try:
        with open("/proc/cgroups") as f:
            controllers = {line.split()[0] for line in f if not line.startswith("#")}
    except OSError:
        controllers = set()
    cmds = []
    for m in mounts:
        if len(m) < 4 or not (m[1] == "/sys/fs/cgroup" or m[1].startswith("/sys/fs/cgroup/")):
            continue
        point, fstype = m[1], m[2]
        opts = [o for o in m[3].split(",") if o not in _GENERIC_MOUNT_OPTIONS]
        if fstype == "tmpfs":
            opts = [o for o in opts if o.startswith("mode=")]
        elif fstype == "cgroup" and not controllers & set(opts) and "none" not in opts:
            opts.insert(0, "none")  # a named hierarchy without controllers
        elif fstype == "cgroup2":
            opts = []
        elif fstype != "cgroup":
            continue
        opt = f"-o {','.join(opts)} " if opts else ""
        cmds.append(f"{{ mkdir -p {point} && mount -t {fstype} {opt}{fstype} {point}; }} "
                    "2>/dev/null")
    return "".join(c + "; " for c in cmds)


def _ip(*args, check=True):
    """Runs `ip ARGS`; raises ClusterError with ip's message on failure."""
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def _netns_list():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _kill_netns(ns):
    """SIGKILLs every process in namespace NS, waits (5 s at most) for them to go."""
    deadline = time.monotonic() + 5.0
    while True:
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _remove_netns(ns):
    _kill_netns(ns)
    _ip("netns", "del", ns, check=False)
    shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)


def remove_stale():
    """Removes the namespaces (and hosts files) of clusters whose creating
    process no longer exists: what a test killed by SIGKILL left behind."""
    for ns in _netns_list():
        m = _NAME_RE.match(ns)
        if m and not _pid_alive(int(m.group(2))):
            _remove_netns(ns)


def _host_networks():
    """The IPv4 networks the host routes to, in any table."""
    r = _ip("-4", "route", "show", "table", "all", check=False)
    nets = []
    for line in r.stdout.splitlines():
        words = line.split()
        if not words:
            continue
        dst = words[1] if words[0] in ("local", "broadcast", "unicast", "blackhole",
                                       "unreachable", "prohibit", "throw") else words[0]
        if dst == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(dst, strict=False))
        except ValueError:
            pass
    return nets


def _pick_subnet(seq):
    """A 10.213.X.0/24 that overlaps nothing the host routes to and no
    other live cluster of this process (X derived from pid and SEQ)."""
    taken = _host_networks()
    start = (os.getpid() * 7 + seq) % 256
    for i in range(256):
        net = ipaddress.ip_network(f"10.213.{(start + i) % 256}.0/24")
        if not any(net.overlaps(t) for t in taken) and net not in _subnets_in_use:
            return net
    raise ClusterError("no free /24 in 10.213.0.0/16: the host routes to all of it")


class Cluster:
    """N_NODES virtual nodes; see the module comment.  Use as a context
    manager (or call start() and close()); close() is idempotent.

    time_offsets: {node: seconds} gives node a time namespace whose
    CLOCK_MONOTONIC and CLOCK_BOOTTIME run SECONDS ahead of the host's
    (negative: behind, as far as the clock's value allows)."""

    def __init__(self, n_nodes, time_offsets=None):
        if n_nodes < 1 or n_nodes > 200:
            raise ValueError(f"n_nodes must be 1..200, not {n_nodes}")
        self.n_nodes = n_nodes
        self.time_offsets = dict(time_offsets or {})
        for k in self.time_offsets:
            if not 0 <= k < n_nodes:
                raise ValueError(f"time_offsets names node {k}, not in 0..{n_nodes - 1}")
        self.seq = next(_SEQ)
        pid = os.getpid()
        self.hub = f"ss{self.seq}-{pid}-hub"
        self.bridge = f"ssbr{self.seq}-{pid}"[:15]
        self.namespaces = [f"ss{self.seq}-{pid}-{k}" for k in range(n_nodes)]
        self.subnet = None
        self._holders = []  # per node: the Popen of `unshare`, and the holder's pid
        self._children = []  # every Popen that popen() returned
        self._nsenter = shutil.which("nsenter")
        self._started = False

    # -- life cycle ---------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        """Creates the namespaces, the bridge, the veth pairs and the holder
        processes.  On any failure (KeyboardInterrupt included) removes what
        it created and re-raises."""
        if self._started:
            raise ClusterError("cluster already started")
        self._started = True
        try:
            remove_stale()
            self.subnet = _pick_subnet(self.seq)
            _subnets_in_use.add(self.subnet)
            self._make_network()
            for k in range(self.n_nodes):
                self._holders.append(self._start_holder(k))
        except BaseException:
            self.close()
            raise

    def _make_network(self):
        _ip("netns", "add", self.hub)
        _ip("-n", self.hub, "link", "set", "lo", "up")
        _ip("-n", self.hub, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", self.hub, "link", "set", self.bridge, "up")
        hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        hosts += [f"{self.addr(k)} node{k}" for k in range(self.n_nodes)]
        for k, ns in enumerate(self.namespaces):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.hub, "link", "add", f"v{k}", "type", "veth",
                "peer", "name", IFNAME, "netns", ns)
            _ip("-n", self.hub, "link", "set", f"v{k}", "master", self.bridge)
            _ip("-n", self.hub, "link", "set", f"v{k}", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(k)}/{self.subnet.prefixlen}",
                "dev", IFNAME)
            _ip("-n", ns, "link", "set", IFNAME, "up")
            etc = os.path.join(NETNS_ETC, ns)
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write("\n".join(hosts) + "\n")

    def _start_holder(self, k):
        """Starts node K's holder: `ip netns exec` (which binds the node's
        hosts file in a new mount namespace) runs unshare, whose child sets
        the hostname in the new UTS (and time) namespace and sleeps."""
        argv = ["ip", "netns", "exec", self.namespaces[k], "unshare", "--uts", "--fork",
                "--kill-child"]
        offset = self.time_offsets.get(k)
        if offset is not None:
            argv += ["--time", "--monotonic", str(offset), "--boottime", str(offset)]
        argv += ["--", "sh", "-c",
                 _cgroup_mount_script() + 'hostname "$1" && echo $$ && exec sleep infinity',
                 "sh", f"node{k}"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            proc.kill()
            _, err = proc.communicate()
            raise ClusterError(f"node{k}: {' '.join(argv)}: {err.strip() or 'no pid'}")
        return proc, int(line)

    def close(self):
        """Kills every process left in the cluster's namespaces, deletes the
        namespaces (which destroys the veths and the bridge) and the hosts
        files.  Safe to call more than once, and after a failed start()."""
        for ns in self.namespaces + [self.hub]:
            _remove_netns(ns)
        for proc in self._children + [h[0] for h in self._holders]:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        self._children.clear()
        self._holders.clear()
        _subnets_in_use.discard(self.subnet)

    # -- using it -----------------------------------------------------------

    def addr(self, k):
        """Node K's IPv4 address (a string), on its interface eth0."""
        self._check_node(k)
        if self.subnet is None:
            raise ClusterError("cluster not started")
        return str(self.subnet.network_address + 1 + k)

    def hostname(self, k):
        """Node K's hostname, `node<K>`: resolvable to addr(K) on every node."""
        self._check_node(k)
        return f"node{k}"

    def command(self, k, argv, cwd=None):
        """The argv that runs ARGV inside node K (nsenter into the holder's
        network, UTS, mount and, if any, time namespace), in directory CWD
        (default: this process's)."""
        self._check_node(k)
        if not self._holders:
            raise ClusterError("cluster not started")
        ns_opts = ["--net", "--uts", "--mount"]
        if k in self.time_offsets:
            ns_opts.append("--time")
        wd = os.fspath(cwd) if cwd is not None else os.getcwd()
        return [self._nsenter, f"--target={self._holders[k][1]}", *ns_opts,
                f"--wd={wd}", "--", *map(os.fspath, argv)]

    def popen(self, k, argv, **kwargs):
        """Starts ARGV inside node K and returns its subprocess.Popen
        (KWARGS as for Popen: env, stdout, cwd...).  The process is the
        command itself; close() kills it if it is still running."""
        proc = subprocess.Popen(self.command(k, argv, kwargs.get("cwd")), **kwargs)
        self._children.append(proc)
        return proc

    def run(self, k, argv, **kwargs):
        """subprocess.run of ARGV inside node K (KWARGS as for run)."""
        return subprocess.run(self.command(k, argv, kwargs.get("cwd")), **kwargs)

    def link_down(self, k):
        """Takes node K's eth0 down: its packets go nowhere (TCP connections
        to and from it stall, they are not reset) until link_up(K)."""
        self._check_node(k)
        _ip("-n", self.namespaces[k], "link", "set", "dev", IFNAME, "down")

    def link_up(self, k):
        """Brings node K's eth0 back up (its address and route come back)."""
        self._check_node(k)
        _ip("-n", self.namespaces[k], "link", "set", "dev", IFNAME, "up")

    def _check_node(self, k):
        if not isinstance(k, int) or not 0 <= k < self.n_nodes:
            raise ValueError(f"node {k!r} not in 0..{self.n_nodes - 1}")


def available():
    """(True, "") when this machine can build a Cluster, else (False, why):
    not root, no `ip`/nsenter/unshare, or the kernel refuses network or
    time namespaces.  Probes once (a two-node cluster with a time offset,
    then a command inside it) and caches the answer."""
    global _available
    if _available is None:
        _available = _probe()
    return _available


def should_run():
    """For a test module's skip mark: (True, "") when a Cluster can be
    built; (False, why) when it cannot and the test should be skipped
    with WHY, which is only when not running as root or when
    STEPSCOPE_NETNS=skip.  As root (CI) a machine that cannot build one is
    an error: raises ClusterError with the reason."""
    ok, why = available()
    if ok or os.geteuid() != 0 or os.environ.get("STEPSCOPE_NETNS") == "skip":
        return ok, why
    raise ClusterError(f"{why} (running as root, so the multi-node tests must run; "
                       "STEPSCOPE_NETNS=skip skips them)")


def _probe():
    if os.geteuid() != 0:
        return False, "virtual cluster needs root (network namespaces, veth, bridge)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return False, f"virtual cluster needs `{tool}` (apt-get install iproute2 util-linux)"
    try:
        with Cluster(2, time_offsets={1: 1000}) as c:
            r = c.run(1, ["sh", "-c", "hostname; cat /proc/uptime"],
                      capture_output=True, text=True, timeout=10)
            words = r.stdout.split()
            if r.returncode != 0 or words[:1] != ["node1"] or float(words[1]) < 1000:
                return False, ("virtual cluster probe: node1 should say its hostname and "
                               f"an uptime >= 1000 s, said {r.stdout!r} {r.stderr!r}")
    except (ClusterError, OSError, subprocess.SubprocessError) as e:
        return False, f"virtual cluster unsupported here: {e}"
    return True, ""
