"""The package as a user gets it: the wheel built from the checkout, installed into a virtual
environment outside the checkout, and a node run, used and read from there.

``python -m build`` makes the sdist from a copy of the files git tracks or would track (so
nothing built in place, the .so files or ``build/``, can stand in for what is missing), then
the wheel from that sdist, unpacked, in an isolated build environment (so pyproject.toml's
build requirements must suffice), the extensions compiled from their .pyx: the path of
``pip install strom-*.tar.gz``, and a superset of ``pip install .``. The sdist itself is made
without an isolated environment: it runs no Cython, and one environment is enough to check the
build requirements.
The C is compiled at -O0 (setup.py's STROM_QUICK): what is packaged and how it installs and
runs are the same, in a fifth of the build's CPU time (about 30 s instead of 130 s here).

The venv takes its dependencies (pyspark, confluent-kafka, numpy...) from this interpreter's
site-packages (``--system-site-packages``; installing them afresh would download gigabytes),
but that site-packages may hold an editable install of this checkout, whose import finder
answers for any ``strom``, ``broker.*``... the venv lacks. A ``sitecustomize`` in the venv
takes that finder (and any path entry to the checkout) out, so a module missing from the
wheel fails to import there as it would on a machine without the checkout, and
``test_every_package_imports_from_the_venv`` checks where each package came from.

Every command then runs with its working directory outside the checkout and without
PYTHONPATH: ``strom format`` and ``strom start`` (the venv's script), confluent-kafka
producing and consuming (through a consumer group), Spark reading the topic through the
``strom`` DataSource as Spark's Python worker runs it, in the venv's Python (the JVM side is the
checkout's and is tested in tests/spark; a JVM here would cost a second Spark start-up), and
SIGTERM stopping the node.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import uuid
import zipfile

import psutil
import pytest

from engine.checkpoint import read_offset_checkpoint
from strom.cli import COMMANDS
from tests.integration.cluster import (
    _die_with_parent,
    free_ports,
    node_properties,
    render_properties,
    wait_ready,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOT_PACKAGED = {"tests", "bench", "build"}
BUILD_TIMEOUT_S = 900
COMMAND_TIMEOUT_S = 120
READY_TIMEOUT_S = 60
WAIT_S = 60  # for records to be consumed and checkpointed: a bound on a wait, not an assert
RECORDS = 200
PARTITIONS = 2
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

pytestmark = [
    pytest.mark.processes,
    # One worker for this module (the wheel is built once).
    pytest.mark.xdist_group("tests/package/test_wheel.py"),
    pytest.mark.timeout(BUILD_TIMEOUT_S + 600),
]

# Imported first by every interpreter of the venv (after the .pth files of both site dirs).
SITECUSTOMIZE = '''\
"""Test venv: this checkout is not importable here, though the base site-packages installs it
in editable mode."""
import os
import sys

_CHECKOUT = {checkout!r}
sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, "__module__", "").startswith("__editable___strom")]
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _CHECKOUT]
'''

# Run by the venv's Python: the topic read through the ``strom`` DataSource as Spark drives it (the
# JVM side is the same as the checkout's and is tested in tests/spark): the source built from
# the read options, its schema, the reader, its planned partitions, then each partition read by
# a copy of the reader and the partition that went through pickle, as Spark ships them to the
# Python worker that reads them; the Arrow batches it returns become the rows.
SPARK_READ = '''\
import json
import pickle
import sys

import spark.source

log_dir, topic = sys.argv[1], sys.argv[2]
source = spark.source.StromDataSource({"path": log_dir, "subscribe": topic,
                                       "startingOffsets": "earliest", "includeHeaders": "true"})
reader = source.reader(source.schema())
rows = []
for partition in reader.partitions():
    worker = pickle.loads(pickle.dumps(reader))
    for batch in worker.read(pickle.loads(pickle.dumps(partition))):
        rows += batch.to_pylist()
print(json.dumps({
    "source": spark.source.__file__,
    "rows": [[r["topic"], r["partition"], r["offset"], None if r["key"] is None else r["key"].hex(),
              None if r["value"] is None else r["value"].hex(),
              [[h["key"], None if h["value"] is None else h["value"].hex()] for h in r["headers"] or []]]
             for r in rows],
}))
'''


# ---------------------------------------------------------------------------- what the checkout has

def checkout_packages() -> list[str]:
    """Every package under the root (a directory with an __init__.py, below another one),
    but the tests, the benchmarks and build output: what the wheel must hold."""
    found = []

    def walk(directory: str, name: str) -> None:
        found.append(name)
        for entry in sorted(os.listdir(directory)):
            path = os.path.join(directory, entry)
            if "." not in entry and os.path.isfile(os.path.join(path, "__init__.py")):
                walk(path, f"{name}.{entry}")

    for entry in sorted(os.listdir(ROOT)):
        if entry not in NOT_PACKAGED and os.path.isfile(os.path.join(ROOT, entry, "__init__.py")):
            walk(os.path.join(ROOT, entry), entry)
    return found


def expected_files(packages: list[str]) -> set[str]:
    """The wheel paths the checkout's packages call for: their modules, an extension module
    per .pyx, their stubs, .pxd declarations, PEP 561 markers and the message schemas."""
    want = set()
    for package in packages:
        directory = os.path.join(ROOT, *package.split("."))
        prefix = package.replace(".", "/") + "/"
        for entry in os.listdir(directory):
            stem, ext = os.path.splitext(entry)
            if ext in (".py", ".pyi", ".pxd") or entry == "py.typed":
                want.add(prefix + entry)
            elif ext == ".pyx":
                want.add(prefix + stem + EXT_SUFFIX)
    for entry in os.listdir(os.path.join(ROOT, "protocol", "schemas")):
        if entry.endswith(".schema"):
            want.add("protocol/schemas/" + entry)
    return want


def tracked_files() -> list[str]:
    """The files of a fresh clone (plus files not yet committed): git's tracked and
    untracked-but-not-ignored files; without git, the tree less what .gitignore names."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        ignore = shutil.ignore_patterns(".git", "build", "node_modules", "__pycache__", "*.so", "*.c",
                                        "*.html", "*.egg-info", ".*_cache", ".benchmarks")
        files = []
        for directory, dirs, names in os.walk(ROOT):
            skip = ignore(directory, dirs + names)
            dirs[:] = [d for d in dirs if d not in skip]
            files += [os.path.relpath(os.path.join(directory, n), ROOT) for n in names if n not in skip]
        return files


# ---------------------------------------------------------------------------- build and install

def run_logged(cmd: list[str], log_path: str, timeout: float, **kwargs) -> None:
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(cmd)}\n".encode())
        log.flush()
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            timeout=timeout, **kwargs).returncode
    if rc != 0:
        with open(log_path, "rb") as log:
            tail = log.read()[-6000:].decode("utf-8", "replace")
        pytest.fail(f"{' '.join(cmd)} exited {rc}; the end of {log_path}:\n{tail}")


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist of a copy of the checkout and the wheel built from that sdist (see the module
    doc)."""
    base = tmp_path_factory.mktemp("dist")
    source, out = base / "source", base / "dist"
    for name in tracked_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), target)
    env = {**os.environ, "STROM_QUICK": "1"}
    run_logged([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out),
                str(source)], str(base / "build.log"), BUILD_TIMEOUT_S, cwd=str(base), env=env)
    (sdist,) = out.iterdir()
    with tarfile.open(sdist) as tar:
        tar.extractall(base / "unpacked", filter="data")
    (unpacked,) = (base / "unpacked").iterdir()
    run_logged([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(unpacked)],
               str(base / "build.log"), BUILD_TIMEOUT_S, cwd=str(base), env=env)
    built = {p.suffix: str(p) for p in out.iterdir()}
    assert sorted(built) == [".gz", ".whl"], f"python -m build left {sorted(built.values())}"
    return built[".gz"], built[".whl"]


@pytest.fixture(scope="module")
def wheel(dist) -> str:
    return dist[1]


class Venv:
    def __init__(self, path: str) -> None:
        self.path = path
        self.bin = os.path.join(path, "bin")
        self.python = os.path.join(self.bin, "python")
        self.strom = os.path.join(self.bin, "strom")
        self.site = subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_S).stdout.strip()

    def env(self) -> dict[str, str]:
        """This process's environment as a shell with the venv activated would have it: no
        PYTHONPATH (the Spark tests' fixture puts the checkout there)."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")}
        env["VIRTUAL_ENV"] = self.path
        env["PATH"] = self.bin + os.pathsep + env.get("PATH", "")
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = self.python
        return env


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    """A venv outside the checkout with the wheel installed and the checkout unreachable."""
    base = tmp_path_factory.mktemp("venv")
    path = str(base / "env")
    log = str(base / "install.log")
    run_logged([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", path], log,
               COMMAND_TIMEOUT_S)
    env = Venv(path)
    with open(os.path.join(env.site, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(SITECUSTOMIZE.format(checkout=os.path.realpath(ROOT)))
    # The base interpreter's pip, run by the venv's Python, installs into the venv. First the
    # wheel alone (the base site's strom, an editable install, is outside the venv and stays),
    # then again with its dependencies and the spark extra, from no index: each must be satisfied
    # by what the base site has installed.
    pip = [env.python, "-m", "pip", "--disable-pip-version-check", "install"]
    run_logged(pip + ["--no-deps", "--force-reinstall", wheel], log, COMMAND_TIMEOUT_S,
               cwd=str(base), env=env.env())
    run_logged(pip + ["--no-index", f"{wheel}[spark]"], log, COMMAND_TIMEOUT_S, cwd=str(base),
               env=env.env())
    return env


def in_venv(venv: Venv, cwd, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run a command of the venv (``python`` or ``strom``) in ``cwd``; its stdout."""
    done = subprocess.run(list(args), cwd=str(cwd), env=venv.env(), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# ---------------------------------------------------------------------------- the tests

def test_the_sdist_holds_the_sources_the_wheel_is_built_from(dist):
    packages = checkout_packages()
    with tarfile.open(dist[0]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    want = {"setup.py", "pyproject.toml", "README.md"}
    for package in packages:
        directory = os.path.join(ROOT, *package.split("."))
        want |= {f"{package.replace('.', '/')}/{n}" for n in os.listdir(directory)
                 if n.endswith((".py", ".pyx", ".pxd", ".pyi")) or n == "py.typed"}
    want |= {f"protocol/schemas/{n}" for n in os.listdir(os.path.join(ROOT, "protocol", "schemas"))}
    missing = sorted(want - names)
    assert not missing, f"the sdist lacks {missing}"
    assert not [n for n in names if n.endswith((".c", ".so"))], "built files in the sdist"


def test_the_wheel_holds_every_package_its_extensions_stubs_and_schemas(wheel):
    packages = checkout_packages()
    assert {"replication", "broker.groups", "broker.handlers", "ext", "strom"} <= set(packages)
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        entry_points = whl.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
    missing = sorted(expected_files(packages) - names)
    assert not missing, f"the wheel lacks {missing}"
    top = {name.split("/")[0] for name in names}
    assert top - {n for n in top if n.endswith(".dist-info")} == {p for p in packages if "." not in p}
    assert not any(n.endswith((".pyx", ".c")) for n in names), "sources of the extensions"
    assert "strom = strom.cli:main" in entry_points.decode()


def test_every_package_imports_from_the_venv(venv, tmp_path):
    """Each package and extension module of the checkout, imported by the venv's Python in a
    directory outside the checkout, comes from the venv's site-packages."""
    modules = checkout_packages() + [
        os.path.splitext(os.path.relpath(os.path.join(d, n), ROOT))[0].replace(os.sep, ".")
        for d in (os.path.join(ROOT, "ext"), os.path.join(ROOT, "protocol"))
        for n in os.listdir(d) if n.endswith(".pyx")]
    script = ("import importlib, json, sys\n"
              "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))")
    files = json.loads(in_venv(venv, tmp_path, venv.python, "-c", script, *modules))
    site = os.path.realpath(venv.site) + os.sep
    elsewhere = {m: f for m, f in files.items() if not os.path.realpath(f).startswith(site)}
    assert not elsewhere, f"imported from outside {site}: {elsewhere}"
    assert files["ext.batch"].endswith(EXT_SUFFIX)


def test_the_venvs_strom_help_lists_the_commands(venv, tmp_path):
    out = in_venv(venv, tmp_path, venv.strom, "--help")
    for command in COMMANDS:  # the checkout's list: the wheel's command must list every one
        assert re.search(rf"^ {{4}}{re.escape(command)}(\s|$)", out, re.M), (command, out)


def test_a_node_from_the_wheel_serves_clients_and_spark_reads_its_topic(venv, tmp_path):
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    node_dir = tmp_path / "node"
    log_dir = str(node_dir / "data")
    broker_port, controller_port = free_ports(2)
    properties = node_properties(1, broker_port, controller_port, log_dir, {
        "replica.high.watermark.checkpoint.interval.ms": 100,
        "auto.create.topics.enable": False,
    })
    node_dir.mkdir()
    config = str(node_dir / "server.properties")
    with open(config, "w", encoding="utf-8") as f:
        f.write(render_properties(properties))
    node_log = str(node_dir / "node.log")

    out = in_venv(venv, cwd, venv.strom, "format", "--config", config, "--cluster-id",
                  "c3Ryb20td2hlZWwtdGVzdA", "--standalone")
    assert f"Formatted {log_dir}" in out

    with open(node_log, "ab") as log:
        proc = subprocess.Popen(_die_with_parent([venv.strom, "start", "--config", config]),
                                cwd=str(cwd), env=venv.env(), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def log_tail() -> str:
        with open(node_log, "rb") as f:
            return f.read()[-6000:].decode("utf-8", "replace")

    try:
        wait_ready("127.0.0.1", broker_port, 1, time.monotonic() + READY_TIMEOUT_S,
                   alive=lambda: proc.poll() is None)
        # The supervisor and its controller and broker processes run the venv's Python.
        supervisor = psutil.Process(proc.pid)
        workers = supervisor.children()
        assert sorted(w.cmdline()[3] for w in workers) == ["broker", "controller"], log_tail()
        assert {p.cmdline()[0] for p in [supervisor, *workers]} == {venv.python}

        bootstrap = f"127.0.0.1:{broker_port}"
        topic = f"wheel-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        sent_headers = {}  # a delivery report carries no headers
        delivered = []

        def on_delivery(err, msg):
            assert err is None, err
            delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                              sent_headers[msg.key()]))

        for i in range(RECORDS):
            key = f"key-{i}".encode()
            sent_headers[key] = (("n", str(i).encode()),) if i % 3 == 0 else ()
            value = None if i == 7 else f"value-{i}".encode()
            producer.produce(topic, value, key=key, partition=i % PARTITIONS,
                             headers=list(sent_headers[key]) or None, on_delivery=on_delivery)
        assert producer.flush(30) == 0
        assert len(delivered) == RECORDS

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumed = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + WAIT_S
            while len(consumed) < RECORDS and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                    continue
                assert msg.error() is None, msg.error()
                consumed.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                                 tuple(msg.headers() or ())))
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                           timeout=30)
        finally:
            consumer.close()
        assert sorted(consumed) == sorted(delivered)
        ends = {p: max(o for q, o, *_ in delivered if q == p) + 1 for p in range(PARTITIONS)}
        assert {tp.partition: tp.offset for tp in committed} == ends

        # Spark reads committed records: wait for the high watermarks' checkpoint to cover them.
        checkpoint = os.path.join(log_dir, "replication-offset-checkpoint")
        deadline = time.monotonic() + WAIT_S
        while any(read_offset_checkpoint(checkpoint).get((topic, p), -1) < end for p, end in ends.items()):
            assert time.monotonic() < deadline, (read_offset_checkpoint(checkpoint), ends)
            time.sleep(0.1)

        script = tmp_path / "spark_read.py"
        script.write_text(SPARK_READ)
        read = json.loads(in_venv(venv, cwd, venv.python, str(script), log_dir, topic,
                                  timeout=COMMAND_TIMEOUT_S).strip().splitlines()[-1])
        assert os.path.realpath(read["source"]).startswith(os.path.realpath(venv.site) + os.sep)

        def hexed(b):
            return None if b is None else b.hex()

        want = sorted([topic, p, o, hexed(k), hexed(v), [[hk, hexed(hv)] for hk, hv in h]]
                      for p, o, k, v, h in delivered)
        assert sorted(read["rows"]) == want

        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, log_tail()
    except BaseException:
        print(log_tail())
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)
