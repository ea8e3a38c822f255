"""Resources that run out, tried as a new user would (rckv only):

- `--memory 64mb --dir D` with D on a 24 MB file system (a tmpfs the test
  mounts): the start refuses with a message naming the directory, the size
  asked for and the space free, leaves no file behind, and the file system
  is as free as before (the space is checked before it is reserved);
- a region that fits is reserved whole at creation (no sparse file to die
  of SIGBUS later), and a restart reopens it with its data;
- `/dev/shm` too small for a `persistence none` region: the server runs in
  a mount namespace of its own whose /dev/shm is a 24 MB tmpfs;
- `--memory 1000gb`: refused at once with the same kind of message, on
  disk (persistence process) and in memory (persistence none), without
  touching the machine's memory;
- the region file truncated under a running server: the next access
  raises SIGBUS, which the server logs with the address and the region's
  file before it dies of it (no silent death).

Mounting needs root (CAP_SYS_ADMIN); where it is refused, those tests skip
and say so.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import rckvtest

pytestmark = pytest.mark.rckv_only

REFUSE_DEADLINE = 20          # a refused start that takes longer is a hang
SMALL_FS = "24m"


def mount_tmpfs(path, size):
    """Mount a tmpfs of `size` at path; None, or why it could not."""
    if not shutil.which("mount"):
        return "no mount(8)"
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
    if res.returncode != 0:
        return "mount -t tmpfs refused (%s): %s" % (res.returncode,
                                                    res.stdout.decode(errors="replace").strip())
    return None


@pytest.fixture
def small_fs():
    """A 24 MB tmpfs mounted for the test, unmounted after it."""
    mnt = tempfile.mkdtemp(prefix="rckv-smallfs-")
    why = mount_tmpfs(mnt, SMALL_FS)
    if why:
        os.rmdir(mnt)
        pytest.skip("cannot mount a small file system: %s (the test needs root)" % why)
    try:
        yield mnt
    finally:
        for _ in range(50):
            if subprocess.run(["umount", mnt], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)  # a server still exiting keeps it busy
        else:
            subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def argv(make_server, **opts):
    return make_server(opts=opts, start=False, name="victim").argv()


def refused(args, *patterns, env_argv=None):
    """Run the server; it must exit non-zero by itself before it is ready,
    and stderr and its log (stdout) must match every pattern."""
    res = rckvtest.run(env_argv or args, timeout=REFUSE_DEADLINE)
    assert res.returncode not in (0, None), \
        "the server started (status %s)\n%s" % (res.returncode, res.stdout[-2000:])
    assert "Ready to accept" not in res.stdout
    for where, text in (("stderr", res.stderr), ("log", res.stdout)):
        for p in patterns:
            assert re.search(p, text), "%s does not say %r:\n%s" % (where, p, text)
    return res


def test_region_larger_than_its_file_system_is_refused(make_server, small_fs):
    d = os.path.join(small_fs, "data")
    before = free_bytes(small_fs)
    refused(argv(make_server, memory="64mb", dir=d),
            r"cannot reserve 64\.0 MiB", re.escape(d),
            r"(2[0-4]\.\d|1\d\.\d) MiB free of 24\.0 MiB")
    assert not [f for f in os.listdir(d) if f.endswith(".region") or f.endswith(".tmp")], \
        os.listdir(d)
    # Checked before reserving: the file system never filled up.
    assert free_bytes(small_fs) >= before - 64 * 1024


def test_region_that_fits_is_reserved_and_reopened(make_server, small_fs):
    d = os.path.join(small_fs, "data")
    s = make_server(opts={"memory": "16mb", "dir": d, "threads": 1})
    path = os.path.join(d, "node-1.region")
    st = os.stat(path)
    assert st.st_size == 16 << 20
    assert st.st_blocks * 512 >= 16 << 20, "the region file is sparse: %d blocks" % st.st_blocks
    with s.raw() as c:
        assert c.call("SET", "k", "v") == "OK"
    s.stop()
    # Reopened: the reservation finds no hole left and writes nothing.
    s.start()
    with s.raw() as c:
        assert c.call("GET", "k") == b"v"


def test_shm_too_small_for_a_none_region_is_refused(make_server):
    """The server alone sees a 24 MB /dev/shm (unshare -m: a mount
    namespace of its own, so the machine's /dev/shm is untouched)."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) to give the server a /dev/shm of its own")
    probe = subprocess.run(["unshare", "-m", "sh", "-c",
                            "mount -t tmpfs -o size=%s tmpfs /dev/shm" % SMALL_FS],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
    if probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs on /dev/shm in a mount namespace (needs root): %s"
                    % probe.stdout.decode(errors="replace").strip())
    args = argv(make_server, memory="64mb", persistence="none")
    wrapped = ["unshare", "-m", "sh", "-c",
               'mount -t tmpfs -o size=%s tmpfs /dev/shm && exec "$@"' % SMALL_FS, "sh"] + args
    refused(args, r"cannot reserve 64\.0 MiB", r"in /dev/shm",
            r"(2[0-4]\.\d|1\d\.\d) MiB free of 24\.0 MiB", env_argv=wrapped)


def test_memory_1000gb_is_refused_on_disk(make_server):
    s = make_server(start=False, name="victim")
    if free_bytes(s.dir) >= 1000 << 30:
        pytest.skip("this disk has 1000 GB free: the region would fit")
    refused(argv(make_server, memory="1000gb", dir=s.dir),
            r"cannot reserve 1000\.0 GiB", re.escape(s.dir), r"GiB free of")


def test_memory_1000gb_is_refused_in_memory(make_server):
    refused(argv(make_server, memory="1000gb", persistence="none"),
            r"cannot reserve 1000\.0 GiB", r"/dev/shm", r"free of")


def test_truncated_region_sigbus_is_logged(make_server):
    s = make_server(opts={"memory": "16mb", "threads": 1})
    with s.raw() as c:
        for i in range(100):
            assert c.call("SET", "key:%d" % i, "value") == "OK"
    path = os.path.join(s.dir, "node-1.region")
    os.truncate(path, 4096)  # the header's page only: the index is gone
    with s.raw() as c:
        try:
            for i in range(100):
                c.call("GET", "key:%d" % i)
        except (rckvtest.Closed, OSError):
            pass
    status = s.wait_exit(timeout=10)
    assert status == -signal.SIGBUS, "status %s\n%s" % (status, s.log_tail())
    with open(s.logpath, "rb") as f:
        log = f.read().decode("utf-8", "replace")
    m = re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} node=1 warning: SIGBUS at address "
                  r"0x[0-9a-f]+, offset (\d+) of the MemStore region (\S+) \((\d+) bytes\)",
                  log, re.M)
    assert m, log[-3000:]
    assert m.group(2) == os.path.realpath(path)
    assert int(m.group(3)) == 16 << 20 and 4096 <= int(m.group(1)) < 16 << 20
