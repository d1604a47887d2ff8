"""A single-node KRaft Kafka broker run from Maven Central jars on the local JVM.

No tarball and no Docker image: ``kafka-broker.pom.xml`` names the broker's runtime
classpath, Maven resolves it once into ``<cache_dir>/kafka-<version>-<pom digest>/libs`` and a
marker file says the copy is complete, so every later start skips Maven; a changed pom
resolves into a folder of its own, never under a broker running from the old one. The data directory is
formatted exactly once; its ``meta.properties`` is the source of truth for the cluster id,
because formatting again would need the same id or fail.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from shared.config import Settings
from shared.infra import kafka_secure, processes
from shared.infra.errors import InfraError
from shared.infra.kafka_credentials import Credentials
from shared.infra.prerequisites import require

HERE = Path(__file__).parent
POM = HERE / "kafka-broker.pom.xml"
LOG4J2 = HERE / "log4j2.xml"
JVM_FLAGS = ["-Xms256m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


def data_dir(home: Path) -> Path:
    return home / "kafka-data"


def config_file(home: Path) -> Path:
    """Also the marker that tells our broker apart from any other java process."""
    return home / "kafka.properties"


def ensure_jars(settings: Settings) -> Path:
    """The broker's classpath directory, resolved with Maven only if no complete copy exists."""
    pom = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    root = settings.cache_dir.expanduser().resolve() / f"kafka-{settings.kafka_version}-{pom}"
    libs, complete = root / "libs", root / "COMPLETE"
    if complete.exists():
        return libs
    mvn = require("mvn")
    print(f"infra: resolving Kafka {settings.kafka_version} jars from Maven Central into {libs} "
          "(first run only)", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        work = Path(scratch)
        shutil.copy(POM, work / "pom.xml")  # Maven writes beside its pom; keep the repo clean
        result = subprocess.run(
            [mvn, "-q", "-B", "-Dstyle.color=never", f"-Dkafka.version={settings.kafka_version}",
             "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={work / 'libs'}"],
            cwd=work, capture_output=True, text=True)
        if result.returncode != 0:
            raise InfraError(f"Maven could not resolve Kafka {settings.kafka_version}: "
                             f"{(result.stdout + result.stderr).strip()[-2000:]}")
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(work / "libs", libs)
    complete.write_text(f"{len(list(libs.glob('*.jar')))} jars\n")
    return libs


def recorded_cluster_id(home: Path) -> str | None:
    meta = data_dir(home) / "meta.properties"
    if not meta.exists():
        return None
    fields = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
    return fields.get("cluster.id")


def new_cluster_id() -> str:
    """Kafka's Uuid text form; a leading '-' would be parsed as a CLI flag, so draw again."""
    while (text := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return text


def start(settings: Settings, home: Path, port: int, controller_port: int,
          secure: Credentials | None = None) -> tuple[int, str]:
    """Write the config, format the data dir if new, launch the broker; returns (pid, cluster id).

    ``secure``: SASL/SCRAM listeners and the authorizer (``kafka_secure``), every user of the
    credentials created with the data directory."""
    runtime, libs = java(), ensure_jars(settings)
    config = config_file(home)
    access = (_plain(port, controller_port) if secure is None
              else kafka_secure.listeners(port, controller_port, secure))
    config.touch(mode=0o600)
    os.chmod(config, 0o600)  # the secure listeners' passwords
    config.write_text(access + _properties(data_dir(home), controller_port))
    cluster_id = recorded_cluster_id(home)
    if cluster_id is None:
        cluster_id = new_cluster_id()
        _format(runtime, libs, config, cluster_id,
                kafka_secure.format_arguments(secure) if secure is not None else [])
    logs = settings.logs_dir.resolve()
    pid = processes.spawn(
        [runtime, *JVM_FLAGS, f"-Dlog4j2.configurationFile={LOG4J2}", f"-Dkafka.logs.dir={logs}",
         "-cp", f"{libs}/*", "kafka.Kafka", str(config)],
        logs / "kafka.log", cwd=home)
    return pid, cluster_id


def _format(runtime: str, libs: Path, config: Path, cluster_id: str, extra: list[str]) -> None:
    result = subprocess.run(
        [runtime, f"-Dlog4j2.configurationFile={LOG4J2}", "-cp", f"{libs}/*",
         "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config), *extra],
        capture_output=True, text=True)
    if result.returncode != 0:
        raise InfraError(f"formatting the Kafka data dir failed: {(result.stdout + result.stderr).strip()}")


def java() -> str:
    if java_home := os.environ.get("JAVA_HOME"):
        candidate = Path(java_home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return require("java")


def _plain(port: int, controller_port: int) -> str:
    """Anyone on this host may do anything, and a topic is made by its first use."""
    return f"""listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
auto.create.topics.enable=true
"""


def _properties(data: Path, controller_port: int) -> str:
    """Combined broker+controller on 127.0.0.1 with a static one-voter quorum.

    Internal topics get one partition and replica (defaults are 50 partitions and min ISR 2
    for share state), and the first consumer group joins without the 3 s rebalance delay.
    A broker restarted after SIGKILL must wait for its old registration's session to expire
    before it serves again: 4 s instead of the default 9 s keeps crash-restart tests short.
    """
    return f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
log.dirs={data}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
log.cleaner.dedupe.buffer.size=1048577
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
"""
