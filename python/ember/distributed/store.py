"""Key-value stores for rendezvous (torch.distributed's Store family).

`TCPStore` — one rank (is_master=True) serves the keys from a background
thread; every rank, the master too, is a client over TCP. `FileStore` keeps
the keys in a file on a shared filesystem, `HashStore` in this process,
and `PrefixStore` puts a prefix before every key of another store.

Values are bytes (`set` takes str or bytes). `get`/`wait` block until the
keys exist, for at most the store's timeout; then they raise
DistStoreError ("wait timeout after ...ms, keys: ..."), as torch does.
The wire format is a command byte and length-prefixed byte strings: no
pickle, so a stray connection can't run code in the server.
"""
import datetime
import errno
import os
import selectors
import socket
import struct
import threading
import time

from ember import _C

DistError = _C.DistError
DistBackendError = _C.DistBackendError


class DistStoreError(DistError):
    """A store operation failed or timed out."""


class DistNetworkError(DistError):
    """A connection could not be made or was lost."""


_DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _as_bytes(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"a store value must be str or bytes, not {type(value).__name__}")


def _timeout_error(seconds, keys):
    return DistStoreError(f"wait timeout after {int(round(seconds * 1000))}ms, keys: "
                          + ", ".join("/" + k for k in keys))


def _compare_set(data, key, expected, desired):
    """torch's rule: set when the current value equals `expected` (a missing
    key counts as b""); answer the value now stored, or `expected` for a
    missing key that was not set."""
    cur = data.get(key)
    if cur is None:
        if expected == b"":
            data[key] = desired
            return desired
        return expected
    if cur == expected:
        data[key] = desired
        return desired
    return cur


class Store:
    """The interface every store offers (torch.distributed.Store)."""

    def __init__(self, timeout=_DEFAULT_TIMEOUT):
        self._timeout = _seconds(timeout)

    @property
    def timeout(self):
        return datetime.timedelta(seconds=self._timeout)

    def set_timeout(self, timeout):
        self._timeout = _seconds(timeout)

    def _local_address(self):
        """The address this process's peers can reach it at (transport setup)."""
        return "127.0.0.1"

    def append(self, key, value):
        # default: compare_set until it sticks (atomic on every store)
        value = _as_bytes(value)
        while True:
            cur = self.get(key) if self.check([key]) else b""
            if self.compare_set(key, cur, cur + value) == cur + value:
                return

    def multi_get(self, keys):
        return [self.get(k) for k in keys]

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self.set(k, v)


class HashStore(Store):
    """Keys in this process's memory; threads share it."""

    def __init__(self):
        super().__init__()
        self._data = {}
        self._cond = threading.Condition()

    def set(self, key, value):
        with self._cond:
            self._data[key] = _as_bytes(value)
            self._cond.notify_all()

    def get(self, key):
        self.wait([key])
        with self._cond:
            return self._data[key]

    def add(self, key, amount):
        with self._cond:
            v = int(self._data.get(key, b"0")) + int(amount)
            self._data[key] = str(v).encode()
            self._cond.notify_all()
            return v

    def compare_set(self, key, expected_value, desired_value):
        with self._cond:
            r = _compare_set(self._data, key, _as_bytes(expected_value), _as_bytes(desired_value))
            self._cond.notify_all()
            return r

    def wait(self, keys, timeout=None):
        t = self._timeout if timeout is None else _seconds(timeout)
        with self._cond:
            if not self._cond.wait_for(lambda: all(k in self._data for k in keys), timeout=t):
                raise _timeout_error(t, [k for k in keys if k not in self._data])

    def check(self, keys):
        with self._cond:
            return all(k in self._data for k in keys)

    def delete_key(self, key):
        with self._cond:
            return self._data.pop(key, None) is not None

    def num_keys(self):
        with self._cond:
            return len(self._data)


class PrefixStore(Store):
    """Every key of `store` seen through "prefix/key"."""

    def __init__(self, prefix, store):
        super().__init__(store.timeout)
        self._prefix = prefix
        self._store = store

    @property
    def underlying_store(self):
        return self._store

    @property
    def timeout(self):
        return self._store.timeout

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    def _k(self, key):
        return f"{self._prefix}/{key}"

    def _local_address(self):
        return self._store._local_address()

    def set(self, key, value):
        self._store.set(self._k(key), value)

    def get(self, key):
        return self._store.get(self._k(key))

    def add(self, key, amount):
        return self._store.add(self._k(key), amount)

    def compare_set(self, key, expected_value, desired_value):
        return self._store.compare_set(self._k(key), expected_value, desired_value)

    def wait(self, keys, timeout=None):
        return self._store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys):
        return self._store.check([self._k(k) for k in keys])

    def delete_key(self, key):
        return self._store.delete_key(self._k(key))

    def num_keys(self):
        return self._store.num_keys()

    def append(self, key, value):
        return self._store.append(self._k(key), value)


# ------------------------------------------------------------------ TCPStore

_SET, _GET, _ADD, _CAS, _WAIT, _CHECK, _DELETE, _NUM_KEYS, _APPEND = range(1, 10)
_WORKERS_KEY = "init/"  # the key the master counts its clients with (torch's name)


def _pack(cmd, *fields):
    out = [struct.pack("!BI", cmd, len(fields))]
    for f in fields:
        out.append(struct.pack("!Q", len(f)))
        out.append(f)
    return b"".join(out)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def _recv_fields(sock):
    cmd, count = struct.unpack("!BI", _recv_exact(sock, 5))
    fields = []
    for _ in range(count):
        (n,) = struct.unpack("!Q", _recv_exact(sock, 8))
        fields.append(_recv_exact(sock, n))
    return cmd, fields


class _StoreServer:
    """The master's key table, served to every client by one thread."""

    def __init__(self, host, port):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._lsock = socket.socket(family, socket.SOCK_STREAM)
        # a restarted job reuses its port while the old connections sit in TIME_WAIT
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            # every interface, as torch's store does: MASTER_ADDR may name this
            # host by an address other than the one its peers reach it at
            self._lsock.bind(("::" if family == socket.AF_INET6 else "", port))
        except OSError as e:
            self._lsock.close()
            name = errno.errorcode.get(e.errno, "?")
            raise DistNetworkError(
                f"The server socket has failed to bind to {host}:{port} ({name}: {e.strerror})"
                + (" — the port is in use" if e.errno == errno.EADDRINUSE else "")) from None
        self._lsock.listen(128)
        self._lsock.setblocking(False)
        self.port = self._lsock.getsockname()[1]
        self._data = {}
        self._waiters = []  # (sock, keys) answered once every key exists
        self._inbox = {}    # sock -> bytearray of unparsed input
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._lsock, selectors.EVENT_READ)
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="ember-TCPStore-server", daemon=True)
        self._thread.start()

    def close(self):
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(timeout=5)

    def _serve(self):
        try:
            while not self._stop:
                for key, _ in self._sel.select(timeout=1.0):
                    s = key.fileobj
                    if s is self._lsock:
                        try:
                            c, _ = self._lsock.accept()
                        except OSError:
                            continue
                        c.setblocking(True)
                        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self._inbox[c] = bytearray()
                        self._sel.register(c, selectors.EVENT_READ)
                    elif s is self._wake_r:
                        s.recv(64)
                    else:
                        self._read(s)
        finally:
            for s in list(self._inbox):
                self._drop(s)
            self._sel.close()
            self._lsock.close()
            self._wake_r.close()
            self._wake_w.close()

    def _drop(self, s):
        self._inbox.pop(s, None)
        self._waiters = [w for w in self._waiters if w[0] is not s]
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    def _read(self, s):
        try:
            chunk = s.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(s)
            return
        buf = self._inbox[s]
        buf += chunk
        while True:  # parse every whole request in the buffer
            if len(buf) < 5:
                return
            cmd, count = struct.unpack_from("!BI", buf, 0)
            pos, fields = 5, []
            for _ in range(count):
                if len(buf) < pos + 8:
                    return
                (n,) = struct.unpack_from("!Q", buf, pos)
                if len(buf) < pos + 8 + n:
                    return
                fields.append(bytes(buf[pos + 8:pos + 8 + n]))
                pos += 8 + n
            del buf[:pos]
            try:
                self._handle(s, cmd, fields)
            except (OSError, ValueError):
                self._drop(s)
                return

    def _reply(self, s, *fields):
        s.sendall(_pack(0, *fields))

    def _handle(self, s, cmd, f):
        d = self._data
        # keys are text; values (the other fields of SET/ADD/CAS/APPEND) any bytes
        keys = [x.decode() for x in (f if cmd in (_WAIT, _CHECK) else f[:1])]
        if cmd == _SET:
            d[keys[0]] = f[1]
            self._wake_waiters()  # first: once set() returns, the waiters have their answer
            self._reply(s)
        elif cmd == _GET:
            self._reply(s, d.get(keys[0], b""), b"1" if keys[0] in d else b"0")
        elif cmd == _ADD:
            v = int(d.get(keys[0], b"0")) + int(f[1])
            d[keys[0]] = str(v).encode()
            self._wake_waiters()
            self._reply(s, d[keys[0]])
        elif cmd == _CAS:
            r = _compare_set(d, keys[0], f[1], f[2])
            self._wake_waiters()
            self._reply(s, r)
        elif cmd == _APPEND:
            d[keys[0]] = d.get(keys[0], b"") + f[1]
            self._wake_waiters()
            self._reply(s)
        elif cmd == _WAIT:
            if all(k in d for k in keys):
                self._reply(s)
            else:
                self._waiters.append((s, keys))
        elif cmd == _CHECK:
            self._reply(s, b"1" if all(k in d for k in keys) else b"0")
        elif cmd == _DELETE:
            self._reply(s, b"1" if d.pop(keys[0], None) is not None else b"0")
        elif cmd == _NUM_KEYS:
            self._reply(s, str(len(d)).encode())
        else:
            raise ValueError(f"unknown store command {cmd}")

    def _wake_waiters(self):
        still = []
        for s, keys in self._waiters:
            if all(k in self._data for k in keys):
                try:
                    self._reply(s)
                except OSError:
                    pass
            else:
                still.append((s, keys))
        self._waiters = still


class TCPStore(Store):
    """TCPStore(host_name, port, world_size=None, is_master=False,
    timeout=timedelta(seconds=300), wait_for_workers=True, ...): the master
    serves the keys (port 0 picks a free port: see `.port`); a master
    with `wait_for_workers` waits until `world_size` clients have joined."""

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=_DEFAULT_TIMEOUT, wait_for_workers=True, multi_tenant=False,
                 master_listen_fd=None, use_libuv=True):
        super().__init__(timeout)
        self.host = host_name
        self._server = None
        self._lock = threading.Lock()
        if is_master:
            self._server = _StoreServer(host_name, port)
            port = self._server.port
        self.port = port
        self.world_size = world_size
        self._sock = None
        try:
            self._connect()
            self._call(_ADD, _WORKERS_KEY, b"1")
            if is_master and wait_for_workers and world_size:
                self._wait_workers(world_size)
        except BaseException:
            self._close()
            raise

    def _wait_workers(self, world_size):
        deadline = time.monotonic() + self._timeout
        while int(self._call(_GET, _WORKERS_KEY)[0] or b"0") < world_size:
            if time.monotonic() > deadline:
                joined = int(self._call(_GET, _WORKERS_KEY)[0] or b"0")
                raise DistStoreError(
                    f"Timed out after {self._timeout:g} s waiting for clients: {joined}/{world_size} "
                    "clients joined")
            time.sleep(0.01)

    def _connect(self):
        deadline = time.monotonic() + self._timeout
        last = None
        while True:
            try:
                s = socket.create_connection((self.host, self.port),
                                             timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(None)
                self._sock = s
                return
            except OSError as e:
                last = e
            if time.monotonic() >= deadline:
                raise DistNetworkError(
                    f"The client socket has timed out after {self._timeout:g} s while trying to "
                    f"connect to ({self.host}, {self.port}): {last}") from None
            time.sleep(0.05)

    def _call(self, cmd, *fields, timeout=None):
        """One request, one reply; on a timeout the connection is renewed
        (its reply would arrive late and out of order)."""
        enc = [x.encode() if isinstance(x, str) else x for x in fields]
        with self._lock:
            if self._sock is None:
                self._connect()
            self._sock.settimeout(self._timeout if timeout is None else timeout)
            try:
                self._sock.sendall(_pack(cmd, *enc))
                return _recv_fields(self._sock)[1]
            except socket.timeout:
                self._sock.close()
                self._sock = None
                raise
            except (OSError, ConnectionError) as e:
                self._sock.close()
                self._sock = None
                raise DistNetworkError(
                    f"Failed to reach the TCPStore at {self.host}:{self.port} ({e}); "
                    "did the master (the rank that hosts the store) exit?") from None

    def _local_address(self):
        with self._lock:
            if self._sock is not None:
                return self._sock.getsockname()[0]
        return super()._local_address()

    def set(self, key, value):
        self._call(_SET, key, _as_bytes(value))

    def get(self, key):
        self.wait([key])
        value, present = self._call(_GET, key)
        if present != b"1":  # deleted between the wait and the get
            raise _timeout_error(self._timeout, [key])
        return value

    def add(self, key, amount):
        return int(self._call(_ADD, key, str(int(amount)).encode())[0])

    def compare_set(self, key, expected_value, desired_value):
        return self._call(_CAS, key, _as_bytes(expected_value), _as_bytes(desired_value))[0]

    def append(self, key, value):
        self._call(_APPEND, key, _as_bytes(value))

    def wait(self, keys, timeout=None):
        t = self._timeout if timeout is None else _seconds(timeout)
        try:
            self._call(_WAIT, *keys, timeout=t)
        except socket.timeout:
            raise _timeout_error(t, keys) from None

    def check(self, keys):
        return self._call(_CHECK, *keys)[0] == b"1"

    def delete_key(self, key):
        return self._call(_DELETE, key)[0] == b"1"

    def num_keys(self):
        return int(self._call(_NUM_KEYS)[0])

    def _close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._server is not None:
            self._server.close()
            self._server = None

    def __del__(self):
        try:
            self._close()
        except Exception:
            pass


# ----------------------------------------------------------------- FileStore

class FileStore(Store):
    """FileStore(file_name, world_size=-1): keys in one file that every
    process opens (a shared filesystem across nodes). Each change appends a
    record under an exclusive lock (fcntl.flock); readers replay the file.
    The file counts the FileStores open on it; the last one to go removes
    it, so the next job starts from an empty store (torch's behaviour)."""

    _REFS = "__ember_filestore_refs"

    def __init__(self, file_name, world_size=-1):
        super().__init__()
        self.path = file_name
        self.world_size = world_size
        open(file_name, "ab").close()
        self._open = False
        self.add(self._REFS, 1)
        self._open = True

    def __del__(self):
        try:
            if self._open:
                self._open = False
                with self._locked(True) as f:
                    left = int(self._replay(f).get(self._REFS, b"1")) - 1
                    self._record(f, b"S", self._REFS, str(left).encode())
                    if left <= 0:
                        os.remove(self.path)
        except Exception:  # interpreter shutdown, file already gone
            pass

    def _locked(self, exclusive):
        import fcntl

        class _Lock:
            def __enter__(s):
                s.f = open(self.path, "a+b")
                fcntl.flock(s.f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                s.f.seek(0)
                return s.f

            def __exit__(s, *exc):
                fcntl.flock(s.f, fcntl.LOCK_UN)
                s.f.close()
        return _Lock()

    @staticmethod
    def _replay(f):
        data, raw = {}, f.read()
        pos = 0
        while pos + 9 <= len(raw):
            op, kn, vn = raw[pos:pos + 1], *struct.unpack_from("!II", raw, pos + 1)
            end = pos + 9 + kn + vn
            if end > len(raw):
                break  # a record being written
            key = raw[pos + 9:pos + 9 + kn].decode()
            if op == b"S":
                data[key] = raw[pos + 9 + kn:end]
            else:
                data.pop(key, None)
            pos = end
        return data

    @staticmethod
    def _record(f, op, key, value=b""):
        k = key.encode()
        f.seek(0, os.SEEK_END)
        f.write(op + struct.pack("!II", len(k), len(value)) + k + value)
        f.flush()

    def _read(self):
        with self._locked(False) as f:
            return self._replay(f)

    def set(self, key, value):
        with self._locked(True) as f:
            self._record(f, b"S", key, _as_bytes(value))

    def get(self, key):
        self.wait([key])
        return self._read()[key]

    def add(self, key, amount):
        with self._locked(True) as f:
            v = int(self._replay(f).get(key, b"0")) + int(amount)
            self._record(f, b"S", key, str(v).encode())
            return v

    def compare_set(self, key, expected_value, desired_value):
        with self._locked(True) as f:
            data = self._replay(f)
            before = data.get(key)
            r = _compare_set(data, key, _as_bytes(expected_value), _as_bytes(desired_value))
            if data.get(key) != before:
                self._record(f, b"S", key, data[key])
            return r

    def wait(self, keys, timeout=None):
        t = self._timeout if timeout is None else _seconds(timeout)
        deadline = time.monotonic() + t
        while True:
            data = self._read()
            missing = [k for k in keys if k not in data]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise _timeout_error(t, missing)
            time.sleep(0.005)

    def check(self, keys):
        data = self._read()
        return all(k in data for k in keys)

    def delete_key(self, key):
        with self._locked(True) as f:
            if key not in self._replay(f):
                return False
            self._record(f, b"D", key)
            return True

    def num_keys(self):
        return len(self._read())
