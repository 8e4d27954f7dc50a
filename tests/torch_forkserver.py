#!/usr/bin/env python3
"""Runs a test script in a child forked from a server that has already imported torch.

Loading torch takes about 2 s of the ~4 s most end-to-end checks run for, and ctest starts each
check in a fresh interpreter. This keeps one interpreter with torch, onnx and numpy imported and
forks it per script, so each check starts as if `python3 SCRIPT ARGS...` had been run, minus the
imports:

    python3 tests/torch_forkserver.py run SCRIPT ARGS...   the script's exit status is this one's
    python3 tests/torch_forkserver.py stop                 ends the server (tools/test.sh, at exit)

`run` starts the server if none answers, and the server ends itself after IDLE_SECONDS with
nothing to do. The child gets the caller's standard streams (passed over the socket), working
directory, environment and argv, runs the script as __main__, and its exit status or signal comes
back to the caller; the caller's end closing (ctest's timeout kills it) kills the child's process
group. Whenever the server cannot be used (HETC_TEST_FORKSERVER=0, PYTHON* variables other than the
server's, no socket), `run` executes the script in this interpreter's executable instead, as before.
"""
import atexit
import hashlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback

IDLE_SECONDS = 30
# What the server imports before forking: the slow imports of the checks.
PRELOADED = ("torch", "onnx", "numpy")


def server_address():
    """An abstract socket (no file to go stale) named for the user, the interpreter, this script's
    text and this copy of it, and the root directory: abstract sockets are shared by every
    process of the network namespace, a chroot's and another checkout's included, whose scripts
    a server outside them would not find."""
    root, here = os.stat("/"), os.stat(__file__)
    with open(__file__, "rb") as f:
        identity = f.read() + repr((sys.executable, root.st_dev, root.st_ino, here.st_dev,
                                    here.st_ino)).encode()
    digest = hashlib.sha256(identity).hexdigest()[:16]
    return f"\0hetc-torch-forkserver-{os.getuid()}-{digest}"


def python_environment():
    return {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}


def send_message(sock, message, fds=()):
    data = json.dumps(message).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [header + data], list(fds))
    else:
        sock.sendall(header + data)


def receive_message(sock, max_fds=0):
    """One length-prefixed JSON message and the file descriptors sent with its first bytes."""
    fds = []
    buffer = b""
    while len(buffer) < 4 or len(buffer) < 4 + struct.unpack("!I", buffer[:4])[0]:
        if max_fds and not fds:
            chunk, received, _, _ = socket.recv_fds(sock, 1 << 16, max_fds)
            fds.extend(received)
        else:
            chunk = sock.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise EOFError("the other end closed before a whole message")
        buffer += chunk
    return json.loads(buffer[4:]), fds


# --- The server -------------------------------------------------------------------------------

def run_child(request, fds):
    """In the forked child: become the caller's script. Never returns."""
    code = 1
    try:
        # Signal dispositions are the server's, which are Python's defaults (SIGPIPE ignored,
        # as a fresh interpreter has it): the server changes none.
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def serve():
    for name in PRELOADED:
        try:
            __import__(name)
        except ImportError:
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(server_address())
    except OSError:
        return  # another server won the race; callers use that one
    listener.listen(64)
    startup_python_env = python_environment()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children = {}  # pid -> the caller's connection
    last_busy = time.monotonic()
    while True:
        for key, _ in selector.select(timeout=0.1):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
                if struct.unpack("3i", creds)[1] != os.getuid():
                    conn.close()
                    continue
                try:
                    request, fds = receive_message(conn, max_fds=3)
                except (EOFError, OSError, ValueError):
                    conn.close()
                    continue
                if request.get("stop"):
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    selector.close()
                    listener.close()
                    return
                if len(fds) != 3 or request.get("python_env") != startup_python_env:
                    # Variables that change how Python starts: the caller runs the script itself.
                    for fd in fds:
                        os.close(fd)
                    send_message(conn, {"refused": True})
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    run_child(request, fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:
                # The caller sends nothing after its request: readable means it has gone.
                try:
                    os.killpg(key.data, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                selector.unregister(key.fileobj)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is None:
                continue
            try:
                selector.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                send_message(conn, {"status": status})
            except OSError:
                pass
            conn.close()
        if children:
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy > IDLE_SECONDS:
            return


# --- The caller -------------------------------------------------------------------------------

def connect(start):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(server_address())
        return sock
    except OSError:
        if not start:
            sock.close()
            return None
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            sock.connect(server_address())
            return sock
        except OSError:
            if server.poll() is not None and server.returncode != 0:
                break
            time.sleep(0.05)
    sock.close()
    return None


def run(argv):
    sock = None
    if os.environ.get("HETC_TEST_FORKSERVER", "1") != "0":
        sock = connect(start=True)
    if sock is not None:
        # A closed standard stream (CI may run with no standard input) is /dev/null for the child.
        streams = []
        for fd in (0, 1, 2):
            try:
                os.fstat(fd)
                streams.append(fd)
            except OSError:
                streams.append(os.open(os.devnull, os.O_RDWR))
        try:
            send_message(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                                "python_env": python_environment()}, fds=streams)
            reply, _ = receive_message(sock)
        except (EOFError, OSError, ValueError) as e:
            print(f"torch_forkserver: the server failed ({e}); the script was not run",
                  file=sys.stderr)
            return 1
        sock.close()
        if reply.get("refused"):
            os.execv(sys.executable, [sys.executable] + argv)
        status = reply["status"]
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            return 128 + sig
        return os.waitstatus_to_exitcode(status)
    os.execv(sys.executable, [sys.executable] + argv)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve()
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "stop":
        sock = connect(start=False)
        if sock is not None:
            send_message(sock, {"stop": True})
            sock.close()
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        return run(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
