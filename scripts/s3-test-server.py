"""A loopback S3 for the integration tests of the tools that read and write object storage: moto's
S3 behind a TCP proxy that can vanish mid-transfer, so a test can check what a tool does when the
store goes away (a clean error, no half-written object, a resumable upload). Run it with the test
venv's python (scripts/python-env.sh); it binds 127.0.0.1 only.

  s3-test-server.py serve DIR [--bucket NAME]... [--cut-after-bytes N]
      Starts moto (region us-east-1) with real request signing: every request must be signed with
      the key of IAM user runfn-test, which may do s3:* on everything. Writes DIR/server.json once
      ready, {"endpoint", "direct_endpoint", "access_key_id", "secret_access_key", "region",
      "pid"}: "endpoint" is the proxy the tools under test use, "direct_endpoint" is moto itself.
      SIGUSR1 takes the proxy away (listener closed, every open connection reset); SIGUSR2 brings
      it back on the same port. With --cut-after-bytes N it takes itself away once, as soon as it
      has forwarded more than N bytes from clients to moto, and writes DIR/cut.json {"bytes"}.
      SIGHUP writes DIR/traffic.json {"to_clients", "from_clients"}: the bytes the proxy has
      passed each way so far (what a tool fetched, what it sent).
      SIGTERM or SIGINT stops it (exit 0). moto 5.2.5 answers a request without an Authorization
      header (unsigned, or a presigned URL) with a 500 and a traceback on stderr, not a 403.
  s3-test-server.py ls DIR BUCKET [PREFIX]
      Prints {"objects": [{"key", "size", "etag"}...], "uploads_in_progress": [key...]}, both
      sorted by key; etag without its quotes. Goes to moto directly, so the proxy's state and byte
      count are not touched.
  s3-test-server.py get DIR BUCKET KEY OUTFILE
  s3-test-server.py put DIR BUCKET KEY INFILE
      Downloads or uploads one object, directly to moto.

Exit codes: 0 done, 1 the store refused or failed a request, 2 usage error or no usable
DIR/server.json.
"""

import argparse
import errno
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile

REGION = "us-east-1"
USER = "runfn-test"
S3_ALL = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}
# Per direction of a proxied connection: stop reading once this much waits to be sent, so a slow
# reader slows its writer instead of filling memory.
BUFFER_LIMIT = 1 << 20
CHUNK = 64 * 1024


class Failure(Exception):
    """A request the store refused or could not serve (exit 1)."""


class Unusable(Exception):
    """Bad arguments or a server folder that cannot be used (exit 2)."""


def write_json_atomically(path, value):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(value, out)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def reset(sock):
    """Closes with SO_LINGER 0, so the peer gets an RST rather than a FIN: what it sees when the
    store's host or a load balancer goes away, not a server that finished its reply."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class Direction:
    """One way of a proxied connection: bytes read from src wait in buf until dst takes them."""

    def __init__(self, src, dst, counted):
        self.src, self.dst, self.counted = src, dst, counted
        self.buf = bytearray()
        self.eof = False
        self.shut = False



class Connection:
    def __init__(self, client, upstream):
        self.client, self.upstream = client, upstream
        self.ways = [Direction(client, upstream, True), Direction(upstream, client, False)]

    def sockets(self):
        return (self.client, self.upstream)


class Proxy:
    """Forwards 127.0.0.1:port to moto in one select loop. One thread owns every socket, so a cut
    resets connections between two reads or writes, never under a thread blocked in one."""

    def __init__(self, upstream, cut_after, cut_file):
        self.upstream = upstream
        self.cut_after = cut_after
        self.cut_file = cut_file
        self.forwarded = 0
        # Bytes moto sent to clients, written to DIR/traffic.json when asked (SIGHUP).
        self.to_clients = 0
        self.traffic_file = os.path.join(os.path.dirname(cut_file), "traffic.json")
        self.connections = []
        self.listener = None
        self.port = 0
        self.commands = []
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.listen()

    def listen(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        self.port = listener.getsockname()[1]

    def command(self, name):
        """Called from a signal handler: the loop acts on it after its select wakes."""
        self.commands.append(name)
        try:
            self.wake_w.send(b"x")
        except BlockingIOError:
            pass

    def cut(self):
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for conn in self.connections:
            for sock in conn.sockets():
                reset(sock)
        self.connections = []

    def restore(self):
        if self.listener is None:
            try:
                self.listen()
            except OSError as err:
                print(f"s3-test-server: cannot listen again on port {self.port}: {err}", file=sys.stderr)

    def accept(self):
        try:
            client, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError as err:
            print(f"s3-test-server: proxy cannot reach moto at {self.upstream}: {err}", file=sys.stderr)
            reset(client)
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections.append(Connection(client, upstream))

    def room(self, way):
        """How many bytes way may read now: with a cut armed, no further than the byte that
        crosses the limit, so the cut lands exactly there."""
        if way.eof or len(way.buf) >= BUFFER_LIMIT:
            return 0
        if not way.counted or self.cut_after is None:
            return CHUNK
        pending = sum(len(conn.ways[0].buf) for conn in self.connections)
        return max(0, min(CHUNK, self.cut_after + 1 - self.forwarded - pending))

    def pump_read(self, way):
        limit = self.room(way)
        if not limit:
            return
        data = way.src.recv(limit)
        if data:
            way.buf += data
        else:
            way.eof = True

    def pump_write(self, way):
        sent = way.dst.send(way.buf)
        del way.buf[:sent]
        if not way.counted:
            self.to_clients += sent
        if way.counted:
            self.forwarded += sent
            if self.cut_after is not None and self.forwarded > self.cut_after:
                self.cut_after = None
                self.cut()
                write_json_atomically(self.cut_file, {"bytes": self.forwarded})
                return True
        return False

    def step(self):
        """Waits for one round of events and serves it; returns False once told to stop."""
        readers, writers = [self.wake_r], []
        if self.listener is not None:
            readers.append(self.listener)
        for conn in self.connections:
            for way in conn.ways:
                if self.room(way):
                    readers.append(way.src)
                if way.buf:
                    writers.append(way.dst)
        readable, writable, _ = select.select(readers, writers, [])
        if self.wake_r in readable:
            while True:
                try:
                    if not self.wake_r.recv(256):
                        break
                except BlockingIOError:
                    break
            while self.commands:
                name = self.commands.pop(0)
                if name == "stop":
                    self.cut()
                    return False
                if name == "cut":
                    self.cut()
                elif name == "restore":
                    self.restore()
                elif name == "traffic":
                    write_json_atomically(
                        self.traffic_file,
                        {"to_clients": self.to_clients, "from_clients": self.forwarded},
                    )
            return True
        if self.listener is not None and self.listener in readable:
            self.accept()
        for conn in list(self.connections):
            try:
                for way in conn.ways:
                    if way.src in readable:
                        self.pump_read(way)
                    if way.dst in writable and way.buf:
                        if self.pump_write(way):
                            return True
                    if way.eof and not way.buf and not way.shut:
                        way.dst.shutdown(socket.SHUT_WR)
                        way.shut = True
            except BlockingIOError:
                continue
            except OSError as err:
                # One side reset or broke: pass that on to the other side as a reset too.
                if err.errno not in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                    print(f"s3-test-server: proxied connection failed: {err}", file=sys.stderr)
                for sock in conn.sockets():
                    reset(sock)
                self.connections.remove(conn)
                continue
            if all(way.shut for way in conn.ways):
                for sock in conn.sockets():
                    sock.close()
                self.connections.remove(conn)
        return True


def client(service, endpoint, key_id, secret):
    import boto3
    import botocore.config

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


def serve(args):
    if not os.path.isdir(args.dir):
        raise Unusable(f"serve: {args.dir} is not a folder")
    buckets = args.bucket or []
    # moto checks signatures only after this many requests: exactly the set-up below (create the
    # user, its key and its policy, then each bucket); read once, when moto is imported.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(3 + len(buckets))
    import logging

    import botocore.exceptions
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, moto_port = moto.get_host_and_port()
        direct = f"http://{host}:{moto_port}"
        try:
            iam = client("iam", direct, "set-up", "set-up")
            iam.create_user(UserName=USER)
            key = iam.create_access_key(UserName=USER)["AccessKey"]
            iam.put_user_policy(UserName=USER, PolicyName="s3-all", PolicyDocument=json.dumps(S3_ALL))
            s3 = client("s3", direct, "set-up", "set-up")
            for bucket in buckets:
                s3.create_bucket(Bucket=bucket)
        except botocore.exceptions.ClientError as err:
            raise Unusable(f"serve: setting up the store failed: {err}") from err
        # A store that took unsigned requests would let a tool that signs wrongly pass its tests.
        try:
            client("s3", direct, "not-a-key", "not-a-secret").list_buckets()
        except botocore.exceptions.ClientError:
            pass
        else:
            raise Failure("serve: moto accepted a request from an unknown key; authentication is off")

        proxy = Proxy(("127.0.0.1", moto_port), args.cut_after_bytes, os.path.join(args.dir, "cut.json"))
        signal.signal(signal.SIGUSR1, lambda *_: proxy.command("cut"))
        signal.signal(signal.SIGUSR2, lambda *_: proxy.command("restore"))
        signal.signal(signal.SIGHUP, lambda *_: proxy.command("traffic"))
        signal.signal(signal.SIGTERM, lambda *_: proxy.command("stop"))
        signal.signal(signal.SIGINT, lambda *_: proxy.command("stop"))
        write_json_atomically(
            os.path.join(args.dir, "server.json"),
            {
                "endpoint": f"http://127.0.0.1:{proxy.port}",
                "direct_endpoint": direct,
                "access_key_id": key["AccessKeyId"],
                "secret_access_key": key["SecretAccessKey"],
                "region": REGION,
                "pid": os.getpid(),
            },
        )
        while proxy.step():
            pass
    finally:
        moto.stop()
    return 0


def direct_client(folder):
    path = os.path.join(folder, "server.json")
    try:
        with open(path) as f:
            server = json.load(f)
        return client("s3", server["direct_endpoint"], server["access_key_id"], server["secret_access_key"])
    except OSError as err:
        raise Unusable(f"cannot read {path}: {err.strerror}") from err
    except (ValueError, KeyError, TypeError) as err:
        raise Unusable(f"{path} is not a server.json written by serve: {err!r}") from err


def ls(args):
    s3 = direct_client(args.dir)
    objects = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket, Prefix=args.prefix):
        for obj in page.get("Contents", []):
            objects.append({"key": obj["Key"], "size": obj["Size"], "etag": obj["ETag"].strip('"')})
    uploads = []
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=args.bucket, Prefix=args.prefix):
        uploads.extend(upload["Key"] for upload in page.get("Uploads", []))
    objects.sort(key=lambda obj: obj["key"])
    json.dump({"objects": objects, "uploads_in_progress": sorted(uploads)}, sys.stdout)
    sys.stdout.write("\n")
    return 0


def get(args):
    s3 = direct_client(args.dir)
    folder = os.path.dirname(os.path.abspath(args.outfile))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            s3.download_fileobj(args.bucket, args.key, out)
            out.flush()
            os.fsync(out.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, args.outfile)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


def put(args):
    s3 = direct_client(args.dir)
    try:
        with open(args.infile, "rb") as data:
            s3.upload_fileobj(data, args.bucket, args.key)
    except FileNotFoundError as err:
        raise Unusable(f"put: cannot read {args.infile}: {err.strerror}") from err
    return 0


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="s3-test-server.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("serve", help="run the store and its proxy until SIGTERM")
    p.add_argument("dir")
    p.add_argument("--bucket", action="append", metavar="NAME", help="create this bucket (repeatable)")
    p.add_argument("--cut-after-bytes", type=int, metavar="N", help="go away once past N client bytes")
    p.set_defaults(run=serve)
    p = commands.add_parser("ls", help="list objects and unfinished multipart uploads as JSON")
    p.add_argument("dir")
    p.add_argument("bucket")
    p.add_argument("prefix", nargs="?", default="")
    p.set_defaults(run=ls)
    p = commands.add_parser("get", help="download one object")
    p.add_argument("dir")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("outfile")
    p.set_defaults(run=get)
    p = commands.add_parser("put", help="upload one object")
    p.add_argument("dir")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("infile")
    p.set_defaults(run=put)
    args = parser.parse_args(argv)
    if getattr(args, "cut_after_bytes", None) is not None and args.cut_after_bytes < 0:
        parser.error("--cut-after-bytes: N must be 0 or more")
    return args


def main(argv):
    args = parse(argv)
    import botocore.exceptions

    try:
        return args.run(args)
    except Unusable as err:
        print(f"s3-test-server: {err}", file=sys.stderr)
        return 2
    except Failure as err:
        print(f"s3-test-server: {err}", file=sys.stderr)
        return 1
    except botocore.exceptions.ClientError as err:
        error = err.response.get("Error", {})
        print(
            f"s3-test-server: {args.command}: {error.get('Code', '?')}: {error.get('Message', err)}",
            file=sys.stderr,
        )
        return 1
    except (botocore.exceptions.BotoCoreError, OSError) as err:
        print(f"s3-test-server: {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
